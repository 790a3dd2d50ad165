// The hand-off and membership messages, and the node states they carry:
// one struct per message type, each field with one meaning. Internal
// header; see net/message.h for the framing and docs/FORMATS.md for the
// bytes.
//
//   hand-off sender -> receiver     receiver -> sender
//   TransferChunk                   TransferAck
//   HandoffDelta                    HandoffDeltaAck
//   HandoffDone (a proposal: the    HandoffDoneAck
//     run is complete; take the
//     sender's place)
//   RingEpoch                       (none; no longer sent, decoded and
//                                    noted: Membership carries the epoch)
//
//   membership, either way          reply, if either side was behind
//   Membership                      Membership
//
// Every struct defines its body once, by Fields(archive, struct) (see
// net/replica_messages.h and net/message_archive.h).
//
// Thread-safety: value types and stateless functions.

#ifndef BIGSET_LIB_NET_MEMBERSHIP_MESSAGES_H_
#define BIGSET_LIB_NET_MEMBERSHIP_MESSAGES_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "bigset/core/clock.h"
#include "bigset/core/delta.h"
#include "bigset/core/element_dots.h"
#include "bigset/net/transport.h"
#include "net/message_archive.h"
#include "net/message_type.h"
#include "net/shared_bodies.h"

namespace bigset {

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

// Node states as Membership carries them (also the node metadata's
// encoding of them): appends to *dst, and decodes exactly `in`
// (DataLoss for anything else).
void EncodeNodeStates(std::span<const NodeServing> states, std::string* dst);
absl::Status DecodeNodeStates(std::string_view in,
                              std::vector<NodeServing>* out);

namespace message_internal {

// Whether `entries` are ascending by (partition, since) with at most one
// that is not departed per partition: what a decoded state must be.
bool EntriesInOrder(std::span<const ServeEntry> entries);

// Node states: Seq of (Node node, Varint version, Seq of (U32 partition,
// Varint since, Node took_from, Varint took_since, Node handing_to, Bool
// departed)); a state read back must have its entries in order.
template <typename Ar, typename States>
bool NodeStates(Ar& ar, States& states) {
  return ar.Seq(states, 3, [&ar](auto& st) {
    return ar.Node(st.node) && ar.Varint(st.version) &&
           ar.Seq(st.entries, 6,
                  [&ar](auto& e) {
                    return ar.U32(e.partition) && ar.Varint(e.since) &&
                           ar.Node(e.took_from) && ar.Varint(e.took_since) &&
                           ar.Node(e.handing_to) && ar.Bool(e.departed);
                  }) &&
           (!Ar::kReading || EntriesInOrder(st.entries));
  });
}

}  // namespace message_internal

namespace msg {

// One chunk of a hand-off transfer (a set stream: cluster/set_stream.h).
struct TransferChunk {
  static constexpr MessageType kType = MessageType::kTransferChunk;
  // The sender's ring epoch.
  uint64_t epoch = 0;
  std::string set;
  // The set's attempt in the run (from 0; a set sent again, from a new
  // snapshot, gets a new one), and the chunk's position within the set
  // (from 0).
  uint64_t index = 0;
  uint64_t seq = 0;
  // The set's last chunk, which carries the sender's set-clock.
  bool last = false;
  Clock set_clock;
  // A chunk after every set: no set, no elements.
  bool end = false;
  std::vector<ElementDots> elements;

  friend bool operator==(const TransferChunk&, const TransferChunk&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    return ar.Varint(m.epoch) && ar.String(m.set) && ar.Varint(m.index) &&
           ar.Varint(m.seq) && ar.Bits(m.last, m.end) &&
           (!m.last || ar.Clock(m.set_clock)) && ar.Elements(m.elements);
  }
};

// Acknowledges a transfer's chunks up to (index, seq), or says why not.
struct TransferAck {
  static constexpr MessageType kType = MessageType::kTransferAck;
  absl::Status status;
  uint64_t index = 0;
  uint64_t seq = 0;
  // The receiver's incarnation of the partition: changes when it restarts
  // or releases the partition, so that a sender learns that chunks it
  // acknowledged before may be lost.
  uint64_t incarnation = 0;

  friend bool operator==(const TransferAck&, const TransferAck&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    return ar.Status(m.status) && ar.Varint(m.index) && ar.Varint(m.seq) &&
           ar.Varint(m.incarnation);
  }
};

// A write the sender applied during the transfer, proxied to the receiver.
// The hot path encodes it without this struct (EncodeDeltaMessage).
using HandoffDelta = DeltaBody<MessageType::kHandoffDelta>;

// The outcome of applying a HandoffDelta, and the node that applied it.
using HandoffDeltaAck = AppliedBody<MessageType::kHandoffDeltaAck>;

// The sender's proposal that the run from `from_node` to `to_node` is
// complete.
struct HandoffDone {
  static constexpr MessageType kType = MessageType::kHandoffDone;
  uint64_t epoch = 0;
  NodeId from_node = 0;
  NodeId to_node = 0;
  // The sender's episode of serving the partition.
  uint64_t episode = 0;
  // The run only adds data to a receiver that already serves (the sender's
  // place was taken earlier; see cluster/handoff.h).
  bool supplement = false;

  friend bool operator==(const HandoffDone&, const HandoffDone&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    return ar.Varint(m.epoch) && ar.Node(m.from_node) && ar.Node(m.to_node) &&
           ar.Varint(m.episode) && ar.Bool(m.supplement);
  }
};

// The receiver's answer to HandoffDone, with its membership state.
struct HandoffDoneAck {
  static constexpr MessageType kType = MessageType::kHandoffDoneAck;
  absl::Status status;
  uint64_t epoch = 0;
  NodeId from_node = 0;
  NodeId to_node = 0;
  std::vector<NodeServing> states;

  friend bool operator==(const HandoffDoneAck&,
                         const HandoffDoneAck&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    return ar.Status(m.status) && ar.Varint(m.epoch) && ar.Node(m.from_node) &&
           ar.Node(m.to_node) && message_internal::NodeStates(ar, m.states);
  }
};

// The sender's ring epoch (no longer sent; decoded and noted).
struct RingEpoch {
  static constexpr MessageType kType = MessageType::kRingEpoch;
  uint64_t epoch = 0;

  friend bool operator==(const RingEpoch&, const RingEpoch&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    return ar.Varint(m.epoch);
  }
};

// Membership gossip: the sender's ring epoch, the state version it knows of
// each node, and the states the receiver may not know.
struct Membership {
  static constexpr MessageType kType = MessageType::kMembership;
  uint64_t epoch = 0;
  std::vector<std::pair<NodeId, uint64_t>> versions;
  std::vector<NodeServing> states;

  friend bool operator==(const Membership&, const Membership&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    return ar.Varint(m.epoch) && ar.Seq(m.versions, 2, [&ar](auto& v) {
      return ar.Node(v.first) && ar.Varint(v.second);
    }) && message_internal::NodeStates(ar, m.states);
  }
};

}  // namespace msg
}  // namespace bigset

#endif  // BIGSET_LIB_NET_MEMBERSHIP_MESSAGES_H_
