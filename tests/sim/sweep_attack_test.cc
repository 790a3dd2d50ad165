// Attacks on the sweep protocol and on Clear (docs/DESIGN.md section 5):
// bad bytes in the sweep metadata, crashes and power losses between any two
// batches of a clear or a sweep, concurrency with the background sweeper,
// and clears over a cluster.
//
// Tests tagged [regression] reproduce a defect these attacks found
// (a queue entry under a wrong shard byte looped SweepSome for ever; a bad
// set starved the rest of its shard; a flipped cursor brought cleared
// elements back; entries with no keys left escaped the budget; StopSweeper
// racing StartSweeper hung; a kClear naming another partition was applied
// there). The sweep_test and crash_test did not find them because they
// damaged only whole values and never raced the sweeper's controls.

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bigset/cluster/node.h"
#include "bigset/keys/keys.h"
#include "bigset/replica/replica.h"
#include "bigset/store/leveldb_store.h"
#include "bigset/testing/fault_env.h"
#include "bigset/testing/sim.h"
#include "forwarding_store.h"
#include "leveldb/env.h"
#include "leveldb/helpers/memenv.h"
#include "manual_cluster.h"
#include "net/message.h"
#include "orswot_model.h"
#include "replica/replica_internal.h"
#include "sweep_util.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

constexpr KeyspaceId kKs = testing::kSweepKs;
const std::string kV = SweepValue("");

// ---- A store that can crash, and that can stop a runaway loop.

class ErrorIterator final : public Iterator {
 public:
  explicit ErrorIterator(absl::Status s) : s_(std::move(s)) {}
  bool Valid() const override { return false; }
  void SeekToFirst() override {}
  void Seek(std::string_view) override {}
  void Next() override {}
  std::string_view key() const override { return {}; }
  std::string_view value() const override { return {}; }
  absl::Status status() const override { return s_; }

 private:
  absl::Status s_;
};

// Forwards to `base`. After `writes_left` more writes it "crashes": every
// later write (and compaction) fails without being applied, as if the
// process had died just before it. After `iterator_fuse` iterators it hands
// out failing iterators, which stops a loop that would never end.
class FaultyStore final : public testing::ForwardingStore {
 public:
  explicit FaultyStore(Store* base) : ForwardingStore(base) {}

  std::atomic<int64_t> writes_left{-1};  // -1: no crash.
  std::atomic<uint64_t> writes{0};
  std::atomic<uint64_t> iterators{0};
  std::atomic<uint64_t> iterator_fuse{UINT64_MAX};
  std::atomic<bool> fuse_blown{false};
  std::atomic<uint64_t> compactions{0};
  // Every fail_every-th write fails (transiently) without being applied.
  std::atomic<uint64_t> fail_every{0};
  bool crashed() const { return crashed_.load(); }

  absl::Status Write(const WriteOptions& o, const WriteBatch& b) override {
    if (crashed_.load()) return absl::UnavailableError("crashed");
    if (const uint64_t k = fail_every.load(); k > 0 && ++attempts_ % k == 0) {
      return absl::UnavailableError("transient write failure");
    }
    int64_t left = writes_left.load();
    if (left == 0) {
      crashed_.store(true);
      return absl::UnavailableError("crashed");
    }
    if (left > 0) writes_left.store(left - 1);
    ++writes;
    return ForwardingStore::Write(o, b);
  }
  std::unique_ptr<Iterator> NewIterator(const ReadOptions& o,
                                        KeyRange r) override {
    if (++iterators > iterator_fuse.load()) {
      fuse_blown.store(true);
      return std::make_unique<ErrorIterator>(
          absl::AbortedError("iterator fuse blown: a loop that never ends"));
    }
    return ForwardingStore::NewIterator(o, std::move(r));
  }
  absl::Status CompactRange(const KeyRange& r) override {
    if (crashed_.load()) return absl::UnavailableError("crashed");
    ++compactions;
    return ForwardingStore::CompactRange(r);
  }

 private:
  std::atomic<bool> crashed_{false};
  std::atomic<uint64_t> attempts_{0};
};

// ---- Helpers.

// Sweeps until idle (at most `calls` calls), with `budget` keys per call.
// Returns false if some call failed or it never went idle.
bool TrySweepAll(Replica& r, uint64_t budget = UINT64_MAX, int calls = 2000) {
  for (int i = 0; i < calls; ++i) {
    auto p = r.SweepSome(budget);
    if (!p.ok()) {
      UNSCOPED_INFO("SweepSome: " << p.status().ToString());
      return false;
    }
    if (p->idle) return true;
  }
  UNSCOPED_INFO("the sweep queue never emptied");
  return false;
}

// After a full sweep: no tombstone is left, no queue entry, and the element
// keys on disk are exactly the present elements' dots.
void RequireFullySwept(Replica& r, Store& store,
                       const std::vector<std::string>& sets) {
  REQUIRE(TrySweepAll(r));
  CHECK(r.stats().sweep_queue_length == 0);
  CHECK_FALSE(r.sweep_pending());
  for (const std::string& set : sets) {
    CAPTURE(set);
    auto st = r.GetSetStats(set);
    REQUIRE(st.ok());
    CHECK(st->tombstone_dots == 0);
    uint64_t dots = 0;
    for (const auto& e : ReadAll(r, set)) dots += e.dots.size();
    CHECK(ElementKeys(store, set) == dots);
  }
  RequireVerified(r);
}

// Two set names in the same sweep shard, `first` < `second` bytewise.
std::pair<std::string, std::string> SameShardSets() {
  const std::string first = "bad";
  for (int i = 0;; ++i) {
    std::string s = absl::StrCat("ok", i);
    if (replica_internal::SweepShardOf(s) ==
        replica_internal::SweepShardOf(first)) {
      return {first, s};
    }
  }
}

// =====================================================================
// 1. Bad bytes.
// =====================================================================

TEST_CASE(
    "sweep attack: a queue entry under the wrong shard byte does not make "
    "SweepSome loop forever",
    "[regression]") {
  // A queue key whose shard byte is not crc32c(set) % 16: the finish (and
  // the empty-tombstone path) deletes SweepQueueKey(set), which is another
  // key, so the entry is found again and again while no key is read: the
  // budget never runs out and SweepSome never returns. The fuse stops it.
  for (const std::string set : {"x", "s", ""}) {
    CAPTURE(set);
    MemStore mem;
    FaultyStore fs(mem.store.get());
    auto r = OpenSweepReplica(&fs);
    AddRange(*r, "s", 0, 30);
    ClearAll(*r, "s");
    AddRange(*r, "live", 0, 10);
    const uint8_t wrong =
        static_cast<uint8_t>((replica_internal::SweepShardOf(set) + 5) % 16);
    Put(*mem.store, QueueKeyWithShard(wrong, set), kV);
    // Verify does report it.
    auto report = r->Verify();
    REQUIRE(report.ok());
    CHECK_FALSE(report->ok());

    fs.iterators = 0;
    fs.iterator_fuse = 20000;
    auto p = r->SweepSome(UINT64_MAX);
    const bool looped = fs.fuse_blown.load();
    fs.iterator_fuse = UINT64_MAX;
    INFO("iterators opened by one SweepSome: " << fs.iterators.load());
    INFO("SweepSome: " << (p.ok() ? std::string("ok")
                                  : std::string(p.status().ToString())));
    CHECK_FALSE(looped);
    // Expected: a clear error for the malformed entry (or the entry
    // dropped), the good set swept, nothing live deleted.
    CHECK((p.ok() || p.status().code() == absl::StatusCode::kDataLoss));
    CHECK(ElementKeys(*mem.store, "s") == 0);
    CHECK(*r->Count("live") == 10);
  }
}

TEST_CASE("attack: a queue entry with a shard byte >= 16 is reported") {
  MemStore mem;
  auto r = OpenSweepReplica(mem.store.get());
  AddRange(*r, "s", 0, 10);
  ClearAll(*r, "s");
  Put(*mem.store, QueueKeyWithShard(0x20, "s"), kV);
  Put(*mem.store, QueueKeyWithShard(0xFF, ""), kV);
  auto report = r->Verify();
  REQUIRE(report.ok());
  CHECK(report->problem_count == 2);
  REQUIRE(TrySweepAll(*r));
  CHECK(ElementKeys(*mem.store, "s") == 0);
  CHECK(*r->Count("s") == 0);
}

TEST_CASE("attack: garbage values of queue entries do not break the sweep") {
  MemStore mem;
  auto r = OpenSweepReplica(mem.store.get());
  AddRange(*r, "s", 0, 40);
  ClearAll(*r, "s");
  AddRange(*r, "s", 40, 50);
  // The value of a real entry replaced by garbage: Verify reports it, the
  // sweep still sweeps, no live key goes.
  Put(*mem.store, replica_internal::SweepQueueKey(kKs, "s"), "\x07garbage");
  auto report = r->Verify();
  REQUIRE(report.ok());
  CHECK_FALSE(report->ok());
  REQUIRE(TrySweepAll(*r));
  CHECK(*r->Count("s") == 10);
  CHECK(ElementKeys(*mem.store, "s") == 10);
  RequireVerified(*r);
}

TEST_CASE(
    "sweep attack: a set with bad sweep state does not starve the other sets "
    "of its shard",
    "[regression]") {
  // replica.h: "On an error (e.g. a set's undecodable sweep state) the next
  // call starts at the next shard, so one bad set does not stop the
  // others." But SweepSome always takes the FIRST entry of a shard: a bad
  // set blocks every set queued after it in its shard, forever.
  const auto [bad, good] = SameShardSets();
  REQUIRE(bad < good);
  MemStore mem;
  auto r = OpenSweepReplica(mem.store.get());
  AddRange(*r, bad, 0, 30);
  ClearAll(*r, bad);
  AddRange(*r, good, 0, 30);
  ClearAll(*r, good);
  AddRange(*r, good, 30, 35);
  // The bad set's sweep state is undecodable.
  Put(*mem.store, SnapshotKey(bad), SweepValue("\xff\xff\xff"));
  Put(*mem.store, CursorKey(bad), kV);
  int errors = 0;
  for (int i = 0; i < 64; ++i) {
    auto p = r->SweepSome(UINT64_MAX);
    if (!p.ok()) {
      CHECK(p.status().code() == absl::StatusCode::kDataLoss);
      ++errors;
    }
  }
  CHECK(errors > 0);
  CHECK(*r->Count(good) == 5);
  INFO("keys of the good set after 64 sweeps: " << ElementKeys(*mem.store,
                                                               good));
  CHECK(ElementKeys(*mem.store, good) == 5);
  CHECK(r->GetSetStats(good)->tombstone_dots == 0);
}

TEST_CASE(
    "sweep attack: a corrupted sweep cursor inside the set's range never "
    "resurrects cleared elements",
    "[regression]") {
  // The cursor is only checked to lie in the set's element range. A bit
  // flip that moves it forward (or any undecodable bytes in range) makes
  // the sweep skip keys it never deleted; the finish then subtracts the
  // whole snapshot from the tombstone, and the skipped cleared elements
  // come back.
  SECTION("a bit flip in the cursor's element") {
    MemStore mem;
    auto r = OpenSweepReplica(mem.store.get());
    AddRange(*r, "s", 0, 100);
    ClearAll(*r, "s");
    AddRange(*r, "s", 100, 120);
    auto p = r->SweepSome(11);  // One for the entry, ten keys.
    REQUIRE(p.ok());
    REQUIRE(p->keys_read == 10);
    std::string cursor;
    REQUIRE(mem.store->Get(ReadOptions(), CursorKey("s"), &cursor).ok());
    const size_t at = cursor.find("e1000");
    REQUIRE(at != std::string::npos);
    cursor[at + 1] ^= 0x08;  // '1' -> '9': "e9000.." sorts after everything.
    Put(*mem.store, CursorKey("s"), cursor);
    auto report = r->Verify();
    REQUIRE(report.ok());
    INFO("Verify problems after the flip: " << report->problem_count);
    for (int i = 0; i < 5; ++i) (void)r->SweepSome(UINT64_MAX);
    CHECK(*r->Count("s") == 20);
  }
  SECTION("undecodable bytes inside the set's element range") {
    MemStore mem;
    auto r = OpenSweepReplica(mem.store.get());
    AddRange(*r, "s", 0, 100);
    ClearAll(*r, "s");
    AddRange(*r, "s", 100, 120);
    REQUIRE(r->SweepSome(10).ok());
    // The range's start followed by 0xFF: in range, not an element key.
    Put(*mem.store, CursorKey("s"),
        SweepValue(ElementsRange(kKs, "s").start + "\xff\xff"));
    std::vector<absl::StatusCode> codes;
    for (int i = 0; i < 5; ++i) {
      auto got = r->SweepSome(UINT64_MAX);
      codes.push_back(got.ok() ? absl::StatusCode::kOk : got.status().code());
    }
    CHECK(codes[0] == absl::StatusCode::kDataLoss);
    CHECK(*r->Count("s") == 20);
  }
}

TEST_CASE(
    "attack: random sweep state never deletes a live key nor "
    "resurrects a cleared one (truncations)") {
  // Truncated snapshots and cursors: a truncated cursor is a prefix, so it
  // only makes the sweep re-read keys. Random garbage for either value.
  for (uint64_t seed : Seeds(30)) {
    CAPTURE(seed);
    Rng rng(seed);
    MemStore mem;
    auto r = OpenSweepReplica(mem.store.get());
    AddRange(*r, "s", 0, 60);
    ClearAll(*r, "s");
    AddRange(*r, "s", 60, 80);
    AddRange(*r, "t", 0, 10);
    ClearAll(*r, "t");
    REQUIRE(r->SweepSome(Uniform(rng, 1, 50)).ok());
    const bool snap = Uniform(rng, 0, 1) == 0;
    const std::string key = snap ? SnapshotKey("s") : CursorKey("s");
    std::string value;
    if (!mem.store->Get(ReadOptions(), key, &value).ok()) continue;
    if (Uniform(rng, 0, 1) == 0) {
      value.resize(Uniform(rng, 0, value.size()));
    } else {
      value = AdversarialBytes(rng, 40);
    }
    Put(*mem.store, key, value);
    for (int i = 0; i < 40; ++i) (void)r->SweepSome(UINT64_MAX);
    REQUIRE(*r->Count("s") == 20);
    REQUIRE(ElementKeys(*mem.store, "s") >= 20);
    REQUIRE(*r->Count("t") == 0);
  }
}

TEST_CASE("attack: bad tombstone or clock of a queued set is DataLoss") {
  MemStore mem;
  auto r = OpenSweepReplica(mem.store.get());
  AddRange(*r, "s", 0, 30);
  ClearAll(*r, "s");
  // Garbage tombstone header.
  Put(*mem.store, SetStateKey(kKs, "s", StateKind::kTombstone), "\xff\xff");
  r.reset();
  r = OpenSweepReplica(mem.store.get());
  auto p = r->SweepSome(UINT64_MAX);
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().code() == absl::StatusCode::kDataLoss);
  CHECK(ElementKeys(*mem.store, "s") == 30);
}

TEST_CASE("attack: sets with adversarial names are swept exactly") {
  for (uint64_t seed : Seeds(5)) {
    CAPTURE(seed);
    Rng rng(seed);
    MemStore mem;
    auto r = OpenSweepReplica(mem.store.get());
    std::set<std::string> names = {"",
                                   std::string(1, '\0'),
                                   std::string("\0\0", 2),
                                   "\xff",
                                   "s",
                                   std::string("s\0", 2),
                                   "s\xff"};
    while (names.size() < 20) names.insert(AdversarialBytes(rng, 12));
    std::vector<std::string> sets(names.begin(), names.end());
    for (const auto& set : sets) {
      AddRange(*r, set, 0, static_cast<int>(Uniform(rng, 1, 30)));
      if (Uniform(rng, 0, 2) != 0) ClearAll(*r, set);
      AddRange(*r, set, 100, 100 + static_cast<int>(Uniform(rng, 0, 5)));
    }
    std::map<std::string, ModelValue> before;
    for (const auto& set : sets) before[set] = ToModel(ReadAll(*r, set));
    while (true) {
      auto p = r->SweepSome(Uniform(rng, 1, 9));
      REQUIRE(p.ok());
      if (p->idle) break;
    }
    for (const auto& set : sets) {
      CAPTURE(set);
      REQUIRE(ToModel(ReadAll(*r, set)) == before[set]);
    }
    RequireFullySwept(*r, *mem.store, sets);
  }
}

// =====================================================================
// 2. Crashes at every step.
// =====================================================================

// One deterministic workload of clears and small sweeps on `r`, with a
// peer replica whose deltas (adds and a clear) arrive in the middle. Each
// step that succeeds records the values of the sets in `acked`; the
// workload stops at the first failed step (the crash).
struct Workload {
  std::vector<std::string> sets = {"s", "t", "u"};
  std::map<std::string, ModelValue> acked;

  // Returns true if it ran to the end.
  bool Run(Replica& r, Replica& peer, uint64_t seed) {
    Rng rng(seed);
    auto record = [&]() {
      for (const auto& s : sets) acked[s] = ToModel(ReadAll(r, s));
    };
    auto update = [&](std::string_view set, std::vector<UpdateOp> ops) -> bool {
      auto d = r.Update(set, ops);
      if (!d.ok()) return false;
      REQUIRE(peer.Apply(*d).ok());
      record();
      return true;
    };
    auto clear = [&](std::string_view set) -> bool {
      auto clock = r.GetClock(set);
      REQUIRE(clock.ok());
      auto d = r.Clear(set, *clock);
      if (!d.ok()) return false;
      REQUIRE(peer.Apply(*d).ok());
      record();
      return true;
    };
    auto sweep = [&](uint64_t budget) -> bool {
      auto p = r.SweepSome(budget);
      if (!p.ok()) return false;
      // A sweep never changes a value.
      for (const auto& s : sets) REQUIRE(ToModel(ReadAll(r, s)) == acked[s]);
      return true;
    };
    auto apply = [&](const Delta& d) -> bool {
      if (!r.Apply(d).ok()) return false;
      record();
      return true;
    };
    record();
    for (const auto& s : sets) {
      std::vector<UpdateOp> ops;
      for (int i = 0; i < 40; ++i) {
        ops.push_back(UpdateOp::Add(absl::StrCat(s, "-", i)));
      }
      if (!update(s, ops)) return false;
    }
    if (!clear("s")) return false;
    if (!update("s", {UpdateOp::Add("s-late1"), UpdateOp::Add("s-late2")})) {
      return false;
    }
    if (!sweep(7) || !sweep(5)) return false;
    // The peer adds, then clears "s" with its own clock, which covers ours.
    std::vector<UpdateOp> peer_ops;
    for (int i = 0; i < 10; ++i) {
      peer_ops.push_back(UpdateOp::Add(absl::StrCat("s-peer", i)));
    }
    auto pd = peer.Update("s", peer_ops);
    REQUIRE(pd.ok());
    if (!apply(*pd)) return false;
    if (!sweep(3)) return false;
    UpdateOp concurrent = UpdateOp::Add("s-concurrent");
    if (!update("s", {concurrent})) return false;
    // The peer's clock does not hold "s-concurrent": it survives.
    auto pclock = peer.GetClock("s");
    REQUIRE(pclock.ok());
    auto pclear = peer.Clear("s", *pclock);
    REQUIRE(pclear.ok());
    if (!apply(*pclear)) return false;
    if (!sweep(Uniform(rng, 1, 20))) return false;
    if (!clear("t")) return false;
    UpdateOp rm;
    rm.kind = UpdateOp::Kind::kRemove;
    rm.element = "u-3";
    rm.context_from_replica = true;
    if (!update("u", {rm, UpdateOp::Add("u-new")})) return false;
    if (!sweep(Uniform(rng, 1, 20))) return false;
    if (!apply(*pclear)) return false;  // Duplicated.
    if (!clear("u")) return false;
    for (int i = 0; i < 4; ++i) {
      if (!sweep(Uniform(rng, 1, 30))) return false;
    }
    if (!update("t", {UpdateOp::Add("t-after")})) return false;
    if (!sweep(UINT64_MAX)) return false;
    if (!apply(*pd)) return false;  // A late duplicate of an add.
    if (!sweep(UINT64_MAX)) return false;
    return true;
  }
};

TEST_CASE(
    "attack: a crash before any write of clears and sweeps loses nothing "
    "and resumes") {
  for (uint64_t seed : Seeds(2)) {
    CAPTURE(seed);
    bool finished = false;
    int crash_at = 0;
    for (; !finished && crash_at < 400; ++crash_at) {
      CAPTURE(crash_at);
      MemStore mem;
      MemStore peer_mem;
      auto peer = OpenSweepReplica(peer_mem.store.get(), false, 9);
      Workload w;
      {
        FaultyStore fs(mem.store.get());
        auto r = OpenSweepReplica(&fs);
        fs.writes_left = crash_at;
        finished = w.Run(*r, *peer, seed);
        if (finished) {
          REQUIRE_FALSE(fs.crashed());
        } else {
          REQUIRE(fs.crashed());
        }
        // Destroyed without Close: a crash.
      }
      auto r = OpenSweepReplica(mem.store.get());
      RequireVerified(*r);
      for (const auto& s : w.sets) {
        CAPTURE(s);
        REQUIRE(ToModel(ReadAll(*r, s)) == w.acked[s]);
      }
      CHECK(r->sweep_pending());
      RequireFullySwept(*r, *mem.store, w.sets);
      for (const auto& s : w.sets) {
        REQUIRE(ToModel(ReadAll(*r, s)) == w.acked[s]);
      }
    }
    CHECK(finished);
    INFO("crash points tried: " << crash_at);
    CHECK(crash_at > 20);
  }
}

TEST_CASE(
    "attack: transient write failures during clears and sweeps, on a "
    "replica that keeps running") {
  for (uint64_t seed : Seeds(6)) {
    CAPTURE(seed);
    Rng rng(seed);
    MemStore mem;
    FaultyStore fs(mem.store.get());
    auto r = OpenSweepReplica(&fs);
    fs.fail_every = Uniform(rng, 2, 6);
    std::map<std::string, OrswotModel> models;
    const std::vector<std::string> sets = {"a", "b"};
    int failures = 0;
    auto check_values = [&]() {
      for (const auto& s : sets) {
        CAPTURE(s);
        REQUIRE(ToModel(ReadAll(*r, s)) == models[s].Value());
        // Failed writes must leave the count as they leave the set. (A
        // count not known is counted and stored: that write may fail too,
        // once in a row at most.)
        auto count = r->Count(s);
        if (!count.ok()) count = r->Count(s);
        REQUIRE(count.ok());
        REQUIRE(*count == models[s].Value().size());
      }
    };
    for (int step = 0; step < 600; ++step) {
      CAPTURE(step);
      const std::string set = sets[Uniform(rng, 0, 1)];
      absl::StatusOr<Delta> d;
      switch (Uniform(rng, 0, 5)) {
        case 0:
        case 1: {
          std::vector<UpdateOp> ops;
          for (int k = 0, n = static_cast<int>(Uniform(rng, 1, 8)); k < n;
               ++k) {
            ops.push_back(
                UpdateOp::Add(absl::StrCat("e", Uniform(rng, 0, 40))));
          }
          d = r->Update(set, ops);
          break;
        }
        case 2: {
          UpdateOp rm;
          rm.kind = UpdateOp::Kind::kRemove;
          rm.element = absl::StrCat("e", Uniform(rng, 0, 40));
          rm.context_from_replica = true;
          d = r->Update(set, std::span(&rm, 1));
          break;
        }
        case 3: {
          auto clock = r->GetClock(set);
          REQUIRE(clock.ok());
          d = r->Clear(set, *clock);
          break;
        }
        default: {
          auto p = r->SweepSome(Uniform(rng, 1, 25));
          if (!p.ok()) ++failures;
          continue;
        }
      }
      if (d.ok()) {
        models[set].Absorb(*d);
      } else {
        // A failed write changed nothing.
        REQUIRE(d.status().code() == absl::StatusCode::kUnavailable);
        ++failures;
      }
      if (step % 25 == 0) {
        check_values();
        RequireVerified(*r);
      }
    }
    CHECK(failures > 0);
    fs.fail_every = 0;
    check_values();
    RequireVerified(*r);
    RequireFullySwept(*r, *mem.store, sets);
    check_values();
  }
}

TEST_CASE(
    "attack: a power loss at any write of clears and sweeps keeps a "
    "consistent prefix") {
  // LevelDB over a FaultEnv: crash after k writes, lose every unsynced
  // byte, reopen. With sync_writes nothing acknowledged may be lost;
  // without, the state is that of some earlier step. Either way Verify
  // passes and a full sweep drains every tombstone.
  for (bool sync : {true, false}) {
    CAPTURE(sync);
    int tried = 0, lost_something = 0;
    for (int crash_at = 0; crash_at < 120; ++crash_at) {
      CAPTURE(crash_at);
      std::unique_ptr<leveldb::Env> mem(
          leveldb::NewMemEnv(leveldb::Env::Default()));
      FaultEnv env(mem.get());
      LevelDbStoreOptions so;
      so.env = &env;
      so.write_buffer_bytes = 16 << 10;  // Flushes within the workload.
      MemStore peer_mem;
      auto peer = OpenSweepReplica(peer_mem.store.get(), false, 9);
      Workload w;
      std::vector<std::map<std::string, ModelValue>> history;
      bool finished = false;
      {
        auto store = LevelDbStore::Open("/power", so);
        REQUIRE(store.ok());
        FaultyStore fs(store->get());
        {
          auto r = OpenSweepReplica(&fs, sync);
          fs.writes_left = crash_at;
          finished = w.Run(*r, *peer, 77);
        }
      }
      REQUIRE(env.DropUnsynced("/power/").ok());
      auto store = LevelDbStore::Open("/power", so);
      REQUIRE(store.ok());
      auto r = OpenSweepReplica(store->get(), sync);
      RequireVerified(*r);
      std::map<std::string, ModelValue> got;
      for (const auto& s : w.sets) got[s] = ToModel(ReadAll(*r, s));
      if (sync) {
        CHECK(got == w.acked);
      }
      RequireFullySwept(*r, **store, w.sets);
      std::map<std::string, ModelValue> after;
      for (const auto& s : w.sets) after[s] = ToModel(ReadAll(*r, s));
      CHECK(after == got);
      ++tried;
      if (!sync && got != w.acked) ++lost_something;
      if (finished) break;
    }
    INFO("crash points tried: " << tried << ", runs that lost unsynced steps: "
                                << lost_something);
    CHECK(tried > 10);
  }
}

// =====================================================================
// 3. Concurrency and reordering.
// =====================================================================

TEST_CASE(
    "attack: deltas with clears, in any order and duplicated, with partial "
    "sweeps in between, equal the model") {
  for (uint64_t seed : Seeds(8)) {
    CAPTURE(seed);
    Rng rng(seed);
    // Three source replicas produce deltas; the target applies them
    // shuffled and duplicated, sweeping in small steps all along.
    std::vector<MemStore> mems(4);
    std::vector<std::unique_ptr<Replica>> src;
    // Seeded actor ids: two runs of one seed are the same run.
    for (int i = 0; i < 3; ++i) {
      src.push_back(OpenSweepReplica(mems[i].store.get(), false, 20 + i,
                                     SeededActorIds(seed * 4 + i)));
    }
    auto target = OpenSweepReplica(mems[3].store.get(), false, kSweepKs,
                                   SeededActorIds(seed * 4 + 3));
    OrswotModel model;
    std::vector<Delta> deltas;
    const std::vector<std::string> elems = {"a", "b", "c", "d", "e", "f"};
    for (int step = 0; step < 300; ++step) {
      Replica& s = *src[Uniform(rng, 0, 2)];
      const int what = static_cast<int>(Uniform(rng, 0, 9));
      absl::StatusOr<Delta> d;
      if (what < 6) {
        std::vector<UpdateOp> ops;
        for (int k = 0, n = static_cast<int>(Uniform(rng, 1, 4)); k < n; ++k) {
          ops.push_back(
              UpdateOp::Add(elems[Uniform(rng, 0, elems.size() - 1)]));
        }
        d = s.Update("set", ops);
      } else if (what < 8) {
        UpdateOp rm;
        rm.kind = UpdateOp::Kind::kRemove;
        rm.element = elems[Uniform(rng, 0, elems.size() - 1)];
        rm.context_from_replica = true;
        d = s.Update("set", std::span(&rm, 1));
      } else {
        auto clock = s.GetClock("set");
        REQUIRE(clock.ok());
        d = s.Clear("set", *clock);
      }
      REQUIRE(d.ok());
      model.Absorb(*d);
      deltas.push_back(*d);
      // Gossip among the sources now and then.
      if (Uniform(rng, 0, 3) == 0) {
        const Delta& g = deltas[Uniform(rng, 0, deltas.size() - 1)];
        REQUIRE(src[Uniform(rng, 0, 2)]->Apply(g).ok());
      }
    }
    // Everything, shuffled, about a third duplicated.
    std::vector<size_t> order;
    for (size_t i = 0; i < deltas.size(); ++i) {
      order.push_back(i);
      if (Uniform(rng, 0, 2) == 0) order.push_back(i);
    }
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) {
      REQUIRE(target->Apply(deltas[i]).ok());
      if (Uniform(rng, 0, 4) == 0) {
        REQUIRE(target->SweepSome(Uniform(rng, 1, 8)).ok());
      }
      if (target->stats().sweep_queue_length > 0) {
        REQUIRE(target->sweep_pending());
      }
    }
    RequireVerified(*target);
    CHECK(ToModel(ReadAll(*target, "set")) == model.Value());
    RequireFullySwept(*target, *mems[3].store, {"set"});
    CHECK(ToModel(ReadAll(*target, "set")) == model.Value());
  }
}

TEST_CASE(
    "attack: clears, adds, removes and deltas race with the background "
    "sweeper and SweepSome") {
  for (uint64_t seed : Seeds(3)) {
    CAPTURE(seed);
    MemStore mem(64 << 10);
    MemStore peer_mem;
    auto r = OpenSweepReplica(mem.store.get());
    auto peer = OpenSweepReplica(peer_mem.store.get(), false, 9);
    SweepOptions so;
    so.batch_keys = 3;
    so.keys_per_second = 200'000;
    REQUIRE(r->StartSweeper(so).ok());
    std::mutex model_mu;
    OrswotModel models[2];
    std::vector<Delta> peer_deltas[2];
    std::atomic<bool> failed{false};
    std::atomic<int> verified{0};
    auto writer = [&](int w) {
      Rng rng(seed * 31 + w);
      const std::string set = absl::StrCat("set", w);
      for (int step = 0; step < 1500 && !failed; ++step) {
        const int what = static_cast<int>(Uniform(rng, 0, 9));
        absl::StatusOr<Delta> d;
        if (what < 5) {
          std::vector<UpdateOp> ops;
          for (int k = 0; k < 5; ++k) {
            ops.push_back(
                UpdateOp::Add(absl::StrCat("e", Uniform(rng, 0, 30))));
          }
          d = r->Update(set, ops);
        } else if (what < 7) {
          UpdateOp rm;
          rm.kind = UpdateOp::Kind::kRemove;
          rm.element = absl::StrCat("e", Uniform(rng, 0, 30));
          rm.context_from_replica = true;
          d = r->Update(set, std::span(&rm, 1));
        } else if (what < 8) {
          auto clock = r->GetClock(set);
          if (!clock.ok()) {
            failed = true;
            break;
          }
          d = r->Clear(set, *clock);
        } else {
          // A delta from the peer (an add, or a clear of what the peer
          // saw), maybe an old one again.
          std::lock_guard<std::mutex> l(model_mu);
          if (what == 8 || peer_deltas[w].empty()) {
            std::vector<UpdateOp> ops = {
                UpdateOp::Add(absl::StrCat("p", Uniform(rng, 0, 10)))};
            auto pd = peer->Update(set, ops);
            if (!pd.ok()) {
              failed = true;
              break;
            }
            if (Uniform(rng, 0, 1) == 0) {
              auto pc = peer->GetClock(set);
              auto pcl = peer->Clear(set, *pc);
              if (!pcl.ok()) {
                failed = true;
                break;
              }
              peer_deltas[w].push_back(*pcl);
            }
            peer_deltas[w].push_back(*pd);
          }
          const Delta& pick =
              peer_deltas[w][Uniform(rng, 0, peer_deltas[w].size() - 1)];
          if (!r->Apply(pick).ok()) {
            failed = true;
            break;
          }
          models[w].Absorb(pick);
          continue;
        }
        if (!d.ok()) {
          failed = true;
          break;
        }
        {
          std::lock_guard<std::mutex> l(model_mu);
          models[w].Absorb(*d);
          if (!peer->Apply(*d).ok()) failed = true;
        }
        if (step % 50 == 0) {
          auto report = r->Verify();
          if (!report.ok() || !report->ok()) {
            UNSCOPED_INFO(
                "Verify mid-run: " << (report.ok() && !report->problems.empty()
                                           ? report->problems[0]
                                           : std::string("error")));
            failed = true;
          }
          ++verified;
        }
      }
    };
    std::atomic<bool> stop{false};
    std::thread sweeper2([&]() {
      Rng rng(seed);
      while (!stop) {
        auto p = r->SweepSome(Uniform(rng, 1, 10));
        if (!p.ok()) failed = true;
      }
    });
    std::thread w0(writer, 0), w1(writer, 1);
    w0.join();
    w1.join();
    stop = true;
    sweeper2.join();
    r->StopSweeper();
    REQUIRE_FALSE(failed.load());
    CHECK(verified > 0);
    // The sweepers ran during the race (whether a set finished before the
    // writers stopped depends on timing; the full sweep below must finish).
    CHECK(r->stats().sweep_keys_read > 0);
    if (r->stats().sweep_queue_length > 0) CHECK(r->sweep_pending());
    for (int w = 0; w < 2; ++w) {
      CHECK(ToModel(ReadAll(*r, absl::StrCat("set", w))) == models[w].Value());
    }
    RequireVerified(*r);
    RequireFullySwept(*r, *mem.store, {"set0", "set1"});
    for (int w = 0; w < 2; ++w) {
      CHECK(ToModel(ReadAll(*r, absl::StrCat("set", w))) == models[w].Value());
    }
  }
}

TEST_CASE("attack: a clear arriving while a sweep of its set is half done") {
  MemStore mem;
  MemStore peer_mem;
  auto r = OpenSweepReplica(mem.store.get());
  auto peer = OpenSweepReplica(peer_mem.store.get(), false, 9);
  AddRange(*r, "s", 0, 200);
  auto first = r->GetClock("s");
  REQUIRE(r->Clear("s", *first).ok());
  REQUIRE(r->SweepSome(50).ok());
  // An add the clears below did not see, and a remote clear that covers
  // adds we have not seen yet (unseen dots enter the set-clock only).
  auto pd = peer->Update("s", std::vector<UpdateOp>{UpdateOp::Add("remote")});
  REQUIRE(pd.ok());
  auto pclock = peer->GetClock("s");
  Delta remote_clear;
  remote_clear.set = "s";
  remote_clear.clear = *pclock;
  AddRange(*r, "s", 200, 210);
  REQUIRE(r->Apply(remote_clear).ok());
  REQUIRE(r->SweepSome(60).ok());
  // The add arrives after the clear that saw it: never written.
  REQUIRE(r->Apply(*pd).ok());
  CHECK(r->Contains("s", "remote")->empty());
  REQUIRE(r->Apply(remote_clear).ok());  // Twice.
  CHECK(*r->Count("s") == 10);
  RequireFullySwept(*r, *mem.store, {"s"});
  CHECK(*r->Count("s") == 10);
}

TEST_CASE(
    "sweep attack: SweepSome's budget bounds its work when sets have no keys "
    "left",
    "[regression]") {
  // The budget counts element keys read only. Each queued set also costs a
  // start batch, a finish batch and a CompactRange (in LevelDB a memtable
  // flush + manifest write), none charged: SweepSome(1) -- and the rate
  // limited background sweeper -- does unbounded work in one call.
  MemStore mem;
  FaultyStore fs(mem.store.get());
  auto r = OpenSweepReplica(&fs);
  constexpr int kSets = 300;
  for (int i = 0; i < kSets; ++i) {
    const std::string set = absl::StrCat("tiny", i);
    auto d = r->Update(set, std::vector<UpdateOp>{UpdateOp::Add("x")});
    REQUIRE(d.ok());
    // Removed, then cleared: the tombstone holds the dot, no key is left.
    REQUIRE(r->Update(set, std::vector<UpdateOp>{UpdateOp::Remove(
                               "x", std::vector<Dot>{*d->ops[0].add})})
                .ok());
    ClearAll(*r, set);
  }
  REQUIRE(r->stats().sweep_queue_length == kSets);
  const uint64_t compactions = fs.compactions;
  const auto start = std::chrono::steady_clock::now();
  auto p = r->SweepSome(1);
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now() - start)
                          .count();
  REQUIRE(p.ok());
  INFO("one SweepSome(1): " << p->entries_done << " entries, "
                            << fs.compactions - compactions << " compactions, "
                            << micros << " us");
  CHECK(p->keys_read == 0);
  CHECK(p->entries_done <= 16);
}

TEST_CASE("attack: sweep_pending is never false while the queue has entries") {
  for (uint64_t seed : Seeds(5)) {
    CAPTURE(seed);
    Rng rng(seed);
    MemStore mem;
    auto r = OpenSweepReplica(mem.store.get());
    for (int step = 0; step < 400; ++step) {
      const std::string set = absl::StrCat("s", Uniform(rng, 0, 5));
      switch (Uniform(rng, 0, 4)) {
        case 0:
        case 1:
          AddRange(*r, set, step * 10,
                   step * 10 + static_cast<int>(Uniform(rng, 1, 20)));
          break;
        case 2:
          ClearAll(*r, set);
          break;
        default:
          REQUIRE(r->SweepSome(Uniform(rng, 0, 40)).ok());
      }
      if (r->stats().sweep_queue_length > 0) REQUIRE(r->sweep_pending());
    }
    // And concurrently: clears against a sweeping thread.
    std::atomic<bool> stop{false};
    std::thread t([&]() {
      while (!stop) (void)r->SweepSome(5);
    });
    for (int i = 0; i < 200; ++i) {
      const std::string set = absl::StrCat("c", i % 7);
      AddRange(*r, set, i, i + 3);
      ClearAll(*r, set);
    }
    stop = true;
    t.join();
    if (r->stats().sweep_queue_length > 0) CHECK(r->sweep_pending());
    REQUIRE(TrySweepAll(*r));
    CHECK(r->stats().sweep_queue_length == 0);
  }
}

TEST_CASE("sweep attack: StopSweeper racing with StartSweeper never hangs",
          "[regression]") {
  // StartSweeper resets the shared `stop` flag. A StopSweeper that has set
  // it and is joining the old thread loses it to a concurrent StartSweeper:
  // the old thread, still sweeping, sees stop == false afterwards and runs
  // on forever, and the StopSweeper's join never returns.
  MemStore mem(4 << 20);
  auto r = OpenSweepReplica(mem.store.get());
  AddRange(*r, "big", 0, 60000);
  ClearAll(*r, "big");
  SweepOptions so;
  so.batch_keys = 1;  // A slow sweep: the old thread is busy in SweepSome.
  so.keys_per_second = 10'000'000;
  REQUIRE(r->StartSweeper(so).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto stopper = std::async(std::launch::async, [&]() { r->StopSweeper(); });
  // Restart it as soon as the stopper has let go of it.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(5);
  bool restarted = false;
  while (std::chrono::steady_clock::now() < deadline) {
    if (r->StartSweeper(so).ok()) {
      restarted = true;
      break;
    }
  }
  REQUIRE(restarted);
  const bool stopped =
      stopper.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  CHECK(stopped);
  // Release the stuck thread (a second stop sets the flag for both).
  r->StopSweeper();
  stopper.wait();
}

// =====================================================================
// 4. Cluster.
// =====================================================================

std::unique_ptr<Simulator> MakeSim(uint64_t seed) {
  SimOptions o;
  o.seed = seed;
  o.nodes = 4;
  o.ring.ring_size = 8;
  o.store.write_buffer_bytes = 256 << 10;
  auto sim = Simulator::Create(o);
  REQUIRE(sim.ok());
  return std::move(*sim);
}

void RequireDrained(Simulator& sim, const std::string& set) {
  const uint32_t p = sim.ring().PartitionOf(set);
  for (NodeId n : sim.ring().PreferenceList(p)) {
    Replica* r = sim.node(n)->LocalReplica(p);
    REQUIRE(r != nullptr);
    CHECK(r->GetSetStats(set)->tombstone_dots == 0);
    CHECK(r->stats().sweep_queue_length == 0);
  }
}

TEST_CASE(
    "attack: cluster Clear with empty, unknown-actor and own-future "
    "contexts") {
  auto sim = MakeSim(101);
  const std::string set = "cset";
  std::vector<UpdateOp> ops;
  for (int i = 0; i < 20; ++i)
    ops.push_back(UpdateOp::Add(absl::StrCat("e", i)));
  REQUIRE(sim->Update(1, set, ops).ok());
  sim->RunUntilIdle();
  const uint32_t p = sim->ring().PartitionOf(set);
  const auto& pl = sim->ring().PreferenceList(p);

  // Empty: nothing anywhere.
  auto none = sim->Clear(pl[0], set, Clock());
  REQUIRE(none.ok());
  CHECK_FALSE(none->clear.has_value());
  sim->RunUntilIdle();
  CHECK(*sim->Count(1, set) == 20);

  // Dots of actors nobody has: clears nothing, later adds of those actors
  // (there are none) are never written, and our adds still work.
  Clock unknown;
  unknown.AddDot(Dot{0xDEADBEEF12345ull, 1});
  unknown.AddDot(Dot{0xDEADBEEF12345ull, 7});
  unknown.AddDot(Dot{42, 1000});
  auto u = sim->Clear(pl[1], set, unknown);
  REQUIRE(u.ok());
  REQUIRE(sim->Update(pl[2], set, {UpdateOp::Add("after-unknown")}).ok());
  sim->RunUntilIdle();
  CHECK(*sim->Count(1, set) == 21);

  // A future event of the coordinating replica's own actor: InvalidArgument
  // and nothing changes anywhere.
  Replica* own = sim->node(pl[0])->LocalReplica(p);
  REQUIRE(own != nullptr);
  auto own_clock = own->GetClock(set);
  REQUIRE(own_clock.ok());
  Clock future;
  future.AddDot(Dot{own->actor(), own_clock->MaxCounter(own->actor()) + 1});
  auto bad = sim->Clear(pl[0], set, future);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  sim->RunUntilIdle();
  CHECK(*sim->Count(1, set) == 21);
  sim->RunUntilIdle();
  for (uint64_t keys : KeysOnReplicas(*sim, set)) CHECK(keys == 21);
  RequireDrained(*sim, set);
}

TEST_CASE(
    "attack: a coordinator crashing mid-clear; the clear spreads by "
    "read repair and every tombstone drains") {
  for (bool power : {false, true}) {
    CAPTURE(power);
    auto sim = MakeSim(103 + power);
    const std::string set = "midclear";
    std::vector<UpdateOp> ops;
    for (int i = 0; i < 40; ++i) {
      ops.push_back(UpdateOp::Add(absl::StrCat("e", i)));
    }
    REQUIRE(sim->Update(1, set, ops).ok());
    sim->RunUntilIdle();
    auto read = sim->Read(1, set);
    REQUIRE(read.ok());
    const uint32_t p = sim->ring().PartitionOf(set);
    const auto pl = sim->ring().PreferenceList(p);
    // The coordinator is cut off: it clears locally, its deltas are lost,
    // and it crashes before anyone hears of it.
    std::vector<NodeId> others;
    for (NodeId n : sim->node_ids()) {
      if (n != pl[0]) others.push_back(n);
    }
    sim->Partition({{pl[0]}, others});
    bool answered = false;
    sim->node(pl[0])->Clear(set, read->clock, ClusterWriteOptions(),
                            [&](absl::StatusOr<Delta>) { answered = true; });
    CHECK(sim->node(pl[0])->LocalReplica(p)->GetSetStats(set)->tombstone_dots ==
          40);
    REQUIRE((power ? sim->PowerLoss(pl[0]) : sim->Crash(pl[0])).ok());
    sim->Heal();
    // A concurrent add the clear did not see.
    REQUIRE(sim->Update(pl[1], set, {UpdateOp::Add("concurrent")}).ok());
    REQUIRE(sim->Restart(pl[0]).ok());
    sim->RunUntilIdle();
    ClusterReadOptions all;
    all.r = 3;
    auto merged = sim->Read(pl[1], set, all);
    REQUIRE(merged.ok());
    std::set<std::string> present;
    for (const auto& e : merged->elements) present.insert(e.element);
    CHECK(present.count("concurrent") == 1);
    if (!power) {
      // The clear survived the process crash and spreads.
      CHECK(present.size() == 1);
    } else {
      CHECK((present.size() == 1 || present.size() == 41));
    }
    sim->RunUntilIdle();
    // Once more: after repair every replica agrees.
    auto again = sim->Read(pl[2], set, all);
    REQUIRE(again.ok());
    CHECK(again->elements.size() == present.size());
    sim->RunUntilIdle();
    for (uint64_t keys : KeysOnReplicas(*sim, set))
      CHECK(keys == present.size());
    RequireDrained(*sim, set);
  }
}

std::string ClearMessageBytes(uint64_t id, uint32_t partition,
                              std::string_view set_field,
                              std::string_view clock_field,
                              std::string_view trailing = {}) {
  std::string out;
  EncodeHeader(MessageHeader{MessageType::kClear, id, partition}, &out);
  out.append(set_field);
  out.append(clock_field);
  out.append(trailing);
  FinishMessage(0, &out);
  return out;
}

std::string LengthPrefixed(std::string_view s) {
  std::string out;
  uint64_t n = s.size();
  while (n >= 0x80) {
    out.push_back(static_cast<char>((n & 0x7F) | 0x80));
    n >>= 7;
  }
  out.push_back(static_cast<char>(n));
  out.append(s);
  return out;
}

TEST_CASE("attack: garbage, truncated and crafted kClear messages") {
  testing::ManualCluster c(3, 3, 4);
  const std::string set = "msgset";
  const uint32_t p = c.ring().PartitionOf(set);
  bool done = false;
  c.node(1).Update(set, {UpdateOp::Add("a"), UpdateOp::Add("b")},
                   ClusterWriteOptions(), [&done](absl::StatusOr<Delta> d) {
                     REQUIRE(d.ok());
                     done = true;
                   });
  c.Settle();
  REQUIRE(done);
  Replica* r = c.node(2).LocalReplica(p);
  REQUIRE(r != nullptr);
  auto clock = r->GetClock(set);
  REQUIRE(clock.ok());
  const uint64_t malformed_before =
      Stat(c.node(2).stats(), "node.malformed_messages");
  int sent = 0;
  auto deliver = [&](const std::string& bytes) {
    c.node(2).Receive(1, bytes);
    ++sent;
  };
  const std::string good_clock = LengthPrefixed(clock->Encode());
  // Valid checksums, bad bodies.
  deliver(ClearMessageBytes(900, p, "", ""));                   // Empty.
  deliver(ClearMessageBytes(901, p, LengthPrefixed(set), ""));  // No clock.
  deliver(ClearMessageBytes(902, p, LengthPrefixed(set),
                            good_clock.substr(0, good_clock.size() - 1)));
  deliver(ClearMessageBytes(903, p, LengthPrefixed(set), good_clock, "x"));
  deliver(ClearMessageBytes(904, p, LengthPrefixed(set),
                            LengthPrefixed("\x01\xff\xff\xff\xff\x0f")));
  deliver(ClearMessageBytes(905, p, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
                            good_clock));
  deliver(ClearMessageBytes(906, p, LengthPrefixed(set),
                            LengthPrefixed("\x02")));  // Other version.
  // Random garbage and truncations of a good message (checksummed).
  const std::string good =
      ClearMessageBytes(907, p, LengthPrefixed(set), good_clock);
  Rng rng(5);
  for (int i = 0; i < 300; ++i) {
    std::string b = good;
    switch (Uniform(rng, 0, 2)) {
      case 0:
        b.resize(Uniform(rng, 0, b.size() - 1));
        break;
      case 1:
        b[Uniform(rng, 0, b.size() - 1)] ^=
            static_cast<char>(1 << Uniform(rng, 0, 7));
        break;
      default:
        b = AdversarialBytes(rng, 60);
    }
    deliver(b);
  }
  CHECK(Stat(c.node(2).stats(), "node.malformed_messages") - malformed_before ==
        static_cast<uint64_t>(sent));
  // Nothing was cleared, nothing queued beyond what was.
  CHECK(*r->Count(set) == 2);
  CHECK(r->GetSetStats(set)->tombstone_dots == 0);
  // No reply was sent to garbage (dropped, counted).
  c.Settle();
  CHECK(*r->Count(set) == 2);
  RequireVerified(*r);
}

TEST_CASE(
    "sweep attack: a kClear naming a partition that does not hold the set is "
    "refused",
    "[regression]") {
  // The replica service trusts the header's partition: a clear for a set
  // of another partition lands in the wrong keyspace (a set-clock and a
  // queue entry for a set that does not belong there).
  testing::ManualCluster c(3, 3, 4);
  const std::string set = "wrongpart";
  const uint32_t p = c.ring().PartitionOf(set);
  const uint32_t q = (p + 1) % 4;
  Replica* wrong = c.node(1).LocalReplica(q);
  REQUIRE(wrong != nullptr);
  Clock ctx;
  ctx.AddDot(Dot{77, 1});
  c.node(1).Receive(
      2, EncodeMessage(5000, q, msg::Clear{.set = set, .clock = ctx}));
  auto sets = wrong->ListSets(std::nullopt, 0);
  REQUIRE(sets.ok());
  INFO("sets in partition " << q << "'s replica: " << sets->size());
  CHECK(std::find(sets->begin(), sets->end(), set) == sets->end());
}

}  // namespace
}  // namespace bigset::testing
