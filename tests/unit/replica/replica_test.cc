// Replica: model-based tests (one and several replicas exchanging deltas
// that are dropped, duplicated and reordered), the named semantic cases,
// streaming reads, queries, corruption checks and the delta wire format.

#include "bigset/replica/replica.h"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bigset/keys/keys.h"
#include "bigset/replica/local_sets.h"
#include "bigset/store/leveldb_store.h"
#include "leveldb/env.h"
#include "leveldb/helpers/memenv.h"
#include "map_store.h"
#include "orswot_model.h"
#include "replica/clock_cache.h"
#include "replica/stripe_batch.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

// `actor_ids`: where new actor ids come from (random if empty).
std::unique_ptr<Replica> OpenReplica(
    Store* store, KeyspaceId ks, size_t cache_bytes = 1 << 20,
    std::function<ActorId()> actor_ids = nullptr) {
  ReplicaOptions o;
  o.keyspace = ks;
  o.actor_id_source = std::move(actor_ids);
  o.clock_cache_bytes = cache_bytes;
  o.lock_stripes = 4;
  auto r = Replica::Open(store, o);
  REQUIRE(r.ok());
  return std::move(*r);
}

std::vector<Dot> DotsOf(const ModelValue& v, const std::string& element) {
  auto it = v.find(element);
  if (it == v.end()) return {};
  return std::vector<Dot>(it->second.begin(), it->second.end());
}

// Every query against the model value of one set.
void CheckQueries(Replica& r, const std::string& set, const ModelValue& want,
                  Rng& rng, const std::vector<std::string>& universe) {
  // Full read with a random batch size.
  size_t batch = std::vector<size_t>{1, 7, 1000}[Uniform(rng, 0, 2)];
  REQUIRE(ToModel(ReadAll(r, set, batch)) == want);
  auto count = r.Count(set);
  REQUIRE(count.ok());
  REQUIRE(*count == want.size());
  // Membership.
  std::vector<std::string> probe;
  for (int i = 0; i < 5; ++i) {
    probe.push_back(universe[Uniform(rng, 0, universe.size() - 1)]);
  }
  for (const std::string& e : probe) {
    auto dots = r.Contains(set, e);
    REQUIRE(dots.ok());
    REQUIRE(*dots == DotsOf(want, e));
  }
  auto m = r.ContainsAll(set, probe);
  REQUIRE(m.ok());
  bool all = true;
  for (size_t i = 0; i < probe.size(); ++i) {
    REQUIRE(m->elements[i].element == probe[i]);
    REQUIRE(m->elements[i].dots == DotsOf(want, probe[i]));
    all = all && !m->elements[i].dots.empty();
  }
  REQUIRE(m->all_present == all);
  // A paged range with random bounds.
  RangeQuery q;
  if (Uniform(rng, 0, 3))
    q.start = universe[Uniform(rng, 0, universe.size() - 1)];
  if (Uniform(rng, 0, 3))
    q.end = universe[Uniform(rng, 0, universe.size() - 1)];
  q.start_inclusive = Uniform(rng, 0, 1);
  q.end_inclusive = Uniform(rng, 0, 1);
  q.limit = Uniform(rng, 1, 5);
  ModelValue expect_range;
  for (const auto& [e, dots] : want) {
    if (q.start && (e < *q.start || (e == *q.start && !q.start_inclusive)))
      continue;
    if (q.end && (e > *q.end || (e == *q.end && !q.end_inclusive))) continue;
    expect_range[e] = dots;
  }
  ModelValue got_range;
  for (int pages = 0;; ++pages) {
    REQUIRE(pages <= static_cast<int>(want.size()) + 1);
    auto page = r.Range(set, q);
    REQUIRE(page.ok());
    REQUIRE(page->elements.size() <= q.limit);
    for (const auto& e : page->elements) {
      REQUIRE(got_range.count(e.element) == 0);
      got_range[e.element].insert(e.dots.begin(), e.dots.end());
    }
    if (page->continuation.empty()) break;
    q.continuation = page->continuation;
  }
  REQUIRE(got_range == expect_range);
  // Prefix.
  std::string prefix = universe[Uniform(rng, 0, universe.size() - 1)];
  prefix.resize(std::min<size_t>(prefix.size(), Uniform(rng, 0, 2)));
  ModelValue expect_prefix;
  for (const auto& [e, dots] : want) {
    if (e.compare(0, prefix.size(), prefix) == 0) expect_prefix[e] = dots;
  }
  ModelValue got_prefix;
  std::string token;
  while (true) {
    auto page = r.Prefix(set, prefix, 3, token);
    REQUIRE(page.ok());
    for (const auto& e : page->elements) {
      got_prefix[e.element].insert(e.dots.begin(), e.dots.end());
    }
    if (page->continuation.empty()) break;
    token = page->continuation;
  }
  REQUIRE(got_prefix == expect_prefix);
}

// A cluster of replicas in one store (one keyspace each) and a lossy,
// duplicating, reordering network of deltas between them.
enum class StoreKind { kLevelDb, kMap };

// Seeds every replica's sets with a large scattered cloud: removes of dots
// of an actor that never adds (every other counter up to 2 * dots, in a
// shuffled order), so clocks have thousands of runs and their segments are
// rewritten by the test's updates.
void SeedScatteredClouds(std::vector<std::unique_ptr<Replica>>& replicas,
                         const std::vector<std::string>& sets, Rng& rng,
                         uint64_t dots) {
  std::vector<uint64_t> counters;
  for (uint64_t c = 2; c <= 2 * dots; c += 2) counters.push_back(c);
  for (const std::string& set : sets) {
    std::shuffle(counters.begin(), counters.end(), rng);
    for (size_t i = 0; i < counters.size(); i += 500) {
      Delta d;
      d.set = set;
      DeltaOp& op = d.ops.emplace_back();
      op.element = "never-added";
      for (size_t k = i; k < std::min(counters.size(), i + 500); ++k) {
        op.context.push_back(Dot{0xC10D, counters[k]});
      }
      for (auto& r : replicas) REQUIRE(r->Apply(d).ok());
    }
  }
}

struct Harness {
  Harness(int n, Rng& rng, StoreKind kind) : rng(rng) {
    if (kind == StoreKind::kMap) {
      map_store = std::make_unique<testing::MapStore>();
      store = map_store.get();
    } else {
      store = mem.store.get();
    }
    for (int i = 0; i < n; ++i) {
      // A small clock cache forces evictions and reloads.
      // Seeded actor ids: two runs of one seed are the same run.
      replicas.push_back(
          OpenReplica(store, 10 + i, 4096, SeededActorIds(10 + i)));
      delivered.emplace_back();
      inbox.emplace_back();
    }
    universe = {
        "",    std::string("\0", 1), "a", std::string("a\0", 2), "ab", "b",
        "\xff"};
    for (int i = 0; i < 12; ++i) universe.push_back(AdversarialBytes(rng, 3));
    sets = {"s1", std::string("s\0", 2), ""};
  }

  ModelValue Expected(int r, const std::string& set) const {
    OrswotModel model;
    for (size_t id : delivered[r]) {
      if (deltas[id].set == set) model.Absorb(deltas[id]);
    }
    return model.Value();
  }

  void Record(int origin, Delta d) {
    for (const DeltaOp& op : d.ops) {
      if (op.add.has_value()) generated[{d.set, op.element}].push_back(*op.add);
    }
    size_t id = deltas.size();
    deltas.push_back(std::move(d));
    delivered[origin].insert(id);
    for (size_t r = 0; r < replicas.size(); ++r) {
      if (static_cast<int>(r) != origin) inbox[r].push_back(id);
    }
  }

  std::vector<Dot> RandomContext(int r, const std::string& set,
                                 const std::string& element) {
    std::vector<Dot> ctx;
    switch (Uniform(rng, 0, 4)) {
      case 0:
        return ctx;  // Empty.
      case 1: {
        // Dots some replica once returned for this element: possibly
        // unseen here, possibly removed already.
        auto it = generated.find({set, element});
        if (it == generated.end()) return ctx;
        for (int i = 0, n = Uniform(rng, 1, 3); i < n; ++i) {
          ctx.push_back(it->second[Uniform(rng, 0, it->second.size() - 1)]);
        }
        return ctx;
      }
      default: {
        // What a read of this replica returns: its current dots.
        auto dots = replicas[r]->Contains(set, element);
        REQUIRE(dots.ok());
        ctx = *dots;
        if (!ctx.empty() && Uniform(rng, 0, 3) == 0) ctx.pop_back();
        return ctx;
      }
    }
  }

  void RandomUpdate(int r) {
    const std::string& set = sets[Uniform(rng, 0, sets.size() - 1)];
    if (Uniform(rng, 0, 20) == 0) {
      // Clear with a clock some replica read (possibly not this one, so it
      // may hold dots this replica has not seen yet).
      auto c = replicas[Uniform(rng, 0, replicas.size() - 1)]->GetClock(set);
      REQUIRE(c.ok());
      auto d = replicas[r]->Clear(set, *c);
      REQUIRE(d.ok());
      Record(r, std::move(*d));
      return;
    }
    std::vector<UpdateOp> ops;
    for (int i = 0, n = Uniform(rng, 1, 3); i < n; ++i) {
      std::string e = universe[Uniform(rng, 0, universe.size() - 1)];
      std::vector<Dot> ctx = RandomContext(r, set, e);
      if (Uniform(rng, 0, 2) == 0) {
        ops.push_back(UpdateOp::Remove(e, ctx));
      } else {
        ops.push_back(UpdateOp::Add(e, ctx));
      }
      if (Uniform(rng, 0, 9) == 0) ops.back().context_from_replica = true;
    }
    auto d = replicas[r]->Update(set, ops);
    REQUIRE(d.ok());
    // The delta survives its wire format.
    auto decoded = Delta::Decode(d->Encode());
    REQUIRE(decoded.ok());
    REQUIRE(*decoded == *d);
    Record(r, std::move(*decoded));
  }

  void Deliver(int r, size_t id) {
    REQUIRE(replicas[r]->Apply(deltas[id]).ok());
    delivered[r].insert(id);
  }

  void RandomNetworkStep() {
    int r = static_cast<int>(Uniform(rng, 0, replicas.size() - 1));
    if (inbox[r].empty()) return;
    size_t pos = Uniform(rng, 0, inbox[r].size() - 1);  // Reorder.
    size_t id = inbox[r][pos];
    switch (Uniform(rng, 0, 5)) {
      case 0:  // Drop (delivered later by the final exchange).
        inbox[r].erase(inbox[r].begin() + pos);
        dropped.push_back({r, id});
        break;
      case 1:  // Duplicate: deliver and keep it queued.
        Deliver(r, id);
        break;
      default:
        Deliver(r, id);
        inbox[r].erase(inbox[r].begin() + pos);
    }
  }

  uint64_t ElementKeys(int r) {
    uint64_t n = 0;
    for (const std::string& set : sets) {
      auto it = store->NewIterator(ReadOptions(),
                                   ElementsRange(replicas[r]->keyspace(), set));
      for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
      REQUIRE(it->status().ok());
    }
    return n;
  }

  // A bounded sweep: no value changes, and storage never grows.
  void RandomSweep(int r) {
    std::vector<ModelValue> before;
    for (const std::string& set : sets) {
      before.push_back(ToModel(ReadAll(*replicas[r], set)));
    }
    const uint64_t keys = ElementKeys(r);
    auto p = replicas[r]->SweepSome(Uniform(rng, 1, 40));
    REQUIRE(p.ok());
    REQUIRE(ElementKeys(r) == keys - p->keys_deleted);
    swept += p->keys_deleted;
    for (size_t i = 0; i < sets.size(); ++i) {
      REQUIRE(ToModel(ReadAll(*replicas[r], sets[i])) == before[i]);
    }
  }

  // Sweeps until the queue is empty: every tombstone is then empty, and the
  // keys on disk are exactly the value's dots (what a set freshly built
  // with those elements would hold).
  void SweepFully(int r) {
    for (int i = 0;; ++i) {
      REQUIRE(i < 100);
      auto p = replicas[r]->SweepSome(UINT64_MAX);
      REQUIRE(p.ok());
      swept += p->keys_deleted;
      if (p->idle) break;
    }
    uint64_t dots = 0;
    for (const std::string& set : sets) {
      auto st = replicas[r]->GetSetStats(set);
      REQUIRE(st.ok());
      REQUIRE(st->tombstone_dots == 0);
      for (const auto& [e, d] : Expected(r, set)) dots += d.size();
    }
    REQUIRE(ElementKeys(r) == dots);
    REQUIRE(replicas[r]->stats().sweep_queue_length == 0);
  }

  void CheckReplica(int r) {
    for (const std::string& set : sets) {
      INFO("replica " << r << " set \"" << set << "\"");
      CheckQueries(*replicas[r], set, Expected(r, set), rng, universe);
    }
  }

  Rng& rng;
  MemStore mem;
  std::unique_ptr<testing::MapStore> map_store;
  Store* store = nullptr;
  std::vector<std::unique_ptr<Replica>> replicas;
  std::vector<Delta> deltas;
  std::vector<std::set<size_t>> delivered;
  std::vector<std::deque<size_t>> inbox;
  std::vector<std::pair<int, size_t>> dropped;
  std::vector<std::string> universe;
  std::vector<std::string> sets;
  uint64_t swept = 0;  // Keys the sweeps deleted.
  // Every dot ever added, per (set, element).
  std::map<std::pair<std::string, std::string>, std::vector<Dot>> generated;
};

void RunModelTest(int replicas, int ops, int seeds,
                  StoreKind kind = StoreKind::kLevelDb,
                  uint64_t cloud_dots = 0) {
  for (uint64_t seed : Seeds(seeds)) {
    CAPTURE(seed, replicas);
    Rng rng(seed);
    Harness h(replicas, rng, kind);
    if (cloud_dots > 0) {
      SeedScatteredClouds(h.replicas, h.sets, rng, cloud_dots);
    }
    for (int step = 0; step < ops; ++step) {
      if (Uniform(rng, 0, 15) == 0) {
        h.RandomSweep(static_cast<int>(Uniform(rng, 0, replicas - 1)));
      } else if (replicas == 1 || Uniform(rng, 0, 1)) {
        h.RandomUpdate(static_cast<int>(Uniform(rng, 0, replicas - 1)));
      } else {
        h.RandomNetworkStep();
      }
      if (step % 97 == 0) {
        h.CheckReplica(static_cast<int>(Uniform(rng, 0, replicas - 1)));
      }
    }
    // Then everything is delivered, dropped deltas included.
    for (int r = 0; r < replicas; ++r) {
      for (size_t id = 0; id < h.deltas.size(); ++id) {
        if (!h.delivered[r].count(id)) h.Deliver(r, id);
      }
    }
    for (int r = 0; r < replicas; ++r) {
      h.CheckReplica(r);
      h.SweepFully(r);
      h.CheckReplica(r);
      auto report = h.replicas[r]->Verify();
      REQUIRE(report.ok());
      INFO((report->problems.empty() ? std::string() : report->problems[0]));
      REQUIRE(report->ok());
    }
    // The test exercised the sweeper.
    REQUIRE(h.swept > 0);
    // All replicas hold the same value, equal to the model of every delta.
    for (const std::string& set : h.sets) {
      ModelValue all = h.Expected(0, set);
      for (int r = 0; r < replicas; ++r) {
        REQUIRE(ToModel(ReadAll(*h.replicas[r], set, 1000)) == all);
      }
    }
  }
}

TEST_CASE("replica: one replica equals the model") { RunModelTest(1, 2000, 6); }

TEST_CASE("replica: two replicas with a lossy network equal the model") {
  RunModelTest(2, 3000, 6);
}

TEST_CASE("replica: three replicas with a lossy network equal the model") {
  RunModelTest(3, 3000, 6);
}

TEST_CASE("replica: the model test with large scattered clouds in clocks") {
  RunModelTest(1, 1500, 3, StoreKind::kLevelDb, 20000);
  RunModelTest(3, 2500, 3, StoreKind::kLevelDb, 20000);
}

TEST_CASE("replica: the model test on a second Store (an ordered map)") {
  // Nothing above the Store interface depends on LevelDB.
  RunModelTest(1, 2000, 3, StoreKind::kMap);
  RunModelTest(3, 3000, 3, StoreKind::kMap);
}

// ---- Named cases.

struct Pair {
  MemStore mem;
  std::unique_ptr<Replica> a = OpenReplica(mem.store.get(), 1);
  std::unique_ptr<Replica> b = OpenReplica(mem.store.get(), 2);
};

std::vector<Dot> Dots(Replica& r, const std::string& e) {
  auto d = r.Contains("s", e);
  REQUIRE(d.ok());
  return *d;
}

Delta Do(Replica& r, UpdateOp op) {
  auto d = r.Update("s", std::span(&op, 1));
  REQUIRE(d.ok());
  return *d;
}

// Update and Apply build their batch in their stripe's reused one. It must
// carry nothing between writes, and must not keep a bulk write's buffer:
// a remove-only update of many elements reserves far more than it writes
// (found by review: the bound once looked at the contents, not the buffer).
TEST_CASE(
    "replica: a stripe's batch is empty when lent and bounded when kept") {
  WriteBatch batch;
  batch.Put("left", "over");  // whatever a write left behind
  {
    StripeBatch lent(&batch);
    CHECK(lent.get().Count() == 0);
    CHECK(lent.get().ApproximateSize() == 0);
    lent.get().Reserve(1024);
    lent.get().Put("k", "v");
  }
  CHECK(batch.Count() == 0);
  CHECK(batch.ApproximateSize() == 0);
  CHECK(batch.ReservedBytes() >= 1024);  // an insert's worth: kept
  {
    StripeBatch lent(&batch);
    lent.get().Reserve(1 << 20);  // reserved, nothing written
  }
  CHECK(batch.ReservedBytes() <= StripeBatch::kMaxKeptBytes);
  {
    StripeBatch lent(&batch);
    for (int i = 0; i < 1000; ++i) {
      lent.get().Put("key" + std::to_string(i), std::string(100, 'v'));
    }
  }
  CHECK(batch.Count() == 0);
  CHECK(batch.ReservedBytes() <= StripeBatch::kMaxKeptBytes);
  // Operations of just under 16 KiB, unreserved: the buffer doubled past
  // 16 KiB on its way (found by review: the bound once looked at the
  // operations' bytes, not the buffer's).
  {
    StripeBatch lent(&batch);
    while (lent.get().ApproximateSize() < 16000) {
      lent.get().Put("key", std::string(90, 'v'));
    }
    CHECK(lent.get().ReservedBytes() > StripeBatch::kMaxKeptBytes);
  }
  CHECK(batch.ReservedBytes() <= StripeBatch::kMaxKeptBytes);
}

TEST_CASE("replica: concurrent add and remove leave the element present") {
  Pair p;
  Delta add1 = Do(*p.a, UpdateOp::Add("x"));
  REQUIRE(p.b->Apply(add1).ok());
  // a removes what it saw while b concurrently adds again.
  Delta rm = Do(*p.a, UpdateOp::Remove("x", Dots(*p.a, "x")));
  Delta add2 = Do(*p.b, UpdateOp::Add("x"));
  REQUIRE(p.a->Apply(add2).ok());
  REQUIRE(p.b->Apply(rm).ok());
  CHECK(Dots(*p.a, "x") == std::vector<Dot>{*add2.ops[0].add});
  CHECK(Dots(*p.b, "x") == std::vector<Dot>{*add2.ops[0].add});
}

TEST_CASE("replica: a remove with an empty context does nothing") {
  Pair p;
  Delta add = Do(*p.a, UpdateOp::Add("x"));
  Delta rm = Do(*p.a, UpdateOp::Remove("x", {}));
  CHECK(Dots(*p.a, "x") == std::vector<Dot>{*add.ops[0].add});
  REQUIRE(p.b->Apply(rm).ok());
  REQUIRE(p.b->Apply(add).ok());
  CHECK(Dots(*p.b, "x") == std::vector<Dot>{*add.ops[0].add});
}

TEST_CASE("replica: a remove of unseen dots hides the later-arriving add") {
  Pair p;
  Delta add = Do(*p.a, UpdateOp::Add("x"));
  Delta rm = Do(*p.a, UpdateOp::Remove("x", Dots(*p.a, "x")));
  // b gets the remove first: it has never seen the add's dot.
  REQUIRE(p.b->Apply(rm).ok());
  auto clock = p.b->GetClock("s");
  REQUIRE(clock.ok());
  CHECK(clock->Seen(*add.ops[0].add));
  REQUIRE(p.b->Apply(add).ok());
  CHECK(Dots(*p.b, "x").empty());
  CHECK(ReadAll(*p.b, "s", 10).empty());
  auto report = p.b->Verify();
  REQUIRE(report.ok());
  CHECK(report->ok());
}

TEST_CASE("replica: an add with a context replaces only the dots it saw") {
  Pair p;
  Delta a1 = Do(*p.a, UpdateOp::Add("x"));
  Delta b1 = Do(*p.b, UpdateOp::Add("x"));  // Concurrent, unseen by a.
  // a re-adds with the context it saw (its own dot only).
  Delta a2 = Do(*p.a, UpdateOp::Add("x", Dots(*p.a, "x")));
  REQUIRE(p.a->Apply(b1).ok());
  REQUIRE(p.b->Apply(a1).ok());
  REQUIRE(p.b->Apply(a2).ok());
  std::vector<Dot> want = {*b1.ops[0].add, *a2.ops[0].add};
  std::sort(want.begin(), want.end());
  CHECK(Dots(*p.a, "x") == want);
  CHECK(Dots(*p.b, "x") == want);
}

TEST_CASE(
    "replica: a context from the replica joins the given context (SADD with "
    "a read quorum's dots)") {
  Pair p;
  Delta a1 = Do(*p.a, UpdateOp::Add("x"));  // a's own dot.
  Delta b1 = Do(*p.b, UpdateOp::Add("x"));  // A dot a has not seen yet.
  UpdateOp add = UpdateOp::Add("x", {*b1.ops[0].add, *a1.ops[0].add});
  add.context_from_replica = true;
  Delta a2 = Do(*p.a, add);
  // Each dot once, sorted: a's own and the one it was given.
  std::vector<Dot> context = {*a1.ops[0].add, *b1.ops[0].add};
  std::sort(context.begin(), context.end());
  CHECK(a2.ops[0].context == context);
  CHECK(Dots(*p.a, "x") == std::vector<Dot>{*a2.ops[0].add});
  // b1 arrives late: replaced already, it stays out; b ends the same.
  REQUIRE(p.a->Apply(b1).ok());
  CHECK(Dots(*p.a, "x") == std::vector<Dot>{*a2.ops[0].add});
  REQUIRE(p.b->Apply(a2).ok());
  REQUIRE(p.b->Apply(a1).ok());
  CHECK(Dots(*p.b, "x") == std::vector<Dot>{*a2.ops[0].add});
}

TEST_CASE("replica: two dots of one actor on one element both survive") {
  Pair p;
  Delta d1 = Do(*p.a, UpdateOp::Add("x"));
  Delta d2 = Do(*p.a, UpdateOp::Add("x"));  // Empty context: concurrent.
  REQUIRE(d1.ops[0].add->actor == d2.ops[0].add->actor);
  std::vector<Dot> want = {*d1.ops[0].add, *d2.ops[0].add};
  CHECK(Dots(*p.a, "x") == want);
  REQUIRE(p.b->Apply(d2).ok());
  REQUIRE(p.b->Apply(d1).ok());
  CHECK(Dots(*p.b, "x") == want);
  // Removing one of them leaves the other.
  Do(*p.a, UpdateOp::Remove("x", {want[0]}));
  CHECK(Dots(*p.a, "x") == std::vector<Dot>{want[1]});
}

TEST_CASE("replica: Clear followed by a concurrent add leaves that add") {
  Pair p;
  Delta x = Do(*p.a, UpdateOp::Add("x"));
  Delta y = Do(*p.a, UpdateOp::Add("y"));
  REQUIRE(p.b->Apply(x).ok());
  REQUIRE(p.b->Apply(y).ok());
  auto clock = p.a->GetClock("s");
  REQUIRE(clock.ok());
  auto clear = p.a->Clear("s", *clock);
  REQUIRE(clear.ok());
  // Reads honour the clear at once.
  CHECK(ReadAll(*p.a, "s", 10).empty());
  auto count = p.a->Count("s");
  REQUIRE(count.ok());
  CHECK(*count == 0);
  Delta z = Do(*p.b, UpdateOp::Add("x"));  // Concurrent with the clear.
  REQUIRE(p.a->Apply(z).ok());
  REQUIRE(p.b->Apply(*clear).ok());
  for (Replica* r : {p.a.get(), p.b.get()}) {
    auto all = ReadAll(*r, "s", 10);
    REQUIRE(all.size() == 1);
    CHECK(all[0].element == "x");
    CHECK(all[0].dots == std::vector<Dot>{*z.ops[0].add});
  }
  auto stats = p.a->GetSetStats("s");
  REQUIRE(stats.ok());
  CHECK(stats->tombstone_dots == 2);
  CHECK(stats->tombstone_bytes > 0);
}

TEST_CASE("replica: duplicate and reordered deltas are harmless") {
  Pair p;
  std::vector<Delta> ds;
  for (int i = 0; i < 20; ++i) {
    ds.push_back(Do(*p.a, UpdateOp::Add(std::to_string(i % 5))));
    if (i % 3 == 0) {
      std::string e = std::to_string(i % 5);
      ds.push_back(Do(*p.a, UpdateOp::Remove(e, Dots(*p.a, e))));
    }
  }
  std::reverse(ds.begin(), ds.end());
  for (int round = 0; round < 3; ++round) {
    for (const Delta& d : ds) REQUIRE(p.b->Apply(d).ok());
  }
  CHECK(ReadAll(*p.a, "s", 2) == ReadAll(*p.b, "s", 3));
  auto ca = p.a->GetClock("s");
  auto cb = p.b->GetClock("s");
  REQUIRE(ca.ok());
  REQUIRE(cb.ok());
  CHECK(*ca == *cb);
}

// ---- Reads.

TEST_CASE("replica: batch sizes 1, 7 and 1000 read the same set") {
  MemStore mem;
  auto r = OpenReplica(mem.store.get(), 0);
  Rng rng(7);
  std::vector<UpdateOp> ops;
  for (int i = 0; i < 3000; ++i) {
    ops.push_back(UpdateOp::Add(AdversarialBytes(rng, 6)));
    if (ops.size() == 100) {
      REQUIRE(r->Update("big", ops).ok());
      ops.clear();
    }
  }
  Clock c1, c7, c1000;
  auto r1 = ReadAll(*r, "big", 1, &c1);
  auto r7 = ReadAll(*r, "big", 7, &c7);
  auto r1000 = ReadAll(*r, "big", 1000, &c1000);
  CHECK(r1 == r7);
  CHECK(r7 == r1000);
  CHECK(c1 == c1000);
  CHECK(c1.DotCount() == 3000);
}

TEST_CASE("replica: a read sees one snapshot while writes go on") {
  MemStore mem;
  auto r = OpenReplica(mem.store.get(), 0);
  for (int i = 0; i < 100; ++i) {
    UpdateOp op = UpdateOp::Add(absl::StrCat("e", 1000 + i));
    REQUIRE(r->Update("s", std::span(&op, 1)).ok());
  }
  SetReadOptions o;
  o.batch_size = 10;
  auto reader = r->Read("s", o);
  REQUIRE(reader.ok());
  Clock at_start = (*reader)->clock();
  std::vector<ElementDots> chunk;
  size_t seen = 0;
  bool first = true;
  while (true) {
    auto more = (*reader)->Next(&chunk);
    REQUIRE(more.ok());
    if (!*more) break;
    seen += chunk.size();
    if (first) {
      // Between chunks: remove everything and add more.
      first = false;
      auto all = ReadAll(*r, "s", 1000);
      for (const auto& e : all) {
        UpdateOp rm = UpdateOp::Remove(e.element, e.dots);
        REQUIRE(r->Update("s", std::span(&rm, 1)).ok());
      }
      UpdateOp add = UpdateOp::Add("e0000");
      REQUIRE(r->Update("s", std::span(&add, 1)).ok());
    }
  }
  CHECK(seen == 100);
  CHECK((*reader)->clock() == at_start);
  CHECK(ReadAll(*r, "s", 1000).size() == 1);
}

TEST_CASE("replica: read arguments are validated") {
  MemStore mem;
  auto r = OpenReplica(mem.store.get(), 0);
  SetReadOptions o;
  o.batch_size = 0;
  CHECK(r->Read("s", o).status().code() == absl::StatusCode::kInvalidArgument);
  RangeQuery q;
  q.continuation = "\x7fjunk";
  CHECK(r->Range("s", q).status().code() == absl::StatusCode::kInvalidArgument);
}

// ---- Identity, persistence and corruption.

TEST_CASE("replica: the actor id persists and keyspaces are independent") {
  MemStore mem;
  ActorId first;
  {
    auto r = OpenReplica(mem.store.get(), 5);
    first = r->actor();
    UpdateOp op = UpdateOp::Add("x");
    REQUIRE(r->Update("s", std::span(&op, 1)).ok());
    REQUIRE(r->Close().ok());  // A clean shutdown keeps the actor.
    CHECK(r->Update("s", std::span(&op, 1)).status().code() ==
          absl::StatusCode::kFailedPrecondition);
  }
  auto again = OpenReplica(mem.store.get(), 5);
  CHECK(again->actor() == first);
  auto other = OpenReplica(mem.store.get(), 6);
  CHECK(other->actor() != first);
  CHECK(ReadAll(*other, "s", 10).empty());
  // Counters continue after reopening: never reused.
  UpdateOp op = UpdateOp::Add("y");
  auto d = again->Update("s", std::span(&op, 1));
  REQUIRE(d.ok());
  CHECK(d->ops[0].add->counter == 2);
}

// Regression: a new epoch (an open after a run that may have lost unsynced
// writes) took whatever actor_id_source returned, even the actor it
// replaces, whose counters it would then issue again.
TEST_CASE("replica: a new epoch refuses its predecessor's actor") {
  MemStore mem;
  ReplicaOptions o;
  o.keyspace = 3;
  std::vector<ActorId> ids = {7, 7, 9};
  size_t next = 0;
  o.actor_id_source = [&] { return ids[next++]; };
  {
    auto r = Replica::Open(mem.store.get(), o);
    REQUIRE(r.ok());
    CHECK((*r)->actor() == 7);
    UpdateOp op = UpdateOp::Add("x");
    REQUIRE((*r)->Update("s", std::span(&op, 1)).ok());
    // Dropped without Close, writes unsynced: the next open is a new epoch.
  }
  auto repeated = Replica::Open(mem.store.get(), o);
  REQUIRE_FALSE(repeated.ok());
  CHECK(repeated.status().code() == absl::StatusCode::kFailedPrecondition);
  // Nothing was written by the refused open: the next id is taken.
  auto fresh = Replica::Open(mem.store.get(), o);
  REQUIRE(fresh.ok());
  CHECK((*fresh)->actor() == 9);
  CHECK(Dots(**fresh, "x").size() == 1);
}

TEST_CASE("replica: element keys without a set-clock are corruption") {
  MemStore mem;
  {
    auto r = OpenReplica(mem.store.get(), 1);
    UpdateOp op = UpdateOp::Add("x");
    REQUIRE(r->Update("s", std::span(&op, 1)).ok());
    // Lose the set-clock behind the replica's back.
    WriteBatch b;
    b.Delete(SetClockKey(1, "s"));
    REQUIRE(mem.store->Write(WriteOptions(), b).ok());
  }
  auto r = OpenReplica(mem.store.get(), 1);
  UpdateOp op = UpdateOp::Add("y");
  auto d = r->Update("s", std::span(&op, 1));
  REQUIRE_FALSE(d.ok());
  CHECK(d.status().code() == absl::StatusCode::kDataLoss);
  CHECK_FALSE(r->Read("s").ok());
  auto report = r->Verify();
  REQUIRE(report.ok());
  CHECK_FALSE(report->ok());
  REQUIRE(!report->problems.empty());
  CHECK(report->problems[0].find("without a set-clock") != std::string::npos);
  // A keyspace whose actor id is gone is refused outright.
  WriteBatch b;
  b.Delete(MetadataKey(1, "actor"));
  REQUIRE(mem.store->Write(WriteOptions(), b).ok());
  ReplicaOptions o;
  o.keyspace = 1;
  auto lost = Replica::Open(mem.store.get(), o);
  CHECK(lost.status().code() == absl::StatusCode::kDataLoss);
}

TEST_CASE("replica: Contains reports a malformed key of its element") {
  MemStore mem;
  auto r = OpenReplica(mem.store.get(), 1);
  UpdateOp op = UpdateOp::Add("x");
  REQUIRE(r->Update("s", std::span(&op, 1)).ok());
  // A key in "x"'s range whose dot is cut short, and one with bytes past
  // the dot: neither is a key of "x".
  for (int cut : {-1, 1}) {
    CAPTURE(cut);
    const std::string good = ElementKey(1, "s", "x", Dot{7, 9});
    const std::string bad =
        cut < 0 ? good.substr(0, good.size() - 1) : good + "z";
    WriteBatch b;
    b.Put(bad, "");
    REQUIRE(mem.store->Write(WriteOptions(), b).ok());
    auto dots = r->Contains("s", "x");
    REQUIRE_FALSE(dots.ok());
    CHECK(dots.status().code() == absl::StatusCode::kDataLoss);
    WriteBatch undo;
    undo.Delete(bad);
    REQUIRE(mem.store->Write(WriteOptions(), undo).ok());
  }
  // Undamaged again: the element's one dot, and nothing for a neighbour.
  auto dots = r->Contains("s", "x");
  REQUIRE(dots.ok());
  CHECK(dots->size() == 1);
  auto none = r->Contains("s", "xx");
  REQUIRE(none.ok());
  CHECK(none->empty());
}

TEST_CASE("replica: Verify finds unseen dots and undecodable values") {
  MemStore mem;
  auto r = OpenReplica(mem.store.get(), 1);
  UpdateOp op = UpdateOp::Add("x");
  REQUIRE(r->Update("s", std::span(&op, 1)).ok());
  REQUIRE(r->Update("t", std::span(&op, 1)).ok());
  auto clean = r->Verify();
  REQUIRE(clean.ok());
  CHECK(clean->ok());
  CHECK(clean->sets == 2);
  CHECK(clean->element_keys == 2);
  WriteBatch b;
  b.Put(ElementKey(1, "s", "ghost", Dot{r->actor(), 99}), "");
  b.Put(SetClockKey(1, "t"), "garbage");
  REQUIRE(mem.store->Write(WriteOptions(), b).ok());
  auto report = r->Verify();
  REQUIRE(report.ok());
  // Unseen dot (and the keys digest and count it breaks), bad clock, t's
  // element.
  CHECK(report->problem_count == 5);
  // Verify changed nothing.
  std::string v;
  REQUIRE(mem.store->Get(ReadOptions(), SetClockKey(1, "t"), &v).ok());
  CHECK(v == "garbage");
}

TEST_CASE("replica: stats count what happened") {
  MemStore mem;
  auto r = OpenReplica(mem.store.get(), 1);
  for (int i = 0; i < 10; ++i) {
    UpdateOp op = UpdateOp::Add(std::to_string(i));
    REQUIRE(r->Update("s", std::span(&op, 1)).ok());
  }
  UpdateOp rm = UpdateOp::Remove("3", Dots(*r, "3"));
  REQUIRE(r->Update("s", std::span(&rm, 1)).ok());
  ReplicaStats s = r->stats();
  CHECK(s.updates_coordinated == 11);
  CHECK(s.keys_written == 10 + 11);  // Element keys plus one clock per write.
  CHECK(s.keys_deleted == 1);
  CHECK(s.clock_cache_misses == 1);
  CHECK(s.clock_cache_hits >= 10);
  auto set_stats = r->GetSetStats("s");
  REQUIRE(set_stats.ok());
  CHECK(set_stats->clock_dots == 10);
  CHECK(set_stats->clock_bytes > 0);
  CHECK(set_stats->clock_bytes < 32);
  CHECK(set_stats->tombstone_bytes == 0);
}

// ---- The single-node facade.

TEST_CASE("local sets: add, remove, members") {
  auto env = std::unique_ptr<leveldb::Env>(
      leveldb::NewMemEnv(leveldb::Env::Default()));
  LocalSetsOptions o;
  o.store.env = env.get();
  auto sets = LocalSets::Open("/mem/local", o);
  REQUIRE(sets.ok());
  LocalSets& s = **sets;
  REQUIRE(s.Add("fruits", "pear").ok());
  REQUIRE(s.Add("fruits", "apple").ok());
  REQUIRE(s.Add("fruits", "apple").ok());  // Replaces: still one key.
  REQUIRE(s.Add("colors", "red").ok());
  auto members = s.Members("fruits");
  REQUIRE(members.ok());
  CHECK(*members == std::vector<std::string>{"apple", "pear"});
  auto dots = s.replica().Contains("fruits", "apple");
  REQUIRE(dots.ok());
  CHECK(dots->size() == 1);
  REQUIRE(s.Remove("fruits", "apple").ok());
  REQUIRE(s.Remove("fruits", "absent").ok());
  CHECK(*s.Contains("fruits", "apple") == false);
  CHECK(*s.Contains("fruits", "pear") == true);
  CHECK(*s.Count("fruits") == 1);
  CHECK(*s.Count("colors") == 1);
}

// ---- Delta wire format.

TEST_CASE("delta: round trip, garbage and truncation") {
  for (uint64_t seed : Seeds(10)) {
    CAPTURE(seed);
    Rng rng(seed);
    for (int i = 0; i < 300; ++i) {
      Delta d;
      d.set = AdversarialBytes(rng, 8);
      if (Uniform(rng, 0, 3) == 0) {
        Clock c;
        for (int j = 0; j < 5; ++j)
          c.AddDot(Dot{Uniform(rng, 0, 3), Uniform(rng, 1, 50)});
        d.clear = c;
      }
      for (int j = 0, n = Uniform(rng, 0, 4); j < n; ++j) {
        DeltaOp op;
        op.element = AdversarialBytes(rng, 8);
        if (Uniform(rng, 0, 1)) op.add = Dot{rng(), Uniform(rng, 1, ~0ull)};
        for (int k = 0, m = Uniform(rng, 0, 3); k < m; ++k) {
          op.context.push_back(Dot{rng(), Uniform(rng, 1, ~0ull)});
        }
        d.ops.push_back(op);
      }
      std::string enc = d.Encode();
      auto back = Delta::Decode(enc);
      REQUIRE(back.ok());
      REQUIRE(*back == d);
      for (size_t len = 0; len < enc.size(); ++len) {
        REQUIRE_FALSE(Delta::Decode(enc.substr(0, len)).ok());
      }
      REQUIRE_FALSE(Delta::Decode(enc + "x").ok());
      // Bit flips: an error or some valid delta, never a crash.
      std::string flipped = enc;
      flipped[Uniform(rng, 0, flipped.size() - 1)] ^=
          static_cast<char>(1 << Uniform(rng, 0, 7));
      (void)Delta::Decode(flipped);
    }
    for (int i = 0; i < 2000; ++i) {
      std::string junk = AdversarialBytes(rng, 64);
      if (!junk.empty() && Uniform(rng, 0, 1)) junk[0] = 1;
      auto d = Delta::Decode(junk);
      if (!d.ok()) continue;
      auto again = Delta::Decode(d->Encode());
      REQUIRE(again.ok());
      REQUIRE(*again == *d);
    }
  }
}

}  // namespace
}  // namespace bigset::testing

namespace bigset::testing {
namespace {

TEST_CASE("replica: ListSets seeks from set to set") {
  testing::MemStore mem;
  auto r = OpenReplica(mem.store.get(), 3);
  auto other = OpenReplica(mem.store.get(), 4);
  std::vector<std::string> names = {"", std::string("a\0", 2), "a", "b",
                                    "\xff"};
  for (const std::string& set : names) {
    for (int i = 0; i < 50; ++i) {
      UpdateOp op = UpdateOp::Add(absl::StrCat("e", i));
      REQUIRE(r->Update(set, std::span(&op, 1)).ok());
    }
  }
  UpdateOp op = UpdateOp::Add("x");
  REQUIRE(other->Update("not-mine", std::span(&op, 1)).ok());
  std::sort(names.begin(), names.end());
  auto all = r->ListSets(std::nullopt, 0);
  REQUIRE(all.ok());
  CHECK(*all == names);
  // Paged: two at a time, resuming after the last name.
  std::vector<std::string> paged;
  std::optional<std::string> after;
  while (true) {
    auto page = r->ListSets(after, 2);
    REQUIRE(page.ok());
    if (page->empty()) break;
    REQUIRE(page->size() <= 2);
    paged.insert(paged.end(), page->begin(), page->end());
    after = page->back();
  }
  CHECK(paged == names);
}

}  // namespace
}  // namespace bigset::testing

namespace bigset::testing {
namespace {

TEST_CASE("replica: concurrent writers and readers") {
  testing::MemStore mem;
  auto r = OpenReplica(mem.store.get(), 1);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 400;
  std::vector<std::thread> threads;
  std::vector<std::vector<Dot>> dots(kThreads);
  std::atomic<bool> failed{false};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t]() {
      // Two threads per set: updates of one set serialise, the two sets
      // proceed in parallel.
      const std::string set = t % 2 == 0 ? "even" : "odd";
      for (int i = 0; i < kPerThread; ++i) {
        UpdateOp op = UpdateOp::Add(absl::StrCat("t", t, "-", i));
        auto d = r->Update(set, std::span(&op, 1));
        if (!d.ok()) {
          failed = true;
          return;
        }
        dots[t].push_back(*d->ops[0].add);
      }
    });
  }
  // A reader streams while the writers run: each read is one snapshot, so
  // its clock covers every dot it returns.
  threads.emplace_back([&]() {
    SetReadOptions small;
    small.batch_size = 50;
    for (int i = 0; i < 20; ++i) {
      auto reader = r->Read("even", small);
      if (!reader.ok()) {
        failed = true;
        return;
      }
      std::vector<ElementDots> chunk;
      while (true) {
        auto more = (*reader)->Next(&chunk);
        if (!more.ok()) {
          failed = true;
          return;
        }
        if (!*more) break;
        for (const auto& e : chunk) {
          for (Dot d : e.dots) {
            if (!(*reader)->clock().Seen(d)) failed = true;
          }
        }
      }
    }
  });
  for (auto& th : threads) th.join();
  REQUIRE_FALSE(failed);
  CHECK(*r->Count("even") == 2 * kPerThread);
  CHECK(*r->Count("odd") == 2 * kPerThread);
  // Counters of one set were never handed out twice.
  std::set<Dot> even(dots[0].begin(), dots[0].end());
  even.insert(dots[2].begin(), dots[2].end());
  CHECK(even.size() == 2 * kPerThread);
  auto report = r->Verify();
  REQUIRE(report.ok());
  CHECK(report->ok());
}

TEST_CASE("clock cache: lookups against a model, the most recent set first") {
  // Lookup answers the most recently used set without hashing its name:
  // random inserts, erases and lookups over a few names (some prefixes of
  // others) must answer as a map does. Large enough never to evict.
  constexpr uint64_t kSeed = 20261127;
  INFO("seed " << kSeed);
  std::mt19937_64 rng(kSeed);
  const std::vector<std::string> names = {"", "a", "ab", "b", "ba", "abc"};
  ClockCache cache(uint64_t{1} << 30);
  std::map<std::string, uint64_t> model;
  for (int step = 0; step < 5000; ++step) {
    CAPTURE(step);
    const std::string& name = names[rng() % names.size()];
    switch (rng() % 3) {
      case 0: {
        SetState s;
        s.count = static_cast<uint64_t>(step);
        REQUIRE(cache.Insert(name, std::move(s))->count ==
                static_cast<uint64_t>(step));
        model[name] = static_cast<uint64_t>(step);
        break;
      }
      case 1:
        cache.Erase(name);
        model.erase(name);
        break;
      default: {
        SetState* got = cache.Lookup(name);
        auto want = model.find(name);
        REQUIRE((got != nullptr) == (want != model.end()));
        if (got != nullptr) CHECK(got->count == want->second);
      }
    }
    REQUIRE(cache.size() == model.size());
  }
}

TEST_CASE("clock cache: a lookup makes its set the last evicted") {
  ClockCache sizing(uint64_t{1} << 30);
  const size_t one = sizing.Insert("s0", SetState())->charge;
  // Room for three entries of this size.
  ClockCache cache(3 * one);
  for (int i = 0; i < 3; ++i) cache.Insert("s" + std::to_string(i), SetState());
  REQUIRE(cache.size() == 3);
  REQUIRE(cache.Lookup("s0") != nullptr);  // s1 is now the least recent.
  REQUIRE(cache.Lookup("s0") != nullptr);  // The most recent again.
  cache.Insert("s3", SetState());
  CHECK(cache.Lookup("s1") == nullptr);
  CHECK(cache.Lookup("s0") != nullptr);
  CHECK(cache.Lookup("s2") != nullptr);
  CHECK(cache.Lookup("s3") != nullptr);
}

}  // namespace
}  // namespace bigset::testing
