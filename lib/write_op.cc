// The write coordinator: coordinate on one replica of the preference list,
// replicate the delta to the others, answer after W durable acks.

#include <algorithm>
#include <bit>
#include <utility>

#include "absl/strings/str_cat.h"
#include "node_impl.h"

namespace bigset {
namespace {
// Tries per coordinating candidate before the next is asked. Retries of a
// lost message hit the candidate's reply cache and apply nothing twice.
constexpr size_t kAttemptsPerCandidate = 3;
}  // namespace

WriteOp::WriteOp(Node::Impl* node) : node_(node) {}

void WriteOp::Reset(uint64_t id, std::string_view set,
                    std::vector<UpdateOp> ops,
                    const ClusterWriteOptions& options,
                    std::function<void(absl::StatusOr<Delta>)> done) {
  id_ = id;
  set_.assign(set);
  partition_ = node_->ring().PartitionOf(set_);
  preference_ = &node_->ring().PreferenceList(partition_);
  // This node coordinates if it holds a replica (no extra hop); otherwise
  // the preference list in order.
  candidates_.clear();
  for (size_t i = 0; i < preference_->size(); ++i) {
    if ((*preference_)[i] == node_->id())
      candidates_.insert(candidates_.begin(), i);
    else
      candidates_.push_back(i);
  }
  attempt_ = 0;
  options_ = options;
  done_ = std::move(done);
  ops_ = std::move(ops);
  update_bytes_.clear();
  replicate_bytes_.clear();
  coordinated_ = false;
  delta_ = Delta();
  acked_ = 0;
  deadline_ = next_retry_ = 0;
  starting_ = deferred_ = false;
  deferred_error_.reset();
}

void WriteOp::Release() {
  done_ = nullptr;
  ops_.clear();
  delta_ = Delta();
  deferred_error_.reset();
}

void WriteOp::Start() {
  const uint64_t now = node_->scheduler()->NowMicros();
  deadline_ = now + options_.timeout_micros;
  next_retry_ = now + options_.retry_micros;
  starting_ = true;
  SendUpdate();
  starting_ = false;
  if (deferred_) {
    // Finished (or failed) within Start: the client hears of it from the
    // scheduler, never from inside its own call to Update.
    const uint64_t id = id_;
    Node::Impl* node = node_;
    node_->After(0, [node, id]() {
      if (WriteOp* op = node->FindWrite(id)) op->RunDeferred();
    });
  }
}

void WriteOp::RunDeferred() {
  deferred_ = false;
  if (deferred_error_.has_value()) {
    Finish(*std::move(deferred_error_));  // Destroys this.
    return;
  }
  MaybeFinish();
}

void WriteOp::SendUpdate() {
  size_t candidate = (attempt_ / kAttemptsPerCandidate) % candidates_.size();
  const NodeId to = (*preference_)[candidates_[candidate]];
  if (to == node_->id()) {
    // This node's own replica coordinates in-process: no message round
    // trip, and no scheduler event.
    CoordinateLocally();
    return;
  }
  if (update_bytes_.empty()) {
    Message m = NewMessage(MessageType::kUpdate, id_, partition_);
    m.set = set_;
    m.ops = ops_;
    update_bytes_ = m.Encode();  // Encoded once, resent as is.
  }
  node_->SendBytes(to, update_bytes_);
}

void WriteOp::CoordinateLocally() {
  if (coordinated_) return;
  Replica* replica = node_->LocalReplica(partition_);
  if (replica == nullptr) {
    OnCoordinated(node_->id(), absl::UnavailableError("no local replica"));
  } else {
    OnCoordinated(node_->id(), replica->Update(set_, ops_));
  }
}

void WriteOp::OnUpdateReply(NodeId from, Message& m) {
  if (m.status.ok()) {
    OnCoordinated(from, std::move(m.delta));
  } else {
    OnCoordinated(from, m.status);
  }
}

void WriteOp::OnCoordinated(NodeId from, absl::StatusOr<Delta> result) {
  if (coordinated_) return;  // A late or duplicate coordinator reply.
  int index = IndexOf(from);
  if (index < 0) return;
  if (!result.ok()) {
    // Unavailable: try the next on the timer.
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
  acked_ |= 1u << index;
  coordinated_ = true;
  delta_ = std::move(*result);
  replicate_bytes_.clear();
  EncodeDeltaMessage(MessageType::kReplicate, id_, partition_, delta_,
                     &replicate_bytes_);
  for (NodeId n : *preference_) {
    if (n != from) node_->SendBytes(n, replicate_bytes_);
  }
  MaybeFinish();
}

void WriteOp::OnReplicateAck(NodeId from, const absl::Status& status) {
  if (!coordinated_ || !status.ok()) return;
  int index = IndexOf(from);
  if (index < 0) return;
  acked_ |= 1u << index;
  MaybeFinish();
}

int WriteOp::IndexOf(NodeId node) const {
  for (size_t i = 0; i < preference_->size(); ++i) {
    if ((*preference_)[i] == node) return static_cast<int>(i);
  }
  return -1;
}

void WriteOp::OnTick(uint64_t now) {
  if (now >= deadline_) {
    if (done_) {
      Reply(absl::DeadlineExceededError(absl::StrCat(
          "update of set \"", set_, "\": ", std::popcount(acked_), " of ",
          options_.w, " required replicas acknowledged before the timeout")));
    }
    node_->EraseWrite(id_);  // Destroys this.
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
      ++node_->stats().coordinator_switches;
    }
    SendUpdate();
  } else {
    for (size_t i = 0; i < preference_->size(); ++i) {
      if (!(acked_ & (1u << i))) {
        node_->SendBytes((*preference_)[i], replicate_bytes_);
        ++node_->stats().retransmits;
      }
    }
  }
}

void WriteOp::MaybeFinish() {
  const int acks = std::popcount(acked_);
  const bool reply = done_ && acks >= options_.w;
  if (!reply && acks < static_cast<int>(preference_->size())) return;
  if (starting_) {
    deferred_ = true;  // Start schedules the rest.
    return;
  }
  const uint64_t id = id_;
  Node::Impl* node = node_;
  if (reply) {
    // Replication goes on from replicate_bytes_: the delta itself is
    // handed over.
    Reply(std::move(delta_));
    // The callback may have finished other operations; look this one up.
    if (node->FindWrite(id) != this) return;
  }
  // Replicas beyond W keep getting the delta until they ack or the
  // deadline passes.
  if (std::popcount(acked_) == static_cast<int>(preference_->size())) {
    node_->EraseWrite(id_);
  }
}

void WriteOp::Finish(absl::StatusOr<Delta> result) {
  auto done = std::move(done_);
  node_->EraseWrite(id_);  // Destroys this.
  if (done) done(std::move(result));
}

void WriteOp::Reply(absl::StatusOr<Delta> result) {
  auto done = std::move(done_);
  done_ = nullptr;
  done(std::move(result));
}

}  // namespace bigset
