// LevelDbStore: ordered iteration per set, batches, snapshots, coexistence
// with an embedder's keys, comparator mismatch and corruption handling.

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "bigset/keys/comparator.h"
#include "bigset/keys/keys.h"
#include "bigset/store/leveldb_store.h"
#include "bigset/testing/fault_env.h"
#include "leveldb/env.h"
#include "leveldb/helpers/memenv.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

// Small write buffers force flushes and compactions.
struct SmallMemStore : testing::MemStore {
  SmallMemStore() : testing::MemStore(64 << 10) {}
};

// A fresh directory under the system temp dir, removed afterwards.
struct TempDir {
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("bigset_store_test_" + std::to_string(::getpid()) + "_" +
            std::to_string(counter++));
    std::filesystem::remove_all(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::filesystem::path path;
  static inline int counter = 0;
};

std::vector<std::pair<std::string, std::string>> Scan(
    Store& store, const KeyRange& range, const Snapshot* snap = nullptr) {
  ReadOptions ro;
  ro.snapshot = snap;
  auto it = store.NewIterator(ro, range);
  std::vector<std::pair<std::string, std::string>> out;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    out.emplace_back(std::string(it->key()), std::string(it->value()));
  }
  REQUIRE(it->status().ok());
  return out;
}

TEST_CASE("store: each set's range yields exactly its keys in order") {
  for (uint64_t seed : Seeds(3)) {
    CAPTURE(seed);
    Rng rng(seed);
    SmallMemStore m;
    std::vector<std::string> sets = {
        "", std::string("\0", 1), "a", std::string("a\0", 2), "a\x01", "\xff"};
    for (int i = 0; i < 20; ++i) sets.push_back(AdversarialBytes(rng, 6));
    std::sort(sets.begin(), sets.end());
    sets.erase(std::unique(sets.begin(), sets.end()), sets.end());

    // Expected: per (keyspace, set), the keys sorted by the comparator.
    struct Entry {
      KeyspaceId ks;
      std::string set;
      std::string key;
    };
    std::vector<Entry> entries;
    for (int i = 0; i < 20000; ++i) {
      KeyspaceId ks = static_cast<KeyspaceId>(Uniform(rng, 0, 2));
      const std::string& set = sets[Uniform(rng, 0, sets.size() - 1)];
      std::string key;
      switch (Uniform(rng, 0, 9)) {
        case 0:
          key = SetStateSegmentKey(ks, set, StateKind::kClock,
                                   Uniform(rng, 0, 5), Uniform(rng, 0, 5));
          break;
        case 1:
          key = SetStateSegmentKey(ks, set, StateKind::kTombstone,
                                   Uniform(rng, 0, 5), Uniform(rng, 0, 5));
          break;
        case 2:
          key = EndOfSetKey(ks, set);
          break;
        default:
          key = ElementKey(ks, set, AdversarialBytes(rng, 8),
                           Dot{Uniform(rng, 0, 5), rng()});
      }
      entries.push_back({ks, set, key});
    }
    std::shuffle(entries.begin(), entries.end(), rng);
    // Embedder keys share the database and must never show up.
    WriteBatch embedder;
    for (int i = 0; i < 200; ++i) {
      std::string k = AdversarialBytes(rng, 10);
      if (IsBigsetKey(k)) continue;
      embedder.Put(k, "embedder");
    }
    REQUIRE(m.store->Write(WriteOptions(), embedder).ok());
    // Write in shuffled order, in batches of random size.
    size_t i = 0;
    while (i < entries.size()) {
      WriteBatch batch;
      size_t n = Uniform(rng, 1, 300);
      for (size_t j = 0; j < n && i < entries.size(); ++j, ++i) {
        batch.Put(entries[i].key, entries[i].key);
      }
      REQUIRE(m.store->Write(WriteOptions(), batch).ok());
    }
    const leveldb::Comparator* cmp = BigsetComparator();
    for (KeyspaceId ks = 0; ks <= 2; ++ks) {
      for (const std::string& set : sets) {
        std::vector<std::string> expected;
        for (const Entry& e : entries) {
          if (e.ks == ks && e.set == set) expected.push_back(e.key);
        }
        std::sort(expected.begin(), expected.end(),
                  [&](const std::string& a, const std::string& b) {
                    return cmp->Compare(a, b) < 0;
                  });
        expected.erase(std::unique(expected.begin(), expected.end()),
                       expected.end());
        auto got = Scan(*m.store, SetRange(ks, set));
        REQUIRE(got.size() == expected.size());
        for (size_t k = 0; k < got.size(); ++k) {
          REQUIRE(got[k].first == expected[k]);
          REQUIRE(got[k].second == expected[k]);
          ParsedKey p;
          REQUIRE(DecodeKey(got[k].first, &p).ok());
          REQUIRE(p.set == set);
          REQUIRE(p.keyspace == ks);
        }
      }
    }
  }
}

TEST_CASE("store: get, delete, batches and snapshots") {
  SmallMemStore m;
  Store& s = *m.store;
  std::string k1 = ElementKey(0, "s", "a", Dot{1, 1});
  std::string k2 = ElementKey(0, "s", "b", Dot{1, 2});
  std::string v;
  CHECK(absl::IsNotFound(s.Get(ReadOptions(), k1, &v)));

  WriteBatch b;
  b.Put(k1, "one");
  b.Put(k2, "two");
  CHECK(b.Count() == 2);
  REQUIRE(s.Write(WriteOptions(), b).ok());
  REQUIRE(s.Get(ReadOptions(), k1, &v).ok());
  CHECK(v == "one");

  auto snap = s.GetSnapshot();
  WriteBatch del;
  del.Delete(k1);
  del.Put(k2, "TWO");
  REQUIRE(s.Write(WriteOptions(), del).ok());
  CHECK(absl::IsNotFound(s.Get(ReadOptions(), k1, &v)));

  ReadOptions at_snap;
  at_snap.snapshot = snap.get();
  REQUIRE(s.Get(at_snap, k1, &v).ok());
  CHECK(v == "one");
  auto old = Scan(s, SetRange(0, "s"), snap.get());
  REQUIRE(old.size() == 2);
  CHECK(old[1].second == "two");
  auto now = Scan(s, SetRange(0, "s"));
  REQUIRE(now.size() == 1);
  CHECK(now[0].second == "TWO");

  // Seek clamps to the range start and respects the limit.
  auto it = s.NewIterator(ReadOptions(), ElementRange(0, "s", "b"));
  it->Seek(ElementSeekKey(0, "s", ""));
  REQUIRE(it->Valid());
  CHECK(it->key() == k2);
  it->Next();
  CHECK_FALSE(it->Valid());
  it->Seek(ElementKey(0, "s", "c", Dot{0, 0}));
  CHECK_FALSE(it->Valid());
  // Non-bigset keys sort after every bigset key: seeking one is past the end.
  it->Seek("embedder key");
  CHECK_FALSE(it->Valid());

  // Batch iteration reports operations in order.
  struct Recorder : WriteBatch::Handler {
    std::vector<std::string> ops;
    void Put(std::string_view k, std::string_view) override {
      ops.push_back("put " + std::string(k));
    }
    void Delete(std::string_view k) override {
      ops.push_back("del " + std::string(k));
    }
  } rec;
  del.Iterate(&rec);
  REQUIRE(rec.ops.size() == 2);
  CHECK(rec.ops[0] == "del " + k1);
  CHECK(rec.ops[1] == "put " + k2);
  del.Clear();
  CHECK(del.Count() == 0);

  auto size = s.ApproximateSize(SetRange(0, "s"));
  REQUIRE(size.ok());
  CHECK_FALSE(s.ApproximateSize(KeyRange{"a", ""}).ok());
  CHECK(s.CompactRange(SetRange(0, "s")).ok());
  CHECK(Scan(s, SetRange(0, "s")).size() == 1);
}

// A WriteBatch is LevelDB's batch, handed to LevelDB as it is; callers
// reuse theirs (Clear keeps its buffer; a replica's stripes keep one each).
// A reused, reserved or moved-from batch must carry nothing of the write
// before it. Batches of a few keys to over 4 MiB, puts and deletes of keys
// written before, against a model.
TEST_CASE("store: reused write batches carry nothing between writes") {
  for (uint64_t seed : Seeds(2)) {
    CAPTURE(seed);
    Rng rng(seed);
    SmallMemStore m;
    std::map<std::string, std::string> model;
    std::vector<std::string> written;
    const size_t sizes[] = {1, 3, 700, 1500, 3000};
    WriteBatch batch;
    for (int round = 0; round < 14; ++round) {
      switch (Uniform(rng, 0, 3)) {
        case 0:
          batch.Clear();
          break;
        case 1:
          batch.Clear();
          batch.Reserve(Uniform(rng, 1, 1 << 20));
          break;
        case 2: {
          WriteBatch moved(std::move(batch));
          break;
        }
        default:
          batch = WriteBatch();
          break;
      }
      REQUIRE(batch.Count() == 0);
      REQUIRE(batch.ApproximateSize() == 0);
      std::map<std::string, std::string> after = model;
      const size_t n = sizes[Uniform(rng, 0, 4)];
      for (size_t i = 0; i < n; ++i) {
        if (!written.empty() && Uniform(rng, 0, 3) == 0) {
          const std::string& k = written[Uniform(rng, 0, written.size() - 1)];
          batch.Delete(k);
          after.erase(k);
        } else {
          std::string k = ElementKey(0, "s", std::to_string(rng()),
                                     Dot{1, static_cast<uint64_t>(round)});
          // Values make a batch of 700 keys pass 64 KiB, 3,000 pass 4 MiB.
          const size_t bytes =
              n == 3000 ? Uniform(rng, 1900, 2100) : Uniform(rng, 60, 140);
          std::string v(bytes, static_cast<char>('a' + round));
          batch.Put(k, v);
          after[k] = v;
          written.push_back(k);
        }
      }
      REQUIRE(m.store->Write(WriteOptions(), batch).ok());
      model = std::move(after);
      // A scan yields each key once: equal sizes and every key found with
      // its value make the store equal to the model.
      auto got = Scan(*m.store, SetRange(0, "s"));
      size_t differ = 0;
      for (const auto& [k, v] : got) {
        auto it = model.find(k);
        if (it == model.end() || it->second != v) ++differ;
      }
      INFO("round " << round << ", batch of " << n);
      REQUIRE(got.size() == model.size());
      REQUIRE(differ == 0);
    }
  }
}

// The same, deterministically, with separate batches of a few hundred
// bytes and over 64 KiB: one puts k, one deletes k, then an unrelated batch
// must not put k back (LevelDB's batches were once pooled by size here).
TEST_CASE("store: a reused batch does not replay the write before it") {
  SmallMemStore m;
  int next = 0;
  // Adds puts of new keys until the batch passes `bytes`.
  auto fill = [&](WriteBatch* b, size_t bytes) {
    while (b->ApproximateSize() <= bytes) {
      b->Put(ElementKey(0, "f", std::to_string(next++), Dot{1, 1}),
             std::string(100, 'f'));
    }
  };
  const size_t kSmall = 200;
  const size_t kBulk = 70 << 10;
  for (const bool first_bulk : {false, true}) {
    CAPTURE(first_bulk);
    const size_t first = first_bulk ? kBulk : kSmall;
    const size_t second = first_bulk ? kSmall : kBulk;
    const std::string k =
        ElementKey(0, "s", first_bulk ? "bulk" : "small", Dot{1, 1});
    WriteBatch put;
    put.Put(k, "v");
    fill(&put, first);
    REQUIRE(m.store->Write(WriteOptions(), put).ok());
    WriteBatch del;
    del.Delete(k);
    fill(&del, second);
    REQUIRE(m.store->Write(WriteOptions(), del).ok());
    WriteBatch other;
    fill(&other, first);
    REQUIRE(m.store->Write(WriteOptions(), other).ok());
    std::string v;
    REQUIRE(absl::IsNotFound(m.store->Get(ReadOptions(), k, &v)));
  }
}

// WriteBatch's own contract against a model: random puts and deletes
// (empty, short, long and binary keys and values) read back in order by
// Reader and Iterate, with Count and ApproximateSize (the operations'
// bytes); ReservedBytes at least the capacity of a string that takes
// LevelDB's appends (`mirror`: each operation is several appends, and each
// may grow the buffer, found by review); Reserve only on an empty batch; a
// moved-from batch is empty and usable; one batch written twice, and a
// never-used one, write what they hold.
TEST_CASE("store: a write batch holds exactly its operations, in order") {
  for (uint64_t seed : Seeds(4)) {
    CAPTURE(seed);
    Rng rng(seed);
    auto varint = [](size_t n) {
      std::string v;
      for (; n >= 128; n >>= 7) v.push_back(static_cast<char>(n | 128));
      v.push_back(static_cast<char>(n));
      return v;
    };
    auto varint_len = [&](size_t n) { return varint(n).size(); };
    // LevelDB's batch buffer: its header, then each operation's appends.
    std::string mirror(12, '\0');
    auto mirror_clear = [&] {
      mirror.clear();
      mirror.resize(12);
    };
    auto mirror_op = [&](std::string_view key, const std::string_view* value) {
      mirror.push_back(value != nullptr ? 1 : 0);
      mirror.append(varint(key.size()));
      mirror.append(key);
      if (value != nullptr) {
        mirror.append(varint(value->size()));
        mirror.append(*value);
      }
    };
    auto random_bytes = [&](size_t max) {
      std::string b(
          Uniform(rng, 0, 1) == 0 ? Uniform(rng, 0, 3) : Uniform(rng, 0, max),
          '\0');
      for (char& c : b) c = static_cast<char>(Uniform(rng, 0, 255));
      return b;
    };
    WriteBatch batch;
    std::vector<WriteBatch::Op> model;
    std::vector<std::string> keep;  // Owns the model's bytes.
    keep.reserve(4096);
    size_t bytes = 0;
    for (int step = 0; step < 300; ++step) {
      const int what = Uniform(rng, 0, 19);
      if (what == 0) {
        batch.Clear();
        mirror_clear();
        model.clear();
        bytes = 0;
        if (Uniform(rng, 0, 1) == 0) {
          // A new batch, whose buffer Reserve grows with a pad put.
          const size_t r = Uniform(rng, 0, 70000);
          batch = WriteBatch();
          std::string(12, '\0').swap(mirror);  // Its buffer goes too.
          const std::string pad(r, '\0');
          const std::string_view pad_view = pad;
          mirror_op("", &pad_view);
          mirror_clear();
          batch.Reserve(r);
          CHECK(batch.ReservedBytes() >= r);
        }
      } else if (what == 1) {
        WriteBatch moved(std::move(batch));
        CHECK(moved.Count() == model.size());
        CHECK(batch.Count() == 0);
        CHECK(batch.ApproximateSize() == 0);
        WriteBatch::Reader empty(batch);
        WriteBatch::Op op;
        CHECK_FALSE(empty.Next(&op));
        batch = std::move(moved);
      } else if (what == 2 && !model.empty()) {
        // Reserve on a batch that holds operations changes nothing.
        batch.Reserve(Uniform(rng, 0, 1 << 16));
      } else {
        if (keep.size() + 2 > keep.capacity()) {
          batch.Clear();
          mirror_clear();
          model.clear();
          keep.clear();
          bytes = 0;
        }
        keep.push_back(random_bytes(300));
        const std::string_view key = keep.back();
        if (Uniform(rng, 0, 2) == 0) {
          batch.Delete(key);
          mirror_op(key, nullptr);
          model.push_back({false, key, {}});
          bytes += 1 + varint_len(key.size()) + key.size();
        } else {
          keep.push_back(random_bytes(Uniform(rng, 0, 9) == 0 ? 20000 : 60));
          const std::string_view value = keep.back();
          batch.Put(key, value);
          mirror_op(key, &value);
          model.push_back({true, key, value});
          bytes += 1 + varint_len(key.size()) + key.size() +
                   varint_len(value.size()) + value.size();
        }
      }
      INFO("step " << step);
      REQUIRE(batch.Count() == model.size());
      REQUIRE(batch.ApproximateSize() == bytes);
      REQUIRE(batch.ReservedBytes() >= batch.ApproximateSize());
      REQUIRE(mirror.size() == 12 + bytes);
      if (batch.ReservedBytes() != 0) {  // 0: no buffer yet.
        REQUIRE(batch.ReservedBytes() >= mirror.capacity());
      }
      WriteBatch::Reader reader(batch);
      WriteBatch::Op op;
      for (const WriteBatch::Op& want : model) {
        REQUIRE(reader.Next(&op));
        REQUIRE(op.is_put == want.is_put);
        REQUIRE(op.key == want.key);
        REQUIRE(op.value == want.value);
      }
      REQUIRE_FALSE(reader.Next(&op));
    }
  }

  SmallMemStore m;
  WriteBatch never_used;
  REQUIRE(m.store->Write(WriteOptions(), never_used).ok());
  const std::string k = ElementKey(0, "s", "twice", Dot{1, 1});
  WriteBatch put;
  put.Put(k, "one");
  REQUIRE(m.store->Write(WriteOptions(), put).ok());
  WriteBatch del;
  del.Delete(k);
  REQUIRE(m.store->Write(WriteOptions(), del).ok());
  // The same batch again: written as it holds (LevelDB stamped its
  // sequence into it the first time).
  REQUIRE(m.store->Write(WriteOptions(), put).ok());
  std::string v;
  REQUIRE(m.store->Get(ReadOptions(), k, &v).ok());
  CHECK(v == "one");
  WriteBatch moved(std::move(put));
  REQUIRE(m.store->Write(WriteOptions(), del).ok());
  REQUIRE(m.store->Write(WriteOptions(), put).ok());  // Moved from: empty.
  CHECK(absl::IsNotFound(m.store->Get(ReadOptions(), k, &v)));
}

TEST_CASE("store: data survives reopening on disk") {
  TempDir dir;
  LevelDbStoreOptions o;
  {
    auto s = LevelDbStore::Open(dir.path.string(), o);
    REQUIRE(s.ok());
    WriteBatch b;
    for (int i = 0; i < 1000; ++i) {
      b.Put(ElementKey(0, "s", std::to_string(i), Dot{1, uint64_t(i + 1)}), "");
    }
    WriteOptions sync;
    sync.sync = true;
    REQUIRE((*s)->Write(sync, b).ok());
  }
  auto s = LevelDbStore::Open(dir.path.string(), o);
  REQUIRE(s.ok());
  CHECK(Scan(**s, SetRange(0, "s")).size() == 1000);
  // A second open of the same directory is refused while the first holds it.
  auto again = LevelDbStore::Open(dir.path.string(), o);
  REQUIRE_FALSE(again.ok());
  CHECK(again.status().code() == absl::StatusCode::kUnavailable);
}

TEST_CASE(
    "store: a write acknowledged after a failed append was lost at recovery",
    "[regression]") {
  // A full disk leaves part of a log record behind. LevelDB logs the next
  // write after it, and at recovery takes the partial record for the end
  // of the log: the write after it, acknowledged, would be gone. So a store
  // refuses writes after a failed one until it is reopened.
  std::unique_ptr<leveldb::Env> mem(
      leveldb::NewMemEnv(leveldb::Env::Default()));
  FaultEnv env(mem.get());
  LevelDbStoreOptions o;
  o.env = &env;
  auto key = [](int i) {
    return ElementKey(0, "s", std::to_string(i), Dot{1, uint64_t(i + 1)});
  };
  auto put = [&](Store& s, int i, size_t bytes) {
    WriteBatch b;
    b.Put(key(i), std::string(bytes, 'v'));
    return s.Write(WriteOptions(), b);
  };
  std::set<int> acked;
  {
    auto s = LevelDbStore::Open("/full", o);
    REQUIRE(s.ok());
    REQUIRE(put(**s, 0, 10).ok());
    acked.insert(0);
    CHECK((*s)->write_error().ok());
    env.FillDiskAfter("/full/", 10);  // Part of the next record's header.
    const absl::Status failed = put(**s, 1, 1000);
    REQUIRE_FALSE(failed.ok());
    env.FreeSpace("/full/");
    for (int i = 2; i < 5; ++i) {
      const absl::Status later = put(**s, i, 10);
      if (later.ok()) acked.insert(i);
      CHECK(later.code() == failed.code());
      CHECK(absl::StrContains(later.message(), "reopened"));
    }
    CHECK((*s)->write_error().code() == failed.code());
    std::string v;
    CHECK((*s)->Get(ReadOptions(), key(0), &v).ok());  // Reads go on.
  }
  auto s = LevelDbStore::Open("/full", o);
  REQUIRE(s.ok());
  CHECK((*s)->write_error().ok());
  std::string v;
  for (int i : acked) {
    CAPTURE(i);
    CHECK((*s)->Get(ReadOptions(), key(i), &v).ok());
  }
  CHECK(absl::IsNotFound((*s)->Get(ReadOptions(), key(1), &v)));
  REQUIRE(put(**s, 5, 10).ok());
  CHECK((*s)->Get(ReadOptions(), key(5), &v).ok());
}

TEST_CASE("store: a database made with another comparator is refused") {
  TempDir dir;
  {
    leveldb::Options o;
    o.create_if_missing = true;
    leveldb::DB* db = nullptr;
    REQUIRE(leveldb::DB::Open(o, dir.path.string(), &db).ok());
    REQUIRE(db->Put(leveldb::WriteOptions(), "k", "v").ok());
    delete db;
  }
  auto s = LevelDbStore::Open(dir.path.string(), LevelDbStoreOptions());
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(s.status().message()).find("comparator") !=
        std::string::npos);
  // Missing directory without create_if_missing: a clear error too.
  LevelDbStoreOptions no_create;
  no_create.create_if_missing = false;
  auto missing = LevelDbStore::Open((dir.path / "nope").string(), no_create);
  CHECK_FALSE(missing.ok());
}

TEST_CASE("store: adopting an embedder's database keeps its keys apart") {
  std::unique_ptr<leveldb::Env> env(
      leveldb::NewMemEnv(leveldb::Env::Default()));
  leveldb::Options o;
  o.env = env.get();
  o.create_if_missing = true;
  o.comparator = BigsetComparator();
  leveldb::DB* db = nullptr;
  REQUIRE(leveldb::DB::Open(o, "/mem/embedder", &db).ok());
  std::unique_ptr<leveldb::DB> owned(db);
  REQUIRE(db->Put(leveldb::WriteOptions(), "\x01own", "x").ok());
  REQUIRE(db->Put(leveldb::WriteOptions(), "\x10riak", "y").ok());
  {
    auto store = LevelDbStore::Adopt(db, Ownership::kBorrowed);
    WriteBatch b;
    b.Put(SetClockKey(0, "s"), "clock");
    b.Put(ElementKey(0, "s", "e", Dot{1, 1}), "");
    REQUIRE(store->Write(WriteOptions(), b).ok());
    CHECK(Scan(*store, KeyspaceRange(0)).size() == 2);
  }
  // The embedder sees all keys: ours first, then its own in bytewise order.
  std::unique_ptr<leveldb::Iterator> it(
      db->NewIterator(leveldb::ReadOptions()));
  std::vector<std::string> keys;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    keys.push_back(it->key().ToString());
  }
  REQUIRE(keys.size() == 4);
  CHECK(IsBigsetKey(keys[0]));
  CHECK(IsBigsetKey(keys[1]));
  CHECK(keys[2] == "\x01own");
  CHECK(keys[3] == "\x10riak");
}

// Puts 5,000 elements of set "s" (100-byte values) into a store at `path`
// and compacts them into table files.
void FillAndCompact(const std::string& path, const LevelDbStoreOptions& o) {
  auto s = LevelDbStore::Open(path, o);
  REQUIRE(s.ok());
  WriteBatch b;
  for (int i = 0; i < 5000; ++i) {
    b.Put(ElementKey(0, "s", std::to_string(i), Dot{1, uint64_t(i + 1)}),
          std::string(100, 'v'));
  }
  REQUIRE((*s)->Write(WriteOptions(), b).ok());
  REQUIRE((*s)->CompactRange(KeyspaceRange(0)).ok());
}

// Calls `damage` with each table file of `dir` opened for writing, and its
// size; returns how many there were.
int ForEachTable(const std::filesystem::path& dir,
                 const std::function<void(std::fstream&, uint64_t)>& damage) {
  int n = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    if (f.path().extension() != ".ldb") continue;
    std::fstream file(f.path(),
                      std::ios::in | std::ios::out | std::ios::binary);
    damage(file, std::filesystem::file_size(f.path()));
    ++n;
  }
  return n;
}

TEST_CASE("store: corrupt table files surface as errors, not crashes") {
  TempDir dir;
  LevelDbStoreOptions o;
  o.block_cache_bytes = 1 << 20;
  o.mmap_reads = GENERATE(true, false);
  CAPTURE(o.mmap_reads);
  FillAndCompact(dir.path.string(), o);
  // Flip bytes in the middle of every table file.
  const int corrupted =
      ForEachTable(dir.path, [](std::fstream& file, uint64_t size) {
        for (uint64_t off = 100; off + 100 < size; off += size / 7) {
          file.seekp(static_cast<std::streamoff>(off));
          file.write("\xde\xad\xbe\xef", 4);
        }
      });
  REQUIRE(corrupted > 0);
  auto s = LevelDbStore::Open(dir.path.string(), o);
  if (!s.ok()) {
    CHECK(s.status().code() == absl::StatusCode::kDataLoss);
    return;
  }
  ReadOptions ro;
  ro.verify_checksums = true;
  auto it = (*s)->NewIterator(ro, SetRange(0, "s"));
  size_t n = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
  CHECK(n < 5000);
  CHECK(it->status().code() == absl::StatusCode::kDataLoss);
}

// The kB of file-backed pages this process has resident (RssFile).
size_t ResidentFileKb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("RssFile:", 0) == 0) return std::stoul(line.substr(8));
  }
  return 0;
}

// Tables read with pread answer exactly as mapped ones, and leave no file
// pages resident in the process: a scan of ~8 MiB of tables grows its
// resident memory by the scan's buffers only (mapped, by the tables read).
TEST_CASE("store: tables read with pread keep them out of resident memory") {
  TempDir dir;
  Rng rng(7);
  std::map<std::string, std::string> want;
  {
    LevelDbStoreOptions o;
    auto s = LevelDbStore::Open(dir.path.string(), o);
    REQUIRE(s.ok());
    WriteBatch b;
    for (int i = 0; i < 20000; ++i) {
      std::string value(400, 0);
      for (char& c : value) c = static_cast<char>(Uniform(rng, 0, 255));
      const std::string key =
          ElementKey(0, "s", std::to_string(i), Dot{1, uint64_t(i + 1)});
      b.Put(key, value);
      want[key] = value;
    }
    REQUIRE((*s)->Write(WriteOptions(), b).ok());
    REQUIRE((*s)->CompactRange(KeyspaceRange(0)).ok());
  }
  size_t grew_mapped = 0;
  size_t grew_pread = 0;
  for (bool mmap : {false, true}) {
    CAPTURE(mmap);
    LevelDbStoreOptions o;
    o.mmap_reads = mmap;
    o.block_cache_bytes = 1 << 20;
    auto s = LevelDbStore::Open(dir.path.string(), o);
    REQUIRE(s.ok());
    const size_t before = ResidentFileKb();
    ReadOptions ro;
    ro.fill_cache = false;
    auto it = (*s)->NewIterator(ro, SetRange(0, "s"));
    auto w = want.begin();
    for (it->SeekToFirst(); it->Valid(); it->Next(), ++w) {
      REQUIRE(w != want.end());
      REQUIRE(it->key() == w->first);
      REQUIRE(it->value() == w->second);
    }
    REQUIRE(it->status().ok());
    REQUIRE(w == want.end());
    std::string value;
    REQUIRE((*s)->Get(ReadOptions(), want.begin()->first, &value).ok());
    REQUIRE(value == want.begin()->second);
    REQUIRE(absl::IsNotFound((*s)->Get(
        ReadOptions(), ElementKey(0, "s", "none", Dot{1, 1}), &value)));
    const size_t after = ResidentFileKb();
    (mmap ? grew_mapped : grew_pread) = after > before ? after - before : 0;
  }
  CHECK(grew_pread < 1024);
  // The check can fail: mapped reads do grow it.
  CHECK(grew_mapped > 4096);
}

// A kept iterator must never be one in error. The store's iterator tells
// the pool when it read an OK status after its last move (so that the pool
// does not walk LevelDB's iterators again); a move after that read must
// make the pool ask again. Here the status is read at the first key, then
// the scan runs into a damaged block.
TEST_CASE("store: an iterator that failed after an OK status is not kept") {
  TempDir dir;
  LevelDbStoreOptions o;
  o.block_cache_bytes = 1 << 20;
  o.snappy_compression = false;
  FillAndCompact(dir.path.string(), o);
  // Damage the middle of every table, away from its first block.
  const int corrupted = ForEachTable(dir.path, [](std::fstream& file,
                                                  uint64_t size) {
    // 8 KiB: at least one whole block, its trailer's type byte included,
    // so that the damage is found without checksums.
    REQUIRE(size > 4 * 8192);
    file.seekp(static_cast<std::streamoff>(size / 2));
    const std::string garbage(8192, '\xff');
    file.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  });
  REQUIRE(corrupted > 0);
  auto s = LevelDbStore::Open(dir.path.string(), o);
  REQUIRE(s.ok());
  LevelDbStore& store = **s;
  const KeyRange range = SetRange(0, "s");
  {
    // A scan of the undamaged start, its status read: kept.
    auto it = store.NewIterator(ReadOptions(), range);
    it->SeekToFirst();
    REQUIRE(it->Valid());
    REQUIRE(it->status().ok());
  }
  CHECK(store.kept_iterators() == 1);
  {
    // The kept one: an OK status read, then moves into the damage, and no
    // status read after them.
    auto it = store.NewIterator(ReadOptions(), range);
    it->SeekToFirst();
    REQUIRE(it->Valid());
    REQUIRE(it->status().ok());
    while (it->Valid()) it->Next();
  }
  CHECK(store.kept_iterators() == 0);
  {
    // The same scan does fail (so the one above did too).
    auto it = store.NewIterator(ReadOptions(), range);
    size_t n = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
    CHECK(n < 5000);
    CHECK(it->status().code() == absl::StatusCode::kDataLoss);
  }
  CHECK(store.kept_iterators() == 0);

  // The same with seeks: an OK status read, then seeks across the set.
  std::vector<std::string> keys;
  for (int i = 0; i < 5000; ++i) {
    keys.push_back(
        ElementKey(0, "s", std::to_string(i), Dot{1, uint64_t(i + 1)}));
  }
  std::sort(keys.begin(), keys.end());
  const auto seek_across = [&](Iterator* it) {
    for (size_t i = 0; i < keys.size(); i += 10) it->Seek(keys[i]);
  };
  {
    auto it = store.NewIterator(ReadOptions(), range);
    it->SeekToFirst();
    REQUIRE(it->status().ok());
    seek_across(it.get());
  }
  CHECK(store.kept_iterators() == 0);
  {
    // Those seeks do fail.
    auto it = store.NewIterator(ReadOptions(), range);
    seek_across(it.get());
    CHECK(it->status().code() == absl::StatusCode::kDataLoss);
  }
}

}  // namespace
}  // namespace bigset::testing
