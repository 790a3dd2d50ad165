// CoordinatorHost: what a protocol that does its own I/O (the replica
// service, hand-off and anti-entropy) may ask of the node that runs it.
// Internal header. The request machines (write, read, query, count) do no
// I/O: they return outputs (request_output.h).
//
// Users see this narrow interface, never the node's internals: they
// send bytes, set timers, read the time, take request ids, use the node's
// own replica of a partition, count what they do and find the node's
// requests (requests()). They never call each other: what one asks of
// another goes out as an effect the node carries out (ServiceOutput, the
// hand-off's retired partitions). Node::Impl implements it.
//
// Thread-safety: a node and its coordinators run on the one thread that
// drives the node (see node.h).

#ifndef BIGSET_LIB_CLUSTER_COORDINATOR_HOST_H_
#define BIGSET_LIB_CLUSTER_COORDINATOR_HOST_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "bigset/cluster/node.h"
#include "bigset/cluster/ring.h"
#include "bigset/net/transport.h"
#include "bigset/replica/replica.h"
#include "cluster/coordinator.h"
#include "cluster/node_counters.h"
#include "net/message.h"

namespace bigset {

class RequestRegistry;

class CoordinatorHost {
 public:
  virtual ~CoordinatorHost() = default;

  virtual NodeId node_id() const = 0;
  // The latest ring installed (for partition numbers and N).
  virtual const Ring& ring() const = 0;
  // The nodes that serve `partition` now: the latest ring's preference list,
  // or while a hand-off moves the partition, the list it moves from with
  // each completed transfer applied (see handoff.h). Coordinators read and
  // write through it. Valid until the node's next message or timer.
  virtual const std::vector<NodeId>& ServingList(uint32_t partition) const = 0;
  // The place of each node of ServingList(partition), by index (see
  // MembershipState::ServingPlaces): a leaver and the node that took its
  // place share one. Quorums count places: a write counts a place once
  // all its nodes acknowledged, and a read takes a place only with the
  // answers of all its nodes that still serve (together they hold what the
  // place holds).
  virtual const std::vector<uint32_t>& ServingPlaces(
      uint32_t partition) const = 0;
  virtual uint64_t NowMicros() const = 0;
  // A request id no other request of this node uses, across restarts too.
  virtual uint64_t NextRequestId() = 0;
  virtual void Send(NodeId to, std::string bytes) = 0;
  // Send, except that a message to this node itself is handled before
  // SendFirst returns (its answer travels as any other, later). For a
  // query whose answer must show this node's replica as it is now, before
  // whatever this same turn goes on to change: a write made right after
  // it (each peer takes a node's messages in order, so the query reaches
  // every replica before the write does).
  virtual void SendFirst(NodeId to, std::string bytes) = 0;
  // Runs `fn` after `delay_micros` on the node's thread, unless the node is
  // gone by then. Never runs it before returning.
  virtual void After(uint64_t delay_micros, std::function<void()> fn) = 0;
  // This node's replica of `partition`, or nullptr if it holds none or no
  // longer uses it (it hands the partition over).
  virtual Replica* LocalReplica(uint32_t partition) = 0;
  // This node's replica of `partition` even while it hands it over (the
  // hand-off sender reads it), or nullptr.
  virtual Replica* HostedReplica(uint32_t partition) = 0;
  // LocalReplica, only if this node serves `partition` by its own account:
  // what clients' requests, replicated deltas and anti-entropy use. A
  // receiver's replica (a partition on its way here) answers none of them:
  // a coordinator whose list names it is behind, and an answer or an
  // acknowledgement from it would count a replica that holds no place.
  virtual Replica* ServingReplica(uint32_t partition) = 0;
  // ServingReplica, unless this node committed to hand its place over:
  // what reads, queries and counts use. Once it committed, its receiver
  // may take the place at any moment, and what this node passes on from
  // then on (while it drains, and again after a restart that forgot it
  // drained) is not in its replica.
  virtual Replica* ReadableReplica(uint32_t partition) = 0;
  // Whether this node serves `partition` by its own account (also while
  // it hands it over and its replica is no longer used).
  virtual bool Serves(uint32_t partition) const = 0;
  virtual NodeCounters& stats() = 0;
  // The coordinators this node runs, by request id, and the routes of
  // their sub-requests. A coordinator that is done calls
  // requests().Finish(its id), which destroys (or recycles) it at once: the
  // caller touches none of its members after the call.
  virtual RequestRegistry& requests() = 0;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_COORDINATOR_HOST_H_
