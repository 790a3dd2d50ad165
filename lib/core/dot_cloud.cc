#include "bigset/core/dot_cloud.h"

#include <bit>
#include <cstdint>
#include <vector>
#include <limits>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_format.h"

namespace bigset {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kWindow = IntervalSet::kWindow;
constexpr uint32_t kWords = kWindow / 64;
// A window with more runs than this becomes a bitmap (32 runs take about
// the bitmap's 512 bytes); a bitmap with this many runs or fewer goes back.
constexpr size_t kDenseRuns = 32;
constexpr size_t kSparseRuns = 16;

// True iff an interval starting at `lo` overlaps or is adjacent to one ending
// at `hi`, i.e. lo <= hi + 1, written so that hi == UINT64_MAX cannot wrap.
inline bool Touches(uint64_t hi, uint64_t lo) {
  return lo == 0 || lo - 1 <= hi;
}

using Block = IntervalSet::Block;

// Index of the first set bit at or after `from` in `b`, or kWindow.
uint32_t NextSet(const Block& b, uint32_t from) {
  for (uint32_t w = from / 64; w < kWords; ++w) {
    uint64_t word = b.words[w];
    if (w == from / 64) word &= ~uint64_t{0} << (from % 64);
    if (word != 0) return w * 64 + static_cast<uint32_t>(std::countr_zero(word));
  }
  return kWindow;
}

// Index of the first clear bit at or after `from` in `b`, or kWindow.
uint32_t NextClear(const Block& b, uint32_t from) {
  for (uint32_t w = from / 64; w < kWords; ++w) {
    uint64_t word = ~b.words[w];
    if (w == from / 64) word &= ~uint64_t{0} << (from % 64);
    if (word != 0) return w * 64 + static_cast<uint32_t>(std::countr_zero(word));
  }
  return kWindow;
}

// Index of the last set bit of `b`. REQUIRES: some bit set.
uint32_t LastSet(const Block& b) {
  for (uint32_t w = kWords; w-- > 0;) {
    if (b.words[w] != 0) {
      return w * 64 + 63 - static_cast<uint32_t>(std::countl_zero(b.words[w]));
    }
  }
  return 0;
}

// Sets (or clears) bits [a, z] of `b`. REQUIRES: a <= z < kWindow.
void SetBits(Block* b, uint32_t a, uint32_t z, bool value) {
  for (uint32_t w = a / 64; w <= z / 64; ++w) {
    const uint32_t from = w == a / 64 ? a % 64 : 0;
    const uint32_t to = w == z / 64 ? z % 64 : 63;
    const uint64_t mask =
        (to == 63 ? ~uint64_t{0} : ((uint64_t{1} << (to + 1)) - 1)) &
        (~uint64_t{0} << from);
    if (value) {
      b->words[w] |= mask;
    } else {
      b->words[w] &= ~mask;
    }
  }
}

// Number of runs of set bits in `b`.
size_t RunsIn(const Block& b) {
  size_t runs = 0;
  uint64_t carry = 0;  // Bit 63 of the previous word.
  for (uint32_t w = 0; w < kWords; ++w) {
    const uint64_t x = b.words[w];
    // A run starts at every set bit whose predecessor is clear.
    runs += static_cast<size_t>(std::popcount(x & ~((x << 1) | carry)));
    carry = x >> 63;
  }
  return runs;
}

bool IsZero(const Block& b) {
  for (uint64_t w : b.words) {
    if (w != 0) return false;
  }
  return true;
}

// Below this ratio of sizes, updating the larger set interval by interval
// (O(m log n)) beats rebuilding it by a linear merge (O(n + m)).
constexpr size_t kPointwiseRatio = 16;

}  // namespace

// ---- Iteration.

IntervalSet::const_iterator::const_iterator(const IntervalSet* set,
                                            uint64_t from)
    : set_(set), floor_(from) {
  run_ = set->runs_.upper_bound(from);
  if (run_ != set->runs_.begin() && std::prev(run_)->second >= from) --run_;
  block_ = set->blocks_.upper_bound(from);
  if (block_ != set->blocks_.begin() &&
      std::prev(block_)->first + (kWindow - 1) >= from) {
    --block_;
  }
  if (block_ != set->blocks_.end() && block_->first < from) {
    bit_ = static_cast<uint32_t>(from - block_->first);
  }
  has_next_ = NextPiece(&next_.first, &next_.second);
  at_end_ = false;
  Advance();
}

bool IntervalSet::const_iterator::NextPiece(uint64_t* lo, uint64_t* hi) {
  // The block's next run of set bits, if any, and the next run; the lower.
  uint32_t set_bit = kWindow;
  while (block_ != set_->blocks_.end()) {
    set_bit = NextSet(block_->second, bit_);
    if (set_bit < kWindow) break;
    ++block_;
    bit_ = 0;
  }
  const bool have_block = block_ != set_->blocks_.end();
  const bool have_run = run_ != set_->runs_.end();
  if (!have_block && !have_run) return false;
  if (have_run && (!have_block || run_->first < block_->first + set_bit)) {
    *lo = std::max(run_->first, floor_);
    *hi = run_->second;
    ++run_;
  } else {
    const uint32_t clear = NextClear(block_->second, set_bit);
    *lo = std::max(block_->first + set_bit, floor_);
    *hi = block_->first + (clear - 1);
    bit_ = clear;
    if (bit_ == kWindow) {
      ++block_;
      bit_ = 0;
    }
  }
  floor_ = 0;
  return true;
}

void IntervalSet::const_iterator::Advance() {
  if (!has_next_) {
    at_end_ = true;
    return;
  }
  current_ = next_;
  // Merge the pieces that touch: a run and a block's bits, or two blocks.
  while ((has_next_ = NextPiece(&next_.first, &next_.second)) &&
         current_.second != kMax && next_.first == current_.second + 1) {
    current_.second = next_.second;
  }
}

// ---- Runs outside the blocks.

void IntervalSet::InsertRun(uint64_t lo, uint64_t hi) {
  if (runs_.empty()) {
    runs_.emplace(lo, hi);
    return;
  }
  // Fast path: at or past the last interval (counters mostly grow).
  auto last = std::prev(runs_.end());
  if (lo >= last->first) {
    if (Touches(last->second, lo)) {
      last->second = std::max(last->second, hi);
    } else {
      runs_.emplace_hint(runs_.end(), lo, hi);
    }
    return;
  }
  auto it = runs_.upper_bound(lo);  // first interval starting after lo
  if (it != runs_.begin()) {
    auto prev = std::prev(it);
    if (Touches(prev->second, lo)) {
      if (prev->second >= hi) return;  // already covered
      if (it == runs_.end() || !Touches(hi, it->first)) {
        prev->second = hi;  // extends prev without reaching the next one
        return;
      }
      lo = prev->first;
      it = prev;
    }
  }
  // Swallow every interval that starts within [lo, hi + 1]. Keys cannot be
  // changed in place, so erase and reinsert.
  while (it != runs_.end() && Touches(hi, it->first)) {
    hi = std::max(hi, it->second);
    it = runs_.erase(it);
  }
  runs_.emplace_hint(it, lo, hi);
}

void IntervalSet::EraseRuns(uint64_t lo, uint64_t hi) {
  if (runs_.empty()) return;
  auto it = runs_.upper_bound(lo);
  if (it != runs_.begin()) {
    auto prev = std::prev(it);
    if (prev->second >= lo) {
      const uint64_t prev_hi = prev->second;
      if (prev->first < lo) {
        prev->second = lo - 1;  // lo > prev->first >= 0, no wrap
      } else {
        it = runs_.erase(prev);
      }
      if (prev_hi > hi) {
        // [lo, hi] lies inside this one interval: keep its right part.
        runs_.emplace_hint(it, hi + 1, prev_hi);
        return;
      }
    }
  }
  while (it != runs_.end() && it->first <= hi) {
    const uint64_t it_hi = it->second;
    it = runs_.erase(it);
    if (it_hi > hi) {
      runs_.emplace_hint(it, hi + 1, it_hi);
      return;
    }
  }
}

void IntervalSet::MaybeDensify(uint64_t w) {
  if (blocks_.contains(w)) return;
  const uint64_t end = w + (kWindow - 1);
  // The runs intersecting the window.
  auto first = runs_.upper_bound(w);
  if (first != runs_.begin() && std::prev(first)->second >= w) --first;
  size_t n = 0;
  for (auto it = first; it != runs_.end() && it->first <= end; ++it) {
    if (++n > kDenseRuns) break;
  }
  if (n <= kDenseRuns) return;
  Block block;
  MakeBlock(w, &block);
}

void IntervalSet::MakeBlock(uint64_t w, Block* block) {
  const uint64_t end = w + (kWindow - 1);
  auto it = runs_.upper_bound(w);
  if (it != runs_.begin() && std::prev(it)->second >= w) --it;
  uint64_t left_lo = 0, right_hi = 0;
  bool left = false, right = false;
  while (it != runs_.end() && it->first <= end) {
    const uint64_t lo = std::max(it->first, w);
    const uint64_t hi = std::min(it->second, end);
    SetBits(block, static_cast<uint32_t>(lo - w), static_cast<uint32_t>(hi - w),
            true);
    if (it->first < w) {
      left = true;
      left_lo = it->first;
    }
    if (it->second > end) {
      right = true;
      right_hi = it->second;
    }
    it = runs_.erase(it);
  }
  // The parts of runs that stick out of the window stay runs (inserted
  // after the loop: an insertion invalidates btree iterators).
  if (left) runs_.emplace(left_lo, w - 1);
  if (right) runs_.emplace(end + 1, right_hi);
  blocks_.emplace(w, *block);
}

void IntervalSet::MaybeSparsify(uint64_t w) {
  auto b = blocks_.find(w);
  if (b == blocks_.end()) return;
  if (IsZero(b->second)) {
    blocks_.erase(b);
    return;
  }
  if (RunsIn(b->second) > kSparseRuns) return;
  const Block block = b->second;
  blocks_.erase(b);
  for (uint32_t i = NextSet(block, 0); i < kWindow;) {
    const uint32_t j = NextClear(block, i);
    InsertRun(w + i, w + (j - 1));
    i = j == kWindow ? kWindow : NextSet(block, j);
  }
}

// ---- Changes.

void IntervalSet::InsertRange(uint64_t lo, uint64_t hi) {
  if (lo == hi && !blocks_.empty()) {
    // One value (a dot): into its window's bitmap if it has one.
    auto b = blocks_.find(WindowOf(lo));
    if (b != blocks_.end()) {
      const uint64_t i = lo - b->first;
      b->second.words[i / 64] |= uint64_t{1} << (i % 64);
      return;
    }
  }
  const size_t runs_before = runs_.size();
  if (blocks_.empty()) {
    InsertRun(lo, hi);
  } else {
    // Split [lo, hi] at the blocks it crosses: bits inside them, runs
    // between them.
    absl::InlinedVector<uint64_t, 4> touched;
    uint64_t cur = lo;
    bool done = false;
    auto b = blocks_.upper_bound(lo);
    if (b != blocks_.begin() && std::prev(b)->first + (kWindow - 1) >= lo) --b;
    for (; b != blocks_.end() && b->first <= hi; ++b) {
      const uint64_t w = b->first;
      const uint64_t end = w + (kWindow - 1);
      if (cur < w) InsertRun(cur, w - 1);
      const uint64_t a = std::max(cur, w);
      const uint64_t z = std::min(hi, end);
      SetBits(&b->second, static_cast<uint32_t>(a - w),
              static_cast<uint32_t>(z - w), true);
      touched.push_back(w);
      if (z == hi) {
        done = true;
        break;
      }
      cur = z + 1;  // z < hi, no wrap
    }
    if (!done) InsertRun(cur, hi);
    // A window filled by a long range holds one run: back to runs.
    for (uint64_t w : touched) MaybeSparsify(w);
  }
  // Only a new run can make a window dense.
  if (runs_.size() > runs_before) {
    MaybeDensify(WindowOf(lo));
    if (WindowOf(hi) != WindowOf(lo)) MaybeDensify(WindowOf(hi));
  }
}

void IntervalSet::InsertBits(uint64_t start, std::string_view bits,
                             uint64_t nbits) {
  nbits = std::min<uint64_t>(nbits, uint64_t{bits.size()} * 8);
  if (nbits == 0) return;
  // REQUIRES (see the header) makes start + nbits - 1 fit.
  const uint64_t last = start + (nbits - 1);
  for (uint64_t w = WindowOf(start);; w += kWindow) {
    // The input bits that land in window w, gathered into a block.
    Block incoming;
    const uint64_t from = std::max(start, w);  // first value in the window
    const uint64_t to = std::min(last, w + (kWindow - 1));
    for (uint64_t v = from; v <= to;) {
      const uint64_t i = v - start;  // input bit index
      // Up to 8 input bytes at i / 8, as a little-endian word, shifted to
      // start at bit i.
      uint64_t word = 0;
      const size_t byte = static_cast<size_t>(i / 8);
      const size_t len = std::min<size_t>(8, bits.size() - byte);
      for (size_t k = 0; k < len; ++k) {
        word |= uint64_t{static_cast<uint8_t>(bits[byte + k])} << (8 * k);
      }
      word >>= (i % 8);
      const uint64_t take = std::min<uint64_t>({64 - (i % 8), to - v + 1,
                                                uint64_t{len} * 8 - i % 8});
      if (take < 64) word &= (uint64_t{1} << take) - 1;
      // Place `take` bits at window offset v - w.
      const uint64_t off = v - w;
      incoming.words[off / 64] |= word << (off % 64);
      if (off % 64 != 0 && off / 64 + 1 < kWords) {
        incoming.words[off / 64 + 1] |= word >> (64 - off % 64);
      }
      v += take;
      if (v == 0) break;  // wrapped past UINT64_MAX
    }
    if (!IsZero(incoming)) {
      auto b = blocks_.find(w);
      if (b != blocks_.end()) {
        for (uint32_t k = 0; k < kWords; ++k) {
          b->second.words[k] |= incoming.words[k];
        }
      } else if (RunsIn(incoming) > kDenseRuns) {
        // Dense: the window becomes a block, taking in the runs it has.
        MakeBlock(w, &incoming);
      } else {
        for (uint32_t i = NextSet(incoming, 0); i < kWindow;) {
          const uint32_t j = NextClear(incoming, i);
          InsertRange(w + i, w + (j - 1));
          i = j == kWindow ? kWindow : NextSet(incoming, j);
        }
      }
    }
    if (w == WindowOf(last)) break;
  }
}

void IntervalSet::EraseRange(uint64_t lo, uint64_t hi) {
  if (!blocks_.empty()) {
    absl::InlinedVector<uint64_t, 4> touched;
    auto b = blocks_.upper_bound(lo);
    if (b != blocks_.begin() && std::prev(b)->first + (kWindow - 1) >= lo) --b;
    for (; b != blocks_.end() && b->first <= hi; ++b) {
      const uint64_t w = b->first;
      const uint64_t a = std::max(lo, w);
      const uint64_t z = std::min(hi, w + (kWindow - 1));
      SetBits(&b->second, static_cast<uint32_t>(a - w),
              static_cast<uint32_t>(z - w), false);
      touched.push_back(w);
    }
    for (uint64_t w : touched) MaybeSparsify(w);
  }
  EraseRuns(lo, hi);
  // Cutting a run in two adds a run to the windows of lo and hi.
  if (lo > 0) MaybeDensify(WindowOf(lo - 1));
  if (hi < kMax) MaybeDensify(WindowOf(hi + 1));
}

// ---- Queries.

bool IntervalSet::ContainsRange(uint64_t lo, uint64_t hi) const {
  const_iterator it = LowerBound(lo);
  return it != end() && it->first == lo && it->second >= hi;
}

bool IntervalSet::Includes(const IntervalSet& other) const {
  if (!blocks_.empty() || !other.blocks_.empty()) {
    return Difference(other, *this).empty();
  }
  // Each interval of `other` must lie inside one of ours since ours are
  // maximal.
  auto a = begin();
  for (const auto& [lo, hi] : other) {
    while (a != end() && a->second < lo) ++a;
    if (a == end() || a->first > lo || a->second < hi) return false;
  }
  return true;
}

size_t IntervalSet::intervals() const {
  size_t n = 0;
  for (auto it = begin(); it != end(); ++it) ++n;
  return n;
}

uint64_t IntervalSet::Count() const {
  uint64_t n = 0;
  for (const auto& [lo, hi] : runs_) {
    const uint64_t span = hi - lo;  // count - 1
    if (span == kMax || kMax - n < span + 1) return kMax;
    n += span + 1;
  }
  for (const auto& [w, block] : blocks_) {
    for (uint64_t word : block.words) n += std::popcount(word);
  }
  return n;
}

uint64_t IntervalSet::First() const {
  uint64_t first = kMax;
  if (!runs_.empty()) first = runs_.begin()->first;
  if (!blocks_.empty()) {
    const auto& [w, block] = *blocks_.begin();
    first = std::min(first, w + NextSet(block, 0));
  }
  return first;
}

uint64_t IntervalSet::Last() const {
  uint64_t last = 0;
  if (!runs_.empty()) last = std::prev(runs_.end())->second;
  if (!blocks_.empty()) {
    const auto& [w, block] = *std::prev(blocks_.end());
    last = std::max(last, w + LastSet(block));
  }
  return last;
}

bool operator==(const IntervalSet& a, const IntervalSet& b) {
  if (a.blocks_.empty() && b.blocks_.empty()) return a.runs_ == b.runs_;
  auto x = a.begin();
  auto y = b.begin();
  for (; x != a.end() && y != b.end(); ++x, ++y) {
    if (*x != *y) return false;
  }
  return x == a.end() && y == b.end();
}

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
    if (open_ && Touches(hi_, lo)) {
      hi_ = std::max(hi_, hi);
      return;
    }
    Flush();
    open_ = true;
    lo_ = lo;
    hi_ = hi;
  }
  void AddBlock(uint64_t w, const Block& block) {
    if (IsZero(block)) return;
    if (RunsIn(block) <= kDenseRuns) {
      for (uint32_t i = NextSet(block, 0); i < kWindow;) {
        const uint32_t j = NextClear(block, i);
        AddRun(w + i, w + (j - 1));
        i = j == kWindow ? kWindow : NextSet(block, j);
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

void IntervalSet::WindowBits(uint64_t w, Block* out) const {
  auto b = blocks_.find(w);
  if (b != blocks_.end()) {
    *out = b->second;
    return;
  }
  *out = Block{};
  for (RunCursor r(runs_, w, w + (kWindow - 1)); r.valid(); r.Next()) {
    SetBits(out, static_cast<uint32_t>(r.lo() - w),
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
      MergeRuns(a.runs_, b.runs_, pos, kMax, op, &out);
      break;
    }
    if (w > pos) MergeRuns(a.runs_, b.runs_, pos, w - 1, op, &out);
    Block ba, bb, r;
    a.WindowBits(w, &ba);
    b.WindowBits(w, &bb);
    for (uint32_t k = 0; k < kWords; ++k) {
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
    if (w == WindowOf(kMax)) break;  // The last window: nothing after it.
    pos = w + kWindow;
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

void IntervalSet::Union(const IntervalSet& other) {
  if (other.empty()) return;
  if (other.PieceWeight() * kPointwiseRatio < PieceWeight()) {
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
  if (other.PieceWeight() * kPointwiseRatio < PieceWeight()) {
    for (const auto& [lo, hi] : other) EraseRange(lo, hi);
    return;
  }
  *this = Difference(*this, other);
}

std::string IntervalSet::DebugString() const {
  std::string out = "[";
  bool first = true;
  for (const auto& [lo, hi] : *this) {
    if (!first) out += ", ";
    first = false;
    if (lo == hi) {
      absl::StrAppendFormat(&out, "%d", lo);
    } else {
      absl::StrAppendFormat(&out, "%d..%d", lo, hi);
    }
  }
  out += "]";
  return out;
}

IntervalSet& DotCloud::Mutable(ActorId actor) {
  auto it = LowerBound(actor);
  if (it == entries_.end() || it->actor != actor) {
    it = entries_.insert(it, Entry{actor, IntervalSet()});
  }
  return it->counters;
}

void DotCloud::InsertRange(ActorId actor, uint64_t lo, uint64_t hi) {
  Mutable(actor).InsertRange(lo, hi);
}

void DotCloud::EraseActor(ActorId actor) {
  auto it = LowerBound(actor);
  if (it != entries_.end() && it->actor == actor) entries_.erase(it);
}

uint64_t DotCloud::DotCount() const {
  uint64_t n = 0;
  for (const Entry& e : entries_) {
    const uint64_t c = e.counters.Count();
    if (kMax - n < c) return kMax;
    n += c;
  }
  return n;
}

std::string DotCloud::DebugString() const {
  std::string out = "{";
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (i > 0) out += ", ";
    absl::StrAppendFormat(&out, "%x:%s", entries_[i].actor,
                          entries_[i].counters.DebugString());
  }
  out += "}";
  return out;
}

}  // namespace bigset
