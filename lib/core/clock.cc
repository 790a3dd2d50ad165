#include "bigset/core/clock.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/cloud_codec.h"
#include "core/coding.h"
#include "core/string_view_compat.h"

namespace bigset {
namespace {

uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  return UINT64_MAX - a < b ? UINT64_MAX : a + b;
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
// Encoding (the segment format is lib/core/cloud_codec.h's).

void EncodeCloud(uint64_t base, const IntervalSet* cloud, std::string* dst) {
  if (cloud == nullptr) {
    coding::PutVarint64(dst, 0);
    return;
  }
  std::vector<cloud_codec::Run> runs;
  for (const auto& [lo, hi] : *cloud) runs.push_back({lo, hi});
  // Normalisation guarantees base + 2 does not wrap: cloud counters exceed
  // base + 1.
  cloud_codec::EncodeRuns(runs, base + 2, dst);
}

absl::Status Corrupt(std::string_view what) {
  return absl::DataLossError(
      absl::StrCat("corrupt clock encoding: ", ToAbsl(what)));
}

absl::Status DecodeCloud(coding::Reader* r, uint64_t base, uint64_t nsegs,
                         IntervalSet* out) {
  if (base >= UINT64_MAX - 1)
    return Corrupt("cloud above a base that is maximal");
  return cloud_codec::DecodeRuns(r, base + 2, nsegs, out);
}

}  // namespace

// ---------------------------------------------------------------------------

absl::StatusOr<Clock> Clock::FromParts(
    VersionVector vv, std::vector<std::pair<ActorId, IntervalSet>> clouds) {
  Clock c;
  c.vv_ = std::move(vv);
  for (const auto& e : c.vv_) {
    if (e.counter == 0) return Corrupt("base 0 in the version vector");
  }
  for (auto& [actor, counters] : clouds) {
    if (counters.empty()) return Corrupt("empty cloud");
    if (!c.cloud_.entries_.empty() && c.cloud_.entries_.back().actor >= actor) {
      return Corrupt("cloud actors out of order");
    }
    // An IntervalSet's intervals are maximal by construction; only the
    // gap above the base needs checking.
    const uint64_t base = c.vv_.Get(actor);
    const uint64_t first = counters.First();
    if (first <= base || first - base < 2) {
      return Corrupt("cloud counters not above base + 1");
    }
    c.cloud_.entries_.push_back({actor, std::move(counters)});
  }
  return c;
}

void Clock::Normalize(ActorId actor, IntervalSet* counters) {
  if (counters->empty()) return;
  uint64_t base = vv_.Get(actor);
  if (base != 0) counters->EraseUpTo(base);
  // After EraseUpTo every counter exceeds base, so base < UINT64_MAX here.
  if (!counters->empty() && counters->First() == base + 1) {
    base = counters->begin()->second;
    counters->PopFirst();
    vv_.Set(actor, base);
  }
}

absl::StatusOr<Dot> Clock::Increment(ActorId actor) {
  const uint64_t max = MaxCounter(actor);
  if (max == UINT64_MAX) {
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
        new_base != UINT64_MAX && c->counters.First() == new_base + 1) {
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

void Clock::SplitSeen(std::span<const Dot> dots, std::vector<Dot>* seen,
                      std::vector<Dot>* unseen) const {
  for (size_t i = 0; i < dots.size();) {
    const ActorId actor = dots[i].actor;
    const uint64_t base = vv_.Get(actor);
    const IntervalSet* cloud = cloud_.Find(actor);
    std::optional<IntervalSet::SortedProbe> probe;
    if (cloud != nullptr) probe.emplace(*cloud);
    for (; i < dots.size() && dots[i].actor == actor; ++i) {
      const uint64_t counter = dots[i].counter;
      // counter - 1 < base  <=>  1 <= counter <= base (as in Seen).
      const bool in = counter - 1 < base ||
                      (counter != 0 && probe && probe->Contains(counter));
      (in ? seen : unseen)->push_back(dots[i]);
    }
  }
}

void Clock::AddDots(std::span<const Dot> dots) {
  // A few: one at a time. Many (a transfer's chunk): sorted, and each
  // actor's counters unioned in as one set, built a window at a time;
  // scattered counters one at a time would cost a btree update and a
  // density check each.
  if (dots.size() < 64) {
    for (const Dot& d : dots) AddDot(d);
    return;
  }
  std::vector<Dot> copy;
  std::span<const Dot> sorted = dots;
  if (!std::is_sorted(dots.begin(), dots.end())) {
    copy.assign(dots.begin(), dots.end());
    std::sort(copy.begin(), copy.end());
    sorted = copy;
  }
  std::vector<uint64_t> counters;
  for (size_t i = 0; i < sorted.size();) {
    const ActorId actor = sorted[i].actor;
    counters.clear();
    for (; i < sorted.size() && sorted[i].actor == actor; ++i) {
      if (sorted[i].counter != 0) counters.push_back(sorted[i].counter);
    }
    if (counters.empty()) continue;
    IntervalSet& cloud = cloud_.Mutable(actor);
    cloud.Union(IntervalSet::FromSorted(counters));
    Normalize(actor, &cloud);
  }
  // Clouds the new counters made contiguous with their base are empty now.
  std::erase_if(cloud_.entries_,
                [](const DotCloud::Entry& e) { return e.counters.empty(); });
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
