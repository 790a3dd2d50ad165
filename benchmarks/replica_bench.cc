// Replica benchmarks against their baselines, measured in the same run:
//   - raw LevelDB doing the same physical work (two keys per insert, one
//     ordered scan, one point read), with the same options;
//   - the one-value ORSWOT (the whole set in one LevelDB value).
// Single thread, sync off, 16-byte random elements, databases on disk under
// $BIGSET_BENCH_DIR (default: the system temp directory).

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "bigset/keys/comparator.h"
#include "bigset/keys/keys.h"
#include "bigset/replica/replica.h"
#include "bigset/store/leveldb_store.h"
#include "core/coding.h"
#include "leveldb/cache.h"
#include "leveldb/db.h"
#include "leveldb/filter_policy.h"
#include "leveldb/write_batch.h"
#include "onevalue_orswot.h"

namespace bigset::bench {
namespace {

// One insert: the "clock" and the element key in one batch, like bigset.
void RawInsert(RawDb& raw, const std::string& element) {
  leveldb::WriteBatch batch;
  std::string clock_value(12, 'c');
  std::memcpy(clock_value.data(), &raw.counter, 8);
  ++raw.counter;
  batch.Put(RawClockKey(), clock_value);
  batch.Put(RawElementKey(element, raw.counter), "");
  Check(raw.db->Write(leveldb::WriteOptions(), &batch));
}

// ---- one value

struct OneValueDb {
  std::unique_ptr<RawDb> raw = OpenRaw();
};

std::unique_ptr<OneValueDb> MakeOneValue(uint64_t n) {
  auto db = std::make_unique<OneValueDb>();
  OneValueOrswot set;
  Rng rng(n);
  for (uint64_t i = 0; i < n; ++i) Check(set.Add(1, RandomElement(rng)));
  Check(db->raw->db->Put(leveldb::WriteOptions(), kSet, set.Encode()));
  return db;
}

void OneValueInsert(OneValueDb& db, const std::string& element) {
  std::string value;
  Check(db.raw->db->Get(leveldb::ReadOptions(), kSet, &value));
  auto set = OneValueOrswot::Decode(value);
  Check(set.status());
  Check(set->Add(1, element));
  Check(db.raw->db->Put(leveldb::WriteOptions(), kSet, set->Encode()));
}

// ---- BM_InsertLatency: mean time per insert into a set of N elements.
// Google Benchmark calls each function several times while it sizes the
// run; the prefilled database is built once per N and reused. To keep the
// set at N elements, every Refill() inserts the timer pauses and removes
// what was inserted (amortised over max(1, N/2) inserts, so the pause costs
// nothing measurable): the set holds between N and 1.5 N elements.

template <typename Db>
Db& Cached(std::map<uint64_t, std::unique_ptr<Db>>& cache, uint64_t n,
           std::unique_ptr<Db> (*make)(uint64_t)) {
  auto& slot = cache[n];
  if (!slot) slot = make(n);
  return *slot;
}

uint64_t Refill(uint64_t n) {
  return std::max<uint64_t>(1, std::min<uint64_t>(n / 2, 50000));
}

std::unique_ptr<BigsetDb> MakeBigsetForWrites(uint64_t n) {
  return MakeBigset(n, false);
}
std::unique_ptr<RawDb> MakeRawForWrites(uint64_t n) {
  return MakeRaw(n, false);
}

void InsertLatencyBigset(benchmark::State& state, uint64_t n) {
  static auto* cache = new std::map<uint64_t, std::unique_ptr<BigsetDb>>();
  BigsetDb& db = Cached(*cache, n, MakeBigsetForWrites);
  Rng rng(NextRunSeed());
  std::vector<UpdateOp> undo;
  for (auto _ : state) {
    UpdateOp op = UpdateOp::Add(RandomElement(rng));
    auto delta = db.replica->Update(kSet, std::span(&op, 1));
    Check(delta.status());
    undo.push_back(
        UpdateOp::Remove(std::move(op.element), {*delta->ops[0].add}));
    if (undo.size() == Refill(n)) {
      state.PauseTiming();
      Check(db.replica->Update(kSet, undo).status());
      undo.clear();
      state.ResumeTiming();
    }
  }
  Check(db.replica->Update(kSet, undo).status());
  state.counters["cardinality"] = static_cast<double>(n);
  state.SetItemsProcessed(state.iterations());
}

void InsertLatencyRaw(benchmark::State& state, uint64_t n) {
  static auto* cache = new std::map<uint64_t, std::unique_ptr<RawDb>>();
  RawDb& raw = Cached(*cache, n, MakeRawForWrites);
  Rng rng(NextRunSeed());
  leveldb::WriteBatch undo;
  uint64_t pending = 0;
  for (auto _ : state) {
    std::string element = RandomElement(rng);
    RawInsert(raw, element);
    undo.Delete(RawElementKey(element, raw.counter));
    if (++pending == Refill(n)) {
      state.PauseTiming();
      Check(raw.db->Write(leveldb::WriteOptions(), &undo));
      undo.Clear();
      pending = 0;
      state.ResumeTiming();
    }
  }
  Check(raw.db->Write(leveldb::WriteOptions(), &undo));
  state.counters["cardinality"] = static_cast<double>(n);
  state.SetItemsProcessed(state.iterations());
}

void InsertLatencyOneValue(benchmark::State& state, uint64_t n) {
  static auto* cache = new std::map<uint64_t, std::unique_ptr<OneValueDb>>();
  OneValueDb& db = Cached(*cache, n, MakeOneValue);
  std::string original;
  Check(db.raw->db->Get(leveldb::ReadOptions(), kSet, &original));
  Rng rng(NextRunSeed());
  uint64_t pending = 0;
  for (auto _ : state) {
    OneValueInsert(db, RandomElement(rng));
    if (++pending == Refill(n)) {
      state.PauseTiming();
      Check(db.raw->db->Put(leveldb::WriteOptions(), kSet, original));
      pending = 0;
      state.ResumeTiming();
    }
  }
  Check(db.raw->db->Put(leveldb::WriteOptions(), kSet, original));
  state.counters["cardinality"] = static_cast<double>(n);
  state.SetItemsProcessed(state.iterations());
}

// ---- BM_InsertThroughput: inserts per second into one growing set.
//
// Every run adds elements nobody added before (NextRunSeed).

void InsertThroughputBigset(benchmark::State& state) {
  static BigsetDb* db = MakeBigset(0, false).release();
  Rng rng(NextRunSeed());
  for (auto _ : state) {
    UpdateOp op = UpdateOp::Add(RandomElement(rng));
    Check(db->replica->Update(kSet, std::span(&op, 1)).status());
  }
  state.SetItemsProcessed(state.iterations());
  const ReplicaStats stats = db->replica->stats();
  state.counters["presence_seeks"] = static_cast<double>(stats.presence_seeks);
  state.counters["count_scans"] = static_cast<double>(stats.count_scans);
  state.counters["filter_bytes"] =
      static_cast<double>(stats.presence_filter_bytes);
  state.counters["batch_bytes_per_insert"] =
      static_cast<double>(stats.bytes_written) /
      static_cast<double>(std::max<uint64_t>(stats.updates_coordinated, 1));
}

// The same without anti-entropy's bookkeeping (ReplicaOptions::keep_digests
// off): the baseline of what the digests cost an insert.
void InsertThroughputBigsetNoDigests(benchmark::State& state) {
  static BigsetDb* db = [] {
    ReplicaOptions o;
    o.keep_digests = false;
    return OpenBigset(o).release();
  }();
  Rng rng(NextRunSeed());
  for (auto _ : state) {
    UpdateOp op = UpdateOp::Add(RandomElement(rng));
    Check(db->replica->Update(kSet, std::span(&op, 1)).status());
  }
  state.SetItemsProcessed(state.iterations());
}

// The same without counts (ReplicaOptions::keep_counts off): the baseline of
// what keeping the count costs an insert (issue "Counts": at least 0.9).
void InsertThroughputBigsetNoCounts(benchmark::State& state) {
  static BigsetDb* db = [] {
    ReplicaOptions o;
    o.keep_counts = false;
    return OpenBigset(o).release();
  }();
  Rng rng(NextRunSeed());
  for (auto _ : state) {
    UpdateOp op = UpdateOp::Add(RandomElement(rng));
    Check(db->replica->Update(kSet, std::span(&op, 1)).status());
  }
  state.SetItemsProcessed(state.iterations());
}

void InsertThroughputRaw(benchmark::State& state) {
  static RawDb* raw = OpenRaw().release();
  Rng rng(NextRunSeed());
  for (auto _ : state) RawInsert(*raw, RandomElement(rng));
  state.SetItemsProcessed(state.iterations());
}

// ---- BM_InsertThroughput/*_sync: four writer threads on four different
// sets, every write fsynced (sync_writes), so LevelDB groups the syncs of
// concurrent writers into one. Each iteration runs 4 x 25 inserts. The work
// is on the writer threads, so `items_per_second` is set from wall-clock
// time (the benchmark thread only waits; its CPU time is not the cost). No
// modifier changes the run (they would suffix the names): Google Benchmark
// stops after about 2.5 s of wall-clock time when CPU time stays small.

constexpr int kSyncWriters = 4;
constexpr int kSyncInsertsPerWriter = 25;

template <typename InsertFn>
void RunSyncWriters(benchmark::State& state, InsertFn insert) {
  uint64_t round = 0;
  double wall = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> writers;
    for (int w = 0; w < kSyncWriters; ++w) {
      writers.emplace_back([&insert, w, round]() {
        Rng rng(round * kSyncWriters + w);
        for (int i = 0; i < kSyncInsertsPerWriter; ++i) insert(w, rng);
      });
    }
    for (std::thread& t : writers) t.join();
    wall +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    ++round;
  }
  const double items = static_cast<double>(state.iterations()) * kSyncWriters *
                       kSyncInsertsPerWriter;
  state.counters["items_per_second"] = benchmark::Counter(items / wall);
  state.counters["wall_us_per_insert"] = benchmark::Counter(1e6 * wall / items);
}

void InsertThroughputBigsetSync(benchmark::State& state) {
  BenchDir dir;
  auto store = LevelDbStore::Open(dir.str(), LevelDbStoreOptions());
  Check(store.status());
  ReplicaOptions ro;
  ro.sync_writes = true;
  auto replica = Replica::Open(store->get(), ro);
  Check(replica.status());
  RunSyncWriters(state, [&](int writer, Rng& rng) {
    UpdateOp op = UpdateOp::Add(RandomElement(rng));
    const std::string set = std::string(kSet) + std::to_string(writer);
    Check((*replica)->Update(set, std::span(&op, 1)).status());
  });
}

void InsertThroughputRawSync(benchmark::State& state) {
  auto raw = OpenRaw();
  std::atomic<uint64_t> counter{0};
  RunSyncWriters(state, [&](int writer, Rng& rng) {
    leveldb::WriteBatch batch;
    const uint64_t c = ++counter;
    std::string clock_value(12, 'c');
    std::memcpy(clock_value.data(), &c, 8);
    batch.Put(RawClockKey() + std::to_string(writer), clock_value);
    batch.Put(RawElementKey(RandomElement(rng), c), "");
    leveldb::WriteOptions sync;
    sync.sync = true;
    Check(raw->db->Write(sync, &batch));
  });
}

// ---- BM_InsertCloud/cloud:N and BM_ApplyScattered/cloud:N: writes into a
// set whose set-clock holds N scattered dots of another actor (every other
// counter of [2, 2N], applied in a shuffled order outside the timed loop as
// removes of unseen dots: they enter the clock only, so the store holds no
// more keys than a clean set's). `bytes_written`: bytes of the batches
// written per operation.

constexpr ActorId kCloudActor = 0xC10D;

std::unique_ptr<BigsetDb> MakeCloud(uint64_t dots) {
  auto db = OpenBigset();
  std::vector<uint64_t> counters;
  for (uint64_t c = 2; c <= 2 * dots; c += 2) counters.push_back(c);
  Rng rng(dots);
  std::shuffle(counters.begin(), counters.end(), rng);
  for (size_t i = 0; i < counters.size(); i += 1000) {
    Delta d;
    d.set = kSet;
    DeltaOp& op = d.ops.emplace_back();
    op.element = "never-added";
    for (size_t k = i; k < std::min(counters.size(), i + 1000); ++k) {
      op.context.push_back(Dot{kCloudActor, counters[k]});
    }
    Check(db->replica->Apply(d));
  }
  Check(db->store->CompactRange(KeyspaceRange(0)));
  return db;
}

void InsertCloud(benchmark::State& state, uint64_t dots) {
  auto db = MakeCloud(dots);
  Rng rng(7);
  const uint64_t bytes_before = db->replica->stats().bytes_written;
  for (auto _ : state) {
    UpdateOp op = UpdateOp::Add(RandomElement(rng));
    Check(db->replica->Update(kSet, std::span(&op, 1)).status());
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["bytes_written"] = benchmark::Counter(
      static_cast<double>(db->replica->stats().bytes_written - bytes_before) /
      static_cast<double>(state.iterations()));
}

void ApplyScattered(benchmark::State& state, uint64_t dots) {
  auto db = MakeCloud(dots);
  // A new dot of the other actor every time (a seen one would write
  // nothing): the odd counters of [1, 2M] in a scattered order, i * P mod M
  // for a prime P that does not divide M (a permutation). With a 1M-dot
  // cloud, M = 1M: every new dot fills a gap between two of its dots; with
  // smaller clouds, M = 4M: mostly the empty space above them.
  const uint64_t m = dots >= (1 << 20) ? dots : uint64_t{1} << 22;
  constexpr uint64_t kPrime = 2654435761ull;
  Rng rng(11);
  Delta d;
  d.set = kSet;
  d.ops.emplace_back();
  uint64_t i = 0;
  const uint64_t bytes_before = db->replica->stats().bytes_written;
  for (auto _ : state) {
    DeltaOp& op = d.ops[0];
    op.element = RandomElement(rng);
    op.add = Dot{kCloudActor, 1 + 2 * ((i++ * kPrime) % m)};
    Check(db->replica->Apply(d));
  }
  if (i > m) std::abort();  // Every dot must be new.
  state.SetItemsProcessed(state.iterations());
  state.counters["bytes_written"] = benchmark::Counter(
      static_cast<double>(db->replica->stats().bytes_written - bytes_before) /
      static_cast<double>(state.iterations()));
}

// BM_LoadState/cloud:N: loading a set's clock (header and segments) from
// the store, as a cache miss does: two sets with N-dot clouds read in turn
// through a clock cache too small to hold both.
void LoadState(benchmark::State& state, uint64_t dots) {
  BenchDir dir;
  auto store = LevelDbStore::Open(dir.str(), LevelDbStoreOptions());
  Check(store.status());
  ReplicaOptions ro;
  ro.clock_cache_bytes = 1;
  ro.lock_stripes = 1;
  auto replica = Replica::Open(store->get(), ro);
  Check(replica.status());
  std::vector<uint64_t> counters;
  for (uint64_t c = 2; c <= 2 * dots; c += 2) counters.push_back(c);
  for (const char* set : {"a", "b"}) {
    for (size_t i = 0; i < counters.size(); i += 1000) {
      Delta d;
      d.set = set;
      DeltaOp& op = d.ops.emplace_back();
      op.element = "never-added";
      for (size_t k = i; k < std::min(counters.size(), i + 1000); ++k) {
        op.context.push_back(Dot{kCloudActor, counters[k]});
      }
      Check((*replica)->Apply(d));
    }
    UpdateOp add = UpdateOp::Add("x");
    Check((*replica)->Update(set, std::span(&add, 1)).status());
  }
  Check((*store)->CompactRange(KeyspaceRange(0)));
  bool a = true;
  for (auto _ : state) {
    auto clock = (*replica)->GetClock(a ? "a" : "b");
    Check(clock.status());
    a = !a;
  }
  state.SetItemsProcessed(state.iterations());
}

// ---- Reads of a 1,000,000-element set, shared by the read benchmarks.

constexpr uint64_t kReadSize = 1000000;

// The read benchmarks read settled databases: loaded, then compacted.
BigsetDb& SharedBigset() {
  static BigsetDb* db = [] {
    BigsetDb* d = MakeBigset(kReadSize, true).release();
    Check(d->store->CompactRange(KeyspaceRange(0)));
    return d;
  }();
  return *db;
}

RawDb& SharedRaw() {
  static RawDb* db = [] {
    RawDb* d = MakeRaw(kReadSize, true).release();
    d->db->CompactRange(nullptr, nullptr);
    return d;
  }();
  return *db;
}

void FullReadBigset(benchmark::State& state) {
  BigsetDb& db = SharedBigset();
  uint64_t elements = 0;
  for (auto _ : state) {
    auto reader = db.replica->Read(kSet);
    Check(reader.status());
    std::vector<ElementDots> chunk;
    while (true) {
      auto more = (*reader)->Next(&chunk);
      Check(more.status());
      if (!*more) break;
      elements += chunk.size();
    }
  }
  if (elements != kReadSize * state.iterations()) std::abort();
  state.SetItemsProcessed(static_cast<int64_t>(elements));
}

void FullReadRaw(benchmark::State& state) {
  RawDb& raw = SharedRaw();
  uint64_t elements = 0;
  const std::string prefix = RawSetPrefix();
  for (auto _ : state) {
    leveldb::ReadOptions ro;
    ro.fill_cache = false;
    std::unique_ptr<leveldb::Iterator> it(raw.db->NewIterator(ro));
    size_t bytes = 0;
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix);
         it->Next()) {
      bytes += it->key().size() + it->value().size();
      ++elements;
    }
    Check(it->status());
    benchmark::DoNotOptimize(bytes);
  }
  if (elements != kReadSize * state.iterations()) std::abort();
  state.SetItemsProcessed(static_cast<int64_t>(elements));
}

void ContainsBigset(benchmark::State& state) {
  BigsetDb& db = SharedBigset();
  Rng rng(5);
  for (auto _ : state) {
    const std::string& e = db.elements[rng() % db.elements.size()];
    auto dots = db.replica->Contains(kSet, e);
    if (!dots.ok() || dots->empty()) std::abort();
  }
  state.SetItemsProcessed(state.iterations());
}

void GetRaw(benchmark::State& state) {
  RawDb& raw = SharedRaw();
  Rng rng(5);
  std::string value;
  for (auto _ : state) {
    const std::string& k = raw.keys[rng() % raw.keys.size()];
    Check(raw.db->Get(leveldb::ReadOptions(), k, &value));
  }
  state.SetItemsProcessed(state.iterations());
}

// What a point lookup of a decomposed set costs raw LevelDB: an element's
// keys carry their dots, so a lookup seeks to the element's prefix, reads
// its key and steps to the next (another element's) instead of a Get of a
// known key. With a new iterator per lookup, or one iterator kept across
// lookups (what LevelDbStore does while no write intervenes).
void SeekRaw(benchmark::State& state, bool keep_iterator) {
  RawDb& raw = SharedRaw();
  Rng rng(5);
  std::string target;
  std::unique_ptr<leveldb::Iterator> kept;
  if (keep_iterator) kept.reset(raw.db->NewIterator(leveldb::ReadOptions()));
  for (auto _ : state) {
    const std::string& k = raw.keys[rng() % raw.keys.size()];
    target.assign(k, 0, k.size() - 16);  // the element's prefix: no dot
    std::unique_ptr<leveldb::Iterator> fresh;
    leveldb::Iterator* it = kept.get();
    if (it == nullptr) {
      fresh.reset(raw.db->NewIterator(leveldb::ReadOptions()));
      it = fresh.get();
    }
    it->Seek(target);
    if (!it->Valid() || !it->key().starts_with(target)) std::abort();
    it->Next();
    benchmark::DoNotOptimize(it->Valid() && it->key().starts_with(target));
    Check(it->status());
  }
  state.SetItemsProcessed(state.iterations());
}

// Membership of present members in a store as a server's is under load,
// not settled: a 1,000,000-element set written in batches of 16 (members
// like redis-benchmark's __rand_int__: 12 digits drawn from ten million),
// so that a seek searches the memtable, the level-0 tables and every
// level, with bigsetd's store options (tables read with pread, no Bloom
// filters) and its blocks stored with snappy or not. Each iteration asks
// ContainsAll of 64 members the set holds; items are members.
void ContainsUnsettled(benchmark::State& state, bool snappy) {
  BenchDir dir;
  LevelDbStoreOptions so;
  so.snappy_compression = snappy;
  so.mmap_reads = false;
  so.bloom_bits_per_key = 0;
  so.block_cache_bytes = 32 << 20;
  auto store = LevelDbStore::Open(dir.str(), so);
  Check(store.status());
  auto replica = Replica::Open(store->get(), ReplicaOptions());
  Check(replica.status());
  std::mt19937_64 rng(7);
  std::vector<std::string> present;
  std::vector<UpdateOp> ops;
  char member[16];
  for (uint64_t i = 0; i < kReadSize; ++i) {
    std::snprintf(member, sizeof(member), "%012llu",
                  static_cast<unsigned long long>(rng() % 10000000));
    ops.push_back(UpdateOp::Add(member));
    if (i % 8 == 0) present.push_back(member);
    if (ops.size() == 16) {
      Check((*replica)->Update(kSet, ops).status());
      ops.clear();
    }
  }
  std::vector<std::string> batch(64);
  uint64_t found = 0;
  for (auto _ : state) {
    for (std::string& m : batch) m = present[rng() % present.size()];
    auto r = (*replica)->ContainsAll(kSet, batch);
    Check(r.status());
    for (const ElementDots& e : r->elements) found += !e.dots.empty();
  }
  if (found != batch.size() * state.iterations()) std::abort();
  state.SetItemsProcessed(static_cast<int64_t>(found));
}

// Names are exact (no argument or iteration suffixes): docs/BENCHMARKS.md
// and the issues read the figures by these names.
const int kReplicaRegistered = [] {
  for (uint64_t n : {1000, 10000, 100000, 1000000}) {
    const std::string suffix = "/cardinality:" + std::to_string(n);
    benchmark::RegisterBenchmark(("BM_InsertLatency/bigset" + suffix).c_str(),
                                 InsertLatencyBigset, n)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(
        ("BM_InsertLatency/rawleveldb" + suffix).c_str(), InsertLatencyRaw, n)
        ->Unit(benchmark::kMicrosecond);
    if (n <= 100000) {
      benchmark::RegisterBenchmark(
          ("BM_InsertLatency/onevalue" + suffix).c_str(), InsertLatencyOneValue,
          n)
          ->Unit(benchmark::kMicrosecond);
    }
  }
  benchmark::RegisterBenchmark("BM_InsertThroughput/bigset",
                               InsertThroughputBigset)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_InsertThroughput/bigset_no_digests",
                               InsertThroughputBigsetNoDigests)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_InsertThroughput/bigset_no_counts",
                               InsertThroughputBigsetNoCounts)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_InsertThroughput/rawleveldb",
                               InsertThroughputRaw)
      ->Unit(benchmark::kMicrosecond);
  for (uint64_t n : {0, 10000, 100000, 1000000}) {
    benchmark::RegisterBenchmark(
        ("BM_InsertCloud/cloud:" + std::to_string(n)).c_str(), InsertCloud, n)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(
        ("BM_ApplyScattered/cloud:" + std::to_string(n)).c_str(),
        ApplyScattered, n)
        ->Unit(benchmark::kMicrosecond);
  }
  for (uint64_t n : {0, 1000000}) {
    benchmark::RegisterBenchmark(
        ("BM_LoadState/cloud:" + std::to_string(n)).c_str(), LoadState, n)
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::RegisterBenchmark("BM_InsertThroughput/bigset_sync",
                               InsertThroughputBigsetSync)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_InsertThroughput/rawleveldb_sync",
                               InsertThroughputRawSync)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_FullRead/bigset/1000000", FullReadBigset)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_FullRead/rawleveldb/1000000", FullReadRaw)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_Contains/bigset/1000000", ContainsBigset);
  benchmark::RegisterBenchmark("BM_Get/rawleveldb/1000000", GetRaw);
  benchmark::RegisterBenchmark("BM_Seek/rawleveldb/1000000", SeekRaw, false);
  benchmark::RegisterBenchmark("BM_Seek/rawleveldb_kept/1000000", SeekRaw,
                               true);
  benchmark::RegisterBenchmark("BM_ContainsUnsettled/snappy/1000000",
                               ContainsUnsettled, true)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_ContainsUnsettled/none/1000000",
                               ContainsUnsettled, false)
      ->Unit(benchmark::kMicrosecond);
  return 0;
}();

}  // namespace
}  // namespace bigset::bench
