// Simulator: a deterministic in-process cluster of N nodes, and an
// adversary.
//
// Every node is a real Node over a real LevelDbStore (in memory by default,
// or on disk), connected by a simulated network with virtual time. It does
// what real networks and machines do, each fault on its own switch:
//   - latency (uniform in a range), message loss, duplication, reordering
//     (by latency), stalls (a message now and then delayed far beyond the
//     usual latency, past retries and timeouts, as a congested or
//     reconnecting link does), partitions between groups of nodes;
//   - corrupted messages: truncated or bit-flipped in flight;
//   - event order: events due at the same time run in random order, and
//     timers fire late by up to a bound (as on a real event loop);
//   - crash and restart: the node's memory, timers and in-flight messages
//     are gone, its store survives; a restart may bring a clock that went
//     back (a monotonic clock restarts at boot);
//   - power loss: a crash that also loses every store write not yet synced
//     or written back (a FaultEnv under every store);
//   - a full disk: a node's store fails its writes (the one that fills the
//     disk in the middle of a log record) while the node runs on, until an
//     operator makes room and restarts it.
// All randomness comes from one seeded generator, so the same seed gives the
// same run, and the event trace (and its hash) shows what happened.
//
// The blocking client methods (Update, Read, ...) start a request on one
// node and run the simulation until it completes.
//
// Thread-safety: not thread-safe; one thread drives a simulator.

#ifndef BIGSET_TESTING_SIM_H_
#define BIGSET_TESTING_SIM_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bigset/cluster/node.h"
#include "bigset/cluster/ring.h"
#include "bigset/export.h"
#include "bigset/net/transport.h"
#include "bigset/store/leveldb_store.h"
#include "bigset/testing/fault_env.h"

namespace leveldb {
class Env;
}  // namespace leveldb

namespace bigset {

struct SimOptions {
  uint64_t seed = 1;
  int nodes = 5;  // Node ids 1..nodes.
  RingOptions ring;
  // One-way latency, uniform in [min, max] microseconds.
  uint64_t min_latency_micros = 100;
  uint64_t max_latency_micros = 2000;
  double loss = 0.0;       // Probability a message is lost.
  double duplicate = 0.0;  // Probability a message is delivered twice.
  // Probability a message stalls: it arrives up to stall_max_micros
  // (uniform) later than its latency says.
  double stall = 0.0;
  uint64_t stall_max_micros = 2'000'000;
  // Probability a message is corrupted in flight: truncated, or one to
  // three bits flipped.
  double corrupt = 0.0;
  // Events due at the same virtual time run in a random order (otherwise
  // in the order they were scheduled).
  bool shuffle_ties = false;
  // Messages from one node to another arrive in the order they were sent,
  // as over one TCP connection (what TcpTransport gives): one that drew a
  // shorter latency, or stalls less, waits behind the one before it. Off,
  // each message's latency is its own and they overtake each other.
  bool fifo_links = false;
  // Timers fire late by up to this much (uniform), as timers of a busy
  // event loop do.
  uint64_t timer_jitter_micros = 0;
  // Every this much virtual time, what the stores wrote becomes durable, as
  // the kernel writes dirty pages back (0: never; a power loss then loses
  // everything not explicitly synced).
  uint64_t writeback_micros = 0;
  // Empty: stores live in memory (LevelDB's MemEnv). Otherwise a directory
  // that receives one LevelDB per node.
  std::string directory;
  LevelDbStoreOptions store;
  // Its actor_id_source is replaced by a seeded one. Anti-entropy rounds
  // are off here by default (their timer never stops, so RunUntilIdle would
  // never return): set node.anti_entropy.interval_micros and drive the
  // simulator with RunFor or RunUntil.
  NodeOptions node = [] {
    NodeOptions o;
    o.anti_entropy.interval_micros = 0;
    return o;
  }();
  // Work has a cost: a node handles one event (a message or a timer) at a
  // time; each message costs it message_cost_micros of virtual time, and
  // each synced write (sync_writes: LevelDB syncs its log)
  // sync_cost_micros, as an fsync on a disk does. Events that come due
  // while it is busy wait their turn, so a node that gets more work than
  // it can do falls behind, as a real one does (0, the default: work is
  // free and instant).
  uint64_t message_cost_micros = 0;
  uint64_t sync_cost_micros = 0;
  // Trace lines kept (the hash covers every event).
  size_t trace_capacity = 2000;
  // A blocking call whose request has not answered this long after its
  // deadline (the options' timeout_micros from the start; for Read, from
  // its last progress) returns an error for which IsUnanswered holds,
  // instead of running the simulation for ever: every request a node
  // starts must end, and its deadline says when.
  uint64_t answer_margin_micros = 10'000'000;
};

// What a blocking Read returns.
struct SimReadResult {
  Clock clock;
  std::vector<ElementDots> elements;
};

class BIGSET_EXPORT Simulator {
 public:
  static absl::StatusOr<std::unique_ptr<Simulator>> Create(
      const SimOptions& options);
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  const Ring& ring() const { return *ring_; }
  // The nodes of the latest ring.
  const std::vector<NodeId>& node_ids() const { return ring_->nodes(); }
  // Every node the simulation has created (ids 1..node_count()).
  NodeId node_count() const { return static_cast<NodeId>(nodes_.size()); }
  // The live node `id`, or nullptr while it is crashed.
  Node* node(NodeId id);
  // The store of the live node `id`, or nullptr while it is crashed.
  Store* store(NodeId id);
  bool IsUp(NodeId id) const;
  uint64_t NowMicros() const { return now_; }
  std::mt19937_64& rng() { return rng_; }

  // ---- Running.
  // Processes the next event; false if there is none (the simulator's own
  // recurring events, such as writeback, do not count).
  bool Step();
  // Runs until no event is left or `max_events` ran; returns events run.
  uint64_t RunUntilIdle(uint64_t max_events = UINT64_MAX);
  // Runs until pred() holds or no event is left; returns pred().
  bool RunUntil(const std::function<bool()>& pred);
  // Runs every event due in the next `micros` of virtual time.
  void RunFor(uint64_t micros);

  // ---- Faults.
  void SetLoss(double p) { loss_ = p; }
  void SetDuplicate(double p) { duplicate_ = p; }
  void SetStall(double p) { stall_ = p; }
  void SetLatency(uint64_t min_micros, uint64_t max_micros);
  // Only nodes within one group can talk; nodes in no group are isolated.
  void Partition(const std::vector<std::vector<NodeId>>& groups);
  void Heal();
  // Every message from `from` to `to` (one direction only) arrives
  // `extra_micros` later than its latency says, as over a congested link;
  // 0 makes the link normal again. Views lag across such a link (its
  // gossip is late) while the other direction and other links flow.
  void SlowLink(NodeId from, NodeId to, uint64_t extra_micros);
  void SetCorruption(double p) { corrupt_ = p; }
  // Kills a node: its Node object, timers and in-flight messages are gone;
  // its store is closed (without a clean shutdown) and survives.
  absl::Status Crash(NodeId id);
  // Kills a node like Crash, and its machine loses every store write that
  // was not synced (the tail of LevelDB's log, unsynced new files).
  absl::Status PowerLoss(NodeId id);
  // Fills node `id`'s disk: once its store has appended `bytes` more bytes,
  // its writes fail (the first one in part) and it refuses writes until
  // it is restarted. The node keeps running. Restart makes room first.
  absl::Status FillDisk(NodeId id, uint64_t bytes);
  // Makes room on node `id`'s disk while it runs (a log rotated, a file
  // deleted): its store still refuses writes until the node restarts.
  absl::Status FreeDisk(NodeId id);
  // Stops a node cleanly (Node::Close), as an operator would.
  absl::Status Stop(NodeId id);
  // Reopens the store and starts a new Node on it. With `clock_back` the
  // node's clock starts again from an earlier value (zero, as after a
  // reboot, or a random earlier time).
  absl::Status Restart(NodeId id, bool clock_back = false);
  // Compacts every live node's whole store (as after a bulk load).
  absl::Status CompactAll();

  // ---- Membership.
  // Installs `ring` (Node::InstallRing) on the nodes in `on`, or on every
  // node of the ring and every node running now if `on` is empty, so that
  // nodes may disagree for a while. A node of `on` that does not exist yet
  // (the next id) joins as Node::Open says: it is opened with the ring
  // before `ring`, then given `ring`; a crashed node gets the ring when it
  // restarts. ring() becomes `ring`.
  absl::Status InstallRing(const Ring& ring, std::vector<NodeId> on = {});
  // The latest ring given to node `id` (at creation or by InstallRing).
  const Ring* RingOf(NodeId id) const;

  // ---- Blocking client API: via node `via`, run until done.
  // Each returns the request's answer; or Unavailable if `via` is down;
  // or, if the request did not answer within its deadline plus
  // SimOptions::answer_margin_micros, an error naming the request (a
  // liveness defect: IsUnanswered holds for it); or Internal if the
  // simulation ran out of events first.
  absl::StatusOr<Delta> Update(NodeId via, std::string_view set,
                               std::vector<UpdateOp> ops,
                               const ClusterWriteOptions& options = {});
  // Node::Clear: `context` is typically a Read's clock.
  absl::StatusOr<Delta> Clear(NodeId via, std::string_view set,
                              const Clock& context,
                              const ClusterWriteOptions& options = {});
  absl::StatusOr<SimReadResult> Read(NodeId via, std::string_view set,
                                     const ClusterReadOptions& options = {},
                                     const RangeQuery* bounds = nullptr);
  absl::StatusOr<Membership> ContainsAll(
      NodeId via, std::string_view set, std::vector<std::string> elements,
      const ClusterReadOptions& options = {});
  absl::StatusOr<RangeResult> Range(NodeId via, std::string_view set,
                                    const RangeQuery& query,
                                    const ClusterReadOptions& options = {});
  absl::StatusOr<uint64_t> Count(NodeId via, std::string_view set,
                                 const ClusterReadOptions& options = {});
  // Whether `status` is a blocking call's report of a request that outlived
  // its deadline (see above).
  static bool IsUnanswered(const absl::Status& status);

  // ---- Observing.
  // Called with every message a node sends, as it sends it (before any
  // fault: a message later dropped is seen too), from inside the sending
  // node's code. For tests that check what a message claims against the
  // nodes' states at the moment it is made. It must not run the simulator
  // or send; it may read nodes, replicas and stores. Replaces any earlier
  // observer; an empty function removes it.
  using SendObserver =
      std::function<void(NodeId from, NodeId to, std::string_view bytes)>;
  void SetSendObserver(SendObserver observer) {
    observer_ = std::move(observer);
  }

  // ---- Trace.
  uint64_t events() const { return events_; }
  uint64_t messages_delivered() const { return delivered_; }
  // Bytes of the messages delivered (what crossed the simulated wire).
  uint64_t bytes_delivered() const { return bytes_delivered_; }
  uint64_t messages_dropped() const { return dropped_; }
  uint64_t messages_corrupted() const { return corrupted_; }
  // Reads (Read) whose node broke ReadHandler's contract: a chunk before
  // the clock, a clock twice, or a successful end without a clock (a
  // client would take an empty context).
  uint64_t read_contract_violations() const {
    return read_contract_violations_;
  }
  uint64_t messages_stalled() const { return stalled_; }
  uint64_t power_losses() const { return power_losses_; }
  uint64_t disks_filled() const { return disks_filled_; }
  // Unsynced bytes power losses dropped.
  uint64_t bytes_lost() const { return bytes_lost_; }
  // Hash of every event so far: equal for equal seeds and inputs. When the
  // environment variable BIGSET_SIM_TRACE_LOG names a file, the destructor
  // appends the seed, the event and delivery counts and this hash to it, so
  // that two builds' histories can be compared (scripts/trace_compare.sh).
  uint64_t TraceHash() const { return trace_hash_; }
  // The most recent events, oldest first.
  std::vector<std::string> TraceTail() const;

 private:
  class SimTransport;
  class SimScheduler;
  struct Event {
    bool is_message = false;
    bool internal = false;  // The simulator's own (writeback), no node.
    NodeId from = 0;
    NodeId to = 0;  // Message destination, or the timer's node.
    uint64_t incarnation = 0;
    std::string bytes;
    std::function<void()> fn;
    uint64_t timer_id = 0;
  };
  // The heap orders these small entries; the events themselves stay put in
  // a slab, so a heap operation moves 24 bytes, not an event.
  struct Scheduled {
    uint64_t time = 0;
    uint64_t seq = 0;  // Tie-break: scheduling order, or random.
    uint32_t slot = 0;
  };
  struct Later {
    bool operator()(const Scheduled& a, const Scheduled& b) const {
      return a.time != b.time ? a.time > b.time : a.seq > b.seq;
    }
  };
  struct NodeSlot {
    std::unique_ptr<LevelDbStore> store;
    std::unique_ptr<SimScheduler> scheduler;
    std::unique_ptr<Node> node;
    std::optional<Ring> ring;  // The latest ring given to the node.
    uint64_t incarnation = 0;
    bool up = false;
    // The node's clock is the simulation's time plus this (a restart with
    // a clock that went back lowers it); never below zero.
    int64_t clock_offset = 0;
    // Busy with earlier work until then (SimOptions::message_cost_micros).
    uint64_t busy_until = 0;
  };

  explicit Simulator(const SimOptions& options);
  // Runs until `answered()`; the error of a blocking call if the
  // simulation runs out of events first, or passes `deadline()` plus the
  // answer margin (deadline() is read after each event: a read's moves
  // with its progress). `what` names the request, `started` its start.
  absl::Status AwaitAnswer(const std::function<bool()>& answered,
                           const std::function<uint64_t()>& deadline,
                           const std::string& what, uint64_t started);
  // The blocking calls' common part: starts a request on node `via` with
  // `start(node, done)` and runs until `done` is called, `timeout_micros`
  // after the start being the deadline. Its answer, or AwaitAnswer's
  // error; `what` names the request. Defined (and used) in sim.cc.
  template <typename T, typename StartFn>
  absl::StatusOr<T> Ask(NodeId via, const char* what, std::string_view set,
                        uint64_t timeout_micros, StartFn start);
  absl::Status StartNode(NodeId id);
  std::string StorePath(NodeId id) const;
  uint64_t NodeNow(const NodeSlot& slot) const;
  // Truncates or flips bits of a message in flight.
  void Corrupt(std::string* bytes);
  void Route(NodeId from, NodeId to, std::string bytes);
  void Push(uint64_t time, Event e);
  // nullptr if `id` is not a node of this simulation.
  NodeSlot* SlotOf(NodeId id) {
    return id >= 1 && id <= nodes_.size() ? &nodes_[id - 1] : nullptr;
  }
  const NodeSlot* SlotOf(NodeId id) const {
    return id >= 1 && id <= nodes_.size() ? &nodes_[id - 1] : nullptr;
  }
  uint64_t AddTimer(NodeId node, uint64_t delay, std::function<void()> fn);
  void Trace(std::string line);
  void ScheduleWriteBack();
  // Processes the next event of any kind; false if the queue is empty.
  bool StepOne();
  uint64_t Latency();

  const SimOptions options_;
  std::mt19937_64 rng_;
  std::unique_ptr<leveldb::Env> mem_env_;
  std::unique_ptr<FaultEnv> fault_env_;  // Over mem_env_ or the default.
  std::optional<Ring> ring_;
  // Every ring given out, the initial one first: a node that joins is
  // opened with the newest of them that does not name it.
  std::vector<Ring> rings_;
  std::unique_ptr<SimTransport> transport_;
  std::vector<NodeSlot> nodes_;   // Node id i at index i - 1.
  std::vector<Scheduled> queue_;  // A binary heap (std::push_heap).
  std::vector<Event> slab_;       // Events, by Scheduled::slot.
  std::vector<uint32_t> free_slots_;
  std::set<uint64_t> cancelled_timers_;
  uint64_t now_ = 0;
  uint64_t pending_ = 0;  // Queued events that are not internal.
  uint64_t next_seq_ = 0;
  uint64_t next_timer_ = 1;
  double loss_;
  double duplicate_;
  double stall_;
  double corrupt_;
  uint64_t min_latency_;
  uint64_t max_latency_;
  std::vector<int> group_;  // By node id - 1; empty: no partition.
  std::map<std::pair<NodeId, NodeId>, uint64_t> slow_links_;  // -> extra.
  // With fifo_links: when the last message sent over each link arrives.
  std::map<std::pair<NodeId, NodeId>, uint64_t> link_arrivals_;
  SendObserver observer_;
  uint64_t events_ = 0;
  uint64_t delivered_ = 0;
  uint64_t bytes_delivered_ = 0;
  uint64_t read_contract_violations_ = 0;
  uint64_t dropped_ = 0;
  uint64_t corrupted_ = 0;
  uint64_t stalled_ = 0;
  uint64_t power_losses_ = 0;
  uint64_t disks_filled_ = 0;
  uint64_t bytes_lost_ = 0;
  uint64_t trace_hash_ = 0;
  std::deque<std::string> trace_;
};

}  // namespace bigset

#endif  // BIGSET_TESTING_SIM_H_
