// Node: one member of a bigset cluster.
//
// A node hosts the replicas of the partitions the ring gives it (all in one
// store, keyspace = partition; see docs/ARCHITECTURE.md for why), answers
// messages from coordinators, and coordinates clients' requests:
//
//   - writes: a replica of the set's preference list coordinates the update
//     (this node if it is one, else the first that answers), the delta is
//     replicated to the other N-1, and the client is answered after W
//     durable acknowledgements;
//   - reads and queries: all N replicas are asked, the first R clocks win,
//     the others are told to stop, and the R streams are merged in element
//     order with bounded buffering and back-pressure; every difference found
//     is repaired on the replicas that lack it.
//
// A node is a state machine driven by Receive() and by its Scheduler's
// timers; it has no threads. Thread-safety: not thread-safe: the embedder
// calls Receive, the client methods and the timers' callbacks from one
// thread (or serialises them). Callbacks run on that thread.

#ifndef BIGSET_CLUSTER_NODE_H_
#define BIGSET_CLUSTER_NODE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bigset/cluster/node_options.h"
#include "bigset/cluster/ring.h"
#include "bigset/core/clock.h"
#include "bigset/core/delta.h"
#include "bigset/core/element_bounds.h"
#include "bigset/core/element_dots.h"
#include "bigset/export.h"
#include "bigset/net/transport.h"
#include "bigset/replica/query.h"
#include "bigset/replica/replica.h"
#include "bigset/store/store.h"

namespace bigset {

struct ClusterWriteOptions {
  // Acknowledgements before success (the coordinating replica's too).
  // REQUIRES: 1 <= w <= n.
  int w = 2;
  uint64_t timeout_micros = 2'000'000;
  // Retransmit interval for unacknowledged messages.
  uint64_t retry_micros = 200'000;
  // Failover. One replica of the set coordinates a write (this node's own
  // if it holds one; else the preference list in order). If it stays
  // silent through a few retries the write asks the next one
  // (Stats::coordinator_switches). The silent one may have applied the
  // write all the same: for an add, a second dot of the element. The write
  // deals with it: when the given-up replica answers late, or acknowledges
  // the delta of the replica that did coordinate, its own delta is
  // replicated to the preference list like any coordinated delta
  // (Stats::late_coordinator_replies, Stats::extra_dots), so quorum reads
  // see both dots, as of two concurrent adds; and a given-up replica that
  // had not applied the write yet never will. Only a given-up replica that
  // applied the write and then crashed or stayed unreachable past the
  // write's deadline (Stats::failovers_unsettled) keeps a dot the others
  // do not know, until a read that includes it repairs the rest (read
  // repair; anti-entropy once it exists). A remove through failover is
  // idempotent: applying it twice changes nothing.
  //
  // With failover = false the write never switches: if the first
  // coordinating replica stays silent, the write fails with Unavailable
  // (it may still have been applied there, like any failed write; a late
  // answer is then replicated all the same until the deadline), for users
  // who prefer no duplicate dot to availability.
  bool failover = true;
};

struct ClusterReadOptions {
  int r = 2;                // Replies whose clocks are merged.
  bool notfound_ok = true;  // An empty replica counts towards R.
  uint32_t batch_size = 1000;
  bool read_repair = true;
  // The read fails with DeadlineExceeded after this long without progress.
  uint64_t timeout_micros = 2'000'000;
  // Retransmit interval for unanswered requests.
  uint64_t retry_micros = 200'000;
  // A replica whose next chunk does not come for this long (retransmits
  // included) is replaced by another replica of the set, which resumes the
  // read after the last element already returned.
  uint64_t replica_timeout_micros = 700'000;
  // Interval at which the coordinator tells the replicas it reads from that
  // it is still there (while it waits on the client or on other replicas).
  // Keep it well under ReplicaServiceOptions::fold_idle_timeout_micros.
  uint64_t keepalive_micros = 5'000'000;
};

// Receives a streaming read, in order: OnClock once, OnChunk zero or more
// times, OnDone once (also on error, possibly before OnClock).
class BIGSET_EXPORT ReadHandler {
 public:
  virtual ~ReadHandler();
  // The join of the R clocks: the context of the whole read.
  virtual void OnClock(const Clock& clock) = 0;
  // Merged elements, ascending, each with its surviving dots. `*elements`
  // stays valid, and nothing more arrives, until `next` is called (now or
  // later, from the thread that drives the node). The handler may move
  // elements out; whatever it leaves is recycled for later chunks, so a
  // handler that only looks allocates nothing.
  virtual void OnChunk(std::vector<ElementDots>* elements,
                       std::function<void()> next) = 0;
  virtual void OnDone(absl::Status status) = 0;
};

// A partition that still moves, as one node sees it (Node::Moving): what
// this node's view has serving it, what the latest ring wants, and this
// node's part in the move.
struct PartitionMove {
  uint32_t partition = 0;
  std::vector<NodeId> serving;
  std::vector<NodeId> target;
  // E.g. "sending to 4: streaming (set #12, run 2)", "joining: waiting for
  // a sender", "waiting for other nodes' transfers".
  std::string state;
  NodeId peer = 0;            // The other side of this node's part, if any.
  uint64_t since_micros = 0;  // How long that part has been in its state.
};

class BIGSET_EXPORT Node {
 public:
  // REQUIRES: `store`, `transport` and `scheduler` outlive the node. `ring`
  // is the latest ring the embedder has for the node (the store remembers
  // the latest it saw: FailedPrecondition for an older one). `id` need not
  // be one of its nodes: a node that left may be opened to finish its
  // hand-offs, and a new node joins by opening with the ring the cluster
  // runs now and then installing the ring that adds it (InstallRing), so
  // that it never takes partitions it has no data for as served by itself.
  // A new store serves what `ring` places on it; until a node hears from
  // another (membership gossip, within a message round trip of opening),
  // it takes that node to serve what `ring` places there.
  static absl::StatusOr<std::unique_ptr<Node>> Open(NodeId id, const Ring& ring,
                                                    Store* store,
                                                    Transport* transport,
                                                    Scheduler* scheduler,
                                                    const NodeOptions& options);
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  NodeId id() const;

  // A clean shutdown: closes every replica (Replica::Close), so that the
  // next Open keeps their actor ids. Destroying a node without Close is a
  // crash, as far as the next Open can tell (safe, and each replica then
  // starts a new actor epoch). The node must not be used after Close.
  absl::Status Close();

  // Hands a message that arrived from `from` to the node. Malformed bytes
  // are counted and dropped.
  void Receive(NodeId from, std::string_view bytes);

  // ---- Client API (asynchronous).
  void Update(std::string_view set, std::vector<UpdateOp> ops,
              const ClusterWriteOptions& options,
              std::function<void(absl::StatusOr<Delta>)> done);
  // Removes every element instance `context` covers: the clock of a read
  // (ReadHandler::OnClock), so that exactly what the client saw is cleared
  // and an add it did not see survives (add-wins). Coordinated, replicated and
  // acknowledged like Update (W acknowledgements; the delta carries the clear).
  // The keys are deleted later, in the background, by each replica's sweeper.
  // An empty context clears nothing and writes nothing; `done` gets an empty
  // delta.
  void Clear(std::string_view set, const Clock& context,
             const ClusterWriteOptions& options,
             std::function<void(absl::StatusOr<Delta>)> done);
  // Streams the whole set, or the elements within `bounds` if given (a
  // RangeQuery's limit and continuation are not used here).
  void Read(std::string_view set, const ClusterReadOptions& options,
            ReadHandler* handler, const ElementBounds* bounds = nullptr);
  void ContainsAll(std::string_view set, std::vector<std::string> elements,
                   const ClusterReadOptions& options,
                   std::function<void(absl::StatusOr<Membership>)> done);
  void Range(std::string_view set, const RangeQuery& query,
             const ClusterReadOptions& options,
             std::function<void(absl::StatusOr<RangeResult>)> done);
  // The number of elements a merged read of the set would return
  // (docs/DESIGN.md, "Counts"). Asks the replicas for their kept counts and
  // digests: if R of them agree (hold the same elements, or none holds the
  // set), their count, in constant time; else a merged read counts the set
  // (with read repair, as any read), so a set written to while it is
  // counted, or not converged, costs a scan.
  void Count(std::string_view set, const ClusterReadOptions& options,
             std::function<void(absl::StatusOr<uint64_t>)> done);

  // The local replica of `partition`; nullptr if this node holds none
  // (the ring does not place one here, or it was handed off).
  Replica* LocalReplica(uint32_t partition);

  // ---- Membership.
  // Installs the embedder's new ring (it must reach every node; nodes may
  // disagree for a while). Every partition whose preference list changes
  // is handed off from the nodes that leave it to the nodes that join it,
  // each leaver to one joiner, while the old replicas keep serving it:
  // reads and writes use the serving list, in which each transfer's
  // receiver takes its sender's place once the transfer is complete. The
  // node sends its own transfers; every node gossips its own part, so all
  // views converge. A ring installed before the previous change finished
  // continues from where the serving lists are. Persisted (synced) before
  // it returns. InvalidArgument for
  // another ring size or another n (replicas per partition: change n by
  // migrating to a new keyspace), FailedPrecondition unless the epoch is
  // higher than the latest installed.
  absl::Status InstallRing(const Ring& ring);
  // The latest ring installed.
  const Ring& ring() const;
  // The nodes that serve `partition` now, in this node's view (see
  // InstallRing).
  std::vector<NodeId> ServingList(uint32_t partition) const;
  // The partitions that still move in this node's view, and why.
  std::vector<PartitionMove> Moving() const;

  struct Stats {
    uint64_t messages_received = 0;
    uint64_t malformed_messages = 0;
    uint64_t repairs_sent = 0;
    uint64_t repair_ops_sent = 0;
    uint64_t repairs_applied = 0;
    uint64_t retransmits = 0;
    // Writes that gave up on a silent coordinating replica and asked the
    // next one (the first may still have applied the update).
    uint64_t coordinator_switches = 0;
    // Deltas of given-up coordinating replicas that had applied the write
    // after all (a late answer), replicated like any delta; the add dots
    // they created; writes that reached their deadline with a given-up
    // replica that never answered or an extra delta acknowledged by fewer
    // than W (see ClusterWriteOptions::failover).
    uint64_t late_coordinator_replies = 0;
    uint64_t extra_dots = 0;
    uint64_t failovers_unsettled = 0;
    // Writes this node's replicas refused to coordinate because another
    // replica had coordinated them (a delayed request after a switch).
    uint64_t updates_fenced = 0;
    // Writes failed with Unavailable instead of switching coordinator
    // (ClusterWriteOptions::failover = false).
    uint64_t failovers_refused = 0;
    // Update requests answered from the reply cache (retransmissions).
    uint64_t duplicate_updates = 0;
    // Deltas and repairs a replica refused (e.g. a context claiming events
    // of this replica's actor that it never generated).
    uint64_t deltas_rejected = 0;
    // Reads that replaced a silent replica by another one mid-stream.
    uint64_t read_replica_switches = 0;
    // Counts (Count) the R replicas agreed on (constant time), and counts
    // made by a merged read because they differed.
    uint64_t counts_agreed = 0;
    uint64_t counts_merged = 0;
    // Folds dropped because their coordinator went silent.
    uint64_t folds_expired = 0;
    // Sweeps of a set that failed (see ReplicaStats::sweep_errors).
    uint64_t sweep_errors = 0;
    // Gauges (now, not counted since open): folds this node's replicas
    // serve, and the bytes of cached update replies.
    uint64_t folds_open = 0;
    uint64_t reply_cache_bytes = 0;
    // Replica objects the node holds: those it hosts, and those it retired
    // (handed over) and frees at its next turn.
    uint64_t replicas_open = 0;
    // The sweepers of the node's replicas, summed (see ReplicaStats): sets
    // queued now, and since open entries done, keys deleted, bytes of
    // deleted keys and time spent.
    uint64_t sweep_queue_length = 0;
    uint64_t sweep_entries_done = 0;
    uint64_t sweep_keys_deleted = 0;
    uint64_t sweep_bytes_reclaimed = 0;
    uint64_t sweep_micros = 0;
    // Membership (gauges first): the latest ring's epoch; partitions whose
    // serving list is not yet the latest ring's; transfers this node must
    // send that wait their turn, and that run; transfers it receives;
    // partitions whose keys it is deleting after handing them off.
    uint64_t ring_epoch = 0;
    uint64_t partitions_moving = 0;
    uint64_t handoffs_pending = 0;
    uint64_t handoffs_running = 0;
    uint64_t handoffs_incoming = 0;
    uint64_t partitions_releasing = 0;
    uint64_t handoff_forward_bytes = 0;
    // Since open: rings installed; transfers completed, cancelled (a later
    // ring no longer wants them) and restarted (whole, or one set); element
    // keys and bytes sent; element keys and sets received; deltas
    // forwarded to receivers, and forward queues dropped for their bound;
    // partitions released, with their keys and bytes; higher ring epochs
    // reported to the embedder.
    uint64_t rings_installed = 0;
    uint64_t handoffs_done = 0;
    uint64_t handoffs_cancelled = 0;
    uint64_t handoff_restarts = 0;
    uint64_t handoff_keys_sent = 0;
    uint64_t handoff_bytes_sent = 0;
    uint64_t handoff_keys_received = 0;
    uint64_t handoff_sets_received = 0;
    uint64_t handoff_deltas_forwarded = 0;
    // Deltas for a partition this node handed over, passed on to its new
    // owner for a coordinator that still had the old serving list.
    uint64_t handoff_deltas_proxied = 0;
    uint64_t handoff_forward_overflows = 0;
    uint64_t partitions_released = 0;
    uint64_t handoff_keys_released = 0;
    uint64_t handoff_bytes_released = 0;
    uint64_t stale_ring_reports = 0;
    // Runs started again because their receiver restarted mid-run (what it
    // acknowledged before may be lost).
    uint64_t handoff_receiver_restarts = 0;
    // Membership: this node's state version (a gauge); gossip messages sent
    // and received; changes of this node's view.
    uint64_t membership_version = 0;
    uint64_t membership_messages_sent = 0;
    uint64_t membership_messages_received = 0;
    uint64_t membership_changes = 0;
    // Anti-entropy. Gauges: hints kept and their bytes; pushes running or
    // queued. Since open: digest rounds started, and those that found the
    // partitions equal; sets whose summaries were compared; sets repaired
    // (a push or a pull started); updates sent (hints resent), element keys
    // pushed and received, and read to push; bytes of every anti-entropy
    // message sent; sets exchanged whole (equal clocks, different keys); hints
    // dropped for their bound; pushes given up (the next round finds the
    // difference).
    uint64_t ae_hints = 0;
    uint64_t ae_hint_bytes = 0;
    uint64_t ae_pushes_running = 0;
    uint64_t ae_rounds = 0;
    uint64_t ae_rounds_equal = 0;
    uint64_t ae_sets_compared = 0;
    uint64_t ae_sets_repaired = 0;
    uint64_t ae_updates_sent = 0;
    uint64_t ae_keys_pushed = 0;
    uint64_t ae_keys_received = 0;
    // Element keys read by pushes (comparisons read none).
    uint64_t ae_keys_read = 0;
    uint64_t ae_bytes_sent = 0;
    uint64_t ae_full_exchanges = 0;
    uint64_t ae_hints_dropped = 0;
    uint64_t ae_pushes_abandoned = 0;
  };
  Stats stats() const;

  // Starts an anti-entropy round with every other node serving each
  // partition this node holds, now (the timer runs them by itself; this is
  // for tools and tests).
  void RunAntiEntropy();

 private:
  class Impl;
  explicit Node(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace bigset

#endif  // BIGSET_CLUSTER_NODE_H_
