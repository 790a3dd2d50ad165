// ManualCluster: real nodes over in-memory stores, with a network and
// timers the test drives by hand, for tests that need one exact order of
// events (a clock that arrives after a chunk, a timer that runs after the
// messages due at the same time, a crafted message).
//
// Messages are queued; the test delivers them (all, or those of one type
// or between two nodes), drops or rewrites them. Membership gossip
// (kMembership) is not queued: it is delivered in the background, reliably,
// before anything else is delivered, dropped or run, since these tests
// script the other protocols; QueueMembership(true) queues it like the
// rest (for tests that reorder, drop, replay or corrupt gossip). Timers are
// queued with their due time; the test advances a node's clock and runs
// what is due.

#ifndef BIGSET_TESTS_MANUAL_CLUSTER_H_
#define BIGSET_TESTS_MANUAL_CLUSTER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bigset/cluster/node.h"
#include "bigset/net/transport.h"
#include "net/message.h"
#include "test_util.h"

namespace bigset::testing {

class ManualCluster {
 public:
  struct Sent {
    NodeId from = 0;
    NodeId to = 0;
    std::string bytes;
    MessageType type() const;
  };

  // `nodes` nodes with ids 1..nodes, ring of `ring_size` partitions, N = n.
  ManualCluster(int nodes, int n, uint32_t ring_size = 4,
                NodeOptions options = {});
  // `nodes` nodes with ids 1..nodes, all opened with `ring` (nodes it does
  // not name serve nothing: they join by a later ring).
  ManualCluster(int nodes, const Ring& ring, NodeOptions options = {});
  ~ManualCluster();

  Node& node(NodeId id) { return *slots_.at(id).node; }
  LevelDbStore& store(NodeId id) { return *slots_.at(id).store->store; }
  // The ring nodes are opened with (at restarts too).
  const Ring& ring() const { return ring_; }
  // Nodes (re)started from now on open with `ring` (the ring the cluster
  // runs, as an embedder restarting a node would give it).
  void SetOpenRing(const Ring& ring) { ring_ = ring; }
  // Whether kMembership is queued (true) or delivered in the background
  // (false, the default). Gossip already in the background stays there.
  void QueueMembership(bool on) { queue_membership_ = on; }
  std::deque<Sent>& queue() { return queue_; }

  // Delivers the first queued message for which `pick` is true; false if
  // there is none.
  bool DeliverOne(const std::function<bool(const Sent&)>& pick);
  // Delivers queued messages (and those they cause) until none is left for
  // which `pick` is true. Returns how many were delivered.
  int DeliverAll(const std::function<bool(const Sent&)>& pick =
                     [](const Sent&) { return true; });
  // Drops every queued message for which `pick` is true.
  int Drop(const std::function<bool(const Sent&)>& pick);
  // Settle and Advance leave queued the messages for which `pick` is true
  // (a slow link), until Unhold; DeliverOne and DeliverAll still deliver
  // them when asked.
  void Hold(std::function<bool(const Sent&)> pick) { hold_ = std::move(pick); }
  void Unhold() { hold_ = nullptr; }

  // Node `id`'s clock.
  uint64_t Now(NodeId id) const { return slots_.at(id).now; }
  // Runs node `id`'s timers due at its current time (and those they set
  // that are due too), in due order.
  int RunTimers(NodeId id);
  // Advances every node's clock by `micros`; runs and delivers nothing.
  void Tick(uint64_t micros) {
    for (auto& [id, slot] : slots_) slot.now += micros;
  }
  // Advances every node's clock by `micros`, then runs their due timers and
  // delivers every message, until quiet; repeats `rounds` times.
  void Advance(uint64_t micros, int rounds = 1);
  // Delivers every message and runs due timers until nothing moves.
  void Settle();

  // Destroys node `id` (a crash: no Close) and starts it again over the
  // same store with its clock at `clock` (a reboot may reset it).
  void Restart(NodeId id, uint64_t clock);
  // Like Restart, on a new empty store (a replaced disk under the same
  // node id).
  void RestartWiped(NodeId id, uint64_t clock);

 private:
  class Net;
  class Clock;
  struct Timer {
    uint64_t due;
    uint64_t seq;
    std::function<void()> fn;
    uint64_t incarnation;
  };
  struct Slot {
    std::unique_ptr<MemStore> store;
    std::unique_ptr<Clock> scheduler;
    std::unique_ptr<Node> node;
    uint64_t now = 0;
    uint64_t incarnation = 0;
    std::multimap<uint64_t, Timer> timers;  // By due time.
  };
  void Start(NodeId id);
  void FlushBackground();

  Ring ring_;
  NodeOptions options_;
  std::unique_ptr<Net> net_;
  std::map<NodeId, Slot> slots_;
  std::deque<Sent> queue_;
  std::deque<Sent> background_;  // kMembership.
  uint64_t timer_seq_ = 0;
  uint64_t actor_seq_ = 1000;
  std::function<bool(const Sent&)> hold_;
  bool queue_membership_ = false;
};

// Predicates for DeliverOne / DeliverAll / Drop.
std::function<bool(const ManualCluster::Sent&)> OfType(MessageType type);
std::function<bool(const ManualCluster::Sent&)> From(NodeId node);
std::function<bool(const ManualCluster::Sent&)> To(NodeId node);
std::function<bool(const ManualCluster::Sent&)> Not(
    std::function<bool(const ManualCluster::Sent&)> p);
std::function<bool(const ManualCluster::Sent&)> And(
    std::function<bool(const ManualCluster::Sent&)> a,
    std::function<bool(const ManualCluster::Sent&)> b);
std::function<bool(const ManualCluster::Sent&)> Or(
    std::function<bool(const ManualCluster::Sent&)> a,
    std::function<bool(const ManualCluster::Sent&)> b);

}  // namespace bigset::testing

#endif  // BIGSET_TESTS_MANUAL_CLUSTER_H_
