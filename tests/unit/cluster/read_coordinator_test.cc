// ReadCoordinator (lib/cluster/read_coordinator.h) driven alone through a
// fake host (fake_coordinator_host.h): the test plays the replicas' folds
// (clocks, chunks) and a client's sink. No node, no simulator, no store.

#include "cluster/read_coordinator.h"

#include <catch2/catch.hpp>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cluster/read_sink.h"
#include "cluster/request_registry.h"
#include "fake_coordinator_host.h"
#include "net/message.h"

namespace bigset {
namespace {

using testing::ClockOf;
using testing::FakeHost;

constexpr uint64_t kA = 0xA;

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
          uint32_t batch_size = 1000)
      : host_(std::move(serving), std::move(places)) {
    ClusterReadOptions options;
    options.r = r;
    options.batch_size = batch_size;
    options.timeout_micros = 2'000'000;
    options.retry_micros = 200'000;
    options.replica_timeout_micros = 700'000;
    options.keepalive_micros = 5'000'000;
    id_ = host_.NextRequestId();
    host_.requests()
        .Add(std::make_unique<ReadCoordinator>(
            &host_, id_, "s", options, ElementBounds(), 0,
            std::make_unique<ClientSink>(&client)))
        ->Start();
  }

  // The fold id of the last kRead sent to `node` (0: none).
  uint64_t FoldOf(NodeId node) const {
    uint64_t fold = 0;
    for (const auto& [to, m] : host_.sent) {
      if (to == node && m.type() == MessageType::kRead) {
        fold = m.header.request_id;
      }
    }
    return fold;
  }
  // The last kRead sent to `node`.
  const msg::Read* ReadSentTo(NodeId node) const {
    const msg::Read* read = nullptr;
    for (const auto& [to, m] : host_.sent) {
      if (to == node && m.type() == MessageType::kRead) {
        read = m.As<msg::Read>();
      }
    }
    return read;
  }
  size_t SentTo(NodeId node, MessageType type) const {
    return host_.SentTo(node, type);
  }
  std::vector<std::string> RepairedAt(NodeId node) const {
    return host_.RepairedAt(node);
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
    if (ReadCoordinator* read =
            host_.requests().FindByRoute<ReadCoordinator>(fold)) {
      read->OnChunk(fold, node, parsed_seq, parsed_last, encoded);
    }
  }

  FakeHost& host() { return host_; }
  // The client asks for more; the read resumes from the scheduler.
  void ClientNext() {
    client.Next();
    host_.Advance(0);
  }

  Client client;

 private:
  void Deliver(NodeId node, msg::ReadClock& m) {
    const uint64_t fold = FoldOf(node);
    REQUIRE(fold != 0);
    if (ReadCoordinator* read =
            host_.requests().FindByRoute<ReadCoordinator>(fold)) {
      read->OnClock(fold, node, m);
    }
  }

  FakeHost host_;
  uint64_t id_ = 0;
};

ElementDots E(std::string element, std::vector<Dot> dots) {
  return ElementDots{std::move(element), std::move(dots)};
}

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
  run.Clock(1, ClockOf({{kA, 1}, {kA, 2}}));
  CHECK_FALSE(run.client.clock.has_value());
  run.Clock(2, ClockOf({{kA, 1}}));
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
  run.host().Advance(800'000);
  CHECK(run.SentTo(1, MessageType::kChunkAck) >= 2);
  CHECK(run.host().stats().read_replica_switches == 1);
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
  run.host().Advance(1'900'000);
  CHECK_FALSE(run.client.done.has_value());
  CHECK(run.SentTo(1, MessageType::kRead) >= 2);  // Asked again.
  run.host().Advance(2'000'000);
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
  // The next chunks are fetched while the client holds "a".
  CHECK(run.SentTo(1, MessageType::kChunkAck) == 1);
  CHECK(run.SentTo(2, MessageType::kChunkAck) == 1);
  run.Chunk(1, 1, false, {E("b", {{kA, 2}})});
  run.Chunk(2, 1, false, {E("b", {{kA, 2}})});
  run.host().Advance(6'000'000);  // Past the deadline and a keepalive.
  CHECK_FALSE(run.client.done.has_value());
  CHECK(run.SentTo(1, MessageType::kKeepFold) >= 1);
  CHECK(run.SentTo(2, MessageType::kKeepFold) >= 1);
  // Nothing more is fetched while "b" waits in the buffers.
  CHECK(run.SentTo(1, MessageType::kChunkAck) == 1);
  CHECK(run.SentTo(2, MessageType::kChunkAck) == 1);
  CHECK(run.client.Names() == std::vector<std::string>{"a"});
  run.ClientNext();
  CHECK(run.client.Names() == std::vector<std::string>{"a", "b"});
  CHECK(run.SentTo(1, MessageType::kChunkAck) == 2);
  run.Chunk(1, 2, true, {});
  run.Chunk(2, 2, true, {});
  if (run.client.next != nullptr) run.ClientNext();
  REQUIRE(run.client.done.has_value());
  CHECK(run.client.done->ok());
  CHECK(run.client.Names() == std::vector<std::string>{"a", "b"});
}

}  // namespace
}  // namespace bigset
