// Regressions of the defects the lifecycle review found (issue "Lifecycle
// under faults"), each named after its defect: the exact histories that
// lost or endangered acknowledged writes, or left nodes that never agree.
// The lifecycle soak (lifecycle_soak_test.cc) finds their kind at random.

#include <algorithm>
#include <catch2/catch.hpp>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bigset/testing/sim.h"
#include "failover_fixture.h"
#include "handoff_util.h"
#include "net/message.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

Ring MakeRing(std::vector<NodeId> nodes, uint64_t epoch, uint32_t size = 8,
              int n = 3) {
  return testing::RendezvousRing(std::move(nodes), epoch, size, n);
}

// Writes element "e<i>" to set "s<i>" for i in [0, count), through nodes 1
// to `nodes` in turn (REQUIREs that each write succeeds).
void WriteOneElementEach(Simulator& sim, int count, int nodes) {
  for (int i = 0; i < count; ++i) {
    REQUIRE(sim.Update(1 + i % nodes, absl::StrCat("s", i),
                       {UpdateOp::Add(absl::StrCat("e", i))})
                .ok());
  }
}

// REQUIREs that a read of each of the sets "s0" to "s<count - 1>" through
// node 1 returns one element.
void CheckOneElementEach(Simulator& sim, int count) {
  for (int i = 0; i < count; ++i) {
    CAPTURE(i);
    absl::StatusOr<SimReadResult> r = sim.Read(1, absl::StrCat("s", i));
    REQUIRE(r.ok());
    REQUIRE(r->elements.size() == 1);
  }
}

TEST_CASE(
    "handoff: a receiver that lost power mid-run accepts the run without the "
    "sets it lost",
    "[regression]") {
  // sync_writes off (the default); no hints, no anti-entropy rounds, no
  // read repair: nothing but the hand-off can bring the element back.
  SimOptions o = ChunkedClusterOptions(7, 3, 8, 3, 2);
  o.node.handoff.max_running = 1;
  o.node.anti_entropy.hint_bytes = 0;
  auto created = Simulator::Create(o);
  REQUIRE(created.ok());
  Simulator& sim = **created;
  const Ring next = MakeRing({1, 2, 3, 4}, 2);
  // A partition that node 3 hands to the joining node 4.
  uint32_t p = 0;
  while (Has(next.PreferenceList(p), 3) || !Has(next.PreferenceList(p), 4)) {
    ++p;
    REQUIRE(p < next.ring_size());
  }
  std::vector<std::string> sets;
  for (int i = 0; sets.size() < 12; ++i) {
    const std::string name = absl::StrCat("k", i);
    if (sim.ring().PartitionOf(name) == p) sets.push_back(name);
  }
  std::sort(sets.begin(), sets.end());
  const std::string& first = sets.front();  // Sent first.
  ClusterWriteOptions wo;
  wo.timeout_micros = kSecond;
  for (const std::string& set : sets) {
    for (int e = 0; e < 6; ++e) {
      REQUIRE(
          sim.Update(1, set, {UpdateOp::Add(absl::StrCat("e", e))}, wo).ok());
    }
  }
  // x is acknowledged by nodes 1 and 3; node 2 never gets it.
  sim.Partition({{1, 3}, {2}});
  REQUIRE(sim.Update(1, first, {UpdateOp::Add("x")}, wo).ok());
  sim.RunFor(3 * kSecond);  // Past the write's deadline: no retransmission.
  sim.Heal();
  REQUIRE(sim.InstallRing(next).ok());
  // Node 4 acknowledges the first set (x's), then loses power and with it
  // that set, while the run goes on with the later sets.
  auto has_x = [&]() {
    Replica* r = sim.node(4)->LocalReplica(p);
    if (r == nullptr) return false;
    absl::StatusOr<std::vector<Dot>> dots = r->Contains(first, "x");
    return dots.ok() && !dots->empty();
  };
  const uint64_t deadline = sim.NowMicros() + 60 * kSecond;
  while (!has_x() && sim.NowMicros() < deadline) sim.RunFor(500);
  REQUIRE(has_x());
  REQUIRE(Stat(sim.node(3)->stats(), "handoff.done") == 0);
  REQUIRE(sim.PowerLoss(4).ok());
  REQUIRE(sim.Restart(4).ok());
  SettleOrFail(sim);
  // Node 3 released the partition; R = 2 reads through node 4 (node 4 and
  // either node 1 or node 2) must all see x.
  ClusterReadOptions ro;
  ro.read_repair = false;
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<Membership> m = sim.ContainsAll(4, first, {"x"}, ro);
    REQUIRE(m.ok());
    CHECK(m->all_present);
  }
  CHECK(Stat(sim.node(3)->stats(), "handoff.receiver_restarts") >= 1);
}

TEST_CASE(
    "handoff: acknowledgements passed on by a node that handed over count the "
    "replica that applied them, once",
    "[regression]") {
  // A write whose coordinating replica (pl[0]) applied it gets an
  // acknowledgement from pl[1] that pl[1] did not apply itself: it passed
  // the delta on to pl[0] (a coordinator's serving list was behind: pl[1]
  // had handed the partition over to pl[0]). One replica holds the write,
  // so W = 2 is not reached.
  testing::FailoverFixture f;
  using testing::And;
  using testing::From;
  using testing::OfType;
  using testing::To;
  f.Write({UpdateOp::Add("x")});
  REQUIRE(f.c.DeliverOne(And(To(f.pl[0]), OfType(MessageType::kUpdate))));
  REQUIRE(
      f.c.DeliverOne(And(From(f.pl[0]), OfType(MessageType::kUpdateReply))));
  // The write's request id, from the deltas it replicates (held back).
  const uint64_t id = f.QueuedWriteId();
  REQUIRE(id != 0);
  f.c.Hold(OfType(MessageType::kReplicate));
  auto ack = [&](NodeId from, NodeId applied_by) {
    std::string bytes;
    EncodeStatusReply(
        MessageHeader{MessageType::kReplicateAck, id, f.partition},
        absl::OkStatus(), applied_by, msg::PlaceTaken(), &bytes);
    f.c.queue().push_back({from, f.client, std::move(bytes)});
  };
  ack(f.pl[1], f.pl[0]);
  f.c.Advance(1000);
  CHECK_FALSE(f.result.has_value());
  // pl[1]'s own acknowledgement is a second replica.
  ack(f.pl[1], f.pl[1]);
  f.c.Advance(1000);
  REQUIRE(f.result.has_value());
  CHECK(f.result->ok());
  f.c.Unhold();
}

TEST_CASE(
    "handoff: a receiver whose serving list is behind takes the place of a "
    "node that is still serving",
    "[regression]") {
  // Node 5 is cut off while nodes move a partition (its view misses the
  // moves); the next ring moves places to it while the moves it missed are
  // still what others see. Whatever it accepts, it may take only the
  // place of the node that sent to it: afterwards every view agrees, and
  // every acknowledged write is on W distinct replicas.
  for (uint64_t seed : testing::Seeds(6)) {
    CAPTURE(seed);
    SimOptions o = ChunkedClusterOptions(seed, 5, 8, 3, 2);
    o.min_latency_micros = 1000;
    o.max_latency_micros = 4000;
    auto created = Simulator::Create(o);
    REQUIRE(created.ok());
    Simulator& sim = **created;
    testing::KnownModel model;
    testing::Rng rng(seed);
    ClusterWriteOptions wo;
    wo.timeout_micros = 2 * kSecond;
    auto write = [&](NodeId via) {
      const std::string set = absl::StrCat("s", testing::Uniform(rng, 0, 7));
      const std::string e = absl::StrCat("e", testing::Uniform(rng, 0, 40));
      absl::StatusOr<Delta> d = sim.Update(via, set, {UpdateOp::Add(e)}, wo);
      model.sets[set][e] =
          d.ok() ? testing::Known::kPresent : testing::Known::kUnknown;
    };
    for (int i = 0; i < 60; ++i) write(1);
    // Node 1 leaves, node 6 joins; node 5 hears nothing of it.
    sim.Partition({{1, 2, 3, 4}, {5}});
    REQUIRE(
        sim.InstallRing(MakeRing({2, 3, 4, 5, 6}, 2), {1, 2, 3, 4, 6}).ok());
    sim.Partition({{1, 2, 3, 4, 6}, {5}});
    for (int i = 0; i < 30; ++i) {
      write(2);
      sim.RunFor(50'000);
    }
    // Node 6 leaves again and node 2 too: places move to node 5, whose
    // view is behind, while node 3 is down.
    const Ring third = MakeRing({3, 4, 5, 7}, 3);
    REQUIRE(sim.InstallRing(third, {1, 2, 3, 4, 5, 6, 7}).ok());
    sim.Heal();
    REQUIRE(sim.Crash(3).ok());
    for (int i = 0; i < 30; ++i) {
      write(5);
      sim.RunFor(50'000);
    }
    REQUIRE(sim.Restart(3).ok());
    SettleOrFail(sim);
    // Every view is the ring's (Settled), and each acknowledged add is on
    // at least W distinct replicas (no repair ran).
    for (const auto& [set, elements] : model.sets) {
      const uint32_t p = third.PartitionOf(set);
      std::vector<std::set<std::string>> held;
      for (NodeId id : third.PreferenceList(p)) {
        Replica* r = sim.node(id)->LocalReplica(p);
        REQUIRE(r != nullptr);
        std::set<std::string>& h = held.emplace_back();
        for (const ElementDots& e : testing::ReadAll(*r, set)) {
          h.insert(e.element);
        }
      }
      for (const auto& [element, known] : elements) {
        if (known != testing::Known::kPresent) continue;
        int copies = 0;
        for (const auto& h : held) copies += h.count(element) ? 1 : 0;
        CAPTURE(set, element);
        CHECK(copies >= wo.w);
      }
    }
  }
}

TEST_CASE(
    "handoff: a notice kept for later is acknowledged, then lost in a restart",
    "[regression]") {
  // Node 3 is down while every partition moves 1 -> 4; node 1 crashes
  // right after; then the partitions move 4 -> 5. Node 3 restarts, hears of
  // the second move first, restarts again before it hears of the first.
  // Its views must end at the latest lists, whatever it heard when.
  for (uint64_t seed : testing::Seeds(4)) {
    CAPTURE(seed);
    SimOptions o = ChunkedClusterOptions(seed, 3, 8, 3, 4);
    auto created = Simulator::Create(o);
    REQUIRE(created.ok());
    Simulator& sim = **created;
    for (int i = 0; i < 40; ++i) {
      REQUIRE(sim.Update(1, absl::StrCat("s", i % 8),
                         {UpdateOp::Add(absl::StrCat(i))})
                  .ok());
    }
    REQUIRE(sim.Crash(3).ok());
    REQUIRE(sim.InstallRing(MakeRing({2, 3, 4}, 2), {1, 2, 3, 4}).ok());
    const uint64_t deadline = sim.NowMicros() + 120 * kSecond;
    while (Stat(sim.node(1)->stats(), "handoff.done") < 8 &&
           sim.NowMicros() < deadline) {
      sim.RunFor(10'000);
    }
    REQUIRE(Stat(sim.node(1)->stats(), "handoff.done") == 8);
    REQUIRE(sim.Crash(1).ok());
    REQUIRE(sim.InstallRing(MakeRing({2, 3, 5}, 3), {1, 2, 3, 4, 5}).ok());
    while (Stat(sim.node(4)->stats(), "handoff.done") < 8 &&
           sim.NowMicros() < deadline + 120 * kSecond) {
      sim.RunFor(10'000);
    }
    REQUIRE(Stat(sim.node(4)->stats(), "handoff.done") == 8);
    REQUIRE(sim.Restart(3).ok());
    sim.RunFor(3'000);  // It hears something, not everything.
    REQUIRE(sim.Crash(3).ok());
    REQUIRE(sim.Restart(3).ok());
    REQUIRE(sim.Restart(1).ok());
    SettleOrFail(sim);
    for (uint32_t p = 0; p < 8; ++p) {
      CHECK(sim.node(3)->ServingList(p) == sim.ring().PreferenceList(p));
    }
    ClusterReadOptions all;
    all.r = 3;
    for (int i = 0; i < 8; ++i) {
      CHECK(sim.Read(3, absl::StrCat("s", i), all).ok());
    }
  }
}

TEST_CASE(
    "handoff: a receiver answers reads and acknowledges writes of a partition "
    "it does not serve yet",
    "[regression]") {
  // A coordinator whose list named a receiver (a node that joined a moment
  // ago takes nodes it has not heard of to serve what its first ring gives
  // them) read an empty set from it, and would have counted its
  // acknowledgement of a write: a replica that holds no place.
  testing::ManualCluster c(3, 2);
  RingOptions ro;
  ro.ring_size = 4;
  ro.n = 2;
  ro.epoch = 2;
  ro.placement = Placement::kRendezvous;
  absl::StatusOr<Ring> next = Ring::Create({1, 2, 3}, ro);
  REQUIRE(next.ok());
  // A partition the new ring gives node 3, which does not serve it now.
  uint32_t p = 0;
  while (Has(c.ring().PreferenceList(p), 3) ||
         !Has(next->PreferenceList(p), 3)) {
    ++p;
    REQUIRE(p < 4);
  }
  std::string set;
  for (int i = 0; set.empty(); ++i) {
    if (c.ring().PartitionOf(absl::StrCat("s", i)) == p) {
      set = absl::StrCat("s", i);
    }
  }
  REQUIRE(c.node(3).InstallRing(*next).ok());
  REQUIRE(c.node(3).LocalReplica(p) != nullptr);  // A receiver.
  c.queue().clear();  // No transfer runs: node 3 stays a receiver.
  msg::Replicate replicate;
  replicate.delta.set = set;
  replicate.delta.ops.push_back(DeltaOp{"ghost", {}, Dot{4242, 1}});
  c.queue().push_back({1, 3, EncodeMessage(77, p, replicate)});
  msg::Read read;
  read.set = set;
  c.queue().push_back({1, 3, EncodeMessage(78, p, read)});
  c.queue().push_back(
      {1, 3,
       EncodeMessage(79, p, msg::Query{.set = set, .elements = {"ghost"}})});
  REQUIRE(c.DeliverAll(testing::To(3)) == 3);
  int answers = 0;
  for (const auto& s : c.queue()) {
    if (s.to != 1 || s.from != 3) continue;
    absl::StatusOr<Message> reply = DecodeMessage(s.bytes);
    REQUIRE(reply.ok());
    // Refused: the write as by a node that holds no replica, the reads as
    // by a node that does not serve the partition (a reader's place is
    // then whatever else holds it: see place_quorum.h).
    const absl::Status* status = nullptr;
    bool read = true;
    if (const auto* ack = reply->As<msg::ReplicateAck>()) {
      status = &ack->status;
      read = false;
    } else if (const auto* clock = reply->As<msg::ReadClock>()) {
      status = &clock->status;
    } else if (const auto* found = reply->As<msg::QueryReply>()) {
      status = &found->status;
    }
    if (status != nullptr) {
      CAPTURE(MessageTypeName(reply->type()), *status);
      CHECK((read ? absl::IsNotFound(*status) : absl::IsUnavailable(*status)));
      ++answers;
    }
  }
  CHECK(answers == 3);
  absl::StatusOr<std::vector<Dot>> ghost =
      c.node(3).LocalReplica(p)->Contains(set, "ghost");
  REQUIRE(ghost.ok());
  CHECK(ghost->empty());
}

TEST_CASE(
    "handoff: a node id reused with a fresh store restarts request ids at 1",
    "[regression]") {
  // The client node's writes are coordinated by pl[0], which caches its
  // replies by (client, request id). With the client's store replaced, its
  // new requests must not be taken for old ones (answered from the cache,
  // never applied).
  testing::FailoverFixture f;
  f.Write({UpdateOp::Add("x")});
  f.AdvanceUntilAnswered();
  REQUIRE(f.result->ok());
  f.c.Settle();
  f.c.RestartWiped(f.client, f.c.Now(f.client));
  f.c.Settle();
  f.Write({UpdateOp::Add("y")});
  f.AdvanceUntilAnswered();
  REQUIRE(f.result->ok());
  f.c.Advance(100'000, 5);
  CHECK(f.DotsOn(f.pl[0], "y").size() == 1);
  CHECK(f.QuorumDots(f.pl[0], "y", 3).size() == 1);
}

// Four nodes with 16 sets written; then node 4 alone gets a ring that
// removes it and adds node 5 (an operator removed 4 and put it back, and 4
// saw the removal first). The next ring (both) goes out after this.
std::unique_ptr<Simulator> FlapCluster() {
  SimOptions o;
  o.seed = 11;
  o.nodes = 4;
  o.ring = RingOptions{8, 3, 1, Placement::kRendezvous};
  auto created = Simulator::Create(o);
  REQUIRE(created.ok());
  Simulator& sim = **created;
  WriteOneElementEach(sim, 16, 4);
  REQUIRE(sim.InstallRing(MakeRing({1, 2, 3, 5}, 2), {4}).ok());
  return std::move(*created);
}

// Node 5 serves nothing before it takes a place, and the cluster settles
// with every set read back.
void CheckJoinerSettles(Simulator& sim) {
  REQUIRE(sim.RingOf(5) != nullptr);
  for (uint32_t p = 0; p < 8; ++p) {
    const std::vector<NodeId> list = sim.node(5)->ServingList(p);
    CAPTURE(p, list);
    CHECK(std::find(list.begin(), list.end(), 5) == list.end());
  }
  SettleOrFail(sim, 60 * kSecond);
  CheckOneElementEach(sim, 16);
}

TEST_CASE(
    "handoff: a node that joins while one node alone runs a ring naming it "
    "serves nothing before it takes a place",
    "[regression]") {
  // After the flap, the ring with both goes to every node, and node 5
  // starts. Node 5 must be opened with the ring the cluster runs (epoch 1),
  // not with the one only node 4 ran (epoch 2), which places partitions on
  // it: a new store serves what its first ring places on it at once, as an
  // original member, with no data, and the leaver it displaces waits for
  // ever for a joiner.
  std::unique_ptr<Simulator> sim = FlapCluster();
  REQUIRE(sim->InstallRing(MakeRing({1, 2, 3, 4, 5}, 3)).ok());
  CheckJoinerSettles(*sim);
}

TEST_CASE(
    "handoff: a node that joins by a late install, after every other node runs "
    "a ring naming it, serves nothing before it takes a place",
    "[regression]") {
  // As above, but the ring with both goes to the running nodes first and
  // to node 5 (which it creates) later: every ring a node runs then names
  // node 5, and so does the ring before the newest (the flap). The
  // simulator opened node 5 with the flap, so it served as an original
  // member with no data and a leaver waited for ever: the lifecycle soak
  // at BIGSET_TEST_SCALE=100 (seeds 1592590527, 1592590519). It must be
  // opened with the newest ring given out that leaves it out (epoch 1).
  for (const std::vector<NodeId>& first :
       {std::vector<NodeId>{1, 2, 3, 4}, std::vector<NodeId>{1, 2, 3}}) {
    CAPTURE(first);
    std::unique_ptr<Simulator> sim = FlapCluster();
    const Ring both = MakeRing({1, 2, 3, 4, 5}, 3);
    REQUIRE(sim->InstallRing(both, first).ok());
    std::vector<NodeId> rest = {5};
    if (first.size() == 3) rest = {4, 5};
    REQUIRE(sim->InstallRing(both, rest).ok());
    CheckJoinerSettles(*sim);
  }
}

TEST_CASE(
    "handoff: a node whose place was taken finds the holder after the place "
    "was handed on twice",
    "[regression]") {
  // Node 3 hands partition 0 over to node 4, which accepts; node 3 is cut
  // off before it hears so (it still serves, its place taken). Node 4 then
  // hands the place on to 5, and 5 to 6. Node 3 follows the chain of
  // takers (4's departed entry, then 5's) to the holder, 6, to send it its
  // data as a supplement: 5's departed entry must stay although 4, whose
  // place it took, serves no more.
  SimOptions o;
  o.seed = 5;
  o.nodes = 3;
  o.ring = RingOptions{4, 3, 1, Placement::kRendezvous};
  auto created = Simulator::Create(o);
  REQUIRE(created.ok());
  Simulator& sim = **created;
  WriteOneElementEach(sim, 8, 3);
  REQUIRE(sim.InstallRing(MakeRing({1, 2, 4}, 2, 4)).ok());
  auto serves = [&](NodeId id, uint32_t p) {
    const std::vector<NodeId> l = sim.node(id)->ServingList(p);
    return std::find(l.begin(), l.end(), id) != l.end();
  };
  REQUIRE(sim.RunUntil([&] { return serves(4, 0); }));
  sim.Partition({{1, 2, 4, 5, 6}, {3}});
  REQUIRE(serves(3, 0));  // Its place taken, and it does not know yet.
  // (A node created now starts in a group of its own: the groups again.)
  REQUIRE(sim.InstallRing(MakeRing({1, 2, 5}, 3, 4), {1, 2, 4, 5}).ok());
  sim.Partition({{1, 2, 4, 5, 6}, {3}});
  sim.RunFor(5 * kSecond);
  REQUIRE(sim.InstallRing(MakeRing({1, 2, 6}, 4, 4), {1, 2, 4, 5, 6}).ok());
  sim.Partition({{1, 2, 4, 5, 6}, {3}});
  sim.RunFor(5 * kSecond);
  REQUIRE(sim.InstallRing(MakeRing({1, 2, 6}, 4, 4), {3}).ok());
  sim.Heal();
  SettleOrFail(sim, 60 * kSecond);
  CheckOneElementEach(sim, 8);
}

TEST_CASE(
    "handoff: a place handed out twice (the giver gave up on a taker cut off "
    "after it accepted) settles",
    "[regression]") {
  // Node L hands partition p to joiner 5, which accepts; the acceptance is
  // lost (5 is cut off right as it answers). A ring that drops 5 and adds
  // 6 comes; L, hearing nothing from 5 for long, gives it up and hands
  // the place to 6. Both 5 and 6 took L's place. Node 5, a leaver with no
  // joiner left to pair with, waited for ever ("leaving: waiting for a
  // joiner to pair with"), its serving list n + 1 long on every node
  // (issue "Liveness", second finding). Now it gives its data to its twin
  // 6 as a supplement and lets go.
  SimOptions o = ChunkedClusterOptions(11, 4, 32, 3, 2);
  auto created = Simulator::Create(o);
  REQUIRE(created.ok());
  Simulator& sim = **created;
  const Ring first = MakeRing({1, 2, 3, 4}, 1, 32);
  const Ring second = MakeRing({1, 2, 3, 4, 5}, 2, 32);
  const Ring third = MakeRing({1, 2, 3, 4, 6}, 3, 32);
  // A partition whose only move in each ring is one leaver's place: to 5,
  // then (5 dropped) to 6.
  uint32_t p = 0;
  NodeId leaver = 0;
  for (; p < first.ring_size(); ++p) {
    const std::vector<NodeId>& a = first.PreferenceList(p);
    const std::vector<NodeId>& b = second.PreferenceList(p);
    const std::vector<NodeId>& c = third.PreferenceList(p);
    if (!Has(b, 5) || !Has(c, 6)) continue;
    NodeId gone = 0;
    for (NodeId n : a) {
      if (!Has(b, n)) gone = n;
    }
    if (gone == 0 || Has(c, gone)) continue;
    bool same_rest = true;
    for (NodeId n : a) {
      if (n != gone && (!Has(b, n) || !Has(c, n))) same_rest = false;
    }
    if (same_rest) {
      leaver = gone;
      break;
    }
  }
  REQUIRE(leaver != 0);
  std::vector<std::string> sets;
  for (int i = 0; sets.size() < 4; ++i) {
    const std::string name = absl::StrCat("t", i);
    if (first.PartitionOf(name) == p) sets.push_back(name);
  }
  testing::KnownModel model;
  for (const std::string& set : sets) {
    for (int e = 0; e < 5; ++e) {
      const std::string element = absl::StrCat("e", e);
      REQUIRE(sim.Update(1, set, {UpdateOp::Add(element)}).ok());
      model.sets[set][element] = testing::Known::kPresent;
    }
  }
  // Cut node 5 off the moment it accepts the leaver's place.
  bool accepted = false;
  OnAcceptance(sim, 5, leaver, p, [&] { accepted = true; });
  REQUIRE(sim.InstallRing(second).ok());
  const uint64_t bound = sim.NowMicros() + 120 * kSecond;
  while (!accepted && sim.NowMicros() < bound) REQUIRE(sim.Step());
  REQUIRE(accepted);
  sim.Partition({{1, 2, 3, 4, 6}, {5}});
  sim.SetSendObserver({});
  // The ring drops 5 (it gets the ring too) and adds 6; the leaver gives
  // up on 5 and hands its place to 6.
  REQUIRE(sim.InstallRing(third).ok());
  sim.Partition({{1, 2, 3, 4, 6}, {5}});  // Node 6 exists now.
  auto leaver_serves = [&]() {
    return sim.node(leaver)->LocalReplica(p) != nullptr &&
           Has(sim.node(leaver)->ServingList(p), leaver);
  };
  while (leaver_serves() && sim.NowMicros() < bound) sim.RunFor(100'000);
  INFO("leaver " << leaver << " p" << p << ": " << testing::Unsettled(sim));
  std::string move;
  for (const PartitionMove& m : sim.node(leaver)->Moving()) {
    if (m.partition == p) move = m.state;
  }
  INFO("the leaver's move: " << move);
  REQUIRE_FALSE(leaver_serves());
  REQUIRE(Has(sim.node(6)->ServingList(p), 6));
  sim.Heal();
  SettleOrFail(sim, 120 * kSecond);
  for (const std::string& set : sets) {
    for (NodeId id : third.PreferenceList(p)) {
      CAPTURE(set, id);
      testing::CheckKnown(
          set, testing::ReadAll(*sim.node(id)->LocalReplica(p), set), model);
    }
  }
}

TEST_CASE("handoff: retired replicas are never freed", "[regression]") {
  // A node that hands partitions off and gets them back again must not
  // keep a replica object per hand-off until it closes.
  SimOptions o;
  o.seed = 11;
  o.nodes = 4;
  o.ring = RingOptions{8, 3, 1, Placement::kRendezvous};
  auto created = Simulator::Create(o);
  REQUIRE(created.ok());
  Simulator& sim = **created;
  for (int i = 0; i < 40; ++i) {
    REQUIRE(sim.Update(1, absl::StrCat("s", i % 8),
                       {UpdateOp::Add(absl::StrCat(i))})
                .ok());
  }
  auto hosted = [&](NodeId id) {
    uint64_t n = 0;
    for (uint32_t p = 0; p < 8; ++p) {
      n += sim.node(id)->LocalReplica(p) != nullptr;
    }
    return n;
  };
  uint64_t epoch = 1;
  for (int round = 0; round < 4; ++round) {
    const std::vector<NodeId> nodes = round % 2 == 0
                                          ? std::vector<NodeId>{1, 2, 3}
                                          : std::vector<NodeId>{1, 2, 3, 4};
    REQUIRE(sim.InstallRing(MakeRing(nodes, ++epoch), {1, 2, 3, 4}).ok());
    SettleOrFail(sim);
    sim.RunFor(kSecond);
    for (NodeId id = 1; id <= 4; ++id) {
      CAPTURE(round, id);
      CHECK(Stat(sim.node(id)->stats(), "node.replicas_open") == hosted(id));
    }
  }
}

}  // namespace
}  // namespace bigset::testing
