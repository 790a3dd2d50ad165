// Count benchmarks (docs/BENCHMARKS.md, "Counts"):
//   - BM_Count/bigset/N: Count of a set of N elements with counts kept
//     (ReplicaOptions::keep_counts, the default): the stored count, constant
//     time. Issue "Counts" reads BM_Count/bigset/10000000 over
//     BM_Count/bigset/1000.
//   - BM_Count/scan/N: the same set counted by a scan (keep_counts off), the
//     cost the kept count removes.
// The sets are loaded outside the timed region (1,000 adds per update).

#include <benchmark/benchmark.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "bigset/replica/replica.h"

namespace bigset::bench {
namespace {

std::unique_ptr<BigsetDb> Load(uint64_t n, bool keep_counts) {
  ReplicaOptions o;
  o.keep_counts = keep_counts;
  auto db = OpenBigset(o);
  Rng rng(n);
  std::vector<UpdateOp> ops;
  for (uint64_t i = 0; i < n; ++i) {
    ops.push_back(UpdateOp::Add(RandomElement(rng)));
    if (ops.size() == 1000 || i + 1 == n) {
      Check(db->replica->Update(kSet, ops).status());
      ops.clear();
    }
  }
  return db;
}

void CountKept(benchmark::State& state, uint64_t n) {
  // One set per size for the whole run: loading 10,000,000 takes a while.
  static std::map<uint64_t, std::unique_ptr<BigsetDb>>* dbs =
      new std::map<uint64_t, std::unique_ptr<BigsetDb>>();
  std::unique_ptr<BigsetDb>& db = (*dbs)[n];
  if (db == nullptr) db = Load(n, true);
  uint64_t count = 0;
  for (auto _ : state) {
    absl::StatusOr<uint64_t> c = db->replica->Count(kSet);
    Check(c.status());
    count = *c;
    benchmark::DoNotOptimize(count);
  }
  state.counters["count"] = static_cast<double>(count);
  state.counters["count_scans"] =
      static_cast<double>(db->replica->stats().count_scans);
}

void CountScan(benchmark::State& state, uint64_t n) {
  auto db = Load(n, false);
  uint64_t count = 0;
  for (auto _ : state) {
    absl::StatusOr<uint64_t> c = db->replica->Count(kSet);
    Check(c.status());
    count = *c;
  }
  state.counters["count"] = static_cast<double>(count);
}

const int kCountRegistered = [] {
  // The size is bound, not an Arg, so that the names are exactly
  // BM_Count/bigset/<n> (an Arg would append "/<n>" again).
  for (uint64_t n : {1000, 1000000, 10000000}) {
    benchmark::RegisterBenchmark(
        ("BM_Count/bigset/" + std::to_string(n)).c_str(), CountKept, n)
        ->Unit(benchmark::kMicrosecond);
  }
  for (uint64_t n : {1000, 1000000}) {
    benchmark::RegisterBenchmark(("BM_Count/scan/" + std::to_string(n)).c_str(),
                                 CountScan, n)
        ->Unit(benchmark::kMicrosecond);
  }
  return 0;
}();

}  // namespace
}  // namespace bigset::bench
