// WriteCoordinator (lib/cluster/write_coordinator.h) driven alone: a fake
// host records what it sends and runs its timers on a virtual clock; the
// test plays the replicas. No node, no simulator, no store.

#include "cluster/write_coordinator.h"

#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cluster/request_registry.h"
#include "fake_coordinator_host.h"
#include "net/message.h"

namespace bigset {
namespace {

using testing::FakeHost;
using testing::kSelf;

// Starts a W-write of one add through `host`, ticking as the node's write
// tick would (every retry interval); the answer lands in *answer.
WriteCoordinator* StartWrite(FakeHost& host, int w,
                             std::optional<absl::StatusOr<Delta>>* answer) {
  ClusterWriteOptions options;
  options.w = w;
  options.timeout_micros = 2'000'000;
  options.retry_micros = 200'000;
  const uint64_t id = host.NextRequestId();
  auto op = std::make_unique<WriteCoordinator>(&host);
  op->Reset(id, "s", {UpdateOp::Add("e")}, std::nullopt, options,
            [answer](absl::StatusOr<Delta> r) { *answer = std::move(r); });
  WriteCoordinator* write = host.requests().Add(std::move(op));
  write->Start();
  return write;
}

// The node's write tick: every 100 ms, each running write's OnTick.
void Tick(FakeHost& host, uint64_t micros) {
  for (uint64_t t = 0; t < micros; t += 100'000) {
    host.Advance(100'000);
    for (uint64_t id : host.requests().Ids(RequestKind::kWrite)) {
      if (WriteCoordinator* w = host.requests().Find<WriteCoordinator>(id)) {
        w->OnTick(host.NowMicros());
      }
    }
  }
}

Delta OneAdd(NodeId actor) {
  Delta d;
  d.set = "s";
  DeltaOp op;
  op.element = "e";
  op.add = Dot{actor, 1};
  d.ops.push_back(op);
  return d;
}

TEST_CASE(
    "write coordinator: a serving list of fewer places than W fails at "
    "once, applied nowhere (it ended without an answer)") {
  // Issue "Liveness": a node whose list held one node coordinated a W = 2
  // add; that node acknowledged, every replica of the list had it, and
  // the write ended without a reply, its deadline never run.
  FakeHost host({1}, {0});
  std::optional<absl::StatusOr<Delta>> answer;
  const uint64_t id = StartWrite(host, 2, &answer)->id();
  CHECK_FALSE(answer.has_value());  // Never from inside Start.
  // Node 1 coordinates and answers, if it was asked (what the old code
  // did: then nothing more came, ever).
  if (WriteCoordinator* write = host.requests().Find<WriteCoordinator>(id)) {
    msg::UpdateReply reply{.status = absl::OkStatus(), .delta = OneAdd(1)};
    write->OnUpdateReply(1, reply);
  }
  Tick(host, 5'000'000);  // Past the deadline (2 s).
  REQUIRE(answer.has_value());
  CHECK(absl::IsUnavailable(answer->status()));
  CHECK(host.sent.empty());  // No replica was asked to apply it.
  CHECK(host.requests().running(RequestKind::kWrite) == 0);
}

TEST_CASE(
    "write coordinator: a leaver and its taker are one place: W = 2 of a "
    "list of three nodes and two places needs all three") {
  // {1, 2, 3}: 3 took 2's place (places 0, 1, 1).
  FakeHost host({1, 2, 3}, {0, 1, 1});
  std::optional<absl::StatusOr<Delta>> answer;
  WriteCoordinator* write = StartWrite(host, 2, &answer);
  REQUIRE(host.sent.size() == 1);
  CHECK(host.sent[0].first == 1);
  REQUIRE(host.sent[0].second.As<msg::Update>() != nullptr);
  msg::UpdateReply reply{.status = absl::OkStatus(), .delta = OneAdd(1)};
  write->OnUpdateReply(1, reply);
  const uint64_t id = host.sent[0].second.header.request_id;
  write->OnReplicateAck(id, 2, 2, absl::OkStatus());
  Tick(host, 100'000);
  CHECK_FALSE(answer.has_value());  // Place 1 has only one of its nodes.
  write->OnReplicateAck(id, 3, 3, absl::OkStatus());
  Tick(host, 100'000);
  REQUIRE(answer.has_value());
  CHECK(answer->ok());
  CHECK(host.requests().running(RequestKind::kWrite) ==
        0);  // Every replica acknowledged.
}

TEST_CASE(
    "write coordinator: a write whose replicas stay silent answers at its "
    "deadline and leaves hints") {
  FakeHost host({1, 2, 3}, {0, 1, 2});
  std::optional<absl::StatusOr<Delta>> answer;
  WriteCoordinator* write = StartWrite(host, 2, &answer);
  msg::UpdateReply reply{.status = absl::OkStatus(), .delta = OneAdd(1)};
  write->OnUpdateReply(1, reply);
  Tick(host, 1'900'000);
  CHECK_FALSE(answer.has_value());
  Tick(host, 200'000);
  REQUIRE(answer.has_value());
  CHECK(absl::IsDeadlineExceeded(answer->status()));
  CHECK(host.requests().running(RequestKind::kWrite) == 0);
  CHECK(host.hints == std::vector<NodeId>{2, 3});
}

}  // namespace
}  // namespace bigset
