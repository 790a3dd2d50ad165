// CoordinatorHost: what a coordinator (a state machine for one client
// request) may ask of the node that runs it. Internal header.
//
// Coordinators see this narrow interface, never the node's internals: they
// send bytes, set timers, read the time, take request ids, use the node's
// own replica of a partition, count what they do, and say when they are
// done. Node::Impl implements it.
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
  // A delta (kReplicate, kReplicateGivenUp, kHandoffDelta or kRepair)
  // arrived for a partition this node has no replica of: true if the node
  // handed the partition to another node, passed the delta on to it, and
  // answers `from` itself (with the new owner's status), so that a coordinator
  // with an old serving list still reaches the replica that holds the partition
  // now.
  virtual bool ProxyDelta(NodeId from, const MessageHeader& header,
                          const Delta& delta) = 0;
  virtual NodeCounters& stats() = 0;
  // This node's replica of `partition` applied `delta` (coordinated,
  // replicated or repaired): hand-offs forward it.
  virtual void OnApplied(uint32_t partition, const Delta& delta) = 0;
  // The partitions this node hosts may have changed: open the replicas of
  // new ones, retire and release the others. False if a replica failed to
  // open (the caller calls again later).
  virtual bool HostingChanged() = 0;
  // `to` asked about a partition this node holds no replica of: tell it
  // this node's ring epoch (it may be behind).
  virtual void TellMoved(NodeId to, uint32_t partition) = 0;
  // A write ended with `peer` not having acknowledged its delta message
  // `bytes` (request id `request_id`): anti-entropy resends it (a hint).
  virtual void AddHint(NodeId peer, uint32_t partition, uint64_t request_id,
                       const std::string& bytes) = 0;

  // A coordinator is done: the host destroys (or recycles) it at once, so
  // the caller touches none of its members after the call.
  virtual void FinishWrite(uint64_t id) = 0;
  virtual void FinishRead(uint64_t id) = 0;
  virtual void FinishQuery(uint64_t id) = 0;
  virtual void FinishCount(uint64_t id) = 0;
  // Read replies carry the request id of one fold; these route a fold's
  // replies to the read coordinator that opened it.
  virtual void RouteFold(uint64_t fold_id, uint64_t read_id) = 0;
  virtual void UnrouteFold(uint64_t fold_id) = 0;
  // A write replicating an extra delta (a given-up coordinator's) under a
  // request id of its own gets that id's acknowledgements too.
  virtual void RouteWrite(uint64_t extra_id, uint64_t write_id) = 0;
  virtual void UnrouteWrite(uint64_t extra_id) = 0;
};

// Base of the coordinators: their host, request id, and timers that do
// nothing once the coordinator is gone.
class Coordinator {
 public:
  Coordinator(CoordinatorHost* host, uint64_t id)
      : host_(host), id_(id), alive_(std::make_shared<bool>(true)) {}
  virtual ~Coordinator() = default;
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  uint64_t id() const { return id_; }

 protected:
  // A token that expires with this coordinator: a callback that may outlive
  // it checks `!token.expired()` before touching it.
  std::weak_ptr<bool> Token() const { return alive_; }

  // Runs fn() after `delay_micros` if this coordinator still exists.
  template <typename Fn>
  void After(uint64_t delay_micros, Fn fn) {
    host_->After(delay_micros, [token = Token(), fn = std::move(fn)]() mutable {
      if (!token.expired()) fn();
    });
  }

  // Gives a recycled coordinator a new request id; timers set for its
  // former request no longer reach it.
  void Renew(uint64_t id) {
    id_ = id;
    alive_ = std::make_shared<bool>(true);
  }

  CoordinatorHost* const host_;
  uint64_t id_;

 private:
  std::shared_ptr<bool> alive_;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_COORDINATOR_HOST_H_
