// The cluster: message wire format, ring, and the simulator running nodes
// with quorum writes, streaming quorum reads, queries and read repair under
// loss, duplication, reordering, partitions and crashes.

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bigset/cluster/ring.h"
#include "bigset/testing/sim.h"
#include "orswot_model.h"
#include "test_util.h"

namespace bigset {
namespace {

using testing::AdversarialBytes;
using testing::ModelValue;
using testing::OrswotModel;
using testing::Rng;
using testing::Seeds;
using testing::ToModel;
using testing::Uniform;

// ---- Ring.

TEST_CASE("ring: preference lists, partitions and coverage") {
  auto ring = Ring::Create({1, 2, 3, 4, 5}, RingOptions{64, 3});
  REQUIRE(ring.ok());
  std::map<NodeId, int> load;
  for (uint32_t p = 0; p < 64; ++p) {
    const auto& pl = ring->PreferenceList(p);
    REQUIRE(pl.size() == 3);
    REQUIRE(std::set<NodeId>(pl.begin(), pl.end()).size() == 3);
    for (NodeId n : pl) {
      ++load[n];
      auto mine = ring->PartitionsOf(n);
      CHECK(std::count(mine.begin(), mine.end(), p) == 1);
    }
  }
  for (auto& [n, l] : load) CHECK(l >= 64 * 3 / 5 - 1);
  auto plan = ring->CoveragePlan();
  std::vector<int> covered(64, 0);
  for (auto& [n, parts] : plan) {
    for (uint32_t p : parts) {
      const auto& pl = ring->PreferenceList(p);
      CHECK(std::find(pl.begin(), pl.end(), n) != pl.end());
      ++covered[p];
    }
  }
  for (int c : covered) CHECK(c == 1);
  CHECK(plan.size() <= 3);
  // Placement must never change between versions or platforms (data on
  // disk depends on it): pinned values of the FNV-1a + finaliser hash.
  CHECK(StableHash("") == 17058014651485797458ull);
  CHECK(StableHash("fruits") == 6549352914876898829ull);
  CHECK(ring->PartitionOf("fruits") == 13);
  CHECK_FALSE(Ring::Create({1, 1}, RingOptions{8, 1}).ok());
  CHECK_FALSE(Ring::Create({1, 2}, RingOptions{8, 3}).ok());
  CHECK_FALSE(Ring::Create({}, RingOptions{8, 1}).ok());
}

// ---- The simulated cluster.

std::unique_ptr<Simulator> MakeSim(uint64_t seed, int nodes = 5) {
  SimOptions o;
  o.seed = seed;
  o.nodes = nodes;
  o.ring.ring_size = 16;
  o.store.write_buffer_bytes = 256 << 10;
  auto sim = Simulator::Create(o);
  REQUIRE(sim.ok());
  return std::move(*sim);
}

TEST_CASE("cluster: writes, streaming reads and queries") {
  auto sim = MakeSim(1);
  std::vector<UpdateOp> ops;
  for (int i = 0; i < 500; ++i) {
    ops.push_back(UpdateOp::Add(absl::StrCat("e", 1000 + i)));
  }
  auto d = sim->Update(1, "s", ops);
  REQUIRE(d.ok());
  CHECK(d->ops.size() == 500);
  ClusterReadOptions ro;
  ro.batch_size = 7;
  auto read = sim->Read(2, "s", ro);
  REQUIRE(read.ok());
  REQUIRE(read->elements.size() == 500);
  CHECK(read->elements.front().element == "e1000");
  CHECK(read->clock.DotCount() == 500);
  auto count = sim->Count(3, "s");
  REQUIRE(count.ok());
  CHECK(*count == 500);
  auto m = sim->ContainsAll(4, "s", {"e1001", "nope", "e1499"});
  REQUIRE(m.ok());
  CHECK_FALSE(m->all_present);
  CHECK(m->elements[0].dots.size() == 1);
  CHECK(m->elements[1].dots.empty());
  // Remove with the context the query returned.
  auto rm =
      sim->Update(5, "s", {UpdateOp::Remove("e1001", m->elements[0].dots)});
  REQUIRE(rm.ok());
  auto after = sim->ContainsAll(1, "s", {"e1001"});
  REQUIRE(after.ok());
  CHECK(after->elements[0].dots.empty());
  // Paged range with continuation.
  RangeQuery q;
  q.start = "e1100";
  q.end = "e1200";
  q.limit = 30;
  std::vector<std::string> got;
  for (int pages = 0; pages < 10; ++pages) {
    auto page = sim->Range(2, "s", q);
    REQUIRE(page.ok());
    for (auto& e : page->elements) got.push_back(e.element);
    if (page->continuation.empty()) break;
    q.continuation = page->continuation;
  }
  REQUIRE(got.size() == 100);
  CHECK(got.front() == "e1100");
  CHECK(got.back() == "e1199");
  CHECK(std::is_sorted(got.begin(), got.end()));
  // Bad arguments are errors, not crashes.
  ClusterWriteOptions bad_w;
  bad_w.w = 4;
  CHECK(sim->Update(1, "s", {UpdateOp::Add("x")}, bad_w).status().code() ==
        absl::StatusCode::kInvalidArgument);
  ClusterReadOptions bad_r;
  bad_r.r = 0;
  CHECK_FALSE(sim->Read(1, "s", bad_r).ok());
}

TEST_CASE(
    "cluster: a crashed node does not stop reads and writes; repair converges "
    "it") {
  auto sim = MakeSim(2);
  const std::string set = "crash-set";
  uint32_t p = sim->ring().PartitionOf(set);
  const auto pl = sim->ring().PreferenceList(p);
  REQUIRE(
      sim->Update(pl[1], set, {UpdateOp::Add("a"), UpdateOp::Add("b")}).ok());
  sim->RunUntilIdle();
  REQUIRE(sim->Crash(pl[0]).ok());
  // Writes and reads through a surviving replica still reach W=2 / R=2.
  REQUIRE(sim->Update(pl[1], set, {UpdateOp::Add("c")}).ok());
  auto read = sim->Read(pl[2], set);
  REQUIRE(read.ok());
  CHECK(read->elements.size() == 3);
  // Through a node outside the preference list as well.
  NodeId outsider = 0;
  for (NodeId n : sim->node_ids()) {
    if (std::find(pl.begin(), pl.end(), n) == pl.end()) outsider = n;
  }
  REQUIRE(outsider != 0);
  REQUIRE(sim->Update(outsider, set, {UpdateOp::Add("d")}).ok());
  sim->RunUntilIdle();
  REQUIRE(sim->Restart(pl[0]).ok());
  // The restarted replica missed c and d.
  auto local = sim->node(pl[0])->LocalReplica(p)->Count(set);
  REQUIRE(local.ok());
  CHECK(*local == 2);
  // A read with R=3 repairs it.
  ClusterReadOptions all;
  all.r = 3;
  auto full = sim->Read(outsider, set, all);
  REQUIRE(full.ok());
  CHECK(full->elements.size() == 4);
  sim->RunUntilIdle();
  local = sim->node(pl[0])->LocalReplica(p)->Count(set);
  REQUIRE(local.ok());
  CHECK(*local == 4);
}

TEST_CASE("cluster: a write's answer never runs inside Update") {
  // The coordinator's own replica coordinates synchronously; with W=1 (or
  // every replica already acked) the write is done within Update, but the
  // client hears of it from the scheduler.
  auto sim = MakeSim(4, 3);
  const std::string set = "sync";
  const NodeId via =
      sim->ring().PreferenceList(sim->ring().PartitionOf(set))[0];
  for (int w = 1; w <= 3; ++w) {
    ClusterWriteOptions wo;
    wo.w = w;
    int answers = 0;
    bool inside = true;
    std::optional<absl::StatusOr<Delta>> result;
    sim->node(via)->Update(set, {UpdateOp::Add("e" + std::to_string(w))}, wo,
                           [&](absl::StatusOr<Delta> r) {
                             ++answers;
                             CHECK_FALSE(inside);
                             result = std::move(r);
                           });
    inside = false;
    CHECK(answers == 0);
    sim->RunUntilIdle();
    CHECK(answers == 1);
    REQUIRE(result.has_value());
    REQUIRE(result->ok());
    CHECK((*result)->ops.size() == 1);
    CHECK((*result)->ops[0].add.has_value());
  }
  // Finished coordinators are reused: many writes in a row, each answered
  // once with its own delta.
  std::map<std::string, int> answered;
  for (int i = 0; i < 100; ++i) {
    const std::string e = "r" + std::to_string(i);
    sim->node(via)->Update(set, {UpdateOp::Add(e)}, ClusterWriteOptions(),
                           [&answered, e](absl::StatusOr<Delta> r) {
                             REQUIRE(r.ok());
                             REQUIRE(r->ops.size() == 1);
                             CHECK(r->ops[0].element == e);
                             ++answered[e];
                           });
    if (i % 7 == 0) sim->RunUntilIdle();
  }
  sim->RunUntilIdle();
  CHECK(answered.size() == 100);
  for (const auto& [e, n] : answered) CHECK(n == 1);
  auto read = sim->Read(via, set, ClusterReadOptions{});
  REQUIRE(read.ok());
  CHECK(read->elements.size() == 103);
}

TEST_CASE("cluster: too few replicas is a clear error") {
  auto sim = MakeSim(3, 3);
  const std::string set = "x";
  REQUIRE(sim->Crash(2).ok());
  REQUIRE(sim->Crash(3).ok());
  auto w = sim->Update(1, set, {UpdateOp::Add("e")});
  REQUIRE_FALSE(w.ok());
  CHECK(w.status().code() == absl::StatusCode::kDeadlineExceeded);
  auto r = sim->Read(1, set);
  REQUIRE_FALSE(r.ok());
  ClusterWriteOptions one;
  one.w = 1;
  CHECK(sim->Update(1, set, {UpdateOp::Add("e")}, one).ok());
}

// ---- The soak: random operations under faults against the model.

struct SoakResult {
  uint64_t trace_hash = 0;
  std::map<std::string, ModelValue> values;
  uint64_t acked = 0;
  uint64_t failed = 0;
  uint64_t dropped = 0;
  uint64_t crashes = 0;
};

SoakResult RunSoak(uint64_t seed, int ops) {
  SimOptions o;
  o.seed = seed;
  o.nodes = 5;
  o.ring.ring_size = 8;
  o.loss = 0.03;
  o.duplicate = 0.03;
  o.min_latency_micros = 50;
  o.max_latency_micros = 3000;
  o.store.write_buffer_bytes = 256 << 10;
  o.trace_capacity = 200;
  auto created = Simulator::Create(o);
  REQUIRE(created.ok());
  Simulator& sim = **created;
  Rng rng(seed ^ 0xabcdef);
  const std::vector<std::string> sets = {"s0", "s1", std::string("s\0", 2)};
  std::vector<std::string> elements;
  for (int i = 0; i < 30; ++i) elements.push_back(absl::StrCat("e", i));
  // The model of acknowledged writes, and what unacknowledged ones touched.
  std::map<std::string, OrswotModel> model;
  std::map<std::string, std::set<std::string>> uncertain;
  // Every acknowledged remove context, to check removes are durable.
  std::map<std::string, std::set<std::pair<std::string, Dot>>> removed;
  SoakResult result;
  ClusterWriteOptions wo;
  wo.timeout_micros = 3'000'000;
  ClusterReadOptions ro;
  ro.batch_size = static_cast<uint32_t>(Uniform(rng, 1, 8));

  auto random_up = [&]() {
    std::vector<NodeId> up;
    for (NodeId n : sim.node_ids()) {
      if (sim.IsUp(n)) up.push_back(n);
    }
    return up[Uniform(rng, 0, up.size() - 1)];
  };
  auto check_acked_visible = [&](NodeId via) {
    for (const std::string& set : sets) {
      INFO("set " << set);
      auto read = sim.Read(via, set, ro);
      if (!read.ok()) {
        auto tail = sim.TraceTail();
        for (size_t i = tail.size() > 30 ? tail.size() - 30 : 0;
             i < tail.size(); ++i) {
          UNSCOPED_INFO(tail[i]);
        }
      }
      REQUIRE(read.ok());
      ModelValue got = ToModel(read->elements);
      ModelValue want = model[set].Value();
      for (const std::string& e : elements) {
        if (uncertain[set].count(e)) continue;
        INFO("element " << e);
        auto g = got.find(e);
        auto w = want.find(e);
        std::set<Dot> gd = g == got.end() ? std::set<Dot>() : g->second;
        std::set<Dot> wd = w == want.end() ? std::set<Dot>() : w->second;
        REQUIRE(gd == wd);
      }
      for (const auto& [e, d] : removed[set]) {
        auto g = got.find(e);
        if (g != got.end()) REQUIRE(g->second.count(d) == 0);
      }
    }
  };

  for (int step = 0; step < ops; ++step) {
    const uint64_t dice = Uniform(rng, 0, 99);
    if (dice < 60) {
      // A write: add (sometimes replacing what a read saw) or remove.
      const std::string& set = sets[Uniform(rng, 0, sets.size() - 1)];
      const std::string& e = elements[Uniform(rng, 0, elements.size() - 1)];
      NodeId via = random_up();
      std::vector<Dot> ctx;
      if (Uniform(rng, 0, 1)) {
        auto m = sim.ContainsAll(via, set, {e}, ro);
        if (!m.ok()) continue;
        ctx = m->elements[0].dots;
      }
      UpdateOp op = (Uniform(rng, 0, 2) == 0 && !ctx.empty())
                        ? UpdateOp::Remove(e, ctx)
                        : UpdateOp::Add(e, ctx);
      const uint64_t switches = sim.node(via)->stats().coordinator_switches;
      auto d = sim.Update(via, set, {op}, wo);
      if (d.ok() && sim.node(via)->stats().coordinator_switches != switches) {
        // A given-up coordinator may have applied it too: one more dot.
        uncertain[set].insert(e);
      }
      if (d.ok()) {
        ++result.acked;
        model[set].Absorb(*d);
        for (const DeltaOp& dop : d->ops) {
          if (!dop.add.has_value()) {
            for (Dot dot : dop.context) removed[set].insert({e, dot});
          }
        }
      } else {
        ++result.failed;
        uncertain[set].insert(e);
      }
    } else if (dice < 75) {
      // A read; its repairs and answers are checked at heal points.
      const std::string& set = sets[Uniform(rng, 0, sets.size() - 1)];
      (void)sim.Read(random_up(), set, ro);
    } else if (dice < 82) {
      // A partition, or heal.
      if (Uniform(rng, 0, 1)) {
        std::vector<NodeId> ids = sim.node_ids();
        std::shuffle(ids.begin(), ids.end(), rng);
        size_t cut = Uniform(rng, 1, ids.size() - 1);
        sim.Partition({std::vector<NodeId>(ids.begin(), ids.begin() + cut),
                       std::vector<NodeId>(ids.begin() + cut, ids.end())});
      } else {
        sim.Heal();
      }
    } else if (dice < 88) {
      // Crash a node (keeping at least 4 up), or restart one.
      std::vector<NodeId> up, down;
      for (NodeId n : sim.node_ids()) (sim.IsUp(n) ? up : down).push_back(n);
      if (!down.empty() && Uniform(rng, 0, 1)) {
        REQUIRE(sim.Restart(down[Uniform(rng, 0, down.size() - 1)]).ok());
      } else if (up.size() > 4) {
        REQUIRE(sim.Crash(up[Uniform(rng, 0, up.size() - 1)]).ok());
        ++result.crashes;
      }
    } else if (dice < 95) {
      sim.RunFor(Uniform(rng, 0, 500'000));
    } else {
      // Heal everything, then every acknowledged write is visible to an
      // R=2 read, through any node.
      sim.Heal();
      for (NodeId n : sim.node_ids()) {
        if (!sim.IsUp(n)) REQUIRE(sim.Restart(n).ok());
      }
      check_acked_visible(random_up());
    }
  }
  // The end: heal, no more loss, repair every set with R=3 reads.
  sim.Heal();
  sim.SetLoss(0);
  sim.SetDuplicate(0);
  for (NodeId n : sim.node_ids()) {
    if (!sim.IsUp(n)) REQUIRE(sim.Restart(n).ok());
  }
  sim.RunUntilIdle();
  check_acked_visible(1);
  ClusterReadOptions all = ro;
  all.r = 3;
  for (const std::string& set : sets) {
    REQUIRE(sim.Read(1, set, all).ok());
  }
  sim.RunUntilIdle();
  // Every replica of every set now holds the same value.
  for (const std::string& set : sets) {
    uint32_t p = sim.ring().PartitionOf(set);
    std::optional<ModelValue> first;
    for (NodeId n : sim.ring().PreferenceList(p)) {
      Replica* r = sim.node(n)->LocalReplica(p);
      REQUIRE(r != nullptr);
      ModelValue v = ToModel(testing::ReadAll(*r, set));
      if (!first) first = v;
      INFO("set " << set << " node " << n);
      REQUIRE(v == *first);
      auto report = r->Verify();
      REQUIRE(report.ok());
      REQUIRE(report->ok());
    }
    result.values[set] = *first;
  }
  result.trace_hash = sim.TraceHash();
  result.dropped = sim.messages_dropped();
  return result;
}

TEST_CASE("cluster: soak under faults against the model") {
  uint64_t acked = 0, failed = 0, dropped = 0, crashes = 0;
  int seeds = 0;
  const int kOps = 1500;
  for (uint64_t seed : Seeds(8)) {
    CAPTURE(seed);
    SoakResult r = RunSoak(seed, kOps);
    acked += r.acked;
    failed += r.failed;
    dropped += r.dropped;
    crashes += r.crashes;
    ++seeds;
  }
  std::printf(
      "cluster soak: %d seeds x %d ops: %llu writes acknowledged, "
      "%llu failed, %llu messages dropped, %llu crashes, 0 "
      "divergences\n",
      seeds, kOps, static_cast<unsigned long long>(acked),
      static_cast<unsigned long long>(failed),
      static_cast<unsigned long long>(dropped),
      static_cast<unsigned long long>(crashes));
  CHECK(acked > 0);
}

TEST_CASE("cluster: the same seed gives the same run") {
  SoakResult a = RunSoak(77, 120);
  SoakResult b = RunSoak(77, 120);
  CHECK(a.trace_hash == b.trace_hash);
  CHECK(a.values == b.values);
  CHECK(a.acked == b.acked);
  SoakResult c = RunSoak(78, 120);
  CHECK(c.trace_hash != a.trace_hash);
}

}  // namespace
}  // namespace bigset
