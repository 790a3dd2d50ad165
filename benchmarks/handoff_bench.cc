// BM_HandOff/1000000: elements per second to hand a 1,000,000-element set
// from one node to another in the simulator (zero latency, stores on disk):
// node 1 holds the only replica of the only partition, a ring that puts it
// on a new node 2 is installed, and the clock runs until node 2 serves the
// partition (every set sent, acknowledged and announced). Compared with
// BM_FullRead/bigset/1000000 (scripts/bench_ratios.py).
//
// Counters: peak_rss_growth_mb, the growth of the process's anonymous
// resident memory during the hand-off (both nodes run in this process;
// their stores are on disk), against chunk_mb, the largest chunk a node
// sends.
// The stores' block caches are 8 MB each here (bounded caches fill with any
// set). BM_HandOff/2000000 is the same with twice the elements: peak memory
// that depends on the chunk, not the set, is the same for both.
//
// BM_HandOffCeiling/rawleveldb/1000000: the receiver's unavoidable work with
// no bigset logic: writing the same 1,000,000 element keys, in key order, in
// batches of HandoffOptions::chunk_elements, into a fresh raw LevelDB on disk.
// A hand-off cannot beat it, since LevelDB has no way to ingest a sorted run
// but its log and memtable.

#include <benchmark/benchmark.h>

#include <algorithm>
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
#include "leveldb/db.h"
#include "leveldb/write_batch.h"

namespace bigset::bench {
namespace {

constexpr uint64_t kHandOffSize = 1'000'000;

Ring OneNodeRing(NodeId node, uint64_t epoch) {
  RingOptions ro;
  ro.ring_size = 1;
  ro.n = 1;
  ro.epoch = epoch;
  auto ring = Ring::Create({node}, ro);
  if (!ring.ok()) std::abort();
  return *ring;
}

void HandOff(benchmark::State& state, uint64_t size) {
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
    // A small block cache, so that the memory figure shows the hand-off's
    // own buffers rather than a cache filling up with the set.
    o.store.block_cache_bytes = 8 << 20;
    node_options = o.node;
    auto created = Simulator::Create(o);
    if (!created.ok()) std::abort();
    Simulator& sim = **created;
    Replica* sender = sim.node(1)->LocalReplica(0);
    std::mt19937_64 rng(7);
    std::vector<UpdateOp> ops;
    for (uint64_t i = 0; i < size; ++i) {
      ops.push_back(UpdateOp::Add(RandomElement(rng)));
      if (ops.size() == 10'000) {
        Check(sender->Update(kSet, ops).status());
        ops.clear();
      }
    }
    Check(sim.CompactAll());
    const uint64_t rss_before = AnonResidentBytes();
    uint64_t rss_peak = rss_before;
    state.ResumeTiming();
    Check(sim.InstallRing(OneNodeRing(2, 2), {1, 2}));
    uint64_t polls = 0;
    const bool done = sim.RunUntil([&]() {
      if (++polls % 64 == 0) rss_peak = std::max(rss_peak, AnonResidentBytes());
      Node* receiver = sim.node(2);
      return receiver != nullptr &&
             Counter(receiver->stats(), "handoff.partitions_moving") == 0 &&
             Counter(sim.node(1)->stats(), "handoff.partitions_moving") == 0;
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
      static_cast<double>(node_options.handoff.chunk_bytes) / (1 << 20);
}

void HandOffCeiling(benchmark::State& state) {
  const uint32_t chunk = HandoffOptions().chunk_elements;
  uint64_t written = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<std::string> keys;
    keys.reserve(kHandOffSize);
    std::mt19937_64 rng(7);
    for (uint64_t i = 0; i < kHandOffSize; ++i) {
      keys.push_back(RawElementKey(RandomElement(rng), i + 1));
    }
    std::sort(keys.begin(), keys.end());
    std::unique_ptr<RawDb> raw = OpenRaw();
    state.ResumeTiming();
    leveldb::WriteBatch batch;
    for (size_t i = 0; i < keys.size(); ++i) {
      batch.Put(keys[i], "");
      if ((i + 1) % chunk == 0 || i + 1 == keys.size()) {
        Check(raw->db->Write(leveldb::WriteOptions(), &batch));
        batch.Clear();
      }
    }
    written += keys.size();
    state.PauseTiming();
    raw.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(written));
}

[[maybe_unused]] const int kHandoffRegistered = [] {
  benchmark::RegisterBenchmark("BM_HandOff/1000000", HandOff, kHandOffSize)
      ->Unit(benchmark::kMillisecond)
      ->Iterations(1);
  benchmark::RegisterBenchmark("BM_HandOff/2000000", HandOff, 2 * kHandOffSize)
      ->Unit(benchmark::kMillisecond)
      ->Iterations(1);
  benchmark::RegisterBenchmark("BM_HandOffCeiling/rawleveldb/1000000",
                               HandOffCeiling)
      ->Unit(benchmark::kMillisecond)
      ->Iterations(3);
  return 0;
}();

}  // namespace
}  // namespace bigset::bench
