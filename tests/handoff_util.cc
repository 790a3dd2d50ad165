#include "handoff_util.h"

#include <catch2/catch.hpp>
#include <set>

#include "absl/strings/str_cat.h"

namespace bigset::testing {

void CheckKnown(const std::string& set, const std::vector<ElementDots>& read,
                const KnownModel& model) {
  std::set<std::string> present;
  for (const ElementDots& e : read) present.insert(e.element);
  auto it = model.sets.find(set);
  if (it == model.sets.end()) return;
  for (const auto& [element, known] : it->second) {
    CAPTURE(set, element);
    if (known == Known::kPresent) CHECK(present.count(element) == 1);
    if (known == Known::kAbsent) CHECK(present.count(element) == 0);
  }
}

std::string Unsettled(Simulator& sim) {
  std::string out;
  const Ring& ring = sim.ring();
  for (NodeId id = 1; id <= sim.node_count(); ++id) {
    Node* node = sim.node(id);
    if (node == nullptr) continue;
    const Node::Stats s = node->stats();
    if (s.ring_epoch == ring.epoch() && s.partitions_moving == 0 &&
        s.handoffs_pending == 0 && s.handoffs_running == 0 &&
        s.partitions_releasing == 0) {
      continue;
    }
    absl::StrAppend(&out, "node ", id, ": epoch ", s.ring_epoch, ", moving ",
                    s.partitions_moving, ", pending ", s.handoffs_pending,
                    ", running ", s.handoffs_running, ", releasing ",
                    s.partitions_releasing, "\n");
    for (uint32_t p = 0; p < ring.ring_size(); ++p) {
      if (node->ServingList(p) == ring.PreferenceList(p)) continue;
      absl::StrAppend(&out, "  p", p, " serving");
      for (NodeId n : node->ServingList(p)) absl::StrAppend(&out, " ", n);
      absl::StrAppend(&out, ", ring");
      for (NodeId n : ring.PreferenceList(p)) absl::StrAppend(&out, " ", n);
      absl::StrAppend(&out, "\n");
    }
  }
  return out;
}

}  // namespace bigset::testing
