// Set algebra in process (docs/BENCHMARKS.md, "Set algebra"):
//   - BM_SinterCard/inprocess/N: SINTERCARD of two sets of N elements that
//     share half of them, as bigsetd runs it (SetMerge, pages of 1,000)
//     over one replica's range reads, without the cluster. items/s counts
//     the elements of both inputs; rss_growth_kb is how much the process's
//     anonymous resident memory grew over the first merge (the merge's
//     own memory: a page per set).
//   - BM_SinterCard/small_huge/N: a set of 100 elements against one of N:
//     the merge seeks in the large set, so its cost follows the small one.
// The sets are loaded outside the timed region.

#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "bench_util.h"
#include "bigset/replica/replica.h"
#include "set_merge.h"

namespace bigset::bench {
namespace {

std::string Element(uint64_t i) { return absl::StrFormat("e%09d", i); }

void Load(Replica& replica, const std::string& set, uint64_t from, uint64_t to,
          uint64_t step) {
  std::vector<UpdateOp> ops;
  for (uint64_t i = from; i < to; i += step) {
    ops.push_back(UpdateOp::Add(Element(i)));
    if (ops.size() == 1000) {
      Check(replica.Update(set, ops).status());
      ops.clear();
    }
  }
  if (!ops.empty()) Check(replica.Update(set, ops).status());
}

// Runs one SINTERCARD of `a` and `b` to its end; returns the count.
uint64_t SinterCard(Replica& replica, const std::string& a,
                    const std::string& b, size_t* fetches) {
  uint64_t count = 0;
  bool done = false;
  auto merge = server::SetMerge::Start(
      server::SetOp::kIntersection, {a, b}, {1000, 1000},
      [&replica](const std::string& set, RangeQuery q,
                 std::function<void(absl::StatusOr<RangeResult>)> cb) {
        cb(replica.Range(set, q));
      },
      [&count](server::SetMerge& m, std::vector<std::string> chunk) {
        count += chunk.size();
        m.Resume();
      },
      [&done](absl::Status s) {
        Check(s);
        done = true;
      });
  if (!done) std::abort();
  *fetches = merge->fetches();
  return count;
}

void BothLarge(benchmark::State& state, uint64_t n) {
  auto db = OpenBigset();
  Load(*db->replica, "a", 0, n, 1);
  Load(*db->replica, "b", n / 2, n + n / 2, 1);
  const uint64_t before = AnonResidentBytes() / 1024;
  uint64_t peak = before;
  uint64_t count = 0;
  size_t fetches = 0;
  for (auto _ : state) {
    count = SinterCard(*db->replica, "a", "b", &fetches);
    peak = std::max(peak, AnonResidentBytes() / 1024);
  }
  if (count != n - n / 2) std::abort();
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * 2 * n));
  state.counters["count"] = static_cast<double>(count);
  state.counters["range_reads"] = static_cast<double>(fetches);
  state.counters["rss_growth_kb"] = static_cast<double>(peak - before);
}

void SmallHuge(benchmark::State& state, uint64_t n) {
  auto db = OpenBigset();
  Load(*db->replica, "huge", 0, n, 1);
  Load(*db->replica, "small", 0, n, n / 100);
  uint64_t count = 0;
  size_t fetches = 0;
  for (auto _ : state) {
    count = SinterCard(*db->replica, "small", "huge", &fetches);
  }
  if (count != 100) std::abort();
  state.counters["count"] = static_cast<double>(count);
  state.counters["range_reads"] = static_cast<double>(fetches);
}

int Register() {
  for (uint64_t n : {100'000, 1'000'000}) {
    benchmark::RegisterBenchmark(
        ("BM_SinterCard/inprocess/" + std::to_string(n)).c_str(), BothLarge, n)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(
        ("BM_SinterCard/small_huge/" + std::to_string(n)).c_str(), SmallHuge, n)
        ->Unit(benchmark::kMillisecond);
  }
  return 0;
}

const int kAlgebraRegistered = Register();

}  // namespace
}  // namespace bigset::bench
