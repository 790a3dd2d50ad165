// MachineDriver: what a node does with a request state machine's outputs
// (request_output.h), for tests that drive one machine alone: it records
// the sends (decoded), adds up the counters, keeps the one pending tick
// on a virtual clock, records hints and unroutes, numbers a write's extra
// deltas, coordinates a write "here" with what the test says this node's
// replica returns, opens a read's folds (with the reader the test gives
// for this node's own replica), delivers its local clocks from the
// "scheduler" (Advance), hands its clock and chunks to its sink (and the
// client's `next` back from the scheduler), and on `answered` or `done`
// takes the answer (on `done` drops the machine) and runs it. No node, no
// simulator, no store.

#ifndef BIGSET_TESTS_UNIT_CLUSTER_MACHINE_DRIVER_H_
#define BIGSET_TESTS_UNIT_CLUSTER_MACHINE_DRIVER_H_

#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bigset/replica/set_reader.h"
#include "cluster/request_output.h"
#include "cluster/slow_replicas.h"
#include "net/message.h"

namespace bigset {
namespace testing {

constexpr NodeId kSelf = 9;  // The node that drives the machine.

// A clock that has seen `dots`.
inline Clock ClockOf(std::vector<Dot> dots) {
  Clock c;
  c.AddDots(dots);
  return c;
}

template <typename Machine>
class MachineDriver {
 public:
  // Takes `machine` and carries out its first output (Start's).
  void Begin(std::unique_ptr<Machine> machine,
             const std::function<RequestOutput(Machine&)>& start) {
    machine_ = std::move(machine);
    tick_at_.reset();
    Carry(start(*machine_));
  }
  // An input: `step` runs on the machine if it still runs.
  void Input(const std::function<RequestOutput(Machine&)>& step) {
    if (machine_ != nullptr) Carry(step(*machine_));
  }

  // A tick now, asked for or not (the node ticks every write on one timer).
  void Tick() {
    if (machine_ != nullptr) Carry(machine_->Tick(now_));
  }
  // Moves the clock `micros` on, ticking every `interval` on the way (the
  // node's write tick).
  void TickEvery(uint64_t interval, uint64_t micros) {
    for (uint64_t t = 0; t < micros; t += interval) {
      now_ += interval;
      Tick();
    }
  }

  // Runs what the scheduler holds (local clocks, the client's `next`),
  // then the ticks due up to `micros` from now.
  void Advance(uint64_t micros) {
    RunScheduled();
    const uint64_t until = now_ + micros;
    while (machine_ != nullptr && tick_at_.has_value() && *tick_at_ <= until) {
      now_ = std::max(now_, *tick_at_);
      tick_at_.reset();
      Carry(machine_->Tick(now_));
    }
    now_ = until;
  }

  // What runs "from the scheduler", at the current time.
  void RunScheduled() {
    while (machine_ != nullptr && !scheduled_.empty()) {
      std::function<RequestOutput(Machine&)> step =
          std::move(scheduled_.front());
      scheduled_.erase(scheduled_.begin());
      Carry(step(*machine_));
    }
  }

  uint64_t NowMicros() const { return now_; }
  bool running() const { return machine_ != nullptr; }
  // The machine, while running.
  const Machine& machine() const {
    REQUIRE(running());
    return *machine_;
  }
  // The tick the machine asked for, if one is pending.
  std::optional<uint64_t> tick_at() const { return tick_at_; }

  std::vector<std::pair<NodeId, Message>> sent;
  std::vector<NodeId> sent_first;  // Sends marked `first`.
  std::vector<RequestOutput::Hint> hints;
  std::vector<uint64_t> routed;  // Extra deltas' ids, in order.
  std::vector<uint64_t> unrouted;
  // What this node's replica returns when a write coordinates here (unset:
  // the test fails if one asks).
  std::function<absl::StatusOr<Delta>(Machine&)> coordinate_here;
  // A read: the reader of this node's own replica for a fold on `node`
  // (null, or unset: the fold is asked for by message).
  std::function<std::unique_ptr<SetReader>(const RequestOutput::Fold&)>
      open_local;
  std::vector<uint64_t> folds_opened;  // Read folds' ids, in order.
  uint64_t next_id = 1000;             // Extra deltas' and folds' request ids.
  RequestOutput totals;                // The counters, added up.
  SlowReplicas slow;  // As the node keeps them (RequestOutput::slow).

  // The elements of the repairs sent to `node`, in order.
  std::vector<std::string> RepairedAt(NodeId node) const {
    std::vector<std::string> out;
    for (const auto& [to, m] : sent) {
      const auto* repair = m.template As<msg::Repair>();
      if (to != node || repair == nullptr) continue;
      for (const DeltaOp& op : repair->delta.ops) out.push_back(op.element);
    }
    return out;
  }

 private:
  void Carry(RequestOutput out) {
    for (RequestOutput::Send& s : out.sends) {
      absl::StatusOr<Message> m = DecodeMessage(s.bytes);
      REQUIRE(m.ok());
      if (s.first) sent_first.push_back(s.to);
      sent.emplace_back(s.to, *std::move(m));
    }
    totals.retransmits += out.retransmits;
    totals.queries_hedged += out.queries_hedged;
    totals.repairs_sent += out.repairs_sent;
    totals.repair_ops_sent += out.repair_ops_sent;
    totals.coordinator_switches += out.coordinator_switches;
    totals.late_coordinator_replies += out.late_coordinator_replies;
    totals.extra_dots += out.extra_dots;
    totals.failovers_unsettled += out.failovers_unsettled;
    totals.failovers_refused += out.failovers_refused;
    totals.malformed_messages += out.malformed_messages;
    totals.read_replica_switches += out.read_replica_switches;
    for (RequestOutput::Hint& h : out.hints) hints.push_back(std::move(h));
    for (uint64_t id : out.unroutes) unrouted.push_back(id);
    for (const RequestOutput::SlowPeer& peer : out.slow) {
      if (peer.every_partition) {
        slow.Mark(peer.node, now_);
      } else {
        slow.MarkFailed(peer.node, peer.partition, now_);
      }
    }
    // As in the node: the answer is taken first and runs last, after the
    // machine is gone if it is done.
    if constexpr (requires(Machine & m) { m.ClientNext(1); }) {
      // A read's client gets its clock first, also when the read ends with
      // this same output.
      if (out.clock_ready) machine_->sink()->OnClock(machine_->merged_clock());
    }
    std::optional<decltype(machine_->TakeAnswer())> answer;
    if (out.done || out.answered) answer.emplace(machine_->TakeAnswer());
    if (out.done) {
      machine_.reset();
      tick_at_.reset();
      scheduled_.clear();
      (*answer)();
      return;
    }
    Effects(out);
    if (answer.has_value()) (*answer)();
  }

  void Effects(const RequestOutput& out) {
    if constexpr (requires(Machine & m) { m.NumberExtra(1, 1); }) {
      for (uint32_t i = 0; i < out.extras_to_number && machine_ != nullptr;
           ++i) {
        routed.push_back(++next_id);
        Carry(machine_->NumberExtra(next_id, now_));
      }
    }
    if constexpr (requires(Machine & m) { m.Coordinated(Delta()); }) {
      if (out.coordinate_here && machine_ != nullptr) {
        REQUIRE(coordinate_here);
        Carry(machine_->Coordinated(coordinate_here(*machine_)));
      }
    }
    if constexpr (requires(Machine & m) { m.ClientNext(1); }) {
      ReadEffects(out);
      if (machine_ == nullptr) return;
    }
    if (out.tick_at != 0) {
      // One tick pending at a time: a machine asks only from Start and Tick.
      REQUIRE_FALSE(tick_at_.has_value());
      tick_at_ = out.tick_at;
    }
  }

  void ReadEffects(const RequestOutput& out) {
    for (const RequestOutput::Fold& fold : out.folds_to_open) {
      if (machine_ == nullptr) return;
      std::unique_ptr<SetReader> local;
      if (open_local) local = open_local(fold);
      folds_opened.push_back(++next_id);
      if (local == nullptr) routed.push_back(next_id);
      Carry(machine_->FoldOpened(fold.slot, next_id, std::move(local), now_));
    }
    for (uint64_t fold : out.local_clocks) {
      scheduled_.push_back(
          [fold, this](Machine& m) { return m.LocalClock(fold, now_); });
    }
    if (machine_ == nullptr || !out.chunk_ready) return;
    std::weak_ptr<bool> token = machine_->token();
    const bool go_on = machine_->sink()->OnChunk(machine_->chunk(), [this,
                                                                     token]() {
      if (token.expired()) return;
      scheduled_.push_back([this](Machine& m) { return m.ClientNext(now_); });
    });
    if (go_on && machine_ != nullptr) Carry(machine_->ClientNext(now_));
  }

  std::unique_ptr<Machine> machine_;
  std::vector<std::function<RequestOutput(Machine&)>> scheduled_;
  std::optional<uint64_t> tick_at_;
  uint64_t now_ = 1'000'000;
};

}  // namespace testing
}  // namespace bigset

#endif  // BIGSET_TESTS_UNIT_CLUSTER_MACHINE_DRIVER_H_
