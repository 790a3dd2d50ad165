// ReadCoordinator (lib/cluster/read_coordinator.h), the state machine,
// driven alone (machine_driver.h): the test plays the replicas' folds
// (clocks, chunks), this node's own replica (a reader it hands in) and a
// client's sink. No node, no simulator, no store.

#include "cluster/read_coordinator.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cluster/read_sink.h"
#include "machine_driver.h"
#include "net/message.h"

namespace bigset::testing {
namespace {

using Driver = testing::MachineDriver<ReadCoordinator>;

constexpr uint64_t kA = 0xA;
using Phase = ReadCoordinator::Phase;

// What the client got. With `hold`, it takes each chunk and asks for the
// next only when the test calls ReadRun::ClientNext().
struct Client {
  std::optional<Clock> clock;
  std::vector<ElementDots> elements;
  std::optional<absl::Status> done;
  bool hold = false;
  std::function<void()> next;

  void Next() {
    std::function<void()> n = std::move(next);
    next = nullptr;
    n();
  }
  std::vector<std::string> Names() const {
    std::vector<std::string> out;
    for (const ElementDots& e : elements) out.push_back(e.element);
    return out;
  }
};

class ClientSink final : public ReadSink {
 public:
  explicit ClientSink(Client* client) : client_(client) {}
  void OnClock(const Clock& clock) override { client_->clock = clock; }
  bool OnChunk(std::vector<ElementDots>* elements,
               std::function<void()> next) override {
    for (ElementDots& e : *elements) client_->elements.push_back(e);
    if (!client_->hold) return true;
    client_->next = std::move(next);
    return false;
  }
  void OnDone(absl::Status status) override {
    REQUIRE_FALSE(client_->done.has_value());  // Once.
    client_->done = std::move(status);
  }

 private:
  Client* client_;
};

class ReadRun {
 public:
  ReadRun(std::vector<NodeId> serving, std::vector<uint32_t> places, int r,
          uint32_t batch_size = 1000, size_t limit = 0,
          std::function<std::unique_ptr<SetReader>(const RequestOutput::Fold&)>
              open_local = nullptr)
      : serving_(std::move(serving)), places_(std::move(places)) {
    ClusterReadOptions options;
    options.r = r;
    options.batch_size = batch_size;
    options.timeout_micros = 2'000'000;
    options.retry_micros = 200'000;
    options.replica_timeout_micros = 700'000;
    options.keepalive_micros = 5'000'000;
    driver_.open_local = std::move(open_local);
    driver_.Begin(
        std::make_unique<ReadCoordinator>(
            1, "s",
            ReadCoordinator::Where{
                .partition = 0, .serving = serving_, .places = places_},
            options, ElementBounds(), limit,
            std::make_unique<ClientSink>(&client)),
        [this](ReadCoordinator& m) { return m.Start(driver_.NowMicros()); });
  }

  // The fold id of the last kRead sent to `node` (0: none).
  uint64_t FoldOf(NodeId node) const {
    uint64_t fold = 0;
    for (const auto& [to, m] : driver_.sent) {
      if (to == node && m.type() == MessageType::kRead) {
        fold = m.header.request_id;
      }
    }
    return fold;
  }
  // The last kRead sent to `node`.
  const msg::Read* ReadSentTo(NodeId node) const {
    const msg::Read* read = nullptr;
    for (const auto& [to, m] : driver_.sent) {
      if (to == node && m.type() == MessageType::kRead) {
        read = m.As<msg::Read>();
      }
    }
    return read;
  }
  size_t SentTo(NodeId node, MessageType type) const {
    size_t n = 0;
    for (const auto& [to, m] : driver_.sent)
      n += to == node && m.type() == type;
    return n;
  }
  std::vector<std::string> RepairedAt(NodeId node) const {
    return driver_.RepairedAt(node);
  }

  // Replica `node` answers its fold with `clock`.
  void Clock(NodeId node, const bigset::Clock& clock) {
    msg::ReadClock m;
    m.clock = clock;
    Deliver(node, m);
  }
  void Fail(NodeId node) {
    msg::ReadClock m;
    m.status = absl::UnavailableError("closing");
    Deliver(node, m);
  }
  // Replica `node` sends chunk `seq` of its fold.
  void Chunk(NodeId node, uint64_t seq, bool last,
             std::vector<ElementDots> elements) {
    const uint64_t fold = FoldOf(node);
    REQUIRE(fold != 0);
    const std::string bytes = EncodeMessage(
        fold, 0,
        msg::ReadChunk{.seq = seq, .last = last, .elements = elements});
    MessageHeader header;
    std::string_view body;
    REQUIRE(ParseHeader(bytes, &header, &body).ok());
    uint64_t parsed_seq = 0;
    bool parsed_last = false;
    std::string_view encoded;
    REQUIRE(ParseReadChunkBody(body, &parsed_seq, &parsed_last, &encoded).ok());
    driver_.Input([&](ReadCoordinator& m) {
      return m.Step(node, fold, parsed_seq, parsed_last, encoded,
                    driver_.NowMicros());
    });
  }

  Driver& driver() { return driver_; }
  ReadCoordinator::Phase phase() const { return driver_.machine().phase(); }
  // The client asks for more; the read resumes from the scheduler.
  void ClientNext() {
    client.Next();
    driver_.Advance(0);
  }

  Client client;

 private:
  void Deliver(NodeId node, msg::ReadClock& m) {
    const uint64_t fold = FoldOf(node);
    REQUIRE(fold != 0);
    driver_.Input([&](ReadCoordinator& machine) {
      return machine.Step(node, fold, m, driver_.NowMicros());
    });
  }

  std::vector<NodeId> serving_;
  std::vector<uint32_t> places_;
  Driver driver_;
};

ElementDots E(std::string element, std::vector<Dot> dots) {
  return ElementDots{std::move(element), std::move(dots)};
}

// This node's own replica, as the driver hands it in: a clock and its
// chunks; counts what it was asked.
struct LocalReplica {
  Clock clock;
  std::vector<std::vector<ElementDots>> chunks;
  int opened = 0;
  int nexts = 0;
};

class FakeReader final : public SetReader {
 public:
  explicit FakeReader(LocalReplica* replica) : replica_(replica) {}
  const Clock& clock() const override { return replica_->clock; }
  absl::StatusOr<bool> Next(std::vector<ElementDots>* chunk) override {
    ++replica_->nexts;
    chunk->clear();
    if (next_ == replica_->chunks.size()) return false;
    *chunk = replica_->chunks[next_++];
    return true;
  }
  bool AtEnd() const override { return next_ == replica_->chunks.size(); }

 private:
  LocalReplica* replica_;
  size_t next_ = 0;
};

// Replicas 1 and 2 answer with the clock of adds (A,1) "a" and (A,2) "b",
// and their first chunk, "a" alone (batches of one); returns the clock.
Clock TwoStreamsAtA(ReadRun& run) {
  const Clock clock = ClockOf({{kA, 1}, {kA, 2}});
  run.Clock(1, clock);
  run.Clock(2, clock);
  run.Chunk(1, 0, false, {E("a", {{kA, 1}})});
  run.Chunk(2, 0, false, {E("a", {{kA, 1}})});
  return clock;
}

TEST_CASE(
    "read coordinator: the first R clocks win, the other fold is stopped, "
    "the merge streams in element order and repairs what a replica lacks") {
  ReadRun run({1, 2, 3}, {0, 1, 2}, 2);
  CHECK(run.FoldOf(1) != 0);
  CHECK(run.FoldOf(2) != 0);
  CHECK(run.FoldOf(3) != 0);
  CHECK(run.FoldOf(1) != run.FoldOf(2));  // A fold id each.
  CHECK(run.phase() == Phase::kGathering);
  run.Clock(1, ClockOf({{kA, 1}, {kA, 2}}));
  CHECK_FALSE(run.client.clock.has_value());
  CHECK(run.phase() == Phase::kGathering);
  run.Clock(2, ClockOf({{kA, 1}}));
  CHECK(run.phase() == Phase::kMerging);
  REQUIRE(run.client.clock.has_value());
  CHECK(*run.client.clock == ClockOf({{kA, 1}, {kA, 2}}));
  CHECK(run.SentTo(3, MessageType::kStopFold) == 1);
  run.Chunk(1, 0, true, {E("a", {{kA, 1}}), E("b", {{kA, 2}})});
  CHECK(run.client.elements.empty());  // Waits for 2's elements.
  run.Chunk(2, 0, true, {E("a", {{kA, 1}})});
  REQUIRE(run.client.done.has_value());
  CHECK(run.client.done->ok());
  CHECK(run.client.Names() == std::vector<std::string>{"a", "b"});
  CHECK(run.RepairedAt(2) == std::vector<std::string>{"b"});
  CHECK(run.RepairedAt(1).empty());
  // Every fold routed to the read is unrouted by its end.
  std::vector<uint64_t> routed = run.driver().routed;
  std::vector<uint64_t> unrouted = run.driver().unrouted;
  std::sort(routed.begin(), routed.end());
  std::sort(unrouted.begin(), unrouted.end());
  CHECK(routed.size() == 3);
  CHECK(routed == unrouted);
}

TEST_CASE(
    "read coordinator: this node's own replica is read through the reader "
    "the driver hands in; its clock comes from the scheduler, never inside "
    "the call that opened it") {
  LocalReplica local;
  local.clock = ClockOf({{kA, 1}, {kA, 2}});
  local.chunks = {{E("a", {{kA, 1}})}, {E("b", {{kA, 2}})}};
  ReadRun run({testing::kSelf, 2, 3}, {0, 1, 2}, 2, /*batch_size=*/1,
              /*limit=*/0, [&local](const RequestOutput::Fold& fold) {
                std::unique_ptr<SetReader> reader;
                if (fold.node == testing::kSelf) {
                  ++local.opened;
                  reader = std::make_unique<FakeReader>(&local);
                }
                return reader;
              });
  CHECK(local.opened == 1);
  CHECK(run.FoldOf(testing::kSelf) == 0);  // No message to itself.
  CHECK(run.driver().folds_opened.size() == 3);
  CHECK(run.driver().routed.size() == 2);  // The local fold is not routed.
  run.Clock(2, ClockOf({{kA, 1}}));
  CHECK_FALSE(run.client.clock.has_value());  // The local clock is due.
  run.driver().Advance(0);
  REQUIRE(run.client.clock.has_value());
  CHECK(*run.client.clock == ClockOf({{kA, 1}, {kA, 2}}));
  CHECK(run.SentTo(3, MessageType::kStopFold) == 1);
  CHECK(local.nexts == 1);  // The first chunk, at once.
  run.Chunk(2, 0, true, {E("a", {{kA, 1}})});
  REQUIRE(run.client.done.has_value());
  CHECK(run.client.done->ok());
  CHECK(run.client.Names() == std::vector<std::string>{"a", "b"});
  CHECK(run.RepairedAt(2) == std::vector<std::string>{"b"});
  CHECK(run.SentTo(testing::kSelf, MessageType::kStopFold) == 0);
}

TEST_CASE(
    "read coordinator: a read that ends as its last clock arrives gives the "
    "client that clock before the end",
    "[regression]") {
  // The defect: the driver handed the client the end of a read and skipped
  // its clock when both came from one input (every chunk had arrived
  // before the R-th clock), so a client's context was empty and a removal
  // or a clear built from it removed nothing (bigsetd's differential and
  // pipelined SADD tests saw removed members come back). The soak did not
  // find it: it never read a clock alone (a read ending in the input that
  // brings its R-th clock is one of nothing but removed elements), and a
  // clear built from an empty read removes nothing the model expects
  // removed. It now reads clocks alone, as bigsetd's DEL does, and the
  // simulator counts reads whose handler saw its contract broken
  // (Simulator::read_contract_violations).
  // "a" was added and removed: the set is empty, its clock is not.
  ReadRun run({1, 2, 3}, {0, 1, 2}, 2);
  const Clock clock = ClockOf({{kA, 1}});
  run.Clock(1, clock);
  run.Chunk(1, 0, true, {});
  run.Chunk(2, 0, true, {});  // Ahead of its clock.
  CHECK_FALSE(run.client.clock.has_value());
  run.Clock(2, clock);  // R clocks, and every chunk: the read ends here.
  REQUIRE(run.client.done.has_value());
  CHECK(run.client.done->ok());
  REQUIRE(run.client.clock.has_value());
  CHECK(*run.client.clock == clock);
  CHECK(run.client.elements.empty());
}

TEST_CASE(
    "read coordinator: a fold this node asks of itself by message (its "
    "replica not readable) is unrouted when the read ends",
    "[regression]") {
  // The defect: the coordinator unrouted only the folds of other nodes, so
  // a fold it asked of its own node by message (while that node hands the
  // partition over) left its route behind for good. The soaks did not look
  // at routes; they now require `node.stale_routes` to be 0.
  ReadRun run({testing::kSelf, 2, 3}, {0, 1, 2}, 2);  // No local reader.
  CHECK(run.FoldOf(testing::kSelf) != 0);
  CHECK(run.driver().routed.size() == 3);
  const Clock clock = ClockOf({{kA, 1}});
  run.Clock(2, clock);
  run.Clock(3, clock);
  run.Chunk(2, 0, true, {E("a", {{kA, 1}})});
  run.Chunk(3, 0, true, {E("a", {{kA, 1}})});
  REQUIRE(run.client.done.has_value());
  CHECK(run.client.done->ok());
  CHECK(run.SentTo(testing::kSelf, MessageType::kStopFold) == 1);
  std::vector<uint64_t> routed = run.driver().routed;
  std::vector<uint64_t> unrouted = run.driver().unrouted;
  std::sort(routed.begin(), routed.end());
  std::sort(unrouted.begin(), unrouted.end());
  CHECK(routed == unrouted);
}

TEST_CASE(
    "read coordinator: a read with a limit delivers no more than it, also "
    "to a client that holds its chunk before asking for the next",
    "[regression]") {
  // The defect: once the limit was reached, the merge after the client's
  // `next` ran with "limit - emitted" = 0, which means no limit. No sink
  // of the node holds chunks under a limit, so no soak could meet it.
  ReadRun run({1, 2, 3}, {0, 1, 2}, 2, /*batch_size=*/1000, /*limit=*/1);
  run.client.hold = true;
  const Clock clock = ClockOf({{kA, 1}, {kA, 2}});
  run.Clock(1, clock);
  run.Clock(2, clock);
  run.Chunk(1, 0, true, {E("a", {{kA, 1}}), E("b", {{kA, 2}})});
  run.Chunk(2, 0, true, {E("a", {{kA, 1}}), E("b", {{kA, 2}})});
  CHECK(run.client.Names() == std::vector<std::string>{"a"});
  CHECK_FALSE(run.client.done.has_value());
  run.ClientNext();
  REQUIRE(run.client.done.has_value());
  CHECK(run.client.done->ok());
  CHECK(run.client.Names() == std::vector<std::string>{"a"});
}

TEST_CASE(
    "read coordinator: a replica's message for the local fold's id, or from "
    "the wrong node, changes nothing") {
  LocalReplica local;
  local.clock = ClockOf({{kA, 1}});
  local.chunks = {{E("a", {{kA, 1}})}};
  ReadRun run({testing::kSelf, 2, 3}, {0, 1, 2}, 2, /*batch_size=*/1000,
              /*limit=*/0, [&local](const RequestOutput::Fold& fold) {
                return fold.node == testing::kSelf
                           ? std::unique_ptr<SetReader>(
                                 std::make_unique<FakeReader>(&local))
                           : nullptr;
              });
  const uint64_t local_fold = run.driver().folds_opened.front();
  msg::ReadClock forged;
  forged.clock = ClockOf({{kA, 7}});
  run.driver().Input([&](ReadCoordinator& m) {
    return m.Step(testing::kSelf, local_fold, forged, run.driver().NowMicros());
  });
  msg::ReadClock wrong_node;
  wrong_node.clock = ClockOf({{kA, 9}});
  const uint64_t fold2 = run.FoldOf(2);
  run.driver().Input([&](ReadCoordinator& m) {
    return m.Step(3, fold2, wrong_node, run.driver().NowMicros());
  });
  run.Clock(2, ClockOf({{kA, 1}}));
  run.driver().Advance(0);
  REQUIRE(run.client.clock.has_value());
  CHECK(*run.client.clock == ClockOf({{kA, 1}}));
  run.Chunk(2, 0, true, {E("a", {{kA, 1}})});
  REQUIRE(run.client.done.has_value());
  CHECK(run.client.Names() == std::vector<std::string>{"a"});
}

TEST_CASE("read coordinator: a remove seen by one replica wins the merge") {
  ReadRun run({1, 2, 3}, {0, 1, 2}, 2);
  run.Clock(1, ClockOf({{kA, 1}}));
  run.Clock(3, ClockOf({{kA, 1}}));  // Saw the add, then removed it.
  run.Chunk(1, 0, true, {E("a", {{kA, 1}})});
  run.Chunk(3, 0, true, {});
  REQUIRE(run.client.done.has_value());
  CHECK(run.client.done->ok());
  CHECK(run.client.elements.empty());
}

TEST_CASE("read coordinator: a chunk that overtakes its clock is kept") {
  ReadRun run({1, 2, 3}, {0, 1, 2}, 2);
  run.Chunk(1, 0, true, {E("a", {{kA, 1}})});  // Before its clock.
  run.Clock(1, ClockOf({{kA, 1}}));
  run.Clock(2, ClockOf({{kA, 1}}));
  run.Chunk(2, 0, true, {E("a", {{kA, 1}})});
  REQUIRE(run.client.done.has_value());
  CHECK(run.client.done->ok());
  CHECK(run.client.Names() == std::vector<std::string>{"a"});
  CHECK(run.SentTo(1, MessageType::kRead) == 1);  // Not asked again.
}

TEST_CASE(
    "read coordinator: a replica silent mid-stream is replaced by another, "
    "which folds from after the last merged element") {
  ReadRun run({1, 2, 3}, {0, 1, 2}, 2, /*batch_size=*/1);
  const Clock clock = TwoStreamsAtA(run);
  CHECK(run.client.Names() == std::vector<std::string>{"a"});
  CHECK(run.SentTo(1, MessageType::kChunkAck) == 1);  // Chunk 1, please.
  run.Chunk(2, 1, true, {E("b", {{kA, 2}})});
  // 1 goes silent: asked again each retry, then replaced after 0.7 s.
  run.driver().Advance(800'000);
  CHECK(run.SentTo(1, MessageType::kChunkAck) >= 2);
  CHECK(run.driver().totals.read_replica_switches == 1);
  const msg::Read* read = run.ReadSentTo(3);
  REQUIRE(read != nullptr);
  CHECK(run.SentTo(3, MessageType::kRead) == 2);  // The first was stopped.
  REQUIRE(read->bounds.start.has_value());
  CHECK(*read->bounds.start == "a");
  CHECK_FALSE(read->bounds.start_inclusive);
  run.Clock(3, clock);
  run.Chunk(3, 0, true, {E("b", {{kA, 2}})});
  REQUIRE(run.client.done.has_value());
  CHECK(run.client.done->ok());
  CHECK(run.client.Names() == std::vector<std::string>{"a", "b"});
}

TEST_CASE("read coordinator: errors from two of three replicas: Unavailable") {
  ReadRun run({1, 2, 3}, {0, 1, 2}, 2);
  run.Fail(1);
  CHECK_FALSE(run.client.done.has_value());
  run.Fail(3);
  REQUIRE(run.client.done.has_value());
  CHECK(absl::IsUnavailable(*run.client.done));
}

TEST_CASE("read coordinator: no clock in time: DeadlineExceeded") {
  ReadRun run({1, 2, 3}, {0, 1, 2}, 2);
  run.Clock(2, ClockOf({{kA, 1}}));
  run.driver().Advance(1'900'000);
  CHECK_FALSE(run.client.done.has_value());
  CHECK(run.SentTo(1, MessageType::kRead) >= 2);  // Asked again.
  run.driver().Advance(2'000'000);
  REQUIRE(run.client.done.has_value());
  CHECK(absl::IsDeadlineExceeded(*run.client.done));
}

TEST_CASE(
    "read coordinator: a slow client keeps its folds open (KeepFold) and "
    "is not timed out; one chunk per replica is buffered meanwhile") {
  ReadRun run({1, 2, 3}, {0, 1, 2}, 2, /*batch_size=*/1);
  run.client.hold = true;
  TwoStreamsAtA(run);
  CHECK(run.client.Names() == std::vector<std::string>{"a"});
  REQUIRE(run.client.next != nullptr);
  CHECK(run.phase() == Phase::kClientHolds);
  // The next chunks are fetched while the client holds "a".
  CHECK(run.SentTo(1, MessageType::kChunkAck) == 1);
  CHECK(run.SentTo(2, MessageType::kChunkAck) == 1);
  run.Chunk(1, 1, false, {E("b", {{kA, 2}})});
  run.Chunk(2, 1, false, {E("b", {{kA, 2}})});
  run.driver().Advance(6'000'000);  // Past the deadline and a keepalive.
  CHECK_FALSE(run.client.done.has_value());
  CHECK(run.SentTo(1, MessageType::kKeepFold) >= 1);
  CHECK(run.SentTo(2, MessageType::kKeepFold) >= 1);
  // Nothing more is fetched while "b" waits in the buffers.
  CHECK(run.SentTo(1, MessageType::kChunkAck) == 1);
  CHECK(run.SentTo(2, MessageType::kChunkAck) == 1);
  CHECK(run.client.Names() == std::vector<std::string>{"a"});
  CHECK(run.phase() == Phase::kClientHolds);
  run.ClientNext();
  CHECK(run.client.Names() == std::vector<std::string>{"a", "b"});
  CHECK(run.phase() == Phase::kClientHolds);  // It holds "b" now.
  CHECK(run.SentTo(1, MessageType::kChunkAck) == 2);
  run.Chunk(1, 2, true, {});
  run.Chunk(2, 2, true, {});
  if (run.client.next != nullptr) run.ClientNext();
  REQUIRE(run.client.done.has_value());
  CHECK(run.client.done->ok());
  CHECK(run.client.Names() == std::vector<std::string>{"a", "b"});
}

}  // namespace
}  // namespace bigset::testing
