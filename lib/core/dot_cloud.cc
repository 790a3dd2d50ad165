#include "bigset/core/dot_cloud.h"

#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_format.h"

namespace bigset {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

// True iff an interval starting at `lo` overlaps or is adjacent to one ending
// at `hi`, i.e. lo <= hi + 1, written so that hi == UINT64_MAX cannot wrap.
inline bool Touches(uint64_t hi, uint64_t lo) {
  return lo == 0 || lo - 1 <= hi;
}

// Appends [lo, hi] to an interval list being built in ascending order of lo,
// merging it into the last interval when they touch. The result stays
// normalised whatever the overlaps between successive calls.
class Builder {
 public:
  void Add(uint64_t lo, uint64_t hi) {
    if (open_ && Touches(hi_, lo)) {
      hi_ = std::max(hi_, hi);
      return;
    }
    Flush();
    open_ = true;
    lo_ = lo;
    hi_ = hi;
  }
  IntervalSet::Map Finish() {
    Flush();
    return std::move(out_);
  }

 private:
  void Flush() {
    if (open_) out_.emplace_hint(out_.end(), lo_, hi_);
    open_ = false;
  }

  IntervalSet::Map out_;
  bool open_ = false;
  uint64_t lo_ = 0;
  uint64_t hi_ = 0;
};

// Below this ratio of sizes, updating the larger set interval by interval
// (O(m log n)) beats rebuilding it by a linear merge (O(n + m)).
constexpr size_t kPointwiseRatio = 16;

}  // namespace

void IntervalSet::InsertRange(uint64_t lo, uint64_t hi) {
  if (map_.empty()) {
    map_.emplace(lo, hi);
    return;
  }
  // Fast path: at or past the last interval (counters mostly grow).
  auto last = std::prev(map_.end());
  if (lo >= last->first) {
    if (Touches(last->second, lo)) {
      last->second = std::max(last->second, hi);
    } else {
      map_.emplace_hint(map_.end(), lo, hi);
    }
    return;
  }
  auto it = map_.upper_bound(lo);  // first interval starting after lo
  if (it != map_.begin()) {
    auto prev = std::prev(it);
    if (Touches(prev->second, lo)) {
      if (prev->second >= hi) return;  // already covered
      if (it == map_.end() || !Touches(hi, it->first)) {
        prev->second = hi;  // extends prev without reaching the next one
        return;
      }
      lo = prev->first;
      it = prev;
    }
  }
  // Swallow every interval that starts within [lo, hi + 1]. Keys cannot be
  // changed in place, so erase and reinsert.
  while (it != map_.end() && Touches(hi, it->first)) {
    hi = std::max(hi, it->second);
    it = map_.erase(it);
  }
  map_.emplace_hint(it, lo, hi);
}

void IntervalSet::EraseRange(uint64_t lo, uint64_t hi) {
  if (map_.empty()) return;
  auto it = map_.upper_bound(lo);
  if (it != map_.begin()) {
    auto prev = std::prev(it);
    if (prev->second >= lo) {
      const uint64_t prev_hi = prev->second;
      if (prev->first < lo) {
        prev->second = lo - 1;  // lo > prev->first >= 0, no wrap
      } else {
        it = map_.erase(prev);
      }
      if (prev_hi > hi) {
        // [lo, hi] lies inside this one interval: keep its right part.
        map_.emplace_hint(it, hi + 1, prev_hi);
        return;
      }
    }
  }
  while (it != map_.end() && it->first <= hi) {
    const uint64_t it_hi = it->second;
    it = map_.erase(it);
    if (it_hi > hi) {
      map_.emplace_hint(it, hi + 1, it_hi);
      return;
    }
  }
}

void IntervalSet::EraseUpTo(uint64_t n) {
  if (map_.empty() || map_.begin()->first > n) return;
  auto it = map_.upper_bound(n);  // first interval starting after n
  const uint64_t straddle_hi = std::prev(it)->second;
  it = map_.erase(map_.begin(), it);
  if (straddle_hi > n) map_.emplace_hint(it, n + 1, straddle_hi);
}

bool IntervalSet::Includes(const IntervalSet& other) const {
  if (other.map_.size() * kPointwiseRatio < map_.size()) {
    for (const auto& [lo, hi] : other.map_) {
      if (!ContainsRange(lo, hi)) return false;
    }
    return true;
  }
  // Linear walk. Each interval of `other` must lie inside one of ours since
  // ours are maximal.
  auto a = map_.begin();
  for (const auto& [lo, hi] : other.map_) {
    while (a != map_.end() && a->second < lo) ++a;
    if (a == map_.end() || a->first > lo || a->second < hi) return false;
  }
  return true;
}

IntervalSet IntervalSet::Union(const IntervalSet& a, const IntervalSet& b) {
  Builder out;
  auto x = a.map_.begin();
  auto y = b.map_.begin();
  while (x != a.map_.end() || y != b.map_.end()) {
    if (y == b.map_.end() || (x != a.map_.end() && x->first <= y->first)) {
      out.Add(x->first, x->second);
      ++x;
    } else {
      out.Add(y->first, y->second);
      ++y;
    }
  }
  IntervalSet r;
  r.map_ = out.Finish();
  return r;
}

IntervalSet IntervalSet::Intersection(const IntervalSet& a,
                                      const IntervalSet& b) {
  Builder out;
  auto x = a.map_.begin();
  auto y = b.map_.begin();
  while (x != a.map_.end() && y != b.map_.end()) {
    const uint64_t lo = std::max(x->first, y->first);
    const uint64_t hi = std::min(x->second, y->second);
    if (lo <= hi) out.Add(lo, hi);
    // Advance whichever ends first; the other may overlap further intervals.
    if (x->second < y->second) {
      ++x;
    } else {
      ++y;
    }
  }
  IntervalSet r;
  r.map_ = out.Finish();
  return r;
}

IntervalSet IntervalSet::Difference(const IntervalSet& a,
                                    const IntervalSet& b) {
  Builder out;
  auto y = b.map_.begin();
  for (const auto& [lo, hi] : a.map_) {
    uint64_t cur = lo;  // smallest value of [lo, hi] not yet decided
    bool done = false;
    while (y != b.map_.end() && y->second < cur) ++y;
    // Intervals of b overlapping [cur, hi]. Do not step past one that
    // extends beyond hi: it may cover the next interval of a too.
    for (auto z = y; z != b.map_.end() && z->first <= hi; ++z) {
      if (z->first > cur) out.Add(cur, z->first - 1);
      if (z->second >= hi) {
        done = true;
        break;
      }
      cur = z->second + 1;  // z->second < hi <= MAX, no wrap
      y = std::next(z);
    }
    if (!done) out.Add(cur, hi);
  }
  IntervalSet r;
  r.map_ = out.Finish();
  return r;
}

void IntervalSet::Union(const IntervalSet& other) {
  if (other.map_.empty()) return;
  if (other.map_.size() * kPointwiseRatio < map_.size()) {
    for (const auto& [lo, hi] : other.map_) InsertRange(lo, hi);
    return;
  }
  *this = Union(*this, other);
}

void IntervalSet::Intersect(const IntervalSet& other) {
  *this = Intersection(*this, other);
}

void IntervalSet::Difference(const IntervalSet& other) {
  if (other.map_.empty() || map_.empty()) return;
  if (other.map_.size() * kPointwiseRatio < map_.size()) {
    for (const auto& [lo, hi] : other.map_) EraseRange(lo, hi);
    return;
  }
  *this = Difference(*this, other);
}

uint64_t IntervalSet::Count() const {
  uint64_t n = 0;
  for (const auto& [lo, hi] : map_) {
    const uint64_t span = hi - lo;  // count - 1
    if (span == kMax || kMax - n < span + 1) return kMax;
    n += span + 1;
  }
  return n;
}

std::string IntervalSet::DebugString() const {
  std::string out = "[";
  bool first = true;
  for (const auto& [lo, hi] : map_) {
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
