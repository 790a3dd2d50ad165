// A CoordinatorHost (and ProtocolHooks) for driving one coordinator alone
// in a test: it records what the coordinator sends (decoded), runs its
// timers on a virtual clock, serves one fixed serving list with its places
// for every partition, and hosts no replica. No node, no simulator, no
// store.

#ifndef BIGSET_TESTS_UNIT_CLUSTER_FAKE_COORDINATOR_HOST_H_
#define BIGSET_TESTS_UNIT_CLUSTER_FAKE_COORDINATOR_HOST_H_

#include <catch2/catch.hpp>
#include <functional>
#include <map>
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
namespace testing {

constexpr NodeId kSelf = 9;  // Not in any serving list: it sends kUpdate.

// A clock that has seen `dots`.
inline Clock ClockOf(std::vector<Dot> dots) {
  Clock c;
  c.AddDots(dots);
  return c;
}

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

  // How many messages of `type` were sent to `node`.
  size_t SentTo(NodeId node, MessageType type) const {
    size_t n = 0;
    for (const auto& [to, m] : sent) n += to == node && m.type() == type;
    return n;
  }
  // The elements of the repairs sent to `node`, in order.
  std::vector<std::string> RepairedAt(NodeId node) const {
    std::vector<std::string> out;
    for (const auto& [to, m] : sent) {
      const auto* repair = m.As<msg::Repair>();
      if (to != node || repair == nullptr) continue;
      for (const DeltaOp& op : repair->delta.ops) out.push_back(op.element);
    }
    return out;
  }
  // Sent with SendFirst (this node's own replica, ahead of the queue).
  std::vector<NodeId> sent_first;

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
    sent_first.push_back(to);
    Send(to, std::move(bytes));
  }
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

}  // namespace testing
}  // namespace bigset

#endif  // BIGSET_TESTS_UNIT_CLUSTER_FAKE_COORDINATOR_HOST_H_
