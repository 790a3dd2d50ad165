#include "handoff_util.h"

#include <catch2/catch.hpp>
#include <set>

#include "absl/strings/str_cat.h"
#include "test_util.h"

namespace bigset::testing {

void CheckKnown(const std::string& set, const std::vector<ElementDots>& read,
                const KnownModel& model) {
  std::set<std::string> present;
  for (const ElementDots& e : read) present.insert(e.element);
  auto it = model.sets.find(set);
  if (it == model.sets.end()) return;
  auto haunted = model.may_return.find(set);
  for (const auto& [element, known] : it->second) {
    CAPTURE(set, element);
    if (known == Known::kPresent) CHECK(present.count(element) == 1);
    if (known == Known::kAbsent && (haunted == model.may_return.end() ||
                                    haunted->second.count(element) == 0)) {
      CHECK(present.count(element) == 0);
    }
  }
}

std::string Unsettled(Simulator& sim) {
  std::string out;
  const Ring& ring = sim.ring();
  for (NodeId id = 1; id <= sim.node_count(); ++id) {
    Node* node = sim.node(id);
    if (node == nullptr) continue;
    const NodeStats s = node->stats();
    if (Stat(s, "handoff.ring_epoch") == ring.epoch() &&
        Stat(s, "handoff.partitions_moving") == 0 &&
        Stat(s, "handoff.pending") == 0 && Stat(s, "handoff.running") == 0 &&
        Stat(s, "handoff.partitions_releasing") == 0) {
      continue;
    }
    absl::StrAppend(
        &out, "node ", id, ": epoch ", Stat(s, "handoff.ring_epoch"),
        ", moving ", Stat(s, "handoff.partitions_moving"), ", pending ",
        Stat(s, "handoff.pending"), ", running ", Stat(s, "handoff.running"),
        ", releasing ", Stat(s, "handoff.partitions_releasing"), "\n");
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
