// HandoffManager, the sending side: its transfers (handoff_transfer.h)
// and what of them commits this node's membership state: proposals,
// probes, completion (see handoff.h for the phases).

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cluster/handoff.h"

namespace bigset {

TransferEnv HandoffManager::Env(uint32_t partition) {
  return TransferEnv{.now = now_,
                     .epoch = ring().epoch(),
                     .replica = replicas_->Get(partition),
                     .ids = ids_,
                     .stats = stats_,
                     .out = &out_};
}

void HandoffManager::OnMessage(NodeId from, const MessageHeader& header,
                               const msg::TransferAck& m) {
  HandoffTransfer* t = FindTransfer(header.partition, from);
  if (t == nullptr) return;
  if (t->OnAck(Env(header.partition), header.request_id, m) ==
      HandoffTransfer::AckResult::kSetsDone) {
    MaybeComplete({header.partition, from});
  }
}

void HandoffManager::Forward(uint32_t partition, const Delta& delta) {
  PartitionHandoff* ph = Find(partition);
  if (ph == nullptr || !ph->sending()) return;
  // Every delta the replica applies comes here: one env for the
  // partition's transfers, and none when no transfer runs.
  const TransferEnv env = Env(partition);
  for (auto& [to, t] : ph->transfers()) t.Forward(env, delta);
}

HandoffTransfer* HandoffManager::ForwardOwner(NodeId to, uint64_t request_id) {
  for (auto& [p, ph] : partitions_) {
    HandoffTransfer* t = ph.Find(to);
    if (t != nullptr && t->HasForward(request_id)) return t;
  }
  return nullptr;
}

void HandoffManager::OnDeltaAck(NodeId from, uint64_t request_id,
                                const absl::Status& status, NodeId applied_by,
                                const msg::PlaceTaken& taken) {
  std::optional<DeltaProxy::Outgoing> answer;
  if (proxy_.OnAck(from, request_id, status, applied_by, taken, &answer)) {
    if (answer.has_value()) out_.Send(answer->to, std::move(answer->bytes));
    return;
  }
  HandoffTransfer* t = ForwardOwner(from, request_id);
  if (t == nullptr) return;
  // Anything but a success or a rejection of the delta itself (it can never
  // apply there) keeps it, retransmitted by the tick: a receiver without
  // its replica yet, a failed write there.
  if (!status.ok() && !absl::IsInvalidArgument(status)) return;
  t->ForwardAcked(request_id);
  MaybeComplete({t->partition(), t->to()});
}

void HandoffManager::MaybeComplete(const TransferKey& key) {
  HandoffTransfer* t = FindTransfer(key.first, key.second);
  if (t == nullptr) return;
  switch (PartitionHandoff::AfterAnswer(*t, now_)) {
    case PartitionHandoff::AfterAnswerDo::kNothing:
      break;
    case PartitionHandoff::AfterAnswerDo::kPropose:
      Propose(key, *t);
      break;
    case PartitionHandoff::AfterAnswerDo::kConfirm:
      Confirm(key, *t);
      break;
    case PartitionHandoff::AfterAnswerDo::kComplete:
      Complete(key);
      break;
  }
}

void HandoffManager::Propose(const TransferKey& key, HandoffTransfer& t) {
  const ServeEntry* mine = membership_.Own(key.first);
  if (mine == nullptr) return;  // Not serving: Progress drops the transfer.

  if (!t.supplement() && mine->handing_to != key.second) {
    // Committed first, synced: whatever happens to this node from now on,
    // it hands over to this receiver only, until the receiver refuses.
    if (!membership_.SetHandingTo(key.first, key.second).ok()) {
      t.BackOff(now_ + options_.retry_micros);
      return;
    }
    PushOwnState();
    mine = membership_.Own(key.first);
  }
  t.Propose(Env(key.first), Proposal(t, *mine, t.supplement()));
}

std::string HandoffManager::Proposal(const HandoffTransfer& t,
                                     const ServeEntry& mine,
                                     bool supplement) const {
  const msg::HandoffDone done{.epoch = ring().epoch(),
                              .from_node = self_,
                              .to_node = t.to(),
                              .episode = mine.since,
                              .supplement = supplement};
  return EncodeMessage(t.run(), t.partition(), done);
}

void HandoffManager::Confirm(const TransferKey& key, HandoffTransfer& t) {
  // The same proposal again: the receiver answers it only after a synced
  // write, so what it was forwarded after accepting is durable there
  // before this node lets go of its copy.
  const ServeEntry* mine = membership_.Own(key.first);
  if (mine == nullptr) return;
  t.Confirm(Env(key.first), Proposal(t, *mine, t.supplement()));
}

void HandoffManager::Probe(const TransferKey& key, HandoffTransfer& t) {
  const ServeEntry* mine = membership_.Own(key.first);
  if (mine == nullptr) return;
  // A fresh request id: the receiver cannot have finished a run under it,
  // so it answers with its state and never accepts; and no earlier
  // proposal of this node is accepted there after this one.
  const TransferEnv env = Env(key.first);
  t.StartProbe(env);
  t.SendProbe(env, Proposal(t, *mine, /*supplement=*/false));
}

void HandoffManager::OnMessage(NodeId from, const MessageHeader& header,
                               const msg::HandoffDoneAck& m) {
  NoteEpoch(from, m.epoch);
  if (m.from_node != self_ || m.to_node != from) return;
  const TransferKey key{header.partition, from};
  HandoffTransfer* found = FindTransfer(key.first, key.second);
  if (found == nullptr) return;
  HandoffTransfer& t = *found;
  const HandoffTransfer::Answer answer = t.TakeAnswer(header.request_id);
  if (answer == HandoffTransfer::Answer::kIgnored) return;
  if (answer == HandoffTransfer::Answer::kConfirmation) {
    if (m.status.ok()) {
      t.Confirmed();
      Complete(key);
    } else {
      // The receiver restarted since it accepted: what it was forwarded
      // may be lost. The whole run again (it accepts the same place).
      proxy_.Forget(key.first);
      t.StartRun(Env(key.first));
    }
    return;
  }
  // The receiver's state, as of its answer: an acceptance shows in it.
  bool own_raised = false;
  const bool changed = membership_.Merge(m.states, &own_raised);
  if (t.probe() && !m.status.ok()) {
    t.ProbeAnswered(now_);
    if (membership_.ReplacedBy(key.first).has_value()) {
      // It took this node's place after all: the hand-over goes on.
      t.StartRun(Env(key.first));
    } else if (membership_.SetHandingTo(key.first, 0).ok()) {
      PushOwnState();
    }
    MembershipChanged();
    return;
  }
  if (m.status.ok()) {
    // The receiver holds this node's place (or took the supplement): this
    // replica is no longer used (writes for it are passed on), and once the
    // forwards drain the transfer completes.
    t.Accepted(now_);
    proxy_.MovedTo(key.first, from);
    MaybeComplete(key);
  } else if (absl::IsAlreadyExists(m.status) || absl::IsAborted(m.status)) {
    // The receiver serves the partition in another place, or will not take
    // it: unless its state shows it took this node's place after all, the
    // commitment goes and the transfer is planned again.
    t.Refused(now_);
    const ServeEntry* mine = membership_.Own(key.first);
    if (!membership_.ReplacedBy(key.first).has_value() && mine != nullptr &&
        mine->handing_to == from) {
      if (membership_.SetHandingTo(key.first, 0).ok()) PushOwnState();
    }
    MembershipChanged();
    return;
  } else {
    // The receiver no longer has what this run sent: send it again.
    t.StartRun(Env(key.first));
    t.BackOff(now_ + options_.retry_micros);
  }
  if (changed || own_raised) MembershipChanged();
}

void HandoffManager::Complete(const TransferKey& key) {
  PartitionHandoff* ph = Find(key.first);
  const HandoffTransfer* t = ph == nullptr ? nullptr : ph->Find(key.second);
  if (t == nullptr) return;
  if (t->supplement()) {
    // An orphaned leaver's supplement: it lets go after the last one.
    ph->NoteSupplied(key.second);
    bool more = false;
    for (const auto& [k, supplement] : Plan()) {
      more |= k.first == key.first && k != key && supplement;
    }
    if (more) {
      ph->Erase(key.second);
      ++stats_->handoffs_done;
      Replan();
      return;
    }
  }
  // Persisted first: if the write fails nothing changes (writes here stay
  // paused) and the tick tries again.
  if (!membership_.StopServing(key.first).ok()) {
    EnsureTick();
    return;
  }
  ph->ForgetSupplied();
  ph->Erase(key.second);
  ++stats_->handoffs_done;
  // The receiver's state (its acceptance) travels with this node's, so no
  // view loses this node's place before it sees the receiver in it.
  PushOwnState(key.second);
  MembershipChanged();
}

void HandoffManager::Progress() {
  const uint64_t now = now_;
  size_t running = 0;
  std::vector<TransferKey> to_complete;
  std::vector<TransferKey> given_up;
  ForEachTransfer([&](uint32_t, const HandoffTransfer& t) {
    running += t.phase() != Phase::kWaiting;
  });
  const std::vector<NodeId>& members = ring().nodes();
  for (auto& [p, ph] : partitions_) {
    for (auto& [to, t] : ph.transfers()) {
      // As of this transfer: one before it may have committed this node.
      const ServeEntry* mine = membership_.Own(p);
      const PartitionHandoff::TickFacts facts{
          .serves = membership_.Serves(p),
          .handing_to = mine == nullptr ? 0 : mine->handing_to,
          .receiver_wanted = Contains(ring().PreferenceList(p), to),
          .replaced = membership_.ReplacedBy(p).has_value(),
          .receiver_member = Contains(members, to),
          .may_start = running < options_.max_running,
          .has_replica = replicas_->Get(p) != nullptr};
      using Do = PartitionHandoff::OnTickDo;
      switch (PartitionHandoff::OnTick(t, facts, now)) {
        case Do::kNothing:
          break;
        case Do::kGiveUp:
          given_up.push_back({p, to});
          break;
        case Do::kProbe:
          Probe({p, to}, t);
          break;
        case Do::kStart:
          ++running;
          t.StartRun(Env(p));
          break;
        case Do::kContinue:
          t.Continue(Env(p));
          break;
        case Do::kPropose:
          Propose({p, to}, t);
          break;
        case Do::kResend:
          t.Resend(Env(p));
          break;
        case Do::kComplete:
          to_complete.push_back({p, to});
          break;
      }
    }
  }
  for (const TransferKey& key : to_complete) MaybeComplete(key);
  for (const TransferKey& key : given_up) {
    const ServeEntry* mine = membership_.Own(key.first);
    if (mine != nullptr && mine->handing_to == key.second &&
        !membership_.SetHandingTo(key.first, 0).ok()) {
      continue;
    }
    Partition(key.first).Erase(key.second);
    ++stats_->handoffs_cancelled;
  }
  if (!given_up.empty()) MembershipChanged();
}

}  // namespace bigset
