// NodeRunner's lifecycle against callers on other threads: one node of a
// one-node ring on loopback, closed while threads call into it.

#include "bigset/network/node_runner.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "temp_dir.h"

namespace bigset::testing {
namespace {

constexpr uint32_t kSeed = 20261127;

using ::bigset::testing::TempDir;

// Node 1 of a ring of `members` (N = n) on loopback; the other members
// have no address, so they never answer.
std::unique_ptr<NodeRunner> StartNode(const std::string& dir,
                                      std::vector<NodeId> members = {1},
                                      int n = 1) {
  RingOptions ro;
  ro.ring_size = 8;
  ro.n = n;
  ro.epoch = 1;
  absl::StatusOr<Ring> ring = Ring::Create(members, ro);
  REQUIRE(ring.ok());
  NodeRunnerOptions o;
  o.id = 1;
  o.data_dir = dir;
  o.ring = *ring;
  o.addresses = std::make_shared<AddressBook>();
  o.transport.listen_host = "127.0.0.1";
  o.transport.listen_port = 0;
  o.transport.plaintext = true;
  absl::StatusOr<std::unique_ptr<NodeRunner>> runner =
      NodeRunner::Start(std::move(o));
  REQUIRE(runner.ok());
  return std::move(*runner);
}

TEST_CASE("node runner: calls racing Close end with its error, never hang") {
  // Regression (found by review): Post checked `closed` and then posted; a
  // Close that ran whole in between stopped the thread, and the posted
  // call never ran: its caller waited forever (bigsetd's shutdown then
  // waited for that caller). Post now checks and posts under the lock
  // Close sets `closed` with.
  std::mt19937 rng(kSeed);
  constexpr int kRounds = 40;
  constexpr int kCallers = 3;
  for (int round = 0; round < kRounds; ++round) {
    INFO("seed " << kSeed << ", round " << round);
    TempDir dir;
    std::unique_ptr<NodeRunner> runner = StartNode(dir.path());
    absl::Mutex mu;
    int ended = 0;
    std::vector<absl::Status> last(kCallers);
    std::vector<int> calls(kCallers, 0);
    std::vector<std::thread> callers;
    for (int i = 0; i < kCallers; ++i) {
      callers.emplace_back([&, i]() {
        while (true) {
          absl::StatusOr<NodeStats> stats = runner->Stats();
          ++calls[i];
          if (!stats.ok()) {
            last[i] = stats.status();
            break;
          }
        }
        absl::MutexLock lock(&mu);
        ++ended;
      });
    }
    std::this_thread::sleep_for(std::chrono::microseconds(
        std::uniform_int_distribution<>(0, 2000)(rng)));
    REQUIRE(runner->Close().ok());
    bool all_ended = false;
    {
      absl::MutexLock lock(&mu);
      auto all = [&]() { return ended == kCallers; };
      all_ended = mu.AwaitWithTimeout(absl::Condition(&all), absl::Seconds(20));
    }
    // A caller that never returned cannot be joined: report, then stop.
    if (!all_ended) {
      FAIL_CHECK("a call racing Close never returned");
      std::_Exit(1);
    }
    for (std::thread& t : callers) t.join();
    for (int i = 0; i < kCallers; ++i) {
      CHECK(absl::IsFailedPrecondition(last[i]));
      CHECK(calls[i] >= 1);
    }
    // And after Close, at once.
    CHECK(absl::IsFailedPrecondition(runner->Stats().status()));
  }
}

TEST_CASE(
    "node runner: requests waiting on unreachable peers are answered by Close "
    "(ReadAndWait hung)",
    "[regression]") {
  // Node 1 of a three-node ring (N = 3) whose peers never answer (they have
  // no address): a read with R = 2 and a write with W = 2 wait for them.
  // Node::Close used to drop their coordinators without a word, so a thread
  // in ReadAndWait or UpdateAndWait never returned. The requests are posted
  // from this thread, so they reach the node before Close does.
  TempDir dir;
  std::unique_ptr<NodeRunner> runner = StartNode(dir.path(), {1, 2, 3}, 3);
  // Long timeouts: only Close can end these requests within the test.
  ClusterReadOptions r2;
  r2.r = 2;
  r2.timeout_micros = 600'000'000;
  ClusterWriteOptions w2;
  w2.w = 2;
  w2.timeout_micros = 600'000'000;
  struct Done final : ReadHandler {
    void OnClock(const Clock&) override {}
    void OnChunk(std::vector<ElementDots>*,
                 std::function<void()> next) override {
      next();
    }
    void OnDone(absl::Status s) override { status.set_value(s); }
    std::promise<absl::Status> status;
  };
  Done read;
  std::future<absl::Status> read_done = read.status.get_future();
  runner->Read("s", r2, &read);
  auto write = std::make_shared<std::promise<absl::Status>>();
  std::future<absl::Status> write_done = write->get_future();
  runner->Update(
      "s", {UpdateOp::Add("x")}, w2,
      [write](absl::StatusOr<Delta> d) { write->set_value(d.status()); });
  // Both wait for the peers.
  CHECK(read_done.wait_for(std::chrono::milliseconds(300)) ==
        std::future_status::timeout);
  CHECK(write_done.wait_for(std::chrono::milliseconds(0)) ==
        std::future_status::timeout);
  REQUIRE(runner->Close().ok());
  // Answered within Close, on the runner's thread.
  if (read_done.wait_for(std::chrono::seconds(20)) !=
          std::future_status::ready ||
      write_done.wait_for(std::chrono::seconds(20)) !=
          std::future_status::ready) {
    FAIL_CHECK("a request waiting on the peers outlived Close");
    std::_Exit(1);
  }
  CHECK(absl::IsUnavailable(read_done.get()));
  CHECK(absl::IsUnavailable(write_done.get()));
}

TEST_CASE("node runner: Close and CompactPartition from a callback refuse") {
  // Both wait for the runner's thread: called on it they would never end.
  TempDir dir;
  std::unique_ptr<NodeRunner> runner = StartNode(dir.path());
  std::promise<std::pair<absl::Status, absl::Status>> got;
  std::future<std::pair<absl::Status, absl::Status>> result = got.get_future();
  ClusterWriteOptions w1;
  w1.w = 1;
  std::vector<absl::Status> waits;
  runner->Update("s", {UpdateOp::Add("x")}, w1, [&](absl::StatusOr<Delta>) {
    // And every call that waits for the runner's thread.
    waits.push_back(
        runner->UpdateAndWait("s", {UpdateOp::Add("y")}, w1).status());
    waits.push_back(runner->ReadAndWait("s", ClusterReadOptions()).status());
    waits.push_back(
        runner->ContainsAllAndWait("s", {"x"}, ClusterReadOptions()).status());
    waits.push_back(runner->Stats().status());
    got.set_value({runner->Close(), runner->CompactPartition(0)});
  });
  REQUIRE(result.wait_for(std::chrono::seconds(20)) ==
          std::future_status::ready);
  auto [close, compact] = result.get();
  CHECK(absl::IsFailedPrecondition(close));
  CHECK(absl::IsFailedPrecondition(compact));
  REQUIRE(waits.size() == 4);
  for (const absl::Status& s : waits) CHECK(absl::IsFailedPrecondition(s));
  CHECK(runner->Close().ok());
  // A thread made after the runner's ended may get its id: Close again
  // from it is still the idempotent OK, and calls get "closed".
  for (int i = 0; i < 8; ++i) {
    absl::Status again, stats;
    std::thread([&]() {
      again = runner->Close();
      stats = runner->Stats().status();
    }).join();
    CHECK(again.ok());
    CHECK(absl::IsFailedPrecondition(stats));
    CHECK(stats.message().find("closed") != std::string_view::npos);
  }
}

}  // namespace
}  // namespace bigset::testing
