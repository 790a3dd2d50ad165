// A reference model of the add-wins set, for tests only.
//
// Deliberately not the replica's algorithm: the value of a set after a group
// of deltas is, dot by dot, every (element, dot) some delta added, minus
// every (element, dot) some delta's context named for that element, minus
// every dot some delta's clear clock has seen. Deltas commute and are
// idempotent, so that is the value any replica must hold after exactly that
// group of deltas, in any order, with any duplicates.

#ifndef BIGSET_TESTS_ORSWOT_MODEL_H_
#define BIGSET_TESTS_ORSWOT_MODEL_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "bigset/core/clock.h"
#include "bigset/core/delta.h"
#include "bigset/core/element_dots.h"

namespace bigset::testing {

using ModelValue = std::map<std::string, std::set<Dot>>;

class OrswotModel {
 public:
  void Absorb(const Delta& d) {
    if (d.clear.has_value()) cleared_.Merge(*d.clear);
    for (const DeltaOp& op : d.ops) {
      for (Dot dot : op.context) removed_.insert({op.element, dot});
      if (op.add.has_value()) added_.insert({op.element, *op.add});
    }
  }

  ModelValue Value() const {
    ModelValue v;
    for (const auto& [element, dot] : added_) {
      if (removed_.count({element, dot}) || cleared_.Seen(dot)) continue;
      v[element].insert(dot);
    }
    return v;
  }

 private:
  std::set<std::pair<std::string, Dot>> added_;
  std::set<std::pair<std::string, Dot>> removed_;
  Clock cleared_;
};

inline ModelValue ToModel(const std::vector<ElementDots>& elements) {
  ModelValue v;
  for (const ElementDots& e : elements) {
    v[e.element].insert(e.dots.begin(), e.dots.end());
  }
  return v;
}

}  // namespace bigset::testing

#endif  // BIGSET_TESTS_ORSWOT_MODEL_H_
