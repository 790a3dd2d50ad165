// The soak: random client operations over the simulator under every fault
// it has, checked against the model of the add-wins set.
//
// Faults: message loss, duplication, reordering, stalls, corruption;
// partitions;
// events due at the same time in random order and late timers; crashes,
// power losses (writes of the last two seconds lost: the kernel writes
// dirty pages back every two virtual seconds) and restarts with a clock
// that went back; full disks (a node's store fails a write in the middle of
// a log record and refuses writes until an operator makes room and
// restarts it); clean shutdowns of a write's coordinating node mid-write
// (its client must be answered within the shutdown); clients sending
// invalid contexts. At most one power loss
// happens between two full repairs (R = N reads of every set), so that an
// acknowledged write is never lost by more than N - W replicas.
//
// Properties:
//   - every write acknowledged by W replicas is visible (with its exact
//     dots) to a later quorum read once partitions heal (after a full repair
//     when a power loss may have left it on fewer than W replicas);
//   - acknowledged removes stay removed; a remove built from a quorum read
//     that saw every acknowledged dot leaves its element absent;
//   - a write through failover leaves no dot that only one replica knows
//     (unless the write reports the failover unsettled): the dots the
//     client was not told of reach a quorum, one per given-up replica at
//     most;
//   - in a healthy cluster (no loss), a read takes a few round trips, not a
//     retry timeout;
//   - a bad context never blocks later adds (no ResourceExhausted);
//   - at the end every replica of every set holds the same value, equal to
//     the model, and Verify passes;
//   - the same seed gives the same run.
//
// BIGSET_TEST_SCALE multiplies the seeds; BIGSET_TEST_SEED reruns one.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bigset/testing/sim.h"
#include "handoff_util.h"
#include "orswot_model.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

struct SoakResult {
  uint64_t trace_hash = 0;
  std::map<std::string, ModelValue> values;
  uint64_t acked = 0;
  uint64_t failed = 0;
  uint64_t dropped = 0;
  uint64_t corrupted = 0;
  uint64_t crashes = 0;
  uint64_t power_losses = 0;
  uint64_t disks_filled = 0;
  uint64_t clock_backs = 0;
  uint64_t invalid_contexts = 0;
  uint64_t invalid_rejected = 0;
  uint64_t latency_checks = 0;
  uint64_t read_switches = 0;
  uint64_t clears = 0;
  uint64_t clears_acked = 0;
  uint64_t keys_swept = 0;
  uint64_t failovers = 0;
  uint64_t mid_write_faults = 0;
  uint64_t mid_write_stops = 0;
  uint64_t late_replies = 0;
  uint64_t read_removes_checked = 0;
  uint64_t stalled = 0;
};

SoakResult RunSoak(uint64_t seed, int ops) {
  SimOptions o;
  o.seed = seed;
  o.nodes = 5;
  o.ring.ring_size = 8;
  o.loss = 0.03;
  o.duplicate = 0.03;
  o.corrupt = 0.01;
  // Now and then a message arrives up to two seconds late: past the
  // retries, so writes switch coordinator and requests overtake each other.
  o.stall = 0.005;
  o.stall_max_micros = 2'000'000;
  o.shuffle_ties = true;
  o.timer_jitter_micros = 3000;
  // A power loss loses the last seconds of writes, as on a real machine.
  o.writeback_micros = 2'000'000;
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
  // Elements removed with a context that held all their acknowledged dots,
  // and not added since.
  std::map<std::string, std::set<std::string>> read_removed;
  SoakResult result;
  // Bounds that hold no element: a read of the set's clock alone.
  RangeQuery nothing;
  nothing.start = "";
  nothing.end = "";
  nothing.end_inclusive = false;
  ClusterWriteOptions wo;
  wo.timeout_micros = 3'000'000;
  ClusterReadOptions ro;
  ro.batch_size = static_cast<uint32_t>(Uniform(rng, 1, 8));
  // Half the seeds ask R replicas first and the others after a hedge (a
  // value of the seed's own, drawn from no generator: the histories stay).
  ro.query_hedge_micros = seed % 2 == 0 ? 0 : 500 + seed % 20'000;
  // A third of the seeds replace a read's silent replica soon (a lost
  // chunk is enough), so that reads resume on another replica mid-stream
  // often: a read once answered dots its context had not seen after such
  // a replacement, and a clear built from it left them.
  if (seed % 3 == 0) ro.replica_timeout_micros = 150'000;
  // A power loss may leave an acknowledged write on a single replica until
  // a full repair; one power loss at most between full repairs keeps every
  // acknowledged write on at least one replica.
  bool lost_power_since_repair = false;

  auto random_up = [&]() {
    std::vector<NodeId> up;
    for (NodeId n : sim.node_ids()) {
      if (sim.IsUp(n)) up.push_back(n);
    }
    return up[Uniform(rng, 0, up.size() - 1)];
  };
  // Nodes whose disk filled and that have not been restarted since.
  std::set<NodeId> full_disk;
  auto restart = [&](NodeId n) {
    full_disk.erase(n);
    const bool back = Uniform(rng, 0, 1) == 1;
    result.clock_backs += back;
    REQUIRE(sim.Restart(n, back).ok());
  };
  // The operator makes room on full disks and restarts their nodes.
  auto restart_full_disks = [&]() {
    for (NodeId n : std::vector<NodeId>(full_disk.begin(), full_disk.end())) {
      if (sim.IsUp(n)) REQUIRE(sim.Crash(n).ok());
      restart(n);
    }
  };
  auto full_repair = [&]() {
    // R = N reads merge every replica and repair each from the others. It
    // stands in for anti-entropy, which retries until the replicas agree;
    // repairs are not acknowledged, so it runs without loss.
    sim.SetLoss(0);
    sim.SetCorruption(0);
    // Writes still running end first: a delta a coordinator retransmits
    // after the repair would reach a replica that missed a later clear (its
    // coordinator lost power after one peer took it) and bring back a dot
    // the repair had settled. (Found once clean stops changed the runs:
    // seed 0x5eed0001 then failed at step 463.)
    sim.RunUntilIdle();
    ClusterReadOptions all = ro;
    all.r = 3;
    for (const std::string& set : sets) {
      auto read = sim.Read(1, set, all);
      if (!read.ok()) DumpTrace(sim, 40);
      REQUIRE(read.ok());
    }
    sim.RunUntilIdle();
    sim.SetLoss(o.loss);
    sim.SetCorruption(o.corrupt);
    lost_power_since_repair = false;
  };
  // After an acknowledged write that switched coordinator: run until the
  // write is over (its deadline, extended once per extra delta, at most).
  // A given-up coordinator that applied it too has then had its delta
  // replicated to W replicas or more, unless the write says otherwise
  // (failovers_unsettled: the element is uncertain from then on). The extra
  // dots are the client's too: a quorum read shows them, and the model
  // takes them (at most one per given-up replica).
  auto settle_failover = [&](NodeId via, const NodeStats& before,
                             const std::string& set, const std::string& e) {
    ++result.failovers;
    sim.RunFor(3 * wo.timeout_micros);
    const NodeStats after = sim.node(via)->stats();
    result.late_replies += Stat(after, "write.late_coordinator_replies") -
                           Stat(before, "write.late_coordinator_replies");
    if (Stat(after, "write.failovers_unsettled") !=
        Stat(before, "write.failovers_unsettled")) {
      uncertain[set].insert(e);
      return;
    }
    if (uncertain[set].count(e)) return;
    ClusterReadOptions quorum = ro;
    quorum.read_repair = false;
    auto m = sim.ContainsAll(via, set, {e}, quorum);
    if (!m.ok()) {
      uncertain[set].insert(e);
      return;
    }
    const std::set<Dot> known = model[set].Value()[e];
    const uint64_t extra =
        Stat(after, "write.extra_dots") - Stat(before, "write.extra_dots");
    uint64_t unknown = 0;
    for (Dot dot : m->elements[0].dots) {
      if (known.count(dot)) continue;
      ++unknown;
      Delta found;
      found.set = set;
      found.ops.push_back(DeltaOp{e, {}, dot});
      model[set].Absorb(found);
    }
    INFO("element " << e << ": " << unknown << " dots the client was not told "
                    << "of, " << extra << " extra dots replicated");
    REQUIRE(unknown <= extra);
    REQUIRE(unknown + 1 <= static_cast<uint64_t>(sim.ring().n()));
  };
  auto check_acked_visible = [&](NodeId via) {
    for (const std::string& set : sets) {
      INFO("set " << set);
      auto read = sim.Read(via, set, ro);
      if (!read.ok()) DumpTrace(sim, 40);
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
        if (gd != wd) {
          DumpTrace(sim, 40);
          std::string g_str, w_str;
          for (Dot d : gd) absl::StrAppend(&g_str, DotToString(d), " ");
          for (Dot d : wd) absl::StrAppend(&w_str, DotToString(d), " ");
          UNSCOPED_INFO("read " << g_str << "; model " << w_str);
        }
        REQUIRE(gd == wd);
      }
      for (const auto& [e, d] : removed[set]) {
        auto g = got.find(e);
        if (g != got.end()) REQUIRE(g->second.count(d) == 0);
      }
      // A remove built from a quorum read that saw every acknowledged dot
      // leaves its element absent (until the next add of it).
      for (const std::string& e : read_removed[set]) {
        if (uncertain[set].count(e)) continue;
        INFO("element " << e << " removed from what a quorum read saw");
        REQUIRE(got.count(e) == 0);
        ++result.read_removes_checked;
      }
    }
  };
  // With no loss or corruption, a read is a few round trips: an R = 2 read
  // of a set of at most 30 elements in one chunk takes under 100 ms of
  // virtual time (latency up to 3 ms, timers up to 3 ms late), never a
  // retry timeout (200 ms).
  auto check_latency = [&]() {
    sim.SetLoss(0);
    sim.SetCorruption(0);
    sim.SetStall(0);
    sim.RunUntilIdle();
    ClusterReadOptions fast = ro;
    fast.batch_size = 1000;
    for (const std::string& set : sets) {
      const uint64_t start = sim.NowMicros();
      auto read = sim.Read(random_up(), set, fast);
      REQUIRE(read.ok());
      const uint64_t took = sim.NowMicros() - start;
      INFO("read of " << set << " took " << took << " us");
      if (took >= 100'000) DumpTrace(sim, 40);
      REQUIRE(took < 100'000);
      ++result.latency_checks;
    }
    sim.SetLoss(o.loss);
    sim.SetCorruption(o.corrupt);
    sim.SetStall(o.stall);
  };

  for (int step = 0; step < ops; ++step) {
    CAPTURE(step);
    const uint64_t dice = Uniform(rng, 0, 99);
    if (dice < 57) {
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
      const bool is_add = op.kind == UpdateOp::Kind::kAdd;
      // A remove whose context holds every acknowledged dot of e: once it
      // is acknowledged, e must stay absent until another add.
      bool observed_all = !is_add;
      const ModelValue value_now = model[set].Value();
      auto acked_dots = value_now.find(e);
      for (Dot dot : acked_dots == value_now.end() ? std::set<Dot>()
                                                   : acked_dots->second) {
        if (std::find(ctx.begin(), ctx.end(), dot) == ctx.end()) {
          observed_all = false;
        }
      }
      const NodeStats before = sim.node(via)->stats();
      absl::StatusOr<Delta> d = absl::UnknownError("not run");
      if (Uniform(rng, 0, 3) != 0) {
        d = sim.Update(via, set, {op}, wo);
      } else {
        // A fault strikes mid-write: a replica of the set is cut off from
        // every other node a few milliseconds in, perhaps after it applied
        // the update and before its answer left.
        std::optional<absl::StatusOr<Delta>> out;
        sim.node(via)->Update(set, {op}, wo, [&out](absl::StatusOr<Delta> r) {
          out = std::move(r);
        });
        sim.RunFor(Uniform(rng, 0, 4000));
        size_t up = 0;
        for (NodeId n : sim.node_ids()) up += sim.IsUp(n);
        if (!out.has_value() && up > 4 && Uniform(rng, 0, 3) == 0) {
          // The coordinating node shuts down cleanly mid-write: its client
          // is answered within the shutdown, never left waiting (Close
          // used to drop the write unanswered). A full disk may fail the
          // clean close; the node is down either way.
          (void)sim.Stop(via);
          REQUIRE(out.has_value());
          ++result.mid_write_stops;
        } else if (!out.has_value()) {
          const std::vector<NodeId>& pl =
              sim.ring().PreferenceList(sim.ring().PartitionOf(set));
          const NodeId victim = pl[Uniform(rng, 0, pl.size() - 1)];
          if (victim != via) {
            std::vector<NodeId> rest;
            for (NodeId n : sim.node_ids()) {
              if (n != victim) rest.push_back(n);
            }
            sim.Partition({{victim}, rest});
            ++result.mid_write_faults;
          }
        }
        REQUIRE(sim.RunUntil([&out]() { return out.has_value(); }));
        d = std::move(*out);
        if (Uniform(rng, 0, 1)) {
          // The cut heals within the write's lifetime: a given-up
          // coordinator's answer arrives late.
          sim.RunFor(Uniform(rng, 0, wo.timeout_micros));
          sim.Heal();
        }
      }
      REQUIRE(d.status().code() != absl::StatusCode::kResourceExhausted);
      if (is_add) read_removed[set].erase(e);
      if (d.ok()) {
        ++result.acked;
        model[set].Absorb(*d);
        for (const DeltaOp& dop : d->ops) {
          if (!dop.add.has_value()) {
            for (Dot dot : dop.context) removed[set].insert({e, dot});
          }
        }
        if (observed_all) read_removed[set].insert(e);
      } else {
        ++result.failed;
        uncertain[set].insert(e);
      }
      if (d.ok() && sim.IsUp(via) &&
          Stat(sim.node(via)->stats(), "write.coordinator_switches") !=
              Stat(before, "write.coordinator_switches")) {
        settle_failover(via, before, set, e);
      }
    } else if (dice < 60) {
      // A client with an invalid context: dots of a replica's actor that it
      // never generated. Refused (InvalidArgument) where that actor lives;
      // it must never block later adds.
      const std::string& set = sets[Uniform(rng, 0, sets.size() - 1)];
      const std::string& e = elements[Uniform(rng, 0, elements.size() - 1)];
      const uint32_t p = sim.ring().PartitionOf(set);
      std::vector<Dot> bogus;
      for (NodeId n : sim.ring().PreferenceList(p)) {
        if (Node* node = sim.node(n)) {
          bogus.push_back(Dot{node->LocalReplica(p)->actor(),
                              UINT64_MAX - Uniform(rng, 0, 3)});
        }
      }
      std::sort(bogus.begin(), bogus.end());
      ++result.invalid_contexts;
      auto d = sim.Update(random_up(), set, {UpdateOp::Remove(e, bogus)}, wo);
      REQUIRE(d.status().code() != absl::StatusCode::kResourceExhausted);
      if (absl::IsInvalidArgument(d.status())) ++result.invalid_rejected;
      // A context-only op never changes a value: nothing to model.
    } else if (dice < 63) {
      // A clear of what a read saw: adds it did not see survive.
      const std::string& set = sets[Uniform(rng, 0, sets.size() - 1)];
      NodeId via = random_up();
      // Every other clear takes the clock alone, by a read whose bounds
      // hold nothing (as bigsetd's DEL does): such a read ends in the
      // input that brings its R-th clock, and its client must still get
      // that clock (read_contract_violations).
      const bool clock_only = result.clears % 2 == 1;
      auto read = sim.Read(via, set, ro, clock_only ? &nothing : nullptr);
      if (!read.ok()) continue;
      ++result.clears;
      auto d = sim.Clear(random_up(), set, read->clock, wo);
      REQUIRE(d.status().code() != absl::StatusCode::kResourceExhausted);
      if (d.ok()) {
        ++result.clears_acked;
        model[set].Absorb(*d);
        for (const ElementDots& e : read->elements) {
          for (Dot dot : e.dots) removed[set].insert({e.element, dot});
        }
      } else {
        // Possibly applied somewhere, and repaired from there.
        for (const std::string& e : elements) uncertain[set].insert(e);
      }
    } else if (dice < 74) {
      // A read; its repairs and answers are checked at heal points. Now
      // and then of the clock alone.
      const std::string& set = sets[Uniform(rng, 0, sets.size() - 1)];
      (void)sim.Read(random_up(), set, ro,
                     sim.NowMicros() % 4 == 0 ? &nothing : nullptr);
    } else if (dice < 81) {
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
      // Crash or power-off a node (keeping at least 4 up), or restart one.
      std::vector<NodeId> up, down;
      for (NodeId n : sim.node_ids()) (sim.IsUp(n) ? up : down).push_back(n);
      if (!down.empty() && Uniform(rng, 0, 1)) {
        restart(down[Uniform(rng, 0, down.size() - 1)]);
      } else if (up.size() > 4) {
        const NodeId victim = up[Uniform(rng, 0, up.size() - 1)];
        if (full_disk.empty() && Uniform(rng, 0, 3) == 0) {
          // Its disk fills after a few more writes; it runs on.
          REQUIRE(sim.FillDisk(victim, Uniform(rng, 0, 20'000)).ok());
          full_disk.insert(victim);
        } else if (!full_disk.empty() && Uniform(rng, 0, 3) == 0) {
          // Room again while it runs: it still refuses writes (a write
          // logged after the part-written record would be lost at its
          // restart) until the restart at the next heal.
          REQUIRE(sim.FreeDisk(*full_disk.begin()).ok());
        } else if (!lost_power_since_repair && Uniform(rng, 0, 2) == 0) {
          REQUIRE(sim.PowerLoss(victim).ok());
          lost_power_since_repair = true;
        } else {
          REQUIRE(sim.Crash(victim).ok());
        }
        ++result.crashes;
      }
    } else if (dice < 95) {
      sim.RunFor(Uniform(rng, 0, 500'000));
    } else {
      // Heal everything; then every acknowledged write is visible to an
      // R=2 read through any node, and reads are fast.
      sim.Heal();
      restart_full_disks();
      for (NodeId n : sim.node_ids()) {
        if (!sim.IsUp(n)) restart(n);
      }
      if (lost_power_since_repair) full_repair();
      check_latency();
      check_acked_visible(random_up());
    }
  }
  // The end: heal, no more loss, repair every set with R=3 reads.
  sim.Heal();
  sim.SetLoss(0);
  sim.SetDuplicate(0);
  sim.SetCorruption(0);
  sim.SetStall(0);
  restart_full_disks();
  for (NodeId n : sim.node_ids()) {
    if (!sim.IsUp(n)) restart(n);
  }
  sim.RunUntilIdle();
  if (lost_power_since_repair) full_repair();
  check_acked_visible(1);
  full_repair();
  // Every replica of every set now holds the same value.
  for (const std::string& set : sets) {
    uint32_t p = sim.ring().PartitionOf(set);
    std::optional<ModelValue> first;
    for (NodeId n : sim.ring().PreferenceList(p)) {
      Replica* r = sim.node(n)->LocalReplica(p);
      REQUIRE(r != nullptr);
      ModelValue v = ToModel(testing::ReadAllCounted(*r, set));
      if (!first) first = v;
      INFO("set " << set << " node " << n);
      REQUIRE(v == *first);
      auto report = r->Verify();
      REQUIRE(report.ok());
      INFO((report->problems.empty() ? "" : report->problems[0]));
      REQUIRE(report->ok());
      // The node's sweeper ran until its queues were empty (RunUntilIdle):
      // no tombstone is left, and the keys are exactly the value's dots.
      auto st = r->GetSetStats(set);
      REQUIRE(st.ok());
      REQUIRE(st->tombstone_dots == 0);
      REQUIRE(r->stats().sweep_queue_length == 0);
      uint64_t dots = 0;  // Of every set in the partition.
      for (const std::string& other : sets) {
        if (sim.ring().PartitionOf(other) != p) continue;
        for (const auto& [e, d] : ToModel(testing::ReadAll(*r, other))) {
          dots += d.size();
        }
      }
      REQUIRE(report->element_keys == dots);
    }
    result.values[set] = *first;
  }
  for (NodeId n : sim.node_ids()) {
    result.read_switches += Stat(sim.node(n)->stats(), "read.replica_switches");
    result.keys_swept += Stat(sim.node(n)->stats(), "sweep.keys_deleted");
    // Every request unrouted what it routed (a read's folds, a write's
    // extra deltas), also those it asked of this node itself.
    INFO("node " << n);
    REQUIRE(Stat(sim.node(n)->stats(), "node.stale_routes") == 0);
  }
  // Every read's client got what ReadHandler promises, in order.
  REQUIRE(sim.read_contract_violations() == 0);
  result.trace_hash = sim.TraceHash();
  result.dropped = sim.messages_dropped();
  result.corrupted = sim.messages_corrupted();
  result.power_losses = sim.power_losses();
  result.disks_filled = sim.disks_filled();
  result.stalled = sim.messages_stalled();
  return result;
}

TEST_CASE("soak: random operations under every fault against the model") {
  SoakResult total;
  int seeds = 0;
  const int kOps = 1500;
  for (uint64_t seed : Seeds(8)) {
    CAPTURE(seed);
    SoakResult r = RunSoak(seed, kOps);
    total.acked += r.acked;
    total.failed += r.failed;
    total.dropped += r.dropped;
    total.corrupted += r.corrupted;
    total.crashes += r.crashes;
    total.power_losses += r.power_losses;
    total.disks_filled += r.disks_filled;
    total.clock_backs += r.clock_backs;
    total.invalid_contexts += r.invalid_contexts;
    total.invalid_rejected += r.invalid_rejected;
    total.latency_checks += r.latency_checks;
    total.read_switches += r.read_switches;
    total.clears += r.clears;
    total.clears_acked += r.clears_acked;
    total.keys_swept += r.keys_swept;
    total.failovers += r.failovers;
    total.mid_write_faults += r.mid_write_faults;
    total.mid_write_stops += r.mid_write_stops;
    total.late_replies += r.late_replies;
    total.read_removes_checked += r.read_removes_checked;
    total.stalled += r.stalled;
    ++seeds;
  }
  std::printf(
      "soak: %d seeds x %d ops: %llu writes acknowledged, %llu failed, "
      "%llu messages dropped, %llu corrupted, %llu crashes (%llu power "
      "losses), %llu full disks, %llu restarts with the clock back, %llu "
      "invalid contexts "
      "(%llu refused), %llu fast-read checks, %llu read replica switches, "
      "%llu clears (%llu acknowledged), %llu keys swept, %llu messages "
      "stalled, %llu partitions mid-write, %llu clean stops mid-write, "
      "%llu acknowledged writes "
      "through failover (%llu late "
      "coordinator replies replicated), %llu checks that a read-based "
      "remove left its element absent, 0 divergences\n",
      seeds, kOps, static_cast<unsigned long long>(total.acked),
      static_cast<unsigned long long>(total.failed),
      static_cast<unsigned long long>(total.dropped),
      static_cast<unsigned long long>(total.corrupted),
      static_cast<unsigned long long>(total.crashes),
      static_cast<unsigned long long>(total.power_losses),
      static_cast<unsigned long long>(total.disks_filled),
      static_cast<unsigned long long>(total.clock_backs),
      static_cast<unsigned long long>(total.invalid_contexts),
      static_cast<unsigned long long>(total.invalid_rejected),
      static_cast<unsigned long long>(total.latency_checks),
      static_cast<unsigned long long>(total.read_switches),
      static_cast<unsigned long long>(total.clears),
      static_cast<unsigned long long>(total.clears_acked),
      static_cast<unsigned long long>(total.keys_swept),
      static_cast<unsigned long long>(total.stalled),
      static_cast<unsigned long long>(total.mid_write_faults),
      static_cast<unsigned long long>(total.mid_write_stops),
      static_cast<unsigned long long>(total.failovers),
      static_cast<unsigned long long>(total.late_replies),
      static_cast<unsigned long long>(total.read_removes_checked));
  CHECK(total.acked > 0);
  CHECK(total.clears_acked > 0);
  CHECK(total.keys_swept > 0);
  CHECK(total.power_losses > 0);
  CHECK(total.disks_filled > 0);
  CHECK(total.corrupted > 0);
  CHECK(total.invalid_rejected > 0);
  CHECK(total.failovers > 0);
  CHECK(total.late_replies > 0);
  CHECK(total.read_removes_checked > 0);
  CHECK(total.mid_write_stops > 0);
}

TEST_CASE("soak: the same seed gives the same run") {
  SoakResult a = RunSoak(77, 150);
  SoakResult b = RunSoak(77, 150);
  CHECK(a.trace_hash == b.trace_hash);
  CHECK(a.values == b.values);
  CHECK(a.acked == b.acked);
  SoakResult c = RunSoak(78, 150);
  CHECK(c.trace_hash != a.trace_hash);
}

}  // namespace
}  // namespace bigset::testing
