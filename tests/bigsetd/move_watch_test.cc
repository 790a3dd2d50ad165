// MoveTracker and DescribeStuck (tools/bigsetd/move_watch.h): which moves
// count as stuck, when they are reported (once), when they move on, and
// the warning line an operator reads.

#include "move_watch.h"

#include <catch2/catch.hpp>
#include <vector>

namespace bigset::server {
namespace {

PartitionMove Move(uint32_t p, std::string state, NodeId peer = 0) {
  PartitionMove m;
  m.partition = p;
  m.state = std::move(state);
  m.peer = peer;
  return m;
}

TEST_CASE("move watch: a move that keeps its state is reported once") {
  MoveTracker tracker(absl::Seconds(60));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  std::vector<uint32_t> again;
  const std::vector<PartitionMove> moves = {
      Move(3, "sending to 4: streaming (set #0, run 1)", 4)};
  CHECK(tracker.Look(t0, moves, {}, &again).empty());
  CHECK(tracker.Look(t0 + absl::Seconds(59), moves, {}, &again).empty());
  const std::vector<StuckMove> stuck =
      tracker.Look(t0 + absl::Seconds(61), moves, {}, &again);
  REQUIRE(stuck.size() == 1);
  CHECK(stuck[0].partition == 3);
  CHECK(stuck[0].stuck_for == absl::Seconds(61));
  // Not again while it stays stuck.
  CHECK(tracker.Look(t0 + absl::Seconds(200), moves, {}, &again).empty());
  CHECK(again.empty());
  // It moves on: reported as moving again, and its clock starts over.
  const std::vector<PartitionMove> next = {
      Move(3, "sending to 4: streaming (set #1, run 1)", 4)};
  CHECK(tracker.Look(t0 + absl::Seconds(201), next, {}, &again).empty());
  CHECK(again == std::vector<uint32_t>{3});
}

TEST_CASE("move watch: a move that keeps progressing is never reported") {
  MoveTracker tracker(absl::Seconds(60));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  std::vector<uint32_t> again;
  for (int i = 0; i < 100; ++i) {
    const std::vector<PartitionMove> moves = {Move(
        7, "sending to 2: streaming (set #" + std::to_string(i) + ", run 1)",
        2)};
    CHECK(tracker.Look(t0 + absl::Seconds(10 * i), moves, {}, &again).empty());
  }
}

TEST_CASE("move watch: a finished move that was stuck is reported moving") {
  MoveTracker tracker(absl::Seconds(10));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  std::vector<uint32_t> again;
  const std::vector<PartitionMove> moves = {Move(5, "joining: waiting")};
  tracker.Look(t0, moves, {}, &again);
  REQUIRE(tracker.Look(t0 + absl::Seconds(11), moves, {}, &again).size() == 1);
  CHECK(tracker.Look(t0 + absl::Seconds(12), {}, {}, &again).empty());
  CHECK(again == std::vector<uint32_t>{5});
}

TEST_CASE(
    "move watch: the warning names the peer's connection error and groups "
    "partitions alike") {
  MoveTracker tracker(absl::Seconds(60));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  TransportStats transport;
  PeerStats peer;
  peer.node = 4;
  peer.connected = false;
  peer.last_error = "TLS: certificate verify failed";
  transport.peers.push_back(peer);
  std::vector<PartitionMove> moves;
  for (uint32_t p = 0; p < 8; ++p) {
    moves.push_back(Move(p, "sending to 4: streaming (set #0, run 1)", 4));
  }
  moves.push_back(Move(20, "leaving: waiting for a joiner to pair with"));
  std::vector<uint32_t> again;
  tracker.Look(t0, moves, transport, &again);
  const std::vector<StuckMove> stuck =
      tracker.Look(t0 + absl::Seconds(90), moves, transport, &again);
  REQUIRE(stuck.size() == 9);
  const std::string line = DescribeStuck(stuck);
  INFO(line);
  CHECK(line.find("partitions 0, 1, 2, 3, 4 and 3 more: sending to 4") !=
        std::string::npos);
  CHECK(line.find("node 4 cannot be reached: TLS: certificate verify "
                  "failed") != std::string::npos);
  CHECK(line.find("partition 20: leaving: waiting for a joiner") !=
        std::string::npos);
  CHECK(line.find("for 90 s") != std::string::npos);
}

}  // namespace
}  // namespace bigset::server
