// HandoffManager: a node's membership changes and its hand-offs. Internal
// header (docs/ARCHITECTURE.md, "Membership and hand-off").
//
// Membership. Who serves each partition is Membership's view (membership.h):
// every node authors its own state and gossips it (kMembership), so views
// converge whatever the order of ring installs, completions, crashes and
// restarts. Gossip: a node that changes its own state tells every peer; a
// timer sends the versions it knows to a few peers at a time while a
// partition moves in its view (or shortly after any change); a node that
// hears of versions it lacks, or that the sender lacks, answers with the
// states the other side is missing.
//
// Places. A partition's serving list holds n places; a transfer moves one
// place from a node that leaves the partition's ring list to one that
// joins it, so that what only the leaver holds (a write it acknowledged)
// reaches exactly one new node, and a write acknowledged by W distinct
// replicas stays on W distinct replicas.
//
// Sender. For each partition it serves but the latest ring does not give
// it, a node pairs itself with a joiner (the leavers whose place nobody
// took, by id, with the joiners no serving node hands over to, in ring
// order) and runs a transfer (HandoffTransfer, handoff_transfer.h): every
// set, in order, in chunks, a window of them in flight; every delta its
// replica applies meanwhile is forwarded. Phases: kWaiting (its turn not come)
// -> kStreaming (sets) -> kEnding (the end chunk) -> kSetsDone (forwards
// draining) -> kProposing (it commits to the receiver in its own state, synced,
// then proposes) -> kDraining (accepted: the replica is no longer used, writes
// for it are passed on to the receiver, the last forwards drain, and the
// proposal is sent once more so that the receiver syncs them) -> done: it stops
// serving (its state, synced) and releases the replica. A refusal restarts
// the run; a receiver that restarted (a new incarnation in its acks) also
// does, because what it acknowledged before may be lost.
//
// A node whose place was taken (the receiver's state says so) but that has
// not finished (it restarted: its forwards were in memory) runs its data
// again to whoever holds the place now, as a supplement that changes no
// membership, and then stops serving.
//
// Receiver (handoff_receiver.cc). Per (sender, run) the set being received,
// the next chunk and the tracker of sent dots; each chunk is one atomic
// batch. It accepts a proposal only for a run whose end it received in
// this incarnation and whose replica it kept: it begins serving in the
// sender's place, synced (which also makes every chunk it acknowledged
// durable), and answers with its state.
//
// Release (PartitionRelease, partition_release.h). A partition this node no
// longer hosts is deleted in bounded batches after a synced marker, then
// compacted; the hand-off starts each release and ticks it.
//
// Thread-safety: runs on the node's thread.

#ifndef BIGSET_LIB_CLUSTER_HANDOFF_H_
#define BIGSET_LIB_CLUSTER_HANDOFF_H_

#include <cstdint>
#include <deque>
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
#include "bigset/store/store.h"
#include "cluster/delta_proxy.h"
#include "cluster/handoff_transfer.h"
#include "cluster/hosted_replicas.h"
#include "cluster/membership.h"
#include "cluster/node_counters.h"
#include "cluster/partition_handoff.h"
#include "cluster/partition_release.h"
#include "cluster/partition_roles.h"
#include "cluster/protocol_output.h"
#include "cluster/request_ids.h"
#include "cluster/set_stream_receiver.h"
#include "net/message.h"

namespace bigset {

class HandoffManager {
  // Runs one input (RunProtocolInput), then sets the roles it changed
  // (first here: the inputs below deduce their types from it).
  template <typename F>
  auto Input(uint64_t now, F&& input) {
    return RunProtocolInput(&now_, &out_, now, [&]() -> decltype(auto) {
      struct Sync {
        HandoffManager* manager;
        ~Sync() { manager->SyncRoles(); }
      } sync{this};
      return input();
    });
  }

 public:
  // `incarnation` differs at every open of the node's store.
  // It opens and retires the replicas of `replicas` (not owned) as what
  // this node hosts changes.
  // `self` is this node; `store`, `stats` and `ids` are the node's (not
  // owned).
  HandoffManager(NodeId self, Store* store, HostedReplicas* replicas,
                 PartitionRoles* roles, NodeCounters* stats, RequestIds* ids,
                 const HandoffOptions& options);
  ~HandoffManager();
  HandoffManager(const HandoffManager&) = delete;
  HandoffManager& operator=(const HandoffManager&) = delete;

  // Loads the persisted state; `ring` is the ring the embedder opens the
  // node with. FailedPrecondition if the store has seen a later ring.
  absl::Status Load(const Ring& ring, uint64_t incarnation);

  // Every input below takes the time and returns what the driver must send
  // and the timers it must arm, in order (protocol_output.h); a timer comes
  // back as OnTimer. The hand-off sends nothing and sets no timer itself;
  // it writes its own state to the store (synced where it must survive).

  // After Load: opens the replica of every partition this node hosts (a
  // corrupt store fails here) and releases what it holds of the others,
  // then starts the timers, the transfers this node sends and the gossip.
  WithOutput<absl::Status> Open(uint64_t now);
  // InvalidArgument for a ring of another size or another n (replicas per
  // partition), FailedPrecondition for an epoch not above the latest.
  // Else opens and retires replicas for what this node hosts now, and
  // starts what the new ring asks for.
  WithOutput<absl::Status> InstallRing(const Ring& ring, uint64_t now);
  // A timer the driver armed.
  ProtocolOutput OnTimer(uint32_t timer, uint64_t now);
  // The partitions whose replicas this node retired since the last call
  // (the node's anti-entropy forgets their streams).
  std::vector<uint32_t> TakeRetired() { return std::exchange(retired_, {}); }

  const Ring& ring() const { return membership_.ring(); }
  // The nodes that serve `partition` now, in this node's view.
  const std::vector<NodeId>& ServingList(uint32_t partition) const {
    return membership_.ServingList(partition);
  }
  // The place of each node of ServingList(partition), by index (see
  // MembershipState::ServingPlaces): a leaver and the node that took its
  // place share one. Quorums count places: a write counts a place once all
  // its nodes acknowledged, and a read takes a place only with the answers
  // of all its nodes that still serve (together they hold what the place
  // holds).
  const std::vector<uint32_t>& ServingPlaces(uint32_t partition) const {
    return membership_.ServingPlaces(partition);
  }
  // Whether this node serves `partition` (by its own state).
  bool Serves(uint32_t partition) const {
    return membership_.Serves(partition);
  }
  // Whether this node keeps a replica of `partition`: it serves it, or the
  // latest ring places it here (a receiver). A release of it under way is
  // finished before its replica opens.
  bool Hosts(uint32_t partition) const;
  // A delta (kReplicate, kReplicateGivenUp, kHandoffDelta or kRepair)
  // arrived for a partition this node has no replica of: true if the node
  // handed the partition to another node, passed the delta on to it, and
  // answers `from` itself (with the new owner's status), so that a
  // coordinator with an old serving list still reaches the replica that
  // holds the partition now. With `own` (a kReplicateGivenUp for a request
  // this node coordinated before it handed over), the answer, once the new
  // owner applied the delta, is a kReplicateAckWithDelta carrying `own`.
  WithOutput<bool> ProxyDelta(NodeId from, const MessageHeader& header,
                              const Delta& delta, const Delta* own,
                              uint64_t now) {
    return Input(now, [&] { return PassOn(from, header, delta, own); });
  }
  // A delta this node's replica of `partition` applied: forwarded to the
  // receivers of the partition's transfers from this node.
  ProtocolOutput OnApplied(uint32_t partition, const Delta& delta,
                           uint64_t now) {
    return Input(now, [&] { Forward(partition, delta); });
  }
  // Tells `to`, which asked about a partition this node does not serve,
  // this node's ring epoch and its membership state.
  ProtocolOutput TellMoved(NodeId to, uint32_t partition, uint64_t now) {
    return Input(now, [&] { SendOwnState(to, partition); });
  }
  // The hand-off's messages: chunks and their acknowledgements, completion
  // notices and theirs, membership gossip.
  template <typename Body>
  ProtocolOutput Step(NodeId from, const MessageHeader& header, Body& m,
                      uint64_t now) {
    return Input(now, [&] { OnMessage(from, header, m); });
  }
  // The acknowledgement of a delta this node forwarded or passed on.
  ProtocolOutput HandleDeltaAck(NodeId from, uint64_t request_id,
                                const absl::Status& status, NodeId applied_by,
                                const msg::PlaceTaken& taken, uint64_t now) {
    return Input(
        now, [&] { OnDeltaAck(from, request_id, status, applied_by, taken); });
  }
  // A message carried the sender's ring epoch (no effect but the embedder's
  // HandoffOptions::on_stale_ring, called before this returns).
  void NoteEpoch(NodeId from, uint64_t epoch);

  // Adds the gauges to *stats.
  void FillStats(NodeCounters* stats) const;
  // Why each partition still moves, in this node's view.
  std::vector<PartitionMove> Moving(uint64_t now) const;
  // Where writes for `partition` are passed on to (Node::PassesOnTo).
  NodeId PassesOnTo(uint32_t partition) const {
    return proxy_.PassesOnTo(partition);
  }

 private:
  // Gossip ticks that follow any change, and peers per tick.
  static constexpr int kGossipQuietTicks = 20;
  static constexpr size_t kGossipFanout = 3;
  // Runs received at once (beyond, the idlest restarts its set), and runs
  // remembered as received whole for their proposals.
  static constexpr size_t kMaxReceivedRuns = 1024;
  static constexpr size_t kMaxFinishedRuns = 4096;

  using TransferKey = std::pair<uint32_t, NodeId>;  // (partition, to)
  using Phase = HandoffTransfer::Phase;
  // The timers (ProtocolOutput::Arm).
  static constexpr uint32_t kGossipTimer = 1;
  static constexpr uint32_t kTickTimer = 2;
  static constexpr uint32_t kReleaseTimer = 3;
  static constexpr uint32_t kFreeRetiredTimer = 4;

  // The role of `partition` as of now, from the membership state, the
  // transfers and the replicas.
  PartitionRoles::Entry DeriveRole(uint32_t partition) const;
  // Sets in roles_ every role that may have changed since the last call:
  // all of them after a change of the membership state or the replicas,
  // else those of the partitions that began or stopped draining.
  void SyncRoles();
  // Whether this node's receiver accepted its transfer of `partition` and
  // the last forwards drain: the replica is no longer used.
  bool HandingOver(uint32_t partition) const;
  // Whether this node committed to hand its place in `partition` over (its
  // own state names a receiver), or its view shows its place taken. Its
  // receiver may have accepted, and then this node may have passed writes
  // on that its replica lacks: after a restart while draining, say, or
  // after the receiver lost what it accepted. Reads do not use its replica.
  bool Committed(uint32_t partition) const;
  // The replica transfers into this node apply to (PartitionRoles::
  // LocalReplica, as of now: the roles are set only when an input ends).
  Replica* LocalNow(uint32_t partition) const {
    return HandingOver(partition) ? nullptr : replicas_->Get(partition);
  }
  // The hand-off state of `partition`: nullptr if it has none; the second
  // adds an empty one.
  PartitionHandoff* Find(uint32_t partition);
  const PartitionHandoff* Find(uint32_t partition) const;
  PartitionHandoff& Partition(uint32_t partition);
  // The transfer of `partition` to `to`, or nullptr.
  HandoffTransfer* FindTransfer(uint32_t partition, NodeId to);
  // Whether any transfer runs.
  bool Sending() const;
  // Calls f(partition, transfer) for every transfer, by partition, then
  // by receiver.
  template <typename F>
  void ForEachTransfer(F&& f) const {
    for (const auto& [p, ph] : partitions_) {
      for (const auto& [to, t] : ph.transfers()) f(p, t);
    }
  }
  absl::Status OpenReplicas();
  void Start();
  absl::Status Install(const Ring& ring);
  // Opens the replica of every partition this node hosts that has none,
  // and retires those of the others; false if a replica failed to open.
  bool OpenAndRetire();
  bool PassOn(NodeId from, const MessageHeader& header, const Delta& delta,
              const Delta* own);
  void Forward(uint32_t partition, const Delta& delta);
  void SendOwnState(NodeId to, uint32_t partition);
  void OnDeltaAck(NodeId from, uint64_t request_id, const absl::Status& status,
                  NodeId applied_by, const msg::PlaceTaken& taken);
  // The messages (see Step): chunks, completion notices, their
  // acknowledgements, gossip.
  void OnMessage(NodeId from, const MessageHeader& header,
                 msg::TransferChunk& m);
  void OnMessage(NodeId from, const MessageHeader& header,
                 const msg::TransferAck& m);
  void OnMessage(NodeId from, const MessageHeader& header,
                 const msg::HandoffDone& m);
  void OnMessage(NodeId from, const MessageHeader& header,
                 const msg::HandoffDoneAck& m);
  void OnMessage(NodeId from, const MessageHeader& header,
                 const msg::Membership& m);
  // At open: a partition this node does not host but still has keys of
  // (a crash came between a completion and its release) is released.
  void ReleaseIfHeld(uint32_t partition);
  // The replica of `partition` was retired: its keys go, in the background
  // (release_); the runs received into it no longer count.
  void StartRelease(uint32_t partition);
  // ---- Membership and planning (handoff.cc).
  // Tells every peer this node's state (and `also`'s, which its own state
  // refers to).
  void PushOwnState(NodeId also = 0);
  void SendMembership(NodeId to, std::vector<NodeServing> states);
  // Sends the known versions to the next few peers; runs while this view
  // has partitions moving or transfers, and for a while after a change.
  void GossipTick();
  void EnsureGossipTick();
  void MembershipChanged();
  // The transfers this node must send now, from its view and the latest
  // ring: (partition, receiver) -> whether a supplement.
  std::map<TransferKey, bool> Plan();
  // The node to which `node`, a leaver of `partition`, gives its data as a
  // supplement because another node took the place it took (see
  // MembershipState::TwinHolder): that twin, if it serves the partition
  // and is in the latest ring or is a leaver with a lower id; else 0.
  NodeId YieldsTo(NodeId node, uint32_t partition) const;
  // Whether this node, a leaver of `partition` with no joiner left in the
  // ring's list, holds a place whose chain is lost: every node of the
  // ring's list serves it to stay, and the place this node took was
  // handed out again by its giver to a node this view cannot trace (a
  // twin whose links were pruned).
  bool Orphaned(uint32_t partition) const;
  // The leavers of `partition` that pair with joiners (by id) and the
  // joiners free to pair with (in ring order), in this view.
  void Pairing(uint32_t partition, std::vector<NodeId>* leavers,
               std::vector<NodeId>* joiners) const;
  // Re-plans; stops the transfers no longer planned.
  void Replan();
  // Hosting may have changed: opens and retires replicas (OpenAndRetire),
  // and tries again from the timer if one failed to open.
  void HostingChanged();
  // Opens the replica of `partition` (after finishing its release, if one
  // is under way).
  absl::Status OpenReplica(uint32_t partition);

  // ---- Sender (handoff_sender.cc): the transfers (handoff_transfer.h)
  // and what of them commits this node's membership state.
  // What an input of a transfer of `partition` needs, as of now.
  TransferEnv Env(uint32_t partition);
  // Proposes once every set and forward is acknowledged; completes once
  // the receiver accepted and the forwards drained.
  void MaybeComplete(const TransferKey& key);
  void Propose(const TransferKey& key, HandoffTransfer& t);
  void Probe(const TransferKey& key, HandoffTransfer& t);
  void Confirm(const TransferKey& key, HandoffTransfer& t);
  // The encoded HandoffDone of run `t`, for this node's place `mine`.
  std::string Proposal(const HandoffTransfer& t, const ServeEntry& mine,
                       bool supplement) const;
  void Complete(const TransferKey& key);
  // Moves every transfer on that can go on now: starts runs (up to
  // HandoffOptions::max_running), resends what is past its retry time,
  // proposes, completes. Called by the timer and after every re-plan.
  void Progress();
  // The transfer to `to` of `partition` that forward `request_id` belongs
  // to, or nullptr.
  HandoffTransfer* ForwardOwner(NodeId to, uint64_t request_id);

  // ---- Receiver (handoff_receiver.cc).
  // Answers a proposal: OK (accepted, or the data of a supplement taken) or
  // why not.
  absl::Status Accept(NodeId from, const MessageHeader& header,
                      const msg::HandoffDone& m);
  void SendAck(NodeId to, const MessageHeader& header,
               const msg::TransferChunk& chunk, const absl::Status& status);
  // The incarnation a transfer ack for `partition` carries: the node's,
  // changed by every release of the partition since it opened (the
  // replica that took the run's sets so far is gone).
  uint64_t IncarnationOf(uint32_t partition) const;

  // ---- Timers.
  void EnsureTick();
  // The timer: Progress, then retransmits forwards and expires what was
  // not answered.
  void Tick();

  // ---- Release: the release timer ticks release_ while it is not empty.
  void EnsureReleaseTick();
  void ReleaseTick();

  const NodeId self_;
  HostedReplicas* const replicas_;
  NodeCounters* const stats_;
  RequestIds* const ids_;
  // Retired since the last TakeRetired.
  std::vector<uint32_t> retired_;
  const HandoffOptions options_;
  // The current input's time and effects.
  uint64_t now_ = 0;
  ProtocolOutput out_;
  MembershipState membership_;
  // What this node is to each partition (partition_roles.h): set at the
  // end of every input, from this object's state (SyncRoles).
  PartitionRoles* const roles_;
  // What SyncRoles last saw: the generations of the membership state and
  // of the replicas, and the partitions draining.
  uint64_t roles_membership_ = 0;
  uint64_t roles_replicas_ = 0;
  std::vector<uint32_t> roles_draining_;
  uint64_t incarnation_ = 0;
  // The partitions whose keys are being deleted; the incarnation a
  // transfer's acknowledgements carry changes with each release
  // (IncarnationOf).
  PartitionRelease release_;
  // Where deltas go for the partitions this node handed over, and the
  // answers owed for those passed on (ProxyDelta, HandleDeltaAck).
  DeltaProxy proxy_;
  // Each partition's hand-off state (partition_handoff.h): its transfers,
  // the supplements it gave, the proposals it took. A partition has an
  // entry once a transfer of it started or a proposal for it came.
  std::map<uint32_t, PartitionHandoff> partitions_;
  // The runs being received. Runs (sender, run) whose end this node
  // received are remembered there, with their partition, while it keeps
  // that replica: a proposal is accepted only for these.
  SetStreamReceiver receiver_;
  bool hosting_retry_ = false;
  std::set<uint64_t> epochs_reported_;
  bool tick_scheduled_ = false;
  bool release_tick_scheduled_ = false;
  bool gossip_scheduled_ = false;
  // Gossip ticks left after the last change (then only while moving).
  int gossip_quiet_ticks_ = 0;
  size_t gossip_next_peer_ = 0;  // Round-robin over the peers.
  // When each node that asked about a partition this node does not serve
  // was last sent this node's state.
  std::map<NodeId, uint64_t> last_told_;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_HANDOFF_H_
