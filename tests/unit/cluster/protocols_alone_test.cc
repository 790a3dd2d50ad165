// The hand-off (HandoffManager) and anti-entropy (AntiEntropy) driven
// alone: no Node, no simulator, no transport. Each input returns its sends
// and timer arms (ProtocolOutput); the test is their driver.

#include <algorithm>
#include <catch2/catch.hpp>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bigset/cluster/ring.h"
#include "cluster/anti_entropy.h"
#include "cluster/dispatcher.h"
#include "cluster/handoff.h"
#include "cluster/hosted_replicas.h"
#include "cluster/partition_roles.h"
#include "cluster/request_ids.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

constexpr uint32_t kPartitions = 4;

Ring TwoNodeRing(uint32_t ring_size = kPartitions) {
  RingOptions o;
  o.ring_size = ring_size;
  o.n = 2;  // Both nodes serve every partition.
  absl::StatusOr<Ring> ring = Ring::Create({1, 2}, o);
  REQUIRE(ring.ok());
  return *ring;
}

// One node's protocols over an in-memory store, as a node holds them.
struct Peer {
  Peer(NodeId id, const AntiEntropyOptions& ae,
       const Ring& ring = TwoNodeRing())
      : id(id),
        replicas(id, mem.store.get(), &options,
                 std::make_shared<MemoryBudget>(1 << 20), kPartitions),
        roles(&replicas),
        ids(id, mem.store.get(), &options.actor_id_source),
        handoff(id, mem.store.get(), &replicas, &roles, &stats, &ids,
                HandoffOptions{}),
        anti_entropy(id, &roles, &stats, &ids, ae) {
    REQUIRE(ids.Open().ok());
    REQUIRE(handoff.Load(ring, ids.lease_end()).ok());
    WithOutput<absl::Status> opened = handoff.Open(/*now=*/0);
    REQUIRE(opened.value.ok());
    opened_output = std::move(opened.output);
  }

  const NodeId id;
  MemStore mem;
  // Actors differ between the peers (a node's replicas draw theirs from
  // one source, the peers' sources are apart).
  const ReplicaOptions options = [this] {
    ReplicaOptions o;
    auto next = std::make_shared<uint64_t>(1000 * id);
    o.actor_id_source = [next]() { return (*next)++; };
    return o;
  }();
  NodeCounters stats;
  HostedReplicas replicas;
  PartitionRoles roles;
  RequestIds ids;
  HandoffManager handoff;
  AntiEntropy anti_entropy;
  ProtocolOutput opened_output;
};

std::vector<NodeId> SendsTo(const ProtocolOutput& out) {
  std::vector<NodeId> to;
  for (const ProtocolOutput::Effect& e : out.effects) {
    if (!e.is_timer) to.push_back(e.to);
  }
  return to;
}

size_t Timers(const ProtocolOutput& out, uint64_t delay) {
  size_t n = 0;
  for (const ProtocolOutput::Effect& e : out.effects) {
    n += e.is_timer && e.delay_micros == delay;
  }
  return n;
}

// Two peers joined by a FIFO of messages, as a driver joins them; the
// test fires the timers.
struct PeerPair {
  PeerPair(const AntiEntropyOptions& options, const Ring& ring)
      : a(1, options, ring), b(2, options, ring) {}
  // Routes messages of type Body to `protocol`'s Step on each peer.
  template <typename Body, typename Protocol>
  void Route(Protocol Peer::*protocol) {
    for (Peer* p : {&a, &b}) {
      (p == &a ? to_a : to_b)
          .On<Body>([this, p, protocol](NodeId from, const MessageHeader& h,
                                        Body& m) {
            Queue(p->id, (p->*protocol).Step(from, h, m, now));
          });
    }
  }
  void Queue(NodeId from, ProtocolOutput out) {
    for (ProtocolOutput::Effect& e : out.effects) {
      if (e.is_timer) {
        armed.push_back({from, e.timer});
      } else {
        wire.push_back({from, e.to, std::move(e.bytes)});
      }
    }
  }
  // Delivers one message (false if none is in flight).
  bool DeliverOne() {
    if (wire.empty()) return false;
    Message m = std::move(wire.front());
    wire.pop_front();
    REQUIRE((m.to == 1 || m.to == 2));
    REQUIRE((m.to == 1 ? to_a : to_b).Dispatch(m.from, m.bytes));
    return true;
  }
  // Delivers every message, and those they cause, in order.
  size_t Pump() {
    size_t delivered = 0;
    while (DeliverOne()) ++delivered;
    return delivered;
  }
  // Fires the timers of `protocol` armed so far, `after` microseconds on
  // (as a scheduler would once their delays passed).
  template <typename Protocol>
  void FireTimers(Protocol Peer::*protocol, uint64_t after) {
    now += after;
    std::vector<std::pair<NodeId, uint32_t>> due;
    due.swap(armed);
    for (const auto& [peer, timer] : due) {
      Peer& p = peer == 1 ? a : b;
      Queue(peer, (p.*protocol).OnTimer(timer, now));
    }
  }

  struct Message {
    NodeId from;
    NodeId to;
    std::string bytes;
  };
  Peer a;
  Peer b;
  Dispatcher to_a;
  Dispatcher to_b;
  std::deque<Message> wire;
  uint64_t now = 1'000'000;
  std::vector<std::pair<NodeId, uint32_t>> armed;
};

// Two peers' anti-entropy.
struct AntiEntropyPair : PeerPair {
  explicit AntiEntropyPair(const AntiEntropyOptions& options)
      : PeerPair(options, TwoNodeRing()) {
    Route<msg::AeDigest>(&Peer::anti_entropy);
    Route<msg::AeDigestReply>(&Peer::anti_entropy);
    Route<msg::AeSets>(&Peer::anti_entropy);
    Route<msg::AeSetsReply>(&Peer::anti_entropy);
    Route<msg::AePull>(&Peer::anti_entropy);
    Route<msg::AePush>(&Peer::anti_entropy);
    Route<msg::AePushAck>(&Peer::anti_entropy);
  }
  void Rounds() { Queue(1, a.anti_entropy.RunRoundsNow(now)); }
  // Every delay here is the retry interval.
  void Tick() { FireTimers(&Peer::anti_entropy, ByHandRetry()); }
  static uint64_t ByHandRetry() { return AntiEntropyOptions{}.retry_micros; }
};

AntiEntropyOptions ByHand() {
  AntiEntropyOptions o;
  o.interval_micros = 0;  // Rounds only when the test runs them.
  return o;
}

TEST_CASE("anti-entropy alone: a start with rounds off arms nothing",
          "[anti_entropy][protocols]") {
  Peer p(1, ByHand());
  ProtocolOutput out = p.anti_entropy.Start(0);
  CHECK(out.empty());
}

TEST_CASE("anti-entropy alone: a start arms one tick and sends nothing",
          "[anti_entropy][protocols]") {
  AntiEntropyOptions o;
  o.interval_micros = 5'000'000;
  Peer p(1, o);
  ProtocolOutput out = p.anti_entropy.Start(0);
  REQUIRE(out.effects.size() == 1);
  CHECK(out.effects[0].is_timer);
  CHECK(out.effects[0].delay_micros == o.retry_micros);
  // The tick, before the first round is due, arms the next and sends
  // nothing.
  ProtocolOutput tick = p.anti_entropy.OnTimer(out.effects[0].timer, 1);
  CHECK(SendsTo(tick).empty());
  CHECK(Timers(tick, o.retry_micros) == 1);
}

TEST_CASE(
    "anti-entropy alone: a round sends one digest per partition, "
    "after arming its tick",
    "[anti_entropy][protocols]") {
  Peer p(1, ByHand());
  ProtocolOutput out = p.anti_entropy.RunRoundsNow(1);
  REQUIRE(!out.effects.empty());
  CHECK(out.effects[0].is_timer);  // The round's expiry, armed first.
  CHECK(SendsTo(out) == std::vector<NodeId>(kPartitions, 2));
  CHECK(Timers(out, ByHand().retry_micros) == 1);  // One tick at a time.
  CHECK(p.stats.ae_rounds == kPartitions);
}

TEST_CASE(
    "anti-entropy alone: two rounds repair a replica that missed a "
    "write, both ways",
    "[anti_entropy][protocols]") {
  AntiEntropyPair pair(ByHand());
  const uint32_t p = pair.a.handoff.ring().PartitionOf("s");
  Replica* at_a = pair.a.replicas.Get(p);
  Replica* at_b = pair.b.replicas.Get(p);
  REQUIRE(at_a != nullptr);
  REQUIRE(at_b != nullptr);
  AddElement(*at_a, "s", "only-at-a");
  AddElement(*at_b, "s", "only-at-b");
  // A difference is acted on at its second sighting.
  pair.Rounds();
  CHECK(pair.Pump() > 0);
  CHECK_FALSE(HasElement(*at_b, "s", "only-at-a"));
  pair.Rounds();
  pair.Pump();
  CHECK(pair.a.stats.ae_sets_repaired + pair.b.stats.ae_sets_repaired > 0);
  // The pushes run from the ticks.
  for (int i = 0; i < 10 && !pair.armed.empty(); ++i) {
    pair.Tick();
    pair.Pump();
  }
  CHECK(HasElement(*at_b, "s", "only-at-a"));
  CHECK(HasElement(*at_a, "s", "only-at-b"));
  // Equal now: a round is one digest each way per partition.
  pair.Rounds();
  CHECK(pair.Pump() == 2 * kPartitions);
}

TEST_CASE(
    "anti-entropy alone: a hint is sent at the ticks until "
    "acknowledged",
    "[anti_entropy][protocols]") {
  Peer p(1, ByHand());
  const uint64_t retry = ByHand().retry_micros;
  const std::string bytes = "a replicated delta's message";
  ProtocolOutput added = p.anti_entropy.AddHint(2, 0, 77, bytes, 10);
  REQUIRE(added.effects.size() == 1);
  REQUIRE(added.effects[0].is_timer);
  const uint32_t tick = added.effects[0].timer;
  // Sent at the first tick, again once its resend interval passed, each
  // tick arming the next.
  uint64_t now = 20;
  for (int send = 0; send < 2; ++send) {
    ProtocolOutput out = p.anti_entropy.OnTimer(tick, now);
    REQUIRE(SendsTo(out) == std::vector<NodeId>{2});
    for (const ProtocolOutput::Effect& e : out.effects) {
      if (!e.is_timer) CHECK(e.bytes == bytes);
    }
    CHECK(Timers(out, retry) == 1);
    now += 5 * retry;
  }
  CHECK(p.stats.ae_updates_sent == 2);
  CHECK(p.anti_entropy.OnReplicateAck(77, 2, absl::OkStatus()));
  // Acknowledged: the next tick sends nothing and arms nothing more.
  CHECK(p.anti_entropy.OnTimer(tick, now).empty());
  CHECK_FALSE(p.anti_entropy.OnReplicateAck(77, 2, absl::OkStatus()));
}

TEST_CASE(
    "hand-off alone: opening gossips with every peer and arms its "
    "timers",
    "[handoff][protocols]") {
  Peer p(1, ByHand());
  const HandoffOptions o;
  // One membership message to the peer and the gossip timer: no tick (no
  // transfer to make) and no release (the store held no other partition).
  CHECK(SendsTo(p.opened_output) == std::vector<NodeId>{2});
  CHECK(Timers(p.opened_output, o.gossip_micros) == 1);
  CHECK(p.opened_output.effects.size() == 2);
  CHECK(p.stats.membership_messages_sent == 1);
  for (uint32_t q = 0; q < kPartitions; ++q) {
    CHECK(p.roles.Role(q) == PartitionRole::kServing);
    CHECK(p.roles.ServingReplica(q) != nullptr);
    CHECK(p.roles.ReadableReplica(q) != nullptr);
  }
}

TEST_CASE(
    "hand-off alone: the gossip timer gossips and arms itself again "
    "while changes are recent",
    "[handoff][protocols]") {
  Peer p(1, ByHand());
  const HandoffOptions o;
  uint32_t gossip = 0;
  for (const ProtocolOutput::Effect& e : p.opened_output.effects) {
    if (e.is_timer && e.delay_micros == o.gossip_micros) gossip = e.timer;
  }
  REQUIRE(gossip != 0);
  uint64_t now = o.gossip_micros;
  const uint64_t sent = p.stats.membership_messages_sent;
  ProtocolOutput out = p.handoff.OnTimer(gossip, now);
  CHECK(Timers(out, o.gossip_micros) == 1);
  CHECK(p.stats.membership_messages_sent > sent);
  CHECK(SendsTo(out) == std::vector<NodeId>{2});
  // Quiet long enough (nothing moves), the gossip stops arming itself.
  bool stopped = false;
  for (int i = 0; i < 100 && !stopped; ++i) {
    now += o.gossip_micros;
    stopped = Timers(p.handoff.OnTimer(gossip, now), o.gossip_micros) == 0;
  }
  CHECK(stopped);
}

TEST_CASE("hand-off alone: a ring of another size is refused with no effect",
          "[handoff][protocols]") {
  Peer p(1, ByHand());
  RingOptions o;
  o.ring_size = 2 * kPartitions;
  o.n = 2;
  o.epoch = 1;
  absl::StatusOr<Ring> other = Ring::Create({1, 2}, o);
  REQUIRE(other.ok());
  WithOutput<absl::Status> installed = p.handoff.InstallRing(*other, 5);
  CHECK(absl::IsInvalidArgument(installed.value));
  CHECK(installed.output.empty());
  CHECK(p.handoff.ring().ring_size() == kPartitions);
}

TEST_CASE(
    "hand-off alone: a node behind is told the state once per "
    "gossip interval",
    "[handoff][protocols]") {
  Peer p(1, ByHand());
  const uint64_t gossip = HandoffOptions{}.gossip_micros;
  CHECK(SendsTo(p.handoff.TellMoved(2, 0, 1000)) == std::vector<NodeId>{2});
  CHECK(p.handoff.TellMoved(2, 0, 1000 + gossip - 1).empty());
  CHECK(SendsTo(p.handoff.TellMoved(2, 0, 1000 + gossip)) ==
        std::vector<NodeId>{2});
}

// Two peers' hand-offs, opened.
struct HandoffPair : PeerPair {
  explicit HandoffPair(const Ring& ring) : PeerPair(ByHand(), ring) {
    Queue(1, std::move(a.opened_output));
    Queue(2, std::move(b.opened_output));
    Route<msg::TransferChunk>(&Peer::handoff);
    Route<msg::TransferAck>(&Peer::handoff);
    Route<msg::HandoffDone>(&Peer::handoff);
    Route<msg::HandoffDoneAck>(&Peer::handoff);
    Route<msg::Membership>(&Peer::handoff);
  }
  // Every timer armed so far, once the longest of their delays passed.
  void FireTimers() {
    const HandoffOptions o;
    PeerPair::FireTimers(
        &Peer::handoff,
        std::max({o.gossip_micros, o.retry_micros, o.release_tick_micros}));
  }
};

TEST_CASE(
    "hand-off alone: a leaver's partition goes serving, committed, "
    "draining, released; the joiner's receiving, serving",
    "[handoff][protocols][roles]") {
  RingOptions o;
  o.ring_size = kPartitions;
  o.n = 1;
  o.epoch = 1;
  absl::StatusOr<Ring> both = Ring::Create({1, 2}, o);
  REQUIRE(both.ok());
  o.epoch = 2;
  absl::StatusOr<Ring> only_b = Ring::Create({2}, o);
  REQUIRE(only_b.ok());
  HandoffPair pair(*both);
  // A partition node 1 holds, with three sets of it in it.
  uint32_t p = 0;
  while (p < kPartitions && both->PreferenceList(p) != std::vector<NodeId>{1}) {
    ++p;
  }
  REQUIRE(p < kPartitions);
  std::vector<std::string> sets;
  for (int i = 0; sets.size() < 3; ++i) {
    const std::string name = "s" + std::to_string(i);
    if (both->PartitionOf(name) == p) sets.push_back(name);
  }
  Replica* replica = pair.a.roles.ServingReplica(p);
  REQUIRE(replica != nullptr);
  for (int i = 0; i < 30; ++i) {
    AddElement(*replica, sets[i % 3], "e" + std::to_string(i));
  }
  while (pair.DeliverOne()) {
  }
  CHECK(pair.a.roles.Role(p) == PartitionRole::kServing);
  CHECK(pair.b.roles.Role(p) == PartitionRole::kReleased);

  // Both install the ring without node 1: it leaves, node 2 joins.
  for (Peer* peer : {&pair.a, &pair.b}) {
    WithOutput<absl::Status> installed =
        peer->handoff.InstallRing(*only_b, pair.now);
    REQUIRE(installed.value.ok());
    pair.Queue(peer->id, std::move(installed.output));
  }
  CHECK(pair.b.roles.Role(p) == PartitionRole::kReceiving);
  CHECK(pair.b.roles.LocalReplica(p) != nullptr);
  CHECK(pair.b.roles.ServingReplica(p) == nullptr);
  // Every role each node had, in order, after each input.
  std::vector<PartitionRole> leaver = {pair.a.roles.Role(p)};
  std::vector<PartitionRole> joiner = {pair.b.roles.Role(p)};
  auto note = [&] {
    if (pair.a.roles.Role(p) != leaver.back()) {
      leaver.push_back(pair.a.roles.Role(p));
    }
    if (pair.b.roles.Role(p) != joiner.back()) {
      joiner.push_back(pair.b.roles.Role(p));
    }
    // Draining: the replica is still there, but no request may use it.
    if (pair.a.roles.Role(p) == PartitionRole::kDraining) {
      CHECK(pair.a.replicas.Get(p) != nullptr);
      CHECK(pair.a.roles.LocalReplica(p) == nullptr);
    }
    // Committed: writes, not reads.
    if (pair.a.roles.Role(p) == PartitionRole::kCommitted) {
      CHECK(pair.a.roles.ServingReplica(p) != nullptr);
      CHECK(pair.a.roles.ReadableReplica(p) == nullptr);
    }
  };
  for (int round = 0; round < 100; ++round) {
    while (pair.DeliverOne()) note();
    if (leaver.back() == PartitionRole::kReleased &&
        joiner.back() == PartitionRole::kServing) {
      break;
    }
    pair.FireTimers();
    note();
  }
  CHECK(leaver == std::vector<PartitionRole>{
                      PartitionRole::kServing, PartitionRole::kCommitted,
                      PartitionRole::kDraining, PartitionRole::kReleased});
  CHECK(joiner == std::vector<PartitionRole>{PartitionRole::kReceiving,
                                             PartitionRole::kServing});
  CHECK_FALSE(pair.a.roles.Serves(p));
  CHECK(pair.b.roles.Serves(p));
  Replica* taken = pair.b.roles.ReadableReplica(p);
  REQUIRE(taken != nullptr);
  for (int i = 0; i < 30; ++i) {
    CHECK(HasElement(*taken, sets[i % 3], "e" + std::to_string(i)));
  }
  // Every partition is node 2's now: those node 1 held moved too (empty).
  for (uint32_t q = 0; q < kPartitions; ++q) {
    CHECK(pair.a.roles.Role(q) == PartitionRole::kReleased);
    CHECK(pair.b.roles.Role(q) == PartitionRole::kServing);
  }
}

TEST_CASE(
    "protocol inputs: one entered within another hands back the outer "
    "one's effects first, and its time is restored",
    "[protocols]") {
  uint64_t now = 0;
  ProtocolOutput out;
  ProtocolOutput inner;
  uint64_t time_after_inner = 0;
  ProtocolOutput outer = RunProtocolInput(&now, &out, 100, [&] {
    out.Send(1, "outer, before");
    // An embedder's callback that enters the protocol again.
    inner = RunProtocolInput(&now, &out, 150, [&] {
      out.Send(2, "inner");
      out.Arm(7, 10);
    });
    time_after_inner = now;
    out.Send(3, "outer, after");
  });
  REQUIRE(inner.effects.size() == 3);
  CHECK(inner.effects[0].bytes == "outer, before");
  CHECK(inner.effects[1].bytes == "inner");
  CHECK(inner.effects[2].is_timer);
  CHECK(inner.effects[2].timer == 7);
  CHECK(time_after_inner == 100);
  REQUIRE(outer.effects.size() == 1);
  CHECK(outer.effects[0].bytes == "outer, after");
  CHECK(out.empty());
  WithOutput<int> valued =
      RunProtocolInput(&now, &out, 200, [&] { return 42; });
  CHECK(valued.value == 42);
  CHECK(valued.output.empty());
}

}  // namespace
}  // namespace bigset::testing
