// Cluster benchmarks on the simulator with zero network latency: what the
// coordinators, the wire format and the R-way merge cost on top of the
// replicas' own work. Compared, in the same run, with the single-replica
// BM_InsertThroughput/bigset and BM_FullRead/bigset/1000000.

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "bigset/sim.h"

namespace bigset::bench {
namespace {

constexpr char kSet[] = "benchmark-set";

// A 3-node simulator (N=3, every node a replica of every set) on disk.
struct ClusterDb {
  ClusterDb() {
    const char* base = std::getenv("BIGSET_BENCH_DIR");
    static int counter = 0;
    dir = std::filesystem::path(
              base != nullptr ? base : std::filesystem::temp_directory_path()) /
          ("bigset_cluster_bench_" + std::to_string(::getpid()) + "_" +
           std::to_string(counter++));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    SimOptions o;
    o.seed = 1;
    o.nodes = 3;
    o.directory = dir.string();
    o.min_latency_micros = 0;
    o.max_latency_micros = 0;
    o.trace_capacity = 0;
    auto s = Simulator::Create(o);
    if (!s.ok()) std::abort();
    sim = std::move(*s);
    via = sim->ring().PreferenceList(sim->ring().PartitionOf(kSet))[0];
  }
  ~ClusterDb() {
    sim.reset();
    std::filesystem::remove_all(dir);
  }
  std::filesystem::path dir;
  std::unique_ptr<Simulator> sim;
  NodeId via = 1;
};

std::string RandomElement(std::mt19937_64& rng) {
  std::string e(16, '\0');
  uint64_t a = rng(), b = rng();
  std::memcpy(e.data(), &a, 8);
  std::memcpy(e.data() + 8, &b, 8);
  return e;
}

void ClusterInsert(benchmark::State& state) {
  static ClusterDb* db = new ClusterDb();
  std::mt19937_64 rng(state.iterations());
  ClusterWriteOptions wo;
  wo.w = 2;
  uint64_t i = 0;
  for (auto _ : state) {
    auto d =
        db->sim->Update(db->via, kSet, {UpdateOp::Add(RandomElement(rng))}, wo);
    if (!d.ok()) std::abort();
    // Zero latency freezes virtual time; advance it now and then so the
    // coordinators' retry timers fire (and find nothing to do).
    if (++i % 1000 == 0) db->sim->RunFor(1'000'000);
  }
  db->sim->RunUntilIdle();
  state.SetItemsProcessed(state.iterations());
}

void ClusterFullRead(benchmark::State& state) {
  static ClusterDb* db = [] {
    auto* d = new ClusterDb();
    std::mt19937_64 rng(1000000);
    for (int i = 0; i < 1000; ++i) {
      std::vector<UpdateOp> ops;
      for (int j = 0; j < 1000; ++j)
        ops.push_back(UpdateOp::Add(RandomElement(rng)));
      if (!d->sim->Update(d->via, kSet, std::move(ops)).ok()) std::abort();
    }
    d->sim->RunUntilIdle();
    // Read from a settled store, as BM_FullRead/bigset does.
    if (!d->sim->CompactAll().ok()) std::abort();
    return d;
  }();
  // Streams and counts, like BM_FullRead/bigset (nothing is retained).
  class Counter final : public ReadHandler {
   public:
    void OnClock(const bigset::Clock&) override {}
    void OnChunk(std::vector<ElementDots>* elements,
                 std::function<void()> next) override {
      count += elements->size();
      next();
    }
    void OnDone(absl::Status s) override {
      ok = s.ok();
      done = true;
    }
    uint64_t count = 0;
    bool ok = false;
    bool done = false;
  };
  ClusterReadOptions ro;
  ro.r = 2;
  uint64_t elements = 0;
  for (auto _ : state) {
    Counter counter;
    db->sim->node(db->via)->Read(kSet, ro, &counter);
    db->sim->RunUntil([&counter]() { return counter.done; });
    if (!counter.ok || counter.count != 1000000) std::abort();
    elements += counter.count;
  }
  state.SetItemsProcessed(static_cast<int64_t>(elements));
}

const int kRegistered = [] {
  benchmark::RegisterBenchmark("BM_ClusterInsert/n:3/w:2", ClusterInsert)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_ClusterFullRead/r:2/1000000",
                               ClusterFullRead)
      ->Unit(benchmark::kMillisecond);
  return 0;
}();

}  // namespace
}  // namespace bigset::bench
