// Failover adds: a write that gives up on a silent coordinating replica and
// has the next one coordinate it must leave no dot that only one replica
// knows. Each case drives a ManualCluster through one exact order of events
// around a coordinator switch: a given-up replica that applied the write and
// answers late, or acknowledges the chosen delta with its own, or gets its
// request only after the write moved on; failover refused; a remove through
// failover; a given-up replica silent past the deadline.

#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bigset/cluster/node.h"
#include "failover_fixture.h"
#include "manual_cluster.h"
#include "net/message.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

constexpr NodeId kClient = 4;  // Holds no replica of the test's set.

using Fixture = testing::FailoverFixture;

TEST_CASE("failover: a given-up coordinator's late reply is replicated") {
  Fixture f;
  const NodeId a = f.pl[0];
  f.Write({UpdateOp::Add("x")});
  // A applies the add; its reply, and everything else to or from it, is
  // held on a slow link while the write switches to the next replica.
  REQUIRE(f.c.DeliverOne(And(To(a), OfType(MessageType::kUpdate))));
  REQUIRE(f.DotsOn(a, "x").size() == 1);
  f.c.Hold(Or(To(a), From(a)));
  f.AdvanceUntilAnswered();
  REQUIRE(f.result->ok());
  CHECK(Stat(f.ClientStats(), "write.coordinator_switches") == 1);
  const Dot chosen = *(*f.result)->ops.at(0).add;
  // The late reply arrives: A's dot goes to the others.
  REQUIRE(f.c.DeliverOne(And(From(a), OfType(MessageType::kUpdateReply))));
  f.c.Unhold();
  f.c.Advance(100'000, 3);
  f.CheckLateReplyReplicated("x");
  // An R = 2 read through any node sees both dots, one of them the
  // acknowledged one; a remove with that context removes x everywhere.
  std::vector<Dot> seen;
  for (NodeId via : {NodeId{1}, NodeId{2}, NodeId{3}, NodeId{4}}) {
    seen = f.QuorumDots(via, "x");
    REQUIRE(seen.size() == 2);
    CHECK(std::find(seen.begin(), seen.end(), chosen) != seen.end());
  }
  f.Write({UpdateOp::Remove("x", seen)});
  f.AdvanceUntilAnswered();
  REQUIRE(f.result->ok());
  f.c.Advance(100'000, 3);
  for (NodeId n : f.pl) CHECK(f.DotsOn(n, "x").empty());
  CHECK(f.QuorumDots(kClient, "x", 3).empty());
}

TEST_CASE(
    "failover: a given-up coordinator whose reply was lost hands its delta "
    "over with its acknowledgement") {
  Fixture f;
  const NodeId a = f.pl[0];
  // A's reply is lost, and A is unreachable until the write switched and
  // was acknowledged.
  f.WriteWhileCutOff(a, {UpdateOp::Add("x")}, /*lose_reply=*/true);
  REQUIRE(f.result->ok());
  f.c.Drop(Or(To(a), From(a)));  // Retransmissions of the update to A.
  f.c.Unhold();
  // The write retransmits its delta to A as kReplicateGivenUp; A answers
  // with its own delta, which the write replicates.
  f.c.Advance(100'000, 3);
  f.CheckLateReplyReplicated("x");
}

TEST_CASE(
    "failover: a request that reaches a given-up replica after the chosen "
    "delta is refused") {
  Fixture f;
  const NodeId a = f.pl[0];
  f.Write({UpdateOp::Add("x")});
  // Every update request to A is delayed past the switch.
  f.c.Hold(To(a));
  f.AdvanceUntilAnswered();
  REQUIRE(f.result->ok());
  // The chosen delta overtakes them; then they arrive.
  REQUIRE(f.c.DeliverOne(And(To(a), OfType(MessageType::kReplicateGivenUp))));
  REQUIRE(f.c.DeliverAll(And(To(a), OfType(MessageType::kUpdate))) >= 1);
  CHECK(Stat(f.c.node(a).stats(), "service.updates_fenced") >= 1);
  f.c.Unhold();
  f.c.Advance(100'000, 3);
  CHECK(Stat(f.ClientStats(), "write.late_coordinator_replies") == 0);
  f.CheckDotsOnAll("x", 1);
}

TEST_CASE("failover: refused, the write fails instead of switching") {
  Fixture f;
  const NodeId a = f.pl[0];
  f.wo.failover = false;
  f.Write({UpdateOp::Add("x")});
  f.c.Hold(To(a));
  f.AdvanceUntilAnswered();
  CHECK(f.result->status().code() == absl::StatusCode::kUnavailable);
  NodeStats st = f.ClientStats();
  CHECK(Stat(st, "write.coordinator_switches") == 0);
  CHECK(Stat(st, "write.failovers_refused") == 1);
  for (NodeId n : f.pl) CHECK(f.DotsOn(n, "x").empty());
  // A gets the request after all and applies it: the write, still waiting
  // for a late answer, replicates it, so no dot stays on A alone.
  f.c.Unhold();
  f.c.Advance(100'000, 3);
  f.CheckDotsOnAll("x", 1);
}

TEST_CASE("failover: a remove through failover is idempotent") {
  Fixture f;
  const NodeId a = f.pl[0];
  f.Write({UpdateOp::Add("x"), UpdateOp::Add("y")});
  f.AdvanceUntilAnswered();
  REQUIRE(f.result->ok());
  f.c.Advance(100'000, 3);
  const std::vector<Dot> ctx = f.QuorumDots(kClient, "x");
  REQUIRE(ctx.size() == 1);
  f.WriteWhileCutOff(a, {UpdateOp::Remove("x", ctx)});
  REQUIRE(f.result->ok());
  f.c.Unhold();
  f.c.Advance(100'000, 3);
  // A removed x too, and its late delta was replicated: x is gone
  // everywhere, y untouched, and no add dot was created.
  CHECK(Stat(f.ClientStats(), "write.late_coordinator_replies") == 1);
  CHECK(Stat(f.ClientStats(), "write.extra_dots") == 0);
  for (NodeId n : f.pl) {
    INFO("node " << n);
    CHECK(f.DotsOn(n, "x").empty());
    CHECK(f.DotsOn(n, "y").size() == 1);
  }
}

TEST_CASE("failover: an extra delta the chosen coordinator missed gets a hint",
          "[regression]") {
  // Hints for extra deltas skipped every replica the write had asked to
  // coordinate, the chosen coordinator included, although it gets the extra
  // as a plain kReplicate under the extra's own id: with every copy of the
  // extra to it lost until the deadline and no digest rounds, it kept one
  // dot of x where the others had two.
  NodeOptions o;
  o.anti_entropy.interval_micros = 0;  // Only a hint can bring the extra.
  Fixture f(4, 3, o);
  const NodeId a = f.pl[0];
  const NodeId b = f.pl[1];
  f.WriteWhileCutOff(a, {UpdateOp::Add("x")});
  REQUIRE(f.result->ok());
  REQUIRE(Stat(f.ClientStats(), "write.coordinator_switches") == 1);
  REQUIRE(f.DotsOn(b, "x").size() == 1);  // B coordinated the write.
  // A's late reply: its dot becomes an extra delta, for B and C.
  REQUIRE(f.c.DeliverOne(And(From(a), OfType(MessageType::kUpdateReply))));
  f.c.Unhold();
  // Every copy of the extra to B is lost until well past the deadline
  // (extended by one timeout for the extra).
  const auto extra_to_b =
      And(And(From(f.client), To(b)), OfType(MessageType::kReplicate));
  f.c.Hold(extra_to_b);
  for (int i = 0; i < 50; ++i) {
    f.c.Drop(extra_to_b);
    f.c.Advance(100'000);
  }
  f.c.Drop(extra_to_b);
  REQUIRE(f.DotsOn(b, "x").size() == 1);
  CHECK(Stat(f.ClientStats(), "anti_entropy.hints") == 1);
  f.c.Unhold();
  for (int i = 0; i < 30; ++i) f.c.Advance(100'000);
  f.CheckDotsOnAll("x", 2);
  CHECK(Stat(f.ClientStats(), "anti_entropy.hints") == 0);  // Acknowledged.
}

TEST_CASE("failover: a given-up replica silent past the deadline is counted") {
  Fixture f;
  const NodeId a = f.pl[0];
  f.WriteWhileCutOff(a, {UpdateOp::Add("x")});
  REQUIRE(f.result->ok());
  CHECK(Stat(f.ClientStats(), "write.failovers_unsettled") == 0);
  for (int i = 0; i < 30; ++i) f.c.Advance(100'000);
  CHECK(Stat(f.ClientStats(), "write.failovers_unsettled") == 1);
  // Its dot stays on A alone until a read that includes A repairs it.
  CHECK(f.DotsOn(a, "x").size() == 1);
  f.c.Unhold();
  f.c.Drop(Or(To(a), From(a)));
  ClusterReadOptions all;
  all.r = 3;
  std::optional<absl::StatusOr<Membership>> got;
  f.c.node(kClient).ContainsAll(
      f.set, {"x"}, all, [&got](absl::StatusOr<Membership> m) { got = m; });
  f.c.Advance(100'000, 5);
  REQUIRE(got.has_value());
  REQUIRE(got->ok());
  CHECK((*got)->elements.at(0).dots.size() == 2);
  f.c.Advance(100'000, 3);
  f.CheckDotsOnAll("x", 2);
}

}  // namespace
}  // namespace bigset::testing
