// IntervalSet's set algebra, window by window: word operations where either
// side keeps a window as a bitmap, a linear merge of runs in between.

#include <algorithm>
#include <cstdint>
#include <utility>

#include "bigset/core/interval_set.h"
#include "core/interval_set_bits.h"

namespace bigset {

namespace ii = interval_set_internal;

// ---- Set algebra, window by window: words of bitmaps where either side
// keeps one, a linear merge of runs in between.

namespace {

enum class Op { kOr, kAnd, kAndNot };

// The runs of a RunMap that intersect [lo, hi], clipped to it.
class RunCursor {
 public:
  RunCursor(const IntervalSet::RunMap& runs, uint64_t lo, uint64_t hi)
      : it_(runs.upper_bound(lo)), end_(runs.end()), min_(lo), max_(hi) {
    if (it_ != runs.begin() && std::prev(it_)->second >= lo) --it_;
    Load();
  }
  bool valid() const { return valid_; }
  uint64_t lo() const { return lo_; }
  uint64_t hi() const { return hi_; }
  void Next() {
    ++it_;
    Load();
  }

 private:
  void Load() {
    valid_ = it_ != end_ && it_->first <= max_;
    if (valid_) {
      lo_ = std::max(it_->first, min_);
      hi_ = std::min(it_->second, max_);
    }
  }

  IntervalSet::RunMap::const_iterator it_, end_;
  uint64_t min_, max_;
  bool valid_ = false;
  uint64_t lo_ = 0, hi_ = 0;
};

}  // namespace

// Builds a set from runs and blocks given in ascending order.
class IntervalSet::Assembler {
 public:
  void AddRun(uint64_t lo, uint64_t hi) {
    if (open_ && ii::Touches(hi_, lo)) {
      hi_ = std::max(hi_, hi);
      return;
    }
    Flush();
    open_ = true;
    lo_ = lo;
    hi_ = hi;
  }
  void AddBlock(uint64_t w, const ii::Block& block) {
    if (ii::IsZero(block)) return;
    if (ii::RunsIn(block) <= ii::kDenseRuns) {
      for (uint32_t i = ii::NextSet(block, 0); i < ii::kWindow;) {
        const uint32_t j = ii::NextClear(block, i);
        AddRun(w + i, w + (j - 1));
        i = j == ii::kWindow ? ii::kWindow : ii::NextSet(block, j);
      }
      return;
    }
    Flush();
    out_.blocks_.emplace_hint(out_.blocks_.end(), w, block);
  }
  IntervalSet Finish() {
    Flush();
    return std::move(out_);
  }

 private:
  void Flush() {
    if (open_) out_.Append(lo_, hi_);
    open_ = false;
  }

  IntervalSet out_;
  bool open_ = false;
  uint64_t lo_ = 0;
  uint64_t hi_ = 0;
};

void IntervalSet::WindowBits(uint64_t w, ii::Block* out) const {
  auto b = blocks_.find(w);
  if (b != blocks_.end()) {
    *out = b->second;
    return;
  }
  *out = ii::Block{};
  for (RunCursor r(runs_, w, w + (ii::kWindow - 1)); r.valid(); r.Next()) {
    ii::SetBits(out, static_cast<uint32_t>(r.lo() - w),
                static_cast<uint32_t>(r.hi() - w), true);
  }
}

namespace {

// Merges the runs of `a` and `b` within [lo, hi], where neither has a
// block, into *out.
template <typename Out>
void MergeRuns(const IntervalSet::RunMap& a, const IntervalSet::RunMap& b,
               uint64_t lo, uint64_t hi, Op op, Out* out) {
  RunCursor x(a, lo, hi);
  RunCursor y(b, lo, hi);
  switch (op) {
    case Op::kOr:
      while (x.valid() || y.valid()) {
        if (!y.valid() || (x.valid() && x.lo() <= y.lo())) {
          out->AddRun(x.lo(), x.hi());
          x.Next();
        } else {
          out->AddRun(y.lo(), y.hi());
          y.Next();
        }
      }
      return;
    case Op::kAnd:
      while (x.valid() && y.valid()) {
        const uint64_t l = std::max(x.lo(), y.lo());
        const uint64_t h = std::min(x.hi(), y.hi());
        if (l <= h) out->AddRun(l, h);
        // Advance whichever ends first; the other may overlap further runs.
        if (x.hi() < y.hi()) {
          x.Next();
        } else {
          y.Next();
        }
      }
      return;
    case Op::kAndNot:
      for (; x.valid(); x.Next()) {
        uint64_t cur = x.lo();  // smallest value of x not yet decided
        bool done = false;
        while (y.valid() && y.hi() < cur) y.Next();
        // Runs of b overlapping [cur, x.hi()]. Do not step past one that
        // extends beyond x: it may cover the next run of a too.
        for (RunCursor z = y; z.valid() && z.lo() <= x.hi(); z.Next()) {
          if (z.lo() > cur) out->AddRun(cur, z.lo() - 1);
          if (z.hi() >= x.hi()) {
            done = true;
            break;
          }
          cur = z.hi() + 1;  // z.hi() < x.hi() <= MAX, no wrap
          y = z;
          y.Next();
        }
        if (!done) out->AddRun(cur, x.hi());
      }
      return;
  }
}

}  // namespace

IntervalSet IntervalSet::Combine(const IntervalSet& a, const IntervalSet& b,
                                 int op_code) {
  const Op op = static_cast<Op>(op_code);
  Assembler out;
  auto x = a.blocks_.begin();
  auto y = b.blocks_.begin();
  uint64_t pos = 0;
  while (true) {
    const bool more = x != a.blocks_.end() || y != b.blocks_.end();
    uint64_t w = 0;
    if (more) {
      w = (y == b.blocks_.end() ||
           (x != a.blocks_.end() && x->first <= y->first))
              ? x->first
              : y->first;
    }
    // The runs between the previous window and this one.
    if (!more) {
      MergeRuns(a.runs_, b.runs_, pos, ii::kMax, op, &out);
      break;
    }
    if (w > pos) MergeRuns(a.runs_, b.runs_, pos, w - 1, op, &out);
    ii::Block ba, bb, r;
    a.WindowBits(w, &ba);
    b.WindowBits(w, &bb);
    for (uint32_t k = 0; k < ii::kWords; ++k) {
      switch (op) {
        case Op::kOr:
          r.words[k] = ba.words[k] | bb.words[k];
          break;
        case Op::kAnd:
          r.words[k] = ba.words[k] & bb.words[k];
          break;
        case Op::kAndNot:
          r.words[k] = ba.words[k] & ~bb.words[k];
          break;
      }
    }
    out.AddBlock(w, r);
    if (x != a.blocks_.end() && x->first == w) ++x;
    if (y != b.blocks_.end() && y->first == w) ++y;
    if (w == WindowOf(ii::kMax)) break;  // The last window: nothing after it.
    pos = w + ii::kWindow;
  }
  return out.Finish();
}

IntervalSet IntervalSet::Union(const IntervalSet& a, const IntervalSet& b) {
  return Combine(a, b, static_cast<int>(Op::kOr));
}

IntervalSet IntervalSet::Intersection(const IntervalSet& a,
                                      const IntervalSet& b) {
  return Combine(a, b, static_cast<int>(Op::kAnd));
}

IntervalSet IntervalSet::Difference(const IntervalSet& a,
                                    const IntervalSet& b) {
  return Combine(a, b, static_cast<int>(Op::kAndNot));
}

void IntervalSet::AppendAbove(IntervalSet&& other) {
  if (empty()) {
    *this = std::move(other);
    return;
  }
  for (auto& [w, block] : other.blocks_) {
    auto mine = blocks_.find(w);
    if (mine != blocks_.end()) {
      for (uint32_t k = 0; k < ii::kWords; ++k)
        mine->second.words[k] |= block.words[k];
      continue;
    }
    // Runs of ours in that window (below other's values) go into its bits.
    ii::Block merged = block;
    MakeBlock(w, &merged);
  }
  for (const auto& [lo, hi] : other.runs_) InsertRange(lo, hi);
  other.clear();
}

void IntervalSet::Union(const IntervalSet& other) {
  if (other.empty()) return;
  if (empty()) {
    *this = other;  // A copy, not a merge rebuilt piece by piece.
    return;
  }
  if (other.PieceWeight() * ii::kPointwiseRatio < PieceWeight()) {
    for (const auto& [lo, hi] : other) InsertRange(lo, hi);
    return;
  }
  *this = Union(*this, other);
}

void IntervalSet::Intersect(const IntervalSet& other) {
  *this = Intersection(*this, other);
}

void IntervalSet::Difference(const IntervalSet& other) {
  if (other.empty() || empty()) return;
  if (other.PieceWeight() * ii::kPointwiseRatio < PieceWeight()) {
    for (const auto& [lo, hi] : other) EraseRange(lo, hi);
    return;
  }
  *this = Difference(*this, other);
}

}  // namespace bigset
