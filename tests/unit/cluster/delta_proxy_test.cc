// DeltaProxy alone: which deltas a node that handed a partition over passes
// on, under which ids, and which answers it owes their coordinators.

#include "cluster/delta_proxy.h"

#include <catch2/catch.hpp>
#include <functional>
#include <optional>
#include <string>

#include "test_util.h"

namespace bigset::testing {
namespace {

constexpr NodeId kSelf = 1;
constexpr NodeId kCoordinator = 5;
constexpr NodeId kOwner = 7;  // Where partition 3 went.
constexpr uint32_t kMoved = 3;

Delta SomeDelta(std::string_view set) {
  Delta d;
  d.set = std::string(set);
  d.ops.push_back(DeltaOp{.element = "e", .context = {}, .add = Dot{9, 1}});
  return d;
}

struct Proxy {
  Proxy() : ids(kSelf, mem.store.get(), &source) {
    REQUIRE(ids.Open().ok());
    proxy.MovedTo(kMoved, kOwner);
  }
  MemStore mem;
  const std::function<uint64_t()> source = [] { return uint64_t{1} << 40; };
  RequestIds ids;
  DeltaProxy proxy{kSelf, &ids};
};

Message Decode(const std::string& bytes) {
  absl::StatusOr<Message> m = DecodeMessage(bytes);
  REQUIRE(m.ok());
  return std::move(*m);
}

TEST_CASE(
    "delta proxy: a replicated delta goes to the new owner under an id of "
    "its own; its coordinator is answered once, when the new owner applied "
    "it",
    "[delta_proxy]") {
  Proxy p;
  const Delta delta = SomeDelta("s");
  const MessageHeader header{MessageType::kReplicate, 42, kMoved};
  std::optional<DeltaProxy::Outgoing> sent =
      p.proxy.PassOn(kCoordinator, header, delta, nullptr, /*now=*/100);
  REQUIRE(sent.has_value());
  CHECK(sent->to == kOwner);
  CHECK(p.proxy.awaiting());
  const Message m = Decode(sent->bytes);
  REQUIRE(m.type() == MessageType::kHandoffDelta);
  CHECK(m.header.partition == kMoved);
  CHECK(m.header.request_id != 42);
  CHECK(m.As<msg::HandoffDelta>()->delta == delta);
  const uint64_t id = m.header.request_id;

  std::optional<DeltaProxy::Outgoing> answer;
  // Not an id it passed a delta on under: not its business.
  CHECK_FALSE(
      p.proxy.OnAck(kOwner, id + 1, absl::OkStatus(), kOwner, {}, &answer));
  CHECK_FALSE(answer.has_value());
  // From a node the partition did not go to: taken, not answered.
  CHECK(p.proxy.OnAck(8, id, absl::OkStatus(), 8, {}, &answer));
  CHECK_FALSE(answer.has_value());
  CHECK(p.proxy.awaiting());
  // From the new owner: the coordinator's answer, counting the new owner
  // in the place it took (this node's).
  const msg::PlaceTaken taken{.from = 5, .since = 12};
  CHECK(p.proxy.OnAck(kOwner, id, absl::OkStatus(), kOwner, taken, &answer));
  REQUIRE(answer.has_value());
  CHECK(answer->to == kCoordinator);
  const Message reply = Decode(answer->bytes);
  REQUIRE(reply.type() == MessageType::kReplicateAck);
  CHECK(reply.header.request_id == 42);
  CHECK(reply.header.partition == kMoved);
  CHECK(reply.As<msg::ReplicateAck>()->status.ok());
  CHECK(reply.As<msg::ReplicateAck>()->applied_by == kOwner);
  CHECK(reply.As<msg::ReplicateAck>()->taken == taken);
  CHECK_FALSE(p.proxy.awaiting());
  // Answered once.
  CHECK_FALSE(p.proxy.OnAck(kOwner, id, absl::OkStatus(), kOwner, {}, &answer));
}

TEST_CASE(
    "delta proxy: each kind of delta, whether it goes on and how its "
    "answer looks",
    "[delta_proxy]") {
  struct Row {
    std::string_view what;
    MessageType type;
    NodeId from;
    uint32_t partition;
    bool own;
    absl::Status status;
    bool passed_on;
    // The answer's type (kRingEpoch: no answer is owed).
    MessageType answer;
  };
  const Row table[] = {
      {"replicate", MessageType::kReplicate, kCoordinator, kMoved, false,
       absl::OkStatus(), true, MessageType::kReplicateAck},
      {"replicate that failed there", MessageType::kReplicate, kCoordinator,
       kMoved, false, absl::UnavailableError("disk"), true,
       MessageType::kReplicateAck},
      {"given up, coordinated here", MessageType::kReplicateGivenUp,
       kCoordinator, kMoved, true, absl::OkStatus(), true,
       MessageType::kReplicateAckWithDelta},
      {"given up, coordinated here, failed there",
       MessageType::kReplicateGivenUp, kCoordinator, kMoved, true,
       absl::UnavailableError("disk"), true, MessageType::kReplicateAck},
      {"given up, not coordinated here", MessageType::kReplicateGivenUp,
       kCoordinator, kMoved, false, absl::OkStatus(), true,
       MessageType::kReplicateAck},
      {"forward from a third node", MessageType::kHandoffDelta, 8, kMoved,
       false, absl::OkStatus(), true, MessageType::kHandoffDeltaAck},
      {"forward from the new owner (it would go back)",
       MessageType::kHandoffDelta, kOwner, kMoved, false, absl::OkStatus(),
       false, MessageType::kRingEpoch},
      {"replicate from the new owner itself", MessageType::kReplicate, kOwner,
       kMoved, false, absl::OkStatus(), true, MessageType::kReplicateAck},
      {"repair", MessageType::kRepair, kCoordinator, kMoved, false,
       absl::OkStatus(), true, MessageType::kRingEpoch},
      {"a partition that did not move", MessageType::kReplicate, kCoordinator,
       kMoved + 1, false, absl::OkStatus(), false, MessageType::kRingEpoch},
  };
  for (const Row& row : table) {
    INFO(row.what);
    Proxy p;
    const Delta delta = SomeDelta("s");
    const Delta own = SomeDelta("own");
    const MessageHeader header{row.type, 42, row.partition};
    std::optional<DeltaProxy::Outgoing> sent = p.proxy.PassOn(
        row.from, header, delta, row.own ? &own : nullptr, /*now=*/100);
    REQUIRE(sent.has_value() == row.passed_on);
    if (!sent.has_value()) {
      CHECK_FALSE(p.proxy.awaiting());
      continue;
    }
    CHECK(sent->to == kOwner);
    const Message m = Decode(sent->bytes);
    if (row.type == MessageType::kRepair) {
      // As it came, and nobody awaits an answer.
      CHECK(m.type() == MessageType::kRepair);
      CHECK(m.header.request_id == 42);
      CHECK(m.As<msg::Repair>()->delta == delta);
      CHECK_FALSE(p.proxy.awaiting());
      continue;
    }
    REQUIRE(m.type() == MessageType::kHandoffDelta);
    std::optional<DeltaProxy::Outgoing> answer;
    REQUIRE(p.proxy.OnAck(kOwner, m.header.request_id, row.status, kOwner, {},
                          &answer));
    REQUIRE(answer.has_value());
    CHECK(answer->to == row.from);
    const Message reply = Decode(answer->bytes);
    CHECK(reply.type() == row.answer);
    CHECK(reply.header.request_id == 42);
    if (row.answer == MessageType::kReplicateAckWithDelta) {
      CHECK(reply.As<msg::ReplicateAckWithDelta>()->delta == own);
    } else if (row.answer == MessageType::kReplicateAck) {
      CHECK(reply.As<msg::ReplicateAck>()->status == row.status);
    } else {
      CHECK(reply.As<msg::HandoffDeltaAck>()->status == row.status);
    }
  }
}

TEST_CASE(
    "delta proxy: what waits too long, or was passed on in the future, is "
    "dropped; a partition forgotten is no longer passed on",
    "[delta_proxy]") {
  Proxy p;
  const Delta delta = SomeDelta("s");
  auto pass = [&](uint64_t now) {
    std::optional<DeltaProxy::Outgoing> sent = p.proxy.PassOn(
        kCoordinator, MessageHeader{MessageType::kReplicate, 42, kMoved}, delta,
        nullptr, now);
    REQUIRE(sent.has_value());
    return Decode(sent->bytes).header.request_id;
  };
  const uint64_t old = pass(1000);
  const uint64_t recent = pass(5000);
  const uint64_t future = pass(90'000);
  p.proxy.Expire(/*now=*/6000, /*max_age=*/5000);
  std::optional<DeltaProxy::Outgoing> answer;
  CHECK_FALSE(
      p.proxy.OnAck(kOwner, old, absl::OkStatus(), kOwner, {}, &answer));
  CHECK_FALSE(
      p.proxy.OnAck(kOwner, future, absl::OkStatus(), kOwner, {}, &answer));
  CHECK(p.proxy.OnAck(kOwner, recent, absl::OkStatus(), kOwner, {}, &answer));
  CHECK(answer.has_value());

  CHECK(p.proxy.PassesOnTo(kMoved) == kOwner);
  p.proxy.ForgetWhere([](uint32_t partition) { return partition == kMoved; });
  CHECK(p.proxy.PassesOnTo(kMoved) == 0);
  CHECK_FALSE(p.proxy
                  .PassOn(kCoordinator,
                          MessageHeader{MessageType::kReplicate, 43, kMoved},
                          delta, nullptr, 7000)
                  .has_value());
  p.proxy.MovedTo(kMoved, kSelf);  // Back to this node: not passed on.
  CHECK_FALSE(p.proxy
                  .PassOn(kCoordinator,
                          MessageHeader{MessageType::kReplicate, 44, kMoved},
                          delta, nullptr, 7000)
                  .has_value());
  p.proxy.MovedTo(kMoved, kOwner);
  p.proxy.Forget(kMoved);
  CHECK(p.proxy.PassesOnTo(kMoved) == 0);
}

}  // namespace
}  // namespace bigset::testing
