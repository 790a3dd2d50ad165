#include "bigset/core/clock.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/coding.h"
#include "core/string_view_compat.h"

namespace bigset {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  return kMax - a < b ? kMax : a + b;
}

// Calls fn(actor, base, cloud-or-null) for every actor of (vv, cloud) in
// ascending order.
template <typename Fn>
void ForEachActor(const VersionVector& vv, const DotCloud& cloud, Fn&& fn) {
  auto v = vv.begin();
  auto c = cloud.begin();
  while (v != vv.end() || c != cloud.end()) {
    if (c == cloud.end() || (v != vv.end() && v->actor < c->actor)) {
      fn(v->actor, v->counter, static_cast<const IntervalSet*>(nullptr));
      ++v;
    } else if (v == vv.end() || c->actor < v->actor) {
      fn(c->actor, uint64_t{0}, &c->counters);
      ++c;
    } else {
      fn(v->actor, v->counter, &c->counters);
      ++v;
      ++c;
    }
  }
}

// The actor's whole set of seen counters: [1, base] plus its cloud.
IntervalSet FullSet(uint64_t base, const IntervalSet* cloud) {
  IntervalSet s;
  if (cloud != nullptr) s = *cloud;
  if (base != 0) s.InsertRange(1, base);
  return s;
}

// Splits a full set of counters back into base and cloud and appends them
// to the entry lists under construction (actors must arrive ascending).
// A full set is normalised by construction: its first run is the base iff
// it starts at 1, and the next run starts at least two above it.
void AppendSplit(ActorId actor, IntervalSet full,
                 std::vector<VersionVector::Entry>* vv,
                 std::vector<DotCloud::Entry>* cloud) {
  if (full.empty()) return;
  if (full.First() == 1) {
    vv->push_back({actor, full.begin()->second});
    full.PopFirst();
  }
  if (!full.empty()) cloud->push_back({actor, std::move(full)});
}

// ---------------------------------------------------------------------------
// Encoding.

// Bitmaps are considered per window of this many counters: big enough that
// per-segment headers are noise, small enough that a dense patch inside a
// sparse cloud is found.
constexpr uint64_t kWindow = 4096;

struct Run {
  uint64_t lo;
  uint64_t hi;
};

struct Segment {
  bool bitmap;
  size_t begin;  // runs [begin, end)
  size_t end;
  uint64_t nbytes;  // bitmap only
};

uint64_t BitmapBytes(uint64_t first, uint64_t last) {
  return (last - first) / 8 + 1;
}

// Sets bits [a, b] (inclusive) of the LSB-first bitmap at p.
void SetBits(char* p, uint64_t a, uint64_t b) {
  const uint64_t ab = a / 8;
  const uint64_t bb = b / 8;
  const auto lo_mask = static_cast<uint8_t>(0xff << (a % 8));
  const auto hi_mask = static_cast<uint8_t>(0xff >> (7 - b % 8));
  if (ab == bb) {
    p[ab] =
        static_cast<char>(static_cast<uint8_t>(p[ab]) | (lo_mask & hi_mask));
    return;
  }
  p[ab] = static_cast<char>(static_cast<uint8_t>(p[ab]) | lo_mask);
  if (bb > ab + 1) std::memset(p + ab + 1, 0xff, bb - ab - 1);
  p[bb] = static_cast<char>(static_cast<uint8_t>(p[bb]) | hi_mask);
}

void AddRunsSegment(std::vector<Segment>* segs, size_t begin, size_t end) {
  if (!segs->empty() && !segs->back().bitmap) {
    segs->back().end = end;  // consecutive RUNS windows share one segment
  } else {
    segs->push_back({false, begin, end, 0});
  }
}

// Plans the segments of one actor's cloud. Windows are greedy: a window
// starts at the first run not yet placed and holds the runs that fit
// entirely within kWindow counters of it; a run that crosses the window's
// end starts the next window, and one longer than a window is RUNS-coded
// on its own. Each window takes the cheaper of RUNS and BITMAP, and a
// BITMAP window extends the preceding BITMAP segment when that costs less
// than a new segment. Linear in the number of runs.
std::vector<Segment> PlanSegments(const std::vector<Run>& runs,
                                  uint64_t cursor) {
  std::vector<Segment> segs;
  const size_t n = runs.size();
  size_t i = 0;
  while (i < n) {
    const uint64_t start = runs[i].lo;
    size_t j = i;
    uint64_t runs_cost = 0;
    uint64_t next_cursor = cursor;
    while (j < n && runs[j].hi - start < kWindow) {
      runs_cost += coding::VarintLength(runs[j].lo - next_cursor) +
                   coding::VarintLength(runs[j].hi - runs[j].lo);
      next_cursor = runs[j].hi + 2;  // wraps only after the last run
      ++j;
    }
    if (j == i) {
      AddRunsSegment(&segs, i, i + 1);
      cursor = runs[i].hi + 2;
      ++i;
      continue;
    }
    const uint64_t nbytes = BitmapBytes(start, runs[j - 1].hi);
    const uint64_t alone = coding::VarintLength(nbytes << 1 | 1) +
                           coding::VarintLength(start - cursor) + nbytes;
    bool placed = false;
    if (!segs.empty() && segs.back().bitmap) {
      Segment& prev = segs.back();
      const uint64_t merged = BitmapBytes(runs[prev.begin].lo, runs[j - 1].hi);
      const uint64_t extra = merged - prev.nbytes +
                             coding::VarintLength(merged << 1 | 1) -
                             coding::VarintLength(prev.nbytes << 1 | 1);
      if (extra < runs_cost && extra <= alone) {
        prev.end = j;
        prev.nbytes = merged;
        placed = true;
      }
    }
    if (!placed) {
      if (alone < runs_cost) {
        segs.push_back({true, i, j, nbytes});
      } else {
        AddRunsSegment(&segs, i, j);
      }
    }
    cursor = next_cursor;
    i = j;
  }
  return segs;
}

void EncodeCloud(uint64_t base, const IntervalSet* cloud, std::string* dst) {
  if (cloud == nullptr) {
    coding::PutVarint64(dst, 0);
    return;
  }
  std::vector<Run> runs;
  for (const auto& [lo, hi] : *cloud) runs.push_back({lo, hi});
  // Normalisation guarantees base + 2 does not wrap: cloud counters exceed
  // base + 1.
  uint64_t cursor = base + 2;
  const std::vector<Segment> segs = PlanSegments(runs, cursor);
  coding::PutVarint64(dst, segs.size());
  for (const Segment& seg : segs) {
    if (!seg.bitmap) {
      coding::PutVarint64(dst, static_cast<uint64_t>(seg.end - seg.begin) << 1);
      for (size_t k = seg.begin; k < seg.end; ++k) {
        coding::PutVarint64(dst, runs[k].lo - cursor);
        coding::PutVarint64(dst, runs[k].hi - runs[k].lo);
        cursor = runs[k].hi + 2;
      }
      continue;
    }
    const uint64_t first = runs[seg.begin].lo;
    coding::PutVarint64(dst, seg.nbytes << 1 | 1);
    coding::PutVarint64(dst, first - cursor);
    const size_t offset = dst->size();
    dst->append(seg.nbytes, '\0');
    char* bits = dst->data() + offset;
    for (size_t k = seg.begin; k < seg.end; ++k) {
      SetBits(bits, runs[k].lo - first, runs[k].hi - first);
    }
    cursor = runs[seg.end - 1].hi + 2;
  }
}

// ---------------------------------------------------------------------------
// Decoding.

absl::Status Corrupt(std::string_view what) {
  return absl::DataLossError(
      absl::StrCat("corrupt clock encoding: ", ToAbsl(what)));
}

// Appends the runs of an LSB-first bitmap whose bit 0 is counter `start`.
// REQUIRES: start + (highest set bit) does not overflow; the caller checked.
void DecodeBitmap(std::string_view bytes, uint64_t start, uint64_t nbits,
                  IntervalSet* out) {
  out->InsertBits(start, bytes, nbits);
}

absl::Status DecodeCloud(coding::Reader* r, uint64_t base, uint64_t nsegs,
                         IntervalSet* out) {
  if (base >= kMax - 1) return Corrupt("cloud above a base that is maximal");
  uint64_t cursor = base + 2;  // smallest counter that may come next
  bool full = false;           // true once no further counter fits
  for (uint64_t s = 0; s < nsegs; ++s) {
    uint64_t header;
    if (!r->GetVarint64(&header)) return Corrupt("truncated segment header");
    const uint64_t count = header >> 1;
    if (count == 0) return Corrupt("empty segment");
    if ((header & 1) == 0) {
      // Each run takes at least two bytes.
      if (count > r->remaining() / 2) return Corrupt("truncated runs");
      for (uint64_t k = 0; k < count; ++k) {
        uint64_t gap, len;
        if (!r->GetVarint64(&gap) || !r->GetVarint64(&len)) {
          return Corrupt("truncated run");
        }
        if (full || gap > kMax - cursor) return Corrupt("counter overflow");
        const uint64_t lo = cursor + gap;
        if (len > kMax - lo) return Corrupt("counter overflow");
        const uint64_t hi = lo + len;
        out->Append(lo, hi);
        if (hi >= kMax - 1) {
          full = true;
        } else {
          cursor = hi + 2;
        }
      }
    } else {
      uint64_t gap;
      std::string_view bytes;
      if (!r->GetVarint64(&gap)) return Corrupt("truncated bitmap");
      if (count > r->remaining() || !r->GetBytes(count, &bytes)) {
        return Corrupt("truncated bitmap");
      }
      if (full || gap > kMax - cursor) return Corrupt("counter overflow");
      const uint64_t start = cursor + gap;
      const auto first_byte = static_cast<uint8_t>(bytes.front());
      const auto last_byte = static_cast<uint8_t>(bytes.back());
      if ((first_byte & 1) == 0) return Corrupt("bitmap bit 0 is clear");
      if (last_byte == 0) return Corrupt("bitmap ends with a zero byte");
      const uint64_t last_bit =
          (uint64_t{count} - 1) * 8 +
          static_cast<uint64_t>(std::bit_width(last_byte)) - 1;
      if (last_bit > kMax - start) return Corrupt("counter overflow");
      DecodeBitmap(bytes, start, last_bit + 1, out);
      const uint64_t end = start + last_bit;
      if (end >= kMax - 1) {
        full = true;
      } else {
        cursor = end + 2;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

// ---------------------------------------------------------------------------

void Clock::Normalize(ActorId actor, IntervalSet* counters) {
  if (counters->empty()) return;
  uint64_t base = vv_.Get(actor);
  if (base != 0) counters->EraseUpTo(base);
  // After EraseUpTo every counter exceeds base, so base < kMax here.
  if (!counters->empty() && counters->First() == base + 1) {
    base = counters->begin()->second;
    counters->PopFirst();
    vv_.Set(actor, base);
  }
}

absl::StatusOr<Dot> Clock::Increment(ActorId actor) {
  const uint64_t max = MaxCounter(actor);
  if (max == kMax) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("clock: counter of actor %x is exhausted", actor));
  }
  const Dot dot{actor, max + 1};
  // Above every seen counter: it extends the cloud's last run if the actor
  // has a cloud (which then stays > base + 1), else the base.
  auto c = cloud_.LowerBound(actor);
  if (c != cloud_.entries_.end() && c->actor == actor) {
    c->counters.InsertRange(dot.counter, dot.counter);
  } else {
    vv_.Set(actor, dot.counter);
  }
  return dot;
}

void Clock::AddDot(Dot dot) {
  if (dot.counter == 0) return;
  auto v = vv_.LowerBound(dot.actor);
  const bool has_base = v != vv_.entries_.end() && v->actor == dot.actor;
  const uint64_t base = has_base ? v->counter : 0;
  if (dot.counter <= base) return;
  if (dot.counter - 1 != base) {
    cloud_.Insert(dot);
    return;
  }
  // Extends the base; absorb the cloud's first run if now contiguous.
  uint64_t new_base = dot.counter;
  if (!cloud_.empty()) {
    auto c = cloud_.LowerBound(dot.actor);
    if (c != cloud_.entries_.end() && c->actor == dot.actor &&
        new_base != kMax && c->counters.First() == new_base + 1) {
      new_base = c->counters.begin()->second;
      c->counters.PopFirst();
      if (c->counters.empty()) cloud_.entries_.erase(c);
    }
  }
  if (has_base) {
    v->counter = new_base;
  } else {
    vv_.entries_.insert(v, VersionVector::Entry{dot.actor, new_base});
  }
}

void Clock::AddDots(std::span<const Dot> dots) {
  for (const Dot& d : dots) AddDot(d);
}

void Clock::Merge(const Clock& other) {
  if (&other == this) return;
  vv_.Merge(other.vv_);
  for (const DotCloud::Entry& e : other.cloud_.entries_) {
    cloud_.Mutable(e.actor).Union(e.counters);
  }
  // Any base may have grown up to or past its cloud.
  auto& entries = cloud_.entries_;
  size_t out = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    Normalize(entries[i].actor, &entries[i].counters);
    if (entries[i].counters.empty()) continue;
    if (out != i) entries[out] = std::move(entries[i]);
    ++out;
  }
  entries.erase(entries.begin() + static_cast<ptrdiff_t>(out), entries.end());
}

bool Clock::Descends(const Clock& other) const {
  if (!vv_.Descends(other.vv_)) return false;
  for (const DotCloud::Entry& e : other.cloud_.entries_) {
    const uint64_t base = vv_.Get(e.actor);
    if (e.counters.Last() <= base) continue;
    const IntervalSet* mine = cloud_.Find(e.actor);
    if (mine == nullptr) return false;
    if (e.counters.First() > base) {
      if (!mine->Includes(e.counters)) return false;
      continue;
    }
    // Part of their cloud lies within our base: walk both clouds, skipping
    // their runs that the base covers.
    auto a = mine->begin();
    for (const auto& [lo, hi] : e.counters) {
      if (hi <= base) continue;
      // base + 1 is never in our cloud, so a run reaching it is not seen.
      if (lo <= base + 1) return false;
      while (a != mine->end() && a->second < lo) ++a;
      if (a == mine->end() || a->first > lo || a->second < hi) return false;
    }
  }
  return true;
}

Clock Clock::Intersection(const Clock& a, const Clock& b) {
  Clock result;
  auto& vv = result.vv_.entries_;
  auto& cloud = result.cloud_.entries_;
  // Walk a's actors and look each up in b: clocks have few actors.
  ForEachActor(a.vv_, a.cloud_,
               [&](ActorId actor, uint64_t base, const IntervalSet* counters) {
                 const uint64_t b_base = b.vv_.Get(actor);
                 const IntervalSet* b_counters = b.cloud_.Find(actor);
                 if (b_base == 0 && b_counters == nullptr) return;
                 if (counters == nullptr && b_counters == nullptr) {
                   vv.push_back({actor, std::min(base, b_base)});
                   return;
                 }
                 AppendSplit(
                     actor,
                     IntervalSet::Intersection(FullSet(base, counters),
                                               FullSet(b_base, b_counters)),
                     &vv, &cloud);
               });
  return result;
}

Clock Clock::Complement(const Clock& a, const Clock& b) {
  Clock result = a;
  result.Subtract(b);
  return result;
}

void Clock::Subtract(const Clock& other) {
  if (other.empty() || empty()) return;
  if (&other == this) {
    clear();
    return;
  }
  std::vector<VersionVector::Entry> vv;
  std::vector<DotCloud::Entry> cloud;
  vv.reserve(vv_.entries_.size());
  cloud.reserve(cloud_.entries_.size());
  auto v = vv_.entries_.begin();
  auto c = cloud_.entries_.begin();
  while (v != vv_.entries_.end() || c != cloud_.entries_.end()) {
    ActorId actor;
    uint64_t base = 0;
    IntervalSet counters;
    bool has_cloud = false;
    if (c == cloud_.entries_.end() ||
        (v != vv_.entries_.end() && v->actor <= c->actor)) {
      actor = v->actor;
      base = v->counter;
      ++v;
    } else {
      actor = c->actor;
    }
    if (c != cloud_.entries_.end() && c->actor == actor) {
      counters = std::move(c->counters);
      has_cloud = true;
      ++c;
    }
    const uint64_t o_base = other.vv_.Get(actor);
    const IntervalSet* o_counters = other.cloud_.Find(actor);
    if (o_base == 0 && o_counters == nullptr) {
      if (base != 0) vv.push_back({actor, base});
      if (has_cloud) cloud.push_back({actor, std::move(counters)});
      continue;
    }
    if (base != 0) counters.InsertRange(1, base);
    if (o_base != 0) counters.EraseRange(1, o_base);
    if (o_counters != nullptr) counters.Difference(*o_counters);
    AppendSplit(actor, std::move(counters), &vv, &cloud);
  }
  vv_.entries_ = std::move(vv);
  cloud_.entries_ = std::move(cloud);
}

uint64_t Clock::DotCount() const {
  uint64_t n = cloud_.DotCount();
  for (const VersionVector::Entry& e : vv_) n = SaturatingAdd(n, e.counter);
  return n;
}

uint64_t Clock::MaxCounter(ActorId actor) const {
  const IntervalSet* c = cloud_.Find(actor);
  // Cloud counters exceed the base.
  return c != nullptr ? c->Last() : vv_.Get(actor);
}

std::vector<ActorId> Clock::Actors() const {
  std::vector<ActorId> actors;
  ForEachActor(vv_, cloud_, [&](ActorId actor, uint64_t, const IntervalSet*) {
    actors.push_back(actor);
  });
  return actors;
}

bool Clock::IsNormalized() const {
  for (auto it = vv_.begin(); it != vv_.end(); ++it) {
    if (it->counter == 0) return false;
    if (it != vv_.begin() && std::prev(it)->actor >= it->actor) return false;
  }
  for (auto it = cloud_.begin(); it != cloud_.end(); ++it) {
    if (it != cloud_.begin() && std::prev(it)->actor >= it->actor) {
      return false;
    }
    if (it->counters.empty()) return false;
    const uint64_t base = vv_.Get(it->actor);
    const uint64_t first = it->counters.First();
    if (first <= base || first - base < 2) return false;
    // Runs maximal and ordered.
    uint64_t prev_hi = 0;
    bool first_run = true;
    for (const auto& [lo, hi] : it->counters) {
      if (hi < lo) return false;
      if (!first_run && (lo <= prev_hi || lo - prev_hi < 2)) return false;
      first_run = false;
      prev_hi = hi;
    }
  }
  return true;
}

std::string Clock::DebugString() const {
  std::string out = "{";
  bool first = true;
  ForEachActor(vv_, cloud_,
               [&](ActorId actor, uint64_t base, const IntervalSet* counters) {
                 if (!first) out += ", ";
                 first = false;
                 absl::StrAppendFormat(&out, "%x:%d", actor, base);
                 if (counters != nullptr) {
                   absl::StrAppend(&out, "+", counters->DebugString());
                 }
               });
  out += "}";
  return out;
}

void Clock::EncodeTo(std::string* dst) const {
  uint64_t nactors = 0;
  ForEachActor(vv_, cloud_,
               [&](ActorId, uint64_t, const IntervalSet*) { ++nactors; });
  dst->push_back(static_cast<char>(kFormatVersion));
  coding::PutVarint64(dst, nactors);
  ForEachActor(vv_, cloud_,
               [&](ActorId actor, uint64_t base, const IntervalSet* counters) {
                 coding::PutFixed64BE(dst, actor);
                 coding::PutVarint64(dst, base);
                 EncodeCloud(base, counters, dst);
               });
}

absl::StatusOr<Clock> Clock::Decode(std::string_view in) {
  coding::Reader r(in);
  uint8_t version;
  if (!r.GetByte(&version)) return Corrupt("empty input");
  if (version != kFormatVersion) {
    return absl::InvalidArgumentError(
        absl::StrFormat("clock: unsupported format version %d", version));
  }
  uint64_t nactors;
  if (!r.GetVarint64(&nactors)) return Corrupt("truncated actor count");
  // An actor takes at least 10 bytes: fixed64 id, base, segment count.
  if (nactors > r.remaining() / 10) return Corrupt("truncated actors");
  Clock clock;
  clock.vv_.entries_.reserve(nactors);
  uint64_t prev_actor = 0;
  for (uint64_t k = 0; k < nactors; ++k) {
    uint64_t actor, base, nsegs;
    if (!r.GetFixed64BE(&actor) || !r.GetVarint64(&base) ||
        !r.GetVarint64(&nsegs)) {
      return Corrupt("truncated actor");
    }
    if (k > 0 && actor <= prev_actor) {
      return Corrupt("actors not strictly ascending");
    }
    prev_actor = actor;
    if (base == 0 && nsegs == 0) return Corrupt("actor without dots");
    IntervalSet counters;
    if (nsegs > 0) {
      absl::Status s = DecodeCloud(&r, base, nsegs, &counters);
      if (!s.ok()) return s;
    }
    if (base != 0) clock.vv_.entries_.push_back({actor, base});
    if (!counters.empty()) {
      clock.cloud_.entries_.push_back({actor, std::move(counters)});
    }
  }
  if (!r.empty()) return Corrupt("trailing bytes");
  return clock;
}

}  // namespace bigset
