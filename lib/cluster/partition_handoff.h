// PartitionHandoff: what a node's hand-off keeps of one partition, and the
// decisions that follow from it. Internal header (handoff.h gives the
// protocol; docs/ARCHITECTURE.md, "Membership and hand-off").
//
// One partition's hand-off state lives here, in one value:
//   - the transfers this node sends of it, one per receiver
//     (HandoffTransfer, handoff_transfer.h), in receiver order;
//   - the receivers an orphaned leaver's supplements reached (it lets go
//     once every node of the ring's list has its data);
//   - the latest proposal (run) each sender made for it, per episode of
//     the sender's place: an older proposal arriving late is refused.
//
// The decisions are functions of that state and of facts the manager
// reads from its membership view and its replicas as of the input, passed
// in as plain values, so that each is tested alone (a table of facts and
// the expected decision, partition_handoff_test.cc):
//   - RoleOf: the partition's role on this node (partition_roles.h);
//   - OnTick: what one transfer does next on the hand-off's tick;
//   - AfterAnswer: what a transfer whose forwards or end were acknowledged
//     does next (propose, confirm, complete);
//   - Keeps: whether a re-plan keeps a transfer;
//   - Accept: how the receiving side answers a proposal.
// The manager carries the decisions out (sends through the transfer,
// membership writes, completion), in the order of its partitions and, in
// each, of the receivers.
//
// No I/O. Thread-safety: not thread-safe; owned by the node's
// HandoffManager.

#ifndef BIGSET_LIB_CLUSTER_PARTITION_HANDOFF_H_
#define BIGSET_LIB_CLUSTER_PARTITION_HANDOFF_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "bigset/cluster/node_options.h"
#include "cluster/handoff_transfer.h"
#include "cluster/partition_roles.h"

namespace bigset {

class PartitionHandoff {
 public:
  using Transfers = std::map<NodeId, HandoffTransfer>;  // By receiver.
  using Phase = HandoffTransfer::Phase;

  explicit PartitionHandoff(uint32_t partition) : partition_(partition) {}
  PartitionHandoff(const PartitionHandoff&) = delete;
  PartitionHandoff& operator=(const PartitionHandoff&) = delete;

  uint32_t partition() const { return partition_; }

  // ---- The role.
  // What the manager knows of the partition, as of now.
  struct RoleFacts {
    bool has_replica = false;  // This node keeps a replica of it.
    bool serves = false;       // Its own membership state says it serves.
    // It committed to hand its place over, or its view shows it taken
    // (HandoffManager::Committed).
    bool committed = false;
  };
  // The role: released without a replica; else draining while a transfer
  // of it was accepted (Draining); else receiving while not serving; else
  // committed or serving.
  static PartitionRoles::Entry RoleOf(const RoleFacts& facts, bool draining);
  PartitionRoles::Entry Role(const RoleFacts& facts) const {
    return RoleOf(facts, Draining());
  }

  // ---- The transfers.
  const Transfers& transfers() const { return transfers_; }
  Transfers& transfers() { return transfers_; }
  bool sending() const { return !transfers_.empty(); }
  // The transfer to `to`, or nullptr.
  HandoffTransfer* Find(NodeId to);
  // A new transfer to `to`, unless one runs already (then nothing);
  // true if added. `options` (not owned) outlives it.
  bool Add(NodeId to, bool supplement, const HandoffOptions* options,
           uint64_t now);
  // Ends the transfer to `to` (nothing if none).
  void Erase(NodeId to) { transfers_.erase(to); }
  // Whether a transfer of it was accepted (a supplement too) and its last
  // forwards drain: the replica is no longer used, and what arrives for
  // the partition is passed on.
  bool Draining() const;

  // Whether a re-plan keeps `t`: a proposal in flight is answered first,
  // and a commitment made is kept until answered; else only as planned
  // (`planned`: planned, and whether as a supplement).
  static bool Keeps(const HandoffTransfer& t, std::optional<bool> planned);

  // What the manager reads of the partition, as of deciding for one
  // transfer (to t.to()), on the tick.
  struct TickFacts {
    bool serves = false;           // By its own membership state.
    NodeId handing_to = 0;         // Whom its own state commits the place to.
    bool receiver_wanted = false;  // The latest ring lists the receiver.
    bool replaced = false;         // Its view shows this node's place taken.
    bool receiver_member = false;  // The receiver is in the latest ring.
    bool may_start = false;    // Fewer transfers run than the options allow.
    bool has_replica = false;  // This node's replica of it is open.
  };
  enum class OnTickDo {
    kNothing,
    kGiveUp,    // Drop it (nothing of its own to hand over, or a silent
                // receiver that left the ring); uncommit first.
    kProbe,     // Committed to a receiver the ring no longer wants: ask.
    kStart,     // Its turn: a first run.
    kContinue,  // Streaming: resend, read on.
    kPropose,   // Every set and forward acknowledged.
    kResend,    // The proposal or confirmation is due again.
    kComplete,  // Accepted and drained (or a failed completion write).
  };
  static OnTickDo OnTick(const HandoffTransfer& t, const TickFacts& facts,
                         uint64_t now);
  // After an acknowledgement (of the end, of the last forward): propose,
  // confirm or complete, if the transfer's state allows it now.
  enum class AfterAnswerDo { kNothing, kPropose, kConfirm, kComplete };
  static AfterAnswerDo AfterAnswer(const HandoffTransfer& t, uint64_t now);

  // ---- Supplements (an orphaned leaver, HandoffManager::Orphaned).
  bool Supplied(NodeId to) const { return supplied_.contains(to); }
  void NoteSupplied(NodeId to) { supplied_.insert(to); }
  void ForgetSupplied() { supplied_.clear(); }

  // ---- Receiving.
  // Records proposal `run` of `sender` for its place of episode `episode`;
  // false, recording nothing, if a later one came first.
  bool TakeProposal(NodeId sender, uint64_t episode, uint64_t run);
  // What the receiving side knows when a proposal of `from` arrives.
  struct ProposalFacts {
    NodeId self = 0;
    NodeId from = 0;
    uint64_t run = 0;         // The proposal's request id.
    uint64_t episode = 0;     // The sender's place's.
    bool supplement = false;  // Data only, for a place taken before.
    // This node received the run whole into the replica it keeps.
    bool run_received = false;
    // This node's own entry, if it serves the partition: whom it took the
    // place from, and that place's episode.
    std::optional<std::pair<NodeId, uint64_t>> serving_took;
    // It took this very place before and handed it on since.
    bool took_and_handed_on = false;
    bool placed_here = false;  // The latest ring lists this node.
  };
  enum class AcceptDo {
    kRefuse,        // With the status.
    kBeginServing,  // Take the sender's place (a synced write).
    kSync,          // Accepted again, or a supplement's data: sync first.
  };
  static std::pair<AcceptDo, absl::Status> Accept(uint32_t partition,
                                                  const ProposalFacts& facts);

 private:
  const uint32_t partition_;
  Transfers transfers_;
  std::set<NodeId> supplied_;
  // (sender, episode) -> the latest run it proposed.
  std::map<std::pair<NodeId, uint64_t>, uint64_t> latest_proposal_;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_PARTITION_HANDOFF_H_
