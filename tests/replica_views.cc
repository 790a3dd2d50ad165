#include "replica_views.h"

#include <catch2/catch.hpp>

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

}  // namespace bigset::testing
