#include "cluster/query_coordinator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cluster/read_merger.h"

namespace bigset {

QueryCoordinator::QueryCoordinator(
    uint64_t id, std::string set, QuorumReadSetup setup,
    std::vector<std::string> elements, const ClusterReadOptions& options,
    std::function<void(absl::StatusOr<Membership>)> done)
    : QuorumReadCoordinator(id, std::move(set), std::move(setup), options,
                            "query", std::move(done)),
      elements_(std::move(elements)) {}

RequestOutput QueryCoordinator::Start(uint64_t now, const SlowReplicas& slow) {
  RequestOutput out;
  const size_t n = preference_.size();
  const bool all_at_once = options_.query_hedge_micros == 0;
  asked_.assign(n, all_at_once);
  if (!all_at_once) {
    // R places first, each with all its nodes: this node's own place (its
    // own replica answers without a message), then the list's order;
    // ranked by the slowest marked peer each holds, the lowest first.
    std::vector<uint32_t> order;
    auto consider = [&order](uint32_t place) {
      if (std::find(order.begin(), order.end(), place) == order.end()) {
        order.push_back(place);
      }
    };
    for (size_t i = 0; i < n; ++i) {
      if (preference_[i] == self_) consider(places_[i]);
    }
    for (size_t i = 0; i < n; ++i) consider(places_[i]);
    std::vector<std::pair<uint64_t, uint32_t>> ranked;  // (rank, place)
    for (uint32_t place : order) {
      uint64_t rank = 0;
      for (size_t i = 0; i < n; ++i) {
        if (places_[i] == place && preference_[i] != self_) {
          rank = std::max(rank, slow.Rank(preference_[i], partition_, now));
        }
      }
      ranked.emplace_back(rank, place);
    }
    std::stable_sort(
        ranked.begin(), ranked.end(),
        [](const auto& a, const auto& b) { return a.first < b.first; });
    const size_t chosen =
        std::min(ranked.size(), static_cast<size_t>(std::max(options_.r, 0)));
    for (size_t k = 0; k < chosen; ++k) {
      for (size_t i = 0; i < n; ++i) {
        if (places_[i] == ranked[k].second) asked_[i] = true;
      }
    }
    hedge_at_ = now + options_.query_hedge_micros;
  }
  const std::string bytes = RequestBytes();
  // The peers first, so that they work while this node's own replica
  // answers; it answers now: a write the client makes right after the
  // query (an SADD's adds, sent with its read) then changes it only after
  // the query saw it, as on every other replica.
  for (size_t i = 0; i < n; ++i) {
    if (asked_[i] && preference_[i] != self_) out.Add(preference_[i], bytes);
  }
  for (size_t i = 0; i < n; ++i) {
    if (asked_[i] && preference_[i] == self_) {
      out.Add(preference_[i], bytes, /*first=*/true);
    }
  }
  StartTimer(now, &out);
  return out;
}

void QueryCoordinator::OnTick(uint64_t now, RequestOutput* out) {
  if (now >= hedge_at_) AskTheRest(out, /*hedge_ran_out=*/true);
}

uint64_t QueryCoordinator::DerivedTickAt() const {
  return phase() == Phase::kAskingSome ? hedge_at_ : UINT64_MAX;
}

void QueryCoordinator::AskTheRest(RequestOutput* out, bool hedge_ran_out) {
  if (phase() != Phase::kAskingSome) return;
  AskedAll();
  ++out->queries_hedged;
  if (hedge_ran_out) asked_first_ = asked_;
  const std::string bytes = RequestBytes();
  for (size_t i = 0; i < preference_.size(); ++i) {
    if (asked_[i]) continue;
    asked_[i] = true;
    out->Add(preference_[i], bytes);
  }
}

std::string QueryCoordinator::RequestBytes() const {
  return EncodeMessage(id_, partition_,
                       msg::Query{.set = set_, .elements = elements_});
}

RequestOutput QueryCoordinator::Step(NodeId from, msg::QueryReply& m) {
  RequestOutput out;
  const QuorumReply kind =
      m.elements.size() != elements_.size()      ? QuorumReply::kFailed
      : options_.notfound_ok || !m.clock.empty() ? QuorumReply::kFound
                                                 : QuorumReply::kEmpty;
  const size_t index = Record(from, std::move(m), m.status, kind);
  if (index == npos) return out;
  // One asked can no longer help (or, without notfound_ok, may not): the
  // others are asked now rather than after the hedge.
  if (kinds_[index] != QuorumReply::kFound) {
    AskTheRest(&out, /*hedge_ran_out=*/false);
  }
  // A peer that failed: the node's next hedged queries ask it last
  // (slow_replicas.h).
  if (kinds_[index] == QuorumReply::kFailed && from != self_ &&
      options_.query_hedge_micros > 0) {
    out.slow.push_back({.node = from, .partition = partition_});
  }
  const QuorumPick pick = Pick(&out);
  if (pick.outcome != QuorumPick::Outcome::kChosen) return out;
  // The hedge ran out and the answer is in before a peer asked first
  // answered: one asked after it was faster, so it is slow, not merely
  // behind a busy moment (then it answers first, having started first),
  // and the node's next queries ask it last.
  for (size_t i = 0; i < asked_first_.size(); ++i) {
    if (asked_first_[i] && kinds_[i] == QuorumReply::kNone &&
        preference_[i] != self_) {
      out.slow.push_back({.node = preference_[i],
                          .partition = partition_,
                          .every_partition = true});
    }
  }
  std::vector<std::pair<NodeId, msg::QueryReply*>> quorum;
  for (size_t i : pick.members)
    quorum.emplace_back(preference_[i], &replies_[i]);
  Answer(std::move(quorum), &out);
  return out;
}

void QueryCoordinator::Answer(
    std::vector<std::pair<NodeId, msg::QueryReply*>> replies,
    RequestOutput* out) {
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
      Finish(absl::InternalError("query replies could not be merged"), out);
      return;
    }
  }
  std::vector<ElementDots> merged;
  merger.Merge(&merged);
  if (options_.read_repair) {
    for (size_t i = 0; i < replies.size(); ++i) {
      std::vector<DeltaOp> ops = merger.TakeRepairs(i);
      if (ops.empty()) continue;
      ++out->repairs_sent;
      out->repair_ops_sent += ops.size();
      out->Add(replies[i].first,
               EncodeRepair(partition_, set_, std::move(ops)));
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
  Finish(std::move(result), out);
}

}  // namespace bigset
