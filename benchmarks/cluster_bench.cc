// Cluster benchmarks on the simulator with zero network latency: what the
// coordinators, the wire format and the R-way merge cost on top of the
// replicas' own work. Compared, in the same run, with the single-replica
// BM_InsertThroughput/bigset and BM_FullRead/bigset/1000000.

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "bench_util.h"
#include "bigset/replica/replica.h"
#include "bigset/store/leveldb_store.h"
#include "bigset/testing/sim.h"

namespace bigset::bench {
namespace {

// A 3-node simulator (N=3, every node a replica of every set) on disk.
struct ClusterDb {
  ClusterDb() {
    std::filesystem::create_directories(dir.path());
    SimOptions o;
    o.seed = 1;
    o.nodes = 3;
    o.directory = dir.str();
    o.min_latency_micros = 0;
    o.max_latency_micros = 0;
    o.trace_capacity = 0;
    auto s = Simulator::Create(o);
    if (!s.ok()) std::abort();
    sim = std::move(*s);
    via = sim->ring().PreferenceList(sim->ring().PartitionOf(kSet))[0];
  }
  ~ClusterDb() { sim.reset(); }
  BenchDir dir;
  std::unique_ptr<Simulator> sim;
  NodeId via = 1;
};

// Presence seeks (a look for the element's earlier dots, which an add of a
// new element skips when the presence filter says no) of the set's replicas
// on every node: a run's seeks per insert show whether the benchmark added
// new elements, as it means to, or re-added a previous run's (a re-add
// seeks; the cluster figures measured re-adds until every run was seeded
// afresh).
uint64_t PresenceSeeks(ClusterDb* db) {
  const uint32_t partition = db->sim->ring().PartitionOf(kSet);
  uint64_t seeks = 0;
  for (NodeId n = 1; n <= 3; ++n) {
    Replica* r = db->sim->node(n)->LocalReplica(partition);
    if (r != nullptr) seeks += r->stats().presence_seeks;
  }
  return seeks;
}

void ClusterInsert(benchmark::State& state) {
  static ClusterDb* db = new ClusterDb();
  std::mt19937_64 rng(NextRunSeed());
  const uint64_t seeks_before = PresenceSeeks(db);
  ClusterWriteOptions wo;
  wo.w = 2;
  uint64_t i = 0;
  for (auto _ : state) {
    std::vector<UpdateOp> ops;
    ops.push_back(UpdateOp::Add(RandomElement(rng)));
    auto d = db->sim->Update(db->via, kSet, std::move(ops), wo);
    if (!d.ok()) std::abort();
    // Zero latency freezes virtual time; advance it now and then so the
    // coordinators' retry timers fire (and find nothing to do).
    if (++i % 1000 == 0) db->sim->RunFor(1'000'000);
  }
  db->sim->RunUntilIdle();
  state.SetItemsProcessed(state.iterations());
  state.counters["presence_seeks_per_insert"] = benchmark::Counter(
      static_cast<double>(PresenceSeeks(db) - seeks_before) /
      static_cast<double>(
          std::max<benchmark::IterationCount>(state.iterations(), 1)));
}

// The floor under BM_ClusterInsert: the same three replica writes per
// insert (one Update, two Applies of its delta) on three stores, with no
// coordinator, messages or simulator. The difference is what the cluster
// layer costs.
struct ThreeReplicas {
  ThreeReplicas() {
    std::filesystem::create_directories(dir.path());
    for (int i = 0; i < 3; ++i) {
      auto store = LevelDbStore::Open(
          (dir.path() / ("floor" + std::to_string(i))).string(),
          LevelDbStoreOptions());
      if (!store.ok()) std::abort();
      stores[i] = std::move(*store);
      auto replica = Replica::Open(stores[i].get(), ReplicaOptions());
      if (!replica.ok()) std::abort();
      replicas[i] = std::move(*replica);
    }
  }
  ~ThreeReplicas() {
    for (auto& r : replicas) r.reset();
    for (auto& s : stores) s.reset();
  }
  BenchDir dir;
  std::unique_ptr<LevelDbStore> stores[3];
  std::unique_ptr<Replica> replicas[3];
};

uint64_t PresenceSeeks(ThreeReplicas* db) {
  uint64_t seeks = 0;
  for (auto& r : db->replicas) seeks += r->stats().presence_seeks;
  return seeks;
}

void ThreeReplicaInsert(benchmark::State& state) {
  static ThreeReplicas* db = new ThreeReplicas();
  std::mt19937_64 rng(NextRunSeed());
  const uint64_t seeks_before = PresenceSeeks(db);
  for (auto _ : state) {
    UpdateOp op = UpdateOp::Add(RandomElement(rng));
    auto delta = db->replicas[0]->Update(kSet, std::span(&op, 1));
    if (!delta.ok() || !db->replicas[1]->Apply(*delta).ok() ||
        !db->replicas[2]->Apply(*delta).ok()) {
      std::abort();
    }
  }
  state.SetItemsProcessed(state.iterations());
  // As in BM_ClusterInsert: near 0 when every run adds new elements.
  state.counters["presence_seeks_per_insert"] = benchmark::Counter(
      static_cast<double>(PresenceSeeks(db) - seeks_before) /
      static_cast<double>(
          std::max<benchmark::IterationCount>(state.iterations(), 1)));
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

const int kClusterRegistered = [] {
  benchmark::RegisterBenchmark("BM_ClusterInsert/n:3/w:2", ClusterInsert)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_ClusterInsertFloor/three_replicas",
                               ThreeReplicaInsert)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_ClusterFullRead/r:2/1000000",
                               ClusterFullRead)
      ->Unit(benchmark::kMillisecond);
  return 0;
}();

}  // namespace
}  // namespace bigset::bench
