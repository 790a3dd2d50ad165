// Clear and sweep benchmarks (docs/BENCHMARKS.md), each against a baseline
// measured in the same run:
//   - BM_Count/fresh/1000 vs BM_CountAfterClear/1000000 (load 1,000,000
//     elements, clear, sweep, add 1,000, time Count) and its /unswept twin;
//   - BM_Sweep/1000000 (keys a full sweep deletes per second, its final
//     compaction of the swept range included) vs BM_Delete/rawleveldb/1000000
//     (raw LevelDB scanning the same keys and deleting them in batches);
//   - BM_SpaceAfterSweep/1000000 vs /fresh (counter `bytes`: the store's
//     approximate size after a full compaction);
//   - BM_InsertLatency/during_sweep vs /no_sweep (inserts into another set
//     while the background sweeper runs at its default rate).
// Every setup runs outside the timed region; one replica on disk, sync off.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bench_util.h"
#include "bigset/keys/keys.h"
#include "bigset/replica/replica.h"
#include "leveldb/write_batch.h"

namespace bigset::bench {
namespace {

constexpr uint64_t kBig = 1'000'000;
constexpr uint64_t kSmall = 1'000;

// The 1,000 elements added after the clear (and to the fresh set): a seed
// no MakeBigset uses, so none was in the cleared set.
std::vector<UpdateOp> NewAdds() {
  Rng rng(0x5eed);
  std::vector<UpdateOp> ops;
  for (uint64_t i = 0; i < kSmall; ++i) {
    ops.push_back(UpdateOp::Add(RandomElement(rng)));
  }
  return ops;
}

// A replica whose kSet held `n` elements and was cleared (what a read saw),
// not yet swept.
std::unique_ptr<BigsetDb> MakeCleared(uint64_t n) {
  auto db = MakeBigset(n, false);
  auto clock = db->replica->GetClock(kSet);
  Check(clock.status());
  Check(db->replica->Clear(kSet, *clock).status());
  return db;
}

// Sweeps until the queue is empty; returns the keys deleted.
uint64_t SweepAll(Replica& replica) {
  uint64_t deleted = 0;
  while (true) {
    auto p = replica.SweepSome(1 << 20);
    Check(p.status());
    deleted += p->keys_deleted;
    if (p->idle) return deleted;
  }
}

// Keys in `range`, whatever they hold (covered keys included).
uint64_t KeysInRange(Store& store, const KeyRange& range) {
  auto it = store.NewIterator(ReadOptions(), range);
  uint64_t n = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
  Check(it->status());
  return n;
}

void TimeCount(benchmark::State& state, Replica& replica) {
  for (auto _ : state) {
    auto n = replica.Count(kSet);
    Check(n.status());
    if (*n != kSmall) std::abort();
  }
  state.SetItemsProcessed(state.iterations());
}

// ---- Count

void CountFresh(benchmark::State& state) {
  auto db = OpenBigset();
  Check(db->replica->Update(kSet, NewAdds()).status());
  TimeCount(state, *db->replica);
}

void CountAfterClear(benchmark::State& state, bool sweep) {
  static std::unique_ptr<BigsetDb> dbs[2];
  std::unique_ptr<BigsetDb>& db = dbs[sweep ? 1 : 0];
  if (!db) {  // Built once: Google Benchmark calls this several times.
    db = MakeCleared(kBig);
    if (sweep && SweepAll(*db->replica) != kBig) std::abort();
    Check(db->replica->Update(kSet, NewAdds()).status());
  }
  TimeCount(state, *db->replica);
  state.counters["element_keys_on_disk"] =
      static_cast<double>(KeysInRange(*db->store, ElementsRange(0, kSet)));
}

// ---- BM_Sweep and its raw baseline: each iteration builds a fresh store
// (paused) and deletes its million keys.

void Sweep(benchmark::State& state) {
  uint64_t deleted = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto db = MakeCleared(kBig);
    state.ResumeTiming();
    deleted += SweepAll(*db->replica);
    state.PauseTiming();
    auto stats = db->replica->GetSetStats(kSet);
    Check(stats.status());
    if (stats->tombstone_dots != 0) std::abort();
    db.reset();
    state.ResumeTiming();
  }
  if (deleted != kBig * state.iterations()) std::abort();
  state.SetItemsProcessed(static_cast<int64_t>(deleted));
}

void DeleteRaw(benchmark::State& state) {
  uint64_t deleted = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto raw = MakeRaw(kBig, false);
    state.ResumeTiming();
    const std::string prefix = RawSetPrefix();
    leveldb::ReadOptions ro;
    ro.fill_cache = false;
    std::unique_ptr<leveldb::Iterator> it(raw->db->NewIterator(ro));
    leveldb::WriteBatch batch;
    int pending = 0;
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix);
         it->Next()) {
      batch.Delete(it->key());
      ++deleted;
      if (++pending == 1000) {
        Check(raw->db->Write(leveldb::WriteOptions(), &batch));
        batch.Clear();
        pending = 0;
      }
    }
    Check(it->status());
    Check(raw->db->Write(leveldb::WriteOptions(), &batch));
    state.PauseTiming();
    it.reset();
    raw.reset();
    state.ResumeTiming();
  }
  if (deleted != kBig * state.iterations()) std::abort();
  state.SetItemsProcessed(static_cast<int64_t>(deleted));
}

// ---- BM_SpaceAfterSweep: the stores are built once (Google Benchmark
// calls each function several times); the timed loop only asks the size.

void ReportSpace(benchmark::State& state, BigsetDb& db, bool* compacted) {
  if (!*compacted) {
    Check(db.store->CompactRange(KeyspaceRange(0)));
    *compacted = true;
  }
  absl::StatusOr<uint64_t> bytes;
  for (auto _ : state) {
    bytes = db.store->ApproximateSize(KeyspaceRange(0));
    Check(bytes.status());
  }
  uint64_t tables = 0;
  for (const auto& f : std::filesystem::directory_iterator(db.dir.path())) {
    if (f.path().extension() == ".ldb") tables += f.file_size();
  }
  state.counters["bytes"] = static_cast<double>(*bytes);
  state.counters["table_file_bytes"] = static_cast<double>(tables);
}

void SpaceAfterSweep(benchmark::State& state) {
  static std::unique_ptr<BigsetDb> db;
  static bool compacted = false;
  if (!db) {
    db = MakeCleared(kBig);
    if (SweepAll(*db->replica) != kBig) std::abort();
    Check(db->replica->Update(kSet, NewAdds()).status());
  }
  ReportSpace(state, *db, &compacted);
}

void SpaceFresh(benchmark::State& state) {
  static std::unique_ptr<BigsetDb> db;
  static bool compacted = false;
  if (!db) {
    db = OpenBigset();
    Check(db->replica->Update(kSet, NewAdds()).status());
  }
  ReportSpace(state, *db, &compacted);
}

// ---- BM_InsertLatency/{during_sweep,no_sweep}: inserts into another set
// of a replica holding a cleared million-element set (built once per
// variant); the sweeper (default SweepOptions: 100,000 keys a second) runs
// during the timed loop of the first only. A million keys last it about
// ten seconds, longer than every call together; each call checks that the
// sweep spanned it. `keys_swept`: keys the sweeper deleted during the call.

void InsertLatencySweep(benchmark::State& state, bool sweeping) {
  static std::unique_ptr<BigsetDb> dbs[2];
  std::unique_ptr<BigsetDb>& db = dbs[sweeping ? 1 : 0];
  if (!db) {
    db = MakeCleared(kBig);
    Check(db->store->CompactRange(KeyspaceRange(0)));
  }
  const uint64_t swept_before = db->replica->stats().sweep_keys_deleted;
  if (sweeping) Check(db->replica->StartSweeper());
  Rng rng(NextRunSeed());
  for (auto _ : state) {
    UpdateOp op = UpdateOp::Add(RandomElement(rng));
    Check(db->replica->Update("another-set", std::span(&op, 1)).status());
  }
  const bool done = db->replica->stats().sweep_queue_length == 0;
  db->replica->StopSweeper();
  const uint64_t swept = db->replica->stats().sweep_keys_deleted - swept_before;
  if (sweeping && state.iterations() > 1000 && (swept == 0 || done)) {
    // The figure would not be that of inserts during a sweep.
    std::fprintf(stderr, "the sweep did not span the run: %llu keys, done %d\n",
                 static_cast<unsigned long long>(swept), done ? 1 : 0);
    std::abort();
  }
  state.counters["keys_swept"] = static_cast<double>(swept);
  state.SetItemsProcessed(state.iterations());
}

const int kSweepRegistered = [] {
  benchmark::RegisterBenchmark("BM_Count/fresh/1000", CountFresh)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_CountAfterClear/1000000", CountAfterClear,
                               true)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_CountAfterClear/1000000/unswept",
                               CountAfterClear, false)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_Sweep/1000000", Sweep)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_Delete/rawleveldb/1000000", DeleteRaw)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_SpaceAfterSweep/1000000", SpaceAfterSweep);
  benchmark::RegisterBenchmark("BM_SpaceAfterSweep/fresh", SpaceFresh);
  benchmark::RegisterBenchmark("BM_InsertLatency/during_sweep",
                               InsertLatencySweep, true)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_InsertLatency/no_sweep", InsertLatencySweep,
                               false)
      ->Unit(benchmark::kMicrosecond);
  return 0;
}();

}  // namespace
}  // namespace bigset::bench
