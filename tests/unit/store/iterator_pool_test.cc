// IteratorPool and LevelDbStore's kept iterators: a kept iterator must see
// every write whose Write returned before it was handed out, exactly as a
// new one would; iterators held open keep the view of their creation; the
// pool's bounds (capacity, uses, stale and failed iterators) hold.

#include "store/iterator_pool.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bigset/keys/keys.h"
#include "bigset/store/leveldb_store.h"
#include "leveldb/db.h"
#include "leveldb/env.h"
#include "leveldb/helpers/memenv.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

using Model = std::map<std::string, std::string>;

// Uniform in [0, n). REQUIRES: n > 0.
uint64_t Below(Rng& rng, uint64_t n) { return Uniform(rng, 0, n - 1); }

// The keys and values of `it` from `from` (clamped to its range) on.
Model ScanFrom(Iterator* it, const std::string& from) {
  Model out;
  for (it->Seek(from); it->Valid(); it->Next()) {
    out.emplace(std::string(it->key()), std::string(it->value()));
  }
  REQUIRE(it->status().ok());
  return out;
}

Model Suffix(const Model& m, const std::string& from) {
  return Model(m.lower_bound(from), m.end());
}

// Random writes (puts and deletes of a small key set, so that keys come
// and go) interleaved with iterators: new ones (kept or not, with default
// options, without the block cache or at a snapshot) must show the model
// as it is; iterators held across writes must show it as it was when they
// were created. A small write buffer makes flushes and compactions happen
// between reads.
TEST_CASE("store: kept iterators see every write made before them") {
  for (uint64_t seed : Seeds(4)) {
    CAPTURE(seed);
    Rng rng(seed);
    testing::MemStore mem(32 << 10);
    Store& store = *mem.store;
    const KeyRange range = SetRange(0, "s");
    auto key = [&](uint64_t e) {
      return ElementKey(0, "s", "e" + std::to_string(e), Dot{1, e % 7});
    };
    Model model;
    struct Held {
      std::unique_ptr<Iterator> it;
      Model seen;
    };
    std::vector<Held> held;
    for (int step = 0; step < 2000; ++step) {
      const uint64_t what = Below(rng, 10);
      if (what < 4) {
        WriteBatch batch;
        Model next = model;
        const uint64_t n = 1 + Below(rng, 40);
        for (uint64_t i = 0; i < n; ++i) {
          const std::string k = key(Below(rng, 300));
          if (Below(rng, 3) == 0) {
            batch.Delete(k);
            next.erase(k);
          } else {
            const std::string v(Below(rng, 200), 'a' + step % 26);
            batch.Put(k, v);
            next[k] = v;
          }
        }
        REQUIRE(store.Write(WriteOptions(), batch).ok());
        model = std::move(next);
      } else if (what < 8) {
        ReadOptions ro;
        std::unique_ptr<const Snapshot> snap;
        if (what == 6) ro.fill_cache = false;
        if (what == 7) {
          snap = store.GetSnapshot();
          ro.snapshot = snap.get();
        }
        auto it = store.NewIterator(ro, range);
        const std::string from = key(Below(rng, 300));
        CHECK(ScanFrom(it.get(), from) == Suffix(model, from));
        CHECK(ScanFrom(it.get(), range.start) == model);
        if (what == 5 && held.size() < 3 && snap == nullptr) {
          held.push_back(Held{std::move(it), model});
        }
      } else if (!held.empty()) {
        const size_t i = Below(rng, held.size());
        CHECK(ScanFrom(held[i].it.get(), range.start) == held[i].seen);
        if (what == 9) held.erase(held.begin() + static_cast<long>(i));
      }
    }
  }
}

// Runs `reader` on two threads while `writer` runs on this one; returns
// when all three are done.
template <typename Reader, typename Writer>
void WriteWhileTwoRead(Reader reader, Writer writer) {
  std::thread r1(reader), r2(reader);
  writer();
  r1.join();
  r2.join();
}

// One writer, two readers: a reader that learns a write returned (through
// an atomic the writer sets after Write) and then opens an iterator must
// find that write's key, and its deletion of the key before.
TEST_CASE(
    "store: a kept iterator sees a write that returned on another "
    "thread") {
  testing::MemStore mem(64 << 10);
  Store& store = *mem.store;
  const KeyRange range = ElementRange(0, "s", "e");
  auto key = [](uint64_t i) { return ElementKey(0, "s", "e", Dot{1, i}); };
  constexpr uint64_t kWrites = 20000;
  std::atomic<uint64_t> published{0};
  std::atomic<uint64_t> failures{0};
  std::atomic<uint64_t> reads{0};
  auto reader = [&] {
    while (true) {
      const uint64_t p = published.load(std::memory_order_acquire);
      auto it = store.NewIterator(ReadOptions(), range);
      it->SeekToFirst();
      // The writer keeps one key: the one it wrote last (at least p).
      if (p > 0 && (!it->Valid() || it->key() < key(p))) {
        failures.fetch_add(1);
      }
      reads.fetch_add(1);
      if (p == kWrites) return;
    }
  };
  WriteWhileTwoRead(reader, [&] {
    for (uint64_t i = 1; i <= kWrites; ++i) {
      WriteBatch batch;
      if (i > 1) batch.Delete(key(i - 1));
      batch.Put(key(i), "");
      if (!store.Write(WriteOptions(), batch).ok()) failures.fetch_add(1);
      published.store(i, std::memory_order_release);
    }
  });
  CHECK(failures.load() == 0);
  CHECK(reads.load() > 2);
}

// Which iterators the store keeps: default reads, not reads at a snapshot or
// without the block cache; none after a write, none held across one; none
// for an adopted database.
TEST_CASE("store: which iterators are kept, and what drops them") {
  testing::MemStore mem;
  LevelDbStore& store = *mem.store;
  const KeyRange range = SetRange(0, "s");
  WriteBatch batch;
  batch.Put(ElementKey(0, "s", "a", Dot{1, 1}), "");
  REQUIRE(store.Write(WriteOptions(), batch).ok());
  CHECK(store.kept_iterators() == 0);
  store.NewIterator(ReadOptions(), range).reset();
  CHECK(store.kept_iterators() == 1);
  {
    ReadOptions uncached;
    uncached.fill_cache = false;
    store.NewIterator(uncached, range).reset();
    auto snap = store.GetSnapshot();
    ReadOptions at;
    at.snapshot = snap.get();
    store.NewIterator(at, range).reset();
    ReadOptions verified;
    verified.verify_checksums = true;
    store.NewIterator(verified, range).reset();
  }
  CHECK(store.kept_iterators() == 1);
  auto held = store.NewIterator(ReadOptions(), range);  // the kept one
  CHECK(store.kept_iterators() == 0);
  REQUIRE(store.Write(WriteOptions(), batch).ok());
  held.reset();  // stale: made before the write
  CHECK(store.kept_iterators() == 0);
  store.NewIterator(ReadOptions(), range).reset();
  CHECK(store.kept_iterators() == 1);
  REQUIRE(store.Write(WriteOptions(), batch).ok());
  CHECK(store.kept_iterators() == 0);

  std::unique_ptr<LevelDbStore> adopted =
      LevelDbStore::Adopt(store.db(), Ownership::kBorrowed);
  adopted->NewIterator(ReadOptions(), range).reset();
  CHECK(adopted->kept_iterators() == 0);
}

// Regression: a kept iterator pinned a compaction's inputs, and LevelDB
// deletes replaced files only after a compaction: `bigset compact` left the
// old tables on disk, and a later LevelDB repair read their entries back
// (the CLI's corrupted-store test found it). A compaction now drops the
// kept iterators first: the table files on disk are exactly the live ones.
TEST_CASE(
    "store: a compaction leaves no replaced table behind a kept "
    "iterator") {
  testing::MemStore mem(16 << 10);
  LevelDbStore& store = *mem.store;
  for (uint64_t round = 0; round < 3; ++round) {
    WriteBatch batch;
    for (uint64_t i = 0; i < 2000; ++i) {
      batch.Put(ElementKey(0, "s", "e" + std::to_string(i), Dot{1, round}),
                std::string(20, 'v'));
    }
    REQUIRE(store.Write(WriteOptions(), batch).ok());
  }
  const KeyRange range = SetRange(0, "s");
  store.NewIterator(ReadOptions(), range).reset();
  REQUIRE(store.kept_iterators() == 1);
  REQUIRE(store.CompactRange(range).ok());
  CHECK(store.kept_iterators() == 0);
  uint64_t live = 0;
  for (int level = 0; level < 7; ++level) {
    std::string n;
    REQUIRE(store.db()->GetProperty(
        "leveldb.num-files-at-level" + std::to_string(level), &n));
    live += std::stoull(n);
  }
  std::vector<std::string> children;
  REQUIRE(mem.env->GetChildren("/mem/db", &children).ok());
  uint64_t tables = 0;
  for (const std::string& f : children) {
    if (f.size() > 4 && f.substr(f.size() - 4) == ".ldb") ++tables;
  }
  CHECK(live > 0);
  CHECK(tables == live);
}

// A reader that sees a write through Get and then opens an iterator must
// see it there too, even while the write is not yet counted: the iterator
// must never show an older state than a read before it did.
TEST_CASE("store: an iterator never shows less than a Get before it") {
  testing::MemStore mem(64 << 10);
  Store& store = *mem.store;
  const std::string key = ElementKey(0, "s", "c", Dot{1, 1});
  const KeyRange range = ElementRange(0, "s", "c");
  constexpr uint64_t kWrites = 20000;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> failures{0};
  std::atomic<uint64_t> checks{0};
  auto value_of = [](std::string_view v) {
    return v.empty() ? 0 : std::stoull(std::string(v));
  };
  auto reader = [&] {
    std::string got;
    while (!stop.load(std::memory_order_acquire)) {
      uint64_t seen = 0;
      if (store.Get(ReadOptions(), key, &got).ok()) seen = value_of(got);
      auto it = store.NewIterator(ReadOptions(), range);
      it->SeekToFirst();
      const uint64_t now = it->Valid() ? value_of(it->value()) : 0;
      if (now < seen) failures.fetch_add(1);
      checks.fetch_add(1);
    }
  };
  WriteWhileTwoRead(reader, [&] {
    for (uint64_t i = 1; i <= kWrites; ++i) {
      WriteBatch batch;
      batch.Put(key, std::to_string(i));
      if (!store.Write(WriteOptions(), batch).ok()) failures.fetch_add(1);
    }
    stop.store(true, std::memory_order_release);
  });
  CHECK(failures.load() == 0);
  CHECK(checks.load() > 2);
}

// The pool itself, over a LevelDB database in memory.
struct PoolDb {
  PoolDb() : env(leveldb::NewMemEnv(leveldb::Env::Default())) {
    leveldb::Options o;
    o.env = env.get();
    o.create_if_missing = true;
    leveldb::DB* raw = nullptr;
    REQUIRE(leveldb::DB::Open(o, "/pool", &raw).ok());
    db.reset(raw);
  }
  // What LevelDbStore::NewIterator does: borrow, or create.
  std::unique_ptr<IteratorPool::Entry> Get(IteratorPool& pool) {
    std::unique_ptr<IteratorPool::Entry> entry = pool.Borrow();
    REQUIRE(entry != nullptr);
    if (entry->it == nullptr) {
      entry->it.reset(db->NewIterator(leveldb::ReadOptions()));
    }
    return entry;
  }
  std::unique_ptr<leveldb::Env> env;
  std::unique_ptr<leveldb::DB> db;
};

TEST_CASE("iterator pool: lends back what it kept, until a write") {
  PoolDb d;
  IteratorPool pool(/*max_uses=*/100);
  auto a = d.Get(pool);
  leveldb::Iterator* const first = a->it.get();
  pool.Return(std::move(a));
  CHECK(pool.idle() == 1);
  auto b = pool.Borrow();
  CHECK(b->it.get() == first);
  CHECK(b->uses == 1);
  CHECK(pool.idle() == 0);
  pool.Return(std::move(b));
  CHECK(pool.idle() == 1);
  // A write makes every kept iterator stale: dropped, none lent.
  pool.WriteStarted();
  pool.WriteDone();
  CHECK(pool.idle() == 0);
  CHECK(pool.Borrow()->it == nullptr);
}

TEST_CASE("iterator pool: an iterator lent before a write is not kept") {
  PoolDb d;
  IteratorPool pool(100);
  auto a = d.Get(pool);
  pool.WriteStarted();
  pool.WriteDone();
  pool.Return(std::move(a));
  CHECK(pool.idle() == 0);
  // A generation handed out before the write is stale too, even for an
  // iterator created after it.
  auto before = pool.Borrow();
  REQUIRE(before->it == nullptr);
  pool.WriteStarted();
  pool.WriteDone();
  before->it.reset(d.db->NewIterator(leveldb::ReadOptions()));
  pool.Return(std::move(before));
  CHECK(pool.idle() == 0);
  CHECK(pool.Borrow()->it == nullptr);
}

TEST_CASE("iterator pool: slots, uses and failed iterators bound it") {
  PoolDb d;
  IteratorPool pool(3);
  std::vector<std::unique_ptr<IteratorPool::Entry>> out;
  for (size_t i = 0; i < IteratorPool::kSlots + 2; ++i) {
    out.push_back(d.Get(pool));
  }
  for (auto& entry : out) pool.Return(std::move(entry));
  CHECK(pool.idle() == IteratorPool::kSlots);

  // Lent three times in all: not kept after the third.
  IteratorPool small(3);
  auto entry = d.Get(small);
  leveldb::Iterator* const it = entry->it.get();
  for (int use = 1; use <= 2; ++use) {
    small.Return(std::move(entry));
    REQUIRE(small.idle() == 1);
    entry = small.Borrow();
    REQUIRE(entry->it.get() == it);
  }
  small.Return(std::move(entry));
  CHECK(small.idle() == 0);

  // An iterator in error is never kept.
  auto failed = small.Borrow();
  failed->it.reset(leveldb::NewErrorIterator(leveldb::Status::IOError("x")));
  small.Return(std::move(failed));
  CHECK(small.idle() == 0);
}

TEST_CASE("iterator pool: nothing is lent while a write is in progress") {
  PoolDb d;
  IteratorPool pool(100);
  pool.Return(d.Get(pool));
  REQUIRE(pool.idle() == 1);
  // The write may already show to a Get: a kept iterator would not have it.
  pool.WriteStarted();
  CHECK(pool.Borrow()->it == nullptr);
  // An iterator created during the write is kept only until it is done.
  pool.Return(d.Get(pool));
  pool.WriteDone();
  CHECK(pool.idle() == 0);
  CHECK(pool.Borrow()->it == nullptr);
}

TEST_CASE("iterator pool: one reader takes every kept iterator in turn") {
  // Four iterators kept by concurrent readers, then one reader: each must
  // be lent (and so retire after max_uses), not only the first slot's,
  // or the others would pin their files until the next write.
  PoolDb d;
  IteratorPool pool(/*max_uses=*/1000);
  std::vector<std::unique_ptr<IteratorPool::Entry>> out;
  std::set<const leveldb::Iterator*> kept;
  for (size_t i = 0; i < IteratorPool::kSlots; ++i) {
    out.push_back(d.Get(pool));
    kept.insert(out.back()->it.get());
  }
  for (auto& entry : out) pool.Return(std::move(entry));
  REQUIRE(pool.idle() == IteratorPool::kSlots);
  std::set<const leveldb::Iterator*> lent;
  for (size_t i = 0; i < 3 * IteratorPool::kSlots; ++i) {
    auto entry = pool.Borrow();
    REQUIRE(entry->it != nullptr);
    lent.insert(entry->it.get());
    pool.Return(std::move(entry));
  }
  CHECK(lent == kept);
}

// Borrowers and writers on several threads: every iterator handed out must
// see the last write that returned before it was asked for (checked as in
// the store test above, but through the pool directly, with writes that
// only count).
TEST_CASE("iterator pool: concurrent borrowers never get a stale iterator") {
  PoolDb d;
  IteratorPool pool(1000);
  std::atomic<uint64_t> done{0};
  std::atomic<uint64_t> failures{0};
  constexpr uint64_t kWrites = 20000;
  auto borrower = [&] {
    while (true) {
      const uint64_t before = done.load(std::memory_order_acquire);
      auto entry = d.Get(pool);
      // The pool's generation counts WriteDone calls: an entry's must be at
      // least the writes known done when it was asked for.
      if (entry->generation < before) failures.fetch_add(1);
      pool.Return(std::move(entry));
      if (before == kWrites) return;
    }
  };
  std::thread b1(borrower), b2(borrower);
  for (uint64_t i = 1; i <= kWrites; ++i) {
    pool.WriteStarted();
    pool.WriteDone();
    done.store(i, std::memory_order_release);
    if (i % 16 == 0) std::this_thread::yield();  // let borrowers interleave
  }
  b1.join();
  b2.join();
  CHECK(failures.load() == 0);
}

}  // namespace
}  // namespace bigset::testing
