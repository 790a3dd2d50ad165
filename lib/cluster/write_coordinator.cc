#include "cluster/write_coordinator.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace bigset {
namespace {
// Tries per coordinating candidate before the next is asked. Retries of a
// lost message hit the candidate's reply cache and apply nothing twice.
constexpr size_t kAttemptsPerCandidate = 3;
}  // namespace

WriteCoordinator::WriteCoordinator(CoordinatorHost* host)
    : Coordinator(host, 0) {}

void WriteCoordinator::Reset(uint64_t id, std::string_view set,
                             std::vector<UpdateOp> ops,
                             std::optional<Clock> clear,
                             const ClusterWriteOptions& options,
                             std::function<void(absl::StatusOr<Delta>)> done) {
  Renew(id);
  set_.assign(set);
  partition_ = host_->ring().PartitionOf(set_);
  preference_ = &host_->ring().PreferenceList(partition_);
  // This node coordinates if it holds a replica (no extra hop); otherwise
  // the preference list in order.
  candidates_.clear();
  for (size_t i = 0; i < preference_->size(); ++i) {
    if ((*preference_)[i] == host_->node_id()) {
      candidates_.insert(candidates_.begin(), i);
    } else {
      candidates_.push_back(i);
    }
  }
  attempt_ = 0;
  options_ = options;
  done_ = std::move(done);
  ops_ = std::move(ops);
  clear_ = std::move(clear);
  update_bytes_.clear();
  replicate_bytes_.clear();
  coordinated_ = false;
  delta_ = Delta();
  acked_.assign(preference_->size(), false);
  acks_ = 0;
  deadline_ = next_retry_ = 0;
  starting_ = deferred_ = false;
  deferred_error_.reset();
}

void WriteCoordinator::Release() {
  done_ = nullptr;
  ops_.clear();
  clear_.reset();
  delta_ = Delta();
  deferred_error_.reset();
}

void WriteCoordinator::Start() {
  const uint64_t now = host_->NowMicros();
  deadline_ = now + options_.timeout_micros;
  next_retry_ = now + options_.retry_micros;
  starting_ = true;
  SendUpdate();
  starting_ = false;
  if (deferred_) {
    // Finished (or failed) within Start: the client hears of it from the
    // scheduler, never from inside its own call to Update.
    After(0, [this]() { RunDeferred(); });
  }
}

void WriteCoordinator::RunDeferred() {
  deferred_ = false;
  if (deferred_error_.has_value()) {
    Finish(*std::move(deferred_error_));  // Destroys this.
    return;
  }
  MaybeFinish();
}

void WriteCoordinator::SendUpdate() {
  const size_t candidate =
      (attempt_ / kAttemptsPerCandidate) % candidates_.size();
  const NodeId to = (*preference_)[candidates_[candidate]];
  if (to == host_->node_id()) {
    // This node's own replica coordinates in-process: no message round
    // trip, and no scheduler event.
    CoordinateLocally();
    return;
  }
  if (update_bytes_.empty()) {
    Message m;
    m.header = MessageHeader{
        clear_.has_value() ? MessageType::kClear : MessageType::kUpdate, id_,
        partition_};
    m.set = set_;
    if (clear_.has_value()) {
      m.clock = *clear_;
    } else {
      m.ops = ops_;
    }
    update_bytes_ = m.Encode();  // Encoded once, resent as is.
  }
  host_->Send(to, update_bytes_);
}

void WriteCoordinator::CoordinateLocally() {
  if (coordinated_) return;
  Replica* replica = host_->LocalReplica(partition_);
  if (replica == nullptr) {
    OnCoordinated(host_->node_id(), absl::UnavailableError("no local replica"));
  } else if (clear_.has_value()) {
    OnCoordinated(host_->node_id(), replica->Clear(set_, *clear_));
  } else {
    OnCoordinated(host_->node_id(), replica->Update(set_, ops_));
  }
}

void WriteCoordinator::OnUpdateReply(NodeId from, Message& m) {
  if (m.status.ok()) {
    OnCoordinated(from, std::move(m.delta));
  } else {
    OnCoordinated(from, m.status);
  }
}

void WriteCoordinator::OnCoordinated(NodeId from,
                                     absl::StatusOr<Delta> result) {
  if (coordinated_) return;  // A late or duplicate coordinator reply.
  const int index = IndexOf(from);
  if (index < 0) return;
  if (!result.ok()) {
    // Unavailable: try the next on the timer. Anything else (a bad
    // argument, an invalid context) fails the write.
    if (!absl::IsUnavailable(result.status())) {
      if (starting_) {
        deferred_error_ = result.status();
        deferred_ = true;
      } else {
        Finish(result.status());
      }
    }
    return;
  }
  Ack(index);
  coordinated_ = true;
  delta_ = std::move(*result);
  replicate_bytes_.clear();
  EncodeDeltaMessage(MessageHeader{MessageType::kReplicate, id_, partition_},
                     delta_, &replicate_bytes_);
  for (NodeId n : *preference_) {
    if (n != from) host_->Send(n, replicate_bytes_);
  }
  MaybeFinish();
}

void WriteCoordinator::OnReplicateAck(NodeId from, const absl::Status& status) {
  if (!coordinated_ || !status.ok()) return;
  const int index = IndexOf(from);
  if (index < 0) return;
  Ack(index);
  MaybeFinish();
}

int WriteCoordinator::IndexOf(NodeId node) const {
  for (size_t i = 0; i < preference_->size(); ++i) {
    if ((*preference_)[i] == node) return static_cast<int>(i);
  }
  return -1;
}

void WriteCoordinator::Ack(int index) {
  if (acked_[index]) return;
  acked_[index] = true;
  ++acks_;
}

void WriteCoordinator::OnTick(uint64_t now) {
  if (now >= deadline_) {
    if (done_) {
      Reply(absl::DeadlineExceededError(
          absl::StrCat(clear_.has_value() ? "clear" : "update", " of set \"",
                       set_, "\": ", acks_, " of ", options_.w,
                       " required replicas acknowledged before the timeout")));
    }
    host_->FinishWrite(id_);  // Destroys this.
    return;
  }
  if (now < next_retry_) return;
  next_retry_ = now + options_.retry_micros;
  if (!coordinated_) {
    // No coordinator answered: ask again, then the next one. If a given-up
    // coordinator did apply the update, its late answer is ignored and the
    // update stays on that replica: an add with one more dot, or a remove
    // done twice; both harmless, and repaired into the others by reads.
    ++attempt_;
    if (attempt_ % kAttemptsPerCandidate == 0) {
      ++host_->stats().coordinator_switches;
    }
    SendUpdate();
  } else {
    for (size_t i = 0; i < preference_->size(); ++i) {
      if (!acked_[i]) {
        host_->Send((*preference_)[i], replicate_bytes_);
        ++host_->stats().retransmits;
      }
    }
  }
}

void WriteCoordinator::MaybeFinish() {
  const bool reply = done_ && acks_ >= options_.w;
  const int all = static_cast<int>(preference_->size());
  if (!reply && acks_ < all) return;
  if (starting_) {
    deferred_ = true;  // Start schedules the rest.
    return;
  }
  if (reply) {
    // Replication goes on from replicate_bytes_: the delta itself is
    // handed over.
    std::weak_ptr<bool> token = Token();
    Reply(std::move(delta_));
    // The callback may have finished other operations, even this one.
    if (token.expired()) return;
  }
  // Replicas beyond W keep getting the delta until they ack or the
  // deadline passes.
  if (acks_ == all) host_->FinishWrite(id_);
}

void WriteCoordinator::Finish(absl::StatusOr<Delta> result) {
  auto done = std::move(done_);
  host_->FinishWrite(id_);  // Destroys this.
  if (done) done(std::move(result));
}

void WriteCoordinator::Reply(absl::StatusOr<Delta> result) {
  auto done = std::move(done_);
  done_ = nullptr;
  done(std::move(result));
}

}  // namespace bigset
