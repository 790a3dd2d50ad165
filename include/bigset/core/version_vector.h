// VersionVector: per actor, the highest counter such that every counter in
// [1, counter] has been seen.
//
// Stored as a flat vector of (actor, counter) sorted by actor. Clocks have
// few actors (one per replica that ever wrote to a set), so a contiguous
// array searched by binary search beats any node-based map on the hot path
// (`Clock::Seen`).
//
// Invariant: no entry has counter 0 (an absent actor and counter 0 mean the
// same thing, and keeping one representation makes equality structural).
//
// Thread-safety: a value type. Const methods may be called concurrently;
// mutation requires external synchronisation.

#ifndef BIGSET_CORE_VERSION_VECTOR_H_
#define BIGSET_CORE_VERSION_VECTOR_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bigset/core/dot.h"
#include "bigset/export.h"

namespace bigset {

class BIGSET_EXPORT VersionVector {
 public:
  struct Entry {
    ActorId actor;
    uint64_t counter;  // >= 1
    friend bool operator==(const Entry&, const Entry&) = default;
  };
  using const_iterator = std::vector<Entry>::const_iterator;

  VersionVector() = default;

  // The counter for `actor`, 0 if absent.
  uint64_t Get(ActorId actor) const {
    auto it = LowerBound(actor);
    return (it != entries_.end() && it->actor == actor) ? it->counter : 0;
  }

  // Sets the counter for `actor` (0 removes the actor). May decrease it.
  void Set(ActorId actor, uint64_t counter);

  // Pointwise maximum. O(size() + other.size()).
  void Merge(const VersionVector& other);

  // True iff Get(a) >= other.Get(a) for every actor a.
  bool Descends(const VersionVector& other) const;

  bool empty() const { return entries_.empty(); }
  // Number of actors with counter >= 1.
  size_t size() const { return entries_.size(); }
  // Entries in ascending actor order.
  const_iterator begin() const { return entries_.begin(); }
  const_iterator end() const { return entries_.end(); }

  void clear() { entries_.clear(); }

  // "{a:10, b:3}" with actors in hex.
  std::string DebugString() const;

  friend bool operator==(const VersionVector&, const VersionVector&) = default;

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

  std::vector<Entry> entries_;  // sorted by actor, counters >= 1
};

}  // namespace bigset

#endif  // BIGSET_CORE_VERSION_VECTOR_H_
