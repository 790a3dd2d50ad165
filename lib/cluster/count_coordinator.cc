#include "cluster/count_coordinator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cluster/request_registry.h"

namespace bigset {

CountCoordinator::CountCoordinator(
    CoordinatorHost* host, uint64_t id, std::string set,
    const ClusterReadOptions& options,
    std::function<void(absl::StatusOr<std::optional<uint64_t>>)> done)
    : Coordinator(host, id),
      set_(std::move(set)),
      partition_(host->ring().PartitionOf(set_)),
      options_(options),
      done_(std::move(done)),
      preference_(host->ServingList(partition_)) {}

void CountCoordinator::Start() {
  deadline_ = host_->NowMicros() + options_.timeout_micros;
  const std::string bytes = CountBytes();
  for (NodeId n : preference_) host_->Send(n, bytes);
  ScheduleTimer();
}

std::string CountCoordinator::CountBytes() const {
  return EncodeMessage(id_, partition_, msg::Count{.set = set_});
}

void CountCoordinator::OnReply(NodeId from, const msg::CountReply& m) {
  if (found_.count(from) || not_found_.count(from) || failed_.count(from)) {
    return;  // A duplicate.
  }
  if (std::find(preference_.begin(), preference_.end(), from) ==
      preference_.end()) {
    return;
  }
  if (!m.status.ok()) {
    failed_.insert(from);
  } else if (options_.notfound_ok || m.found) {
    found_order_.push_back(from);
    found_[from] = m;
  } else {
    not_found_[from] = m;
  }
  const size_t r = static_cast<size_t>(options_.r);
  const size_t answered = found_.size() + not_found_.size() + failed_.size();
  std::vector<const msg::CountReply*> quorum;
  if (found_.size() >= r) {
    for (NodeId n : found_order_) {
      if (quorum.size() < r) quorum.push_back(&found_[n]);
    }
  } else if (answered == preference_.size() &&
             found_.size() + not_found_.size() >= r) {
    // As for queries: the empty replicas make up the quorum after all.
    for (NodeId n : found_order_) quorum.push_back(&found_[n]);
    for (auto& [n, reply] : not_found_) {
      if (quorum.size() < r) quorum.push_back(&reply);
    }
  } else if (preference_.size() - failed_.size() < r) {
    Finish(absl::UnavailableError(
        absl::StrCat("count of set \"", set_, "\": only ",
                     preference_.size() - failed_.size(),
                     " replicas answered, r = ", options_.r)));
    return;
  } else {
    return;  // Waiting for more replies.
  }
  Answer(quorum);
}

void CountCoordinator::Answer(
    const std::vector<const msg::CountReply*>& replies) {
  // Replicas without the set hold nothing: they agree with each other, and
  // with no replica that holds some.
  const msg::CountReply* first = replies.front();
  for (const msg::CountReply* m : replies) {
    const bool same =
        m->found == first->found &&
        (!m->found ||
         (m->set_digest != 0 && m->set_digest == first->set_digest &&
          m->tombstone_digest == first->tombstone_digest &&
          m->count == first->count));
    if (!same) {
      Finish(std::optional<uint64_t>());
      return;
    }
  }
  Finish(std::optional<uint64_t>(first->found ? first->count : 0));
}

void CountCoordinator::ScheduleTimer() {
  After(options_.retry_micros, [this]() { OnTimer(); });
}

void CountCoordinator::OnTimer() {
  if (host_->NowMicros() >= deadline_) {
    Finish(absl::DeadlineExceededError(
        absl::StrCat("count of set \"", set_, "\": timed out")));
    return;
  }
  const std::string bytes = CountBytes();
  for (NodeId n : preference_) {
    if (!found_.count(n) && !not_found_.count(n) && !failed_.count(n)) {
      host_->Send(n, bytes);
      ++host_->stats().retransmits;
    }
  }
  ScheduleTimer();
}

void CountCoordinator::Finish(absl::StatusOr<std::optional<uint64_t>> result) {
  auto done = std::move(done_);
  host_->requests().FinishCount(id_);  // Destroys this.
  done(std::move(result));
}

void CountCoordinator::Abort(const absl::Status& status) {
  if (!done_) return;
  auto done = std::move(done_);
  done_ = nullptr;
  done(status);
}

}  // namespace bigset
