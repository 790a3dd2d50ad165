// Clock benchmarks: encoded sizes of the two shapes the design calls out,
// and ns per operation of the clock's hot paths.
//
// BM_ClockEncodedSize/* and BM_ClockEncode/* time the encoding and report
// the encoded size in the "bytes" counter.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bigset/core/clock.h"
#include "bigset/core/dot.h"

namespace bigset {
namespace {

using Rng = std::mt19937_64;

constexpr ActorId kActor = 0x9e3779b97f4a7c15;

// Three random actors; one has base 5 and a cloud [7, 1000006] (one gap,
// then a million contiguous events), the others small bases.
Clock GapThenMillion() {
  Rng rng(1);
  Clock c;
  const ActorId a = rng(), b = rng(), x = rng();
  Clock run;
  for (int i = 0; i < 1000006; ++i) (void)run.Increment(a);
  Clock six;
  six.AddDot(Dot{a, 6});
  run.Subtract(six);  // {a:5 + [7..1000006]}
  c.Merge(run);
  for (int i = 0; i < 3; ++i) (void)c.Increment(b);
  for (int i = 0; i < 100; ++i) (void)c.Increment(x);
  return c;
}

// `n` distinct counters of one actor drawn uniformly from [1, range].
Clock Scattered(uint64_t seed, size_t n, uint64_t range) {
  Rng rng(seed);
  std::uniform_int_distribution<uint64_t> dist(1, range);
  std::set<uint64_t> picked;
  while (picked.size() < n) picked.insert(dist(rng));
  Clock c;
  for (uint64_t k : picked) c.AddDot(Dot{kActor, k});
  return c;
}

const Clock& GapClock() {
  static const Clock* c = new Clock(GapThenMillion());
  return *c;
}
const Clock& Scattered100k() {
  static const Clock* c = new Clock(Scattered(2, 100000, 1000000));
  return *c;
}
const Clock& Scattered10kA() {
  static const Clock* c = new Clock(Scattered(3, 10000, 100000));
  return *c;
}
const Clock& Scattered10kB() {
  static const Clock* c = new Clock(Scattered(4, 10000, 100000));
  return *c;
}

// Benchmarks take the clock through its accessor so that building it (some
// take a fraction of a second) happens only when the benchmark runs.
using ClockFn = const Clock& (*)();

// Encoding time, with the encoded size in the "bytes" counter.
void Encode(benchmark::State& state, ClockFn clock_fn) {
  const Clock* clock = &clock_fn();
  std::string out;
  for (auto _ : state) {
    out.clear();
    clock->EncodeTo(&out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(out.size()));
  state.counters["bytes"] = static_cast<double>(out.size());
}

void Decode(benchmark::State& state, ClockFn clock_fn) {
  const Clock* clock = &clock_fn();
  const std::string enc = clock->Encode();
  for (auto _ : state) {
    absl::StatusOr<Clock> c = Clock::Decode(enc);
    benchmark::DoNotOptimize(c.ok());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(enc.size()));
}

// Seen over a clock with a large base and a scattered cloud: `cloud_share`
// percent of the probes land above the base (a btree lookup), the rest in
// the base (binary search over the actors only).
void BM_ClockSeen(benchmark::State& state) {
  const int cloud_share = static_cast<int>(state.range(0));
  Clock c = GapClock();
  Clock scattered = Scattered(5, 10000, 100000);
  Clock shifted;
  scattered.ForEachDot([&](Dot d) {
    shifted.AddDot(Dot{kActor, d.counter + 2000000});
  });
  for (int i = 0; i < 2000000; ++i) (void)c.Increment(kActor);
  c.Merge(shifted);
  Rng rng(6);
  std::vector<Dot> probes(4096);
  for (Dot& p : probes) {
    const bool in_cloud = static_cast<int>(rng() % 100) < cloud_share;
    p = Dot{kActor,
            in_cloud ? 2000000 + 1 + rng() % 100000 : 1 + rng() % 2000000};
  }
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(c.Seen(probes[i]));
    i = (i + 1) & 4095;
  }
}
BENCHMARK(BM_ClockSeen)->Arg(0)->Arg(50)->Arg(100)->ArgName("cloud_pct");

// AddDot of scattered dots above the base (each lands in the cloud).
void BM_ClockAddDot(benchmark::State& state) {
  constexpr size_t kDots = 1 << 16;
  Rng rng(7);
  std::vector<Dot> dots(kDots);
  for (Dot& d : dots) d = Dot{kActor, 1000 + rng() % 1000000};
  Clock base;
  for (int i = 0; i < 500; ++i) (void)base.Increment(kActor);
  Clock c = base;
  size_t i = 0;
  for (auto _ : state) {
    c.AddDot(dots[i]);
    if (++i == kDots) {
      state.PauseTiming();
      c = base;
      i = 0;
      state.ResumeTiming();
    }
  }
}
BENCHMARK(BM_ClockAddDot);

// The write path: a new event of the local actor.
void BM_ClockIncrement(benchmark::State& state) {
  Clock c = Scattered10kA();
  for (auto _ : state) {
    absl::StatusOr<Dot> d = c.Increment(kActor + 1);
    benchmark::DoNotOptimize(d.ok());
  }
}
BENCHMARK(BM_ClockIncrement);

// Copy-then-merge; BM_ClockCopy isolates the copy.
void BM_ClockMerge(benchmark::State& state) {
  const Clock& a = Scattered10kA();
  const Clock& b = Scattered10kB();
  for (auto _ : state) {
    Clock c = a;
    c.Merge(b);
    benchmark::DoNotOptimize(c.empty());
  }
}
BENCHMARK(BM_ClockMerge)->Name("BM_ClockMerge/scattered_10k");

void BM_ClockCopy(benchmark::State& state) {
  const Clock& a = Scattered10kA();
  for (auto _ : state) {
    Clock c = a;
    benchmark::DoNotOptimize(c.empty());
  }
}
BENCHMARK(BM_ClockCopy)->Name("BM_ClockCopy/scattered_10k");

void BM_ClockDescends(benchmark::State& state) {
  Clock a = Scattered10kA();
  a.Merge(Scattered10kB());
  const Clock& b = Scattered10kB();
  for (auto _ : state) benchmark::DoNotOptimize(a.Descends(b));
}
BENCHMARK(BM_ClockDescends)->Name("BM_ClockDescends/scattered_10k");

void BM_ClockSubtract(benchmark::State& state) {
  const Clock& a = Scattered10kA();
  const Clock& b = Scattered10kB();
  for (auto _ : state) {
    Clock c = Clock::Complement(a, b);
    benchmark::DoNotOptimize(c.empty());
  }
}
BENCHMARK(BM_ClockSubtract)->Name("BM_ClockComplement/scattered_10k");

const int kClockRegistered = [] {
  // One encode benchmark; the two shapes the size targets name keep their
  // BM_ClockEncodedSize names (the figures are read by them).
  benchmark::RegisterBenchmark("BM_ClockEncodedSize/gap_then_1M", Encode,
                               &GapClock);
  benchmark::RegisterBenchmark("BM_ClockEncodedSize/scattered_100k_of_1M",
                               Encode, &Scattered100k);
  benchmark::RegisterBenchmark("BM_ClockEncode/scattered_10k", Encode,
                               &Scattered10kA);
  benchmark::RegisterBenchmark("BM_ClockDecode/gap_then_1M", Decode, &GapClock);
  benchmark::RegisterBenchmark("BM_ClockDecode/scattered_10k", Decode,
                               &Scattered10kA);
  benchmark::RegisterBenchmark("BM_ClockDecode/scattered_100k_of_1M", Decode,
                               &Scattered100k);
  return 0;
}();

}  // namespace
}  // namespace bigset
