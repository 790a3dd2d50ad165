// The anti-entropy messages: digest rounds, set summaries, pulls and
// pushes; one struct per message type, each field with one meaning.
// Internal header; see net/message.h for the framing and docs/FORMATS.md
// for the bytes.
//
//   initiator -> peer               peer -> initiator
//   AeDigest                        AeDigestReply
//   AeSets                          AeSetsReply
//   AePull                          (none: the peer pushes those dots)
//   either way:
//   AePush                          AePushAck
//
// Every struct defines its body once, by Fields(archive, struct) (see
// net/replica_messages.h and net/message_archive.h).
//
// Thread-safety: value types.

#ifndef BIGSET_LIB_NET_ANTI_ENTROPY_MESSAGES_H_
#define BIGSET_LIB_NET_ANTI_ENTROPY_MESSAGES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bigset/core/clock.h"
#include "bigset/core/element_dots.h"
#include "bigset/core/set_summary.h"
#include "net/message_archive.h"
#include "net/message_type.h"

namespace bigset {
namespace message_internal {

// Set summaries: Seq of (String set, Fixed64 digest, Fixed64 keys digest,
// Bool tombstone empty, and with clocks Clock clock).
template <typename Ar, typename Summaries>
bool SetSummaries(Ar& ar, Summaries& summaries, bool with_clocks) {
  return ar.Seq(summaries, 18, [&ar, with_clocks](auto& s) {
    return ar.String(s.set) && ar.Fixed64(s.digest) &&
           ar.Fixed64(s.keys_digest) && ar.Bool(s.tombstone_empty) &&
           (!with_clocks || ar.Clock(s.clock));
  });
}

}  // namespace message_internal

namespace msg {

// Starts a round: the initiator's partition digest and its number of
// buckets.
struct AeDigest {
  static constexpr MessageType kType = MessageType::kAeDigest;
  uint64_t digest = 0;
  uint64_t bucket_count = 0;

  friend bool operator==(const AeDigest&, const AeDigest&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    return ar.Fixed64(m.digest) && ar.Varint(m.bucket_count);
  }
};

// Whether the partition digests were equal, and if not the peer's bucket
// digests.
struct AeDigestReply {
  static constexpr MessageType kType = MessageType::kAeDigestReply;
  absl::Status status;
  bool digests_equal = false;
  std::vector<uint64_t> bucket_digests;

  friend bool operator==(const AeDigestReply&, const AeDigestReply&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    return ar.Status(m.status) && ar.Bool(m.digests_equal) &&
           ar.Seq(m.bucket_digests, 8,
                  [&ar](auto& digest) { return ar.Fixed64(digest); });
  }
};

// The ids of the buckets that differ, and the initiator's summaries
// (without clocks) of the sets in them.
struct AeSets {
  static constexpr MessageType kType = MessageType::kAeSets;
  std::vector<uint64_t> bucket_ids;
  std::vector<SetSummary> summaries;

  friend bool operator==(const AeSets&, const AeSets&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    return ar.Seq(m.bucket_ids, 1, [&ar](auto& id) { return ar.Varint(id); }) &&
           message_internal::SetSummaries(ar, m.summaries,
                                          /*with_clocks=*/false);
  }
};

// The peer's summaries, with clocks, of the sets that differ.
struct AeSetsReply {
  static constexpr MessageType kType = MessageType::kAeSetsReply;
  absl::Status status;
  std::vector<SetSummary> summaries;

  friend bool operator==(const AeSetsReply&, const AeSetsReply&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    return ar.Status(m.status) &&
           message_internal::SetSummaries(ar, m.summaries,
                                          /*with_clocks=*/true);
  }
};

// Asks the peer to push the dots of `set` in `dots` (which the sender
// lacks).
struct AePull {
  static constexpr MessageType kType = MessageType::kAePull;
  std::string set;
  Clock dots;

  friend bool operator==(const AePull&, const AePull&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    return ar.String(m.set) && ar.Clock(m.dots);
  }
};

// One chunk of a push (a set stream: cluster/set_stream.h): its sequence
// number within the set (from 0), and on the set's last chunk the dots
// pushed (the receiver takes those of them without a key sent for removed
// at the sender: never the sender's whole set-clock, only what it read).
struct AePush {
  static constexpr MessageType kType = MessageType::kAePush;
  std::string set;
  uint64_t seq = 0;
  bool last = false;
  Clock dots;
  std::vector<ElementDots> elements;

  friend bool operator==(const AePush&, const AePush&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    return ar.String(m.set) && ar.Varint(m.seq) && ar.Bool(m.last) &&
           (!m.last || ar.Clock(m.dots)) && ar.Elements(m.elements);
  }
};

// Acknowledges a push's chunks up to `seq`, or says why not.
struct AePushAck {
  static constexpr MessageType kType = MessageType::kAePushAck;
  absl::Status status;
  uint64_t seq = 0;

  friend bool operator==(const AePushAck&, const AePushAck&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    return ar.Status(m.status) && ar.Varint(m.seq);
  }
};

}  // namespace msg
}  // namespace bigset

#endif  // BIGSET_LIB_NET_ANTI_ENTROPY_MESSAGES_H_
