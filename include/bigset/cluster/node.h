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
#include "bigset/cluster/node_stats.h"
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
  // Retransmit interval for unacknowledged messages: the first; each
  // round after waits twice as long (up to 8x), and 4x longer once W
  // replicas acknowledged.
  uint64_t retry_micros = 200'000;
  // Failover. One replica of the set coordinates a write (this node's own
  // if it holds one; else the preference list in order). If it stays
  // silent through a few retries the write asks the next one
  // (`write.coordinator_switches`). The silent one may have applied the
  // write all the same: for an add, a second dot of the element. The write
  // deals with it: when the given-up replica answers late, or acknowledges
  // the delta of the replica that did coordinate, its own delta is
  // replicated to the preference list like any coordinated delta
  // (`write.late_coordinator_replies`, `write.extra_dots`), so quorum reads
  // see both dots, as of two concurrent adds; and a given-up replica that
  // had not applied the write yet never will. Only a given-up replica that
  // applied the write and then crashed or stayed unreachable past the
  // write's deadline (`write.failovers_unsettled`) keeps a dot the others
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
  // Retransmit interval for unanswered requests. Membership queries and
  // counts: the first; each round after waits twice as long (up to 8x), as
  // a replica that is slow works through every copy. Reads: each interval
  // (a read asks for one chunk at a time).
  uint64_t retry_micros = 200'000;
  // A replica whose next chunk does not come for this long (retransmits
  // included) is replaced by another replica of the set, which resumes the
  // read after the last element already returned.
  uint64_t replica_timeout_micros = 700'000;
  // Interval at which the coordinator tells the replicas it reads from that
  // it is still there (while it waits on the client or on other replicas).
  // Keep it well under ReplicaServiceOptions::fold_idle_timeout_micros.
  uint64_t keepalive_micros = 5'000'000;
  // Membership queries (ContainsAll): 0 asks every replica of the set at
  // once and merges the first R places that answer. Otherwise the query
  // asks only R places at first (this node's own replica first, then the
  // serving list in order, those with a replica found slow lately last),
  // and the others once this many microseconds pass without R answers, or
  // at once when a replica it asked fails or holds nothing (without
  // notfound_ok): N - R fewer replicas do the work (`read.queries_hedged`
  // counts the queries that asked more). A replica is found slow for a
  // second when a query that asked more got its answer before that
  // replica, asked first, answered (for every set), or when it fails a
  // query (for the sets of that partition): a replica down or stalled
  // costs one hedge, not one per query, and a loaded cluster is never
  // asked for more than R places' work at first.
  uint64_t query_hedge_micros = 0;
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
  // handler that only looks allocates nothing. One exception: Node::Close
  // calls OnDone (Unavailable) even while a chunk is held; from then on
  // `*elements` is gone and `next` does nothing.
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
  // starts a new actor epoch).
  //
  // Requests still running are answered within Close: first the clears of
  // nothing (their empty delta), then the others in the order the node
  // issued them; a write whose answer was decided but not yet delivered
  // gets that answer, every other request Unavailable (a write may or may
  // not have been applied, as after a timeout); a read's handler gets
  // OnDone. Requests made after Close starts (from those callbacks too)
  // fail at once with FailedPrecondition, as does InstallRing; messages
  // are dropped, and timers and RunAntiEntropy do nothing. Close again
  // returns what the first returned (FailedPrecondition from a callback
  // of the first, which is still closing); a callback must not destroy
  // the node.
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
  // The node that took this node's place in `partition`, while this node
  // passes writes for it on there (from the taker's acceptance until this
  // node hosts the partition again, restarts, or the taker turns out to
  // have lost what it took); 0 otherwise.
  NodeId PassesOnTo(uint32_t partition) const;

  // The node's counters and gauges, by name (see node_stats.h).
  NodeStats stats() const;

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
