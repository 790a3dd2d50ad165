#include "bigset/core/interval_set.h"

#include <bit>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_format.h"
#include "core/interval_set_bits.h"

namespace bigset {

namespace ii = interval_set_internal;
using ii::Block;
using ii::IsZero;
using ii::kDenseRuns;
using ii::kMax;
using ii::kSparseRuns;
using ii::kWindow;
using ii::kWords;
using ii::LastSet;
using ii::NextClear;
using ii::NextSet;
using ii::RunsIn;
using ii::SetBits;
using ii::Touches;

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

IntervalSet IntervalSet::FromSorted(std::span<const uint64_t> values) {
  IntervalSet out;
  std::string bits;
  size_t i = 0;
  while (i < values.size()) {
    const uint64_t w = WindowOf(values[i]);
    size_t end = i;
    while (end < values.size() && WindowOf(values[end]) == w) ++end;
    if (end - i <= kDenseRuns) {
      // Few values, so at most as many runs: the window stays runs, as
      // InsertBits would leave it, without building and scanning a bitmap
      // (a transfer's chunk spreads a few dots over each of many windows).
      while (i < end) {
        const uint64_t lo = values[i];
        uint64_t hi = lo;
        for (++i; i < end && values[i] - hi <= 1; ++i) hi = values[i];
        out.InsertRange(lo, hi);
      }
      continue;
    }
    bits.assign(kWindow / 8, '\0');
    uint64_t nbits = 0;
    for (; i < end; ++i) {
      const uint64_t off = values[i] - w;
      bits[off / 8] = static_cast<char>(bits[off / 8] | (1 << (off % 8)));
      nbits = off + 1;
    }
    out.InsertBits(w, bits, nbits);
  }
  return out;
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
      const uint64_t take = std::min<uint64_t>(
          {64 - (i % 8), to - v + 1, uint64_t{len} * 8 - i % 8});
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

bool IntervalSet::SortedProbe::Contains(uint64_t v) {
  const uint64_t w = WindowOf(v);
  if (!have_window_ || w != window_) {
    have_window_ = true;
    window_ = w;
    block_ = nullptr;
    if (!set_->blocks_.empty()) {
      auto b = set_->blocks_.find(w);
      if (b != set_->blocks_.end()) block_ = &b->second;
    }
  }
  if (block_ != nullptr) {
    const uint64_t i = v - w;
    return (block_->words[i / 64] >> (i % 64)) & 1;
  }
  // run_ becomes the first run starting above v: a few steps forward (the
  // next value is usually near), else a search.
  const RunMap& runs = set_->runs_;
  if (!have_run_) {
    have_run_ = true;
    run_ = runs.upper_bound(v);
  } else {
    for (int steps = 0; run_ != runs.end() && run_->first <= v; ++steps) {
      if (steps == 4) {
        run_ = runs.upper_bound(v);
        break;
      }
      ++run_;
    }
  }
  return run_ != runs.begin() && std::prev(run_)->second >= v;
}

uint64_t IntervalSet::IntervalStart(uint64_t v) const {
  while (true) {
    uint64_t lo;
    auto b = blocks_.find(WindowOf(v));
    if (b != blocks_.end()) {
      const int clear =
          ii::PrevClear(b->second, static_cast<uint32_t>(v - b->first));
      lo = b->first + static_cast<uint64_t>(clear + 1);
    } else {
      lo = std::prev(runs_.upper_bound(v))->first;
    }
    // The interval may go on below, in the previous run or window.
    if (lo == 0 || !Contains(lo - 1)) return lo;
    v = lo - 1;
  }
}

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

}  // namespace bigset
