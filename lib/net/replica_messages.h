// The coordinator <-> replica messages: one struct per message type, each
// field with one meaning. Internal header; see net/message.h for the
// framing every message shares and docs/FORMATS.md for the bytes.
//
//   coordinator -> replica          replica -> coordinator
//   Update                          UpdateReply
//   Clear                           UpdateReply
//   Replicate                       ReplicateAck
//   ReplicateGivenUp                ReplicateAck or ReplicateAckWithDelta
//   Read                            ReadClock, then ReadChunk...
//   ChunkAck, StopFold, KeepFold    (none)
//   Query                           QueryReply
//   Count                           CountReply
//   Repair                          (none: repairs are idempotent and
//                                    re-found by the next read)
//
// Every struct names its MessageType (kType) and encodes and decodes its
// body (after the header, before the checksum): EncodeBody appends it;
// DecodeBody fills a default-constructed struct (whose `elements` may hold
// storage to reuse) from *d, leaving the fields the body omits (those after
// an error status) at their defaults, and returns false on malformed or
// truncated bytes (its allocations bounded by the input).
//
// Thread-safety: value types.

#ifndef BIGSET_LIB_NET_REPLICA_MESSAGES_H_
#define BIGSET_LIB_NET_REPLICA_MESSAGES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bigset/core/clock.h"
#include "bigset/core/delta.h"
#include "bigset/core/element_bounds.h"
#include "bigset/core/element_dots.h"
#include "bigset/core/update_op.h"
#include "bigset/net/transport.h"
#include "net/message_type.h"

namespace bigset {
namespace message_internal {
class BodyReader;
}  // namespace message_internal

namespace msg {

using message_internal::BodyReader;

// Adds and removes elements of `set` (the replica coordinates the write).
struct Update {
  static constexpr MessageType kType = MessageType::kUpdate;
  static constexpr const char* kName = "Update";
  std::string set;
  std::vector<UpdateOp> ops;

  friend bool operator==(const Update&, const Update&) = default;

  void EncodeBody(std::string* dst) const;
  bool DecodeBody(BodyReader* d);
};

// Clears `set` as of `clock` (what the client saw).
struct Clear {
  static constexpr MessageType kType = MessageType::kClear;
  static constexpr const char* kName = "Clear";
  std::string set;
  Clock clock;

  friend bool operator==(const Clear&, const Clear&) = default;

  void EncodeBody(std::string* dst) const;
  bool DecodeBody(BodyReader* d);
};

// The outcome of an Update or Clear: the delta the replica wrote (only when
// `status` is ok).
struct UpdateReply {
  static constexpr MessageType kType = MessageType::kUpdateReply;
  static constexpr const char* kName = "UpdateReply";
  absl::Status status;
  Delta delta;

  friend bool operator==(const UpdateReply&, const UpdateReply&) = default;

  void EncodeBody(std::string* dst) const;
  bool DecodeBody(BodyReader* d);
};

// A coordinated write's delta, for the other replicas to apply. The hot
// path encodes it without this struct (EncodeDeltaMessage).
struct Replicate {
  static constexpr MessageType kType = MessageType::kReplicate;
  static constexpr const char* kName = "Replicate";
  Delta delta;

  friend bool operator==(const Replicate&, const Replicate&) = default;

  void EncodeBody(std::string* dst) const;
  bool DecodeBody(BodyReader* d);
};

// To a replica the write asked to coordinate and then gave up on: apply the
// delta; if it did coordinate the request, answer with its own delta
// (ReplicateAckWithDelta), else never coordinate it.
struct ReplicateGivenUp {
  static constexpr MessageType kType = MessageType::kReplicateGivenUp;
  static constexpr const char* kName = "ReplicateGivenUp";
  Delta delta;

  friend bool operator==(const ReplicateGivenUp&,
                         const ReplicateGivenUp&) = default;

  void EncodeBody(std::string* dst) const;
  bool DecodeBody(BodyReader* d);
};

// A delta a read found missing on a replica.
struct Repair {
  static constexpr MessageType kType = MessageType::kRepair;
  static constexpr const char* kName = "Repair";
  Delta delta;

  friend bool operator==(const Repair&, const Repair&) = default;

  void EncodeBody(std::string* dst) const;
  bool DecodeBody(BodyReader* d);
};

// The outcome of applying a delta, and the node that applied it (the
// receiver, or the node it passed the delta on to), so that a coordinator
// counts each replica once.
struct ReplicateAck {
  static constexpr MessageType kType = MessageType::kReplicateAck;
  static constexpr const char* kName = "ReplicateAck";
  absl::Status status;
  NodeId applied_by = 0;

  friend bool operator==(const ReplicateAck&, const ReplicateAck&) = default;

  void EncodeBody(std::string* dst) const;
  bool DecodeBody(BodyReader* d);
};

// The answer to ReplicateGivenUp by the replica that did coordinate the
// request: its delta.
struct ReplicateAckWithDelta {
  static constexpr MessageType kType = MessageType::kReplicateAckWithDelta;
  static constexpr const char* kName = "ReplicateAckWithDelta";
  Delta delta;

  friend bool operator==(const ReplicateAckWithDelta&,
                         const ReplicateAckWithDelta&) = default;

  void EncodeBody(std::string* dst) const;
  bool DecodeBody(BodyReader* d);
};

// Starts a fold: streams `set`'s elements within `bounds` in chunks of at
// most `batch_size` elements.
struct Read {
  static constexpr MessageType kType = MessageType::kRead;
  static constexpr const char* kName = "Read";
  std::string set;
  ElementBounds bounds;
  uint32_t batch_size = 1000;

  friend bool operator==(const Read&, const Read&) = default;

  void EncodeBody(std::string* dst) const;
  bool DecodeBody(BodyReader* d);
};

// A fold's first answer: the replica's set-clock (when `status` is ok).
struct ReadClock {
  static constexpr MessageType kType = MessageType::kReadClock;
  static constexpr const char* kName = "ReadClock";
  absl::Status status;
  Clock clock;

  friend bool operator==(const ReadClock&, const ReadClock&) = default;

  void EncodeBody(std::string* dst) const;
  bool DecodeBody(BodyReader* d);
};

// One chunk of a fold: its sequence number (from 0), whether it is the
// fold's last, and its elements. The hot path encodes and parses it without
// this struct (EncodeReadChunk, ParseReadChunkBody).
struct ReadChunk {
  static constexpr MessageType kType = MessageType::kReadChunk;
  static constexpr const char* kName = "ReadChunk";
  uint64_t seq = 0;
  bool last = false;
  std::vector<ElementDots> elements;

  friend bool operator==(const ReadChunk&, const ReadChunk&) = default;

  void EncodeBody(std::string* dst) const;
  bool DecodeBody(BodyReader* d);
};

// Asks for a fold's chunk `seq`: the next one (the chunks before it
// arrived), or the last one sent again.
struct ChunkAck {
  static constexpr MessageType kType = MessageType::kChunkAck;
  static constexpr const char* kName = "ChunkAck";
  uint64_t seq = 0;

  friend bool operator==(const ChunkAck&, const ChunkAck&) = default;

  void EncodeBody(std::string* dst) const;
  bool DecodeBody(BodyReader* d);
};

// Ends a fold early.
struct StopFold {
  static constexpr MessageType kType = MessageType::kStopFold;
  static constexpr const char* kName = "StopFold";

  friend bool operator==(const StopFold&, const StopFold&) = default;

  void EncodeBody(std::string*) const {}
  bool DecodeBody(BodyReader*) { return true; }
};

// Keeps an idle fold from expiring.
struct KeepFold {
  static constexpr MessageType kType = MessageType::kKeepFold;
  static constexpr const char* kName = "KeepFold";

  friend bool operator==(const KeepFold&, const KeepFold&) = default;

  void EncodeBody(std::string*) const {}
  bool DecodeBody(BodyReader*) { return true; }
};

// Asks which of `elements` the replica's `set` holds.
struct Query {
  static constexpr MessageType kType = MessageType::kQuery;
  static constexpr const char* kName = "Query";
  std::string set;
  std::vector<std::string> elements;

  friend bool operator==(const Query&, const Query&) = default;

  void EncodeBody(std::string* dst) const;
  bool DecodeBody(BodyReader* d);
};

// The set-clock and the dots of the elements asked about that the replica
// holds (when `status` is ok).
struct QueryReply {
  static constexpr MessageType kType = MessageType::kQueryReply;
  static constexpr const char* kName = "QueryReply";
  absl::Status status;
  Clock clock;
  std::vector<ElementDots> elements;

  friend bool operator==(const QueryReply&, const QueryReply&) = default;

  void EncodeBody(std::string* dst) const;
  bool DecodeBody(BodyReader* d);
};

// Asks for the replica's count of `set`.
struct Count {
  static constexpr MessageType kType = MessageType::kCount;
  static constexpr const char* kName = "Count";
  std::string set;

  friend bool operator==(const Count&, const Count&) = default;

  void EncodeBody(std::string* dst) const;
  bool DecodeBody(BodyReader* d);
};

// Whether the replica holds the set, its count, and its set and tombstone
// digests (see Replica::CountSummary); the rest only when `status` is ok.
struct CountReply {
  static constexpr MessageType kType = MessageType::kCountReply;
  static constexpr const char* kName = "CountReply";
  absl::Status status;
  bool found = false;
  uint64_t count = 0;
  uint64_t set_digest = 0;
  uint64_t tombstone_digest = 0;

  friend bool operator==(const CountReply&, const CountReply&) = default;

  void EncodeBody(std::string* dst) const;
  bool DecodeBody(BodyReader* d);
};

}  // namespace msg
}  // namespace bigset

#endif  // BIGSET_LIB_NET_REPLICA_MESSAGES_H_
