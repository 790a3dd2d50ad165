// Tests for the causal core: IntervalSet, VersionVector, DotCloud, Clock and
// the clock encoding. Randomized tests compare against a reference model, a
// std::set of expanded dots, so they only use clocks whose dot count is
// small (the large shapes are covered by round-trip and size tests).

#include "bigset/core/clock.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <iterator>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "bigset/core/dot.h"
#include "bigset/core/dot_cloud.h"
#include "bigset/core/version_vector.h"
#include "core/dot_sort.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

using ::bigset::testing::Rng;
using ::bigset::testing::Uniform;

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

using DotSet = std::set<Dot>;

// ---------------------------------------------------------------------------
// Generators and model helpers.

// Adds the counters of one random shape to `out` for `actor`. Shapes: a
// dense prefix (becomes the base), a prefix with holes, dense runs, scattered
// dots at various densities (around the bitmap/runs break-even), and any of
// these near UINT64_MAX.
void AddShape(Rng& rng, ActorId actor, DotSet* out) {
  const bool near_max = Uniform(rng, 0, 4) == 0;
  // Offset so that the shape's counters end at or near UINT64_MAX.
  const uint64_t top = near_max ? kMax - Uniform(rng, 0, 3) : 0;
  auto put = [&](uint64_t c) {
    // c in [1, ~12000]; mirror it below `top` when near the maximum.
    const uint64_t counter = near_max ? top - (c - 1) : c;
    if (counter != 0) out->insert(Dot{actor, counter});
  };
  switch (Uniform(rng, 0, 5)) {
    case 0: {  // Dense prefix.
      const uint64_t n = Uniform(rng, 1, 300);
      for (uint64_t c = 1; c <= n; ++c) put(c);
      break;
    }
    case 1: {  // Prefix with holes.
      const uint64_t n = Uniform(rng, 1, 400);
      for (uint64_t c = 1; c <= n; ++c) {
        if (Uniform(rng, 0, 9) != 0) put(c);
      }
      break;
    }
    case 2: {  // Dense runs with gaps.
      uint64_t c = Uniform(rng, 1, 50);
      const int runs = static_cast<int>(Uniform(rng, 1, 8));
      for (int r = 0; r < runs; ++r) {
        const uint64_t len = Uniform(rng, 1, 100);
        for (uint64_t k = 0; k < len; ++k) put(c + k);
        c += len + Uniform(rng, 1, 3000);
      }
      break;
    }
    case 3: {  // Scattered, density 1/2 .. 1/64, over up to 12000 counters.
      const uint64_t span = Uniform(rng, 10, 12000);
      const uint64_t one_in = uint64_t{1} << Uniform(rng, 1, 6);
      for (uint64_t c = 1; c <= span; ++c) {
        if (Uniform(rng, 1, one_in) == 1) put(c);
      }
      break;
    }
    case 4: {  // A few isolated dots far apart.
      const int n = static_cast<int>(Uniform(rng, 1, 6));
      for (int k = 0; k < n; ++k) put(Uniform(rng, 1, 12000));
      break;
    }
    default: {  // Scattered block then a long-ish run: window crossings.
      for (uint64_t c = 1; c <= 5000; ++c) {
        if (Uniform(rng, 0, 2) == 0) put(c);
      }
      const uint64_t from = Uniform(rng, 4000, 6000);
      for (uint64_t c = from; c < from + 5000; ++c) put(c);
      break;
    }
  }
}

using Pool = std::vector<ActorId>;

// Actors shared by every clock of one test, so that operands overlap.
Pool ActorPool(Rng& rng) {
  return {1, 2, rng(), rng() | (uint64_t{1} << 63), kMax, 0};
}

DotSet RandomDots(Rng& rng, const std::vector<ActorId>& pool) {
  DotSet dots;
  const int shapes = static_cast<int>(Uniform(rng, 0, 5));
  for (int s = 0; s < shapes; ++s) {
    AddShape(rng, pool[Uniform(rng, 0, pool.size() - 1)], &dots);
  }
  return dots;
}

// Runs `body(rng, pool, dots)` once for each of Seeds(base_count), the seed
// captured: `rng` seeded with it, `pool` the test's ActorPool and `dots`
// RandomDots over it (drawn in that order, as every such test starts).
template <typename Body>
void ForEachSeedDots(int base_count, Body body) {
  ForEachSeed(base_count, [&](Rng& rng) {
    const Pool pool = ActorPool(rng);
    DotSet dots = RandomDots(rng, pool);
    body(rng, pool, std::move(dots));
  });
}

// A random variation of `dots`: some dropped, some new ones.
DotSet Mutate(Rng& rng, const DotSet& dots, const std::vector<ActorId>& pool) {
  DotSet out;
  const uint64_t drop_one_in = Uniform(rng, 2, 20);
  for (const Dot& d : dots) {
    if (Uniform(rng, 1, drop_one_in) != 1) out.insert(d);
  }
  if (Uniform(rng, 0, 1) == 0) {
    DotSet more = RandomDots(rng, pool);
    out.insert(more.begin(), more.end());
  }
  return out;
}

// Builds a clock by adding the dots in random order.
Clock FromDots(Rng& rng, const DotSet& dots) {
  std::vector<Dot> v(dots.begin(), dots.end());
  std::shuffle(v.begin(), v.end(), rng);
  Clock c;
  if (Uniform(rng, 0, 1) == 0) {
    for (const Dot& d : v) c.AddDot(d);
  } else {
    c.AddDots(v);
  }
  return c;
}

DotSet Expand(const Clock& c) {
  DotSet out;
  c.ForEachDot([&](Dot d) { out.insert(out.end(), d); });
  return out;
}

DotSet Union(const DotSet& a, const DotSet& b) {
  DotSet out = a;
  out.insert(b.begin(), b.end());
  return out;
}

DotSet Intersect(const DotSet& a, const DotSet& b) {
  DotSet out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(),
                        std::inserter(out, out.end()));
  return out;
}

DotSet Minus(const DotSet& a, const DotSet& b) {
  DotSet out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(),
                      std::inserter(out, out.end()));
  return out;
}

// Checks that `c` is normalised and holds exactly `model`. The clock is
// described only when a check fails: Catch evaluates INFO at once, and a
// clock's text costs more than the checks (a sixth of this test's time).
void CheckEquals(const Clock& c, const DotSet& model) {
  const bool holds = c.IsNormalized() && Expand(c) == model &&
                     c.DotCount() == model.size() && c.empty() == model.empty();
  if (!holds) {  // Which check fails, with the clock.
    INFO("clock " << c.DebugString());
    REQUIRE(c.IsNormalized());
    REQUIRE(Expand(c) == model);
    REQUIRE(c.DotCount() == model.size());
    REQUIRE(c.empty() == model.empty());
  }
  REQUIRE(holds);
}

std::string Hex(const std::string& s) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char ch : s) {
    out.push_back(kDigits[ch >> 4]);
    out.push_back(kDigits[ch & 15]);
  }
  return out;
}

// Decodes `bytes`; if that succeeds the result must be a normalised clock
// that round-trips. Returns whether it decoded.
bool DecodesToValidClockOrError(const std::string& bytes) {
  absl::StatusOr<Clock> c = Clock::Decode(bytes);
  if (!c.ok()) {
    const absl::StatusCode code = c.status().code();
    REQUIRE((code == absl::StatusCode::kDataLoss ||
             code == absl::StatusCode::kInvalidArgument));
    REQUIRE(!c.status().message().empty());
    return false;
  }
  const bool normalized = c->IsNormalized();
  if (!normalized) {  // Described only on failure (CheckEquals says why).
    INFO("decoded " << c->DebugString() << " from " << Hex(bytes));
    REQUIRE(normalized);
  }
  absl::StatusOr<Clock> again = Clock::Decode(c->Encode());
  const bool holds = normalized && again.ok() && *again == *c;
  if (!holds) {
    INFO("decoded " << c->DebugString() << " from " << Hex(bytes));
    REQUIRE(again.ok());
    REQUIRE(*again == *c);
  }
  REQUIRE(holds);
  return true;
}

// ---------------------------------------------------------------------------
// Dot and VersionVector.

TEST_CASE("Dot ordering, hashing and formatting", "[clock]") {
  const Dot a{1, 5}, b{1, 6}, c{2, 1};
  REQUIRE(a < b);
  REQUIRE(b < c);
  REQUIRE(a == Dot{1, 5});
  REQUIRE(!Dot{}.valid());
  REQUIRE(a.valid());
  REQUIRE(absl::Hash<Dot>()(a) == absl::Hash<Dot>()(Dot{1, 5}));
  REQUIRE(absl::Hash<Dot>()(a) != absl::Hash<Dot>()(b));
  REQUIRE(DotToString(Dot{0xab, 7}) == "ab:7");
}

// SortDots sorts by radix for many dots (by the counter bytes that differ,
// then the actor's rank), else by comparison: both must give std::sort's
// order, repeats included, for any actors and counter ranges.
TEST_CASE("SortDots equals std::sort", "[clock]") {
  ForEachSeed(4, [&](Rng& rng) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{511}, size_t{512},
                     size_t{513}, size_t{4000}, size_t{40000}}) {
      // Actors: one, a few, or more than a byte can rank (257 and up).
      const size_t actor_count =
          std::vector<size_t>{1, 3, 300}[Uniform(rng, 0, 2)];
      std::vector<ActorId> actors;
      for (size_t i = 0; i < actor_count; ++i) {
        // Ids differing in one byte, or anywhere.
        actors.push_back(Uniform(rng, 0, 1) == 0 ? 0x5000 + i : rng());
      }
      // Counters: a narrow range, a wide one, all 64 bits, or one value.
      const int shape = static_cast<int>(Uniform(rng, 0, 3));
      const uint64_t low = shape == 2 ? 0 : Uniform(rng, 0, uint64_t{1} << 40);
      std::vector<Dot> dots;
      for (size_t i = 0; i < n; ++i) {
        const ActorId actor = actors[Uniform(rng, 0, actors.size() - 1)];
        uint64_t counter = low;
        if (shape == 0) counter += Uniform(rng, 0, 300);
        if (shape == 1) counter += Uniform(rng, 0, uint64_t{1} << 24);
        if (shape == 2) counter = rng();
        dots.push_back(Dot{actor, counter});
      }
      std::vector<Dot> want = dots;
      std::sort(want.begin(), want.end());
      SortDots(&dots);
      INFO("n " << n << ", actors " << actor_count << ", shape " << shape);
      REQUIRE(dots == want);
    }
    // The most actors a byte ranks (256), and one more (the comparison
    // sort), each actor present.
    for (size_t actor_count : {size_t{256}, size_t{257}}) {
      std::vector<Dot> dots;
      for (size_t i = 0; i < 4 * actor_count; ++i) {
        dots.push_back(
            Dot{0x7000 + (i * 7919) % actor_count, Uniform(rng, 1, 1 << 20)});
      }
      std::vector<Dot> want = dots;
      std::sort(want.begin(), want.end());
      SortDots(&dots);
      INFO("actors " << actor_count);
      REQUIRE(dots == want);
    }
  });
}

TEST_CASE("VersionVector get, set, merge, descends", "[clock]") {
  VersionVector v;
  REQUIRE(v.empty());
  REQUIRE(v.Get(3) == 0);
  v.Set(3, 10);
  v.Set(1, 4);
  v.Set(kMax, kMax);
  REQUIRE(v.size() == 3);
  REQUIRE(v.Get(3) == 10);
  REQUIRE(v.Get(kMax) == kMax);
  REQUIRE(v.begin()->actor == 1);  // sorted
  v.Set(1, 0);                     // 0 removes
  REQUIRE(v.size() == 2);
  REQUIRE(v.DebugString() == "{3:10, ffffffffffffffff:18446744073709551615}");

  ForEachSeed(50, [&](Rng& rng) {
    VersionVector a, b;
    for (int i = 0; i < 6; ++i) {
      a.Set(Uniform(rng, 0, 8), Uniform(rng, 0, 5));
      b.Set(Uniform(rng, 0, 8), Uniform(rng, 0, 5));
    }
    VersionVector m = a;
    m.Merge(b);
    VersionVector m2 = b;
    m2.Merge(a);
    REQUIRE(m == m2);
    REQUIRE(m.Descends(a));
    REQUIRE(m.Descends(b));
    for (ActorId x = 0; x <= 8; ++x) {
      REQUIRE(m.Get(x) == std::max(a.Get(x), b.Get(x)));
    }
    bool a_ge_b = true;
    for (ActorId x = 0; x <= 8; ++x) a_ge_b &= a.Get(x) >= b.Get(x);
    REQUIRE(a.Descends(b) == a_ge_b);
    for (const auto& e : m) REQUIRE(e.counter != 0);
  });
}

// ---------------------------------------------------------------------------
// IntervalSet against std::set<uint64_t>.

std::set<uint64_t> Values(const IntervalSet& s) {
  std::set<uint64_t> out;
  for (const auto& [lo, hi] : s) {
    for (uint64_t v = lo;; ++v) {
      out.insert(v);
      if (v == hi) break;
    }
  }
  return out;
}

// True iff `s`'s runs are maximal (ordered, non-empty, non-adjacent).
bool RunsAreMaximal(const IntervalSet& s) {
  bool first = true;
  uint64_t prev_hi = 0;
  for (const auto& [lo, hi] : s) {
    if (lo > hi || (!first && (lo <= prev_hi || lo - prev_hi < 2))) {
      return false;
    }
    first = false;
    prev_hi = hi;
  }
  return true;
}

void CheckIntervalSet(const IntervalSet& s, const std::set<uint64_t>& model) {
  const bool holds = RunsAreMaximal(s) && Values(s) == model &&
                     s.Count() == model.size() && s.empty() == model.empty() &&
                     (model.empty() || (s.First() == *model.begin() &&
                                        s.Last() == *model.rbegin()));
  if (!holds) {  // Which check fails, with the set (see CheckEquals).
    INFO("set " << s.DebugString());
    // Maximal runs: ordered, non-empty, non-adjacent.
    bool first = true;
    uint64_t prev_hi = 0;
    for (const auto& [lo, hi] : s) {
      REQUIRE(lo <= hi);
      if (!first) REQUIRE((lo > prev_hi && lo - prev_hi >= 2));
      first = false;
      prev_hi = hi;
    }
    REQUIRE(Values(s) == model);
    REQUIRE(s.Count() == model.size());
    REQUIRE(s.empty() == model.empty());
    if (!model.empty()) {
      REQUIRE(s.First() == *model.begin());
      REQUIRE(s.Last() == *model.rbegin());
    }
  }
  REQUIRE(holds);
}

// The binary operations, in both their forms, and Includes, against the
// models of their operands.
void CheckAlgebra(const IntervalSet& a, const std::set<uint64_t>& ma,
                  const IntervalSet& b, const std::set<uint64_t>& mb) {
  std::set<uint64_t> mu = ma, mi, md;
  mu.insert(mb.begin(), mb.end());
  std::set_intersection(ma.begin(), ma.end(), mb.begin(), mb.end(),
                        std::inserter(mi, mi.end()));
  std::set_difference(ma.begin(), ma.end(), mb.begin(), mb.end(),
                      std::inserter(md, md.end()));
  CheckIntervalSet(IntervalSet::Union(a, b), mu);
  CheckIntervalSet(IntervalSet::Intersection(a, b), mi);
  CheckIntervalSet(IntervalSet::Difference(a, b), md);
  IntervalSet u = a, i = a, d = a;
  u.Union(b);
  i.Intersect(b);
  d.Difference(b);
  CheckIntervalSet(u, mu);
  CheckIntervalSet(i, mi);
  CheckIntervalSet(d, md);
  REQUIRE(a.Includes(b) ==
          std::includes(ma.begin(), ma.end(), mb.begin(), mb.end()));
  REQUIRE(u.Includes(a));
  REQUIRE(u.Includes(b));
  REQUIRE(a.Includes(i));
  REQUIRE(a.Includes(d));
}

// Values drawn from three small regions: around 0, the middle and the top of
// the range, so wrap-around bugs at 0 and UINT64_MAX show.
uint64_t RegionValue(Rng& rng, uint64_t region) {
  const uint64_t off = Uniform(rng, 0, 60);
  if (region == 0) return off;
  if (region == 1) return (uint64_t{1} << 40) + off;
  return kMax - off;
}

TEST_CASE("IntervalSet randomized against std::set", "[clock]") {
  ForEachSeed(150, [&](Rng& rng) {
    IntervalSet a, b;
    std::set<uint64_t> ma, mb;
    const uint64_t region = Uniform(rng, 0, 2);
    for (int step = 0; step < 120; ++step) {
      const uint64_t x = RegionValue(rng, region);
      const uint64_t y = RegionValue(rng, region);
      const uint64_t lo = std::min(x, y), hi = std::max(x, y);
      IntervalSet& s = Uniform(rng, 0, 1) ? a : b;
      std::set<uint64_t>& m = (&s == &a) ? ma : mb;
      switch (Uniform(rng, 0, 5)) {
        case 0:
          s.Insert(x);
          m.insert(x);
          break;
        case 1:
        case 2:
          if (hi - lo <= 8) {  // short ranges keep the sets interesting
            s.InsertRange(lo, hi);
            for (uint64_t v = lo;; ++v) {
              m.insert(v);
              if (v == hi) break;
            }
          }
          break;
        case 3:
          if (hi - lo <= 12) {
            s.EraseRange(lo, hi);
            for (auto it = m.lower_bound(lo); it != m.end() && *it <= hi;) {
              it = m.erase(it);
            }
          }
          break;
        case 4:
          if (Uniform(rng, 0, 7) == 0) {
            s.EraseUpTo(x);
            m.erase(m.begin(), m.upper_bound(x));
          }
          break;
        default:
          REQUIRE(s.Contains(x) == (m.count(x) == 1));
          if (lo <= hi) {
            bool all = true;
            for (uint64_t v = lo;; ++v) {
              all &= m.count(v) == 1;
              if (v == hi) break;
            }
            REQUIRE(s.ContainsRange(lo, hi) == all);
          }
          break;
      }
      CheckIntervalSet(a, ma);
      CheckIntervalSet(b, mb);
    }
    CheckAlgebra(a, ma, b, mb);
  });
}

// FromSorted builds windows of few values as runs and the others as
// bitmaps: both, and runs across the boundary between them, against a model.
TEST_CASE("IntervalSet FromSorted equals its values, sparse or dense",
          "[clock]") {
  ForEachSeed(40, [&](Rng& rng) {
    const uint64_t bases[] = {0, (uint64_t{1} << 40) - 5000, kMax - 40000};
    const uint64_t base = bases[Uniform(rng, 0, 2)];
    std::vector<uint64_t> values;
    const int windows = static_cast<int>(Uniform(rng, 1, 7));
    for (int w = 0; w < windows; ++w) {
      // 0 to 80 values in a window-sized span (below and above the 32 runs
      // that make a window dense), some in runs, some repeated.
      const uint64_t from = base + Uniform(rng, 0, 26000);
      for (int k = 0, n = static_cast<int>(Uniform(rng, 0, 80)); k < n; ++k) {
        const uint64_t v = from + Uniform(rng, 0, 4095);
        const uint64_t len = Uniform(rng, 0, 3) == 0 ? Uniform(rng, 1, 9) : 1;
        for (uint64_t d = 0; d < len && v + d >= v; ++d)
          values.push_back(v + d);
        if (Uniform(rng, 0, 9) == 0) values.push_back(v);
      }
    }
    // Runs that end on a window's last value and start on the next's first.
    const uint64_t edge =
        (base / IntervalSet::kWindow + 1) * IntervalSet::kWindow;
    if (Uniform(rng, 0, 1) && edge > base) {
      values.push_back(edge - 1);
      values.push_back(edge);
    }
    std::sort(values.begin(), values.end());
    const IntervalSet s = IntervalSet::FromSorted(values);
    CheckIntervalSet(s, std::set<uint64_t>(values.begin(), values.end()));
  });
}

// Values over a few windows of 4096, so that windows turn into bitmaps (more
// than 32 runs) and back (ranges that fill them, erasures that thin them).
TEST_CASE("IntervalSet with dense windows, randomized against std::set",
          "[clock]") {
  bool saw_dense = false;
  ForEachSeed(40, [&](Rng& rng) {
    IntervalSet a, b;
    std::set<uint64_t> ma, mb;
    // Around 0, across window boundaries at an unaligned base, and up to
    // UINT64_MAX.
    const uint64_t bases[] = {0, (uint64_t{1} << 40) - 5000, kMax - 12000};
    const uint64_t base = bases[Uniform(rng, 0, 2)];
    auto value = [&] { return base + Uniform(rng, 0, 12000); };
    // x + up to `span`, not past the region (nor UINT64_MAX).
    auto upto = [&](uint64_t x, uint64_t span) {
      return x + std::min(Uniform(rng, 0, span), base + 12000 - x);
    };
    // Every value of [lo, hi], hi possibly UINT64_MAX.
    auto each = [](uint64_t lo, uint64_t hi, auto fn) {
      for (uint64_t v = lo;; ++v) {
        fn(v);
        if (v == hi) break;
      }
    };
    for (int step = 0; step < 3000; ++step) {
      IntervalSet& s = Uniform(rng, 0, 1) ? a : b;
      std::set<uint64_t>& m = (&s == &a) ? ma : mb;
      const uint64_t x = value();
      const uint64_t dice = Uniform(rng, 0, 99);
      if (dice < 70) {
        s.Insert(x);
        m.insert(x);
      } else if (dice < 80) {
        const uint64_t hi = upto(x, 500);
        s.InsertRange(x, hi);
        each(x, hi, [&](uint64_t v) { m.insert(v); });
      } else if (dice < 95) {
        const uint64_t hi = upto(x, 300);
        s.EraseRange(x, hi);
        m.erase(m.lower_bound(x), m.upper_bound(hi));
      } else if (dice < 96) {
        s.EraseUpTo(x);
        m.erase(m.begin(), m.upper_bound(x));
      } else {
        REQUIRE(s.Contains(x) == (m.count(x) == 1));
        const uint64_t hi = upto(x, 40);
        bool all = true;
        each(x, hi, [&](uint64_t v) { all &= m.count(v) == 1; });
        REQUIRE(s.ContainsRange(x, hi) == all);
      }
      saw_dense |= a.dense_windows() > 0 || b.dense_windows() > 0;
      if (step % 150 == 0) {
        CheckIntervalSet(a, ma);
        CheckIntervalSet(b, mb);
      }
    }
    CheckIntervalSet(a, ma);
    CheckIntervalSet(b, mb);
    CheckAlgebra(a, ma, b, mb);
    // Equality is set equality whatever the windows' representation.
    IntervalSet rebuilt;
    for (uint64_t v : ma) rebuilt.Insert(v);
    REQUIRE(rebuilt == a);
    // A set appended above another, as segments are loaded.
    if (!ma.empty()) {
      auto cut = ma.begin();
      std::advance(cut, Uniform(rng, 0, ma.size() - 1));
      IntervalSet low, high;
      for (auto v = ma.begin(); v != cut; ++v) low.Insert(*v);
      for (auto v = cut; v != ma.end(); ++v) high.Insert(*v);
      if (low.empty() || high.First() >= low.Last() + 2) {
        low.AppendAbove(std::move(high));
        CheckIntervalSet(low, ma);
      }
    }
    // Bitmaps decoded straight into windows.
    std::string bytes((12000 + 8) / 8, '\0');
    for (uint64_t v : ma) {
      const uint64_t i = v - base;
      bytes[i / 8] = static_cast<char>(bytes[i / 8] | (1 << (i % 8)));
    }
    IntervalSet from_bits;
    from_bits.InsertBits(base, bytes, 12001);
    REQUIRE(from_bits == a);
  });
  CHECK(saw_dense);
}

TEST_CASE("IntervalSet memory stays within a small factor of its encoding",
          "[clock]") {
  // Every other counter over 10 windows: 20,480 runs. As runs that would
  // take about 400 KB; as bitmaps 5 KB (the encoding's size).
  Clock c;
  for (uint64_t k = 2; k < 2 + 10 * 4096; k += 2) c.AddDot(Dot{1, k});
  const IntervalSet* cloud = c.cloud().Find(1);
  REQUIRE(cloud != nullptr);
  CHECK(cloud->dense_windows() >= 9);
  const std::string enc = c.Encode();
  CHECK(cloud->MemoryBytes() <= 2 * enc.size());
  // Decoding the same bytes allocates the same: a 1 MiB clock of
  // alternating counters stays about 1 MiB.
  std::string big;
  {
    Clock alt;
    for (uint64_t k = 2; k < 2 + (uint64_t{1} << 23); k += 2) {
      alt.AddDot(Dot{7, k});
    }
    big = alt.Encode();
  }
  auto decoded = Clock::Decode(big);
  REQUIRE(decoded.ok());
  const IntervalSet* counters = decoded->cloud().Find(7);
  REQUIRE(counters != nullptr);
  CHECK(counters->Count() == (uint64_t{1} << 22));
  CHECK(counters->MemoryBytes() <= 2 * big.size());
}

TEST_CASE("IntervalSet pointwise paths (one set much larger)", "[clock]") {
  // The in-place Union/Difference/Includes switch to per-interval updates
  // when the other set is much smaller; exercise both paths.
  ForEachSeed(40, [&](Rng& rng) {
    IntervalSet big, small;
    std::set<uint64_t> mbig, msmall;
    for (int k = 0; k < 400; ++k) {
      const uint64_t v = Uniform(rng, 0, 3000);
      big.Insert(v);
      mbig.insert(v);
    }
    for (int k = 0; k < 6; ++k) {
      const uint64_t v = Uniform(rng, 0, 3000);
      const uint64_t len = Uniform(rng, 0, 20);
      small.InsertRange(v, v + len);
      for (uint64_t x = v; x <= v + len; ++x) msmall.insert(x);
    }
    CheckAlgebra(big, mbig, small, msmall);
  });
}

// SortedProbe keeps a window's bitmap and a run while ascending values stay
// in them, steps a few runs forward, and searches after longer jumps: it
// must agree with Contains for values inside runs, in gaps, in dense
// windows, after short steps and long jumps, up to UINT64_MAX.
TEST_CASE("IntervalSet SortedProbe agrees with Contains", "[clock]") {
  ForEachSeed(20, [&](Rng& rng) {
    IntervalSet s;
    std::vector<std::pair<uint64_t, uint64_t>> runs;
    const uint64_t start = Uniform(rng, 0, 1) == 0 ? 0 : kMax - 3'000'000;
    uint64_t at = start + Uniform(rng, 0, 1000);
    const int n = static_cast<int>(Uniform(rng, 1, 400));
    for (int i = 0; i < n; ++i) {
      const uint64_t len = Uniform(rng, 1, 50);
      runs.emplace_back(at, at + len - 1);
      s.InsertRange(at, at + len - 1);
      at += len + Uniform(rng, 1, 3000);
    }
    if (Uniform(rng, 0, 1) == 0) {  // A dense window (a bitmap).
      const uint64_t w = IntervalSet::WindowOf(Uniform(rng, start, at));
      for (uint64_t k = 0; k < IntervalSet::kWindow; k += 2) s.Insert(w + k);
    }
    s.InsertRange(kMax - 5, kMax);  // The top of the range.
    std::vector<uint64_t> values = {kMax, kMax - 6, start};
    // Few values (long jumps between them) or many (short steps).
    const int count = static_cast<int>(
        Uniform(rng, 0, 1) == 0 ? Uniform(rng, 2, 20) : Uniform(rng, 100, 300));
    for (int i = 0; i < count; ++i) {
      const auto& [lo, hi] = runs[Uniform(rng, 0, runs.size() - 1)];
      values.push_back(Uniform(rng, 0, 2) == 0 ? Uniform(rng, lo, hi)
                                               : Uniform(rng, start, at));
      values.push_back(Uniform(rng, 0, 1) == 0 ? lo - 1 : hi + 1);
    }
    std::sort(values.begin(), values.end());
    IntervalSet::SortedProbe probe(s);
    size_t wrong = 0;
    for (uint64_t v : values) wrong += probe.Contains(v) != s.Contains(v);
    REQUIRE(wrong == 0);
  });
}

TEST_CASE("IntervalSet edges of the range", "[clock]") {
  IntervalSet s;
  s.InsertRange(0, kMax);
  REQUIRE(s.Count() == kMax);  // 2^64 values saturate
  REQUIRE(s.intervals() == 1);
  REQUIRE(s.Contains(0));
  REQUIRE(s.Contains(kMax));
  s.EraseRange(5, 5);
  REQUIRE(s.DebugString() == "[0..4, 6..18446744073709551615]");
  REQUIRE(s.Count() == kMax);
  s.EraseRange(kMax, kMax);
  REQUIRE(s.Last() == kMax - 1);
  s.Insert(kMax);
  REQUIRE(s.intervals() == 2);
  s.EraseUpTo(kMax - 1);
  REQUIRE(s.DebugString() == "[18446744073709551615]");
  s.EraseUpTo(kMax);
  REQUIRE(s.empty());
  s.Insert(0);
  s.Insert(kMax);
  s.InsertRange(1, kMax - 1);
  REQUIRE(s.intervals() == 1);
  IntervalSet t = IntervalSet::Range(kMax, kMax);
  REQUIRE(IntervalSet::Difference(s, t).Last() == kMax - 1);
  REQUIRE(IntervalSet::Intersection(s, t) == t);
}

// ---------------------------------------------------------------------------
// Clock operations against the model.

TEST_CASE("Clock AddDot and Seen match the model", "[clock]") {
  ForEachSeedDots(60, [&](Rng& rng, const Pool& pool, const DotSet& target) {
    std::vector<Dot> order(target.begin(), target.end());
    std::shuffle(order.begin(), order.end(), rng);
    Clock c;
    DotSet model;
    for (size_t i = 0; i < order.size(); ++i) {
      c.AddDot(order[i]);
      model.insert(order[i]);
      REQUIRE(c.Seen(order[i]));
      if (i % 97 == 0) {
        REQUIRE(c.IsNormalized());
        // Probe around the dots, including neighbours and counter 0.
        for (int p = 0; p < 20; ++p) {
          const Dot& base = order[Uniform(rng, 0, i)];
          const uint64_t delta = Uniform(rng, 0, 4);
          Dot probe{base.actor, Uniform(rng, 0, 1) ? base.counter + delta
                                                   : base.counter - delta};
          const bool expected = probe.counter != 0 && model.count(probe) == 1;
          REQUIRE(c.Seen(probe) == expected);
        }
      }
    }
    CheckEquals(c, model);
    REQUIRE(!c.Seen(Dot{pool[0], 0}));
    // Adding seen dots and counter 0 changes nothing.
    Clock before = c;
    c.AddDot(Dot{pool[1], 0});
    for (size_t i = 0; i < order.size(); i += 7) c.AddDot(order[i]);
    REQUIRE(c == before);
    // MaxCounter and Actors.
    for (ActorId a : pool) {
      uint64_t max = 0;
      for (const Dot& d : model) {
        if (d.actor == a) max = std::max(max, d.counter);
      }
      REQUIRE(c.MaxCounter(a) == max);
    }
    std::set<ActorId> actors;
    for (const Dot& d : model) actors.insert(d.actor);
    REQUIRE(c.Actors() == std::vector<ActorId>(actors.begin(), actors.end()));
  });
}

TEST_CASE("Clock AddDots into a clock with dots matches AddDot one by one",
          "[clock]") {
  ForEachSeedDots(60, [&](Rng& rng, const Pool& pool, const DotSet& held) {
    Clock bulk = FromDots(rng, held);
    Clock single = bulk;
    // A batch that overlaps what is held, repeats dots, and includes 0.
    std::vector<Dot> batch;
    for (const Dot& d : Mutate(rng, held, pool)) batch.push_back(d);
    const size_t n = batch.size();
    for (size_t i = 0; i < n; i += 5) batch.push_back(batch[i]);
    batch.push_back(Dot{pool[0], 0});
    std::shuffle(batch.begin(), batch.end(), rng);
    bulk.AddDots(batch);
    for (const Dot& d : batch) single.AddDot(d);
    REQUIRE(bulk.IsNormalized());
    REQUIRE(bulk == single);
  });
}

// SplitSeen walks sorted dots with one IntervalSet::SortedProbe per actor
// (a window's bitmap and a run kept while the counters stay in them): it
// must agree with Seen dot by dot, for queries dense or sparse around the
// clock's dots, repeats and counter 0 included.
TEST_CASE("Clock SplitSeen agrees with Seen", "[clock]") {
  ForEachSeedDots(60, [&](Rng& rng, const Pool& pool, const DotSet& held) {
    const Clock c = FromDots(rng, held);
    std::vector<Dot> queries;
    for (const Dot& d : Mutate(rng, held, pool)) queries.push_back(d);
    // Neighbours of held dots (run and window edges), far jumps, 0.
    std::vector<Dot> near(held.begin(), held.end());
    for (size_t i = 0; i < near.size(); i += Uniform(rng, 1, 9)) {
      const uint64_t d = Uniform(rng, 0, 5000);
      queries.push_back(Dot{near[i].actor, near[i].counter + d});
      queries.push_back(Dot{near[i].actor, near[i].counter - d});
    }
    for (int i = 0; i < 30; ++i) {
      queries.push_back(Dot{pool[Uniform(rng, 0, pool.size() - 1)], rng()});
    }
    queries.push_back(Dot{pool[0], 0});
    std::sort(queries.begin(), queries.end());
    std::vector<Dot> seen, unseen, want_seen, want_unseen;
    c.SplitSeen(queries, &seen, &unseen);
    for (const Dot& d : queries)
      (c.Seen(d) ? want_seen : want_unseen).push_back(d);
    REQUIRE(seen == want_seen);
    REQUIRE(unseen == want_unseen);
  });
}

TEST_CASE("Clock Merge is a join", "[clock]") {
  ForEachSeedDots(60, [&](Rng& rng, const Pool& pool, const DotSet& ma) {
    const DotSet mb =
        Uniform(rng, 0, 1) ? Mutate(rng, ma, pool) : RandomDots(rng, pool);
    const DotSet mc = Mutate(rng, mb, pool);
    const Clock a = FromDots(rng, ma), b = FromDots(rng, mb),
                c = FromDots(rng, mc);
    CheckEquals(a, ma);

    Clock ab = a;
    ab.Merge(b);
    Clock ba = b;
    ba.Merge(a);
    CheckEquals(ab, Union(ma, mb));
    REQUIRE(ab == ba);  // commutative
    REQUIRE(ab.Descends(a));
    REQUIRE(ab.Descends(b));
    Clock aa = a;
    aa.Merge(a);
    REQUIRE(aa == a);  // idempotent
    aa.Merge(aa);      // self-merge
    REQUIRE(aa == a);
    Clock ab_c = ab;
    ab_c.Merge(c);
    Clock bc = b;
    bc.Merge(c);
    Clock a_bc = a;
    a_bc.Merge(bc);
    REQUIRE(ab_c == a_bc);  // associative
    CheckEquals(a_bc, Union(Union(ma, mb), mc));
    Clock empty;
    empty.Merge(a);
    REQUIRE(empty == a);
  });
}

TEST_CASE("Clock Descends matches inclusion", "[clock]") {
  ForEachSeedDots(80, [&](Rng& rng, const Pool& pool, const DotSet& ma) {
    DotSet mb;
    switch (Uniform(rng, 0, 2)) {
      case 0:  // subset
        for (const Dot& d : ma) {
          if (Uniform(rng, 0, 5) != 0) mb.insert(d);
        }
        break;
      case 1:
        mb = Mutate(rng, ma, pool);
        break;
      default:
        mb = RandomDots(rng, pool);
    }
    const Clock a = FromDots(rng, ma), b = FromDots(rng, mb);
    REQUIRE(a.Descends(b) ==
            std::includes(ma.begin(), ma.end(), mb.begin(), mb.end()));
    REQUIRE(b.Descends(a) ==
            std::includes(mb.begin(), mb.end(), ma.begin(), ma.end()));
    REQUIRE(a.Descends(a));
    REQUIRE(a.Descends(Clock()));
  });
}

TEST_CASE("Clock Intersection, Complement, Subtract match set algebra",
          "[clock]") {
  ForEachSeedDots(60, [&](Rng& rng, const Pool& pool, const DotSet& ma) {
    const DotSet mb =
        Uniform(rng, 0, 3) ? Mutate(rng, ma, pool) : RandomDots(rng, pool);
    const Clock a = FromDots(rng, ma), b = FromDots(rng, mb);

    const Clock i = Clock::Intersection(a, b);
    CheckEquals(i, Intersect(ma, mb));
    REQUIRE(i == Clock::Intersection(b, a));
    const Clock c = Clock::Complement(a, b);
    CheckEquals(c, Minus(ma, mb));
    Clock s = a;
    s.Subtract(b);
    REQUIRE(s == c);
    Clock self = a;
    self.Subtract(self);
    REQUIRE(self.empty());
    // (a \ b) ∪ (a ∩ b) == a.
    Clock rebuilt = c;
    rebuilt.Merge(i);
    REQUIRE(rebuilt == a);
    REQUIRE(Clock::Complement(a, Clock()) == a);
    REQUIRE(Clock::Intersection(a, Clock()).empty());
  });
}

TEST_CASE("Clock Subtract can shrink a base", "[clock]") {
  Clock c;
  for (int i = 0; i < 10; ++i) REQUIRE(c.Increment(7).ok());
  REQUIRE(c.vv().Get(7) == 10);
  Clock three;
  three.AddDot(Dot{7, 3});
  c.Subtract(three);
  REQUIRE(c.IsNormalized());
  REQUIRE(c.vv().Get(7) == 2);
  REQUIRE(c.cloud().Find(7) != nullptr);
  REQUIRE(c.cloud().Find(7)->DebugString() == "[4..10]");
  REQUIRE(c.DebugString() == "{7:2+[4..10]}");
  REQUIRE(!c.Seen(Dot{7, 3}));
  c.AddDot(Dot{7, 3});
  REQUIRE(c.DebugString() == "{7:10}");
  REQUIRE(c.cloud().empty());
}

TEST_CASE("Clock Increment never reuses a counter", "[clock]") {
  ForEachSeedDots(60, [&](Rng& rng, const Pool& pool, DotSet model) {
    Clock c = FromDots(rng, model);
    for (int step = 0; step < 200; ++step) {
      const ActorId actor = pool[Uniform(rng, 0, pool.size() - 1)];
      if (Uniform(rng, 0, 3) == 0) {
        const Dot d{actor, Uniform(rng, 1, 5000)};
        c.AddDot(d);
        model.insert(d);
        continue;
      }
      const uint64_t max = c.MaxCounter(actor);
      absl::StatusOr<Dot> d = c.Increment(actor);
      if (max == kMax) {
        REQUIRE(d.status().code() == absl::StatusCode::kResourceExhausted);
        continue;
      }
      REQUIRE(d.ok());
      REQUIRE(d->actor == actor);
      REQUIRE(d->counter == max + 1);
      REQUIRE(model.count(*d) == 0);  // never seen before
      model.insert(*d);
      REQUIRE(c.Seen(*d));
      REQUIRE(c.IsNormalized());
    }
    CheckEquals(c, model);
  });
}

TEST_CASE("Clock Increment at UINT64_MAX fails and changes nothing",
          "[clock]") {
  Clock c;
  c.AddDot(Dot{9, kMax - 1});
  absl::StatusOr<Dot> d = c.Increment(9);
  REQUIRE(d.ok());
  REQUIRE(d->counter == kMax);
  const Clock before = c;
  d = c.Increment(9);
  REQUIRE(d.status().code() == absl::StatusCode::kResourceExhausted);
  REQUIRE(c == before);
  // A lone dot at UINT64_MAX also exhausts the actor.
  Clock top;
  top.AddDot(Dot{9, kMax});
  REQUIRE(top.DotCount() == 1);
  REQUIRE(top.Seen(Dot{9, kMax}));
  REQUIRE(!top.Seen(Dot{9, 1}));
  REQUIRE(top.Increment(9).status().code() ==
          absl::StatusCode::kResourceExhausted);
  REQUIRE(top.Increment(10).ok());
}

TEST_CASE("DotCloud basics", "[clock]") {
  DotCloud d;
  REQUIRE(d.empty());
  d.Insert(Dot{2, 5});
  d.InsertRange(1, 7, 9);
  d.Insert(Dot{1, 10});
  REQUIRE(d.size() == 2);
  REQUIRE(d.DebugString() == "{1:[7..10], 2:[5]}");
  REQUIRE(d.Contains(Dot{1, 8}));
  REQUIRE(!d.Contains(Dot{1, 6}));
  REQUIRE(!d.Contains(Dot{3, 8}));
  REQUIRE(d.DotCount() == 5);
  REQUIRE(d.Find(3) == nullptr);
  d.EraseActor(1);
  d.EraseActor(1);
  REQUIRE(d.DebugString() == "{2:[5]}");
  DotCloud e;
  e.Insert(Dot{2, 5});
  REQUIRE(d == e);
}

TEST_CASE("Clock operations on bases only", "[clock]") {
  Clock a, b;
  for (int i = 0; i < 10; ++i) (void)a.Increment(1);
  for (int i = 0; i < 5; ++i) (void)a.Increment(2);
  for (int i = 0; i < 4; ++i) (void)b.Increment(1);
  for (int i = 0; i < 7; ++i) (void)b.Increment(3);
  REQUIRE(Clock::Intersection(a, b).DebugString() == "{1:4}");
  REQUIRE(Clock::Complement(a, b).DebugString() == "{1:0+[5..10], 2:5}");
  REQUIRE(Clock::Complement(b, a).DebugString() == "{3:7}");
  Clock m = a;
  m.Merge(b);
  REQUIRE(m.DebugString() == "{1:10, 2:5, 3:7}");
  REQUIRE(m.cloud().empty());
  REQUIRE(m.Descends(a));
  REQUIRE(!a.Descends(m));
  int runs = 0;
  m.ForEachInterval([&](ActorId actor, uint64_t lo, uint64_t hi) {
    REQUIRE(lo == 1);
    REQUIRE(hi == m.vv().Get(actor));
    ++runs;
  });
  REQUIRE(runs == 3);
}

TEST_CASE("Clock debug strings", "[clock]") {
  Clock c;
  c.AddDot(Dot{0xab, 1});
  c.AddDot(Dot{0xab, 2});
  c.AddDot(Dot{0xcd, 3});
  c.AddDot(Dot{0xcd, 5});
  c.AddDot(Dot{0xcd, 6});
  REQUIRE(c.DebugString() == "{ab:2, cd:0+[3, 5..6]}");
  REQUIRE(Clock().DebugString() == "{}");
}

// ---------------------------------------------------------------------------
// Encoding.

TEST_CASE("Clock encoding round-trips random clocks", "[clock]") {
  ForEachSeedDots(120, [&](Rng& rng, const Pool&, const DotSet& model) {
    const Clock c = FromDots(rng, model);
    std::string bytes = "prefix";
    c.EncodeTo(&bytes);  // appends
    REQUIRE(bytes.substr(0, 6) == "prefix");
    const std::string enc = bytes.substr(6);
    REQUIRE(enc == c.Encode());
    absl::StatusOr<Clock> d = Clock::Decode(enc);
    REQUIRE(d.ok());
    REQUIRE(*d == c);
    CheckEquals(*d, model);
    // Never larger than coding every run explicitly (bitmaps are only used
    // when smaller): bound by 2 x 10 bytes per run + actor headers.
    size_t runs = 0;
    c.ForEachInterval([&](ActorId, uint64_t, uint64_t) { ++runs; });
    REQUIRE(enc.size() <= 2 + 30 * c.Actors().size() + 20 * runs);
  });
}

// Scattered dots at a given density; exercises bitmaps, bitmap merging and
// runs crossing window boundaries, optionally ending at UINT64_MAX.
Clock ScatteredClock(Rng& rng, ActorId actor, uint64_t first, uint64_t span,
                     uint64_t one_in) {
  Clock c;
  for (uint64_t k = 0; k < span; ++k) {
    if (Uniform(rng, 1, one_in) == 1) c.AddDot(Dot{actor, first + k});
  }
  return c;
}

TEST_CASE("Clock encoding round-trips large shapes", "[clock]") {
  Rng rng(42);
  std::vector<Clock> clocks;
  // Gap then a million.
  {
    Clock tail;  // base 1000006 minus dot 6
    for (int i = 0; i < 1000006; ++i) REQUIRE(tail.Increment(11).ok());
    Clock six;
    six.AddDot(Dot{11, 6});
    tail.Subtract(six);
    REQUIRE(tail.vv().Get(11) == 5);
    clocks.push_back(tail);
  }
  clocks.push_back(ScatteredClock(rng, 12, 1, 200000, 10));
  clocks.push_back(ScatteredClock(rng, 13, 1, 50000, 3));
  clocks.push_back(ScatteredClock(rng, 14, 1, 50000, 40));
  clocks.push_back(ScatteredClock(rng, 15, kMax - 40000, 40001, 4));
  clocks.push_back(ScatteredClock(rng, 16, kMax - 40000, 40001, 1));
  // Dense patches separated by long runs and long gaps.
  {
    Clock c;
    uint64_t at = 3;
    for (int block = 0; block < 30; ++block) {
      Clock patch = ScatteredClock(rng, 17, at, 3000, 2);
      c.Merge(patch);
      at += 3000 + Uniform(rng, 1, 20000);
      const uint64_t len = Uniform(rng, 1, 10000);
      for (uint64_t k = 0; k < len; ++k) c.AddDot(Dot{17, at + k});
      at += len + Uniform(rng, 2, 100);
    }
    clocks.push_back(c);
  }
  Clock all;
  for (const Clock& c : clocks) all.Merge(c);
  clocks.push_back(all);
  for (size_t i = 0; i < clocks.size(); ++i) {
    CAPTURE(i);
    const std::string enc = clocks[i].Encode();
    absl::StatusOr<Clock> d = Clock::Decode(enc);
    REQUIRE(d.ok());
    REQUIRE(d->IsNormalized());
    REQUIRE(*d == clocks[i]);
  }
}

TEST_CASE("Clock encoded size targets", "[clock]") {
  Rng rng(7);
  // Three random actors; one with a single gap then 1,000,000 events.
  Clock c;
  const ActorId a = rng(), b = rng(), x = rng();
  for (uint64_t k = 1; k <= 5; ++k) c.AddDot(Dot{a, k});
  // Add the run [7, 1000006] via a clock whose base covers it, minus 1..6.
  Clock run;
  for (int i = 0; i < 1000006; ++i) REQUIRE(run.Increment(a).ok());
  Clock first_six;
  for (uint64_t k = 1; k <= 6; ++k) first_six.AddDot(Dot{a, k});
  run.Subtract(first_six);
  c.Merge(run);
  for (int i = 0; i < 3; ++i) REQUIRE(c.Increment(b).ok());
  for (int i = 0; i < 100; ++i) REQUIRE(c.Increment(x).ok());
  REQUIRE(c.vv().Get(a) == 5);
  REQUIRE(c.cloud().Find(a)->DebugString() == "[7..1000006]");
  const std::string gap_then_1m = c.Encode();
  INFO("gap_then_1M bytes: " << gap_then_1m.size());
  REQUIRE(gap_then_1m.size() <= 48);

  // 100,000 distinct counters drawn uniformly from 1..1,000,000.
  Clock s;
  std::set<uint64_t> picked;
  while (picked.size() < 100000) picked.insert(Uniform(rng, 1, 1000000));
  for (uint64_t k : picked) s.AddDot(Dot{a, k});
  REQUIRE(s.DotCount() == 100000);
  const std::string scattered = s.Encode();
  INFO("scattered bytes: " << scattered.size());
  REQUIRE(scattered.size() <= 137500);
  absl::StatusOr<Clock> d = Clock::Decode(scattered);
  REQUIRE(d.ok());
  REQUIRE(*d == s);
}

TEST_CASE("Clock encoding of empty and tiny clocks", "[clock]") {
  REQUIRE(Clock().Encode() == std::string("\x01\x00", 2));
  absl::StatusOr<Clock> d = Clock::Decode(std::string("\x01\x00", 2));
  REQUIRE(d.ok());
  REQUIRE(d->empty());
  Clock one;
  one.AddDot(Dot{0x0102030405060708, 1});
  REQUIRE(Hex(one.Encode()) ==
          "0101"
          "0102030405060708"
          "01"
          "00");
  Clock cloud_only;
  cloud_only.AddDot(Dot{1, 3});
  // base 0, one RUNS segment with one run: gap 3 - 2 = 1, length-1 = 0.
  REQUIRE(Hex(cloud_only.Encode()) ==
          "0101"
          "0000000000000001"
          "00"
          "01"
          "02"
          "01"
          "00");
}

TEST_CASE("Clock decoding rejects malformed input", "[clock]") {
  auto code = [](const std::string& hex) {
    std::string bytes;
    for (size_t i = 0; i + 1 < hex.size(); i += 2) {
      bytes.push_back(
          static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    }
    return Clock::Decode(bytes).status().code();
  };
  using absl::StatusCode;
  const std::string actor1 = "0000000000000001";
  const std::string actor2 = "0000000000000002";
  REQUIRE(code("") == StatusCode::kDataLoss);
  REQUIRE(code("02"
               "00") == StatusCode::kInvalidArgument);  // version
  REQUIRE(code("0100"
               "00") == StatusCode::kDataLoss);                      // trailing
  REQUIRE(code("0101" + actor1 + "0000") == StatusCode::kDataLoss);  // empty
  REQUIRE(code("0102" + actor2 + "0100" + actor1 + "0100") ==
          StatusCode::kDataLoss);  // actors descending
  REQUIRE(code("0102" + actor1 + "0100" + actor1 + "0100") ==
          StatusCode::kDataLoss);  // duplicate actor
  REQUIRE(code("0101" + actor1 +
               "0001"
               "00") == StatusCode::kDataLoss);  // zero-length RUNS segment
  REQUIRE(code("0101" + actor1 +
               "0001"
               "01"
               "00") == StatusCode::kDataLoss);  // zero-length BITMAP segment
  REQUIRE(code("0101" + actor1 +
               "0001"
               "03"
               "00"
               "00") == StatusCode::kDataLoss);  // bitmap whose bit 0 is clear
  REQUIRE(code("0101" + actor1 +
               "0001"
               "05"
               "00"
               "01"
               "00") ==
          StatusCode::kDataLoss);  // bitmap ending with a zero byte
  REQUIRE(code("0101" + actor1 +
               "0001"
               "03"
               "00") == StatusCode::kDataLoss);  // bitmap missing its bytes
  REQUIRE(code("0101" + actor1 +
               "0001"
               "02"
               "00") == StatusCode::kDataLoss);  // run missing its length
  REQUIRE(code("0101" + actor1 +
               "0002"
               "02"
               "00"
               "00") ==
          StatusCode::kDataLoss);  // segment count larger than segments
  REQUIRE(code("0103" + actor1 + "0100") ==
          StatusCode::kDataLoss);  // actor count larger than actors
  REQUIRE(code("01ffffffffffffffffff01") ==
          StatusCode::kDataLoss);  // absurd actor count
  REQUIRE(code("0101" + actor1 + "ffffffffffffffffff02") ==
          StatusCode::kDataLoss);  // over-long varint base
  // The smallest well-formed bitmap decodes: base 0, cursor 2, counter 2.
  REQUIRE(code("0101" + actor1 +
               "0001"
               "03"
               "00"
               "01") == StatusCode::kOk);
}

TEST_CASE("Clock decoding validates counter overflow", "[clock]") {
  // base UINT64_MAX - 1 cannot have a cloud.
  std::string enc;
  enc.push_back(1);
  enc.push_back(1);
  enc.append(7, '\0');
  enc.push_back(1);                                        // actor 1
  enc.append("\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01");  // base MAX - 1
  enc.push_back(1);                                        // 1 segment
  enc.push_back(2);                                        // RUNS, 1 run
  enc.push_back(0);
  enc.push_back(0);
  REQUIRE(Clock::Decode(enc).status().code() == absl::StatusCode::kDataLoss);

  // A clock whose cloud reaches UINT64_MAX round-trips; one more run past it
  // is an error.
  Clock c;
  c.AddDot(Dot{1, kMax - 5000});  // far apart: one RUNS segment, two runs
  c.AddDot(Dot{1, kMax});
  std::string good = c.Encode();
  REQUIRE(Clock::Decode(good).ok());
  REQUIRE(*Clock::Decode(good) == c);
  // Layout: 01 01 actor(8) base(1: 00) nsegs(01) header(04: 2 runs) ...
  // Growing the run count to 3 and appending a run must fail (overflow), not
  // wrap around.
  std::string bad = good;
  REQUIRE(static_cast<uint8_t>(bad[12]) == 4);
  bad[12] = 6;
  bad.push_back(0);
  bad.push_back(0);
  REQUIRE(Clock::Decode(bad).status().code() == absl::StatusCode::kDataLoss);
  // A bitmap that would reach past UINT64_MAX: the same two dots close
  // together are bitmap-coded: 01 01 actor(8) base nsegs, then at offset 12
  // the header 03 (BITMAP, one byte), the gap and the byte 0x21.
  Clock close;
  close.AddDot(Dot{1, kMax - 5});
  close.AddDot(Dot{1, kMax});
  std::string bitmap = close.Encode();
  REQUIRE(static_cast<uint8_t>(bitmap[12]) == 3);
  REQUIRE(*Clock::Decode(bitmap) == close);
  bitmap[12] = 5;  // two bytes
  bitmap.push_back(1);
  REQUIRE(Clock::Decode(bitmap).status().code() == absl::StatusCode::kDataLoss);
  // A run whose length runs past UINT64_MAX.
  std::string long_run = good;
  long_run.back() = 1;  // the last run's length-1 becomes 1
  REQUIRE(Clock::Decode(long_run).status().code() ==
          absl::StatusCode::kDataLoss);
}

TEST_CASE("Clock decoding never accepts truncations", "[clock]") {
  ForEachSeedDots(40, [&](Rng& rng, const Pool&, const DotSet& dots) {
    const Clock c = FromDots(rng, dots);
    const std::string enc = c.Encode();
    // Every proper prefix; for long encodings every prefix near the start
    // and a sample of the rest (each decode is linear).
    for (size_t len = 0; len < enc.size(); ++len) {
      if (len > 64 && enc.size() > 2000 && Uniform(rng, 0, 15) != 0) continue;
      CAPTURE(len);
      absl::StatusOr<Clock> d = Clock::Decode(enc.substr(0, len));
      REQUIRE(!d.ok());
    }
    std::string longer = enc;
    longer.push_back('\0');
    REQUIRE(!Clock::Decode(longer).ok());
  });
}

TEST_CASE("Clock decoding of bit flips errors or yields a valid clock",
          "[clock]") {
  size_t decoded = 0, total = 0;
  ForEachSeedDots(40, [&](Rng& rng, const Pool&, const DotSet& dots) {
    const Clock c = FromDots(rng, dots);
    const std::string enc = c.Encode();
    const size_t flips = std::min<size_t>(enc.size() * 8, 600);
    for (size_t f = 0; f < flips; ++f) {
      const size_t bit =
          flips == enc.size() * 8 ? f : Uniform(rng, 0, enc.size() * 8 - 1);
      std::string mutated = enc;
      mutated[bit / 8] = static_cast<char>(mutated[bit / 8] ^ (1 << (bit % 8)));
      CAPTURE(bit);
      decoded += DecodesToValidClockOrError(mutated);
      ++total;
    }
  });
  // Sanity: the check above ran on both outcomes.
  REQUIRE(total > 0);
  REQUIRE(decoded < total);
}

TEST_CASE("Clock decoding of random bytes never crashes", "[clock]") {
  size_t decoded = 0;
  size_t total = 0;
  ForEachSeed(40, [&](Rng& rng) {
    for (int i = 0; i < 200; ++i) {
      std::string bytes = ::bigset::testing::AdversarialBytes(rng, 64);
      if (Uniform(rng, 0, 1) == 0 && !bytes.empty()) bytes[0] = 1;  // version
      if (bytes.empty() || bytes[0] != 1) {
        REQUIRE(!Clock::Decode(bytes).ok());
      }
      decoded += DecodesToValidClockOrError(bytes);
      ++total;
    }
  });
  // Almost everything is rejected; "\x01\x00" (the empty clock) and few
  // others decode.
  REQUIRE(decoded * 20 < total);
}

}  // namespace
}  // namespace bigset::testing
