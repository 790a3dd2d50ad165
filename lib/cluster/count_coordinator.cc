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
    : QuorumReadCoordinator(host, id, std::move(set), options, "count",
                            std::move(done)) {}

void CountCoordinator::Start() {
  const std::string bytes = RequestBytes();
  for (NodeId n : preference_) host_->Send(n, bytes);
  StartTimer();
}

std::string CountCoordinator::RequestBytes() const {
  return EncodeMessage(id_, partition_, msg::Count{.set = set_});
}

void CountCoordinator::Release() {
  host_->requests().Finish(id_);  // Destroys this.
}

void CountCoordinator::OnReply(NodeId from, const msg::CountReply& m) {
  const QuorumReply kind = options_.notfound_ok || m.found
                               ? QuorumReply::kFound
                               : QuorumReply::kEmpty;
  if (Record(from, msg::CountReply(m), m.status, kind) == npos) return;
  const QuorumPick pick = Pick();
  if (pick.outcome != QuorumPick::Outcome::kChosen) return;
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

}  // namespace bigset
