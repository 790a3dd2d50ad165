#include "cluster/partition_handoff.h"

#include "absl/strings/str_cat.h"

namespace bigset {

PartitionRoles::Entry PartitionHandoff::RoleOf(const RoleFacts& facts,
                                               bool draining) {
  PartitionRole role = PartitionRole::kServing;
  if (!facts.has_replica) {
    role = PartitionRole::kReleased;
  } else if (draining) {
    role = PartitionRole::kDraining;
  } else if (!facts.serves) {
    role = PartitionRole::kReceiving;
  } else if (facts.committed) {
    role = PartitionRole::kCommitted;
  }
  return {role, facts.serves};
}

HandoffTransfer* PartitionHandoff::Find(NodeId to) {
  auto it = transfers_.find(to);
  return it == transfers_.end() ? nullptr : &it->second;
}

bool PartitionHandoff::Add(NodeId to, bool supplement,
                           const HandoffOptions* options, uint64_t now) {
  return transfers_.try_emplace(to, partition_, to, supplement, options, now)
      .second;
}

bool PartitionHandoff::Draining() const {
  for (const auto& [to, t] : transfers_) {
    if (t.phase() == Phase::kDraining) return true;
  }
  return false;
}

bool PartitionHandoff::Keeps(const HandoffTransfer& t,
                             std::optional<bool> planned) {
  // A proposal in flight may come back accepted (the commitment in this
  // node's state makes the plan keep it anyway, unless the receiver's
  // refusal cleared it).
  return t.phase() == Phase::kProposing || t.phase() == Phase::kDraining ||
         planned == t.supplement();
}

PartitionHandoff::OnTickDo PartitionHandoff::OnTick(const HandoffTransfer& t,
                                                    const TickFacts& f,
                                                    uint64_t now) {
  // Nothing of its own to hand over (it completed before a restart).
  if (!f.serves) return OnTickDo::kGiveUp;
  if (!t.supplement() && t.phase() != Phase::kProposing &&
      t.phase() != Phase::kDraining && f.handing_to == t.to() &&
      !f.receiver_wanted && !f.replaced) {
    return OnTickDo::kProbe;
  }
  switch (t.phase()) {
    case Phase::kWaiting:
      return f.may_start && f.has_replica ? OnTickDo::kStart
                                          : OnTickDo::kNothing;
    case Phase::kStreaming:
    case Phase::kEnding:
      return OnTickDo::kContinue;
    case Phase::kSetsDone:
      return !t.Waiting(now) && t.forwards_empty() ? OnTickDo::kPropose
                                                   : OnTickDo::kNothing;
    case Phase::kProposing:
      // A receiver that left the ring and has not answered for long is
      // gone: whatever it did, this node still holds the data and keeps
      // serving; the transfer is planned again.
      if (t.silent() > 100 && !f.receiver_member) return OnTickDo::kGiveUp;
      return t.Due(now) ? OnTickDo::kResend : OnTickDo::kNothing;
    case Phase::kDraining:
      if (!t.forwards_empty()) return OnTickDo::kNothing;
      if (t.control_in_flight()) {
        return t.Due(now) ? OnTickDo::kResend : OnTickDo::kNothing;
      }
      // Forwards drained, or a failed completion write: again.
      return OnTickDo::kComplete;
  }
  return OnTickDo::kNothing;
}

PartitionHandoff::AfterAnswerDo PartitionHandoff::AfterAnswer(
    const HandoffTransfer& t, uint64_t now) {
  if (!t.forwards_empty()) return AfterAnswerDo::kNothing;
  if (t.phase() == Phase::kDraining) {
    if (t.confirmed()) return AfterAnswerDo::kComplete;
    return t.control_in_flight() ? AfterAnswerDo::kNothing
                                 : AfterAnswerDo::kConfirm;
  }
  return t.phase() == Phase::kSetsDone && !t.Waiting(now)
             ? AfterAnswerDo::kPropose
             : AfterAnswerDo::kNothing;
}

bool PartitionHandoff::TakeProposal(NodeId sender, uint64_t episode,
                                    uint64_t run) {
  uint64_t& latest = latest_proposal_[{sender, episode}];
  if (run < latest) return false;
  latest = run;
  return true;
}

std::pair<PartitionHandoff::AcceptDo, absl::Status> PartitionHandoff::Accept(
    uint32_t p, const ProposalFacts& f) {
  const auto refuse = [](absl::Status status) {
    return std::make_pair(AcceptDo::kRefuse, std::move(status));
  };
  if (!f.run_received) {
    return refuse(absl::FailedPreconditionError(
        absl::StrCat("node ", f.self, " did not keep run ", f.run,
                     " of partition ", p, "; send the partition again")));
  }
  if (f.supplement) {
    // Data only, for a node whose place this node (or one before it) took.
    if (!f.serving_took.has_value()) {
      return refuse(absl::AbortedError(
          absl::StrCat("node ", f.self, " does not serve partition ", p)));
    }
    return {AcceptDo::kSync, absl::OkStatus()};
  }
  if (f.serving_took.has_value()) {
    // The same place again (the sender ran again after a restart) is
    // accepted again; any other is not this node's to take.
    if (*f.serving_took != std::make_pair(f.from, f.episode)) {
      return refuse(absl::AlreadyExistsError(
          absl::StrCat("node ", f.self, " already serves partition ", p)));
    }
    return {AcceptDo::kSync, absl::OkStatus()};
  }
  if (f.took_and_handed_on) {
    // Taken before and handed on since: the sender's data goes to the
    // holder (its state shows where).
    return refuse(absl::AlreadyExistsError(absl::StrCat(
        "node ", f.self, " took and handed on this place of partition ", p)));
  }
  if (!f.placed_here) {
    return refuse(absl::AbortedError(absl::StrCat(
        "the latest ring does not place partition ", p, " on node ", f.self)));
  }
  return {AcceptDo::kBeginServing, absl::OkStatus()};
}

}  // namespace bigset
