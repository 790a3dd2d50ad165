#include "cluster/count_coordinator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace bigset {

CountCoordinator::CountCoordinator(
    uint64_t id, std::string set, QuorumReadSetup setup,
    const ClusterReadOptions& options,
    std::function<void(absl::StatusOr<std::optional<uint64_t>>)> done)
    : QuorumReadCoordinator(id, std::move(set), std::move(setup), options,
                            "count", std::move(done)) {}

RequestOutput CountCoordinator::Start(uint64_t now) {
  RequestOutput out;
  const std::string bytes = RequestBytes();
  for (NodeId n : preference_) out.Add(n, bytes);
  StartTimer(now, &out);
  return out;
}

std::string CountCoordinator::RequestBytes() const {
  return EncodeMessage(id_, partition_, msg::Count{.set = set_});
}

RequestOutput CountCoordinator::Step(NodeId from, const msg::CountReply& m) {
  RequestOutput out;
  const QuorumReply kind = options_.notfound_ok || m.found
                               ? QuorumReply::kFound
                               : QuorumReply::kEmpty;
  if (Record(from, msg::CountReply(m), m.status, kind) == npos) return out;
  const QuorumPick pick = Pick(&out);
  if (pick.outcome != QuorumPick::Outcome::kChosen) return out;
  std::vector<const msg::CountReply*> quorum;
  for (size_t i : pick.members) quorum.push_back(&replies_[i]);
  Answer(quorum, &out);
  return out;
}

void CountCoordinator::Answer(
    const std::vector<const msg::CountReply*>& replies, RequestOutput* out) {
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
      Finish(std::optional<uint64_t>(), out);
      return;
    }
  }
  Finish(std::optional<uint64_t>(first->found ? first->count : 0), out);
}

}  // namespace bigset
