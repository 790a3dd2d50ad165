// The wire format of every message between nodes: the one codec of the
// cluster's protocols (docs/FORMATS.md, "Messages"). Internal header: an
// embedder's transport only moves the bytes, and node.h is the API.
//
//   coordinator -> replica          replica -> coordinator
//   kUpdate (set, ops)              kUpdateReply (status, delta)
//   kClear (set, clock)             kUpdateReply (status, delta)
//   kReplicate (delta)              kReplicateAck (status, applied by:
//                                    the node that applied it, another
//                                    than the sender if it passed it on)
//   kReplicateGivenUp (delta)       kReplicateAck (status), or
//                                   kReplicateAckWithDelta (delta)
//     (to a replica the write asked to coordinate and then gave up on: apply
//     the delta; if you did coordinate the request, answer with your delta,
//     else never coordinate it)
//   kRead (set, bounds, batch)      kReadClock (status, clock)
//                                   kReadChunk (seq, done, elements)
//   kChunkAck (seq)
//   kStopFold
//   kKeepFold                       (none: keeps an idle fold from expiring)
//   kQuery (set, elements)          kQueryReply (status, clock, elements)
//   kCount (set)                    kCountReply (status, found, count, set
//                                    and tombstone digests: see
//                                    Replica::CountSummary)
//   kRepair (delta)                 (none: repairs are idempotent and
//                                    re-found by the next read)
//
//   hand-off sender -> receiver     receiver -> sender
//   kTransferChunk (epoch, set,     kTransferAck (status, index, seq,
//     index, seq, last/end, clock     incarnation: changes when the
//     on a set's last chunk,          receiver restarts)
//     elements)
//   kHandoffDelta (delta)           kHandoffDeltaAck (status, applied by)
//   kHandoffDone (epoch, from, to,  kHandoffDoneAck (status, epoch, from,
//     episode, supplement)            to, the receiver's membership state)
//     (a proposal: the run is complete; take the sender's place)
//   kRingEpoch (epoch)              (none: tells a node the sender's ring
//                                    epoch, when it asked about a partition
//                                    the sender no longer holds)
//
//   membership, either way          reply, if either side was behind
//   kMembership (epoch, versions,   kMembership (the same, answering)
//     states)
//
//   anti-entropy initiator -> peer  peer -> initiator
//   kAeDigest (digest, buckets)     kAeDigestReply (status, equal,
//                                     bucket digests unless equal)
//   kAeSets (bucket ids, the        kAeSetsReply (status, the peer's
//     initiator's set summaries       summaries, with clocks, of the sets
//     in them)                        that differ)
//   kAePull (set, dots)             (none: the peer pushes those dots)
//   either way:
//   kAePush (set, seq, done, dots   kAePushAck (status, seq)
//     on the last chunk, elements)
//
// Every message starts with the same header: format version, type, request
// id (matches replies to requests) and ring partition (the replica it is
// about), and ends with a CRC32C of everything before it, so that a message
// truncated or corrupted in flight is rejected rather than misread. The
// framing is written by EncodeHeader/FinishMessage and read by ParseHeader
// only; nothing else in the library reads raw message bytes. Decoding never
// reads out of bounds, bounds every allocation by the input's size, and
// returns an error for malformed, truncated or trailing bytes.
//
// Thread-safety: value types and stateless functions.

#ifndef BIGSET_LIB_NET_MESSAGE_H_
#define BIGSET_LIB_NET_MESSAGE_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bigset/core/clock.h"
#include "bigset/core/delta.h"
#include "bigset/core/element_bounds.h"
#include "bigset/core/element_dots.h"
#include "bigset/core/set_summary.h"
#include "bigset/core/update_op.h"
#include "bigset/net/transport.h"

namespace bigset {

enum class MessageType : uint8_t {
  kUpdate = 1,
  kUpdateReply = 2,
  kReplicate = 3,
  kReplicateAck = 4,
  kRead = 5,
  kReadClock = 6,
  kReadChunk = 7,
  kChunkAck = 8,
  kStopFold = 9,
  kQuery = 10,
  kQueryReply = 11,
  kRepair = 12,
  kKeepFold = 13,
  kClear = 14,
  kReplicateGivenUp = 15,
  kReplicateAckWithDelta = 16,
  kTransferChunk = 17,
  kTransferAck = 18,
  kHandoffDelta = 19,
  kHandoffDeltaAck = 20,
  kHandoffDone = 21,
  kHandoffDoneAck = 22,
  kRingEpoch = 23,
  kAeDigest = 24,
  kAeDigestReply = 25,
  kAeSets = 26,
  kAeSetsReply = 27,
  kAePull = 28,
  kAePush = 29,
  kAePushAck = 30,
  kMembership = 31,
  kCount = 32,
  kCountReply = 33,
};
inline constexpr uint8_t kMaxMessageType = 33;

const char* MessageTypeName(MessageType type);

// Version 2: every message ends with a CRC32C of all its bytes before it.
// Version 3: membership by node-authored states (kMembership, episodes in
// proposals), incarnations in transfer acks, appliers in delta acks.
// Version 4: set streams (transfer and push acknowledgements) answer
// Aborted, and only Aborted, when the receiver lost the stream's state
// (cluster/set_stream.h).
inline constexpr uint8_t kMessageFormatVersion = 4;

// One partition a node serves, in that node's own membership state (see
// cluster/membership.h). Only the node itself changes its state.
struct ServeEntry {
  uint32_t partition = 0;
  // The node's state version when it began serving the partition: names
  // this episode of serving it (a node may serve, leave and serve again).
  uint64_t since = 0;
  // The node whose place it took by a hand-off, and that node's episode
  // (0: none, an original member).
  NodeId took_from = 0;
  uint64_t took_since = 0;
  // The receiver this node hands the partition over to (set before it
  // proposes the completion, so that it never pairs with two receivers);
  // 0: none.
  NodeId handing_to = 0;
  // The node no longer serves the partition in this episode: it handed over
  // to `handing_to`. Kept while the node it took the place of may still
  // need to learn that its place was taken (see cluster/membership.h).
  bool departed = false;

  friend bool operator==(const ServeEntry&, const ServeEntry&) = default;
};

// A node's membership state: a version it increases on every change, and
// its entries by (partition, since), ascending: at most one that is not
// departed per partition.
struct NodeServing {
  NodeId node = 0;
  uint64_t version = 0;
  std::vector<ServeEntry> entries;

  friend bool operator==(const NodeServing&, const NodeServing&) = default;
};

// The fixed part of every message.
struct MessageHeader {
  MessageType type = MessageType::kUpdate;
  uint64_t request_id = 0;
  uint32_t partition = 0;
};

// Appends the header of a message to *dst. The message starts at `start`
// in *dst; once its body is appended, FinishMessage appends its checksum.
void EncodeHeader(const MessageHeader& header, std::string* dst);
void FinishMessage(size_t start, std::string* dst);
// Checks the checksum of message `in`, parses its header into *header and
// points *body at the rest (without the checksum). DataLoss for a bad
// checksum or malformed bytes, InvalidArgument for another format version.
absl::Status ParseHeader(std::string_view in, MessageHeader* header,
                         std::string_view* body);

// One message, for the protocols' less frequent messages. Only the fields of
// its type are encoded; the others keep their defaults after decoding.
struct Message {
  MessageHeader header;

  // kUpdateReply, kReplicateAck, kReadClock, kQueryReply.
  absl::Status status;
  // kUpdate, kClear, kRead, kQuery.
  std::string set;
  // kUpdate.
  std::vector<UpdateOp> ops;
  // kUpdateReply, kReplicate, kReplicateGivenUp, kRepair,
  // kReplicateAckWithDelta.
  Delta delta;
  // kRead: element bounds and chunk size (elements).
  ElementBounds bounds;
  uint32_t batch_size = 1000;
  // kReadClock, kQueryReply; kClear: the clock to clear.
  Clock clock;
  // kReadChunk, kChunkAck: chunk sequence number (from 0).
  uint64_t seq = 0;
  // kReadChunk: last chunk of the fold.
  bool done = false;
  // kReadChunk, kQueryReply.
  std::vector<ElementDots> elements;
  // kQuery: the elements asked about.
  std::vector<std::string> query;
  // kTransferChunk, kHandoffDone(Ack), kRingEpoch: the sender's ring epoch.
  uint64_t epoch = 0;
  // kTransferChunk, kTransferAck: the set's position in the transfer (from
  // 0; `seq` numbers the chunks within the set). kTransferChunk: `done`
  // marks the set's last chunk (which carries the sender's set-clock), and
  // `end` a chunk after every set (no set, no elements).
  uint64_t index = 0;
  bool end = false;
  // kHandoffDone(Ack): the transfer's sender and receiver.
  NodeId from_node = 0;
  NodeId to_node = 0;
  // kHandoffDone: the sender's episode of serving the partition, and
  // whether the run only adds data to a receiver that already serves (the
  // sender's place was taken earlier; see cluster/handoff.h).
  uint64_t episode = 0;
  bool supplement = false;
  // kTransferAck: the receiver's incarnation (a new one at every open), so
  // that a sender learns that chunks acknowledged before may be lost.
  uint64_t incarnation = 0;
  // kMembership: the state version the sender knows of each node.
  std::vector<std::pair<NodeId, uint64_t>> versions;
  // kMembership, kHandoffDoneAck: node states.
  std::vector<NodeServing> states;
  // kReplicateAck, kHandoffDeltaAck: the node that applied the delta.
  NodeId applied_by = 0;
  // kAeDigest: the partition digest, and its number of buckets.
  uint64_t digest = 0;
  uint64_t bucket_count = 0;
  // kAeDigestReply: whether the partition digests were equal, and if not
  // the bucket digests.
  bool digests_equal = false;
  std::vector<uint64_t> bucket_digests;
  // kAeSets: the ids of the buckets that differ.
  std::vector<uint64_t> bucket_ids;
  // kAeSets (without clocks), kAeSetsReply (with clocks).
  std::vector<SetSummary> summaries;
  // kCountReply: whether the replica holds the set, its count, its set
  // digest (in `digest`) and tombstone digest.
  bool found = false;
  uint64_t count = 0;
  uint64_t tombstone_digest = 0;

  MessageType type() const { return header.type; }

  void EncodeTo(std::string* dst) const;
  std::string Encode() const {
    std::string s;
    EncodeTo(&s);
    return s;
  }
  static absl::StatusOr<Message> Decode(std::string_view in);
  // The same into *out, which it replaces whole (also on error, when *out
  // is left in some valid state), reusing the capacity of out->elements:
  // a receiver of many chunks decodes them without allocating per element.
  static absl::Status DecodeInto(std::string_view in, Message* out);
};

// Node states as kMembership carries them (also the node metadata's
// encoding of them): appends to *dst, and decodes exactly `in`
// (DataLoss for anything else).
void EncodeNodeStates(std::span<const NodeServing> states, std::string* dst);
absl::Status DecodeNodeStates(std::string_view in,
                              std::vector<NodeServing>* out);

// ---- Hot paths: the bulk of the traffic, without a Message per message.

// kReadChunk: sequence number, last-chunk flag, then the elements.
void EncodeReadChunk(const MessageHeader& header, uint64_t seq, bool done,
                     std::span<const ElementDots> elements, std::string* dst);
// Parses a kReadChunk body (after ParseHeader); *elements points at its
// still encoded elements (see DecodeChunkElements).
absl::Status ParseReadChunkBody(std::string_view body, uint64_t* seq,
                                bool* done, std::string_view* elements);
// Decodes the elements of a chunk into *out, reusing the strings and
// vectors already in it (a steady stream allocates nothing). On error *out
// is unspecified.
absl::Status DecodeChunkElements(std::string_view in,
                                 std::vector<ElementDots>* out);

// kReplicate and kRepair: the encoded Delta, length-prefixed.
void EncodeDeltaMessage(const MessageHeader& header, const Delta& delta,
                        std::string* dst);
// Points *delta at the encoded Delta of a kReplicate or kRepair body (see
// Delta::DecodeInto).
absl::Status ParseDeltaBody(std::string_view body, std::string_view* delta);

// Acknowledgements of deltas (kReplicateAck, kHandoffDeltaAck): a status and
// the node that applied the delta (the sender, or the node it passed the
// delta on to), so that a coordinator counts each replica once.
void EncodeStatusReply(const MessageHeader& header, const absl::Status& status,
                       NodeId applied_by, std::string* dst);
absl::Status ParseStatusBody(std::string_view body, absl::Status* status,
                             NodeId* applied_by);

}  // namespace bigset

#endif  // BIGSET_LIB_NET_MESSAGE_H_
