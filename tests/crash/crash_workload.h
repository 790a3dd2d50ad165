// The workload of the crash test, shared by the writer process (which runs
// it until it is killed) and the test (which predicts the update that was in
// flight when the writer died). Deterministic in (seed, round, index) and
// the current value, so both sides compute the same update.

#ifndef BIGSET_TESTS_CRASH_WORKLOAD_H_
#define BIGSET_TESTS_CRASH_WORKLOAD_H_

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bigset/core/delta.h"
#include "bigset/replica/replica.h"

namespace bigset::testing {

// Value of each set: element -> dots.
using CrashValues = std::map<std::string, std::map<std::string, std::set<Dot>>>;

inline const std::vector<std::string>& CrashSets() {
  static const std::vector<std::string> sets = {"alpha", std::string("b\0", 2),
                                                "gamma"};
  return sets;
}

// The actor of NextCloudDelta.
inline constexpr ActorId kCloudActor = 0xC10D;

struct CrashUpdate {
  std::string set;
  std::vector<UpdateOp> ops;
  // A clear of the whole set (with its current set-clock) instead of ops.
  bool clear = false;
};

// Update `index` of `round`: 1-4 ops on one set, adds replacing the
// element's current dots and removes of current dots; or, one in twelve, a
// clear of the whole set.
inline CrashUpdate NextCrashUpdate(uint64_t seed, int round, int index,
                                   const CrashValues& values) {
  std::mt19937_64 rng(seed * 1000003u + static_cast<uint64_t>(round) * 7919u +
                      static_cast<uint64_t>(index));
  CrashUpdate u;
  u.set = CrashSets()[rng() % CrashSets().size()];
  if (rng() % 12 == 0) {
    u.clear = true;
    return u;
  }
  auto set_it = values.find(u.set);
  int n = 1 + static_cast<int>(rng() % 4);
  std::set<std::string> used;  // One op per element per update.
  for (int i = 0; i < n; ++i) {
    std::string element = absl::StrCat("e", rng() % 40);
    if (!used.insert(element).second) continue;
    std::vector<Dot> context;
    if (set_it != values.end()) {
      auto e = set_it->second.find(element);
      if (e != set_it->second.end()) {
        context.assign(e->second.begin(), e->second.end());
      }
    }
    if (rng() % 3 == 0) {
      u.ops.push_back(UpdateOp::Remove(element, context));
    } else {
      u.ops.push_back(UpdateOp::Add(element, context));
    }
  }
  return u;
}

// Before update `index`, sometimes (one in three) a delta from an actor that
// never adds: removes of scattered unseen dots, which enter the set-clock as
// a large cloud and make writes rewrite clock segments (killed mid-way too).
// It changes no value.
inline std::optional<Delta> NextCloudDelta(uint64_t seed, int round,
                                           int index) {
  std::mt19937_64 rng(seed * 7340033u + static_cast<uint64_t>(round) * 131u +
                      static_cast<uint64_t>(index));
  if (rng() % 3 != 0) return std::nullopt;
  Delta d;
  d.set = CrashSets()[rng() % CrashSets().size()];
  DeltaOp& op = d.ops.emplace_back();
  op.element = "cloud";
  for (int i = 0; i < 64; ++i) {
    op.context.push_back(Dot{kCloudActor, 1 + rng() % 1000000});
  }
  std::sort(op.context.begin(), op.context.end());
  op.context.erase(std::unique(op.context.begin(), op.context.end()),
                   op.context.end());
  return d;
}

// Applies a delta of this single replica to the values.
inline void ApplyToValues(const Delta& d, CrashValues* values) {
  auto& set = (*values)[d.set];
  if (d.clear.has_value()) {
    for (auto it = set.begin(); it != set.end();) {
      std::erase_if(it->second,
                    [&d](const Dot& dot) { return d.clear->Seen(dot); });
      it = it->second.empty() ? set.erase(it) : std::next(it);
    }
  }
  for (const DeltaOp& op : d.ops) {
    auto& dots = set[op.element];
    for (Dot dot : op.context) dots.erase(dot);
    if (op.add.has_value()) dots.insert(*op.add);
    if (dots.empty()) set.erase(op.element);
  }
  // A read finds no empty set.
  if (set.empty()) values->erase(d.set);
}

// Whether the writer sweeps before update `index`, and with what budget
// (0: no sweep). Small budgets leave sweeps half done when it is killed.
inline uint64_t CrashSweepBudget(uint64_t seed, int round, int index) {
  std::mt19937_64 rng(seed * 40503u + static_cast<uint64_t>(round) * 257u +
                      static_cast<uint64_t>(index));
  return rng() % 2 == 0 ? 1 + rng() % 5 : 0;
}

}  // namespace bigset::testing

#endif  // BIGSET_TESTS_CRASH_WORKLOAD_H_
