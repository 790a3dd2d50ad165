// BM_HandOff/1000000: elements per second to hand a 1,000,000-element set
// from one node to another in the simulator (zero latency, stores on disk):
// node 1 holds the only replica of the only partition, a ring that puts it
// on a new node 2 is installed, and the clock runs until node 2 serves the
// partition (every set sent, acknowledged and announced). Compared with
// BM_FullRead/bigset/1000000 (scripts/bench_ratios.py).
//
// Counters: peak_rss_growth_mb, the growth of the process's resident memory
// during the hand-off (both nodes run in this process; their stores are on
// disk), against chunk_mb, the largest chunk a node sends.

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "bigset/replica/replica.h"
#include "bigset/testing/sim.h"

namespace bigset::bench {
namespace {

constexpr uint64_t kHandOffSize = 1'000'000;

// Resident memory of this process, in bytes (0 if unknown).
uint64_t ResidentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long pages = 0, resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &pages, &resident);
  std::fclose(f);
  return n == 2 ? resident * 4096 : 0;
}

Ring OneNodeRing(NodeId node, uint64_t epoch) {
  RingOptions ro;
  ro.ring_size = 1;
  ro.n = 1;
  ro.epoch = epoch;
  auto ring = Ring::Create({node}, ro);
  if (!ring.ok()) std::abort();
  return *ring;
}

void HandOff(benchmark::State& state) {
  uint64_t elements = 0;
  double peak_growth = 0;
  NodeOptions node_options;
  for (auto _ : state) {
    state.PauseTiming();
    BenchDir dir;
    std::filesystem::create_directories(dir.path());
    SimOptions o;
    o.seed = 1;
    o.nodes = 1;
    o.ring.ring_size = 1;
    o.ring.n = 1;
    o.ring.epoch = 1;
    o.directory = dir.str();
    o.min_latency_micros = 0;
    o.max_latency_micros = 0;
    o.trace_capacity = 0;
    node_options = o.node;
    auto created = Simulator::Create(o);
    if (!created.ok()) std::abort();
    Simulator& sim = **created;
    Replica* sender = sim.node(1)->LocalReplica(0);
    std::mt19937_64 rng(7);
    std::vector<UpdateOp> ops;
    for (uint64_t i = 0; i < kHandOffSize; ++i) {
      ops.push_back(UpdateOp::Add(RandomElement(rng)));
      if (ops.size() == 10'000) {
        Check(sender->Update(kSet, ops).status());
        ops.clear();
      }
    }
    Check(sim.CompactAll());
    const uint64_t rss_before = ResidentBytes();
    uint64_t rss_peak = rss_before;
    state.ResumeTiming();
    Check(sim.InstallRing(OneNodeRing(2, 2), {1, 2}));
    uint64_t polls = 0;
    const bool done = sim.RunUntil([&]() {
      if (++polls % 64 == 0) rss_peak = std::max(rss_peak, ResidentBytes());
      Node* receiver = sim.node(2);
      return receiver != nullptr && receiver->stats().partitions_moving == 0 &&
             sim.node(1)->stats().partitions_moving == 0;
    });
    state.PauseTiming();
    if (!done) std::abort();
    auto count = sim.node(2)->LocalReplica(0)->Count(kSet);
    if (!count.ok()) std::abort();
    elements += *count;
    peak_growth = std::max(
        peak_growth, static_cast<double>(rss_peak - rss_before) / (1 << 20));
    created->reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(elements));
  state.counters["peak_rss_growth_mb"] = peak_growth;
  state.counters["chunk_mb"] =
      static_cast<double>(node_options.max_chunk_bytes) / (1 << 20);
}

[[maybe_unused]] const int kRegistered = [] {
  benchmark::RegisterBenchmark("BM_HandOff/1000000", HandOff)
      ->Unit(benchmark::kMillisecond)
      ->Iterations(1);
  return 0;
}();

}  // namespace
}  // namespace bigset::bench
