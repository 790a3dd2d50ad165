#include "failover_fixture.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "net/message.h"
#include "test_util.h"

namespace bigset::testing {

FailoverFixture::FailoverFixture(int nodes, int n, NodeOptions options,
                                 uint32_t ring_size)
    : c(nodes, n, ring_size, std::move(options)),
      client(static_cast<NodeId>(nodes)) {
  for (int i = 0;; ++i) {
    set = absl::StrCat("s", i);
    partition = c.ring().PartitionOf(set);
    pl = c.ring().PreferenceList(partition);
    if (std::find(pl.begin(), pl.end(), client) == pl.end()) break;
    REQUIRE(i < 10000);
  }
  wo.w = 2;
  wo.retry_micros = 100'000;
  wo.timeout_micros = 2'000'000;
}

uint64_t FailoverFixture::QueuedWriteId() {
  uint64_t id = 0;
  for (const ManualCluster::Sent& s : c.queue()) {
    if (s.type() != MessageType::kReplicate) continue;
    MessageHeader h;
    std::string_view body;
    REQUIRE(ParseHeader(s.bytes, &h, &body).ok());
    id = h.request_id;
  }
  return id;
}

void FailoverFixture::Write(std::vector<UpdateOp> ops) {
  result.reset();
  calls = 0;
  c.node(client).Update(set, std::move(ops), wo,
                        [this](absl::StatusOr<Delta> d) {
                          ++calls;
                          result = d;
                        });
}

void FailoverFixture::WriteWhileCutOff(NodeId a, std::vector<UpdateOp> ops,
                                       bool lose_reply) {
  Write(std::move(ops));
  REQUIRE(c.DeliverOne(And(To(a), OfType(MessageType::kUpdate))));
  if (lose_reply) REQUIRE(c.Drop(From(a)) == 1);
  c.Hold(Or(To(a), From(a)));
  AdvanceUntilAnswered();
}

void FailoverFixture::CheckDotsOnAll(const std::string& element, size_t count) {
  for (NodeId n : pl) {
    INFO("node " << n);
    CHECK(DotsOn(n, element).size() == count);
  }
}

void FailoverFixture::CheckLateReplyReplicated(const std::string& element) {
  const NodeStats st = ClientStats();
  CHECK(Stat(st, "write.late_coordinator_replies") == 1);
  CHECK(Stat(st, "write.extra_dots") == 1);
  CHECK(calls == 1);
  CheckDotsOnAll(element, 2);
}

void FailoverFixture::GivenUpAnswers(NodeId a) {
  c.Drop(And(To(a), OfType(MessageType::kUpdate)));
  REQUIRE(c.DeliverOne(And(To(a), OfType(MessageType::kReplicateGivenUp))));
  REQUIRE(
      c.DeliverOne(And(From(a), OfType(MessageType::kReplicateAckWithDelta))));
}

void FailoverFixture::AdvanceUntilAnswered(int max_steps) {
  for (int i = 0; i < max_steps && !result.has_value(); ++i) {
    c.Advance(100'000);
  }
  REQUIRE(result.has_value());
}

std::vector<Dot> FailoverFixture::DotsOn(NodeId node,
                                         const std::string& element,
                                         const std::string* other_set) {
  auto dots = c.node(node).LocalReplica(partition)->Contains(
      other_set != nullptr ? *other_set : set, element);
  REQUIRE(dots.ok());
  return *dots;
}

std::vector<Dot> FailoverFixture::QuorumDots(NodeId via,
                                             const std::string& element,
                                             int r) {
  ClusterReadOptions ro;
  ro.r = r;
  ro.read_repair = false;
  std::optional<absl::StatusOr<Membership>> got;
  c.node(via).ContainsAll(set, {element}, ro,
                          [&got](absl::StatusOr<Membership> m) { got = m; });
  for (int i = 0; i < 40 && !got.has_value(); ++i) c.Advance(100'000);
  REQUIRE(got.has_value());
  REQUIRE(got->ok());
  return (*got)->elements.at(0).dots;
}

}  // namespace bigset::testing
