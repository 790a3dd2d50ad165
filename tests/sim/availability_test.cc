// Availability with synced writes when work has a cost (SimOptions::
// message_cost_micros, sync_cost_micros): a node restarted, or cut off
// for a while, under a steady load coordinates again within a second,
// and the other two keep acknowledging W = 2 writes meanwhile. Before
// group commit (one fsync per replicated delta) and the retransmission
// back-off, a node back under load received copies of every pending write
// faster than it could sync them and could not coordinate for tens of
// seconds (issue "Availability"); the simulator, which charged nothing
// for work, could not show it.

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bigset/testing/sim.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

constexpr uint64_t kMs = 1000;
// Clients writing unique members at a steady rate through the nodes in
// `via` (round robin), without waiting for answers (each answer counted
// when it comes).
class Load {
 public:
  Load(Simulator* sim, uint64_t seed) : sim_(sim), rng_(seed) {
    wo_.timeout_micros = 2 * kSecond;
  }

  void Write(NodeId via) {
    Node* node = sim_->node(via);
    if (node == nullptr) return;
    const std::string set = absl::StrCat("s", testing::Uniform(rng_, 0, 63));
    const std::string element = absl::StrCat("e", next_++);
    const uint64_t start = sim_->NowMicros();
    node->Update(set, {UpdateOp::Add(element)}, wo_,
                 [this, via, start](absl::StatusOr<Delta> r) {
                   const uint64_t now = sim_->NowMicros();
                   if (r.ok()) {
                     ++acked_;
                     longest_gap_ = std::max(longest_gap_, now - last_ack_);
                     last_ack_ = now;
                   }
                   // The writes through the watched node, from the watch
                   // time on.
                   if (via == watched_ && start >= watch_from_) {
                     ++watched_writes_;
                     if (!r.ok()) ++watched_failed_;
                     slowest_ = std::max(slowest_, now - start);
                   }
                 });
  }

  // Runs `micros` of virtual time, writing every `every` micros through
  // the nodes of `via` in turn.
  void Run(uint64_t micros, uint64_t every, const std::vector<NodeId>& via) {
    for (uint64_t t = 0; t < micros; t += every) {
      Write(via[turn_++ % via.size()]);
      sim_->RunFor(every);
    }
  }

  void StartGapClock() {
    last_ack_ = sim_->NowMicros();
    longest_gap_ = 0;
  }
  // From `from` on, the writes through `via` are watched.
  void Watch(NodeId via, uint64_t from) {
    watched_ = via;
    watch_from_ = from;
  }
  uint64_t longest_gap() const { return longest_gap_; }
  uint64_t acked() const { return acked_; }
  uint64_t watched_writes() const { return watched_writes_; }
  uint64_t watched_failed() const { return watched_failed_; }
  uint64_t slowest() const { return slowest_; }

 private:
  Simulator* const sim_;
  testing::Rng rng_;
  ClusterWriteOptions wo_;
  uint64_t next_ = 0, acked_ = 0, turn_ = 0;
  uint64_t last_ack_ = 0, longest_gap_ = 0;
  NodeId watched_ = 0;
  uint64_t watch_from_ = 0, watched_writes_ = 0, watched_failed_ = 0;
  uint64_t slowest_ = 0;
};

std::unique_ptr<Simulator> MakeSim(uint64_t seed) {
  SimOptions o;
  o.seed = seed;
  o.nodes = 3;
  o.ring = RingOptions{16, 3, 1, Placement::kRendezvous};
  o.min_latency_micros = 100;
  o.max_latency_micros = 400;
  o.node.replica.sync_writes = true;
  // A disk that syncs in 2 ms and 20 us of work per message: one node
  // syncs at most 500 times a second.
  o.sync_cost_micros = 2 * kMs;
  o.message_cost_micros = 20;
  o.node.anti_entropy.interval_micros = 1 * kSecond;
  o.trace_capacity = 0;
  auto created = Simulator::Create(o);
  REQUIRE(created.ok());
  return std::move(*created);
}

// The load: a write every kEvery micros (333 a second), through the
// nodes up in turn.
constexpr uint64_t kEvery = 3 * kMs;

void Report(const char* what, uint64_t seed, const Load& load) {
  WARN("seed " << seed << ", " << what << ": " << load.watched_writes()
               << " writes through node 1 from 1 s after, "
               << load.watched_failed() << " failed, slowest "
               << load.slowest() / kMs << " ms; longest time without any "
               << "acknowledgement " << load.longest_gap() / kMs << " ms");
}

TEST_CASE(
    "availability: a node restarted under synced writes serves from a "
    "second after, and the others never stop acknowledging") {
  for (uint64_t seed : testing::Seeds(2)) {
    CAPTURE(seed);
    std::unique_ptr<Simulator> sim = MakeSim(seed);
    Load load(sim.get(), seed);
    load.Run(2 * kSecond, kEvery, {1, 2, 3});
    REQUIRE(sim->Crash(1).ok());
    load.StartGapClock();
    load.Run(3 * kSecond, kEvery, {2, 3});
    REQUIRE(sim->Restart(1).ok());
    // Every write through node 1 from a second after its restart on
    // succeeds, promptly (it serves).
    load.Watch(1, sim->NowMicros() + 1 * kSecond);
    load.Run(6 * kSecond, kEvery, {1, 2, 3});
    sim->RunFor(3 * kSecond);  // Every answer in.
    Report("restart", seed, load);
    CHECK(load.watched_writes() > 0);
    CHECK(load.watched_failed() == 0);
    // Serves: not one write of its stays queued behind the backlog (before
    // group commit: 1.5 s after a restart, 2.1 s after a cut).
    CHECK(load.slowest() <= 250 * kMs);
    CHECK(load.longest_gap() <= 2 * kSecond);
  }
}

TEST_CASE(
    "availability: a node cut off for seconds under synced writes serves "
    "from a second after the heal") {
  for (uint64_t seed : testing::Seeds(2)) {
    CAPTURE(seed);
    std::unique_ptr<Simulator> sim = MakeSim(seed + 100);
    Load load(sim.get(), seed);
    load.Run(2 * kSecond, kEvery, {1, 2, 3});
    // As a frozen process: nothing reaches it and nothing leaves it.
    sim->Partition({{1}, {2, 3}});
    load.StartGapClock();
    load.Run(4 * kSecond, kEvery, {2, 3});
    sim->Heal();
    load.Watch(1, sim->NowMicros() + 1 * kSecond);
    load.Run(6 * kSecond, kEvery, {1, 2, 3});
    sim->RunFor(3 * kSecond);
    Report("cut off", seed, load);
    CHECK(load.watched_writes() > 0);
    CHECK(load.watched_failed() == 0);
    // Serves: not one write of its stays queued behind the backlog (before
    // group commit: 1.5 s after a restart, 2.1 s after a cut).
    CHECK(load.slowest() <= 250 * kMs);
    CHECK(load.longest_gap() <= 2 * kSecond);
  }
}

}  // namespace
}  // namespace bigset::testing
