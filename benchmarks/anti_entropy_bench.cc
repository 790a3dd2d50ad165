// Anti-entropy figures (lib/cluster/anti_entropy.h), in the simulator with
// zero latency: two nodes, one partition, both replicas of it. `bytes` is
// what crossed the simulated wire during the repair (every message, both
// ways); `keys_read` the element keys anti-entropy read.
//
// BM_AntiEntropy/missing:10/1000000: node 2 was cut off while node 1
// coordinated 10 updates (5 adds, 5 removes) of a 1,000,000-element set;
// bytes to bring node 2 up to date after healing.
// BM_AntiEntropy/equal/sets:10000: bytes of one round that confirms that two
// replicas holding the same 10,000 sets are equal.
// BM_AntiEntropy/full/1000000: node 2 lost everything; elements per second
// until it holds the 1,000,000-element set again (stores on disk). Compared
// with BM_FullRead/bigset/1000000 and BM_HandOffCeiling/rawleveldb/1000000
// (scripts/bench_ratios.py).

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench_util.h"
#include "bigset/replica/replica.h"
#include "bigset/testing/sim.h"

namespace bigset::bench {
namespace {

SimOptions TwoNodes(const std::string& directory) {
  SimOptions o;
  o.seed = 1;
  o.nodes = 2;
  o.ring.ring_size = 1;
  o.ring.n = 2;
  o.min_latency_micros = 0;
  o.max_latency_micros = 0;
  o.trace_capacity = 0;
  o.directory = directory;
  o.node.anti_entropy.interval_micros = 0;   // Rounds started by hand.
  o.node.anti_entropy.bytes_per_second = 0;  // No rate limit.
  return o;
}

// Adds `n` random elements to `set` on node 1's replica and applies the same
// deltas on node 2's (if `both`), in updates of 10,000.
void Load(Simulator& sim, const std::string& set, uint64_t n, bool both,
          uint64_t seed) {
  Replica* one = sim.node(1)->LocalReplica(0);
  Replica* two = sim.node(2)->LocalReplica(0);
  std::mt19937_64 rng(seed);
  std::vector<UpdateOp> ops;
  for (uint64_t i = 0; i < n; ++i) {
    ops.push_back(UpdateOp::Add(RandomElement(rng)));
    if (ops.size() == 10'000 || i + 1 == n) {
      auto delta = one->Update(set, ops);
      Check(delta.status());
      if (both) Check(two->Apply(*delta));
      ops.clear();
    }
  }
}

uint64_t KeysRead(Simulator& sim) {
  return Counter(sim.node(1)->stats(), "anti_entropy.keys_read") +
         Counter(sim.node(2)->stats(), "anti_entropy.keys_read");
}

void Converged(Simulator& sim) {
  if (sim.node(1)->LocalReplica(0)->PartitionDigest() !=
      sim.node(2)->LocalReplica(0)->PartitionDigest()) {
    std::abort();
  }
}

void Missing(benchmark::State& state, uint64_t size) {
  double bytes = 0, keys_read = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto created = Simulator::Create(TwoNodes(""));
    Check(created.status());
    Simulator& sim = **created;
    Load(sim, kSet, size, /*both=*/true, 7);
    // Five elements to remove, read from node 1's replica.
    std::vector<std::string> victims;
    {
      auto reader = sim.node(1)->LocalReplica(0)->Read(kSet);
      Check(reader.status());
      std::vector<ElementDots> chunk;
      auto more = (*reader)->Next(&chunk);
      Check(more.status());
      for (size_t i = 0; i < 5 && i < chunk.size(); ++i) {
        victims.push_back(chunk[i * 100 % chunk.size()].element);
      }
    }
    sim.Partition({{1}, {2}});
    ClusterWriteOptions w;
    w.w = 1;
    for (int i = 0; i < 5; ++i) {
      Check(sim.Update(1, kSet, {UpdateOp::Add(absl::StrCat("new-", i))}, w)
                .status());
      UpdateOp remove = UpdateOp::Remove(victims[i], {});
      remove.context_from_replica = true;
      Check(sim.Update(1, kSet, {remove}, w).status());
    }
    sim.RunFor(5'000'000);  // The writes end; node 2 never acknowledged.
    sim.Heal();
    const uint64_t bytes_before = sim.bytes_delivered();
    const uint64_t keys_before = KeysRead(sim);
    state.ResumeTiming();
    // Rounds as the timer runs them: each node starts one, twice (a
    // difference is acted on when two rounds in a row see it); hints are
    // resent meanwhile.
    for (int round = 0; round < 2; ++round) {
      sim.node(1)->RunAntiEntropy();
      sim.node(2)->RunAntiEntropy();
      sim.RunUntilIdle();
    }
    state.PauseTiming();
    Converged(sim);
    bytes += static_cast<double>(sim.bytes_delivered() - bytes_before);
    keys_read += static_cast<double>(KeysRead(sim) - keys_before);
    created->reset();
    state.ResumeTiming();
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["bytes"] = bytes / n;
  state.counters["keys_read"] = keys_read / n;
}

void Equal(benchmark::State& state, uint64_t sets) {
  auto created = Simulator::Create(TwoNodes(""));
  Check(created.status());
  Simulator& sim = **created;
  for (uint64_t i = 0; i < sets; ++i) {
    Load(sim, absl::StrCat("set-", i), 3, /*both=*/true, i);
  }
  uint64_t bytes = 0, keys_read = 0, equal_before = 0;
  equal_before = Counter(sim.node(1)->stats(), "anti_entropy.rounds_equal");
  for (auto _ : state) {
    const uint64_t b = sim.bytes_delivered();
    const uint64_t k = KeysRead(sim);
    sim.node(1)->RunAntiEntropy();
    sim.RunUntilIdle();
    bytes += sim.bytes_delivered() - b;
    keys_read += KeysRead(sim) - k;
  }
  // Every round must have found the replicas equal.
  if (Counter(sim.node(1)->stats(), "anti_entropy.rounds_equal") -
          equal_before !=
      static_cast<uint64_t>(state.iterations())) {
    std::abort();
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["bytes"] = static_cast<double>(bytes) / n;
  state.counters["keys_read"] = static_cast<double>(keys_read) / n;
}

void Full(benchmark::State& state, uint64_t size) {
  uint64_t elements = 0;
  double bytes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    BenchDir dir;
    std::filesystem::create_directories(dir.path());
    auto created = Simulator::Create(TwoNodes(dir.str()));
    Check(created.status());
    Simulator& sim = **created;
    Load(sim, kSet, size, /*both=*/false, 7);
    Check(sim.CompactAll());
    const uint64_t bytes_before = sim.bytes_delivered();
    state.ResumeTiming();
    for (int round = 0; round < 2; ++round) {
      sim.node(1)->RunAntiEntropy();
      sim.RunUntilIdle();
    }
    state.PauseTiming();
    Converged(sim);
    auto count = sim.node(2)->LocalReplica(0)->Count(kSet);
    Check(count.status());
    elements += *count;
    bytes += static_cast<double>(sim.bytes_delivered() - bytes_before);
    created->reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(elements));
  state.counters["bytes"] = bytes / static_cast<double>(state.iterations());
}

[[maybe_unused]] const int kAntiEntropyRegistered = [] {
  benchmark::RegisterBenchmark("BM_AntiEntropy/missing:10/1000000", Missing,
                               uint64_t{1'000'000})
      ->Iterations(1)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_AntiEntropy/equal/sets:10000", Equal,
                               uint64_t{10'000})
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_AntiEntropy/full/1000000", Full,
                               uint64_t{1'000'000})
      ->Iterations(1)
      ->Unit(benchmark::kMillisecond);
  return 0;
}();

}  // namespace
}  // namespace bigset::bench
