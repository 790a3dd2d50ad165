// The cluster: message wire format, ring, and the simulator running nodes
// with quorum writes, streaming quorum reads, queries and read repair under
// loss, duplication, reordering, partitions and crashes.

#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bigset/cluster/ring.h"
#include "bigset/testing/sim.h"
#include "net/message.h"
#include "orswot_model.h"
#include "sweep_util.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

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
  // The replicas asked knew "nope" absent from their presence filters,
  // without a seek; the nodes' counters show it.
  uint64_t saved = 0;
  uint64_t filter_bytes = 0;
  for (NodeId n : sim->node_ids()) {
    saved += Stat(sim->node(n)->stats(), "presence.seeks_saved");
    filter_bytes += Stat(sim->node(n)->stats(), "presence.filter_bytes");
  }
  CHECK(saved >= 2);
  CHECK(filter_bytes > 0);
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

TEST_CASE("node options: a bound of 0 or a read-only replica is refused") {
  using Edit = std::function<void(NodeOptions&)>;
  const std::vector<std::pair<std::string, Edit>> bad = {
      {"replica.lock_stripes",
       [](NodeOptions& o) { o.replica.lock_stripes = 0; }},
      {"replica.read_only", [](NodeOptions& o) { o.replica.read_only = true; }},
      {"service.max_chunk_elements",
       [](NodeOptions& o) { o.service.max_chunk_elements = 0; }},
      {"service.max_chunk_bytes",
       [](NodeOptions& o) { o.service.max_chunk_bytes = 0; }},
      {"handoff.chunk_elements",
       [](NodeOptions& o) { o.handoff.chunk_elements = 0; }},
      {"handoff.chunk_bytes",
       [](NodeOptions& o) { o.handoff.chunk_bytes = 0; }},
      {"handoff.max_running",
       [](NodeOptions& o) { o.handoff.max_running = 0; }},
      {"handoff.window", [](NodeOptions& o) { o.handoff.window = 0; }},
      {"handoff.release_keys_per_tick",
       [](NodeOptions& o) { o.handoff.release_keys_per_tick = 0; }},
      {"anti_entropy.chunk_elements",
       [](NodeOptions& o) { o.anti_entropy.chunk_elements = 0; }},
      {"anti_entropy.chunk_bytes",
       [](NodeOptions& o) { o.anti_entropy.chunk_bytes = 0; }},
  };
  for (const auto& [name, edit] : bad) {
    CAPTURE(name);
    SimOptions o;
    o.nodes = 3;
    o.ring.ring_size = 8;
    edit(o.node);
    absl::StatusOr<std::unique_ptr<Simulator>> sim = Simulator::Create(o);
    REQUIRE_FALSE(sim.ok());
    CHECK(sim.status().code() == absl::StatusCode::kInvalidArgument);
  }
  // The defaults are the replica's own: one default per setting.
  const NodeOptions defaults;
  CHECK(defaults.replica.lock_stripes == ReplicaOptions().lock_stripes);
  CHECK(defaults.replica.digest_buckets == ReplicaOptions().digest_buckets);
  CHECK(defaults.sweep.tick_micros == SweepOptions().tick_micros);
  // A sweep tick sweeps keys_per_second's share of a second, at least one.
  SweepOptions sweep;
  CHECK(sweep.KeysPerTick() == 10'000);  // 100,000/s every 100 ms.
  sweep.keys_per_second = 5;
  CHECK(sweep.KeysPerTick() == 1);
  sweep.keys_per_second = UINT64_MAX;
  sweep.tick_micros = UINT64_MAX;
  CHECK(sweep.KeysPerTick() == uint64_t{1} << 60);
}

TEST_CASE("node stats: counters by name, each once, and no other name") {
  auto sim = MakeSim(1);
  REQUIRE(sim->Update(1, "s", {UpdateOp::Add("a")}).ok());
  REQUIRE(sim->Read(2, "s").ok());
  const NodeStats stats = sim->node(1)->stats();
  const auto all = stats.All();
  REQUIRE(all.size() >= 60);
  std::set<std::string> names;
  for (const auto& [name, value] : all) {
    CAPTURE(name);
    // "<protocol>.<counter>", lower case.
    const size_t dot = name.find('.');
    REQUIRE(dot != std::string::npos);
    CHECK(name.find('.', dot + 1) == std::string::npos);
    CHECK(std::all_of(name.begin(), name.end(), [](char c) {
      return c == '.' || c == '_' || (c >= 'a' && c <= 'z');
    }));
    CHECK(names.insert(name).second);
    uint64_t got = 0;
    REQUIRE(stats.Get(name, &got));
    CHECK(got == value);
  }
  // What the write and the read did shows under the protocols' names.
  CHECK(Stat(stats, "node.messages_received") > 0);
  CHECK(Stat(stats, "node.replicas_open") > 0);
  uint64_t untouched = 12345;
  CHECK_FALSE(stats.Get("node.no_such_counter", &untouched));
  CHECK_FALSE(stats.Get("messages_received", &untouched));
  CHECK_FALSE(stats.Get("", &untouched));
  CHECK(untouched == 12345);
  // A default NodeStats has no counters.
  CHECK(NodeStats().All().empty());
  CHECK_FALSE(NodeStats().Get("node.messages_received", &untouched));
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

// A query a node starts just before a write, in the same turn, sees every
// replica as it was before the write: this node's own answers at once, and
// each peer takes the node's messages in order (as over TCP). bigsetd's
// SADD sends its read and its adds together and relies on it.
TEST_CASE("cluster: a query made just before a write sees none of it") {
  for (uint64_t seed : Seeds(20)) {
    CAPTURE(seed);
    SimOptions o;
    o.seed = seed;
    o.nodes = 3;
    o.ring.ring_size = 8;
    o.fifo_links = true;
    o.shuffle_ties = true;
    o.min_latency_micros = 50;
    o.max_latency_micros = 3000;
    auto made = Simulator::Create(o);
    REQUIRE(made.ok());
    Simulator& sim = **made;
    const std::string set = "s";
    const NodeId via =
        sim.ring().PreferenceList(sim.ring().PartitionOf(set))[seed % 3];
    REQUIRE(sim.Update(via, set, {UpdateOp::Add("x")}).ok());
    for (int round = 0; round < 10; ++round) {
      CAPTURE(round);
      const std::string y = absl::StrCat("y", round);
      std::optional<absl::StatusOr<Membership>> read;
      std::optional<absl::StatusOr<Delta>> wrote;
      sim.node(via)->ContainsAll(
          set, {"x", y}, ClusterReadOptions{},
          [&read](absl::StatusOr<Membership> m) { read = std::move(m); });
      UpdateOp add = UpdateOp::Add(y);
      add.context_from_replica = true;
      UpdateOp again = UpdateOp::Add("x");
      again.context_from_replica = true;
      sim.node(via)->Update(
          set, {add, again}, ClusterWriteOptions{},
          [&wrote](absl::StatusOr<Delta> d) { wrote = std::move(d); });
      sim.RunUntil([&] { return read.has_value() && wrote.has_value(); });
      REQUIRE(read->ok());
      REQUIRE(wrote->ok());
      // x as it was (its one dot, not the add's new one); y not yet.
      REQUIRE((*read)->elements[0].dots.size() == 1);
      REQUIRE((*read)->elements[0].dots[0] != *(*wrote)->ops[1].add);
      REQUIRE((*read)->elements[1].dots.empty());
    }
  }
}

// With a hedge, a query asks R places first (the coordinating node's own
// replica among them) and the third replica only when one of those is
// slow or fails; the answers are the same.
TEST_CASE("cluster: a hedged query asks R replicas, the rest if needed") {
  auto sim = MakeSim(11, 3);
  const std::string set = "hedged";
  const std::vector<NodeId> prefs =
      sim->ring().PreferenceList(sim->ring().PartitionOf(set));
  const NodeId via = prefs[0];
  REQUIRE(sim->Update(via, set, {UpdateOp::Add("x")}).ok());
  sim->RunUntilIdle();
  ClusterReadOptions ro;
  ro.query_hedge_micros = 50'000;
  // Count the queries each node receives.
  std::map<NodeId, int> queries;
  sim->SetSendObserver([&](NodeId, NodeId to, std::string_view bytes) {
    MessageHeader h;
    std::string_view body;
    if (ParseHeader(bytes, &h, &body).ok() && h.type == MessageType::kQuery) {
      ++queries[to];
    }
  });
  auto m = sim->ContainsAll(via, set, {"x", "y"}, ro);
  REQUIRE(m.ok());
  CHECK(m->elements[0].dots.size() == 1);
  CHECK(m->elements[1].dots.empty());
  // Its own replica answers without a message; one peer is asked.
  CHECK(queries[prefs[1]] + queries[prefs[2]] == 1);
  CHECK(Stat(sim->node(via)->stats(), "read.queries_hedged") == 0);
  // One of the two it would ask is down: the hedge asks the third.
  const NodeId second = queries[prefs[1]] == 1 ? prefs[1] : prefs[2];
  REQUIRE(sim->Crash(second).ok());
  queries.clear();
  const uint64_t before = sim->NowMicros();
  m = sim->ContainsAll(via, set, {"x"}, ro);
  REQUIRE(m.ok());
  CHECK(m->elements[0].dots.size() == 1);
  CHECK(sim->NowMicros() - before >= ro.query_hedge_micros);
  CHECK(Stat(sim->node(via)->stats(), "read.queries_hedged") == 1);
  // For a while after, queries ask the other peer instead of the one
  // down: still one peer, and no hedge to wait.
  const NodeId third = second == prefs[1] ? prefs[2] : prefs[1];
  queries.clear();
  const uint64_t again = sim->NowMicros();
  m = sim->ContainsAll(via, set, {"x"}, ro);
  REQUIRE(m.ok());
  CHECK(queries[third] == 1);
  CHECK(queries[second] == 0);
  CHECK(sim->NowMicros() - again < ro.query_hedge_micros);
  CHECK(Stat(sim->node(via)->stats(), "read.queries_hedged") == 1);
  // Later, R places first again.
  sim->RunFor(2'000'000);
  queries.clear();
  m = sim->ContainsAll(via, set, {"x"}, ro);
  REQUIRE(m.ok());
  CHECK(queries[second] == 1);
  CHECK(Stat(sim->node(via)->stats(), "read.queries_hedged") == 2);
  sim->SetSendObserver({});
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

}  // namespace
}  // namespace bigset::testing

namespace bigset::testing {
namespace {

// Adds e0..e{n-1} to `set` through node 1, lets every delta land, and
// returns what a read then sees (its clock is a clear's context).
SimReadResult LoadAndRead(Simulator& sim, const std::string& set, int n) {
  std::vector<UpdateOp> ops;
  for (int i = 0; i < n; ++i)
    ops.push_back(UpdateOp::Add(absl::StrCat("e", i)));
  REQUIRE(sim.Update(1, set, ops).ok());
  sim.RunUntilIdle();
  auto read = sim.Read(1, set);
  REQUIRE(read.ok());
  REQUIRE(read->elements.size() == static_cast<size_t>(n));
  return *std::move(read);
}

TEST_CASE("cluster: Clear removes what the read saw, everywhere") {
  auto sim = MakeSim(11);
  const std::string set = "cleared";
  std::vector<UpdateOp> ops;
  for (int i = 0; i < 300; ++i)
    ops.push_back(UpdateOp::Add(absl::StrCat("e", i)));
  REQUIRE(sim->Update(1, set, ops).ok());
  auto read = sim->Read(2, set);
  REQUIRE(read.ok());
  REQUIRE(read->elements.size() == 300);
  // An add the read did not see, concurrent with the clear: it survives.
  REQUIRE(sim->Update(3, set, {UpdateOp::Add("late")}).ok());
  auto d = sim->Clear(4, set, read->clock);
  REQUIRE(d.ok());
  REQUIRE(d->clear.has_value());
  CHECK(*d->clear == read->clock);
  // Every replica agrees, on its own (R = 1 through each node).
  ClusterReadOptions one;
  one.r = 1;
  one.read_repair = false;
  sim->RunUntilIdle();
  for (NodeId via : sim->node_ids()) {
    auto r = sim->Read(via, set, one);
    REQUIRE(r.ok());
    REQUIRE(r->elements.size() == 1);
    CHECK(r->elements[0].element == "late");
  }
  // The node sweepers ran (the simulator went idle only once every queue
  // was empty): each replica holds one key, and no tombstone.
  for (uint64_t keys : KeysOnReplicas(*sim, set)) CHECK(keys == 1);
  uint64_t swept = 0;
  for (NodeId n : sim->node_ids()) {
    const NodeStats st = sim->node(n)->stats();
    swept += Stat(st, "sweep.keys_deleted");
    CHECK(Stat(st, "sweep.queue_length") == 0);
  }
  CHECK(swept == 3 * 300);
  const uint32_t p = sim->ring().PartitionOf(set);
  for (NodeId n : sim->ring().PreferenceList(p)) {
    CHECK(sim->node(n)->LocalReplica(p)->GetSetStats(set)->tombstone_dots == 0);
  }
  // An empty context clears nothing.
  auto none = sim->Clear(1, set, Clock());
  REQUIRE(none.ok());
  CHECK(!none->clear.has_value());
  CHECK(*sim->Count(1, set) == 1);
  // Too few replicas: the clear fails like any write, with a clear error.
  ClusterWriteOptions bad;
  bad.w = 9;
  CHECK(sim->Clear(1, set, read->clock, bad).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("cluster: a clear missed by a replica reaches it by read repair") {
  auto sim = MakeSim(12);
  const std::string set = "repair";
  const SimReadResult read = LoadAndRead(*sim, set, 50);
  const uint32_t p = sim->ring().PartitionOf(set);
  const std::vector<NodeId> pl = sim->ring().PreferenceList(p);
  // One replica is down while the set is cleared (W = 2 of the others).
  REQUIRE(sim->Crash(pl[2]).ok());
  std::optional<NodeId> via;
  for (NodeId n : sim->node_ids()) {
    if (n != pl[2]) via = n;
  }
  REQUIRE(sim->Clear(*via, set, read.clock).ok());
  REQUIRE(sim->Restart(pl[2]).ok());
  sim->RunUntilIdle();
  // An R = 3 read merges the stale replica's 50 elements away and repairs
  // it; its sweeper then deletes the keys.
  ClusterReadOptions all;
  all.r = 3;
  auto merged = sim->Read(*via, set, all);
  REQUIRE(merged.ok());
  CHECK(merged->elements.empty());
  sim->RunUntilIdle();
  for (uint64_t keys : KeysOnReplicas(*sim, set)) CHECK(keys == 0);
}

TEST_CASE("sim: timers a node sets while it opens fire", "[regression]") {
  // The simulator used to start a node's new incarnation only after
  // Node::Open returned, so timers set during Open belonged to the dead
  // incarnation and were dropped: a sweep queue left from before a restart
  // was never swept. The soak missed it because it never checked that
  // tombstones drain; it now does.
  auto sim = MakeSim(13);
  const std::string set = "restart";
  const SimReadResult read = LoadAndRead(*sim, set, 40);
  const uint32_t p = sim->ring().PartitionOf(set);
  const NodeId victim = sim->ring().PreferenceList(p)[0];
  // The clear lands, then the node crashes before its sweeper's first tick.
  bool done = false;
  sim->node(victim)->Clear(set, read.clock, ClusterWriteOptions(),
                           [&done](absl::StatusOr<Delta> d) {
                             REQUIRE(d.ok());
                             done = true;
                           });
  REQUIRE(sim->RunUntil([&done]() { return done; }));
  REQUIRE(Stat(sim->node(victim)->stats(), "sweep.queue_length") == 1);
  REQUIRE(sim->Crash(victim).ok());
  REQUIRE(sim->Restart(victim).ok());
  sim->RunUntilIdle();
  CHECK(Stat(sim->node(victim)->stats(), "sweep.queue_length") == 0);
  CHECK(Stat(sim->node(victim)->stats(), "sweep.keys_deleted") == 40);
}

// ---- Counts.

uint64_t CountsAgreed(Simulator& sim) {
  uint64_t n = 0;
  for (NodeId id : sim.node_ids()) {
    if (sim.node(id) != nullptr)
      n += Stat(sim.node(id)->stats(), "read.counts_agreed");
  }
  return n;
}

uint64_t CountsMerged(Simulator& sim) {
  uint64_t n = 0;
  for (NodeId id : sim.node_ids()) {
    if (sim.node(id) != nullptr)
      n += Stat(sim.node(id)->stats(), "read.counts_merged");
  }
  return n;
}

TEST_CASE("cluster: counts of agreeing replicas need no read; others merge") {
  auto sim = MakeSim(21);
  const std::string set = "counted";
  const uint32_t p = sim->ring().PartitionOf(set);
  const auto pl = sim->ring().PreferenceList(p);
  ClusterReadOptions all;
  all.r = 3;
  // No replica holds the set: they agree on 0.
  auto none = sim->Count(pl[0], set, all);
  REQUIRE(none.ok());
  CHECK(*none == 0);
  CHECK(CountsAgreed(*sim) == 1);
  // Written to every replica: they agree, without a read.
  ClusterWriteOptions every;
  every.w = 3;
  std::vector<UpdateOp> ops;
  for (int i = 0; i < 300; ++i) ops.push_back(UpdateOp::Add(absl::StrCat(i)));
  REQUIRE(sim->Update(pl[1], set, ops, every).ok());
  sim->RunUntilIdle();
  auto agreed = sim->Count(pl[2], set, all);
  REQUIRE(agreed.ok());
  CHECK(*agreed == 300);
  CHECK(CountsAgreed(*sim) == 2);
  CHECK(CountsMerged(*sim) == 0);
  // A replica misses writes: the replicas differ, and the count is what a
  // merged read returns (which repairs the replica).
  REQUIRE(sim->Crash(pl[0]).ok());
  REQUIRE(
      sim->Update(pl[1], set, {UpdateOp::Add("late1"), UpdateOp::Add("late2")})
          .ok());
  auto c = sim->Count(pl[1], set);  // R=2 of the two that hold everything.
  REQUIRE(c.ok());
  CHECK(*c == 302);
  sim->RunUntilIdle();
  REQUIRE(sim->Restart(pl[0]).ok());
  const uint64_t merged_before = CountsMerged(*sim);
  auto merged = sim->Count(pl[1], set, all);
  REQUIRE(merged.ok());
  CHECK(*merged == 302);
  CHECK(CountsMerged(*sim) == merged_before + 1);
  sim->RunUntilIdle();
  // The merged read repaired it: they agree again.
  const uint64_t agreed_before = CountsAgreed(*sim);
  auto again = sim->Count(pl[0], set, all);
  REQUIRE(again.ok());
  CHECK(*again == 302);
  CHECK(CountsAgreed(*sim) == agreed_before + 1);
  // Replicas that each hold one element the other lacks: equal counts,
  // different sets, so not an agreement.
  const std::string twins = "twins";
  const auto tl = sim->ring().PreferenceList(sim->ring().PartitionOf(twins));
  ClusterWriteOptions one;
  one.w = 1;
  REQUIRE(sim->Crash(tl[1]).ok());
  REQUIRE(sim->Crash(tl[2]).ok());
  REQUIRE(sim->Update(tl[0], twins, {UpdateOp::Add("x")}, one).ok());
  REQUIRE(sim->Crash(tl[0]).ok());
  REQUIRE(sim->Restart(tl[1]).ok());
  REQUIRE(sim->Update(tl[1], twins, {UpdateOp::Add("y")}, one).ok());
  REQUIRE(sim->Restart(tl[0]).ok());
  ClusterReadOptions two;
  two.r = 2;
  auto twin_count = sim->Count(tl[0], twins, two);
  REQUIRE(twin_count.ok());
  CHECK(*twin_count == 2);
  REQUIRE(sim->Restart(tl[2]).ok());
  sim->RunUntilIdle();
  // Too few replicas: a clear error.
  REQUIRE(sim->Crash(pl[1]).ok());
  CHECK_FALSE(sim->Count(pl[0], set, all).ok());
  ClusterReadOptions bad;
  bad.r = 4;
  CHECK(sim->Count(pl[0], set, bad).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("cluster: counts equal merged reads under faults (randomized)") {
  for (uint64_t seed : Seeds(3)) {
    CAPTURE(seed);
    auto sim = MakeSim(seed * 7919 + 3);
    Rng rng(seed);
    const std::vector<std::string> sets = {"a", "b", "c"};
    std::set<NodeId> down;
    uint64_t agreed = 0;
    uint64_t merged = 0;
    const auto ids = sim->node_ids();
    auto up_node = [&]() {
      for (;;) {
        NodeId n = ids[Uniform(rng, 0, ids.size() - 1)];
        if (!down.count(n)) return n;
      }
    };
    for (int step = 0; step < 120; ++step) {
      const std::string& set = sets[Uniform(rng, 0, sets.size() - 1)];
      const uint64_t action = Uniform(rng, 0, 99);
      if (action < 55) {
        std::vector<UpdateOp> ops;
        const int n = static_cast<int>(Uniform(rng, 1, 20));
        for (int i = 0; i < n; ++i) {
          ops.push_back(UpdateOp::Add(absl::StrCat(Uniform(rng, 0, 200))));
        }
        ClusterWriteOptions wo;
        wo.w = static_cast<int>(Uniform(rng, 1, 2));
        (void)sim->Update(up_node(), set, ops, wo);
      } else if (action < 70) {
        auto m = sim->ContainsAll(up_node(), set,
                                  {absl::StrCat(Uniform(rng, 0, 200))});
        if (m.ok() && !m->elements[0].dots.empty()) {
          (void)sim->Update(
              up_node(), set,
              {UpdateOp::Remove(m->elements[0].element, m->elements[0].dots)});
        }
      } else if (action < 74) {
        auto r = sim->Read(up_node(), set);
        if (r.ok()) (void)sim->Clear(up_node(), set, r->clock);
      } else if (action < 82 && down.size() < 1) {
        const NodeId victim = up_node();
        REQUIRE(
            (Uniform(rng, 0, 1) ? sim->Crash(victim) : sim->PowerLoss(victim))
                .ok());
        down.insert(victim);
      } else if (action < 90 && !down.empty()) {
        REQUIRE(sim->Restart(*down.begin()).ok());
        down.clear();
      } else {
        // Checkpoint: with every node up, a count with R=3 equals the size
        // of the merged read that follows it (the count's own merged read,
        // if any, repaired the replicas; merging again changes nothing).
        for (NodeId n : down) REQUIRE(sim->Restart(n).ok());
        down.clear();
        sim->RunUntilIdle();
        ClusterReadOptions all;
        all.r = 3;
        const NodeId via = up_node();
        const NodeStats before = sim->node(via)->stats();
        auto count = sim->Count(via, set, all);
        REQUIRE(count.ok());
        const NodeStats after = sim->node(via)->stats();
        agreed += Stat(after, "read.counts_agreed") -
                  Stat(before, "read.counts_agreed");
        merged += Stat(after, "read.counts_merged") -
                  Stat(before, "read.counts_merged");
        auto read = sim->Read(up_node(), set, all);
        REQUIRE(read.ok());
        CHECK(*count == read->elements.size());
      }
    }
    // Both paths ran.
    CHECK(agreed > 0);
    CHECK(merged > 0);
  }
}

// A replica that is slow rather than losing messages (every message into it
// a second late, as to a node restarted under load that catches up with
// each write synced) gets each write's delta a few times, not once per
// retransmit interval for the whole timeout: writes that W replicas
// acknowledged back off. Before, it got ten copies of every write (a node
// restarted under load with --sync-writes received 35,000 replicate
// messages a second, fell further behind with each, and could not
// coordinate a write for up to a minute).
TEST_CASE("cluster: a slow replica does not get a copy of a write per retry") {
  auto sim = MakeSim(12, 3);
  const std::string set = "slow-replica";
  const std::vector<NodeId> prefs =
      sim->ring().PreferenceList(sim->ring().PartitionOf(set));
  const NodeId via = prefs[0], slow = prefs[2];
  REQUIRE(sim->Update(via, set, {UpdateOp::Add("warm")}).ok());
  sim->RunUntilIdle();
  for (NodeId from : prefs) {
    if (from != slow) sim->SlowLink(from, slow, 1'000'000);
  }
  int replicates = 0;
  sim->SetSendObserver([&](NodeId, NodeId to, std::string_view bytes) {
    MessageHeader h;
    std::string_view body;
    if (to == slow && ParseHeader(bytes, &h, &body).ok() &&
        h.type == MessageType::kReplicate) {
      ++replicates;
    }
  });
  const int writes = 50;
  for (int i = 0; i < writes; ++i) {
    REQUIRE(sim->Update(via, set, {UpdateOp::Add(absl::StrCat("e", i))}).ok());
  }
  sim->RunFor(5'000'000);
  // The first copy and at most two retransmissions each (ten before).
  CHECK(replicates <= 3 * writes);
  CHECK(replicates >= writes);
  for (NodeId from : prefs) sim->SlowLink(from, slow, 0);
  sim->RunFor(20'000'000);
  // It has every write all the same (hints, anti-entropy).
  auto m = sim->node(slow)->LocalReplica(sim->ring().PartitionOf(set));
  REQUIRE(m != nullptr);
  auto count = m->Count(set);
  REQUIRE(count.ok());
  CHECK(*count == writes + 1);
}

}  // namespace
}  // namespace bigset::testing

namespace bigset::testing {
namespace {

// Group commit (ReplicaService, sync_writes): a replica applies the deltas
// of one turn unsynced and acknowledges them after one synced write. What
// it acknowledged must survive a power loss that comes any time after.
TEST_CASE("cluster: acknowledged deltas survive power losses (group commit)") {
  for (uint64_t seed : testing::Seeds(4)) {
    INFO("seed " << seed);
    SimOptions o;
    o.seed = seed;
    o.nodes = 3;
    o.ring.ring_size = 8;
    o.node.replica.sync_writes = true;
    o.writeback_micros = 0;  // Nothing is durable unless synced.
    auto made = Simulator::Create(o);
    REQUIRE(made.ok());
    Simulator& sim = **made;
    testing::Rng rng(seed);
    ClusterWriteOptions all;
    all.w = 3;  // Every replica acknowledged what succeeds.
    std::map<std::string, std::vector<std::string>> acked;
    int losses = 0;
    for (int i = 0; i < 120; ++i) {
      const std::string set = absl::StrCat("s", i % 4);
      const std::string element = absl::StrCat("e", i);
      const NodeId via = static_cast<NodeId>(1 + rng() % 3);
      if (sim.Update(via, set, {UpdateOp::Add(element)}, all).ok()) {
        acked[set].push_back(element);
      }
      if (rng() % 8 == 0) {
        const NodeId victim = static_cast<NodeId>(1 + rng() % 3);
        REQUIRE(sim.PowerLoss(victim).ok());
        REQUIRE(sim.Restart(victim).ok());
        ++losses;
      }
    }
    REQUIRE(losses > 0);
    size_t total = 0;
    for (const auto& [set, elements] : acked) total += elements.size();
    REQUIRE(total > 60);
    // Each replica, alone (no read repair, no anti-entropy), holds every
    // acknowledged element.
    for (NodeId id = 1; id <= 3; ++id) {
      for (const auto& [set, elements] : acked) {
        Replica* r = sim.node(id)->LocalReplica(sim.ring().PartitionOf(set));
        REQUIRE(r != nullptr);
        absl::StatusOr<Membership> m = r->ContainsAll(set, elements);
        REQUIRE(m.ok());
        for (size_t k = 0; k < elements.size(); ++k) {
          INFO("node " << id << " set " << set << " element " << elements[k]);
          CHECK_FALSE(m->elements[k].dots.empty());
        }
      }
    }
    uint64_t group_commits = 0;
    for (NodeId id = 1; id <= 3; ++id) {
      group_commits += Stat(sim.node(id)->stats(), "service.group_commits");
    }
    CHECK(group_commits > 0);
  }
}

}  // namespace
}  // namespace bigset::testing
