// The parts of AntiEntropy its source files share (anti_entropy.cc: rounds
// and hints; anti_entropy_push.cc: pushes, both sides). Internal header.

#ifndef BIGSET_LIB_CLUSTER_ANTI_ENTROPY_INTERNAL_H_
#define BIGSET_LIB_CLUSTER_ANTI_ENTROPY_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bigset/replica/set_reader.h"
#include "cluster/anti_entropy.h"
#include "cluster/set_stream_window.h"

namespace bigset {

struct AntiEntropy::Push {
  uint64_t id = 0;
  NodeId peer = 0;
  uint32_t partition = 0;
  std::string set;
  Clock dots;
  std::unique_ptr<SetReader> reader;
  // What the reader fills and what a chunk is built from, kept from chunk
  // to chunk: their strings and vectors keep their capacity, so a steady
  // push allocates nothing per element.
  std::vector<ElementDots> batch;
  std::vector<ElementDots> chunk;
  // The chunk awaiting its acknowledgement (one at a time: pushes are
  // rate limited), and its keys.
  SetStreamWindow window{1};
  size_t in_flight_keys = 0;
  bool waiting_tokens = false;
  uint64_t sent_at = 0;
  int retries = 0;
  int restarts = 0;
};

namespace anti_entropy_internal {

// Buckets and set summaries one round looks at: bounds its messages and
// the memory that builds them; what is left is found by later rounds. At
// most kMaxRevisitBuckets of a round's buckets are revisited ones, so that
// the others keep being looked at too.
inline constexpr size_t kMaxBucketsPerRound = 64;
inline constexpr size_t kMaxRevisitBuckets = 48;
inline constexpr size_t kMaxSummaryBytes = 512 << 10;
// Pushes running at once, and queued.
inline constexpr size_t kMaxRunningPushes = 4;
inline constexpr size_t kMaxQueuedPushes = 1024;
// Receiver states kept, and how long an idle one lives.
inline constexpr size_t kMaxIncoming = 64;
// Pushes remembered as received whole.
inline constexpr size_t kMaxFinishedPushes = 256;
// Differences awaiting their second sighting, and how many waves of rounds
// one lives unseen.
inline constexpr size_t kMaxSuspects = 4096;
inline constexpr uint64_t kSuspectWaves = 8;
// Retransmissions of one chunk before the push is dropped (the next round
// finds the difference again).
inline constexpr int kMaxRetries = 30;
inline constexpr int kMaxRestarts = 5;
// Sends of one hint before it is dropped.
inline constexpr int kMaxHintSends = 20;
// Digest rounds started for one dropped hint's partition and peer before
// it is left to the periodic rounds (the peer never answered).
inline constexpr int kMaxDueRounds = 6;

inline uint64_t SplitMix(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline size_t ChunkBytes(const ElementDots& e) {
  return e.element.size() + 16 * e.dots.size() + 4;
}

// About the bytes of a summary in a message.
inline size_t SummaryBytes(const SetSummary& s) {
  return s.set.size() + 32 + (s.clock.empty() ? 0 : s.clock.Encode().size());
}

}  // namespace anti_entropy_internal
}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_ANTI_ENTROPY_INTERNAL_H_
