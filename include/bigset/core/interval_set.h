// IntervalSet: a set of 64-bit counters, compact for both long runs and
// scattered values.
//
// Thread-safety: a value type. Const methods may be called concurrently;
// mutation requires external synchronisation.

#ifndef BIGSET_CORE_INTERVAL_SET_H_
#define BIGSET_CORE_INTERVAL_SET_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "absl/container/btree_map.h"
#include "bigset/export.h"

namespace bigset {

// A set of uint64_t values. The whole uint64_t range, including 0 and
// UINT64_MAX, is representable; no operation computes hi + 1 when
// hi == UINT64_MAX.
//
// Representation: disjoint runs [lo, hi] in a btree, except in *dense*
// windows (4096 aligned values holding more than 32 runs), which are kept as
// 512-byte bitmaps. A long run costs one btree entry however long it is; a
// window of scattered values costs at most its bitmap. So memory stays within
// a small factor of the clock encoding whatever the shape (a 1 MiB encoded
// clock of alternating counters takes about 1 MiB, not 4 million runs), and
// a decoder of untrusted bytes allocates in proportion to its input. A
// window turns back into runs when its bitmap holds 16 runs or fewer.
//
// Iteration yields the maximal intervals of the set, ascending, as pairs
// (lo, hi) with hi inclusive, whatever the representation.
//
// Used as the per-actor set of counters of a DotCloud and as scratch space
// for clock arithmetic (where an actor's base is the interval [1, base]).
class BIGSET_EXPORT IntervalSet {
 public:
  // absl's btree scans each node linearly when the comparator is std::less
  // on an integer key. Lookups at random counters (Seen on a scattered
  // cloud) mispredict the end of that scan; binary search within a node,
  // which any other comparator type selects, measured ~20% faster.
  struct CounterLess {
    bool operator()(uint64_t a, uint64_t b) const { return a < b; }
  };
  using RunMap = absl::btree_map<uint64_t, uint64_t, CounterLess>;
  // Values per dense window, and the window of a value.
  static constexpr uint64_t kWindow = 4096;
  static constexpr uint64_t WindowOf(uint64_t v) { return v & ~(kWindow - 1); }
  struct Block {
    std::array<uint64_t, kWindow / 64> words{};
    friend bool operator==(const Block&, const Block&) = default;
  };
  using BlockMap = absl::btree_map<uint64_t, Block, CounterLess>;

  // Iterates the maximal intervals in ascending order; `it->first` is lo,
  // `it->second` is hi (inclusive).
  class BIGSET_EXPORT const_iterator {
   public:
    using value_type = std::pair<uint64_t, uint64_t>;
    using difference_type = std::ptrdiff_t;
    using pointer = const value_type*;
    using reference = const value_type&;
    using iterator_category = std::forward_iterator_tag;

    const_iterator() = default;
    reference operator*() const { return current_; }
    pointer operator->() const { return &current_; }
    const_iterator& operator++() {
      Advance();
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator old = *this;
      Advance();
      return old;
    }
    friend bool operator==(const const_iterator& a, const const_iterator& b) {
      return a.at_end_ == b.at_end_ && (a.at_end_ || a.current_ == b.current_);
    }

   private:
    friend class IntervalSet;
    // Positions at the first maximal interval with a value >= from (the
    // first one is clipped to start at `from`).
    const_iterator(const IntervalSet* set, uint64_t from);
    // The next piece (a run, or a run of set bits in a block) in order;
    // false at the end.
    bool NextPiece(uint64_t* lo, uint64_t* hi);
    void Advance();

    const IntervalSet* set_ = nullptr;
    RunMap::const_iterator run_;
    BlockMap::const_iterator block_;
    uint32_t bit_ = 0;    // Next bit of *block_ to look at.
    uint64_t floor_ = 0;  // Clip for the first piece.
    bool has_next_ = false;
    value_type next_{0, 0};  // Lookahead piece.
    value_type current_{0, 0};
    bool at_end_ = true;
  };

  IntervalSet() = default;
  // The set of `values`, ascending (repeats allowed), built a window at a
  // time: many scattered values cost a bitmap each window, not an insert
  // each.
  static IntervalSet FromSorted(std::span<const uint64_t> values);
  // The set [lo, hi]. REQUIRES: lo <= hi.
  static IntervalSet Range(uint64_t lo, uint64_t hi) {
    IntervalSet s;
    s.runs_.emplace(lo, hi);
    return s;
  }

  // Adds one value. O(log n).
  void Insert(uint64_t v) { InsertRange(v, v); }
  // Adds [lo, hi], merging with overlapping and adjacent intervals.
  // REQUIRES: lo <= hi.
  void InsertRange(uint64_t lo, uint64_t hi);
  // Adds [lo, hi], for building a set in order. REQUIRES: lo <= hi, and
  // empty() or lo >= Last() + 2.
  void Append(uint64_t lo, uint64_t hi) { InsertRange(lo, hi); }
  // Adds start + i for every bit i < nbits set in `bits` (bit i is bit
  // i % 8 of byte i / 8, least significant first): a bitmap, added a window
  // at a time. REQUIRES: nbits <= 8 * bits.size(), and start + nbits - 1
  // does not exceed UINT64_MAX.
  void InsertBits(uint64_t start, std::string_view bits, uint64_t nbits);
  // Removes every value in [lo, hi]. REQUIRES: lo <= hi.
  void EraseRange(uint64_t lo, uint64_t hi);
  // Removes every value <= n.
  void EraseUpTo(uint64_t n) { EraseRange(0, n); }
  // Removes the first interval. REQUIRES: !empty().
  void PopFirst() {
    const auto [lo, hi] = *begin();
    EraseRange(lo, hi);
  }

  bool Contains(uint64_t v) const {
    if (!blocks_.empty()) {
      auto b = blocks_.find(WindowOf(v));
      if (b != blocks_.end()) {
        const uint64_t i = v - b->first;
        return (b->second.words[i / 64] >> (i % 64)) & 1;
      }
    }
    auto it = runs_.upper_bound(v);
    if (it == runs_.begin()) return false;
    return std::prev(it)->second >= v;
  }
  // Contains() for values asked in ascending order: the window's bitmap
  // and the run are searched for when the values leave them, not for every
  // value, so that many values (a transfer chunk's counters) cost a search
  // per window or run they reach. Holds a pointer to the set, which must
  // outlive it unchanged. Thread-compatible.
  class BIGSET_EXPORT SortedProbe {
   public:
    explicit SortedProbe(const IntervalSet& set) : set_(&set) {}
    // REQUIRES: v >= the value of the previous call, if any.
    bool Contains(uint64_t v);

   private:
    const IntervalSet* set_;
    bool have_window_ = false;
    uint64_t window_ = 0;           // The last value's window,
    const Block* block_ = nullptr;  // and its block, if it has one.
    bool have_run_ = false;
    RunMap::const_iterator run_;  // The first run starting above the value.
  };

  // The first value of the maximal interval holding `v`. REQUIRES:
  // Contains(v).
  uint64_t IntervalStart(uint64_t v) const;
  // True iff every value of [lo, hi] is in the set. REQUIRES: lo <= hi.
  bool ContainsRange(uint64_t lo, uint64_t hi) const;
  // True iff every value of `other` is in this set.
  bool Includes(const IntervalSet& other) const;

  // this = this ∪ other, for an `other` entirely above this set: moves its
  // bitmaps and runs in (a bitmap of a window this set also has is OR-ed).
  // REQUIRES: empty() or other.empty() or other.First() >= Last() + 2.
  void AppendAbove(IntervalSet&& other);
  // this = this ∪ other.
  void Union(const IntervalSet& other);
  // this = this ∩ other.
  void Intersect(const IntervalSet& other);
  // this = this \ other.
  void Difference(const IntervalSet& other);

  static IntervalSet Union(const IntervalSet& a, const IntervalSet& b);
  static IntervalSet Intersection(const IntervalSet& a, const IntervalSet& b);
  static IntervalSet Difference(const IntervalSet& a, const IntervalSet& b);

  bool empty() const { return runs_.empty() && blocks_.empty(); }
  // Number of maximal intervals (not values). O(n).
  size_t intervals() const;
  // Number of values, saturating at UINT64_MAX (the full range [0, MAX]
  // holds 2^64 values).
  uint64_t Count() const;
  // Smallest and largest value. REQUIRES: !empty().
  uint64_t First() const;
  uint64_t Last() const;
  // Approximate heap bytes the set takes.
  size_t MemoryBytes() const {
    return runs_.size() * 24 + blocks_.size() * (sizeof(Block) + 24);
  }
  // Windows kept as bitmaps (for tests and stats).
  size_t dense_windows() const { return blocks_.size(); }
  // The bitmap of window `w` if it is kept as one, else nullptr.
  const Block* DenseWindow(uint64_t w) const {
    auto it = blocks_.find(w);
    return it == blocks_.end() ? nullptr : &it->second;
  }

  const_iterator begin() const { return const_iterator(this, 0); }
  const_iterator end() const { return const_iterator(); }
  // The first maximal interval with a value >= v, clipped to start at v.
  const_iterator LowerBound(uint64_t v) const {
    return const_iterator(this, v);
  }

  void clear() {
    runs_.clear();
    blocks_.clear();
  }

  // "[1..3, 7, 9..12]".
  std::string DebugString() const;

  // Set equality (two equal sets may hold different windows as bitmaps).
  friend bool operator==(const IntervalSet& a, const IntervalSet& b);

 private:
  class Assembler;
  // a op b, window by window (op: or, and, and-not).
  static IntervalSet Combine(const IntervalSet& a, const IntervalSet& b,
                             int op);
  // The values of window `w` as bits.
  void WindowBits(uint64_t w, Block* out) const;
  // The btree of runs only: [lo, hi] outside every block, merged with
  // adjacent runs. REQUIRES: [lo, hi] intersects no block.
  void InsertRun(uint64_t lo, uint64_t hi);
  void EraseRuns(uint64_t lo, uint64_t hi);
  // Turns window `w` into a block if its runs are too many.
  void MaybeDensify(uint64_t w);
  // Makes window `w` a block: *block's bits plus the runs of the window.
  // REQUIRES: no block at `w`.
  void MakeBlock(uint64_t w, Block* block);
  // Turns the block at `w` back into runs if it holds few; erases it if it
  // is empty.
  void MaybeSparsify(uint64_t w);

  // A size for choosing between pointwise and merging algorithms: runs,
  // and a block counted as a few dozen runs.
  size_t PieceWeight() const { return runs_.size() + blocks_.size() * 64; }

  RunMap runs_;      // No run intersects a block.
  BlockMap blocks_;  // Window start -> bits; never all zero.
};

}  // namespace bigset

#endif  // BIGSET_CORE_INTERVAL_SET_H_
