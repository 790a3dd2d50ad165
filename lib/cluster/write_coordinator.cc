#include "cluster/write_coordinator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace bigset {
namespace {
// Tries per coordinating candidate before the next is asked. Retries of a
// lost message hit the candidate's reply cache and apply nothing twice.
constexpr size_t kAttemptsPerCandidate = 3;
}  // namespace

void WriteCoordinator::Reset(uint64_t id, std::string_view set,
                             const Where& where, std::vector<UpdateOp> ops,
                             std::optional<Clock> clear,
                             const ClusterWriteOptions& options, Done done) {
  id_ = id;
  set_.assign(set);
  partition_ = where.partition;
  self_ = where.self;
  preference_.assign(where.serving.begin(), where.serving.end());
  // This node coordinates if it holds a replica (no extra hop); otherwise
  // the preference list in order.
  candidates_.clear();
  for (size_t i = 0; i < preference_.size(); ++i) {
    if (preference_[i] == self_) {
      candidates_.insert(candidates_.begin(), i);
    } else {
      candidates_.push_back(i);
    }
  }
  attempt_ = 0;
  options_ = options;
  done_ = std::move(done);
  replied_ = false;
  answer_.reset();
  ops_ = std::move(ops);
  clear_ = std::move(clear);
  update_bytes_.clear();
  replicate_bytes_.clear();
  given_up_bytes_.clear();
  phase_ = Phase::kIdle;
  coordinator_ = -1;
  delta_ = Delta();
  acked_.assign(preference_.size(), false);
  asked_.assign(preference_.size(), false);
  heard_.assign(preference_.size(), false);
  extra_taken_.assign(preference_.size(), false);
  acks_ = 0;
  places_.assign(where.places.begin(), where.places.end());
  place_acked_.assign(preference_.size(), false);
  place_acks_ = 0;
  extras_.clear();
  deadline_ = client_deadline_ = next_retry_ = 0;
  retransmit_rounds_ = 0;
}

void WriteCoordinator::Release() {
  done_ = nullptr;
  answer_.reset();
  ops_.clear();
  clear_.reset();
  delta_ = Delta();
  extras_.clear();
}

const char* WriteCoordinator::PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kIdle:
      return "idle";
    case Phase::kAsking:
      return "asking";
    case Phase::kAwaitingLate:
      return "awaiting a late delta";
    case Phase::kReplicating:
      return "replicating";
  }
  return "?";
}

RequestOutput WriteCoordinator::Start(uint64_t now) {
  RequestOutput out;
  phase_ = Phase::kAsking;
  deadline_ = client_deadline_ = now + options_.timeout_micros;
  next_retry_ = now + options_.retry_micros;
  // A place is named by the smallest index of its nodes.
  int places = 0;
  for (size_t i = 0; i < places_.size(); ++i) places += places_[i] == i;
  if (places < options_.w) {
    // No W places can acknowledge it (this node's view of the partition
    // lags, or the list is short while places move): it fails at once,
    // applied nowhere, instead of waiting for acknowledgements that
    // cannot come. (Without this check, a write whose every replica
    // acknowledged but fewer than W places ended without an answer.)
    Reply(absl::UnavailableError(absl::StrCat(
              clear_.has_value() ? "clear" : "update", " of set \"", set_,
              "\": this node's serving list of partition ", partition_,
              " holds ", places, " places (", preference_.size(),
              " nodes), fewer than w = ", options_.w)),
          &out);
    End(&out);
    return out;
  }
  SendUpdate(&out);
  return out;
}

void WriteCoordinator::SendUpdate(RequestOutput* out) {
  const size_t candidate =
      (attempt_ / kAttemptsPerCandidate) % candidates_.size();
  asked_[candidates_[candidate]] = true;
  const NodeId to = preference_[candidates_[candidate]];
  if (to == self_) {
    // This node's own replica coordinates in-process: no message round
    // trip, and no scheduler event.
    if (!coordinated()) out->coordinate_here = true;
    return;
  }
  if (update_bytes_.empty()) {
    // Encoded once, resent as is.
    update_bytes_ =
        clear_.has_value()
            ? EncodeMessage(id_, partition_,
                            msg::Clear{.set = set_, .clock = *clear_})
            : EncodeMessage(id_, partition_,
                            msg::Update{.set = set_, .ops = ops_});
  }
  out->Add(to, update_bytes_);
}

RequestOutput WriteCoordinator::Coordinated(absl::StatusOr<Delta> result) {
  RequestOutput out;
  OnCoordinated(self_, std::move(result), &out);
  return out;
}

RequestOutput WriteCoordinator::Step(NodeId from, msg::UpdateReply& m) {
  RequestOutput out;
  if (m.status.ok()) {
    OnCoordinated(from, std::move(m.delta), &out);
  } else {
    OnCoordinated(from, m.status, &out);
  }
  return out;
}

RequestOutput WriteCoordinator::Step(NodeId from,
                                     msg::ReplicateAckWithDelta& m) {
  RequestOutput out;
  const int index = IndexOf(from);
  // Only a candidate given up on, about this write's set, has a delta of
  // its own to hand over.
  if (index < 0 || !coordinated() || !asked_[index] || index == coordinator_ ||
      m.delta.set != set_) {
    return out;
  }
  heard_[index] = true;
  Ack(index);
  OnExtraDelta(index, std::move(m.delta), &out);
  MaybeFinish(&out);
  return out;
}

void WriteCoordinator::OnCoordinated(NodeId from, absl::StatusOr<Delta> result,
                                     RequestOutput* out) {
  const int index = IndexOf(from);
  if (index < 0 || !asked_[index]) return;
  heard_[index] = true;
  if (coordinated()) {
    // A duplicate reply of the chosen candidate, or the late answer of one
    // given up on: if that one applied the write, its delta is replicated
    // too.
    if (result.ok() && index != coordinator_ && result->set == set_) {
      OnExtraDelta(index, std::move(*result), out);
      MaybeFinish(out);
    }
    return;
  }
  if (!result.ok()) {
    // Unavailable: try the next on the timer. Anything else (a bad
    // argument, an invalid context) fails the write.
    if (!absl::IsUnavailable(result.status())) {
      if (!replied_) Reply(result.status(), out);
      End(out);
    }
    return;
  }
  Ack(index);
  phase_ = Phase::kReplicating;
  coordinator_ = index;
  delta_ = std::move(*result);
  replicate_bytes_.clear();
  EncodeDeltaMessage(MessageHeader{MessageType::kReplicate, id_, partition_},
                     delta_, &replicate_bytes_);
  out->sends.reserve(preference_.size());
  for (size_t i = 0; i < preference_.size(); ++i) {
    if (static_cast<int>(i) != index) SendChosen(i, out);
  }
  MaybeFinish(out);
}

void WriteCoordinator::SendChosen(size_t i, RequestOutput* out) {
  const NodeId to = preference_[i];
  if (!asked_[i]) {
    out->Add(to, replicate_bytes_);
    return;
  }
  if (given_up_bytes_.empty()) {
    EncodeDeltaMessage(
        MessageHeader{MessageType::kReplicateGivenUp, id_, partition_}, delta_,
        &given_up_bytes_);
  }
  out->Add(to, given_up_bytes_);
}

void WriteCoordinator::OnExtraDelta(int index, Delta delta,
                                    RequestOutput* out) {
  if (extra_taken_[index]) return;
  extra_taken_[index] = true;
  ++out->late_coordinator_replies;
  for (const DeltaOp& op : delta.ops) {
    if (op.add.has_value()) ++out->extra_dots;
  }
  Extra& e = extras_.emplace_back();
  e.index = index;
  e.delta = std::move(delta);
  ++out->extras_to_number;
}

RequestOutput WriteCoordinator::NumberExtra(uint64_t extra_id, uint64_t now) {
  RequestOutput out;
  for (Extra& e : extras_) {
    if (e.id != 0) continue;
    e.id = extra_id;
    EncodeDeltaMessage(MessageHeader{MessageType::kReplicate, e.id, partition_},
                       e.delta, &e.bytes);
    e.delta = Delta();
    e.acked.assign(preference_.size(), false);
    e.acked[e.index] = true;  // Its own delta.
    e.acks = 1;
    for (size_t i = 0; i < preference_.size(); ++i) {
      if (!e.acked[i]) out.Add(preference_[i], e.bytes);
    }
    // Give the extra delta a full timeout to spread.
    deadline_ = std::max(deadline_, now + options_.timeout_micros);
    break;
  }
  return out;
}

RequestOutput WriteCoordinator::Acknowledged(uint64_t request_id, NodeId from,
                                             NodeId applied_by,
                                             std::span<const NodeId> givers,
                                             const absl::Status& status) {
  RequestOutput out;
  if (!coordinated() || !status.ok()) return out;
  int index = IndexOf(applied_by);
  if (index < 0) index = IndexOf(from);
  if (index < 0) return out;
  for (NodeId node : givers) {
    // The list was taken before the view heard that applied_by took the
    // place of a node it lists (which may have applied the write and
    // handed it over with its place): one place, whatever the list said.
    // An unlisted applier counts through the node that passed the delta
    // on to it (`index` is that relay's), which is on its chain.
    const int giver = IndexOf(node);
    if (giver >= 0) {
      MergePlaces(static_cast<size_t>(index), static_cast<size_t>(giver));
    }
  }
  if (request_id == id_) {
    // A given-up candidate that applied the chosen delta without a delta of
    // its own never coordinated the write, and now never will (fenced).
    heard_[index] = true;
    Ack(index);
    // A node that passed the delta on to the node that took its place
    // answers for that place: both of them have it (the one that passed it
    // on refuses reads from now on). Of another place, it answers only for
    // the node that applied it.
    const int relay = IndexOf(from);
    if (relay >= 0 && relay != index && places_[relay] == places_[index]) {
      heard_[relay] = true;
      Ack(relay);
    }
  } else {
    for (Extra& e : extras_) {
      if (e.id != 0 && e.id == request_id && !e.acked[index]) {
        e.acked[index] = true;
        ++e.acks;
      }
    }
  }
  MaybeFinish(&out);
  return out;
}

bool WriteCoordinator::AllAcked() const {
  const int all = static_cast<int>(preference_.size());
  if (acks_ < all) return false;
  for (const Extra& e : extras_) {
    if (e.acks < all) return false;
  }
  return true;
}

void WriteCoordinator::CountUnsettled(RequestOutput* out) const {
  if (!coordinated()) return;  // The write failed; its outcome is unknown.
  bool unsettled = false;
  for (size_t i = 0; i < preference_.size(); ++i) {
    if (asked_[i] && static_cast<int>(i) != coordinator_ && !heard_[i]) {
      unsettled = true;
    }
  }
  for (const Extra& e : extras_) {
    if (e.acks < options_.w) unsettled = true;
  }
  if (unsettled) ++out->failovers_unsettled;
}

void WriteCoordinator::LeaveHints(RequestOutput* out) const {
  if (!coordinated() || replicate_bytes_.empty()) return;
  for (size_t i = 0; i < preference_.size(); ++i) {
    if (acked_[i] || static_cast<int>(i) == coordinator_) continue;
    // A given-up candidate got the delta as kReplicateGivenUp, whose answer
    // only this write can take: the digest rounds cover it.
    if (asked_[i]) continue;
    out->hints.push_back(
        RequestOutput::Hint{preference_[i], partition_, id_, replicate_bytes_});
  }
  // An extra delta goes to every replica but its own as a plain
  // kReplicate under its own id (the chosen coordinator and other given-up
  // candidates included), so each that never acknowledged it gets a hint.
  for (const Extra& e : extras_) {
    if (e.id == 0) continue;
    for (size_t i = 0; i < preference_.size() && i < e.acked.size(); ++i) {
      if (!e.acked[i]) {
        out->hints.push_back(
            RequestOutput::Hint{preference_[i], partition_, e.id, e.bytes});
      }
    }
  }
}

void WriteCoordinator::End(RequestOutput* out) const {
  for (const Extra& e : extras_) {
    if (e.id != 0) out->unroutes.push_back(e.id);
  }
  out->done = true;
}

int WriteCoordinator::IndexOf(NodeId node) const {
  for (size_t i = 0; i < preference_.size(); ++i) {
    if (preference_[i] == node) return static_cast<int>(i);
  }
  return -1;
}

void WriteCoordinator::Ack(int index) {
  if (acked_[index]) return;
  acked_[index] = true;
  ++acks_;
  const uint32_t place = places_[index];
  if (place_acked_[place]) return;
  // A place counts once every node of it has the write: a reader whose
  // view lists only one of them (it has not heard who took the place, or
  // it no longer lists the leaver) reads that one alone.
  for (size_t i = 0; i < places_.size(); ++i) {
    if (places_[i] == place && !acked_[i]) return;
  }
  place_acked_[place] = true;
  ++place_acks_;
}

void WriteCoordinator::MergePlaces(size_t a, size_t b) {
  const uint32_t keep = std::min(places_[a], places_[b]);
  const uint32_t drop = std::max(places_[a], places_[b]);
  if (keep == drop) return;
  for (uint32_t& place : places_) {
    if (place == drop) place = keep;
  }
  place_acked_.assign(places_.size(), false);
  place_acks_ = 0;
  for (size_t i = 0; i < places_.size(); ++i) {
    const uint32_t place = places_[i];
    if (place != i) continue;  // Named by its smallest index.
    bool all = true;
    for (size_t j = 0; j < places_.size(); ++j) {
      if (places_[j] == place && !acked_[j]) all = false;
    }
    if (all) {
      place_acked_[place] = true;
      ++place_acks_;
    }
  }
}

RequestOutput WriteCoordinator::Tick(uint64_t now) {
  RequestOutput out;
  if (!replied_ && now >= client_deadline_ && now < deadline_) {
    // Extra deltas extended the write, not the client's wait.
    Reply(TooFewPlaces(/*timed_out=*/true), &out);
    return out;
  }
  if (now >= deadline_) {
    if (!replied_) Reply(TooFewPlaces(/*timed_out=*/true), &out);
    CountUnsettled(&out);
    LeaveHints(&out);
    End(&out);
    return out;
  }
  if (now < next_retry_) return out;
  next_retry_ = now + options_.retry_micros;
  if (phase_ == Phase::kAwaitingLate) return out;
  if (phase_ == Phase::kAsking) {
    // No coordinator answered: ask again, then the next one (a late answer
    // of the one given up on is replicated too, see OnCoordinated).
    if ((attempt_ + 1) % kAttemptsPerCandidate == 0 && !options_.failover) {
      phase_ = Phase::kAwaitingLate;
      ++out.failovers_refused;
      if (!replied_) {
        Reply(absl::UnavailableError(absl::StrCat(
                  clear_.has_value() ? "clear" : "update", " of set \"", set_,
                  "\": the coordinating replica did not answer, and failover "
                  "is off")),
              &out);
      }
      return out;
    }
    ++attempt_;
    if (attempt_ % kAttemptsPerCandidate == 0) ++out.coordinator_switches;
    SendUpdate(&out);
    return out;
  }
  // Each round of retransmissions doubles the wait for the next, and once
  // W replicas acknowledged (the client has its answer) the rest wait four
  // intervals more: a replica that is slow rather than losing messages (a
  // node restarted under load, each write synced) gets a delta twice or
  // three times, not once per interval for the whole timeout; one that
  // never acknowledges gets the write's hint at its end. Without it, a node
  // restarted under load received ten copies of every write (35,000
  // replicate messages a second here), fell further behind with each, and
  // could not coordinate a write for up to a minute.
  const int shift =
      std::min(retransmit_rounds_, 3) + (place_acks_ >= options_.w ? 2 : 0);
  next_retry_ = now + (options_.retry_micros << shift);
  ++retransmit_rounds_;
  for (size_t i = 0; i < preference_.size(); ++i) {
    if (!acked_[i]) {
      SendChosen(i, &out);
      ++out.retransmits;
    }
  }
  for (const Extra& e : extras_) {
    if (e.id == 0) continue;
    for (size_t i = 0; i < preference_.size(); ++i) {
      if (!e.acked[i]) {
        out.Add(preference_[i], e.bytes);
        ++out.retransmits;
      }
    }
  }
  return out;
}

void WriteCoordinator::MaybeFinish(RequestOutput* out) {
  const bool reply = !replied_ && place_acks_ >= options_.w;
  const bool all = AllAcked();
  if (!reply && !all) return;
  if (reply) {
    // Replication goes on from replicate_bytes_: the delta itself is
    // handed over.
    Reply(std::move(delta_), out);
  }
  // Replicas beyond W keep getting the deltas until they ack or the
  // deadline passes.
  if (!all) return;
  if (!replied_) {
    // Every replica of the list has it, yet fewer than W places (Start
    // refuses such lists, so this is a guard): no acknowledgement is left
    // to wait for, and a write never ends without an answer.
    Reply(TooFewPlaces(/*timed_out=*/false), out);
  }
  End(out);
}

absl::Status WriteCoordinator::TooFewPlaces(bool timed_out) const {
  const std::string what = absl::StrCat(
      clear_.has_value() ? "clear" : "update", " of set \"", set_,
      "\": ", place_acks_, " of ", options_.w, " required places (replicas) ");
  return timed_out ? absl::DeadlineExceededError(
                         absl::StrCat(what, "acknowledged before the timeout"))
                   : absl::UnavailableError(
                         absl::StrCat(what, "in this node's serving list"));
}

void WriteCoordinator::Reply(absl::StatusOr<Delta> result, RequestOutput* out) {
  replied_ = true;
  answer_.emplace(std::move(result));
  out->answered = true;
}

WriteCoordinator::Answer WriteCoordinator::TakeAnswer() {
  if (!answer_.has_value()) return Answer();  // Answered before.
  Answer answer{std::move(done_), std::move(*answer_)};
  done_ = nullptr;
  answer_.reset();
  return answer;
}

void WriteCoordinator::Abort(const absl::Status& status) {
  // After the answer was decided, replication was all that was left: the
  // driver has the answer, nobody waits here.
  if (replied_ || !done_) return;
  Done done = std::move(done_);
  done_ = nullptr;
  done(status);
}

}  // namespace bigset
