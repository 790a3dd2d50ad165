// The write coordinator: coordinate on one replica of the preference list,
// replicate the delta to the others, answer after W durable acks.

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "node_impl.h"

namespace bigset {
namespace {
constexpr size_t kAttemptsPerCandidate = 3;
}  // namespace

WriteOp::WriteOp(Node::Impl* node, uint64_t id, std::string set,
                 std::vector<UpdateOp> ops, const ClusterWriteOptions& options,
                 std::function<void(absl::StatusOr<Delta>)> done)
    : node_(node),
      id_(id),
      set_(std::move(set)),
      partition_(node->ring().PartitionOf(set_)),
      preference_(node->ring().PreferenceList(partition_)),
      ops_(std::move(ops)),
      options_(options),
      done_(std::move(done)) {
  // This node coordinates if it holds a replica (no extra hop); otherwise
  // the preference list in order.
  if (std::find(preference_.begin(), preference_.end(), node->id()) !=
      preference_.end()) {
    candidates_.push_back(node->id());
  }
  for (NodeId n : preference_) {
    if (n != node->id()) candidates_.push_back(n);
  }
}

void WriteOp::Start() {
  deadline_ = node_->scheduler()->NowMicros() + options_.timeout_micros;
  SendUpdate();
  const uint64_t id = id_;
  Node::Impl* node = node_;
  node_->After(options_.retry_micros, [node, id]() {
    if (WriteOp* op = node->FindWrite(id)) op->OnTimer();
  });
}

void WriteOp::SendUpdate() {
  Message m;
  m.type = MessageType::kUpdate;
  m.request_id = id_;
  m.partition = partition_;
  m.set = set_;
  m.ops = ops_;
  // Each candidate gets kAttemptsPerCandidate tries (retries of a lost
  // message hit its reply cache and apply nothing twice) before the next
  // is asked.
  node_->Send(candidates_[(attempt_ / kAttemptsPerCandidate) % candidates_.size()],
              m);
}

void WriteOp::SendReplicate(NodeId to) {
  Message m;
  m.type = MessageType::kReplicate;
  m.request_id = id_;
  m.partition = partition_;
  m.delta = *delta_;
  node_->Send(to, m);
}

void WriteOp::OnUpdateReply(NodeId from, Message& m) {
  if (delta_.has_value()) return;  // A late or duplicate coordinator reply.
  if (!m.status.ok()) {
    if (absl::IsUnavailable(m.status)) return;  // Try the next on the timer.
    Finish(m.status);
    return;
  }
  delta_ = std::move(m.delta);
  coordinator_ = from;
  acked_.insert(from);
  for (NodeId n : preference_) {
    if (n != from) SendReplicate(n);
  }
  MaybeFinish();
}

void WriteOp::OnReplicateAck(NodeId from, const Message& m) {
  if (!delta_.has_value() || !m.status.ok()) return;
  if (std::find(preference_.begin(), preference_.end(), from) ==
      preference_.end()) {
    return;
  }
  acked_.insert(from);
  MaybeFinish();
}

void WriteOp::OnTimer() {
  const uint64_t now = node_->scheduler()->NowMicros();
  if (now >= deadline_) {
    if (done_) {
      Reply(absl::DeadlineExceededError(absl::StrCat(
          "update of set \"", set_, "\": ", acked_.size(), " of ",
          options_.w, " required replicas acknowledged before the timeout")));
    }
    node_->EraseWrite(id_);  // Destroys this.
    return;
  }
  if (!delta_.has_value()) {
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
    for (NodeId n : preference_) {
      if (!acked_.count(n)) {
        SendReplicate(n);
        ++node_->stats().retransmits;
      }
    }
  }
  const uint64_t id = id_;
  Node::Impl* node = node_;
  node_->After(options_.retry_micros, [node, id]() {
    if (WriteOp* op = node->FindWrite(id)) op->OnTimer();
  });
}

void WriteOp::MaybeFinish() {
  const uint64_t id = id_;
  Node::Impl* node = node_;
  if (done_ && static_cast<int>(acked_.size()) >= options_.w) {
    Reply(*delta_);
    // The callback may have destroyed the node's ops; look this one up.
    if (node->FindWrite(id) != this) return;
  }
  // Replicas beyond W keep getting the delta until they ack or the
  // deadline passes.
  if (acked_.size() == preference_.size()) node_->EraseWrite(id_);
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
