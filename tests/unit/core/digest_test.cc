// The anti-entropy digests (lib/core/digest.h): a dot's digest is its run's,
// runs add up, a clock's digest is the sum of its dots' whatever its shape,
// edge counters included.

#include "core/digest.h"

#include <catch2/catch.hpp>
#include <cstdint>

#include "test_util.h"

namespace bigset::testing {
namespace {

constexpr uint64_t kPrime = (uint64_t{1} << 61) - 1;

uint64_t Add(uint64_t a, uint64_t b) { return digest::AddClockDigests(a, b); }

TEST_CASE("digest: a dot's digest is its one-counter run's") {
  testing::Rng rng(11);
  const uint64_t edges[] = {
      1,     2,     255,        256,        257,
      65535, 65536, 1ull << 32, UINT64_MAX, UINT64_MAX - 1};
  for (uint64_t c : edges) {
    CAPTURE(c);
    CHECK(digest::DotDigest(Dot{7, c}) == digest::RunDigest(7, c, c));
    CHECK(digest::DotDigest(Dot{7, c}) < kPrime);
  }
  for (int i = 0; i < 2000; ++i) {
    const Dot d{rng(), testing::Uniform(rng, 1, UINT64_MAX)};
    CAPTURE(d.actor, d.counter);
    CHECK(digest::DotDigest(d) ==
          digest::RunDigest(d.actor, d.counter, d.counter));
  }
}

TEST_CASE("digest: runs add up, and a clock is the sum of its dots") {
  testing::Rng rng(12);
  for (int i = 0; i < 300; ++i) {
    const uint64_t lo = testing::Uniform(rng, 1, 1u << 20);
    const uint64_t hi = lo + testing::Uniform(rng, 0, 300);
    const uint64_t mid = testing::Uniform(rng, lo, hi);
    CAPTURE(lo, mid, hi);
    uint64_t sum = 0;
    for (uint64_t c = lo; c <= hi; ++c)
      sum = Add(sum, digest::DotDigest({5, c}));
    CHECK(digest::RunDigest(5, lo, hi) == sum);
    if (mid < hi) {
      CHECK(Add(digest::RunDigest(5, lo, mid),
                digest::RunDigest(5, mid + 1, hi)) == sum);
    }
  }
  // The top of the counter range.
  CHECK(Add(digest::RunDigest(9, UINT64_MAX - 3, UINT64_MAX - 1),
            digest::DotDigest({9, UINT64_MAX})) ==
        digest::RunDigest(9, UINT64_MAX - 3, UINT64_MAX));
  // A clock of scattered dots and runs of two actors.
  Clock clock;
  uint64_t want = 0;
  for (int i = 0; i < 500; ++i) {
    const Dot d{testing::Uniform(rng, 1, 2), testing::Uniform(rng, 1, 3000)};
    if (clock.Seen(d)) continue;
    clock.AddDot(d);
    want = Add(want, digest::DotDigest(d));
  }
  CHECK(digest::ClockDigest(clock) == want);
}

// ClockDigest sums the runs with shared factors taken out and each power
// reached from the last: checked against RunDigest run by run.
TEST_CASE("digest: a clock's digest is the sum of its runs' digests") {
  testing::Rng rng(13);
  for (int i = 0; i < 200; ++i) {
    CAPTURE(i);
    VersionVector vv;
    Clock cloud;
    const int actors = static_cast<int>(testing::Uniform(rng, 0, 6));
    for (int a = 0; a < actors; ++a) {
      const ActorId actor = testing::Uniform(rng, 0, 3) == 0
                                ? rng()
                                : testing::Uniform(rng, 1, 20);
      const int shape = static_cast<int>(testing::Uniform(rng, 0, 3));
      uint64_t base = 0;
      if (shape == 1) base = testing::Uniform(rng, 1, 1000);
      if (shape == 2) base = testing::Uniform(rng, 1, UINT64_MAX / 2);
      if (base > 0) vv.Set(actor, base);
      const uint64_t from = shape == 3 ? UINT64_MAX - 300 : base + 1;
      const int dots = static_cast<int>(testing::Uniform(rng, 0, 400));
      for (int k = 0; k < dots; ++k) {
        const uint64_t span = testing::Uniform(rng, 0, 3) == 0 ? 1 << 20 : 600;
        const uint64_t off = testing::Uniform(rng, 0, span);
        cloud.AddDot(Dot{actor, from + off < from ? UINT64_MAX : from + off});
      }
      if (shape == 3) cloud.AddDot(Dot{actor, UINT64_MAX});
    }
    absl::StatusOr<Clock> clock = Clock::FromParts(vv, {});
    REQUIRE(clock.ok());
    clock->Merge(cloud);
    uint64_t want = 0;
    clock->ForEachInterval([&](ActorId actor, uint64_t lo, uint64_t hi) {
      want = Add(want, digest::RunDigest(actor, lo, hi));
    });
    CHECK(digest::ClockDigest(*clock) == want);
  }
  CHECK(digest::ClockDigest(Clock()) == 0);
}

}  // namespace
}  // namespace bigset::testing
