// SetStreamReceiver: the receiving side of a set stream, the one protocol
// by which a node sends another the elements of sets in acknowledged
// chunks. Hand-off transfers (kTransferChunk: a partition's sets, one after
// another) and anti-entropy pushes (kAePush: one set's dots) both receive
// through it. Internal header.
//
// A stream is named by its sender and the sender's id for it (a request
// id, never reused). Its sets are numbered from 0 by `index` (a one-set
// stream sends index 0 only) and a set's chunks by `seq` from 0; the last
// chunk of a set carries the sender's set-clock. The receiver applies a
// set's chunks in order (Replica::ApplyTransferChunk, then
// Replica::FinishTransfer on the last) and answers each with a status of
// set_stream.h's vocabulary, or not at all:
//
//   - a chunk applied, or applied before (a duplicate): OK;
//   - seq 0 of a set after the current one starts that set (a fresh
//     tracker); the first set of a stream starts the same way;
//   - any other chunk of a set the receiver has no state for (it
//     restarted, expired or evicted the state): Aborted, and the sender
//     sends the set again from a new snapshot under a new index or id;
//   - a chunk past a gap (an earlier one lost or late: a sender may keep
//     several in flight), or of a set before the current one: no answer;
//     the sender sends every unacknowledged chunk again (go-back-N). If the
//     chunks past the gap come again kGapRounds times over and the gap is
//     never filled, the state is one the sender no longer follows (it was
//     lost, and a late duplicate of the set's first chunk started it
//     again): Aborted, and the state is dropped;
//   - a chunk naming another set than the current one at its index:
//     Aborted, and the state is dropped;
//   - no replica of the partition here: Unavailable (later, or never);
//   - a set of another partition: InvalidArgument; the replica's own error
//     as it returned it (the state is dropped: the next chunk is Aborted);
//   - any chunk of a stream that Finish() ended: OK (a retransmission).
//
// The states are bounded (the idlest is evicted; its sender restarts the
// set) and expire when idle (Expire), so a sender that goes away costs
// nothing for long.
//
// Thread-safety: not thread-safe; the owner's event loop calls it.

#ifndef BIGSET_LIB_CLUSTER_SET_STREAM_RECEIVER_H_
#define BIGSET_LIB_CLUSTER_SET_STREAM_RECEIVER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "bigset/core/clock.h"
#include "bigset/core/element_dots.h"
#include "bigset/net/transport.h"
#include "bigset/replica/replica.h"
#include "net/message.h"

namespace bigset {

// One chunk of a set stream, as its message carried it.
struct SetStreamChunk {
  NodeId from = 0;
  uint64_t stream = 0;  // The sender's id of the stream.
  uint32_t partition = 0;
  uint64_t index = 0;  // The set's position in the stream, from 0.
  uint64_t seq = 0;    // The chunk's position in the set, from 0.
  std::string_view set;
  // The set's last chunk; `clock` is then the sender's set-clock.
  bool last = false;
  const Clock* clock = nullptr;
  std::span<const ElementDots> elements;

  // The chunk a message carried (a transfer chunk or a push: its seq, set,
  // last and elements) from `from` under `header`, of the set at `index`
  // whose set-clock, on the last chunk, is `clock`.
  template <typename Message>
  static SetStreamChunk Of(NodeId from, const MessageHeader& header,
                           uint64_t index, const Clock* clock,
                           const Message& m) {
    return SetStreamChunk{.from = from,
                          .stream = header.request_id,
                          .partition = header.partition,
                          .index = index,
                          .seq = m.seq,
                          .set = m.set,
                          .last = m.last,
                          .clock = clock,
                          .elements = m.elements};
  }
};

class SetStreamReceiver {
 public:
  struct Limits {
    // Stream states kept at once; beyond, the idlest is dropped.
    size_t max_streams = 64;
    // Streams remembered as ended (Finish), for retransmissions.
    size_t max_finished = 256;
  };
  // What Receive did, for the caller's counters.
  struct Received {
    // The answer to send; none for a chunk past a gap or of an earlier set.
    std::optional<absl::Status> answer;
    // Keys applied now (0 for a duplicate or an error).
    size_t keys = 0;
    // The chunk ended its set (applied now, with the set-clock).
    bool set_done = false;
  };

  explicit SetStreamReceiver(Limits limits) : limits_(limits) {}

  // Applies `chunk` to `replica` by the rules above. `set_partition` is the
  // partition the ring places chunk.set in (checked against
  // chunk.partition). `now` (micros) marks the stream active. A null
  // `replica` (none of the partition here) answers Unavailable, except to
  // a stream that ended. REQUIRES: chunk.clock != nullptr if chunk.last.
  Received Receive(const SetStreamChunk& chunk, uint32_t set_partition,
                   Replica* replica, uint64_t now);

  // Ends stream (from, stream) of `partition`: its state is dropped and its
  // chunks are answered OK from now on (bounded: a stream forgotten is sent
  // again by its sender). Idempotent.
  void Finish(NodeId from, uint64_t stream, uint32_t partition);
  // The partition of a stream Finish ended, if still remembered.
  std::optional<uint32_t> FinishedPartition(NodeId from, uint64_t stream) const;

  // Forgets every stream of `partition`, in progress or ended: its replica
  // goes away. A state must never outlive the replica it applied chunks to:
  // its tracker lists dots that replica stored, and a set's last chunk
  // applied to another replica under it would make that replica's clock
  // claim dots it never stored (elements taken for removed). The next chunk
  // of such a stream is answered Aborted.
  void ForgetPartition(uint32_t partition);

  // Drops the states idle for `idle_micros` or longer (a clock that went
  // back expires nothing until it passes the last activity again).
  void Expire(uint64_t now, uint64_t idle_micros);
  // Drops every state (not the ended streams).
  void Clear() { streams_.clear(); }

  size_t size() const { return streams_.size(); }
  bool empty() const { return streams_.empty(); }

  // A stream being received, for status reports.
  struct View {
    NodeId from = 0;
    uint64_t stream = 0;
    uint32_t partition = 0;
    uint64_t index = 0;
    std::string_view set;
    uint64_t last_active = 0;
  };
  template <typename F>
  void ForEach(F&& f) const {
    for (const auto& [key, s] : streams_) {
      f(View{key.first, key.second, s.partition, s.index, s.set,
             s.last_active});
    }
  }

 private:
  using Key = std::pair<NodeId, uint64_t>;
  // Retransmissions of the chunks past a gap (each of them, on average)
  // before the state is taken for one its sender does not follow.
  static constexpr uint64_t kGapRounds = 3;

  struct State {
    uint32_t partition = 0;
    uint64_t index = 0;
    std::string set;
    uint64_t next_seq = 0;
    // The chunks seen past the gap since the last one applied: their range,
    // and how many came again.
    uint64_t gap_low = 0;
    uint64_t gap_high = 0;
    uint64_t gap_repeats = 0;
    Clock tracker;  // Every dot of the set sent so far (FinishTransfer).
    uint64_t last_active = 0;
  };

  // A fresh state for the chunk's set, evicting the idlest when full.
  State& Start(const Key& key, const SetStreamChunk& chunk, uint64_t now);
  Received Apply(const Key& key, State& state, const SetStreamChunk& chunk,
                 Replica* replica);
  // A chunk past the gap: false once the gap is taken for one never filled.
  static bool NotePastGap(State& state, uint64_t seq);

  Limits limits_;
  std::map<Key, State> streams_;
  std::map<Key, uint32_t> finished_;
  std::deque<Key> finished_order_;  // Oldest first: the bound's victims.
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_SET_STREAM_RECEIVER_H_
