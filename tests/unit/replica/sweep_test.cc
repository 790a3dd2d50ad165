// The targeted sweep: a clear queues its set, the sweeper deletes the keys
// the tombstone covers and shrinks the tombstone; partial sweeps resume from
// their cursor; sets without an entry are never read; bad sweep state is
// DataLoss, never a deleted live key. Randomized against the model in
// replica_test.cc ("with clears and sweeps"), through crashes in
// crash_test.cc and over a cluster in cluster_test.cc.

#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bigset/keys/keys.h"
#include "bigset/replica/local_sets.h"
#include "bigset/replica/replica.h"
#include "leveldb/env.h"
#include "leveldb/helpers/memenv.h"
#include "orswot_model.h"
#include "replica/replica_internal.h"
#include "sweep_util.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

constexpr KeyspaceId kKs = testing::kSweepKs;

// Elements [0, cleared) of `set` added and cleared (a sweep entry for
// them), then [cleared, end) added: end - cleared live ones.
void AddClearAdd(Replica& r, std::string_view set, int cleared, int end) {
  AddRange(r, set, 0, cleared);
  ClearAll(r, set);
  AddRange(r, set, cleared, end);
}

TEST_CASE("sweep: a full sweep deletes the cleared keys and the tombstone") {
  MemStore mem;
  auto r = OpenSweepReplica(mem.store.get());
  AddClearAdd(*r, "s", 500, 550);
  REQUIRE(ElementKeys(*mem.store, "s") == 550);
  REQUIRE(*r->Count("s") == 50);
  REQUIRE(r->stats().sweep_queue_length == 1);
  REQUIRE(r->sweep_pending());
  RequireVerified(*r);

  SweepProgress p = SweepAll(*r);
  CHECK(p.keys_read == 550);
  CHECK(p.keys_deleted == 500);
  CHECK(p.entries_done == 1);
  CHECK(ElementKeys(*mem.store, "s") == 50);
  CHECK(*r->Count("s") == 50);
  auto st = r->GetSetStats("s");
  REQUIRE(st.ok());
  CHECK(st->tombstone_bytes == 0);
  CHECK(st->tombstone_dots == 0);
  ReplicaStats stats = r->stats();
  CHECK(stats.sweep_queue_length == 0);
  CHECK(stats.sweep_entries_done == 1);
  CHECK(stats.sweep_keys_deleted == 500);
  CHECK(stats.sweep_bytes_reclaimed > 500 * 10);
  CHECK(!r->sweep_pending());
  RequireVerified(*r);
  // Nothing queued: a sweep reads nothing.
  auto again = r->SweepSome(UINT64_MAX);
  REQUIRE(again.ok());
  CHECK(again->idle);
  CHECK(again->keys_read == 0);
  CHECK(r->stats().sweep_keys_read == 550);
}

TEST_CASE("sweep: a clear with an empty clock writes nothing") {
  MemStore mem;
  auto r = OpenSweepReplica(mem.store.get());
  AddRange(*r, "s", 0, 5);
  const uint64_t before = r->stats().bytes_written;
  auto d = r->Clear("s", Clock());
  REQUIRE(d.ok());
  CHECK(!d->clear.has_value());
  CHECK(d->ops.empty());
  CHECK(r->stats().bytes_written == before);
  CHECK(r->stats().sweep_queue_length == 0);
  CHECK(*r->Count("s") == 5);
}

TEST_CASE("sweep: dots cleared during a sweep stay in the tombstone") {
  MemStore mem;
  auto r = OpenSweepReplica(mem.store.get());
  AddRange(*r, "s", 0, 300);
  ClearAll(*r, "s");
  // Partway through (a budget of one for the entry, 100 keys)...
  auto p = r->SweepSome(101);
  REQUIRE(p.ok());
  CHECK(!p->idle);
  CHECK(p->keys_read == 100);
  CHECK(p->keys_deleted == 100);
  RequireVerified(*r);
  // ...new elements arrive and are cleared too.
  AddRange(*r, "s", 300, 340);
  ClearAll(*r, "s");
  CHECK(*r->Count("s") == 0);
  // The first sweep finishes with its snapshot: the later clear's 40 dots
  // stay in the tombstone, and so does the queue entry.
  p = r->SweepSome(241);  // The entry, the 200 left and the 40 new keys.
  REQUIRE(p.ok());
  CHECK(p->entries_done == 1);
  auto st = r->GetSetStats("s");
  REQUIRE(st.ok());
  CHECK(st->tombstone_dots == 40);
  CHECK(r->stats().sweep_queue_length == 1);
  CHECK(ElementKeys(*mem.store, "s") == 40);
  RequireVerified(*r);
  SweepAll(*r);
  CHECK(ElementKeys(*mem.store, "s") == 0);
  CHECK(r->GetSetStats("s")->tombstone_dots == 0);
  CHECK(r->stats().sweep_queue_length == 0);
  RequireVerified(*r);
}

TEST_CASE("sweep: an interrupted sweep resumes from its cursor") {
  MemStore mem;
  auto r = OpenSweepReplica(mem.store.get());
  AddClearAdd(*r, "s", 1000, 1010);
  auto p = r->SweepSome(351);  // The entry and 350 keys.
  REQUIRE(p.ok());
  REQUIRE(p->keys_read == 350);
  // A crash (no Close): the replica is reopened on the same store.
  r.reset();
  r = OpenSweepReplica(mem.store.get());
  RequireVerified(*r);
  CHECK(*r->Count("s") == 10);
  SweepProgress rest = SweepAll(*r);
  // Not one key read twice: the sweep went on after the cursor.
  CHECK(rest.keys_read == 1010 - 350);
  CHECK(rest.keys_deleted == 1000 - 350);
  CHECK(ElementKeys(*mem.store, "s") == 10);
  CHECK(r->GetSetStats("s")->tombstone_dots == 0);
  RequireVerified(*r);
}

TEST_CASE("sweep: the sweeper reads no set without an entry") {
  MemStore mem;
  auto r = OpenSweepReplica(mem.store.get());
  for (int i = 0; i < 40; ++i) AddRange(*r, absl::StrCat("live", i), 0, 50);
  AddRange(*r, "cleared-a", 0, 70);
  AddRange(*r, "cleared-b", 0, 30);
  ClearAll(*r, "cleared-a");
  ClearAll(*r, "cleared-b");
  CHECK(r->stats().sweep_queue_length == 2);
  SweepProgress p = SweepAll(*r);
  CHECK(p.keys_read == 100);
  CHECK(p.keys_deleted == 100);
  CHECK(p.entries_done == 2);
  CHECK(r->stats().sweep_keys_read == 100);
  for (int i = 0; i < 40; ++i) {
    CHECK(*r->Count(absl::StrCat("live", i)) == 50);
  }
  // A set whose entry outlived its dots (all swept by an earlier run) is
  // dropped without reading it.
  Put(*mem.store, replica_internal::SweepQueueKey(kKs, "live3"),
      replica_internal::EncodeSweepValue(""));
  r.reset();
  r = OpenSweepReplica(mem.store.get());
  p = SweepAll(*r);
  CHECK(p.keys_read == 0);
  CHECK(p.entries_done == 1);
  CHECK(r->stats().sweep_queue_length == 0);
}

TEST_CASE("sweep: one hot set does not starve the others") {
  MemStore mem;
  auto r = OpenSweepReplica(mem.store.get());
  // Sets in different shards.
  std::vector<std::string> sets;
  for (int i = 0; sets.size() < 3; ++i) {
    std::string s = absl::StrCat("set", i);
    bool fresh = true;
    for (const auto& o : sets) {
      fresh &= replica_internal::SweepShardOf(o) !=
               replica_internal::SweepShardOf(s);
    }
    if (fresh) sets.push_back(s);
  }
  AddRange(*r, sets[0], 0, 2000);
  AddRange(*r, sets[1], 0, 10);
  AddRange(*r, sets[2], 0, 10);
  for (const auto& s : sets) ClearAll(*r, s);
  // Small budgets: after a few calls, the small sets are done although the
  // big one is not.
  uint64_t entries = 0;
  for (int i = 0; i < 6; ++i) {
    auto p = r->SweepSome(20);
    REQUIRE(p.ok());
    entries += p->entries_done;
  }
  CHECK(entries == 2);
  CHECK(ElementKeys(*mem.store, sets[1]) == 0);
  CHECK(ElementKeys(*mem.store, sets[2]) == 0);
  CHECK(ElementKeys(*mem.store, sets[0]) > 0);
  SweepAll(*r);
  CHECK(ElementKeys(*mem.store, sets[0]) == 0);
}

TEST_CASE("sweep: bad sweep state is DataLoss and deletes no live key") {
  auto expect_dataloss = [&](const std::string& key, std::string_view value) {
    // "s": 100 cleared elements, then 20 live ones that must survive
    // whatever happens; "other": 10 cleared ones.
    MemStore fresh;
    auto q = OpenSweepReplica(fresh.store.get());
    AddRange(*q, "s", 0, 100);
    ClearAll(*q, "s");
    AddRange(*q, "s", 100, 120);
    AddRange(*q, "other", 0, 10);
    ClearAll(*q, "other");
    // A sweep of "s" in progress (one key at a time until it starts).
    std::string unused;
    for (int i = 0;
         i < 50 &&
         !fresh.store->Get(ReadOptions(), SnapshotKey("s"), &unused).ok();
         ++i) {
      REQUIRE(q->SweepSome(1).ok());
    }
    REQUIRE(fresh.store->Get(ReadOptions(), SnapshotKey("s"), &unused).ok());
    Put(*fresh.store, key, value);
    auto report = q->Verify();
    REQUIRE(report.ok());
    CHECK(!report->ok());
    // Sweeping reports the bad set (once per call) and still sweeps the
    // other one; the live elements stay.
    bool failed = false;
    for (int i = 0; i < 40; ++i) {
      auto got = q->SweepSome(UINT64_MAX);
      if (!got.ok()) {
        CHECK(got.status().code() == absl::StatusCode::kDataLoss);
        failed = true;
      }
    }
    CHECK(failed);
    CHECK(q->stats().sweep_errors > 0);
    CHECK(*q->Count("s") == 20);
    CHECK(ElementKeys(*fresh.store, "s") >= 20);
    CHECK(ElementKeys(*fresh.store, "other") == 0);
  };
  auto v = [](std::string_view payload) {
    return replica_internal::EncodeSweepValue(payload);
  };
  SECTION("undecodable snapshot") {
    expect_dataloss(SnapshotKey("s"), v("\xff\xff\xff"));
  }
  SECTION("snapshot of another version") {
    expect_dataloss(SnapshotKey("s"), "\x09");
  }
  SECTION("snapshot the tombstone does not cover: it would delete live keys") {
    // The whole set-clock also covers the live dots.
    MemStore fresh;
    auto q = OpenSweepReplica(fresh.store.get());
    AddRange(*q, "s", 0, 100);
    ClearAll(*q, "s");
    AddRange(*q, "s", 100, 120);
    Put(*fresh.store, SnapshotKey("s"), v(q->GetClock("s")->Encode()));
    Put(*fresh.store, CursorKey("s"), v(""));
    auto got = q->SweepSome(UINT64_MAX);
    REQUIRE(!got.ok());
    CHECK(got.status().code() == absl::StatusCode::kDataLoss);
    CHECK(*q->Count("s") == 20);
    CHECK(ElementKeys(*fresh.store, "s") == 120);
    auto report = q->Verify();
    REQUIRE(report.ok());
    CHECK(!report->ok());
  }
  SECTION("cursor of another version") { expect_dataloss(CursorKey("s"), ""); }
  SECTION("cursor outside the set") {
    expect_dataloss(CursorKey("s"), v(ElementKey(kKs, "zzz", "e", Dot{1, 1})));
  }
}

TEST_CASE("sweep: random and truncated sweep state never deletes a live key") {
  for (uint64_t seed : Seeds(20)) {
    CAPTURE(seed);
    Rng rng(seed);
    MemStore mem;
    auto r = OpenSweepReplica(mem.store.get());
    AddClearAdd(*r, "s", 60, 80);
    auto p = r->SweepSome(Uniform(rng, 1, 50));
    REQUIRE(p.ok());
    // Damage the snapshot or the cursor: random bytes, or a truncation or
    // bit flip of the real value.
    const std::string key =
        Uniform(rng, 0, 1) ? SnapshotKey("s") : CursorKey("s");
    std::string value;
    absl::Status s = mem.store->Get(ReadOptions(), key, &value);
    if (!s.ok()) continue;  // The sweep already finished.
    switch (Uniform(rng, 0, 2)) {
      case 0:
        value = AdversarialBytes(rng, 40);
        break;
      case 1:
        value.resize(Uniform(rng, 0, value.size()));
        break;
      default:
        if (!value.empty()) {
          value[Uniform(rng, 0, value.size() - 1)] ^=
              static_cast<char>(1 << Uniform(rng, 0, 7));
        }
    }
    Put(*mem.store, key, value);
    for (int i = 0; i < 5; ++i) (void)r->SweepSome(UINT64_MAX);
    REQUIRE(*r->Count("s") == 20);
    REQUIRE(ElementKeys(*mem.store, "s") >= 20);
  }
}

TEST_CASE("sweep: the background sweeper empties the queue and stops") {
  MemStore mem;
  auto r = OpenSweepReplica(mem.store.get());
  AddRange(*r, "s", 0, 3000);
  ClearAll(*r, "s");
  SweepOptions o;
  o.keys_per_second = 1'000'000;
  o.batch_keys = 256;
  REQUIRE(r->StartSweeper(o).ok());
  CHECK(r->StartSweeper(o).code() == absl::StatusCode::kFailedPrecondition);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (r->stats().sweep_queue_length > 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(r->stats().sweep_queue_length == 0);
  CHECK(ElementKeys(*mem.store, "s") == 0);
  // It picks up a later clear.
  AddRange(*r, "s", 3000, 3100);
  ClearAll(*r, "s");
  while (r->stats().sweep_queue_length > 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(ElementKeys(*mem.store, "s") == 0);
  r->StopSweeper();
  r->StopSweeper();  // Idempotent.
  CHECK(r->StartSweeper(SweepOptions{0, 1}).code() ==
        absl::StatusCode::kInvalidArgument);
  REQUIRE(r->StartSweeper(o).ok());
  REQUIRE(r->Close().ok());  // Stops it.
}

TEST_CASE("sweep: writes and reads go on while the sweeper runs") {
  MemStore mem;
  auto r = OpenSweepReplica(mem.store.get());
  AddRange(*r, "big", 0, 5000);
  ClearAll(*r, "big");
  REQUIRE(r->StartSweeper(SweepOptions{100, 200'000}).ok());
  // Adds to the swept set and reads of it, concurrently.
  size_t live = 0;
  for (int round = 0; round < 50; ++round) {
    AddRange(*r, "big", 5000 + round * 10, 5000 + round * 10 + 10);
    live += 10;
    auto all = ReadAll(*r, "big", 7);
    REQUIRE(all.size() == live);
    if (round % 10 == 9) {
      ClearAll(*r, "big");
      live = 0;
      REQUIRE(*r->Count("big") == 0);
    }
  }
  r->StopSweeper();
  SweepAll(*r);
  CHECK(ElementKeys(*mem.store, "big") == 0);
  CHECK(r->GetSetStats("big")->tombstone_dots == 0);
  RequireVerified(*r);
}

TEST_CASE("sweep: LocalSets::Clear and its sweeper") {
  std::unique_ptr<leveldb::Env> env(
      leveldb::NewMemEnv(leveldb::Env::Default()));
  LocalSetsOptions o;
  o.store.env = env.get();
  auto sets = LocalSets::Open("/mem/local", o);
  REQUIRE(sets.ok());
  LocalSets& ls = **sets;
  for (int i = 0; i < 200; ++i) REQUIRE(ls.Add("s", absl::StrCat("e", i)).ok());
  REQUIRE(ls.Add("t", "kept").ok());
  REQUIRE(ls.Clear("s").ok());
  CHECK(*ls.Count("s") == 0);
  CHECK(ls.Members("s")->empty());
  CHECK(*ls.Contains("t", "kept"));
  REQUIRE(ls.Add("s", "after").ok());
  CHECK(*ls.Members("s") == std::vector<std::string>{"after"});
  REQUIRE(ls.Clear("empty").ok());  // A set never written: nothing to do.
  auto p = ls.SweepSome(UINT64_MAX);
  REQUIRE(p.ok());
  CHECK(p->keys_deleted == 200);
  CHECK(*ls.Members("s") == std::vector<std::string>{"after"});
  REQUIRE(ls.StartSweeper().ok());
  ls.StopSweeper();
  REQUIRE(ls.Close().ok());
}

}  // namespace
}  // namespace bigset::testing
