// HandoffManager: a node's membership state and its hand-offs. Internal
// header (docs/DESIGN.md, "Membership changes and hand-off"; the protocol
// and its messages are in docs/ARCHITECTURE.md, "Hand-off").
//
// State. The latest ring the embedder installed, and per partition the
// serving list: the nodes that serve the partition now. It starts as the
// ring's preference list; when a ring changes a partition's list, the
// serving list stays the old one, and each completed transfer (p, from, to)
// replaces `from` by `to` in it. Coordinators read and write through the
// serving list, so that reads go to the old replicas until the new ones
// have everything. Both are persisted in the node's metadata keyspace.
//
// Sender. For every partition whose serving list differs from the latest
// ring's list, the transfers are planned (PlanPartitionTransfers) and this
// node runs those it sends: every set of the partition, in order, each in
// chunks of at most max_chunk_elements / max_chunk_bytes, one chunk in
// flight (back-pressure), a set's last chunk carrying its set-clock. Every
// delta this node's replica of the partition applies meanwhile is forwarded
// to the receiver (kHandoffDelta, acknowledged, retransmitted). When the
// receiver acknowledged every set and every forwarded delta, the sender
// proposes the completion to the receiver (kHandoffDone under the run's
// request id). The receiver accepts it only if it received that run's end
// and has kept its replica since: it puts itself in its serving list,
// persists that with a synced write (which also makes every chunk it
// acknowledged durable), and answers OK. Only then does the sender apply
// the completion: it refuses local writes to the partition (Unavailable)
// until the deltas it forwarded meanwhile are acknowledged, then persists
// the serving list without itself, releases its replica, and tells every
// other node (kHandoffDone, retransmitted until acknowledged). A refusal
// restarts the run. A restart of the sender (its forwards are in memory)
// and a forward queue over its byte bound restart the transfer from its
// first set; a receiver that lost a set's state restarts that set.
//
// A node's own place in a serving list changes only by its own acts (it
// accepts a completion, or completes a transfer it sent), never by a
// notice from another node, so a late or stale notice can misroute a
// request for a while but never makes a node drop or wipe data it serves.
//
// Receiver. Per (sender, run) the set being received, the next chunk and
// the tracker (dots sent); each chunk is applied with
// Replica::ApplyTransferChunk and a set's last with FinishTransfer, each one
// atomic batch, so a crash loses nothing acknowledged.
//
// Release. A partition this node no longer hosts is deleted in bounded
// batches (a persisted marker first, so that a crash mid-delete leaves a
// range that is never served until the delete finishes), then compacted.
//
// Thread-safety: runs on the node's thread.

#ifndef BIGSET_LIB_CLUSTER_HANDOFF_H_
#define BIGSET_LIB_CLUSTER_HANDOFF_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "bigset/cluster/node.h"
#include "bigset/cluster/ring.h"
#include "bigset/replica/set_reader.h"
#include "bigset/store/store.h"
#include "cluster/coordinator_host.h"
#include "net/message.h"

namespace bigset {

class HandoffManager {
 public:
  HandoffManager(CoordinatorHost* host, Store* store,
                 const NodeOptions& options);
  ~HandoffManager();
  HandoffManager(const HandoffManager&) = delete;
  HandoffManager& operator=(const HandoffManager&) = delete;

  // Loads the persisted state; `ring` is the ring the embedder opens the
  // node with. FailedPrecondition if the store has seen a later ring.
  absl::Status Load(const Ring& ring);
  // Starts the timers and the transfers this node sends (after its
  // replicas are open).
  void Start();

  const Ring& ring() const { return *latest_; }
  // The nodes that serve `partition` now.
  const std::vector<NodeId>& ServingList(uint32_t partition) const;
  // Whether this node keeps a replica of `partition`: it serves it, or the
  // latest ring places it here (a receiver), and no release is under way.
  bool Hosts(uint32_t partition) const;
  bool Releasing(uint32_t partition) const {
    return releasing_.count(partition) > 0;
  }
  // Whether a transfer of `partition` from this node was accepted by its
  // receiver and drains its last forwards: the replica is no longer used.
  bool HandingOver(uint32_t partition) const;
  // See CoordinatorHost::ProxyDelta.
  bool ProxyDelta(NodeId from, const MessageHeader& header, const Delta& delta);
  // At open: a partition this node does not host but still has keys of
  // (a crash came between a completion and its release) is released.
  void ReleaseIfHeld(uint32_t partition);

  // InvalidArgument for a ring of another size or another n (replicas per
  // partition), FailedPrecondition for an epoch not above the latest.
  absl::Status InstallRing(const Ring& ring);

  // A delta this node's replica of `partition` applied: forwarded to the
  // receivers of the partition's transfers from this node.
  void OnApplied(uint32_t partition, const Delta& delta);

  // Messages.
  void HandleChunk(NodeId from, Message& m);
  void HandleTransferAck(NodeId from, const Message& m);
  void HandleDeltaAck(NodeId from, uint64_t request_id,
                      const absl::Status& status);
  void HandleDone(NodeId from, const Message& m);
  void HandleDoneAck(NodeId from, const Message& m);
  // A message carried the sender's ring epoch.
  void NoteEpoch(NodeId from, uint64_t epoch);
  // Tells `to`, which asked about a partition this node does not hold, the
  // ring epoch and the transfers of it this node completed.
  void TellMoved(NodeId to, uint32_t partition);

  // The replica of `partition` was retired: delete its keys (in the
  // background; synchronously if `now`, for a partition hosted again).
  void StartRelease(uint32_t partition);
  absl::Status FinishReleaseNow(uint32_t partition);

  // Adds the gauges to *stats.
  void FillStats(Node::Stats* stats) const;

 private:
  using TransferKey = std::pair<uint32_t, NodeId>;  // (partition, to)
  struct Outgoing {
    uint64_t run = 0;  // Request id of the current run; 0 before the first.
    bool started = false;
    bool sets_done = false;  // The end chunk was acknowledged.
    bool proposed = false;   // The completion was proposed to the receiver.
    bool accepted = false;   // ... and accepted: the replica is not used.
    uint64_t move = 0;       // The receiver's number for the transfer.
    uint64_t index = 0;      // Position of `set` in the run.
    bool have_set = false;   // `set` names a set of this run ("" is a name).
    std::string set;
    std::unique_ptr<SetReader> reader;
    uint64_t seq = 0;
    std::string inflight;  // The chunk sent and not yet acknowledged.
    bool inflight_last = false;
    bool inflight_end = false;
    uint64_t last_send = 0;
    uint64_t backoff_until = 0;
    std::vector<ElementDots> buffer;
    // Forwarded deltas not yet acknowledged: request id -> message.
    std::map<uint64_t, std::string> forwards;
    size_t forward_bytes = 0;
  };
  struct Incoming {
    uint64_t index = 0;
    std::string set;
    uint64_t next_seq = 0;
    Clock tracker;
    uint64_t last_activity = 0;
  };
  // A done transfer still to announce: node -> unacknowledged.
  struct Announcement {
    uint64_t epoch = 0;
    PartitionTransfer transfer;
    std::set<NodeId> waiting;
    uint64_t move = 0;  // The move number the receiver gave the transfer.
    uint64_t first_sent = 0;
  };

  // The ring, serving lists and announcements, in one synced batch.
  absl::Status Persist();
  void AddPersistedState(WriteBatch* batch) const;
  absl::Status DecodeAnnouncements(std::string_view bytes);
  absl::Status DecodeMoveNumbers(std::string_view bytes);
  // Applies another node's completion notice (or keeps it for later);
  // true if a serving list changed.
  bool ApplyNotice(uint64_t move, const PartitionTransfer& t);
  // The highest move number this node knows for `partition`.
  uint64_t MoveNumber(uint32_t partition) const;
  void NoteMove(uint64_t move, const PartitionTransfer& t);
  // Re-plans the transfers this node sends from the serving lists and the
  // latest ring; stops those no longer planned.
  void Replan();
  // Hosting may have changed: the node opens and retires replicas.
  void HostingChanged();
  void StartRun(const TransferKey& key, Outgoing& out);
  // Opens the next set after out.set (or the first), or sends the end.
  void NextSet(const TransferKey& key, Outgoing& out);
  // Reads out.set from a new snapshot and sends its first chunk (or backs
  // off if it cannot be read).
  void OpenSet(const TransferKey& key, Outgoing& out);
  void SendNextChunk(const TransferKey& key, Outgoing& out);
  void Resend(const TransferKey& key, Outgoing& out);
  // Proposes the completion once every set and forward is acknowledged;
  // completes once the receiver accepted and the forwards drained.
  void MaybeComplete(const TransferKey& key);
  void Propose(const TransferKey& key, Outgoing& out);
  void Complete(const TransferKey& key);
  // Applies a completed transfer to the serving lists (false: not
  // applicable, e.g. already applied).
  bool ApplyDone(const PartitionTransfer& t);
  // Receiver side of a proposal: accepts it (OK) or says why not.
  // Accepted: *move is the transfer's move number.
  absl::Status Accept(NodeId from, const Message& m, uint64_t* move);
  void WriteReleaseMarker(uint32_t partition);
  // Adds the announcement of `t` (sent by the caller once persisted).
  void Announce(uint64_t epoch, uint64_t move, const PartitionTransfer& t);
  std::string AnnouncementBytes(const Announcement& a) const;
  void EnsureTick();
  // Moves every transfer on that can go on now: starts runs (up to
  // handoff_max_running), resends a chunk past its retry time, proposes,
  // completes. Called by the timer and after every re-plan.
  void Progress();
  // The timer: Progress, then retransmits forwards and notices and expires
  // what was not answered.
  void Tick();
  void EnsureReleaseTick();
  void ReleaseTick();
  // Deletes up to `max_keys` keys of a released partition; true when done.
  absl::StatusOr<bool> ReleaseSome(uint32_t partition, size_t max_keys);
  void SendAck(NodeId to, const Message& chunk, const absl::Status& status);

  CoordinatorHost* const host_;
  Store* const store_;
  const NodeOptions options_;
  std::optional<Ring> latest_;
  // Partitions whose serving list differs from the latest ring's list.
  std::map<uint32_t, std::vector<NodeId>> serving_;
  std::map<TransferKey, Outgoing> outgoing_;
  std::map<std::pair<NodeId, uint64_t>, Incoming> incoming_;
  // Runs (sender, run) whose end this node received, with their partition,
  // while it keeps that replica: a completion is accepted only for these.
  struct FinishedRun {
    uint32_t partition = 0;
    uint64_t move = 0;  // Its number once accepted.
  };
  std::map<std::pair<NodeId, uint64_t>, FinishedRun> finished_runs_;
  // Forward request id -> its transfer.
  std::map<uint64_t, TransferKey> forward_routes_;
  // Partitions this node handed over (accepted by the receiver), until it
  // hosts them again: where deltas for them are passed on to.
  std::map<uint32_t, NodeId> moved_to_;
  // A delta passed on: request id there -> the coordinator's request.
  struct Proxied {
    NodeId coordinator = 0;
    MessageType reply = MessageType::kReplicateAck;
    uint64_t request_id = 0;
    uint32_t partition = 0;
    uint64_t since = 0;
  };
  std::map<uint64_t, Proxied> proxied_;
  std::vector<Announcement> announcements_;
  // Per partition and node, the highest move number of a transfer of the
  // partition to or from the node that this node applied. A receiver
  // numbers each transfer it accepts above every number it and its sender
  // know for the partition, so a later move involving a node always has a
  // higher number: a notice not above both its nodes' numbers is stale (a
  // late or repeated one) and ignored. Persisted.
  std::map<uint32_t, std::map<NodeId, uint64_t>> move_numbers_;
  // Notices not applicable yet (their `from` is not in the list: an
  // earlier notice is still on its way), retried after each applied one.
  std::vector<std::pair<uint64_t, PartitionTransfer>> pending_notices_;
  std::set<uint32_t> releasing_;
  // Releases whose marker is not written yet (a failed write): retried
  // before any key is deleted.
  std::set<uint32_t> unmarked_;
  bool hosting_retry_ = false;
  std::set<uint64_t> epochs_reported_;
  // Every node of every ring this process installed or loaded: completion
  // notices go to nodes that left too (they may still coordinate).
  std::set<NodeId> known_nodes_;
  bool tick_scheduled_ = false;
  bool release_tick_scheduled_ = false;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_HANDOFF_H_
