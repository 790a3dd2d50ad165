// CountCoordinator (lib/cluster/count_coordinator.h) driven alone through
// a fake host (fake_coordinator_host.h): the test plays the replicas, each
// case a table of answers and the outcome after each. No node, no
// simulator, no store.

#include "cluster/count_coordinator.h"

#include <catch2/catch.hpp>
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

using Outcome = std::optional<absl::StatusOr<std::optional<uint64_t>>>;

// What a replica answers.
struct Answer {
  NodeId from = 0;
  bool found = true;
  uint64_t count = 0;
  uint64_t set_digest = 0;
  uint64_t tombstone_digest = 0;
  absl::Status status;
};

Answer Holds(NodeId from, uint64_t count, uint64_t digest,
             uint64_t tombstone_digest = 0) {
  return Answer{from, true, count, digest, tombstone_digest, {}};
}
Answer Lacks(NodeId from) { return Answer{from, false, 0, 0, 0, {}}; }
Answer Fails(NodeId from) {
  return Answer{from, false, 0, 0, 0, absl::UnavailableError("closing")};
}

class CountRun {
 public:
  CountRun(std::vector<NodeId> serving, std::vector<uint32_t> places, int r,
           bool notfound_ok = true)
      : host_(std::move(serving), std::move(places)) {
    ClusterReadOptions options;
    options.r = r;
    options.notfound_ok = notfound_ok;
    options.timeout_micros = 2'000'000;
    options.retry_micros = 200'000;
    id_ = host_.NextRequestId();
    host_.requests()
        .Add(std::make_unique<CountCoordinator>(
            &host_, id_, "s", options,
            [this](absl::StatusOr<std::optional<uint64_t>> r) {
              REQUIRE_FALSE(outcome_.has_value());  // Once.
              outcome_ = std::move(r);
            }))
        ->Start();
  }

  // Delivers `a` to the coordinator if it still runs.
  void Deliver(const Answer& a) {
    CountCoordinator* count = host_.requests().Find<CountCoordinator>(id_);
    if (count == nullptr) return;
    msg::CountReply reply;
    reply.status = a.status;
    reply.found = a.found;
    reply.count = a.count;
    reply.set_digest = a.set_digest;
    reply.tombstone_digest = a.tombstone_digest;
    count->OnReply(a.from, reply);
  }

  // The nodes sent a kCount so far, in order.
  std::vector<NodeId> Asked() const {
    std::vector<NodeId> to;
    for (const auto& [node, m] : host_.sent) {
      if (m.type() == MessageType::kCount) to.push_back(node);
    }
    return to;
  }

  FakeHost& host() { return host_; }
  const Outcome& outcome() const { return outcome_; }
  bool pending() const { return !outcome_.has_value(); }
  bool finished_cleanly() {
    return host_.requests().Find<CountCoordinator>(id_) == nullptr;
  }

 private:
  FakeHost host_;
  uint64_t id_ = 0;
  Outcome outcome_;
};

// The outcome expected after an answer: still waiting, a count, "the
// replicas differ" (nullopt: the node counts with a merged read), or an
// error of some code.
struct Expect {
  enum Kind { kPending, kCount, kDiffer, kError } kind = kPending;
  uint64_t count = 0;
  absl::StatusCode code = absl::StatusCode::kOk;
};
Expect Pending() { return {Expect::kPending}; }
Expect CountIs(uint64_t n) { return {Expect::kCount, n}; }
Expect Differ() { return {Expect::kDiffer}; }
Expect Error(absl::StatusCode code) { return {Expect::kError, 0, code}; }

void CheckOutcome(const CountRun& run, const Expect& want) {
  switch (want.kind) {
    case Expect::kPending:
      CHECK(run.pending());
      return;
    case Expect::kCount:
      REQUIRE(run.outcome().has_value());
      REQUIRE(run.outcome()->ok());
      REQUIRE(run.outcome()->value().has_value());
      CHECK(*run.outcome()->value() == want.count);
      return;
    case Expect::kDiffer:
      REQUIRE(run.outcome().has_value());
      REQUIRE(run.outcome()->ok());
      CHECK_FALSE(run.outcome()->value().has_value());
      return;
    case Expect::kError:
      REQUIRE(run.outcome().has_value());
      REQUIRE_FALSE(run.outcome()->ok());
      CHECK(run.outcome()->status().code() == want.code);
      return;
  }
}

struct Case {
  const char* name;
  // Each answer and the outcome right after it.
  std::vector<std::pair<Answer, Expect>> steps;
  bool notfound_ok = true;
  std::vector<NodeId> serving = {1, 2, 3};
  std::vector<uint32_t> places = {0, 1, 2};
  int r = 2;
};

TEST_CASE("count coordinator: answers by quorum, a table of cases") {
  const std::vector<Case> cases = {
      {.name = "two agreeing replicas answer their count",
       .steps = {{Holds(1, 5, 77), Pending()}, {Holds(2, 5, 77), CountIs(5)}}},
      {.name = "set digests that differ send the count to a merged read",
       .steps = {{Holds(1, 5, 77), Pending()}, {Holds(3, 5, 78), Differ()}}},
      {.name = "tombstone digests that differ do too",
       .steps = {{Holds(1, 5, 77, 1), Pending()},
                 {Holds(2, 5, 77, 2), Differ()}}},
      {.name = "counts that differ under equal digests do too",
       .steps = {{Holds(1, 5, 77), Pending()}, {Holds(2, 6, 77), Differ()}}},
      {.name = "a replica that keeps no digests (0) proves nothing",
       .steps = {{Holds(1, 5, 0), Pending()}, {Holds(2, 5, 0), Differ()}}},
      {.name = "no replica holds the set: 0",
       .steps = {{Lacks(2), Pending()}, {Lacks(3), CountIs(0)}}},
      {.name = "one holds it and one does not: a merged read decides",
       .steps = {{Lacks(2), Pending()}, {Holds(3, 4, 9), Differ()}}},
      {.name =
           "with notfound_ok off an empty replica waits for those that hold it",
       .steps = {{Lacks(1), Pending()},
                 {Holds(2, 5, 77), Pending()},
                 {Holds(3, 5, 77), CountIs(5)}},
       .notfound_ok = false},
      {.name = "with notfound_ok off and nobody holding it, all answers give 0",
       .steps = {{Lacks(1), Pending()},
                 {Lacks(2), Pending()},
                 {Lacks(3), CountIs(0)}},
       .notfound_ok = false},
      {.name = "a duplicate answer counts once",
       .steps = {{Holds(1, 5, 77), Pending()},
                 {Holds(1, 5, 77), Pending()},
                 {Holds(3, 5, 77), CountIs(5)}}},
      {.name = "an answer from a node not asked is ignored",
       .steps = {{Holds(7, 5, 77), Pending()},
                 {Holds(1, 5, 77), Pending()},
                 {Holds(2, 5, 77), CountIs(5)}}},
      {.name =
           "errors leaving fewer than R places that can answer: Unavailable",
       .steps = {{Fails(1), Pending()},
                 {Fails(2), Error(absl::StatusCode::kUnavailable)}}},
      {.name = "an error from one replica: the other two answer",
       .steps = {{Fails(2), Pending()},
                 {Holds(1, 5, 77), Pending()},
                 {Holds(3, 5, 77), CountIs(5)}}},
      {.name =
           "a leaver and its taker are one place, counted once both answered",
       .steps = {{Holds(1, 5, 77), Pending()},
                 {Holds(2, 5, 77), Pending()},
                 {Holds(3, 5, 77), Pending()},
                 {Holds(4, 5, 77), CountIs(5)}},
       // 4 took 3's place.
       .serving = {1, 2, 3, 4},
       .places = {0, 1, 2, 2},
       .r = 3},
      {.name = "a leaver and its taker that differ send it to a merged read",
       .steps = {{Holds(1, 5, 77), Pending()},
                 {Holds(3, 5, 77), Pending()},
                 {Holds(4, 6, 78), Pending()},
                 {Holds(2, 5, 77), Differ()}},
       .serving = {1, 2, 3, 4},
       .places = {0, 1, 2, 2},
       .r = 3},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    CountRun run(c.serving, c.places, c.r, c.notfound_ok);
    CHECK(run.Asked() == c.serving);  // Start asks every replica once.
    for (size_t i = 0; i < c.steps.size(); ++i) {
      CAPTURE(i);
      run.Deliver(c.steps[i].first);
      CheckOutcome(run, c.steps[i].second);
    }
    if (!run.pending()) CHECK(run.finished_cleanly());
  }
}

TEST_CASE(
    "count coordinator: asks the silent replicas again each retry, then "
    "fails with DeadlineExceeded at the deadline") {
  CountRun run({1, 2, 3}, {0, 1, 2}, 2);
  run.Deliver(Holds(2, 5, 77));
  run.host().sent.clear();
  run.host().Advance(200'000);
  CHECK(run.Asked() == std::vector<NodeId>{1, 3});  // Not 2: it answered.
  CHECK(run.pending());
  run.host().Advance(1'700'000);  // 1.9 s: still in time.
  CHECK(run.pending());
  CHECK(run.Asked().size() == 2 * 9);
  run.host().Advance(200'000);
  CheckOutcome(run, Error(absl::StatusCode::kDeadlineExceeded));
  CHECK(run.finished_cleanly());
  // Nothing runs after the answer: no more sends, no second answer.
  const size_t sent = run.host().sent.size();
  run.host().Advance(2'000'000);
  CHECK(run.host().sent.size() == sent);
}

TEST_CASE("count coordinator: a late answer after the deadline is ignored") {
  CountRun run({1, 2, 3}, {0, 1, 2}, 2);
  run.Deliver(Holds(1, 5, 77));
  run.host().Advance(2'000'000);
  CheckOutcome(run, Error(absl::StatusCode::kDeadlineExceeded));
  run.Deliver(Holds(2, 5, 77));  // Its coordinator is gone: nothing.
  CheckOutcome(run, Error(absl::StatusCode::kDeadlineExceeded));
}

}  // namespace
}  // namespace bigset
