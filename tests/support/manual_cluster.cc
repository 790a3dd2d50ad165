#include "manual_cluster.h"

#include <catch2/catch.hpp>
#include <utility>

namespace bigset::testing {

MessageType ManualCluster::Sent::type() const {
  MessageHeader header;
  std::string_view body;
  if (!ParseHeader(bytes, &header, &body).ok()) return MessageType::kUpdate;
  return header.type;
}

class ManualCluster::Net final : public Transport {
 public:
  explicit Net(ManualCluster* cluster) : cluster_(cluster) {}
  void Send(NodeId from, NodeId to, std::string bytes) override {
    Sent sent{from, to, std::move(bytes)};
    if (sent.type() == MessageType::kMembership &&
        !cluster_->queue_membership_) {
      cluster_->background_.push_back(std::move(sent));
    } else {
      cluster_->queue_.push_back(std::move(sent));
    }
  }

 private:
  ManualCluster* cluster_;
};

class ManualCluster::Clock final : public Scheduler {
 public:
  Clock(ManualCluster* cluster, NodeId id) : cluster_(cluster), id_(id) {}
  uint64_t NowMicros() const override { return cluster_->slots_.at(id_).now; }
  TimerId After(uint64_t delay, std::function<void()> fn) override {
    Slot& slot = cluster_->slots_.at(id_);
    const uint64_t seq = cluster_->timer_seq_++;
    slot.timers.emplace(
        slot.now + delay,
        Timer{slot.now + delay, seq, std::move(fn), slot.incarnation});
    return seq;
  }
  void Cancel(TimerId) override {}

 private:
  ManualCluster* cluster_;
  NodeId id_;
};

ManualCluster::ManualCluster(int nodes, int n, uint32_t ring_size,
                             NodeOptions options)
    : ring_([&] {
        std::vector<NodeId> ids;
        for (int i = 1; i <= nodes; ++i) ids.push_back(static_cast<NodeId>(i));
        auto r = Ring::Create(ids, RingOptions{ring_size, n});
        REQUIRE(r.ok());
        return *r;
      }()),
      options_(std::move(options)),
      net_(std::make_unique<Net>(this)) {
  for (NodeId id : ring_.nodes()) {
    Slot& slot = slots_[id];
    slot.store = std::make_unique<MemStore>();
    Start(id);
  }
}

ManualCluster::ManualCluster(int nodes, const Ring& ring, NodeOptions options)
    : ring_(ring),
      options_(std::move(options)),
      net_(std::make_unique<Net>(this)) {
  for (int i = 1; i <= nodes; ++i) {
    Slot& slot = slots_[static_cast<NodeId>(i)];
    slot.store = std::make_unique<MemStore>();
    Start(static_cast<NodeId>(i));
  }
}

ManualCluster::~ManualCluster() {
  for (auto& [id, slot] : slots_) slot.node.reset();
}

void ManualCluster::Start(NodeId id) {
  Slot& slot = slots_.at(id);
  ++slot.incarnation;
  slot.scheduler = std::make_unique<Clock>(this, id);
  NodeOptions o = options_;
  o.replica.actor_id_source = [this]() { return ++actor_seq_; };
  auto node = Node::Open(id, ring_, slot.store->store.get(), net_.get(),
                         slot.scheduler.get(), o);
  REQUIRE(node.ok());
  slot.node = std::move(*node);
}

void ManualCluster::Restart(NodeId id, uint64_t clock) {
  Slot& slot = slots_.at(id);
  slot.node.reset();
  slot.timers.clear();
  // In-flight messages to and from the old incarnation are gone.
  std::erase_if(queue_, [id](const Sent& s) { return s.to == id; });
  std::erase_if(background_, [id](const Sent& s) { return s.to == id; });
  slot.now = clock;
  Start(id);
}

void ManualCluster::FlushBackground() {
  while (!background_.empty()) {
    Sent m = std::move(background_.front());
    background_.pop_front();
    Slot& slot = slots_.at(m.to);
    if (slot.node != nullptr) slot.node->Receive(m.from, m.bytes);
  }
}

void ManualCluster::RestartWiped(NodeId id, uint64_t clock) {
  Slot& slot = slots_.at(id);
  slot.node.reset();
  slot.store = std::make_unique<MemStore>();
  Restart(id, clock);
}

bool ManualCluster::DeliverOne(const std::function<bool(const Sent&)>& pick) {
  FlushBackground();
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (!pick(*it)) continue;
    Sent m = std::move(*it);
    queue_.erase(it);
    Slot& slot = slots_.at(m.to);
    if (slot.node != nullptr) slot.node->Receive(m.from, m.bytes);
    return true;
  }
  return false;
}

int ManualCluster::DeliverAll(const std::function<bool(const Sent&)>& pick) {
  int n = 0;
  while (DeliverOne(pick)) {
    // Messages that cause messages for ever, with no time passing, are a
    // livelock: no protocol may retry without waiting.
    if (++n > 50'000) FAIL("50,000 messages delivered in one instant");
  }
  return n;
}

int ManualCluster::Drop(const std::function<bool(const Sent&)>& pick) {
  FlushBackground();
  const size_t before = queue_.size();
  std::erase_if(queue_, pick);
  return static_cast<int>(before - queue_.size());
}

int ManualCluster::RunTimers(NodeId id) {
  int n = 0;
  while (true) {
    Slot& slot = slots_.at(id);
    auto it = slot.timers.begin();
    if (it == slot.timers.end() || it->first > slot.now) {
      FlushBackground();
      return n;
    }
    Timer t = std::move(it->second);
    slot.timers.erase(it);
    if (t.incarnation == slot.incarnation) {
      t.fn();
      ++n;
    }
  }
}

void ManualCluster::Settle() {
  int64_t total = 0;
  while (true) {
    int moved = hold_ ? DeliverAll(Not(hold_)) : DeliverAll();
    for (auto& [id, slot] : slots_) moved += RunTimers(id);
    if (moved == 0) return;
    total += moved;
    if (total > 50'000) FAIL("50,000 messages and timers in one instant");
  }
}

void ManualCluster::Advance(uint64_t micros, int rounds) {
  for (int r = 0; r < rounds; ++r) {
    for (auto& [id, slot] : slots_) slot.now += micros;
    Settle();
  }
}

std::function<bool(const ManualCluster::Sent&)> OfType(MessageType type) {
  return [type](const ManualCluster::Sent& s) { return s.type() == type; };
}
std::function<bool(const ManualCluster::Sent&)> From(NodeId node) {
  return [node](const ManualCluster::Sent& s) { return s.from == node; };
}
std::function<bool(const ManualCluster::Sent&)> To(NodeId node) {
  return [node](const ManualCluster::Sent& s) { return s.to == node; };
}
std::function<bool(const ManualCluster::Sent&)> Not(
    std::function<bool(const ManualCluster::Sent&)> p) {
  return [p](const ManualCluster::Sent& s) { return !p(s); };
}
std::function<bool(const ManualCluster::Sent&)> And(
    std::function<bool(const ManualCluster::Sent&)> a,
    std::function<bool(const ManualCluster::Sent&)> b) {
  return [a, b](const ManualCluster::Sent& s) { return a(s) && b(s); };
}

std::function<bool(const ManualCluster::Sent&)> Or(
    std::function<bool(const ManualCluster::Sent&)> a,
    std::function<bool(const ManualCluster::Sent&)> b) {
  return [a, b](const ManualCluster::Sent& s) { return a(s) || b(s); };
}

}  // namespace bigset::testing
