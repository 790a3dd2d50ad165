// DotCloud: per actor, a sparse set of counters.
//
// A DotCloud holds, per actor, the counters a clock has seen that are not
// contiguous with that actor's base (see clock.h). Two shapes dominate in
// practice and both must stay small and fast:
//  - one gap followed by a long contiguous run (a replica that missed one
//    event and then saw a million more): a single interval;
//  - many scattered counters (removals seen out of order, hand-off
//    trackers): many short intervals, inserted in no particular order.
// Both are served by IntervalSet: runs in an absl::btree_map (O(log n) point
// insertion and lookup, one entry per run however long), and dense windows
// as bitmaps.
//
// Thread-safety: value types. Const methods may be called concurrently;
// mutation requires external synchronisation.

#ifndef BIGSET_CORE_DOT_CLOUD_H_
#define BIGSET_CORE_DOT_CLOUD_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bigset/core/dot.h"
#include "bigset/core/interval_set.h"
#include "bigset/export.h"

namespace bigset {

// Per actor, a non-empty IntervalSet of counters. Entries are kept in a flat
// vector sorted by actor (few actors; see version_vector.h for why).
//
// Invariant: no actor maps to an empty set, so equality is structural.
// A DotCloud on its own accepts any counters; the stronger invariant that
// cloud counters lie strictly above base + 1 is maintained by Clock.
class BIGSET_EXPORT DotCloud {
 public:
  struct Entry {
    ActorId actor;
    IntervalSet counters;  // never empty
    friend bool operator==(const Entry&, const Entry&) = default;
  };
  using const_iterator = std::vector<Entry>::const_iterator;

  DotCloud() = default;

  bool Contains(Dot dot) const {
    const IntervalSet* s = Find(dot.actor);
    return s != nullptr && s->Contains(dot.counter);
  }
  // The counters of `actor`, or nullptr if it has none.
  const IntervalSet* Find(ActorId actor) const {
    auto it = LowerBound(actor);
    return (it != entries_.end() && it->actor == actor) ? &it->counters
                                                        : nullptr;
  }

  void Insert(Dot dot) { InsertRange(dot.actor, dot.counter, dot.counter); }
  // REQUIRES: lo <= hi.
  void InsertRange(ActorId actor, uint64_t lo, uint64_t hi);
  // Removes all counters of `actor`.
  void EraseActor(ActorId actor);

  bool empty() const { return entries_.empty(); }
  // Number of actors.
  size_t size() const { return entries_.size(); }
  // Entries in ascending actor order.
  const_iterator begin() const { return entries_.begin(); }
  const_iterator end() const { return entries_.end(); }

  void clear() { entries_.clear(); }

  // Total number of dots, saturating at UINT64_MAX.
  uint64_t DotCount() const;

  // "{ab:[3, 7..9], cd:[5]}".
  std::string DebugString() const;

  friend bool operator==(const DotCloud&, const DotCloud&) = default;

 private:
  friend class Clock;

  std::vector<Entry>::const_iterator LowerBound(ActorId actor) const {
    return std::lower_bound(
        entries_.begin(), entries_.end(), actor,
        [](const Entry& e, ActorId a) { return e.actor < a; });
  }
  std::vector<Entry>::iterator LowerBound(ActorId actor) {
    return std::lower_bound(
        entries_.begin(), entries_.end(), actor,
        [](const Entry& e, ActorId a) { return e.actor < a; });
  }
  // The (possibly new, empty) set of `actor`. Callers must not leave it
  // empty.
  IntervalSet& Mutable(ActorId actor);

  std::vector<Entry> entries_;  // sorted by actor, sets never empty
};

}  // namespace bigset

#endif  // BIGSET_CORE_DOT_CLOUD_H_
