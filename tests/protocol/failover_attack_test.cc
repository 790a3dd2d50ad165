// Attacks on the failover protocol (kReplicateGivenUp, kReplicateAckWithDelta,
// extra deltas): reordering and duplication of its messages, crafted and
// garbage messages, crashes of the given-up replica and of the coordinating
// node, candidate cycling, N = 5 with two given-up candidates, failover off,
// clears through failover, and what the node keeps once writes end.
//
// The tests tagged [regression] reproduce defects this attack found: a
// kReplicateGivenUp answered with a delta did not fence its request, so a
// delayed copy applied again once the reply cache dropped it; extra deltas
// extended the client's wait past timeout_micros; a kReplicateAckWithDelta
// from the chosen coordinator, or about another set, was replicated.

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <catch2/catch.hpp>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <iterator>
#include <limits>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

// The node's internal tables (its request registry, the replica service's
// fences) are private; the attack looks at them to find what is never freed.
#define private public
#include "bigset/cluster/node.h"
#include "cluster/node_impl.h"
#undef private

#include "failover_fixture.h"
#include "manual_cluster.h"
#include "net/message.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

using Sent = ManualCluster::Sent;

uint64_t RequestIdOf(const Sent& s) {
  MessageHeader h;
  std::string_view body;
  REQUIRE(ParseHeader(s.bytes, &h, &body).ok());
  return h.request_id;
}

// The failover fixture, and a look at the node's internals.
struct Fx : testing::FailoverFixture {
  using FailoverFixture::FailoverFixture;

  Node::Impl& I(NodeId id) { return *c.node(id).impl_; }

  // Moves every queued message matching `p` out of the network.
  std::vector<Sent> Stash(const std::function<bool(const Sent&)>& p) {
    std::vector<Sent> out;
    for (const Sent& s : c.queue()) {
      if (p(s)) out.push_back(s);
    }
    c.Drop(p);
    return out;
  }

  // Duplicates every queued message.
  void DuplicateQueue() {
    std::deque<Sent> copy = c.queue();
    for (Sent& s : copy) c.queue().push_back(std::move(s));
  }

  // What the coordinating node keeps once every write has ended.
  void CheckClientIdle() {
    CHECK(I(client).requests_.running(RequestKind::kWrite) == 0);
    CHECK(I(client).requests_.routes(RequestKind::kWrite) == 0);
  }
};

// ---------------------------------------------------------------------------
// Defects.

TEST_CASE(
    "failover attack: kReplicateGivenUp answered with a delta fences too; a "
    "delayed copy of the request after cache eviction applies twice",
    "[regression]") {
  NodeOptions o;
  o.service.reply_cache_bytes = 1;
  Fx f(4, 3, o);
  const NodeId a = f.pl[0];
  f.WriteWhileCutOff(a, {UpdateOp::Add("x")}, /*lose_reply=*/true);
  REQUIRE(f.result->ok());
  // One retransmission of the request to A is delayed in the network.
  std::vector<Sent> delayed = f.Stash(And(To(a), OfType(MessageType::kUpdate)));
  REQUIRE(!delayed.empty());
  f.c.Unhold();
  f.c.Advance(100'000, 3);
  REQUIRE(Stat(f.ClientStats(), "write.late_coordinator_replies") == 1);
  for (NodeId n : f.pl) REQUIRE(f.DotsOn(n, "x").size() == 2);
  f.CheckClientIdle();
  // A coordinates the next write: its cache forgets x's reply.
  f.Write({UpdateOp::Add("y")});
  f.AdvanceUntilAnswered();
  f.c.Advance(100'000, 3);
  // The delayed copy arrives.
  f.c.queue().push_back(delayed.front());
  f.c.Advance(100'000, 3);
  CHECK(Stat(f.c.node(a).stats(), "service.updates_fenced") == 1);
  CHECK(f.DotsOn(a, "x").size() == 2);  // No third dot, on A alone.
  CHECK(f.DotsOn(f.pl[1], "x").size() == 2);
}

TEST_CASE(
    "failover attack: a late reply's extra delta never pushes the client's "
    "answer past timeout_micros",
    "[regression]") {
  Fx f;
  const NodeId a = f.pl[0];
  const NodeId cc = f.pl[2];
  f.Write({UpdateOp::Add("x")});
  REQUIRE(f.c.DeliverOne(And(To(a), OfType(MessageType::kUpdate))));
  f.c.Hold(Or(Or(To(a), From(a)), Or(To(cc), From(cc))));
  const uint64_t start = f.c.Now(f.client);
  // B coordinates; only B acknowledges (W = 2 not reached).
  for (int i = 0; i < 15; ++i) f.c.Advance(100'000);
  REQUIRE(!f.result.has_value());
  REQUIRE(Stat(f.ClientStats(), "write.coordinator_switches") == 1);
  // A's late reply at t = 1.5 s.
  REQUIRE(f.c.DeliverOne(And(From(a), OfType(MessageType::kUpdateReply))));
  REQUIRE(Stat(f.ClientStats(), "write.late_coordinator_replies") == 1);
  for (int i = 0; i < 7 && !f.result.has_value(); ++i) f.c.Advance(100'000);
  INFO("elapsed " << f.c.Now(f.client) - start << " us, timeout "
                  << f.wo.timeout_micros << " us");
  CHECK(f.result.has_value());
  for (int i = 0; i < 40 && !f.result.has_value(); ++i) f.c.Advance(100'000);
  REQUIRE(f.result.has_value());
  INFO("answered after " << f.c.Now(f.client) - start
                         << " us: " << f.result->status());
  CHECK(f.c.Now(f.client) - start <= f.wo.timeout_micros + f.wo.retry_micros);
}

TEST_CASE(
    "failover attack: a kReplicateAckWithDelta from the chosen coordinator, or "
    "carrying another set's delta, is replicated as an extra delta",
    "[regression]") {
  Fx f;
  const NodeId a = f.pl[0];
  const NodeId b = f.pl[1];
  f.Write({UpdateOp::Add("x")});
  f.c.Hold(To(a));
  f.AdvanceUntilAnswered();
  REQUIRE(f.result->ok());
  std::vector<Sent> given_up =
      f.Stash(And(To(a), OfType(MessageType::kReplicateGivenUp)));
  REQUIRE(!given_up.empty());
  const uint64_t id = RequestIdOf(given_up.front());
  SECTION("from the chosen coordinator") {
    // B was never sent kReplicateGivenUp: an AckWithDelta from it is not an
    // answer to anything.
    f.c.queue().push_back(
        Sent{b, f.client,
             EncodeMessage(id, f.partition,
                           msg::ReplicateAckWithDelta{.delta = **f.result})});
    REQUIRE(f.c.DeliverOne(To(f.client)));
    CHECK(Stat(f.ClientStats(), "write.late_coordinator_replies") == 0);
    CHECK(Stat(f.ClientStats(), "write.extra_dots") == 0);
  }
  SECTION("another set's delta") {
    std::string other;
    for (int i = 0;; ++i) {
      other = absl::StrCat("other", i);
      if (f.c.ring().PartitionOf(other) == f.partition) break;
    }
    msg::ReplicateAckWithDelta m;
    m.delta.set = other;
    DeltaOp op;
    op.element = "ghost";
    op.add = Dot{12345, 1};
    m.delta.ops.push_back(op);
    f.c.queue().push_back(Sent{a, f.client, EncodeMessage(id, f.partition, m)});
    REQUIRE(f.c.DeliverOne(To(f.client)));
    f.c.Unhold();
    f.c.Drop(To(a));
    f.c.Advance(100'000, 3);
    CHECK(Stat(f.ClientStats(), "write.late_coordinator_replies") == 0);
    CHECK(f.DotsOn(b, "ghost", &other).empty());
  }
}

// ---------------------------------------------------------------------------
// Attacks that found nothing (kept as regression tests).

TEST_CASE(
    "failover attack: duplicated and reordered answers, duplicated extra "
    "acks, acks after the end") {
  Fx f;
  const NodeId a = f.pl[0];
  f.WriteWhileCutOff(a, {UpdateOp::Add("x")});
  REQUIRE(f.result->ok());
  f.c.Drop(And(To(a), OfType(MessageType::kUpdate)));
  // A gets the chosen delta: answers with its own (held).
  REQUIRE(f.c.DeliverOne(And(To(a), OfType(MessageType::kReplicateGivenUp))));
  // Queued (held): A's late reply and its AckWithDelta. Every message is
  // duplicated from now on.
  f.DuplicateQueue();
  f.c.Unhold();
  for (int i = 0; i < 5; ++i) {
    f.DuplicateQueue();
    f.c.Advance(100'000);
  }
  f.CheckLateReplyReplicated("x");
  f.CheckClientIdle();
}

TEST_CASE("failover attack: late kUpdateReply after the AckWithDelta") {
  Fx f;
  const NodeId a = f.pl[0];
  f.WriteWhileCutOff(a, {UpdateOp::Add("x")});
  f.GivenUpAnswers(a);
  REQUIRE(Stat(f.ClientStats(), "write.late_coordinator_replies") == 1);
  // Extra delta fully acked before the late reply comes.
  REQUIRE(f.c.DeliverAll(Not(Or(To(a), From(a)))) > 0);
  REQUIRE(f.c.DeliverOne(And(From(a), OfType(MessageType::kUpdateReply))));
  f.c.Unhold();
  f.c.Advance(100'000, 3);
  f.CheckLateReplyReplicated("x");
  f.CheckClientIdle();
}

TEST_CASE(
    "failover attack: crafted AckWithDelta from a never-asked or non-list "
    "node, garbage and truncated types 15 and 16") {
  Fx f(5, 3);
  const NodeId a = f.pl[0];
  const NodeId cc = f.pl[2];  // Never asked: B coordinates.
  NodeId outsider = 0;
  for (NodeId n = 1; n <= 5; ++n) {
    if (n != f.client && std::find(f.pl.begin(), f.pl.end(), n) == f.pl.end()) {
      outsider = n;
    }
  }
  REQUIRE(outsider != 0);
  f.Write({UpdateOp::Add("x")});
  f.c.Hold(To(a));
  f.AdvanceUntilAnswered();
  REQUIRE(f.result->ok());
  std::vector<Sent> given_up =
      f.Stash(And(To(a), OfType(MessageType::kReplicateGivenUp)));
  const uint64_t id = RequestIdOf(given_up.front());
  f.c.Drop(To(a));  // A never gets anything of this write.
  msg::ReplicateAckWithDelta m;
  m.delta.set = f.set;
  DeltaOp op;
  op.element = "ghost";
  op.add = Dot{777, 1};
  m.delta.ops.push_back(op);
  for (NodeId from : {cc, outsider, f.client}) {
    f.c.queue().push_back(
        Sent{from, f.client, EncodeMessage(id, f.partition, m)});
  }
  // Plain acks of the write from outsiders.
  std::string ack;
  EncodeStatusReply(MessageHeader{MessageType::kReplicateAck, id, f.partition},
                    absl::OkStatus(), outsider, msg::PlaceTaken(), &ack);
  f.c.queue().push_back(Sent{outsider, f.client, ack});
  // Garbage bodies with valid checksums, and truncated messages.
  testing::Rng rng(42);
  for (int i = 0; i < 200; ++i) {
    for (MessageType t : {MessageType::kReplicateGivenUp,
                          MessageType::kReplicateAckWithDelta}) {
      std::string bytes;
      EncodeHeader(MessageHeader{t, i % 2 ? id : rng(), f.partition}, &bytes);
      bytes += testing::AdversarialBytes(rng, 64);
      FinishMessage(0, &bytes);
      for (NodeId to : {a, f.client}) {
        f.c.queue().push_back(Sent{cc, to, bytes});
      }
      std::string g =
          t == MessageType::kReplicateGivenUp
              ? EncodeMessage(id, f.partition,
                              msg::ReplicateGivenUp{.delta = **f.result})
              : EncodeMessage(id, f.partition,
                              msg::ReplicateAckWithDelta{.delta = **f.result});
      g.resize(testing::Uniform(rng, 0, g.size() - 1));
      f.c.queue().push_back(Sent{a, f.client, g});
    }
  }
  f.c.Unhold();
  f.c.Drop(To(a));
  f.c.Advance(100'000, 5);
  CHECK(Stat(f.ClientStats(), "write.late_coordinator_replies") == 0);
  CHECK(Stat(f.ClientStats(), "node.malformed_messages") > 0);
  for (NodeId n : f.pl) CHECK(f.DotsOn(n, "ghost").empty());
  for (int i = 0; i < 30; ++i) f.c.Advance(100'000);
  CHECK(f.calls == 1);
  f.CheckClientIdle();
}

TEST_CASE("failover attack: the write cycles back to the first candidate") {
  Fx f;
  const NodeId a = f.pl[0];
  f.Write({UpdateOp::Add("x")});
  // Every candidate applies the update, every reply is lost, until the
  // write is back at A.
  f.c.Hold(OfType(MessageType::kUpdateReply));
  for (int i = 0;
       i < 30 && Stat(f.ClientStats(), "write.coordinator_switches") < 3; ++i) {
    f.c.Advance(100'000);
  }
  REQUIRE(Stat(f.ClientStats(), "write.coordinator_switches") == 3);
  REQUIRE(!f.result.has_value());
  for (NodeId n : f.pl) REQUIRE(f.DotsOn(n, "x").size() == 1);
  REQUIRE(f.c.DeliverOne(And(From(a), OfType(MessageType::kUpdateReply))));
  f.c.Drop(OfType(MessageType::kUpdateReply));
  f.c.Unhold();
  f.AdvanceUntilAnswered();
  REQUIRE(f.result->ok());
  f.c.Advance(100'000, 3);
  CHECK(Stat(f.ClientStats(), "write.late_coordinator_replies") == 2);
  CHECK(Stat(f.ClientStats(), "write.extra_dots") == 2);
  f.CheckDotsOnAll("x", 3);
  CHECK(f.calls == 1);
  f.CheckClientIdle();
}

TEST_CASE("failover attack: N = 5, two given-up candidates applied the write") {
  Fx f(6, 5, {}, 8);
  f.wo.w = 3;
  const NodeId a = f.pl[0];
  const NodeId b = f.pl[1];
  f.Write({UpdateOp::Add("x")});
  f.c.Hold(And(OfType(MessageType::kUpdateReply), Or(From(a), From(b))));
  f.AdvanceUntilAnswered();
  REQUIRE(f.result->ok());
  CHECK(Stat(f.ClientStats(), "write.coordinator_switches") == 2);
  f.c.Drop(And(OfType(MessageType::kUpdateReply), Or(From(a), From(b))));
  f.c.Unhold();
  f.c.Advance(100'000, 3);
  CHECK(Stat(f.ClientStats(), "write.late_coordinator_replies") == 2);
  f.CheckDotsOnAll("x", 3);
  CHECK(f.calls == 1);
  f.CheckClientIdle();
}

TEST_CASE("failover attack: failover off, duplicated late answers") {
  Fx f;
  const NodeId a = f.pl[0];
  f.wo.failover = false;
  f.Write({UpdateOp::Add("x")});
  REQUIRE(f.c.DeliverOne(And(To(a), OfType(MessageType::kUpdate))));
  f.c.Hold(From(a));
  f.AdvanceUntilAnswered();
  CHECK(f.result->status().code() == absl::StatusCode::kUnavailable);
  f.DuplicateQueue();
  f.c.Unhold();
  f.c.Advance(100'000, 3);
  CHECK(f.calls == 1);
  f.CheckDotsOnAll("x", 1);
  CHECK(Stat(f.ClientStats(), "write.coordinator_switches") == 0);
  f.CheckClientIdle();
}

TEST_CASE("failover attack: a clear through failover") {
  Fx f;
  const NodeId a = f.pl[0];
  f.Write({UpdateOp::Add("x"), UpdateOp::Add("y")});
  f.AdvanceUntilAnswered();
  f.c.Advance(100'000, 3);
  Clock clock;
  testing::ReadAll(*f.c.node(f.pl[1]).LocalReplica(f.partition), f.set, 1000,
                   &clock);
  REQUIRE(!clock.empty());
  f.result.reset();
  f.calls = 0;
  f.c.node(f.client).Clear(f.set, clock, f.wo, [&f](absl::StatusOr<Delta> d) {
    ++f.calls;
    f.result = d;
  });
  REQUIRE(f.c.DeliverOne(And(To(a), OfType(MessageType::kClear))));
  REQUIRE(f.c.Drop(From(a)) == 1);
  f.c.Hold(Or(To(a), From(a)));
  f.AdvanceUntilAnswered();
  REQUIRE(f.result->ok());
  f.c.Drop(And(To(a), OfType(MessageType::kClear)));
  f.c.Unhold();
  f.c.Advance(100'000, 3);
  CHECK(Stat(f.ClientStats(), "write.late_coordinator_replies") == 1);
  CHECK(Stat(f.ClientStats(), "write.extra_dots") == 0);
  for (NodeId n : f.pl) {
    CHECK(f.DotsOn(n, "x").empty());
    CHECK(f.DotsOn(n, "y").empty());
  }
  CHECK(f.calls == 1);
  f.CheckClientIdle();
}

TEST_CASE("failover attack: the coordinating node restarts mid-failover") {
  Fx f;
  const NodeId a = f.pl[0];
  f.WriteWhileCutOff(a, {UpdateOp::Add("x")});
  f.GivenUpAnswers(a);
  // The extra delta is on its way; the coordinating node crashes.
  f.c.Restart(f.client, f.c.Now(f.client));
  f.c.Unhold();
  for (int i = 0; i < 30; ++i) f.c.Advance(100'000);
  f.CheckClientIdle();
  CHECK(f.calls == 1);
  // The extra delta's first copies went out before the crash.
  f.CheckDotsOnAll("x", 2);
  f.Write({UpdateOp::Add("z")});
  f.AdvanceUntilAnswered();
  CHECK(f.result->ok());
}

TEST_CASE("failover attack: the given-up replica restarts after its answer") {
  Fx f;
  const NodeId a = f.pl[0];
  f.WriteWhileCutOff(a, {UpdateOp::Add("x")});
  f.c.Drop(And(To(a), OfType(MessageType::kUpdate)));
  REQUIRE(f.c.DeliverOne(And(To(a), OfType(MessageType::kReplicateGivenUp))));
  f.c.Restart(a, f.c.Now(a));
  f.c.Unhold();
  f.c.Advance(100'000, 3);
  CHECK(Stat(f.ClientStats(), "write.late_coordinator_replies") == 1);
  f.CheckDotsOnAll("x", 2);
  f.CheckClientIdle();
}

TEST_CASE(
    "failover attack: an extra delta a replica never acks ends at the "
    "extended deadline, and nothing is left behind") {
  Fx f;
  const NodeId a = f.pl[0];
  const NodeId cc = f.pl[2];
  f.WriteWhileCutOff(a, {UpdateOp::Add("x")});
  REQUIRE(f.result->ok());
  // From now on C's acks are lost (A stays unreachable: the write lives).
  f.c.Hold(Or(Or(To(a), From(a)), And(From(cc), To(f.client))));
  while (f.c.Now(f.client) < 1'500'000) f.c.Advance(100'000);
  REQUIRE(f.I(f.client).requests_.running(RequestKind::kWrite) == 1);
  REQUIRE(f.c.DeliverOne(And(From(a), OfType(MessageType::kUpdateReply))));
  f.c.Hold(And(From(cc), To(f.client)));
  // The extra delta gets one timeout; C never acks it.
  for (int i = 0; i < 25; ++i) f.c.Advance(100'000);
  f.c.Drop(From(cc));
  f.CheckClientIdle();
  CHECK(Stat(f.ClientStats(), "write.failovers_unsettled") ==
        0);  // A and B acked: W reached.
  CHECK(f.calls == 1);
  f.CheckDotsOnAll("x", 2);
}

TEST_CASE(
    "failover attack: a client callback that starts the next failover write") {
  Fx f;
  const NodeId a = f.pl[0];
  int answered = 0;
  std::function<void(absl::StatusOr<Delta>)> next;
  next = [&](absl::StatusOr<Delta> d) {
    REQUIRE(d.ok());
    if (++answered < 4) {
      f.c.node(f.client).Update(
          f.set, {UpdateOp::Add(absl::StrCat("r", answered))}, f.wo, next);
    }
  };
  f.c.node(f.client).Update(f.set, {UpdateOp::Add("r0")}, f.wo, next);
  // A applies every request and answers late.
  f.c.Hold(From(a));
  for (int i = 0; i < 40 && answered < 4; ++i) f.c.Advance(100'000);
  REQUIRE(answered == 4);
  f.c.Unhold();
  for (int i = 0; i < 30; ++i) f.c.Advance(100'000);
  CHECK(answered == 4);
  CHECK(Stat(f.ClientStats(), "write.late_coordinator_replies") == 4);
  for (int r = 0; r < 4; ++r) {
    for (NodeId n : f.pl) CHECK(f.DotsOn(n, absl::StrCat("r", r)).size() == 2);
  }
  f.CheckClientIdle();
}

TEST_CASE("failover attack: many failover writes leave no routes or writes") {
  Fx f;
  const NodeId a = f.pl[0];
  for (int w = 0; w < 40; ++w) {
    const std::string e = absl::StrCat("e", w);
    f.Write({UpdateOp::Add(e)});
    if (w % 2 == 0) {
      REQUIRE(f.c.DeliverOne(And(To(a), OfType(MessageType::kUpdate))));
    }
    f.c.Hold(Or(To(a), From(a)));
    f.AdvanceUntilAnswered();
    REQUIRE(f.result->ok());
    f.c.Drop(And(To(a), OfType(MessageType::kUpdate)));
    f.c.Unhold();
    f.c.Advance(100'000, 3);
    for (NodeId n : f.pl) {
      INFO("write " << w << " node " << n);
      REQUIRE(f.DotsOn(n, e).size() == (w % 2 == 0 ? 2u : 1u));
    }
  }
  f.CheckClientIdle();
  CHECK(f.I(f.client).requests_.idle_writes() <= 16);
  // Every kReplicateGivenUp fences its request, answered with a delta or
  // not.
  CHECK(f.I(a).service_.fenced_.size() == 40);
  CHECK(f.I(a).service_.fence_order_.size() == 40);
}

}  // namespace
}  // namespace bigset::testing
