// HandoffManager: membership gossip, ring installs, planning, proxying and
// stats. The sender, the receiver and the release are in their own files.

#include "cluster/handoff.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace bigset {

HandoffManager::HandoffManager(NodeId self, Store* store,
                               HostedReplicas* replicas, PartitionRoles* roles,
                               NodeCounters* stats, RequestIds* ids,
                               const HandoffOptions& options)
    : self_(self),
      replicas_(replicas),
      stats_(stats),
      ids_(ids),
      options_(options),
      membership_(self, store),
      roles_(roles),
      release_(store, stats),
      proxy_(self, ids),
      receiver_(SetStreamReceiver::Limits{.max_streams = kMaxReceivedRuns,
                                          .max_finished = kMaxFinishedRuns}) {
  roles_->SetView(&membership_);
}

HandoffManager::~HandoffManager() = default;

PartitionRoles::Entry HandoffManager::DeriveRole(uint32_t partition) const {
  PartitionHandoff::RoleFacts facts{
      .has_replica = replicas_->Get(partition) != nullptr,
      .serves = membership_.Serves(partition)};
  // Read only where it decides (it walks this node's entries).
  facts.committed = facts.has_replica && facts.serves && Committed(partition);
  return PartitionHandoff::RoleOf(facts, HandingOver(partition));
}

void HandoffManager::SyncRoles() {
  std::vector<uint32_t> draining;
  for (const auto& [p, ph] : partitions_) {
    if (ph.Draining()) draining.push_back(p);
  }
  if (membership_.generation() != roles_membership_ ||
      replicas_->generation() != roles_replicas_) {
    roles_membership_ = membership_.generation();
    roles_replicas_ = replicas_->generation();
    for (uint32_t p = 0; p < ring().ring_size(); ++p) {
      roles_->Set(p, DeriveRole(p));
    }
  } else if (draining != roles_draining_) {
    for (uint32_t p : draining) roles_->Set(p, DeriveRole(p));
    for (uint32_t p : roles_draining_) roles_->Set(p, DeriveRole(p));
  }
  roles_draining_ = std::move(draining);
}

PartitionHandoff* HandoffManager::Find(uint32_t partition) {
  auto it = partitions_.find(partition);
  return it == partitions_.end() ? nullptr : &it->second;
}

const PartitionHandoff* HandoffManager::Find(uint32_t partition) const {
  auto it = partitions_.find(partition);
  return it == partitions_.end() ? nullptr : &it->second;
}

PartitionHandoff& HandoffManager::Partition(uint32_t partition) {
  return partitions_.try_emplace(partition, partition).first->second;
}

HandoffTransfer* HandoffManager::FindTransfer(uint32_t partition, NodeId to) {
  PartitionHandoff* ph = Find(partition);
  return ph == nullptr ? nullptr : ph->Find(to);
}

bool HandoffManager::Sending() const {
  for (const auto& [p, ph] : partitions_) {
    if (ph.sending()) return true;
  }
  return false;
}

WithOutput<absl::Status> HandoffManager::Open(uint64_t now) {
  return Input(now, [&]() -> absl::Status {
    // Every hosted replica opens now, so a corrupt store fails here.
    BIGSET_RETURN_IF_ERROR(OpenReplicas());
    Start();
    return absl::OkStatus();
  });
}

WithOutput<absl::Status> HandoffManager::InstallRing(const Ring& ring,
                                                     uint64_t now) {
  return Input(now, [&]() -> absl::Status {
    BIGSET_RETURN_IF_ERROR(Install(ring));
    // Once more (the tick retries too): a replica that failed to open may
    // open now.
    (void)OpenAndRetire();
    Start();
    return absl::OkStatus();
  });
}

ProtocolOutput HandoffManager::OnTimer(uint32_t timer, uint64_t now) {
  return Input(now, [&] {
    switch (timer) {
      case kGossipTimer:
        gossip_scheduled_ = false;  // First: a tick arms the next in turn.
        GossipTick();
        break;
      case kTickTimer:
        tick_scheduled_ = false;
        Tick();
        break;
      case kReleaseTimer:
        release_tick_scheduled_ = false;
        ReleaseTick();
        break;
      case kFreeRetiredTimer:
        // From the scheduler, not where retired: a caller up the stack may
        // still have held the replica.
        replicas_->FreeRetired();
        break;
      default:
        assert(false && "not a timer of the hand-off");
    }
  });
}

bool HandoffManager::Hosts(uint32_t partition) const {
  if (partition >= ring().ring_size()) return false;
  return membership_.Serves(partition) ||
         Contains(ring().PreferenceList(partition), self_);
}

absl::Status HandoffManager::Load(const Ring& ring, uint64_t incarnation) {
  incarnation_ = incarnation;
  // A new store's first membership version: its first incarnation, which
  // no earlier store of this node id had (random, see Node::Impl::Open), so
  // that its episodes never match those of a store it replaced.
  BIGSET_RETURN_IF_ERROR(membership_.Load(ring, incarnation));
  // Every role is set at the end of the first input (Open).
  roles_->Reset(membership_.ring().ring_size());
  roles_membership_ = membership_.generation() - 1;
  roles_->CheckWith([this](uint32_t p) { return DeriveRole(p); });
  return release_.Load();
}

void HandoffManager::Start() {
  Replan();
  EnsureReleaseTick();
  // Whatever this node missed while it was down, and what others missed
  // of it: an exchange with every peer.
  for (NodeId peer : membership_.Peers()) SendMembership(peer, {});
  gossip_quiet_ticks_ = kGossipQuietTicks;
  EnsureGossipTick();
}

absl::Status HandoffManager::Install(const Ring& ring) {
  BIGSET_RETURN_IF_ERROR(membership_.InstallRing(ring));
  ++stats_->rings_installed;
  for (NodeId peer : membership_.Peers()) SendMembership(peer, {});
  MembershipChanged();
  return absl::OkStatus();
}

// ---- Gossip.

void HandoffManager::SendMembership(NodeId to,
                                    std::vector<NodeServing> states) {
  const msg::Membership m{.epoch = ring().epoch(),
                          .versions = membership_.Versions(),
                          .states = std::move(states)};
  ++stats_->membership_messages_sent;
  out_.Send(to, EncodeMessage(0, 0, m));
}

void HandoffManager::PushOwnState(NodeId also) {
  std::vector<NodeServing> states = {membership_.own()};
  if (also != 0) {
    if (const NodeServing* other = membership_.StateOf(also)) {
      states.push_back(*other);
    }
  }
  for (NodeId peer : membership_.Peers()) SendMembership(peer, states);
}

void HandoffManager::OnMessage(NodeId from, const MessageHeader&,
                               const msg::Membership& m) {
  NoteEpoch(from, m.epoch);
  bool own_raised = false;
  size_t refused = 0;
  const bool changed = membership_.Merge(m.states, &own_raised, &refused);
  ++stats_->membership_messages_received;
  if (refused > 0) ++stats_->malformed_messages;
  std::vector<NodeServing> newer = membership_.NewerThan(m.versions);
  if (!newer.empty() || membership_.Behind(m.versions)) {
    SendMembership(from, std::move(newer));
  }
  if (own_raised) PushOwnState();
  if (changed || own_raised) MembershipChanged();
}

void HandoffManager::MembershipChanged() {
  ++stats_->membership_changes;
  gossip_quiet_ticks_ = kGossipQuietTicks;
  EnsureGossipTick();
  HostingChanged();
  Replan();
}

void HandoffManager::EnsureGossipTick() {
  if (gossip_scheduled_) return;
  if (gossip_quiet_ticks_ <= 0 && membership_.PartitionsMoving() == 0 &&
      !Sending()) {
    return;
  }
  gossip_scheduled_ = true;
  out_.Arm(kGossipTimer, options_.gossip_micros);
}

void HandoffManager::GossipTick() {
  if (gossip_quiet_ticks_ > 0) --gossip_quiet_ticks_;
  (void)membership_.PruneDeparted();
  const std::vector<NodeId> peers = membership_.Peers();
  for (size_t i = 0; i < std::min(kGossipFanout, peers.size()); ++i) {
    SendMembership(peers[gossip_next_peer_++ % peers.size()], {});
  }
  EnsureGossipTick();
}

void HandoffManager::NoteEpoch(NodeId from, uint64_t epoch) {
  if (epoch <= ring().epoch() || !epochs_reported_.insert(epoch).second) {
    return;
  }
  ++stats_->stale_ring_reports;
  if (options_.on_stale_ring) options_.on_stale_ring(epoch, from);
}

void HandoffManager::SendOwnState(NodeId to, uint32_t partition) {
  (void)partition;
  // The asker's view is behind: this node's state tells it what changed
  // (at most once a gossip interval per asker: a stream of refused
  // requests is not a stream of states).
  const uint64_t now = now_;
  auto [it, added] = last_told_.try_emplace(to, now);
  if (!added) {
    if (now >= it->second && now - it->second < options_.gossip_micros) {
      return;
    }
    it->second = now;
  }
  SendMembership(to, {membership_.own()});
}

// ---- Planning.

std::map<HandoffManager::TransferKey, bool> HandoffManager::Plan() {
  const NodeId me = self_;
  std::map<TransferKey, bool> wanted;
  for (const ServeEntry& e : membership_.own().entries) {
    if (e.departed) continue;
    const uint32_t p = e.partition;
    const std::vector<NodeId>& want = ring().PreferenceList(p);
    const std::optional<MembershipState::Taker> taker =
        membership_.ReplacedBy(p);
    if (taker.has_value()) {
      // This node's place was taken. If the taker holds it still, the run
      // to it goes on (it accepts again: the same place); if it was handed
      // on, this node's data goes to the holder as a supplement.
      if (taker->holder == taker->node) {
        wanted[{p, taker->node}] = false;
      } else if (taker->holder != 0) {
        wanted[{p, taker->holder}] = true;
      }
      continue;
    }
    if (e.handing_to != 0) {
      // Committed: the receiver may have accepted; only its answer tells.
      wanted[{p, e.handing_to}] = false;
      continue;
    }
    // A node that holds a place another node took too (a twin) gives its
    // data to that node as a supplement and lets go: one place needs one
    // joiner, and the twin has it.
    if (const NodeId twin = YieldsTo(me, p); twin != 0) {
      wanted[{p, twin}] = true;
      continue;
    }
    if (Contains(want, me)) continue;
    std::vector<NodeId> leavers;
    std::vector<NodeId> joiners;
    Pairing(p, &leavers, &joiners);
    const size_t i = static_cast<size_t>(
        std::find(leavers.begin(), leavers.end(), me) - leavers.begin());
    if (i < joiners.size()) {
      wanted[{p, joiners[i]}] = false;
    } else if (joiners.empty() && Orphaned(p)) {
      // Nobody is left to take this node's place and its chain is lost:
      // its data goes to every node of the ring's list, so that a write
      // it acknowledged with any one of them stays on two replicas.
      for (NodeId n : want) {
        const PartitionHandoff* ph = Find(p);
        if (ph == nullptr || !ph->Supplied(n)) wanted[{p, n}] = true;
      }
    }
  }
  return wanted;
}

bool HandoffManager::Orphaned(uint32_t p) const {
  const ServeEntry* mine = membership_.Own(p);
  if (mine == nullptr) return false;
  if (mine->took_from == 0) return false;
  const std::vector<NodeId>& serving = membership_.ServingList(p);
  for (NodeId n : ring().PreferenceList(p)) {
    // Every node of the ring's list serves it to stay: one whose place was
    // taken (it drains, and comes back as a joiner), that hands over, or
    // that yields to its twin becomes a joiner soon.
    if (!Contains(serving, n) || membership_.Replaced(n, p) ||
        YieldsTo(n, p) != 0) {
      return false;
    }
    const std::optional<ServeEntry> entry = membership_.EntryOf(n, p);
    if (!entry.has_value() || entry->handing_to != 0) return false;
  }
  // The place it took: its giver serves that episode no more, and no
  // other node that took it is known (else it would yield to that twin).
  const std::optional<ServeEntry> giver =
      membership_.EntryOf(mine->took_from, p);
  return !giver.has_value() || giver->since != mine->took_since;
}

void HandoffManager::Pairing(uint32_t p, std::vector<NodeId>* leavers,
                             std::vector<NodeId>* joiners) const {
  // The leavers whose place nobody took, who hand over to nobody and yield
  // to no twin, by id, pair with the joiners nobody hands over to, in
  // ring order.
  const std::vector<NodeId>& want = ring().PreferenceList(p);
  const std::vector<NodeId>& serving = membership_.ServingList(p);
  for (NodeId n : serving) {
    if (Contains(want, n) || membership_.Replaced(n, p)) continue;
    const std::optional<ServeEntry> entry = membership_.EntryOf(n, p);
    if (entry.has_value() && entry->handing_to != 0) continue;
    if (YieldsTo(n, p) != 0) continue;
    leavers->push_back(n);
  }
  std::sort(leavers->begin(), leavers->end());
  for (NodeId n : want) {
    if (!Contains(serving, n) && !membership_.Claimed(p, n)) {
      joiners->push_back(n);
    }
  }
}

NodeId HandoffManager::YieldsTo(NodeId node, uint32_t partition) const {
  const NodeId twin = membership_.TwinHolder(node, partition);
  if (twin == 0) return 0;
  const std::vector<NodeId>& serving = membership_.ServingList(partition);
  if (!Contains(serving, twin)) return 0;
  // A leaving twin yields to one the ring keeps. Of two twins on the same
  // side (both leave, or the ring keeps both: a place handed out twice
  // is then two of the ring's places) the one with the higher id yields,
  // so that they never hand their data to each other; a twin of the ring
  // that yielded is then a joiner like any other.
  const std::vector<NodeId>& want = ring().PreferenceList(partition);
  const bool mine_kept = Contains(want, node);
  const bool twin_kept = Contains(want, twin);
  if (mine_kept != twin_kept) return twin_kept ? twin : 0;
  return twin < node ? twin : 0;
}

void HandoffManager::Replan() {
  const std::map<TransferKey, bool> wanted = Plan();
  for (auto& [partition, ph] : partitions_) {
    const uint32_t p = partition;  // Clang: a lambda takes no binding.
    std::erase_if(ph.transfers(), [&](const auto& entry) {
      const auto& [to, t] = entry;
      auto w = wanted.find({p, to});
      if (PartitionHandoff::Keeps(t, w == wanted.end()
                                         ? std::nullopt
                                         : std::optional<bool>(w->second))) {
        return false;
      }
      ++stats_->handoffs_cancelled;
      return true;
    });
  }
  for (const auto& [key, supplement] : wanted) {
    Partition(key.first).Add(key.second, supplement, &options_, now_);
  }
  EnsureTick();
  EnsureGossipTick();
  Progress();
}

absl::Status HandoffManager::OpenReplicas() {
  for (uint32_t p = 0; p < ring().ring_size(); ++p) {
    if (!Hosts(p)) {
      ReleaseIfHeld(p);
      continue;
    }
    BIGSET_RETURN_IF_ERROR(OpenReplica(p));
  }
  return absl::OkStatus();
}

absl::Status HandoffManager::OpenReplica(uint32_t partition) {
  BIGSET_RETURN_IF_ERROR(release_.FinishNow(partition));
  return replicas_->Open(partition, ring().PartitionsOf(self_).size());
}

bool HandoffManager::OpenAndRetire() {
  bool all_open = true;
  for (uint32_t p = 0; p < replicas_->size(); ++p) {
    const bool want = Hosts(p);
    if (replicas_->Get(p) != nullptr && !want) {
      const bool first = replicas_->Retire(p);
      StartRelease(p);
      retired_.push_back(p);
      // Freed from the scheduler, not here: a caller up the stack may still
      // hold the replica.
      if (first) out_.Arm(kFreeRetiredTimer, 0);
    } else if (replicas_->Get(p) == nullptr && want) {
      // A failure leaves the partition without a replica here until the
      // timer calls again; requests for it are refused meanwhile (the
      // other replicas serve it).
      all_open = OpenReplica(p).ok() && all_open;
    }
  }
  return all_open;
}

void HandoffManager::HostingChanged() {
  if (!OpenAndRetire()) {
    hosting_retry_ = true;
    EnsureTick();
  }
  // A partition hosted here again is served from here, not passed on.
  proxy_.ForgetWhere([&](uint32_t p) { return Hosts(p) && !HandingOver(p); });
}

bool HandoffManager::HandingOver(uint32_t partition) const {
  // A supplement too: the holder took its data, and what reaches this node
  // from now on goes on to it (applied here, it would be lost when this
  // node lets go).
  const PartitionHandoff* ph = Find(partition);
  return ph != nullptr && ph->Draining();
}

bool HandoffManager::Committed(uint32_t partition) const {
  for (const ServeEntry& e : membership_.own().entries) {
    if (e.partition == partition && !e.departed && e.handing_to != 0) {
      return true;
    }
  }
  return membership_.ReplacedBy(partition).has_value();
}

bool HandoffManager::PassOn(NodeId from, const MessageHeader& header,
                            const Delta& delta, const Delta* own) {
  std::optional<DeltaProxy::Outgoing> out =
      proxy_.PassOn(from, header, delta, own, now_);
  if (!out.has_value()) return false;
  // Expires it if no answer comes (a repair awaits none).
  if (header.type != MessageType::kRepair) EnsureTick();
  ++stats_->handoff_deltas_proxied;
  out_.Send(out->to, std::move(out->bytes));
  return true;
}

// ---- Release.

void HandoffManager::StartRelease(uint32_t partition) {
  // Runs received into this replica no longer count for a completion, and
  // no chunk of a run in progress may be applied to a replica opened later
  // under what this one received. The receiver's incarnation for the
  // partition changes (release_ counts the release), so that a sender of a
  // run in progress sends it all again (its sets finished so far went to
  // this replica).
  receiver_.ForgetPartition(partition);
  if (release_.Start(partition)) EnsureReleaseTick();
}

void HandoffManager::ReleaseIfHeld(uint32_t partition) {
  if (!release_.Releasing(partition) && release_.Holds(partition)) {
    StartRelease(partition);
  }
}

void HandoffManager::EnsureReleaseTick() {
  if (release_tick_scheduled_ || release_.empty()) return;
  release_tick_scheduled_ = true;
  out_.Arm(kReleaseTimer, options_.release_tick_micros);
}

void HandoffManager::ReleaseTick() {
  if (release_.empty()) return;
  release_.Tick(options_.release_keys_per_tick);
  EnsureReleaseTick();
}

// ---- Timers.

void HandoffManager::EnsureTick() {
  if (tick_scheduled_) return;
  if (!Sending() && receiver_.empty() && !proxy_.awaiting() &&
      !hosting_retry_) {
    return;
  }
  tick_scheduled_ = true;
  out_.Arm(kTickTimer, options_.retry_micros);
}

void HandoffManager::Tick() {
  const uint64_t now = now_;
  const uint64_t retry = options_.retry_micros;
  if (hosting_retry_) {
    hosting_retry_ = false;
    HostingChanged();
  }
  Progress();
  ForEachTransfer(
      [&](uint32_t, const HandoffTransfer& t) { t.ResendForwards(&out_); });
  proxy_.Expire(now, 50 * retry);
  receiver_.Expire(now, options_.receiver_idle_micros);
  EnsureTick();
}

// ---- Stats.

void HandoffManager::FillStats(NodeCounters* stats) const {
  stats->handoffs_pending = 0;
  stats->handoffs_running = 0;
  ForEachTransfer([&](uint32_t, const HandoffTransfer& t) {
    if (t.phase() == Phase::kWaiting) {
      ++stats->handoffs_pending;
    } else {
      ++stats->handoffs_running;
    }
    stats->handoff_forward_bytes += t.forward_bytes();
  });
  stats->handoffs_incoming = receiver_.size();
  stats->partitions_releasing = release_.size();
  stats->ring_epoch = ring().epoch();
  stats->partitions_moving = membership_.PartitionsMoving();
  stats->membership_version = membership_.own().version;
}

std::vector<PartitionMove> HandoffManager::Moving(uint64_t now) const {
  std::vector<PartitionMove> out;
  for (uint32_t p = 0; p < ring().ring_size(); ++p) {
    const PartitionHandoff* ph = Find(p);
    const bool sending = ph != nullptr && ph->sending();
    if (!membership_.Moving(p) && !sending) continue;
    PartitionMove move;
    move.partition = p;
    move.serving = membership_.ServingList(p);
    move.target = ring().PreferenceList(p);
    if (sending) {
      const auto& [to, t] = *ph->transfers().begin();
      move.peer = to;
      move.state = t.Describe();
      move.since_micros = now >= t.phase_since() ? now - t.phase_since() : 0;
    } else if (membership_.Serves(p) && !Contains(move.target, self_)) {
      // Why no transfer runs: the pairing as this view sees it.
      std::vector<NodeId> leavers;
      std::vector<NodeId> joiners;
      Pairing(p, &leavers, &joiners);
      move.state = "leaving: waiting for a joiner to pair with (leavers";
      for (NodeId n : leavers) absl::StrAppend(&move.state, " ", n);
      absl::StrAppend(&move.state, "; free joiners");
      for (NodeId n : joiners) absl::StrAppend(&move.state, " ", n);
      if (joiners.empty()) absl::StrAppend(&move.state, " none");
      absl::StrAppend(&move.state, ")");
    } else if (!membership_.Serves(p) && Contains(move.target, self_)) {
      move.state = "joining: waiting for a sender";
      receiver_.ForEach([&](const SetStreamReceiver::View& in) {
        if (in.partition == p) {
          move.peer = in.from;
          move.state = absl::StrCat("receiving from ", in.from, " (set #",
                                    in.index, ")");
          move.since_micros = now >= in.last_active ? now - in.last_active : 0;
        }
      });
    } else {
      move.state = "waiting for other nodes' transfers";
    }
    out.push_back(std::move(move));
  }
  return out;
}

}  // namespace bigset
