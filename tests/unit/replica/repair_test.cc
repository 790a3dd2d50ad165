// Attacks on the repair path and on read-only opens: Replica::Repair after
// arbitrary damage to a keyspace's keys (then Verify must pass, a second
// repair must find nothing, and new dots must never name an existing key),
// a repair interrupted by a failing write, LevelDbStore::Repair, the
// copy-on-write read-only Env (no file on disk may change, the shared lock
// must keep writers of other processes out), and read-only replicas.

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bigset/keys/keys.h"
#include "bigset/replica/replica.h"
#include "bigset/store/leveldb_store.h"
#include "core/crc32c.h"
#include "forwarding_store.h"
#include "map_store.h"
#include "replica/replica_internal.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

constexpr KeyspaceId kKs = 7;
constexpr KeyspaceId kOtherKs = 8;

using KV = std::map<std::string, std::string>;

KV Dump(Store& store, const KeyRange& range) {
  KV kv;
  auto it = store.NewIterator(ReadOptions(), range);
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    kv.emplace(std::string(it->key()), std::string(it->value()));
  }
  REQUIRE(it->status().ok());
  return kv;
}

void PutKey(Store& store, const std::string& key, std::string_view value) {
  WriteBatch b;
  b.Put(key, value);
  REQUIRE(store.Write(WriteOptions(), b).ok());
}

void DeleteKey(Store& store, const std::string& key) {
  WriteBatch b;
  b.Delete(key);
  REQUIRE(store.Write(WriteOptions(), b).ok());
}

void Load(Store& store, const KV& kv) {
  WriteBatch b;
  for (const auto& [k, v] : kv) b.Put(k, v);
  REQUIRE(store.Write(WriteOptions(), b).ok());
}

ReplicaOptions Options(KeyspaceId ks = kKs) {
  ReplicaOptions o;
  o.keyspace = ks;
  return o;
}

std::string KeyspacePrefix(KeyspaceId ks) { return KeyspaceRange(ks).start; }

// Fills keyspace `ks` with sets of every shape: plain adds, removes,
// replaced elements, a cleared set fully swept, cleared sets with a sweep
// in progress (snapshot and cursor) and one still queued.
void Populate(Store* store, Rng& rng, KeyspaceId ks = kKs) {
  auto r = Replica::Open(store, Options(ks));
  REQUIRE(r.ok());
  Replica& rep = **r;
  std::vector<std::string> sets = {"a", "b", "c",
                                   "d", "e", std::string("\0\xff", 2)};
  for (int i = 0; i < 3; ++i) sets.push_back(AdversarialBytes(rng, 8));
  for (const std::string& set : sets) {
    const int n = static_cast<int>(Uniform(rng, 1, 300));
    std::vector<UpdateOp> ops;
    for (int i = 0; i < n; ++i) {
      UpdateOp op =
          UpdateOp::Add(Uniform(rng, 0, 3) == 0 ? AdversarialBytes(rng, 6)
                                                : absl::StrCat("e", i));
      op.context_from_replica = true;
      ops.push_back(std::move(op));
      if (ops.size() == 50) {
        REQUIRE(rep.Update(set, ops).ok());
        ops.clear();
      }
    }
    if (!ops.empty()) REQUIRE(rep.Update(set, ops).ok());
    // Some removes and re-adds.
    ops.clear();
    for (int i = 0; i < n; i += 3) {
      UpdateOp op;
      op.kind =
          Uniform(rng, 0, 1) ? UpdateOp::Kind::kRemove : UpdateOp::Kind::kAdd;
      op.element = absl::StrCat("e", i);
      op.context_from_replica = true;
      ops.push_back(std::move(op));
    }
    if (!ops.empty()) REQUIRE(rep.Update(set, ops).ok());
    const uint64_t shape = Uniform(rng, 0, 3);
    if (shape >= 1) {
      auto clock = rep.GetClock(set);
      REQUIRE(clock.ok());
      REQUIRE(rep.Clear(set, *clock).ok());
      // More adds after the clear.
      REQUIRE(
          rep.Update(set, std::vector<UpdateOp>{UpdateOp::Add("after-clear")})
              .ok());
    }
  }
  // Sweep part of the queue: leaves a snapshot and a cursor behind.
  REQUIRE(rep.SweepSome(Uniform(rng, 1, 200)).ok());
  REQUIRE(rep.Close().ok());
}

// Damages keyspace `ks` at random: values overwritten, truncated or
// deleted, keys renamed, garbage keys added anywhere in the keyspace,
// decodable element keys with dots no clock has seen.
void Damage(Store& store, Rng& rng, int count, KeyspaceId ks = kKs) {
  const std::string prefix = KeyspacePrefix(ks);
  for (int i = 0; i < count; ++i) {
    KV kv = Dump(store, KeyspaceRange(ks));
    std::vector<std::string> keys;
    for (const auto& [k, v] : kv) keys.push_back(k);
    const std::string key =
        keys.empty() ? prefix : keys[Uniform(rng, 0, keys.size() - 1)];
    switch (Uniform(rng, 0, 7)) {
      case 0:  // Overwrite the value with garbage.
        PutKey(store, key, AdversarialBytes(rng, 40));
        break;
      case 1: {  // Truncate the value.
        std::string v = kv[key];
        v.resize(Uniform(rng, 0, v.size()));
        PutKey(store, key, v);
        break;
      }
      case 2:  // Delete the key.
        DeleteKey(store, key);
        break;
      case 3: {  // Flip a byte of the key (keeping the keyspace prefix).
        if (key.size() <= prefix.size()) break;
        std::string k2 = key;
        k2[Uniform(rng, prefix.size(), k2.size() - 1)] ^=
            static_cast<char>(Uniform(rng, 1, 255));
        DeleteKey(store, key);
        PutKey(store, k2, kv[key]);
        break;
      }
      case 4:  // A garbage key in the set section.
        PutKey(store, AllSetsRange(ks).start + AdversarialBytes(rng, 20),
               AdversarialBytes(rng, 10));
        break;
      case 5:  // A garbage key in the metadata section.
        PutKey(store, MetadataRange(ks).start + AdversarialBytes(rng, 20),
               AdversarialBytes(rng, 10));
        break;
      case 6: {  // A key of the keyspace outside both sections.
        std::string k2 = prefix;
        const uint8_t section =
            static_cast<uint8_t>(Uniform(rng, 0, 1) ? 0 : Uniform(rng, 3, 255));
        k2.push_back(static_cast<char>(section));
        k2 += AdversarialBytes(rng, 10);
        PutKey(store, k2, AdversarialBytes(rng, 10));
        break;
      }
      case 7: {  // An element key with a dot of an unknown actor.
        ParsedKey pk;
        std::string set = "a";
        if (DecodeKey(key, &pk).ok() && pk.kind != KeyKind::kMetadata) {
          set = std::string(pk.set);
        }
        PutKey(store,
               ElementKey(
                   ks, set, AdversarialBytes(rng, 6),
                   Dot{0xD00D0000 + Uniform(rng, 0, 3), Uniform(rng, 1, 1000)}),
               "");
        break;
      }
    }
  }
}

// Element key dots per set of keyspace `ks`.
std::map<std::string, std::multiset<std::pair<ActorId, uint64_t>>> ElementDots(
    Store& store, KeyspaceId ks = kKs) {
  std::map<std::string, std::multiset<std::pair<ActorId, uint64_t>>> out;
  auto it = store.NewIterator(ReadOptions(), AllSetsRange(ks));
  ParsedKey pk;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    if (!DecodeKey(it->key(), &pk).ok() || pk.kind != KeyKind::kElement) {
      continue;
    }
    out[std::string(pk.set)].emplace(pk.dot.actor, pk.dot.counter);
  }
  REQUIRE(it->status().ok());
  return out;
}

void RequireVerify(Store* store, KeyspaceId ks = kKs) {
  auto r = Replica::Open(store, Options(ks));
  REQUIRE(r.ok());
  auto v = (*r)->Verify();
  REQUIRE(v.ok());
  INFO("verify: " << v->problem_count << " problems; first: "
                  << (v->problems.empty() ? "" : v->problems[0]));
  CHECK(v->ok());
  REQUIRE((*r)->Close().ok());
}

// Runs Replica::Repair and checks its contract: Verify passes, a second
// repair finds nothing and changes nothing but the actor id, and new
// updates never produce a dot equal to an existing element key's dot.
RepairReport RepairAndCheck(Store* store, KeyspaceId ks = kKs) {
  auto first = Replica::Repair(store, Options(ks));
  INFO("repair: " << first.status());
  REQUIRE(first.ok());
  CHECK(first->new_actor != 0);
  CHECK(first->new_actor != first->old_actor);
  RequireVerify(store, ks);
  KV before = Dump(*store, KeyspaceRange(ks));
  auto second = Replica::Repair(store, Options(ks));
  REQUIRE(second.ok());
  INFO("second repair losses: "
       << (second->losses.empty() ? "" : second->losses[0]));
  CHECK(second->loss_count == 0);
  CHECK(second->clocks_rebuilt == 0);
  CHECK(second->clocks_extended == 0);
  CHECK(second->tombstones_dropped == 0);
  CHECK(second->sweep_fixes == 0);
  CHECK(second->keys_deleted == 0);
  CHECK(second->old_actor == first->new_actor);
  KV after = Dump(*store, KeyspaceRange(ks));
  const std::string actor_key =
      MetadataKey(ks, replica_internal::kActorMetadata);
  before.erase(actor_key);
  after.erase(actor_key);
  CHECK(before == after);

  // New updates: every new dot is new in its set.
  auto dots_before = ElementDots(*store, ks);
  auto r = Replica::Open(store, Options(ks));
  REQUIRE(r.ok());
  CHECK((*r)->actor() == second->new_actor);
  for (const auto& [set, dots] : dots_before) {
    std::vector<UpdateOp> ops;
    ops.push_back(UpdateOp::Add("fresh-after-repair"));
    UpdateOp replace = UpdateOp::Add("e1");
    replace.context_from_replica = true;
    ops.push_back(std::move(replace));
    auto delta = (*r)->Update(set, ops);
    REQUIRE(delta.ok());
    for (const DeltaOp& op : delta->ops) {
      REQUIRE(op.add.has_value());
      const Dot d = *op.add;
      INFO("set " << replica_internal::Printable(set) << " dot "
                  << DotToString(d));
      CHECK(d.actor == second->new_actor);
      CHECK(dots.count({d.actor, d.counter}) == 0);
    }
  }
  auto v = (*r)->Verify();
  REQUIRE(v.ok());
  CHECK(v->ok());
  REQUIRE((*r)->Close().ok());
  return *first;
}

// A store Populated from Rng(seed), changed by `damage(store, rng)` with
// that Rng, then repaired (RepairAndCheck).
template <typename Damage>
RepairReport RepairDamaged(uint64_t seed, Damage damage) {
  MapStore store;
  Rng rng(seed);
  Populate(&store, rng);
  damage(store, rng);
  return RepairAndCheck(&store);
}

// Runs `body(store, rng)` once for each of Seeds(seed_count), the seed
// captured: `rng` seeded with it and `store` Populated from it.
template <typename Body>
void ForEachPopulatedSeed(int seed_count, Body body) {
  ForEachSeed(seed_count, [&](Rng& rng) {
    MapStore store;
    Populate(&store, rng);
    body(store, rng);
  });
}

TEST_CASE("repair: an undamaged keyspace loses nothing") {
  RepairReport r = RepairDamaged(1, [](MapStore&, Rng&) {});
  CHECK(r.loss_count == 0);
  CHECK(r.old_actor != 0);
}

TEST_CASE("repair: random damage to every kind of key") {
  ForEachPopulatedSeed(40, [](MapStore& store, Rng& rng) {
    Populate(&store, rng, kOtherKs);
    const KV other = Dump(store, KeyspaceRange(kOtherKs));
    Damage(store, rng, static_cast<int>(Uniform(rng, 1, 12)));
    RepairAndCheck(&store);
    // Another keyspace is never touched.
    CHECK(Dump(store, KeyspaceRange(kOtherKs)) == other);
  });
}

TEST_CASE(
    "repair: keys of the keyspace outside its metadata and set "
    "sections are deleted (Verify reports them)") {
  RepairReport r = RepairDamaged(2, [](MapStore& store, Rng&) {
    const std::string p = KeyspacePrefix(kKs);
    PutKey(store, p, "bare prefix");
    PutKey(store, p + std::string("\x00", 1) + "x", "section 0");
    PutKey(store, p + "\x03garbage", "section 3");
    PutKey(store, p + "\xff\xff", "section ff");
  });
  CHECK(r.keys_deleted == 4);
  CHECK(r.loss_count >= 4);
}

TEST_CASE("repair: an element key with counter 0 (never a dot)") {
  RepairReport r = RepairDamaged(3, [](MapStore& store, Rng&) {
    PutKey(store, ElementKey(kKs, "a", "zero", Dot{42, 0}), "");
  });
  CHECK(r.loss_count > 0);
}

TEST_CASE("repair: every clock key of a set deleted") {
  RepairReport r = RepairDamaged(4, [](MapStore& store, Rng&) {
    for (const char* set : {"a", "b", "c"}) {
      WriteBatch b;
      for (const auto& [k, v] : Dump(store, SetClocksRange(kKs, set))) {
        b.Delete(k);
      }
      REQUIRE(store.Write(WriteOptions(), b).ok());
    }
  });
  CHECK(r.clocks_rebuilt == 3);
  CHECK(r.loss_count >= 3);
}

TEST_CASE("repair: garbage in every clock, tombstone and sweep value") {
  ForEachPopulatedSeed(10, [](MapStore& store, Rng& rng) {
    for (const auto& [k, v] : Dump(store, KeyspaceRange(kKs))) {
      ParsedKey pk;
      REQUIRE(DecodeKey(k, &pk).ok());
      if (pk.kind == KeyKind::kElement) continue;
      PutKey(store, k, AdversarialBytes(rng, 30));
    }
    RepairAndCheck(&store);
  });
}

TEST_CASE("repair: an actor id of 0 is a loss (Open rejects it)") {
  RepairReport r = RepairDamaged(5, [](MapStore& store, Rng&) {
    PutKey(store, MetadataKey(kKs, replica_internal::kActorMetadata),
           replica_internal::ActorValue(0));
    // Open refuses it as undecodable.
    auto open = Replica::Open(&store, Options());
    CHECK(absl::IsDataLoss(open.status()));
  });
  CHECK(r.old_actor == 0);
  CHECK(r.loss_count == 1);
}

TEST_CASE("repair: the actor id is retired before anything else") {
  MapStore store;
  Rng rng(6);
  Populate(&store, rng);
  // Damage that needs rebuilding.
  WriteBatch b;
  for (const auto& [k, v] : Dump(store, SetClocksRange(kKs, "a"))) {
    b.Delete(k);
  }
  REQUIRE(store.Write(WriteOptions(), b).ok());
  // A store whose first write fails: nothing else may be written first.
  struct FirstWriteSeen : testing::ForwardingStore {
    std::vector<std::string> first_keys;
    int writes = 0;
    absl::Status Write(const WriteOptions& o,
                       const WriteBatch& batch) override {
      if (writes++ == 0) {
        WriteBatch::Reader reader(batch);
        WriteBatch::Op op;
        while (reader.Next(&op)) first_keys.emplace_back(op.key);
      }
      return ForwardingStore::Write(o, batch);
    }
  } spy;
  spy.set_base(&store);
  auto r = Replica::Repair(&spy, Options());
  REQUIRE(r.ok());
  REQUIRE(!spy.first_keys.empty());
  CHECK(std::count(spy.first_keys.begin(), spy.first_keys.end(),
                   MetadataKey(kKs, replica_internal::kActorMetadata)) == 1);
  for (const std::string& k : spy.first_keys) {
    ParsedKey pk;
    REQUIRE(DecodeKey(k, &pk).ok());
    CHECK(pk.kind == KeyKind::kMetadata);
  }
}

// Fails the Nth write (and every later one) without applying it: a crash.
class CrashingStore final : public testing::ForwardingStore {
 public:
  CrashingStore(Store* base, int fail_at)
      : ForwardingStore(base), fail_at_(fail_at) {}
  absl::Status Write(const WriteOptions& o, const WriteBatch& batch) override {
    if (++writes_ >= fail_at_) return absl::UnavailableError("crash");
    return ForwardingStore::Write(o, batch);
  }
  int writes() const { return writes_; }

 private:
  int fail_at_;
  int writes_ = 0;
};

TEST_CASE("repair: interrupted at every write, then run again") {
  ForEachPopulatedSeed(6, [](MapStore& base, Rng& rng) {
    Damage(base, rng, 10);
    const KV damaged = Dump(base, KeyspaceRange(kKs));
    for (int n = 1; n < 100; ++n) {
      CAPTURE(n);
      MapStore store;
      Load(store, damaged);
      CrashingStore crashing(&store, n);
      auto r = Replica::Repair(&crashing, Options());
      if (r.ok()) break;  // Fewer than n writes: done.
      CHECK(absl::IsUnavailable(r.status()));
      // The interrupted repair retired the actor (or wrote nothing): an
      // Open without repair never keeps the old actor.
      if (n > 1) {
        auto open = Replica::Open(&store, Options());
        if (open.ok()) {
          CHECK((*open)->started_new_epoch());
          REQUIRE((*open)->Close().ok());
        }
      }
      RepairAndCheck(&store);
    }
  });
}

TEST_CASE("repair: refuses read-only options and a null store") {
  MapStore store;
  ReplicaOptions o = Options();
  o.read_only = true;
  CHECK(absl::IsInvalidArgument(Replica::Repair(&store, o).status()));
  CHECK(absl::IsInvalidArgument(Replica::Repair(nullptr, Options()).status()));
  CHECK(Dump(store, KeyspaceRange(kKs)).empty());
}

TEST_CASE("read-only replica: writes nothing, every change fails") {
  MapStore store;
  Rng rng(7);
  Populate(&store, rng);
  const KV before = Dump(store, KeyspaceRange(kKs));
  ReplicaOptions o = Options();
  o.read_only = true;
  auto r = Replica::Open(&store, o);
  REQUIRE(r.ok());
  Replica& rep = **r;
  CHECK(rep.actor() != 0);
  CHECK(absl::IsFailedPrecondition(
      rep.Update("a", std::vector<UpdateOp>{UpdateOp::Add("x")}).status()));
  auto clock = rep.GetClock("a");
  REQUIRE(clock.ok());
  CHECK(absl::IsFailedPrecondition(rep.Clear("a", *clock).status()));
  CHECK(absl::IsFailedPrecondition(rep.SweepSome(100).status()));
  CHECK(absl::IsFailedPrecondition(rep.StartSweeper()));
  auto v = rep.Verify();
  REQUIRE(v.ok());
  CHECK(v->ok());
  CHECK(rep.Close().ok());
  r->reset();
  CHECK(Dump(store, KeyspaceRange(kKs)) == before);
  // An empty keyspace: actor 0, nothing written.
  ReplicaOptions o2 = Options(99);
  o2.read_only = true;
  auto empty = Replica::Open(&store, o2);
  REQUIRE(empty.ok());
  CHECK((*empty)->actor() == 0);
  empty->reset();  // Destroyed without Close.
  CHECK(Dump(store, KeyspaceRange(99)).empty());
}

// ---- LevelDB on disk.

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/bigset-repair-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string path;
};

// Every file under `dir` (recursively) and its bytes.
std::map<std::string, std::string> Files(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_directory()) {
      out[e.path().string()] = "<dir>";
      continue;
    }
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    out[e.path().string()] = ss.str();
  }
  return out;
}

std::unique_ptr<LevelDbStore> OpenStore(const std::string& path, bool read_only,
                                        size_t write_buffer = 4 << 20) {
  LevelDbStoreOptions o;
  o.read_only = read_only;
  o.write_buffer_bytes = write_buffer;
  auto s = LevelDbStore::Open(path, o);
  INFO(s.status());
  REQUIRE(s.ok());
  return std::move(*s);
}

// Writes `n` keys of about 100 bytes under keyspace kKs's metadata; the
// last ones stay in the log.
void FillDb(const std::string& path, int n, int from = 0) {
  auto store = OpenStore(path, false, 64 << 10);
  for (int i = from; i < from + n; ++i) {
    PutKey(*store, MetadataKey(kKs, absl::StrCat("k", 100000 + i)),
           std::string(100, static_cast<char>('a' + i % 26)));
  }
}

// Runs `child` in a forked process (which must only make system calls)
// and returns its exit status.
template <typename F>
int InChild(F child) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) ::_exit(child());
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

// In another process: 0 if an exclusive lock of `lock_file` could be taken
// (the way a LevelDB writer takes it), 1 if it is held, 2 on error.
int WriterCouldLock(const std::string& lock_file) {
  return InChild([&lock_file]() {
    int fd = ::open(lock_file.c_str(), O_RDWR);
    if (fd < 0) return 2;
    struct flock fl = {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    return ::fcntl(fd, F_SETLK, &fl) == 0 ? 0 : 1;
  });
}

TEST_CASE(
    "read-only store: a log of unflushed writes, reads and a "
    "compaction in memory change no file") {
  TempDir dir;
  const std::string db = dir.path + "/db";
  FillDb(db, 3000);  // Several tables and a log.
  FillDb(db, 2000, 3000);
  const auto files = Files(db);
  {
    // A small write buffer: replaying the log writes level-0 tables (in
    // memory), which schedules compactions.
    auto store = OpenStore(db, true, 16 << 10);
    CHECK(store->read_only());
    KV kv = Dump(*store, MetadataRange(kKs));
    CHECK(kv.size() == 5000);
    CHECK(kv[MetadataKey(kKs, "k104999")] == std::string(100, 'a' + 4999 % 26));
    std::string v;
    for (int i = 0; i < 5000; i += 7) {
      REQUIRE(store
                  ->Get(ReadOptions(),
                        MetadataKey(kKs, absl::StrCat("k", 100000 + i)), &v)
                  .ok());
    }
    WriteBatch b;
    b.Put(MetadataKey(kKs, "x"), "y");
    CHECK(absl::IsFailedPrecondition(store->Write(WriteOptions(), b)));
    CHECK(absl::IsFailedPrecondition(store->CompactRange(KeyspaceRange(kKs))));
    // A read-only replica over it.
    ReplicaOptions o = Options();
    o.read_only = true;
    auto r = Replica::Open(store.get(), o);
    REQUIRE(r.ok());
    CHECK((*r)->Close().ok());
  }
  CHECK(Files(db) == files);
  // And the database still opens for writing with everything in it.
  auto store = OpenStore(db, false);
  CHECK(Dump(*store, MetadataRange(kKs)).size() == 5000);
}

TEST_CASE(
    "read-only store: a missing path or an empty directory is "
    "NotFound and nothing is created") {
  TempDir dir;
  LevelDbStoreOptions o;
  o.read_only = true;
  const std::string missing = dir.path + "/none";
  CHECK(absl::IsNotFound(LevelDbStore::Open(missing, o).status()));
  CHECK(!std::filesystem::exists(missing));
  const std::string empty = dir.path + "/empty";
  std::filesystem::create_directory(empty);
  CHECK(absl::IsNotFound(LevelDbStore::Open(empty, o).status()));
  CHECK(std::filesystem::is_empty(empty));
  // create_if_missing is ignored when read-only.
  o.create_if_missing = true;
  CHECK(absl::IsNotFound(LevelDbStore::Open(missing, o).status()));
  CHECK(!std::filesystem::exists(missing));
}

TEST_CASE(
    "read-only store: the shared lock keeps writers of other "
    "processes out, and a writer keeps it out") {
  TempDir dir;
  const std::string db = dir.path + "/db";
  FillDb(db, 10);
  const std::string lock = db + "/LOCK";
  REQUIRE(WriterCouldLock(lock) == 0);
  {
    auto ro = OpenStore(db, true);
    CHECK(WriterCouldLock(lock) == 1);
  }
  CHECK(WriterCouldLock(lock) == 0);

  // Two read-only stores in one process: closing one must not release the
  // lock the other holds.
  {
    auto ro1 = OpenStore(db, true);
    {
      auto ro2 = OpenStore(db, true);
      CHECK(WriterCouldLock(lock) == 1);
    }
    CHECK(WriterCouldLock(lock) == 1);
    std::string v;
    CHECK(ro1->Get(ReadOptions(), MetadataKey(kKs, "k100001"), &v).ok());
  }
  CHECK(WriterCouldLock(lock) == 0);

  // A writer in another process: the read-only open fails (Unavailable).
  int to_child[2], from_child[2];
  REQUIRE(::pipe(to_child) == 0);
  REQUIRE(::pipe(from_child) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int fd = ::open(lock.c_str(), O_RDWR);
    struct flock fl = {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    char c = (fd >= 0 && ::fcntl(fd, F_SETLK, &fl) == 0) ? 'L' : 'E';
    if (::write(from_child[1], &c, 1) != 1) ::_exit(3);
    if (::read(to_child[0], &c, 1) < 0) ::_exit(3);
    ::_exit(0);
  }
  char c = 0;
  REQUIRE(::read(from_child[0], &c, 1) == 1);
  REQUIRE(c == 'L');
  const auto files = Files(db);
  LevelDbStoreOptions o;
  o.read_only = true;
  auto s = LevelDbStore::Open(db, o);
  CHECK(absl::IsUnavailable(s.status()));
  CHECK(Files(db) == files);
  REQUIRE(::write(to_child[1], "x", 1) == 1);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) {
    ::close(fd);
  }
}

TEST_CASE(
    "LevelDbStore::Repair: refuses a store that is open (its lock "
    "is held) and changes no file") {
  TempDir dir;
  const std::string db = dir.path + "/db";
  FillDb(db, 200);
  auto store = OpenStore(db, false);
  PutKey(*store, MetadataKey(kKs, "live"), "in the log");
  const auto files = Files(db);
  LevelDbStoreOptions o;
  o.create_if_missing = false;
  auto r = LevelDbStore::Repair(db, o);
  CHECK(absl::IsUnavailable(r.status()));
  CHECK(Files(db) == files);
}

// A LevelDB log record (one block-sized fragment, type kFullType).
std::string LogRecord(std::string_view payload) {
  std::string type_and_data(1, '\x01');
  type_and_data.append(payload);
  uint32_t crc = crc32c::Value(type_and_data);
  crc = ((crc >> 15) | (crc << 17)) + 0xa282ead8u;  // LevelDB's mask.
  std::string rec;
  for (int i = 0; i < 4; ++i) rec.push_back(static_cast<char>(crc >> (8 * i)));
  rec.push_back(static_cast<char>(payload.size() & 0xff));
  rec.push_back(static_cast<char>(payload.size() >> 8));
  rec.append(type_and_data);
  return rec;
}

TEST_CASE(
    "LevelDbStore::Repair: a log record whose batch is malformed is "
    "counted as lost") {
  TempDir dir;
  const std::string db = dir.path + "/db";
  FillDb(db, 50);
  // A well-checksummed log record that holds a malformed write batch
  // (sequence 1000, count 1, an unknown tag): LevelDB's repair logs
  // "Log #N: ignoring ..." and drops it.
  std::string batch;
  for (int i = 0; i < 8; ++i) batch.push_back(i == 1 ? '\x03' : '\0');
  batch.append(std::string("\x01\0\0\0", 4));
  batch.append("\x09garbage");
  {
    std::ofstream out(db + "/009999.log", std::ios::binary);
    out << LogRecord(batch);
  }
  LevelDbStoreOptions o;
  o.create_if_missing = false;
  auto r = LevelDbStore::Repair(db, o);
  REQUIRE(r.ok());
  std::string log;
  for (const std::string& l : r->log) log += l + "\n";
  INFO(log);
  CHECK(r->lost_data());
}

}  // namespace
}  // namespace bigset::testing
