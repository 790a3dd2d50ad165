#include "replica_views.h"

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "test_util.h"

namespace bigset::testing {

ReplicaView View(Simulator& sim, NodeId node, const std::string& set) {
  ReplicaView v;
  v.node = node;
  REQUIRE(sim.node(node) != nullptr);
  Replica* r = sim.node(node)->LocalReplica(sim.ring().PartitionOf(set));
  REQUIRE(r != nullptr);
  for (ElementDots& e : ReadAll(*r, set, 1000, &v.clock)) {
    v.value[e.element].insert(e.dots.begin(), e.dots.end());
  }
  // The replica's kept count must match what it holds, whatever repaired it
  // (anti-entropy pushes, hints, read repair, sweeps).
  absl::StatusOr<uint64_t> count = r->Count(set);
  REQUIRE(count.ok());
  INFO("node " << node << " set " << set << ": count " << *count << ", read "
               << v.value.size());
  REQUIRE(*count == v.value.size());
  return v;
}

std::vector<ReplicaView> Views(Simulator& sim, const std::string& set) {
  std::vector<ReplicaView> views;
  for (NodeId id : sim.ring().PreferenceList(sim.ring().PartitionOf(set))) {
    views.push_back(View(sim, id, set));
  }
  return views;
}

Value Merge(const std::vector<ReplicaView>& views) {
  Value out;
  for (const ReplicaView& v : views) {
    for (const auto& [element, dots] : v.value) {
      for (Dot d : dots) {
        bool keep = true;
        for (const ReplicaView& w : views) {
          auto it = w.value.find(element);
          const bool has = it != w.value.end() && it->second.contains(d);
          if (!has && w.clock.Seen(d)) keep = false;
        }
        if (keep) out[element].insert(d);
      }
    }
  }
  return out;
}

std::vector<std::string> SetsOnlyOn(Simulator& sim, NodeId holder, uint32_t p,
                                    const std::string& prefix, int n,
                                    const std::string& suffix) {
  std::vector<std::string> names;
  Replica* r = sim.node(holder)->LocalReplica(p);
  REQUIRE(r != nullptr);
  for (int i = 0; names.size() < static_cast<size_t>(n); ++i) {
    std::string set = absl::StrCat(prefix, i, suffix);
    if (sim.ring().PartitionOf(set) != p) continue;
    UpdateOp op = UpdateOp::Add("e");
    REQUIRE(r->Update(set, std::span(&op, 1)).ok());
    names.push_back(std::move(set));
  }
  return names;
}

size_t SameAs(Simulator& sim, NodeId node, NodeId reference,
              const std::vector<std::string>& sets) {
  size_t same = 0;
  for (const std::string& set : sets) {
    const ReplicaView a = View(sim, node, set);
    const ReplicaView b = View(sim, reference, set);
    if (a.value == b.value && a.clock == b.clock) ++same;
  }
  return same;
}

std::map<std::string, uint64_t> SumStats(Simulator& sim) {
  std::map<std::string, uint64_t> sum;
  for (NodeId id : sim.node_ids()) {
    if (!sim.IsUp(id)) continue;
    for (const auto& [name, value] : sim.node(id)->stats().All()) {
      sum[name] += value;
    }
  }
  return sum;
}

}  // namespace bigset::testing
