#include "cluster/query_coordinator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cluster/read_merger.h"
#include "cluster/request_registry.h"

namespace bigset {

QueryCoordinator::QueryCoordinator(
    CoordinatorHost* host, uint64_t id, std::string set,
    std::vector<std::string> elements, const ClusterReadOptions& options,
    std::function<void(absl::StatusOr<Membership>)> done)
    : Coordinator(host, id),
      set_(std::move(set)),
      partition_(host->ring().PartitionOf(set_)),
      elements_(std::move(elements)),
      options_(options),
      done_(std::move(done)),
      preference_(host->ServingList(partition_)) {}

void QueryCoordinator::Start() {
  deadline_ = host_->NowMicros() + options_.timeout_micros;
  const std::string bytes = QueryBytes();
  for (NodeId n : preference_) host_->Send(n, bytes);
  ScheduleTimer();
}

std::string QueryCoordinator::QueryBytes() const {
  return EncodeMessage(id_, partition_,
                       msg::Query{.set = set_, .elements = elements_});
}

void QueryCoordinator::OnReply(NodeId from, msg::QueryReply& m) {
  if (found_.count(from) || not_found_.count(from) || failed_.count(from)) {
    return;  // A duplicate.
  }
  if (std::find(preference_.begin(), preference_.end(), from) ==
      preference_.end()) {
    return;
  }
  if (!m.status.ok() || m.elements.size() != elements_.size()) {
    failed_.insert(from);
  } else if (options_.notfound_ok || !m.clock.empty()) {
    found_order_.push_back(from);
    found_[from] = std::move(m);
  } else {
    not_found_[from] = std::move(m);
  }
  const size_t r = static_cast<size_t>(options_.r);
  const size_t answered = found_.size() + not_found_.size() + failed_.size();
  std::vector<std::pair<NodeId, msg::QueryReply*>> quorum;
  if (found_.size() >= r) {
    for (NodeId n : found_order_) {
      if (quorum.size() < r) quorum.emplace_back(n, &found_[n]);
    }
  } else if (answered == preference_.size() &&
             found_.size() + not_found_.size() >= r) {
    // Everyone answered and fewer than R hold the set: the empty replicas
    // make up the quorum after all (as for reads).
    for (NodeId n : found_order_) quorum.emplace_back(n, &found_[n]);
    for (auto& [n, reply] : not_found_) {
      if (quorum.size() < r) quorum.emplace_back(n, &reply);
    }
  } else if (preference_.size() - failed_.size() < r) {
    Finish(absl::UnavailableError(
        absl::StrCat("query of set \"", set_, "\": only ",
                     preference_.size() - failed_.size(),
                     " replicas answered, r = ", options_.r)));
    return;
  } else {
    return;  // Waiting for more replies.
  }
  Answer(std::move(quorum));
}

void QueryCoordinator::Answer(
    std::vector<std::pair<NodeId, msg::QueryReply*>> replies) {
  // Each reply is one complete, sorted "chunk" of the elements it holds.
  std::vector<Clock> clocks;
  std::vector<std::vector<ElementDots>> chunks;
  for (auto& [node, reply] : replies) {
    clocks.push_back(std::move(reply->clock));
    std::vector<ElementDots> present;
    for (ElementDots& e : reply->elements) {
      if (!e.dots.empty()) present.push_back(std::move(e));
    }
    std::sort(present.begin(), present.end(),
              [](const ElementDots& a, const ElementDots& b) {
                return a.element < b.element;
              });
    present.erase(std::unique(present.begin(), present.end(),
                              [](const ElementDots& a, const ElementDots& b) {
                                return a.element == b.element;
                              }),
                  present.end());
    chunks.push_back(std::move(present));
  }
  ReadMerger merger(std::move(clocks));
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (!merger.Push(i, std::move(chunks[i]), /*done=*/true)) {
      // Cannot happen: each chunk was sorted and deduplicated above, and
      // empty dot lists were dropped.
      Finish(absl::InternalError("query replies could not be merged"));
      return;
    }
  }
  std::vector<ElementDots> merged;
  merger.Merge(&merged);
  if (options_.read_repair) {
    for (size_t i = 0; i < replies.size(); ++i) {
      SendRepair(host_, replies[i].first, partition_, set_,
                 merger.TakeRepairs(i));
    }
  }
  Membership result;
  result.all_present = true;
  for (const std::string& e : elements_) {
    auto it = std::lower_bound(merged.begin(), merged.end(), e,
                               [](const ElementDots& a, const std::string& b) {
                                 return a.element < b;
                               });
    ElementDots& out = result.elements.emplace_back();
    out.element = e;
    if (it != merged.end() && it->element == e) out.dots = it->dots;
    if (out.dots.empty()) result.all_present = false;
  }
  Finish(std::move(result));
}

void QueryCoordinator::ScheduleTimer() {
  After(options_.retry_micros, [this]() { OnTimer(); });
}

void QueryCoordinator::OnTimer() {
  if (host_->NowMicros() >= deadline_) {
    Finish(absl::DeadlineExceededError(
        absl::StrCat("query of set \"", set_, "\": timed out")));
    return;
  }
  const std::string bytes = QueryBytes();
  for (NodeId n : preference_) {
    if (!found_.count(n) && !not_found_.count(n) && !failed_.count(n)) {
      host_->Send(n, bytes);
      ++host_->stats().retransmits;
    }
  }
  ScheduleTimer();
}

void QueryCoordinator::Finish(absl::StatusOr<Membership> result) {
  auto done = std::move(done_);
  host_->requests().FinishQuery(id_);  // Destroys this.
  done(std::move(result));
}

void QueryCoordinator::Abort(const absl::Status& status) {
  if (!done_) return;
  auto done = std::move(done_);
  done_ = nullptr;
  done(status);
}

}  // namespace bigset
