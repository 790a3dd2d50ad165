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
      preference_(host->ServingList(partition_)),
      places_(host->ServingPlaces(partition_)),
      kinds_(preference_.size(), QuorumReply::kNone),
      replies_(preference_.size()) {}

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
  const auto it = std::find(preference_.begin(), preference_.end(), from);
  if (it == preference_.end()) return;
  const size_t index = static_cast<size_t>(it - preference_.begin());
  if (kinds_[index] != QuorumReply::kNone) return;  // A duplicate.
  if (!m.status.ok()) {
    kinds_[index] = ReplyOfError(m.status);
  } else {
    kinds_[index] = options_.notfound_ok || m.found ? QuorumReply::kFound
                                                    : QuorumReply::kEmpty;
    replies_[index] = m;
  }
  order_.push_back(index);
  const QuorumPick pick =
      PickQuorum(places_, kinds_, order_, static_cast<size_t>(options_.r));
  if (pick.outcome == QuorumPick::Outcome::kWait) return;
  if (pick.outcome == QuorumPick::Outcome::kUnavailable) {
    Finish(TooFewPlaces("count", set_, pick.live_places, options_.r));
    return;
  }
  std::vector<const msg::CountReply*> quorum;
  for (size_t i : pick.members) quorum.push_back(&replies_[i]);
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
  for (size_t i = 0; i < preference_.size(); ++i) {
    if (kinds_[i] == QuorumReply::kNone) {
      host_->Send(preference_[i], bytes);
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
