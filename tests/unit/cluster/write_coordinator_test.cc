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

#include "bigset/cluster/ring.h"
#include "cluster/coordinator_host.h"
#include "cluster/node_counters.h"
#include "cluster/protocol_hooks.h"
#include "cluster/request_registry.h"
#include "net/message.h"

namespace bigset {
namespace {

constexpr NodeId kSelf = 9;  // Not in any serving list: it sends kUpdate.

class FakeHost final : public CoordinatorHost, public ProtocolHooks {
 public:
  FakeHost(std::vector<NodeId> serving, std::vector<uint32_t> places)
      : ring_(*Ring::Create({1, 2, 3}, RingOptions{1, 3, 1, {}})),
        serving_(std::move(serving)),
        places_(std::move(places)) {}

  // Runs the timers due up to `micros` from now.
  void Advance(uint64_t micros) {
    const uint64_t until = now_ + micros;
    while (!timers_.empty() && timers_.begin()->first.first <= until) {
      auto it = timers_.begin();
      now_ = it->first.first;
      std::function<void()> fn = std::move(it->second);
      timers_.erase(it);
      fn();
    }
    now_ = until;
  }

  std::vector<std::pair<NodeId, Message>> sent;
  std::vector<NodeId> hints;

  // CoordinatorHost.
  NodeId node_id() const override { return kSelf; }
  const Ring& ring() const override { return ring_; }
  const std::vector<NodeId>& ServingList(uint32_t) const override {
    return serving_;
  }
  const std::vector<uint32_t>& ServingPlaces(uint32_t) const override {
    return places_;
  }
  uint64_t NowMicros() const override { return now_; }
  uint64_t NextRequestId() override { return ++next_id_; }
  void Send(NodeId to, std::string bytes) override {
    absl::StatusOr<Message> m = DecodeMessage(bytes);
    REQUIRE(m.ok());
    sent.emplace_back(to, *std::move(m));
  }
  void SendFirst(NodeId to, std::string bytes) override {
    Send(to, std::move(bytes));
  }
  uint64_t QueriesAskAllUntil() const override { return 0; }
  void SetQueriesAskAllUntil(uint64_t) override {}
  void After(uint64_t delay, std::function<void()> fn) override {
    timers_.emplace(std::make_pair(now_ + delay, ++timer_seq_), std::move(fn));
  }
  Replica* LocalReplica(uint32_t) override { return nullptr; }
  Replica* HostedReplica(uint32_t) override { return nullptr; }
  Replica* ServingReplica(uint32_t) override { return nullptr; }
  Replica* ReadableReplica(uint32_t) override { return nullptr; }
  bool Serves(uint32_t) const override { return false; }
  NodeCounters& stats() override { return stats_; }
  RequestRegistry& requests() override { return requests_; }
  ProtocolHooks& hooks() override { return *this; }

  // ProtocolHooks.
  bool ProxyDelta(NodeId, const MessageHeader&, const Delta&,
                  const Delta*) override {
    return false;
  }
  void OnApplied(uint32_t, const Delta&) override {}
  bool HostingChanged() override { return true; }
  void TellMoved(NodeId, uint32_t) override {}
  void AddHint(NodeId peer, uint32_t, uint64_t, const std::string&) override {
    hints.push_back(peer);
  }

 private:
  Ring ring_;
  std::vector<NodeId> serving_;
  std::vector<uint32_t> places_;
  uint64_t now_ = 1'000'000;
  uint64_t next_id_ = 100;
  uint64_t timer_seq_ = 0;
  std::map<std::pair<uint64_t, uint64_t>, std::function<void()>> timers_;
  NodeCounters stats_;
  RequestRegistry requests_;
};

// Starts a W-write of one add through `host`, ticking as the node's write
// tick would (every retry interval); the answer lands in *answer.
WriteCoordinator* StartWrite(FakeHost& host, int w,
                             std::optional<absl::StatusOr<Delta>>* answer) {
  ClusterWriteOptions options;
  options.w = w;
  options.timeout_micros = 2'000'000;
  options.retry_micros = 200'000;
  const uint64_t id = host.NextRequestId();
  WriteCoordinator* write =
      host.requests().AddWrite(id, std::make_unique<WriteCoordinator>(&host));
  write->Reset(id, "s", {UpdateOp::Add("e")}, std::nullopt, options,
               [answer](absl::StatusOr<Delta> r) { *answer = std::move(r); });
  write->Start();
  return write;
}

// The node's write tick: every 100 ms, each running write's OnTick.
void Tick(FakeHost& host, uint64_t micros) {
  for (uint64_t t = 0; t < micros; t += 100'000) {
    host.Advance(100'000);
    for (uint64_t id : host.requests().WriteIds()) {
      if (WriteCoordinator* w = host.requests().Write(id)) {
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
  if (WriteCoordinator* write = host.requests().Write(id)) {
    msg::UpdateReply reply{.status = absl::OkStatus(), .delta = OneAdd(1)};
    write->OnUpdateReply(1, reply);
  }
  Tick(host, 5'000'000);  // Past the deadline (2 s).
  REQUIRE(answer.has_value());
  CHECK(absl::IsUnavailable(answer->status()));
  CHECK(host.sent.empty());  // No replica was asked to apply it.
  CHECK(host.requests().writes_empty());
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
  CHECK(host.requests().writes_empty());  // Every replica acknowledged.
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
  CHECK(host.requests().writes_empty());
  CHECK(host.hints == std::vector<NodeId>{2, 3});
}

}  // namespace
}  // namespace bigset
