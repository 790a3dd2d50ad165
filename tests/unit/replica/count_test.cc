// Counts (docs/DESIGN.md, "Counts"): Replica::Count answers the number of
// present elements from the count every write keeps, exact through adds of
// elements with several dots, removes, deltas from other replicas, clears
// of part of a set, transfers, sweeps, restarts and a presence-filter
// budget too small to hold the filters. A randomized test against the
// replicas' own reads, and targeted cases.

#include <algorithm>
#include <catch2/catch.hpp>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bigset/core/memory_budget.h"
#include "bigset/replica/replica.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

ReplicaOptions Options(KeyspaceId ks, size_t filter_bytes = 64 << 20) {
  ReplicaOptions o;
  o.keyspace = ks;
  o.lock_stripes = 2;
  o.clock_cache_bytes = 4096;  // Small: states are evicted and reloaded.
  o.presence_filter_bytes = filter_bytes;
  return o;
}

std::unique_ptr<Replica> Open(Store* store, const ReplicaOptions& o) {
  auto r = Replica::Open(store, o);
  REQUIRE(r.ok());
  return std::move(*r);
}

uint64_t CountOf(Replica& r, std::string_view set) {
  auto c = r.Count(set);
  REQUIRE(c.ok());
  return *c;
}

Delta Add(Replica& r, std::string_view set, std::string element) {
  UpdateOp op = UpdateOp::Add(std::move(element));
  auto d = r.Update(set, std::span(&op, 1));
  REQUIRE(d.ok());
  return *d;
}

// Adds `prefix`0 .. `prefix`(n - 1) to `set` on `r`.
void AddNumbered(Replica& r, std::string_view set, const std::string& prefix,
                 int n) {
  for (int i = 0; i < n; ++i) Add(r, set, absl::StrCat(prefix, i));
}

// The clock of `set` on `r` (REQUIREs that it reads).
Clock ClockOf(Replica& r, std::string_view set) {
  auto clock = r.GetClock(set);
  REQUIRE(clock.ok());
  return *clock;
}

// Moves every element of `set` from `from` to `to` as a hand-off does, in
// chunks of `chunk` elements (shuffled if `shuffle`).
void Transfer(Replica& from, Replica& to, std::string_view set, size_t chunk,
              bool shuffle, Rng& rng) {
  const Clock clock = ClockOf(from, set);
  std::vector<ElementDots> all = ReadAll(from, set);
  if (shuffle) std::shuffle(all.begin(), all.end(), rng);
  Clock tracker;
  for (size_t i = 0; i < all.size(); i += chunk) {
    std::vector<ElementDots> part(
        all.begin() + i, all.begin() + std::min(all.size(), i + chunk));
    REQUIRE(to.ApplyTransferChunk(set, part, &tracker).ok());
  }
  REQUIRE(to.FinishTransfer(set, clock, tracker).ok());
}

TEST_CASE("count: concurrent adds of one element from different replicas") {
  MemStore mem;
  auto a = Open(mem.store.get(), Options(1));
  auto b = Open(mem.store.get(), Options(2));
  auto c = Open(mem.store.get(), Options(3));
  Delta da = Add(*a, "s", "x");
  Delta db = Add(*b, "s", "x");
  Delta dc = Add(*c, "s", "x");
  Add(*a, "s", "y");
  for (const Delta& d : {db, dc}) REQUIRE(a->Apply(d).ok());
  REQUIRE(b->Apply(da).ok());
  // x has three dots on a: one element.
  CHECK(ReadAllCounted(*a, "s").size() == 2);
  CHECK(ReadAll(*a, "s")[0].dots.size() == 3);
  CHECK(CountOf(*a, "s") == 2);
  CHECK(CountOf(*b, "s") == 1);
  // A delta applied twice counts once.
  REQUIRE(a->Apply(db).ok());
  CHECK(CountOf(*a, "s") == 2);
  CHECK(a->stats().count_scans == 0);
}

TEST_CASE("count: a remove of an element with several dots") {
  MemStore mem;
  auto a = Open(mem.store.get(), Options(1));
  auto b = Open(mem.store.get(), Options(2));
  Delta d1 = Add(*a, "s", "x");
  Delta d2 = Add(*b, "s", "x");
  REQUIRE(a->Apply(d2).ok());
  Add(*a, "s", "x");  // A third dot, from a again.
  REQUIRE(CountOf(*a, "s") == 1);
  // A remove that saw two of the three dots leaves x present.
  UpdateOp rm;
  rm.kind = UpdateOp::Kind::kRemove;
  rm.element = "x";
  rm.context = {*d1.ops[0].add, *d2.ops[0].add};
  REQUIRE(a->Update("s", std::span(&rm, 1)).ok());
  CHECK(CountOf(*a, "s") == 1);
  CHECK(ReadAllCounted(*a, "s").size() == 1);
  // The same remove again changes nothing; one with the replica's context
  // removes the last dot.
  REQUIRE(a->Update("s", std::span(&rm, 1)).ok());
  CHECK(CountOf(*a, "s") == 1);
  rm.context.clear();
  rm.context_from_replica = true;
  REQUIRE(a->Update("s", std::span(&rm, 1)).ok());
  CHECK(CountOf(*a, "s") == 0);
  CHECK(ReadAllCounted(*a, "s").empty());
}

TEST_CASE("count: a clear with a partial context is counted once, exactly") {
  MemStore mem;
  auto a = Open(mem.store.get(), Options(1));
  AddNumbered(*a, "s", "old", 100);
  const Clock seen = ClockOf(*a, "s");
  AddNumbered(*a, "s", "new", 30);
  Add(*a, "s", "old7");  // A second dot the clear did not see: survives.
  REQUIRE(CountOf(*a, "s") == 131 - 1);
  REQUIRE(a->Clear("s", seen).ok());
  const uint64_t scans = a->stats().count_scans;
  CHECK(CountOf(*a, "s") == 31);
  CHECK(a->stats().count_scans == scans + 1);  // The one scan.
  CHECK(CountOf(*a, "s") == 31);
  CHECK(a->stats().count_scans == scans + 1);  // Known again.
  CHECK(ReadAllCounted(*a, "s").size() == 31);
  // A clear of everything seen: 0, with no scan.
  REQUIRE(a->Clear("s", ClockOf(*a, "s")).ok());
  CHECK(CountOf(*a, "s") == 0);
  CHECK(a->stats().count_scans == scans + 1);
  // The sweep deletes covered keys: the count does not move.
  Add(*a, "s", "after");
  for (int i = 0; i < 10; ++i) REQUIRE(a->SweepSome(1000).ok());
  CHECK(CountOf(*a, "s") == 1);
  auto report = a->Verify();
  REQUIRE(report.ok());
  CHECK(report->ok());
}

TEST_CASE("count: a hand-off into a replica that holds part of the set") {
  Rng rng(7);
  MemStore mem;
  auto from = Open(mem.store.get(), Options(1));
  auto to = Open(mem.store.get(), Options(2));
  std::vector<Delta> deltas;
  for (int i = 0; i < 200; ++i) {
    deltas.push_back(Add(*from, "s", absl::StrCat("e", i % 150)));
  }
  // `to` has a third of the deltas, and one element of its own.
  for (size_t i = 0; i < deltas.size(); i += 3) {
    REQUIRE(to->Apply(deltas[i]).ok());
  }
  Add(*to, "s", "mine");
  // An element removed at the sender after `to` saw it.
  UpdateOp rm;
  rm.kind = UpdateOp::Kind::kRemove;
  rm.element = "e0";
  rm.context_from_replica = true;
  REQUIRE(from->Update("s", std::span(&rm, 1)).ok());
  Transfer(*from, *to, "s", 16, /*shuffle=*/false, rng);
  CHECK(ReadAllCounted(*to, "s").size() == 150);  // 149 + "mine".
  // Again, in shuffled chunks: nothing changes.
  Transfer(*from, *to, "s", 7, /*shuffle=*/true, rng);
  CHECK(ReadAllCounted(*to, "s").size() == 150);
}

TEST_CASE(
    "count: a hand-off whose chunks span no key, live keys or only removed "
    "keys here") {
  // An ascending chunk whose span holds no element key at the receiver is
  // taken as all absent without a lookup; the other chunks look each
  // element up. Chunks of every kind, for every filter state.
  for (size_t filter_bytes : {size_t{64} << 20, size_t{0}}) {
    CAPTURE(filter_bytes);
    Rng rng(11);
    MemStore mem;
    auto from = Open(mem.store.get(), Options(1, filter_bytes));
    auto to = Open(mem.store.get(), Options(2, filter_bytes));
    std::vector<Delta> deltas;
    // e100..e399 ascend by name; the receiver sees e300..e349 (live keys
    // in the span of the last chunks) and e200..e209, which it then
    // removes (keys under its tombstone: a span with keys, none live).
    for (int i = 100; i < 400; ++i) {
      deltas.push_back(Add(*from, "s", absl::StrCat("e", i)));
    }
    for (int i = 300; i < 350; ++i) REQUIRE(to->Apply(deltas[i - 100]).ok());
    for (int i = 200; i < 210; ++i) REQUIRE(to->Apply(deltas[i - 100]).ok());
    for (int i = 200; i < 210; ++i) {
      UpdateOp rm;
      rm.kind = UpdateOp::Kind::kRemove;
      rm.element = absl::StrCat("e", i);
      rm.context_from_replica = true;
      REQUIRE(to->Update("s", std::span(&rm, 1)).ok());
    }
    CHECK(CountOf(*to, "s") == 50);
    // The removes happened at the receiver only: the transfer brings the
    // sender's dots of e200..e209 again, which the receiver has seen.
    Transfer(*from, *to, "s", 25, /*shuffle=*/false, rng);
    CHECK(CountOf(*to, "s") == 290);
    CHECK(ReadAllCounted(*to, "s").size() == 290);
    // Again: every dot is seen now; nothing changes.
    Transfer(*from, *to, "s", 25, /*shuffle=*/false, rng);
    CHECK(ReadAllCounted(*to, "s").size() == 290);
    // A third replica that lacks the set entirely, fed by the second.
    MemStore mem3;
    auto third = Open(mem3.store.get(), Options(3, filter_bytes));
    Transfer(*to, *third, "s", 40, /*shuffle=*/false, rng);
    CHECK(CountOf(*third, "s") == 290);
    CHECK(ReadAllCounted(*third, "s").size() == 290);
    auto report = third->Verify();
    REQUIRE(report.ok());
    CHECK(report->ok());
  }
}

// Replicas that share a presence-filter budget (a node's) hold at most its
// bytes together, stay exact when their filters find no room, do not scan
// a set again and again for a filter the budget cannot hold, and give
// their bytes back when they go.
TEST_CASE("count: a shared filter budget bounds the replicas' filters") {
  MemStore mem;
  auto budget = std::make_shared<MemoryBudget>(64 << 10);
  std::vector<std::unique_ptr<Replica>> r;
  for (KeyspaceId ks : {1, 2, 3}) {
    ReplicaOptions o = Options(ks);
    o.presence_filter_budget = budget;
    r.push_back(Open(mem.store.get(), o));
  }
  // Each set grows past what the budget holds for all three.
  for (int i = 0; i < 30000; ++i) {
    for (auto& replica : r) {
      Add(*replica, "s", absl::StrCat("e", i % 20000));
    }
    if (i % 5000 == 0) {
      size_t held = 0;
      for (auto& replica : r) held += replica->stats().presence_filter_bytes;
      REQUIRE(held <= budget->limit());
      REQUIRE(held == budget->used());
    }
  }
  size_t held = 0;
  for (auto& replica : r) {
    CHECK(CountOf(*replica, "s") == 20000);
    held += replica->stats().presence_filter_bytes;
  }
  CHECK(held <= budget->limit());
  CHECK(held == budget->used());
  r[0].reset();
  r[1].reset();
  CHECK(budget->used() == r[2]->stats().presence_filter_bytes);
  r[2].reset();
  CHECK(budget->used() == 0);
}

// A set whose filter no longer fits its budget is not scanned again and
// again to build one (each scan reads the whole set, under its lock): once
// its count needs more than the budget, no scan runs.
TEST_CASE("count: no scan builds a filter the budget cannot hold") {
  MemStore mem;
  auto r = Open(mem.store.get(), Options(1, 16 << 10));
  AddNumbered(*r, "s", "e", 40000);
  CHECK(CountOf(*r, "s") == 40000);
  CHECK(r->stats().presence_filter_bytes <= (16 << 10));
  // The filter was dropped near 5,000 elements; past 6,553 (16 KiB at 20
  // bits each) none can fit. Without the check, a scan every quarter of
  // the count's growth: about eight.
  CHECK(r->stats().count_scans <= 1);
}

TEST_CASE("count: stored, reloaded, and counted once for an old store") {
  MemStore mem;
  {
    ReplicaOptions o = Options(1);
    o.keep_counts = false;  // As a store written before counts.
    auto a = Open(mem.store.get(), o);
    AddNumbered(*a, "s", "e", 50);
    REQUIRE(a->Close().ok());
  }
  {
    auto a = Open(mem.store.get(), Options(1));
    CHECK(CountOf(*a, "s") == 50);
    CHECK(a->stats().count_scans == 1);
    REQUIRE(a->Close().ok());
  }
  auto a = Open(mem.store.get(), Options(1));
  CHECK(CountOf(*a, "s") == 50);
  CHECK(a->stats().count_scans == 0);  // Stored by the first count.
  Add(*a, "s", "e1");                  // Present already.
  Add(*a, "s", "e50");
  CHECK(CountOf(*a, "s") == 51);
  CHECK(CountOf(*a, "never written") == 0);
}

TEST_CASE("count: Verify reports a wrong stored count and Repair fixes it") {
  MemStore mem;
  {
    auto a = Open(mem.store.get(), Options(1));
    AddNumbered(*a, "s", "e", 20);
    // An element key written behind the replica's back (its dot seen by
    // the clock: a next counter of the replica's own actor would not be).
    ClockOf(*a, "s");
    WriteBatch b;
    b.Put(ElementKey(1, "s", "ghost", Dot{a->actor(), 3}), "");
    REQUIRE(mem.store->Write(WriteOptions(), b).ok());
    auto report = a->Verify();
    REQUIRE(report.ok());
    CHECK(!report->ok());
    bool named = false;
    for (const std::string& p : report->problems) {
      named |= p.find("count in the set-clock (20)") != std::string::npos;
    }
    CHECK(named);
    REQUIRE(a->Close().ok());
  }
  auto repaired = Replica::Repair(mem.store.get(), Options(1));
  REQUIRE(repaired.ok());
  CHECK(repaired->counts_fixed == 1);
  auto a = Open(mem.store.get(), Options(1));
  CHECK(CountOf(*a, "s") == 21);
  CHECK(a->stats().count_scans == 0);
  auto report = a->Verify();
  REQUIRE(report.ok());
  CHECK(report->ok());
}

// Three replicas of two sets: random local updates (adds, blind re-adds,
// removes with the replica's context or a stale one), their deltas
// delivered late, out of order and twice, clears with a current or an old
// clock, sweeps, transfers (in order and shuffled), restarts; one replica
// with a filter budget too small for its filters. After every step each
// replica's Count equals its own read.
// One run of the randomized count test; returns what it ended with (each
// set as replica 0 reads it, and the seeks the filters saved), so that two
// runs of one seed can be compared.
std::string RandomizedCounts(uint64_t seed) {
  {
    CAPTURE(seed);
    Rng rng(seed);
    MemStore mem;
    std::vector<ReplicaOptions> options = {Options(1), Options(2),
                                           Options(3, 4096)};
    // Restarts take new actor ids, the same on every run of the seed.
    for (size_t k = 0; k < options.size(); ++k) {
      options[k].actor_id_source = SeededActorIds(seed * 3 + k);
    }
    std::vector<std::unique_ptr<Replica>> r;
    for (const ReplicaOptions& o : options)
      r.push_back(Open(mem.store.get(), o));
    const std::vector<std::string> sets = {"a", "b"};
    struct InFlight {
      size_t to;
      Delta delta;
    };
    std::deque<InFlight> flight;
    std::vector<Clock> old_clocks;
    auto element = [&]() { return absl::StrCat("e", Uniform(rng, 0, 60)); };
    // Every element the test may write, and one it never does.
    std::vector<std::string> universe;
    for (int e = 0; e <= 61; ++e) universe.push_back(absl::StrCat("e", e));
    uint64_t seeks_saved = 0;
    for (int step = 0; step < 400; ++step) {
      CAPTURE(step);
      const size_t i = Uniform(rng, 0, 2);
      const std::string& set = sets[Uniform(rng, 0, 1)];
      std::optional<Delta> made;
      switch (Uniform(rng, 0, 9)) {
        case 0:
        case 1:
        case 2: {  // Adds (some of present elements), a remove or two.
          std::vector<UpdateOp> ops;
          for (int k = 0, n = static_cast<int>(Uniform(rng, 1, 5)); k < n;
               ++k) {
            if (Uniform(rng, 0, 3) == 0) {
              UpdateOp rm;
              rm.kind = UpdateOp::Kind::kRemove;
              rm.element = element();
              rm.context_from_replica = true;
              ops.push_back(rm);
            } else {
              UpdateOp add = UpdateOp::Add(element());
              add.context_from_replica = Uniform(rng, 0, 1) == 0;
              ops.push_back(add);
            }
          }
          auto d = r[i]->Update(set, ops);
          REQUIRE(d.ok());
          made = *d;
          break;
        }
        case 3: {  // A remove with a context read earlier (maybe stale).
          std::vector<ElementDots> all = ReadAll(*r[i], set);
          if (all.empty()) break;
          const ElementDots& e = all[Uniform(rng, 0, all.size() - 1)];
          UpdateOp rm;
          rm.kind = UpdateOp::Kind::kRemove;
          rm.element = e.element;
          rm.context = e.dots;
          if (rm.context.size() > 1 && Uniform(rng, 0, 1) == 0) {
            rm.context.pop_back();  // Saw only some dots.
          }
          auto d = r[i]->Update(set, std::span(&rm, 1));
          REQUIRE(d.ok());
          made = *d;
          break;
        }
        case 4:
        case 5: {  // Deliver a delta (sometimes twice).
          if (flight.empty()) break;
          const size_t k = Uniform(rng, 0, flight.size() - 1);
          InFlight f = flight[k];
          if (Uniform(rng, 0, 3) != 0) flight.erase(flight.begin() + k);
          REQUIRE(r[f.to]->Apply(f.delta).ok());
          break;
        }
        case 6: {  // A clear: of the clock now, or of one seen earlier.
          auto clock = r[i]->GetClock(set);
          REQUIRE(clock.ok());
          old_clocks.push_back(*clock);
          Clock c = *clock;
          if (Uniform(rng, 0, 1) == 0) {
            c = old_clocks[Uniform(rng, 0, old_clocks.size() - 1)];
            // Only events this replica generated or saw may be claimed.
            c = Clock::Intersection(c, *clock);
          }
          auto d = r[i]->Clear(set, c);
          REQUIRE(d.ok());
          made = *d;
          break;
        }
        case 7: {
          REQUIRE(r[i]->SweepSome(Uniform(rng, 1, 50)).ok());
          break;
        }
        case 8: {  // A transfer (anti-entropy or a hand-off) to another.
          const size_t j = (i + Uniform(rng, 1, 2)) % 3;
          Transfer(*r[i], *r[j], set, Uniform(rng, 1, 20),
                   Uniform(rng, 0, 3) == 0, rng);
          break;
        }
        default: {  // A restart (clean or not).
          if (Uniform(rng, 0, 1) == 0) REQUIRE(r[i]->Close().ok());
          r[i].reset();
          r[i] = Open(mem.store.get(), options[i]);
          break;
        }
      }
      if (made.has_value()) {
        for (size_t to = 0; to < 3; ++to) {
          if (to != i) flight.push_back({to, *made});
        }
      }
      for (size_t k = 0; k < 3; ++k) {
        CAPTURE(k);
        for (const std::string& s : sets) {
          // Membership, which the presence filter answers without a seek
          // for what it rules out, agrees with the read.
          std::vector<ElementDots> read = ReadAllCounted(*r[k], s);
          const uint64_t before = r[k]->stats().presence_seeks_saved;
          auto m = r[k]->ContainsAll(s, universe);
          REQUIRE(m.ok());
          seeks_saved += r[k]->stats().presence_seeks_saved - before;
          for (size_t u = 0; u < universe.size(); ++u) {
            auto it = std::find_if(
                read.begin(), read.end(),
                [&](const ElementDots& e) { return e.element == universe[u]; });
            std::vector<Dot> want;
            if (it != read.end()) want = it->dots;
            std::vector<Dot> got = m->elements[u].dots;
            std::sort(want.begin(), want.end());
            std::sort(got.begin(), got.end());
            REQUIRE(got == want);
          }
        }
      }
    }
    // Everything delivered: the replicas agree, and so do their counts.
    while (!flight.empty()) {
      REQUIRE(r[flight.front().to]->Apply(flight.front().delta).ok());
      flight.pop_front();
    }
    for (const std::string& s : sets) {
      CAPTURE(s);
      const size_t n = ReadAllCounted(*r[0], s).size();
      for (size_t k = 1; k < 3; ++k)
        CHECK(ReadAllCounted(*r[k], s).size() == n);
    }
    // The filters answered some of those queries.
    REQUIRE(seeks_saved > 0);
    for (auto& replica : r) {
      auto report = replica->Verify();
      REQUIRE(report.ok());
      INFO((report->problems.empty() ? "" : report->problems[0]));
      CHECK(report->ok());
    }
    std::string out = absl::StrCat("saved ", seeks_saved);
    for (const std::string& s : sets) {
      for (const ElementDots& e : ReadAllCounted(*r[0], s)) {
        absl::StrAppend(&out, " ", s, "/", e.element);
        for (const Dot& d : e.dots) {
          absl::StrAppend(&out, ",", d.actor, ":", d.counter);
        }
      }
    }
    return out;
  }
}

TEST_CASE("count: randomized, every path, against each replica's read") {
  for (uint64_t seed : Seeds(6)) RandomizedCounts(seed);
}

TEST_CASE(
    "count: the randomized test's replicas restarted uncleanly took random "
    "actor ids, so two runs of one seed differed",
    "[regression]") {
  // A failing seed must fail again when rerun (BIGSET_TEST_SEED): the
  // replicas' new actor ids now come from the seed.
  CHECK(RandomizedCounts(5) == RandomizedCounts(5));
}

}  // namespace
}  // namespace bigset::testing
