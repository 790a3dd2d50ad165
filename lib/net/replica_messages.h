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
// Every struct names its MessageType (kType) and defines its body (after
// the header, before the checksum) once, by Fields(archive, struct): the
// fields in wire order, which a BodyWriter appends and a BodyReader reads
// back (net/message_archive.h). Decoding fills a default-constructed struct
// (whose `elements` may hold storage to reuse), leaves the fields the body
// omits (those after an error status) at their defaults, and fails on
// malformed or truncated bytes (its allocations bounded by the input).
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
#include "net/message_archive.h"
#include "net/message_type.h"
#include "net/shared_bodies.h"

namespace bigset {
namespace msg {

using message_internal::kMinDotBytes;
using message_internal::kMinStringBytes;
using message_internal::kMinUpdateOpBytes;

// Adds and removes elements of `set` (the replica coordinates the write).
struct Update {
  static constexpr MessageType kType = MessageType::kUpdate;
  std::string set;
  std::vector<UpdateOp> ops;

  friend bool operator==(const Update&, const Update&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    return ar.String(m.set) &&
           ar.Seq(m.ops, kMinUpdateOpBytes, [&ar](auto& op) {
             // The flags byte: bit 0 add (else remove), bit 1 the context
             // is the replica's own.
             bool add = op.kind == UpdateOp::Kind::kAdd;
             bool from_replica = op.context_from_replica;
             if (!ar.Bits(add, from_replica)) return false;
             if constexpr (Ar::kReading) {
               op.kind = add ? UpdateOp::Kind::kAdd : UpdateOp::Kind::kRemove;
               op.context_from_replica = from_replica;
             }
             return ar.String(op.element) &&
                    ar.Seq(op.context, kMinDotBytes,
                           [&ar](auto& d) { return ar.Dot(d); });
           });
  }
};

// Clears `set` as of `clock` (what the client saw).
struct Clear {
  static constexpr MessageType kType = MessageType::kClear;
  std::string set;
  Clock clock;

  friend bool operator==(const Clear&, const Clear&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    return ar.String(m.set) && ar.Clock(m.clock);
  }
};

// The outcome of an Update or Clear: the delta the replica wrote (only when
// `status` is ok).
struct UpdateReply {
  static constexpr MessageType kType = MessageType::kUpdateReply;
  absl::Status status;
  Delta delta;

  friend bool operator==(const UpdateReply&, const UpdateReply&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    return ar.Status(m.status) && (!m.status.ok() || ar.Delta(m.delta));
  }
};

// A coordinated write's delta, for the other replicas to apply.
using Replicate = DeltaBody<MessageType::kReplicate>;

// To a replica the write asked to coordinate and then gave up on: apply the
// delta; if it did coordinate the request, answer with its own delta
// (ReplicateAckWithDelta), else never coordinate it.
using ReplicateGivenUp = DeltaBody<MessageType::kReplicateGivenUp>;

// A delta a read found missing on a replica.
using Repair = DeltaBody<MessageType::kRepair>;

// The outcome of applying a delta, and the node that applied it (the
// receiver, or the node it passed the delta on to), so that a coordinator
// counts each replica once.
using ReplicateAck = AppliedBody<MessageType::kReplicateAck>;

// The answer to ReplicateGivenUp by the replica that did coordinate the
// request: its delta.
using ReplicateAckWithDelta = DeltaBody<MessageType::kReplicateAckWithDelta>;

// Starts a fold: streams `set`'s elements within `bounds` in chunks of at
// most `batch_size` elements.
struct Read {
  static constexpr MessageType kType = MessageType::kRead;
  std::string set;
  ElementBounds bounds;
  uint32_t batch_size = 1000;

  friend bool operator==(const Read&, const Read&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    return ar.String(m.set) && ar.Bounds(m.bounds, m.batch_size);
  }
};

// A fold's first answer: the replica's set-clock (when `status` is ok).
struct ReadClock {
  static constexpr MessageType kType = MessageType::kReadClock;
  absl::Status status;
  Clock clock;

  friend bool operator==(const ReadClock&, const ReadClock&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    return ar.Status(m.status) && (!m.status.ok() || ar.Clock(m.clock));
  }
};

// One chunk of a fold: its sequence number (from 0), whether it is the
// fold's last, and its elements. The hot path encodes and parses it without
// this struct (EncodeReadChunk, ParseReadChunkBody).
struct ReadChunk {
  static constexpr MessageType kType = MessageType::kReadChunk;
  uint64_t seq = 0;
  bool last = false;
  std::vector<ElementDots> elements;

  friend bool operator==(const ReadChunk&, const ReadChunk&) = default;

  // The same fields apart: the hot path (EncodeReadChunk from a span,
  // ParseReadChunkBody leaving the elements encoded).
  template <typename Ar, typename Seq, typename Last, typename Elements>
  static bool Fields(Ar& ar, Seq& seq, Last& last, Elements& elements) {
    return ar.Varint(seq) && ar.Bool(last) && ar.Elements(elements);
  }
  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    return Fields(ar, m.seq, m.last, m.elements);
  }
};

// Asks for a fold's chunk `seq`: the next one (the chunks before it
// arrived), or the last one sent again.
struct ChunkAck {
  static constexpr MessageType kType = MessageType::kChunkAck;
  uint64_t seq = 0;

  friend bool operator==(const ChunkAck&, const ChunkAck&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    return ar.Varint(m.seq);
  }
};

// Ends a fold early.
using StopFold = EmptyBody<MessageType::kStopFold>;

// Keeps an idle fold from expiring.
using KeepFold = EmptyBody<MessageType::kKeepFold>;

// Asks which of `elements` the replica's `set` holds.
struct Query {
  static constexpr MessageType kType = MessageType::kQuery;
  std::string set;
  std::vector<std::string> elements;

  friend bool operator==(const Query&, const Query&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    return ar.String(m.set) && ar.Seq(m.elements, kMinStringBytes,
                                      [&ar](auto& e) { return ar.String(e); });
  }
};

// The set-clock and the dots of the elements asked about that the replica
// holds (when `status` is ok).
struct QueryReply {
  static constexpr MessageType kType = MessageType::kQueryReply;
  absl::Status status;
  Clock clock;
  std::vector<ElementDots> elements;

  friend bool operator==(const QueryReply&, const QueryReply&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    if (!ar.Status(m.status)) return false;
    if (!m.status.ok()) return ar.Omitted(m.elements);
    return ar.Clock(m.clock) && ar.Elements(m.elements);
  }
};

// Asks for the replica's count of `set`.
struct Count {
  static constexpr MessageType kType = MessageType::kCount;
  std::string set;

  friend bool operator==(const Count&, const Count&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    return ar.String(m.set);
  }
};

// Whether the replica holds the set, its count, and its set and tombstone
// digests (see Replica::CountSummary); the rest only when `status` is ok.
struct CountReply {
  static constexpr MessageType kType = MessageType::kCountReply;
  absl::Status status;
  bool found = false;
  uint64_t count = 0;
  uint64_t set_digest = 0;
  uint64_t tombstone_digest = 0;

  friend bool operator==(const CountReply&, const CountReply&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    return ar.Status(m.status) &&
           (!m.status.ok() ||
            (ar.Bool(m.found) && ar.Varint(m.count) &&
             ar.Fixed64(m.set_digest) && ar.Fixed64(m.tombstone_digest)));
  }
};

}  // namespace msg
}  // namespace bigset

#endif  // BIGSET_LIB_NET_REPLICA_MESSAGES_H_
