#include "cluster/read_coordinator.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cluster/place_quorum.h"

namespace bigset {

ReadCoordinator::ReadCoordinator(uint64_t id, std::string set, Where where,
                                 const ClusterReadOptions& options,
                                 ElementBounds bounds, size_t limit,
                                 std::unique_ptr<ReadSink> sink)
    : CoordinatorOf(id),
      set_(std::move(set)),
      partition_(where.partition),
      options_(options),
      bounds_(std::move(bounds)),
      limit_(limit),
      sink_(std::move(sink)) {
  for (size_t i = 0; i < where.serving.size(); ++i) {
    Slot& slot = slots_.emplace_back();
    slot.node = where.serving[i];
    slot.place =
        i < where.places.size() ? where.places[i] : static_cast<uint32_t>(i);
  }
}

ReadCoordinator::~ReadCoordinator() = default;

RequestOutput ReadCoordinator::Out() {
  RequestOutput out = std::move(output_);
  output_ = RequestOutput();
  return out;
}

ReadCoordinator::Slot* ReadCoordinator::SlotOfFold(uint64_t fold_id) {
  for (Slot& s : slots_) {
    if (s.fold_id == fold_id) return &s;
  }
  return nullptr;
}

RequestOutput ReadCoordinator::Start(uint64_t now) {
  now_ = now;
  last_progress_ = now;
  for (size_t i = 0; i < slots_.size(); ++i) OpenFold(i, bounds_);
  output_.tick_at = now + options_.retry_micros;
  return Out();
}

void ReadCoordinator::OpenFold(size_t i, const ElementBounds& bounds) {
  Slot& slot = slots_[i];
  if (slot.routed) output_.unroutes.push_back(slot.fold_id);
  slot.fold_id = 0;
  slot.routed = false;
  slot.state = SlotState::kOpening;
  slot.gone = false;
  slot.merger_index = -1;
  slot.next_seq = 0;
  slot.requested = true;
  slot.has_early = false;
  slot.local.reset();
  slot.clock.clear();
  slot.bounds = bounds;
  slot.last_heard = now_;
  output_.folds_to_open.push_back(RequestOutput::Fold{
      .slot = static_cast<uint32_t>(i), .node = slot.node, .bounds = bounds});
}

RequestOutput ReadCoordinator::FoldOpened(uint32_t i, uint64_t fold_id,
                                          std::unique_ptr<SetReader> local,
                                          uint64_t now) {
  now_ = now;
  if (i >= slots_.size() || slots_[i].state != SlotState::kOpening ||
      phase_ == Phase::kFinished) {
    if (local == nullptr) output_.unroutes.push_back(fold_id);
    return Out();
  }
  Slot& slot = slots_[i];
  slot.fold_id = fold_id;
  slot.state = SlotState::kAsked;
  if (local != nullptr) {
    slot.local = std::move(local);
    // Copied now: the reader may be released before the clock "arrives".
    slot.clock = slot.local->clock();
    // Its clock arrives like the others: from the scheduler, and only for
    // this fold (the slot may have been stopped or reopened by then).
    output_.local_clocks.push_back(fold_id);
    return Out();
  }
  slot.routed = true;
  SendToFold(slot, msg::Read{.set = set_,
                             .bounds = slot.bounds,
                             .batch_size = options_.batch_size});
  return Out();
}

RequestOutput ReadCoordinator::LocalClock(uint64_t fold_id, uint64_t now) {
  now_ = now;
  Slot* slot = SlotOfFold(fold_id);
  if (slot == nullptr || slot->state != SlotState::kAsked ||
      slot->local == nullptr || phase_ == Phase::kFinished) {
    return Out();
  }
  last_progress_ = now;
  Clock clock = slot->clock;
  AcceptClock(*slot, std::move(clock));
  return Out();
}

template <typename Body>
void ReadCoordinator::SendToFold(Slot& slot, const Body& body) {
  slot.last_sent = now_;
  output_.Add(slot.node, EncodeMessage(slot.fold_id, partition_, body));
}

void ReadCoordinator::StopFold(Slot& slot) {
  if (slot.local != nullptr) {
    slot.local.reset();
  } else if (slot.state == SlotState::kAsked ||
             slot.state == SlotState::kAccepted ||
             slot.state == SlotState::kNotFound) {
    SendToFold(slot, msg::StopFold{});
  }
  if (slot.routed) output_.unroutes.push_back(slot.fold_id);
  slot.routed = false;
  slot.state = SlotState::kStopped;
  slot.merger_index = -1;
  slot.replaces = -1;
  slot.has_early = false;
}

RequestOutput ReadCoordinator::Step(NodeId from, uint64_t fold_id,
                                    msg::ReadClock& m, uint64_t now) {
  now_ = now;
  Slot* slot = SlotOfFold(fold_id);
  if (phase_ == Phase::kFinished || slot == nullptr || slot->node != from ||
      slot->state != SlotState::kAsked || slot->local != nullptr) {
    return Out();  // Unknown, or a duplicate.
  }
  slot->last_heard = now;
  last_progress_ = now;
  if (!m.status.ok()) {
    if (slot->replaces >= 0) {
      // The replacement failed too: try another.
      Replace(static_cast<size_t>(slot - slots_.data()), /*failed=*/true);
      return Out();
    }
    slot->state = SlotState::kFailed;
    slot->gone = ReplyOfError(m.status) == QuorumReply::kGone;
    MaybeBegin();
    return Out();
  }
  AcceptClock(*slot, std::move(m.clock));
  return Out();
}

void ReadCoordinator::AcceptClock(Slot& slot, Clock clock) {
  slot.clock = std::move(clock);
  if (slot.replaces >= 0) {
    // A replacement: it takes over the merge slot from after the last
    // merged element, with its own clock.
    slot.merger_index = slot.replaces;
    slot.replaces = -1;
    slot.state = SlotState::kAccepted;
    merger_->Replace(slot.merger_index, slot.clock);
    FeedEarly(slot);
    Pump();
    return;
  }
  slot.state = (options_.notfound_ok || !slot.clock.empty())
                   ? SlotState::kAccepted
                   : SlotState::kNotFound;
  if (merger_ != nullptr) {
    // R clocks were already in: this fold is not needed; release its
    // snapshot now rather than when the read ends.
    StopFold(slot);
    return;
  }
  MaybeBegin();
}

void ReadCoordinator::MaybeBegin() {
  if (merger_ != nullptr) return;
  std::vector<uint32_t> places;
  std::vector<QuorumReply> kinds;
  std::vector<size_t> order;
  size_t failed = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    places.push_back(s.place);
    QuorumReply kind = QuorumReply::kNone;
    switch (s.state) {
      case SlotState::kAccepted:
        kind = QuorumReply::kFound;
        break;
      case SlotState::kNotFound:
        kind = QuorumReply::kEmpty;
        break;
      case SlotState::kFailed:
        kind = s.gone ? QuorumReply::kGone : QuorumReply::kFailed;
        ++failed;
        break;
      default:
        break;
    }
    kinds.push_back(kind);
    if (kind != QuorumReply::kNone) order.push_back(i);
  }
  const QuorumPick pick = PickQuorum(places, kinds, order, options_.r);
  switch (pick.outcome) {
    case QuorumPick::Outcome::kWait:
      return;
    case QuorumPick::Outcome::kUnavailable:
      Finish(absl::UnavailableError(
          absl::StrCat("read of set \"", set_, "\": only ",
                       slots_.size() - failed, " replicas answered (",
                       pick.live_places, " places can), r = ", options_.r)));
      return;
    case QuorumPick::Outcome::kChosen:
      Begin(pick.members);
      return;
  }
}

bool ReadCoordinator::AloneInPlace(size_t i) const {
  for (size_t j = 0; j < slots_.size(); ++j) {
    const Slot& s = slots_[j];
    const bool gone = s.state == SlotState::kFailed && s.gone;
    if (j != i && s.place == slots_[i].place && !gone) return false;
  }
  return true;
}

void ReadCoordinator::Begin(const std::vector<size_t>& members) {
  std::vector<Clock> clocks;
  std::vector<bool> chosen(slots_.size(), false);
  for (size_t i : members) chosen[i] = true;
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (chosen[i]) {
      // An empty replica of a chosen place is merged too (its place's
      // other node may hold the set).
      s.state = SlotState::kAccepted;
      s.merger_index = static_cast<int>(clocks.size());
      clocks.push_back(s.clock);
    } else if (s.state != SlotState::kFailed) {
      // Not among the first R places: stop its fold (asked ones too: their
      // fold may be open already).
      StopFold(s);
    }
  }
  merger_ = std::make_unique<ReadMerger>(std::move(clocks));
  if (phase_ == Phase::kGathering) phase_ = Phase::kMerging;
  output_.clock_ready = true;
  for (Slot& s : slots_) FeedEarly(s);
  Pump();
}

void ReadCoordinator::FeedEarly(Slot& slot) {
  if (!slot.has_early || !InMerge(slot)) return;
  slot.has_early = false;
  if (!merger_->NeedsMore(slot.merger_index)) return;
  merger_->RefillBuffer(slot.merger_index)->swap(slot.early);
  if (!merger_->Refilled(slot.merger_index, slot.early_done)) {
    ++output_.malformed_messages;
    slot.requested = false;  // Pump asks again.
    return;
  }
  Fed(slot);
}

RequestOutput ReadCoordinator::Step(NodeId from, uint64_t fold_id, uint64_t seq,
                                    bool done, std::string_view elements,
                                    uint64_t now) {
  now_ = now;
  Slot* found = SlotOfFold(fold_id);
  if (phase_ == Phase::kFinished || found == nullptr || found->node != from ||
      found->local != nullptr || seq != found->next_seq) {
    return Out();  // Unknown, old or a duplicate.
  }
  Slot& slot = *found;
  switch (slot.state) {
    case SlotState::kIdle:
    case SlotState::kOpening:
    case SlotState::kStopped:
    case SlotState::kFailed:
      return Out();
    case SlotState::kAsked:
    case SlotState::kNotFound:
    case SlotState::kAccepted:
      break;
  }
  slot.last_heard = now;
  if (!InMerge(slot)) {
    // Before R clocks, or before this slot's own clock (a chunk may
    // overtake its clock): kept, at most one per replica, since a replica
    // sends the next only after our ack.
    if (slot.has_early) return Out();
    if (!DecodeChunkElements(elements, &slot.early).ok()) {
      ++output_.malformed_messages;
      return Out();  // The retry timer asks again.
    }
    slot.has_early = true;
    slot.early_done = done;
    return Out();
  }
  const size_t index = static_cast<size_t>(slot.merger_index);
  if (!merger_->NeedsMore(index)) return Out();
  std::vector<ElementDots>* buffer = merger_->RefillBuffer(index);
  if (!DecodeChunkElements(elements, buffer).ok() ||
      !merger_->Refilled(index, done)) {
    // Malformed, or not a continuation of the stream: nothing of it is
    // kept (the buffer is empty again, its position reset) and the chunk
    // is asked for again.
    buffer->clear();
    merger_->Refilled(index, false);
    ++output_.malformed_messages;
    slot.requested = false;
    Pump();
    return Out();
  }
  Fed(slot);
  Pump();
  return Out();
}

void ReadCoordinator::Fed(Slot& slot) {
  last_progress_ = now_;
  ++slot.next_seq;
  slot.requested = false;
}

absl::Status ReadCoordinator::FillLocal(Slot& slot) {
  const size_t index = static_cast<size_t>(slot.merger_index);
  absl::StatusOr<bool> more = slot.local->Next(merger_->RefillBuffer(index));
  if (!more.ok()) return more.status();
  if (!merger_->Refilled(index, !*more || slot.local->AtEnd())) {
    return absl::InternalError("local fold returned elements out of order");
  }
  Fed(slot);
  return absl::OkStatus();
}

void ReadCoordinator::SendRepairs() {
  if (!options_.read_repair) return;
  for (Slot& s : slots_) {
    if (!InMerge(s)) continue;
    std::vector<DeltaOp> ops = merger_->TakeRepairs(s.merger_index);
    if (ops.empty()) continue;
    ++output_.repairs_sent;
    output_.repair_ops_sent += ops.size();
    output_.Add(s.node, EncodeRepair(partition_, set_, std::move(ops)));
  }
}

void ReadCoordinator::Pump() {
  while (phase_ == Phase::kMerging) {
    // The client is done with the last chunk: recycle its storage.
    merger_->Recycle(&out_);
    if (limit_ == 0 || emitted_ < limit_) {
      merger_->Merge(&out_, limit_ == 0 ? 0 : limit_ - emitted_);
      emitted_ += out_.size();
    }
    SendRepairs();
    const bool limit_reached = limit_ != 0 && emitted_ >= limit_;
    // Ask for the next chunk of every replica whose buffer ran dry (once
    // per chunk: the timer asks again if it does not come); read the local
    // replica's next chunk at once.
    bool refilled = false;
    if (!limit_reached) {
      for (Slot& s : slots_) {
        if (!InMerge(s) || !merger_->NeedsMore(s.merger_index)) continue;
        if (s.local != nullptr) {
          absl::Status status = FillLocal(s);
          if (!status.ok()) {
            Finish(status);
            return;
          }
          refilled = true;
        } else if (!s.requested) {
          s.requested = true;
          SendToFold(s, msg::ChunkAck{.seq = s.next_seq});
        }
      }
    }
    if (!out_.empty()) {
      // The client takes it (the driver hands it over); the read goes on
      // with ClientNext, which finishes it if nothing is left.
      phase_ = Phase::kClientHolds;
      output_.chunk_ready = true;
      return;
    }
    if (limit_reached || merger_->Finished()) {
      Finish(absl::OkStatus());
      return;
    }
    if (!refilled) return;  // Waiting for replicas.
  }
}

RequestOutput ReadCoordinator::ClientNext(uint64_t now) {
  now_ = now;
  if (phase_ != Phase::kClientHolds) return Out();
  phase_ = Phase::kMerging;
  Pump();
  return Out();
}

void ReadCoordinator::Replace(size_t dropped, bool failed) {
  Slot& old = slots_[dropped];
  const int index = old.merger_index >= 0 ? old.merger_index : old.replaces;
  if (index < 0 || merger_ == nullptr) return;
  // Repairs found for the replica being dropped still hold for it.
  SendRepairs();
  StopFold(old);
  if (failed) old.state = SlotState::kFailed;
  // Another replica of the list, preferring one that is not the dropped
  // one; the dropped one again (with a new fold: its old one may have
  // expired) if it is all there is and did not fail.
  std::optional<size_t> next;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (i == dropped || InMerge(s) || s.replaces >= 0) continue;
    // Half of a place alone would not stand for it.
    if (!AloneInPlace(i)) continue;
    if (s.state == SlotState::kStopped || s.state == SlotState::kNotFound ||
        s.state == SlotState::kIdle) {
      next = i;
      break;
    }
  }
  if (!next.has_value() && !failed) next = dropped;
  if (!next.has_value()) return;  // The read times out unless it recovers.
  ElementBounds bounds = bounds_;
  if (const std::string* last = merger_->last_merged()) {
    bounds.start = *last;
    bounds.start_inclusive = false;
  }
  ++output_.read_replica_switches;
  slots_[*next].replaces = index;
  OpenFold(*next, bounds);
}

RequestOutput ReadCoordinator::Tick(uint64_t now) {
  now_ = now;
  if (phase_ == Phase::kFinished) return Out();
  // Durations are measured forwards only: a clock that went back makes a
  // timer late, never early.
  auto since = [now](uint64_t t) { return now >= t ? now - t : 0; };
  if (phase_ != Phase::kClientHolds &&
      since(last_progress_) >= options_.timeout_micros) {
    Finish(absl::DeadlineExceededError(
        absl::StrCat("read of set \"", set_, "\": no progress for ",
                     options_.timeout_micros, " us")));
    return Out();
  }
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (s.state == SlotState::kAsked && s.replaces >= 0 &&
        since(s.last_heard) >= options_.replica_timeout_micros) {
      // A replacement that never answered: try another.
      Replace(i);
      continue;
    }
    if (s.local != nullptr) continue;
    if (s.state == SlotState::kAsked) {
      if (since(s.last_sent) >= options_.retry_micros) {
        ElementBounds bounds = bounds_;
        if (s.replaces >= 0 && merger_->last_merged() != nullptr) {
          bounds.start = *merger_->last_merged();
          bounds.start_inclusive = false;
        }
        SendToFold(s, msg::Read{.set = set_,
                                .bounds = bounds,
                                .batch_size = options_.batch_size});
        ++output_.retransmits;
      }
      continue;
    }
    if (!InMerge(s)) continue;
    const size_t index = static_cast<size_t>(s.merger_index);
    if (merger_->NeedsMore(index) && s.requested) {
      if (since(s.last_heard) >= options_.replica_timeout_micros) {
        Replace(i);
        continue;
      }
      if (since(s.last_sent) >= options_.retry_micros) {
        SendToFold(s, msg::ChunkAck{.seq = s.next_seq});
        ++output_.retransmits;
      }
    } else if (since(s.last_sent) >= options_.keepalive_micros) {
      // Waiting on the client or on other replicas: keep its fold open.
      SendToFold(s, msg::KeepFold{});
    }
  }
  if (phase_ != Phase::kFinished) output_.tick_at = now + options_.retry_micros;
  return Out();
}

void ReadCoordinator::Finish(absl::Status status) {
  phase_ = Phase::kFinished;
  // Release every fold still open (the done ones too: their replicas keep
  // the last chunk for retransmission until told).
  for (Slot& s : slots_) {
    if (s.state != SlotState::kStopped && s.state != SlotState::kFailed &&
        s.state != SlotState::kIdle) {
      StopFold(s);
    }
    // Failed folds too: their routes would outlive the read.
    if (s.routed) output_.unroutes.push_back(s.fold_id);
    s.routed = false;
  }
  result_ = std::move(status);
  output_.done = true;
}

ReadCoordinator::Answer ReadCoordinator::TakeAnswer() {
  return Answer{.sink = std::shared_ptr<ReadSink>(std::move(sink_)),
                .status = std::move(result_)};
}

void ReadCoordinator::Abort(const absl::Status& status) {
  phase_ = Phase::kFinished;
  // The replicas' folds are not released: their own timeouts end them.
  if (std::unique_ptr<ReadSink> sink = std::move(sink_)) sink->OnDone(status);
}

}  // namespace bigset
