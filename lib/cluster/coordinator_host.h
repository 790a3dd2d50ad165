// CoordinatorHost: what the one protocol that still does its own I/O (the
// hand-off) may ask of the node that runs it. Internal header. The request
// machines (write, read, query, count), the replica service and
// anti-entropy do no I/O: they return outputs (request_output.h,
// replica_service.h, protocol_output.h).
//
// Users see this narrow interface, never the node's internals: they send
// bytes, set timers, read the time, take request ids, use the node's own
// replica of a partition and count what they do. They never call each
// other: what one asks of another is an effect the node carries out (the
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
  virtual uint64_t NowMicros() const = 0;
  // A request id no other request of this node uses, across restarts too.
  virtual uint64_t NextRequestId() = 0;
  virtual void Send(NodeId to, std::string bytes) = 0;
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
  virtual NodeCounters& stats() = 0;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_COORDINATOR_HOST_H_
