// Clock: a set of dots, stored as a version vector plus a dot cloud.
//
// Per actor, a clock holds a *base* b (the dots [1, b], all seen) and a
// *cloud*: the seen counters that are not contiguous with the base. It is
// always normalised:
//   - every cloud counter of an actor is > base + 1 (a cloud run starting at
//     base + 1 is absorbed into the base), so the base is exactly the longest
//     seen prefix 1, 2, ..., b;
//   - no actor has an empty cloud and no actor has base 0 in the vector.
// Hence two clocks holding the same dots are structurally equal, and
// `operator==` is set equality.
//
// Counter 0 is not a dot: AddDot ignores it and Seen reports it unseen.
// Counters use the full range [1, UINT64_MAX].
//
// Thread-safety: a Clock is a value type. Concurrent const access is safe;
// concurrent mutation, or mutation concurrent with reads, is not.

#ifndef BIGSET_CORE_CLOCK_H_
#define BIGSET_CORE_CLOCK_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "bigset/core/dot.h"
#include "bigset/core/dot_cloud.h"
#include "bigset/core/version_vector.h"
#include "bigset/export.h"

namespace bigset {

class BIGSET_EXPORT Clock {
 public:
  // First byte of every encoding produced by EncodeTo.
  static constexpr uint8_t kFormatVersion = 1;

  Clock() = default;

  // A clock made of a version vector and per-actor clouds (actors
  // ascending, sets non-empty, every cloud counter above its actor's base
  // + 1). DataLoss if they do not form a normalised clock (the parts come
  // from storage).
  static absl::StatusOr<Clock> FromParts(
      VersionVector vv, std::vector<std::pair<ActorId, IntervalSet>> clouds);

  // True iff `dot` is in the set. Counter 0 is never seen.
  // Hot path: a binary search over the actors, and a btree lookup only when
  // the counter lies above the actor's base.
  bool Seen(Dot dot) const {
    // counter - 1 < base  <=>  1 <= counter <= base (0 wraps to UINT64_MAX).
    if (dot.counter - 1 < vv_.Get(dot.actor)) return true;
    return dot.counter != 0 && !cloud_.empty() && cloud_.Contains(dot);
  }

  // Appends each of `dots` to *seen if Seen(dot), else to *unseen, in
  // order. REQUIRES: `dots` ascending. Many dots (a transfer chunk's) cost a
  // base lookup per actor and a cloud search per window or run they reach
  // (IntervalSet::SortedProbe), not per dot.
  void SplitSeen(std::span<const Dot> dots, std::vector<Dot>* seen,
                 std::vector<Dot>* unseen) const;

  // Generates the next event of `actor`: (MaxCounter(actor) + 1), adds it to
  // the clock and returns it. Counters are never reused, even when the cloud
  // holds dots above the base (the new dot goes above all of them).
  // Returns ResourceExhaustedError if MaxCounter(actor) == UINT64_MAX; the
  // clock is then unchanged.
  absl::StatusOr<Dot> Increment(ActorId actor);

  // Adds `dot`, absorbing it (and any cloud run it makes contiguous) into
  // the base. A dot with counter 0 is ignored. O(log n).
  void AddDot(Dot dot);
  void AddDots(std::span<const Dot> dots);

  // Join: this = this ∪ other. Linear in the runs of both clocks (a cloud
  // much smaller than ours is merged run by run, O(m log n)).
  void Merge(const Clock& other);
  // True iff every dot of `other` is seen by this clock (this ⊇ other).
  // O(actors + runs).
  bool Descends(const Clock& other) const;

  // Dots in both `a` and `b`.
  static Clock Intersection(const Clock& a, const Clock& b);
  // Dots in `a` and not in `b`.
  static Clock Complement(const Clock& a, const Clock& b);
  // this = this \ other. May shrink a base: {a:10} minus a:3 leaves base
  // a:2 and cloud a:[4..10].
  void Subtract(const Clock& other);

  bool empty() const { return vv_.empty() && cloud_.empty(); }
  void clear() {
    vv_.clear();
    cloud_.clear();
  }
  // Number of dots, saturating at UINT64_MAX.
  uint64_t DotCount() const;
  // Largest counter seen for `actor` (0 if none).
  uint64_t MaxCounter(ActorId actor) const;
  // Actors with at least one dot, ascending.
  std::vector<ActorId> Actors() const;

  // The bases (every counter in [1, vv().Get(a)] is seen) and the rest.
  const VersionVector& vv() const { return vv_; }
  const DotCloud& cloud() const { return cloud_; }

  // Calls fn(ActorId actor, uint64_t lo, uint64_t hi) for every maximal run
  // of seen counters [lo, hi], in ascending (actor, lo) order. The base is
  // the run [1, base]. O(number of runs).
  template <typename Fn>
  void ForEachInterval(Fn&& fn) const;
  // Calls fn(Dot) for every dot in ascending order. O(DotCount()): prefer
  // ForEachInterval when bases may be large.
  template <typename Fn>
  void ForEachDot(Fn&& fn) const;

  // True iff the normalisation invariants hold (always, unless there is a
  // bug). For tests and debug checks. O(actors + runs).
  bool IsNormalized() const;

  // "{ab:10, cd:3+[5, 7..9], ef:0+[2]}" (actors in hex, base, then cloud).
  std::string DebugString() const;

  // Appends the versioned binary encoding to *dst. Layout (all varints are
  // LEB128, see lib/coding.h):
  //   byte    version (= kFormatVersion)
  //   varint  number of actors
  //   per actor, actors strictly ascending:
  //     fixed64 actor (big-endian; actor ids are random, a varint would
  //             only grow them)
  //     varint  base
  //     varint  number of cloud segments
  //     segments, covering the cloud counters in ascending order.
  // Cloud counters are delta-coded from a cursor: the smallest counter that
  // may come next, i.e. base + 2 at the start of an actor and hi + 2 after a
  // run ending at hi (runs are maximal, so the next one starts at hi + 2 or
  // later). Each segment starts with varint (count << 1 | kind):
  //   kind 0, RUNS:   count >= 1 runs, each: varint (lo - cursor),
  //                   varint (hi - lo).
  //   kind 1, BITMAP: count >= 1 bytes. varint (start - cursor), then count
  //                   bytes; bit i (LSB first) set means counter start + i
  //                   is seen. Bit 0 and the last byte are non-zero.
  // The encoder splits the runs into windows of at most 4096 counters (a
  // window starts at the first run not yet placed; a run crossing its end
  // starts the next window, so runs are never split), codes each window as
  // whichever kind is smaller, merges adjacent RUNS windows, and extends a
  // BITMAP segment over the next window when cheaper than a new segment.
  // O(runs + bitmap bytes).
  void EncodeTo(std::string* dst) const;
  std::string Encode() const {
    std::string s;
    EncodeTo(&s);
    return s;
  }
  // Decodes a complete encoding (trailing bytes are an error). Validates
  // everything and never reads out of bounds. Returns InvalidArgumentError
  // for an unknown format version and DataLossError for malformed,
  // truncated or non-normalised input.
  static absl::StatusOr<Clock> Decode(std::string_view in);

  friend bool operator==(const Clock&, const Clock&) = default;

 private:
  // Restores the invariant between the base of `actor` and *counters (its
  // cloud, possibly detached from cloud_) after either grew: drops cloud
  // counters the base covers and absorbs a run starting at base + 1. May
  // leave *counters empty; the caller removes it.
  void Normalize(ActorId actor, IntervalSet* counters);

  VersionVector vv_;
  DotCloud cloud_;
};

template <typename Fn>
void Clock::ForEachInterval(Fn&& fn) const {
  auto v = vv_.begin();
  auto c = cloud_.begin();
  while (v != vv_.end() || c != cloud_.end()) {
    if (c == cloud_.end() || (v != vv_.end() && v->actor < c->actor)) {
      fn(v->actor, uint64_t{1}, v->counter);
      ++v;
      continue;
    }
    if (v != vv_.end() && v->actor == c->actor) {
      fn(v->actor, uint64_t{1}, v->counter);
      ++v;
    }
    for (const auto& [lo, hi] : c->counters) fn(c->actor, lo, hi);
    ++c;
  }
}

template <typename Fn>
void Clock::ForEachDot(Fn&& fn) const {
  ForEachInterval([&fn](ActorId actor, uint64_t lo, uint64_t hi) {
    for (uint64_t counter = lo;; ++counter) {
      fn(Dot{actor, counter});
      if (counter == hi) break;  // hi may be UINT64_MAX
    }
  });
}

}  // namespace bigset

#endif  // BIGSET_CORE_CLOCK_H_
