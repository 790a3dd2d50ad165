// HandoffManager, the sending side: a transfer's runs, forwards, proposal
// and completion (see handoff.h for the phases).

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cluster/handoff.h"
#include "cluster/set_stream.h"

namespace bigset {

Replica* HandoffManager::SenderReplica(uint32_t partition) {
  return HostedReplica(partition);
}

void HandoffManager::SetPhase(Outgoing& out, Phase phase) {
  if (out.phase != phase) out.phase_since = now_;
  out.phase = phase;
}

void HandoffManager::StartRun(const TransferKey& key, Outgoing& out) {
  if (out.runs > 0) ++stats_->handoff_restarts;
  ++out.runs;
  out.run = ids_->Next();
  out.incarnation = 0;
  out.confirmed = false;
  out.probe = false;
  SetPhase(out, Phase::kStreaming);
  out.index = 0;
  out.have_set = false;
  out.set.clear();
  out.reader.reset();
  out.inflight.clear();
  out.window.Restart();
  out.backoff_until = 0;
  // Deltas forwarded before this run are in the snapshots it sends; the
  // ones not yet acknowledged are still retransmitted (harmless).
  NextSet(key, out);
}

void HandoffManager::NextSet(const TransferKey& key, Outgoing& out) {
  Replica* replica = SenderReplica(key.first);
  if (replica == nullptr) {
    out.backoff_until = now_ + options_.retry_micros;
    return;
  }
  std::optional<std::string> after;
  if (out.have_set) after = out.set;
  absl::StatusOr<std::vector<std::string>> sets =
      replica->ListSets(std::move(after), 1);
  if (!sets.ok()) {
    out.backoff_until = now_ + options_.retry_micros;
    return;
  }
  if (sets->empty()) {
    msg::TransferChunk end;
    end.epoch = ring().epoch();
    end.index = out.index;
    end.end = true;
    out.inflight = EncodeMessage(out.run, key.first, end);
    out.inflight_last = false;
    SetPhase(out, Phase::kEnding);
    out.last_send = now_;
    out_.Send(key.second, out.inflight);
    return;
  }
  out.set = std::move((*sets)[0]);
  out.have_set = true;
  OpenSet(key, out);
}

void HandoffManager::OpenSet(const TransferKey& key, Outgoing& out) {
  Replica* replica = SenderReplica(key.first);
  SetReadOptions ro;
  ro.batch_size = options_.chunk_elements;
  ro.max_chunk_bytes = options_.chunk_bytes;
  absl::StatusOr<std::unique_ptr<SetReader>> reader =
      replica == nullptr ? absl::UnavailableError("no replica")
                         : replica->Read(out.set, ro);
  if (!reader.ok()) {
    out.backoff_until = now_ + options_.retry_micros;
    return;
  }
  out.reader = std::move(*reader);
  out.window.Restart();
  SendNextChunk(key, out);
}

void HandoffManager::SendNextChunk(const TransferKey& key, Outgoing& out) {
  // Up to `window` chunks of the set in flight: the receiver applies
  // one while the next ones travel and the sender reads more.
  while (out.reader != nullptr && !out.window.full()) {
    absl::StatusOr<bool> more = out.reader->Next(&out.buffer);
    if (!more.ok()) {
      // The set restarts later, under a new index, from a new snapshot.
      out.reader.reset();
      out.window.Restart();
      ++out.index;
      out.backoff_until = now_ + options_.retry_micros;
      return;
    }
    const bool last = !*more || out.reader->AtEnd();
    msg::TransferChunk m;
    m.epoch = ring().epoch();
    m.set = out.set;
    m.index = out.index;
    m.seq = out.window.next_seq();
    m.last = last;
    if (last) m.set_clock = out.reader->clock();
    m.elements = std::move(out.buffer);
    const std::string& bytes =
        out.window.Add(last, EncodeMessage(out.run, key.first, m));
    out.buffer = std::move(m.elements);
    out.last_send = now_;
    NodeCounters& stats = *stats_;
    stats.handoff_keys_sent += out.buffer.size();
    stats.handoff_bytes_sent += bytes.size();
    if (last) out.reader.reset();
    out_.Send(key.second, bytes);
  }
}

void HandoffManager::Resend(const TransferKey& key, Outgoing& out) {
  out.last_send = now_;
  ++out.silent;
  ++stats_->retransmits;
  if (!out.inflight.empty()) {
    out_.Send(key.second, out.inflight);
    return;
  }
  // Go-back-N: the receiver applies chunks in order and ignores those past
  // a gap, so every unacknowledged chunk goes again.
  out.window.ForEach(
      [&](const std::string& bytes) { out_.Send(key.second, bytes); });
}

void HandoffManager::OnMessage(NodeId from, const MessageHeader& header,
                               const msg::TransferAck& m) {
  const TransferKey key{header.partition, from};
  auto it = outgoing_.find(key);
  if (it == outgoing_.end()) return;
  Outgoing& out = it->second;
  if (out.phase == Phase::kEnding) {
    if (out.run != header.request_id || out.inflight.empty() ||
        m.index != out.index || m.seq != 0) {
      return;  // Stale or duplicate.
    }
  } else if (out.phase != Phase::kStreaming || out.run != header.request_id ||
             m.index != out.index || !out.window.Holds(m.seq)) {
    return;  // Stale or duplicate.
  }
  out.silent = 0;
  if (out.incarnation == 0) {
    out.incarnation = m.incarnation;
  } else if (m.incarnation != out.incarnation) {
    // The receiver restarted since it acknowledged this run's first chunks:
    // with unsynced writes, a power loss may have taken them. The whole run
    // again (a completion needs a run received in one incarnation).
    ++stats_->handoff_receiver_restarts;
    StartRun(key, out);
    return;
  }
  const uint64_t now = now_;
  if (m.status.ok()) {
    out.backoff_until = 0;
    if (out.phase == Phase::kEnding) {
      out.inflight.clear();
      SetPhase(out, Phase::kSetsDone);
      MaybeComplete(key);
      return;
    }
    // The receiver applies in order: this chunk and every one before it.
    if (out.window.Acknowledge(m.seq)) {
      ++out.index;
      NextSet(key, out);
    } else {
      SendNextChunk(key, out);
    }
    return;
  }
  if (IsStreamStateLost(m.status)) {
    // The receiver lost the set's state (it restarted, or expired it): the
    // set again, from a new snapshot, under a new index.
    ++stats_->handoff_restarts;
    out.inflight.clear();
    out.window.Restart();
    out.reader.reset();
    ++out.index;
    OpenSet(key, out);
    return;
  }
  // Not ready (an older ring there, no replica yet) or refused: the same
  // chunk again later.
  out.backoff_until = now + 5 * options_.retry_micros;
}

void HandoffManager::Forward(uint32_t partition, const Delta& delta) {
  auto it = outgoing_.lower_bound({partition, 0});
  for (; it != outgoing_.end() && it->first.first == partition; ++it) {
    Outgoing& out = it->second;
    // A run not started yet reads its sets after this delta: nothing to
    // forward (and no queue per waiting transfer).
    if (out.phase == Phase::kWaiting || out.phase == Phase::kDraining) {
      continue;
    }
    const uint64_t id = ids_->Next();
    std::string bytes;
    EncodeDeltaMessage(MessageHeader{MessageType::kHandoffDelta, id, partition},
                       delta, &bytes);
    // While a proposal is out the receiver may accept the run: its forwards
    // must all arrive, so the bound waits (the proposal is one round trip).
    if (out.phase != Phase::kProposing &&
        out.forward_bytes + bytes.size() > options_.forward_bytes) {
      // Over the bound: drop the queue; a new run sends every set again
      // (from snapshots taken after these deltas were applied).
      for (const auto& [fid, b] : out.forwards) forward_routes_.erase(fid);
      out.forwards.clear();
      out.forward_bytes = 0;
      ++stats_->handoff_forward_overflows;
      StartRun(it->first, out);
      continue;
    }
    out.forward_bytes += bytes.size();
    out_.Send(it->first.second, bytes);
    ++stats_->handoff_deltas_forwarded;
    out.forwards.emplace(id, std::move(bytes));
    forward_routes_[id] = it->first;
  }
}

void HandoffManager::OnDeltaAck(NodeId from, uint64_t request_id,
                                const absl::Status& status, NodeId applied_by) {
  if (auto p = proxied_.find(request_id); p != proxied_.end()) {
    auto moved = moved_to_.find(p->second.partition);
    if (moved == moved_to_.end() || moved->second != from) return;
    std::string ack;
    if (p->second.own.has_value() && status.ok()) {
      // This node coordinated the given-up request: its delta, the write's
      // to replicate, answers for its place (the new owner applied the
      // chosen delta).
      ack =
          EncodeMessage(p->second.request_id, p->second.partition,
                        msg::ReplicateAckWithDelta{std::move(*p->second.own)});
    } else {
      // The coordinator counts the node that applied the delta, not this
      // one: one replica acknowledges once however it is reached.
      EncodeStatusReply(MessageHeader{p->second.reply, p->second.request_id,
                                      p->second.partition},
                        status, applied_by, &ack);
    }
    out_.Send(p->second.coordinator, std::move(ack));
    proxied_.erase(p);
    return;
  }
  auto route = forward_routes_.find(request_id);
  if (route == forward_routes_.end() || route->second.second != from) return;
  const TransferKey key = route->second;
  auto it = outgoing_.find(key);
  if (it == outgoing_.end()) {
    forward_routes_.erase(route);
    return;
  }
  // Anything but a success or a rejection of the delta itself (it can never
  // apply there) keeps it, retransmitted by the tick: a receiver without
  // its replica yet, a failed write there.
  if (!status.ok() && !absl::IsInvalidArgument(status)) return;
  Outgoing& out = it->second;
  out.silent = 0;
  auto f = out.forwards.find(request_id);
  if (f != out.forwards.end()) {
    out.forward_bytes -= f->second.size();
    out.forwards.erase(f);
  }
  forward_routes_.erase(route);
  MaybeComplete(key);
}

void HandoffManager::MaybeComplete(const TransferKey& key) {
  auto it = outgoing_.find(key);
  if (it == outgoing_.end()) return;
  Outgoing& out = it->second;
  if (!out.forwards.empty()) return;
  if (out.phase == Phase::kDraining) {
    if (out.confirmed) {
      Complete(key);
    } else if (out.inflight.empty()) {
      Confirm(key, out);
    }
  } else if (out.phase == Phase::kSetsDone && now_ >= out.backoff_until) {
    Propose(key, out);
  }
}

void HandoffManager::Propose(const TransferKey& key, Outgoing& out) {
  const ServeEntry* mine = membership_.Own(key.first);
  if (mine == nullptr) return;  // Not serving: Progress drops the transfer.

  if (!out.supplement && mine->handing_to != key.second) {
    // Committed first, synced: whatever happens to this node from now on,
    // it hands over to this receiver only, until the receiver refuses.
    if (!membership_.SetHandingTo(key.first, key.second).ok()) {
      out.backoff_until = now_ + options_.retry_micros;
      return;
    }
    PushOwnState();
    mine = membership_.Own(key.first);
  }
  out.probe = false;
  SetPhase(out, Phase::kProposing);
  out.inflight = Proposal(key, out, *mine, out.supplement);
  out.inflight_last = false;
  out.last_send = now_;
  out_.Send(key.second, out.inflight);
}

std::string HandoffManager::Proposal(const TransferKey& key,
                                     const Outgoing& out,
                                     const ServeEntry& mine,
                                     bool supplement) const {
  const msg::HandoffDone done{.epoch = ring().epoch(),
                              .from_node = self_,
                              .to_node = key.second,
                              .episode = mine.since,
                              .supplement = supplement};
  return EncodeMessage(out.run, key.first, done);
}

void HandoffManager::Confirm(const TransferKey& key, Outgoing& out) {
  // The same proposal again: the receiver answers it only after a synced
  // write, so what it was forwarded after accepting is durable there
  // before this node lets go of its copy.
  const ServeEntry* mine = membership_.Own(key.first);
  if (mine == nullptr) return;
  out.inflight = Proposal(key, out, *mine, out.supplement);
  out.inflight_last = false;
  out.last_send = now_;
  out_.Send(key.second, out.inflight);
}

void HandoffManager::Probe(const TransferKey& key, Outgoing& out) {
  const ServeEntry* mine = membership_.Own(key.first);
  if (mine == nullptr) return;
  // A fresh request id: the receiver cannot have finished a run under it,
  // so it answers with its state and never accepts; and no earlier
  // proposal of this node is accepted there after this one.
  out.run = ids_->Next();
  out.probe = true;
  out.reader.reset();
  SetPhase(out, Phase::kProposing);
  out.inflight = Proposal(key, out, *mine, /*supplement=*/false);
  out.inflight_last = false;
  out.last_send = now_;
  out_.Send(key.second, out.inflight);
}

void HandoffManager::OnMessage(NodeId from, const MessageHeader& header,
                               const msg::HandoffDoneAck& m) {
  NoteEpoch(from, m.epoch);
  if (m.from_node != self_ || m.to_node != from) return;
  const TransferKey key{header.partition, from};
  auto it = outgoing_.find(key);
  if (it == outgoing_.end()) return;
  Outgoing& out = it->second;
  if (out.run != header.request_id) return;
  if (out.phase == Phase::kDraining && !out.inflight.empty()) {
    // The answer to the confirmation.
    out.inflight.clear();
    if (m.status.ok()) {
      out.confirmed = true;
      Complete(key);
    } else {
      // The receiver restarted since it accepted: what it was forwarded
      // may be lost. The whole run again (it accepts the same place).
      moved_to_.erase(key.first);
      StartRun(key, out);
    }
    return;
  }
  if (out.phase != Phase::kProposing) return;
  out.inflight.clear();
  out.silent = 0;
  // The receiver's state, as of its answer: an acceptance shows in it.
  bool own_raised = false;
  const bool changed = membership_.Merge(m.states, &own_raised);
  if (out.probe && !m.status.ok()) {
    out.probe = false;
    SetPhase(out, Phase::kSetsDone);
    if (membership_.ReplacedBy(key.first).has_value()) {
      // It took this node's place after all: the hand-over goes on.
      StartRun(key, out);
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
    SetPhase(out, Phase::kDraining);
    moved_to_[key.first] = from;
    MaybeComplete(key);
  } else if (absl::IsAlreadyExists(m.status) || absl::IsAborted(m.status)) {
    // The receiver serves the partition in another place, or will not take
    // it: unless its state shows it took this node's place after all, the
    // commitment goes and the transfer is planned again.
    SetPhase(out, Phase::kSetsDone);
    out.backoff_until = now_ + 5 * options_.retry_micros;
    const ServeEntry* mine = membership_.Own(key.first);
    if (!membership_.ReplacedBy(key.first).has_value() && mine != nullptr &&
        mine->handing_to == from) {
      if (membership_.SetHandingTo(key.first, 0).ok()) PushOwnState();
    }
    MembershipChanged();
    return;
  } else {
    // The receiver no longer has what this run sent: send it again.
    StartRun(key, out);
    out.backoff_until = now_ + options_.retry_micros;
  }
  if (changed || own_raised) MembershipChanged();
}

void HandoffManager::Complete(const TransferKey& key) {
  auto it = outgoing_.find(key);
  if (it == outgoing_.end()) return;
  if (it->second.supplement) {
    // An orphaned leaver's supplement: it lets go after the last one.
    supplied_.insert(key);
    bool more = false;
    for (const auto& [k, supplement] : Plan()) {
      more |= k.first == key.first && k != key && supplement;
    }
    if (more) {
      outgoing_.erase(it);
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
  std::erase_if(supplied_,
                [&](const TransferKey& k) { return k.first == key.first; });
  outgoing_.erase(it);
  ++stats_->handoffs_done;
  // The receiver's state (its acceptance) travels with this node's, so no
  // view loses this node's place before it sees the receiver in it.
  PushOwnState(key.second);
  MembershipChanged();
}

void HandoffManager::Progress() {
  const uint64_t now = now_;
  const uint64_t retry = options_.retry_micros;
  size_t running = 0;
  std::vector<TransferKey> to_complete;
  std::vector<TransferKey> given_up;
  for (auto& [key, out] : outgoing_) running += out.phase != Phase::kWaiting;
  for (auto& [key, out] : outgoing_) {
    if (!membership_.Serves(key.first)) {
      // Nothing of its own to hand over (it completed before a restart).
      given_up.push_back(key);
      continue;
    }
    const bool waiting = now < out.backoff_until;
    const bool due = now < out.last_send || now - out.last_send >= retry;
    if (!out.supplement && out.phase != Phase::kProposing &&
        out.phase != Phase::kDraining &&
        membership_.Own(key.first)->handing_to == key.second &&
        !Contains(ring().PreferenceList(key.first), key.second) &&
        !membership_.ReplacedBy(key.first).has_value()) {
      // Committed to a receiver the ring no longer wants here: ask it.
      Probe(key, out);
      continue;
    }
    switch (out.phase) {
      case Phase::kWaiting:
        if (running >= options_.max_running) break;
        if (SenderReplica(key.first) == nullptr) break;
        ++running;
        StartRun(key, out);
        break;
      case Phase::kStreaming:
      case Phase::kEnding:
        if (waiting) break;
        if (!out.inflight.empty() || !out.window.empty()) {
          if (due) Resend(key, out);
        } else if (out.reader != nullptr) {
          SendNextChunk(key, out);
        } else if (SenderReplica(key.first) != nullptr && out.have_set) {
          // The set whose read failed, again (NextSet continues after the
          // set it is given).
          OpenSet(key, out);
        } else {
          NextSet(key, out);
        }
        break;
      case Phase::kSetsDone:
        if (!waiting && out.forwards.empty()) Propose(key, out);
        break;
      case Phase::kProposing: {
        // A receiver that left the ring and has not answered for long is
        // gone: whatever it did, this node still holds the data and keeps
        // serving; the transfer is planned again.
        const auto& members = ring().nodes();
        if (out.silent > 100 && std::find(members.begin(), members.end(),
                                          key.second) == members.end()) {
          given_up.push_back(key);
        } else if (due) {
          Resend(key, out);
        }
        break;
      }
      case Phase::kDraining:
        if (!out.forwards.empty()) break;
        if (!out.inflight.empty()) {
          if (due) Resend(key, out);
        } else {
          // Forwards drained, or a failed completion write: again.
          to_complete.push_back(key);
        }
        break;
    }
  }
  for (const TransferKey& key : to_complete) MaybeComplete(key);
  for (const TransferKey& key : given_up) {
    const ServeEntry* mine = membership_.Own(key.first);
    if (mine != nullptr && mine->handing_to == key.second &&
        !membership_.SetHandingTo(key.first, 0).ok()) {
      continue;
    }
    for (const auto& [id, bytes] : outgoing_[key].forwards) {
      forward_routes_.erase(id);
    }
    outgoing_.erase(key);
    ++stats_->handoffs_cancelled;
  }
  if (!given_up.empty()) MembershipChanged();
}

}  // namespace bigset
