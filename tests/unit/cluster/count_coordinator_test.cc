// CountCoordinator (lib/cluster/count_coordinator.h), a state machine
// driven alone (machine_driver.h carries out its outputs): the test plays
// the replicas, each case a table of answers and the outcome after each.
// No node, no simulator, no store.

#include "cluster/count_coordinator.h"

#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "machine_driver.h"
#include "net/message.h"

namespace bigset::testing {
namespace {

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
           bool notfound_ok = true) {
    ClusterReadOptions options;
    options.r = r;
    options.notfound_ok = notfound_ok;
    options.timeout_micros = 2'000'000;
    options.retry_micros = 200'000;
    QuorumReadSetup setup{.partition = 3,
                          .serving = std::move(serving),
                          .places = std::move(places),
                          .self = kSelf,
                          .now = driver_.NowMicros()};
    driver_.Begin(
        std::make_unique<CountCoordinator>(
            101, "s", std::move(setup), options,
            [this](absl::StatusOr<std::optional<uint64_t>> r) {
              REQUIRE_FALSE(outcome_.has_value());  // Once.
              outcome_ = std::move(r);
            }),
        [this](CountCoordinator& c) { return c.Start(driver_.NowMicros()); });
  }

  // Delivers `a` to the coordinator if it still runs.
  void Deliver(const Answer& a) {
    msg::CountReply reply;
    reply.status = a.status;
    reply.found = a.found;
    reply.count = a.count;
    reply.set_digest = a.set_digest;
    reply.tombstone_digest = a.tombstone_digest;
    driver_.Input([&](CountCoordinator& c) { return c.Step(a.from, reply); });
  }

  // The nodes sent a kCount so far, in order.
  std::vector<NodeId> Asked() const {
    std::vector<NodeId> to;
    for (const auto& [node, m] : driver_.sent) {
      if (m.type() == MessageType::kCount) to.push_back(node);
    }
    return to;
  }

  testing::MachineDriver<CountCoordinator>& host() { return driver_; }
  const Outcome& outcome() const { return outcome_; }
  bool pending() const { return !outcome_.has_value(); }
  // The machine is gone once it answered, and no tick is left for it.
  bool finished_cleanly() const {
    return !driver_.running() && !driver_.tick_at().has_value();
  }

 private:
  testing::MachineDriver<CountCoordinator> driver_;
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
    "count coordinator: asks the silent replicas again, each round waiting "
    "twice as long, then fails with DeadlineExceeded at the deadline") {
  CountRun run({1, 2, 3}, {0, 1, 2}, 2);
  run.Deliver(Holds(2, 5, 77));
  run.host().sent.clear();
  run.host().Advance(200'000);
  CHECK(run.Asked() == std::vector<NodeId>{1, 3});  // Not 2: it answered.
  CHECK(run.pending());
  run.host().Advance(399'000);  // The next round 400 ms after the first.
  CHECK(run.Asked().size() == 2);
  run.host().Advance(1'000);
  CHECK(run.Asked().size() == 2 * 2);
  run.host().Advance(1'300'000);  // 1.9 s: still in time.
  CHECK(run.pending());
  CHECK(run.Asked().size() == 2 * 3);  // At 0.2, 0.6 and 1.4 s.
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

// The machine's outputs themselves, input by input (no driver).
TEST_CASE("count coordinator: the output of each input") {
  ClusterReadOptions options;
  options.r = 2;
  options.timeout_micros = 2'000'000;
  options.retry_micros = 200'000;
  std::optional<absl::StatusOr<std::optional<uint64_t>>> answer;
  CountCoordinator c(101, "s",
                     QuorumReadSetup{.partition = 3,
                                     .serving = {1, 2, 3},
                                     .places = {0, 1, 2},
                                     .self = kSelf,
                                     .now = 0},
                     options, [&](absl::StatusOr<std::optional<uint64_t>> r) {
                       answer = std::move(r);
                     });
  auto to = [](const RequestOutput& out) {
    std::vector<NodeId> nodes;
    for (const RequestOutput::Send& s : out.sends) {
      absl::StatusOr<Message> m = DecodeMessage(s.bytes);
      REQUIRE(m.ok());
      CHECK(m->type() == MessageType::kCount);
      CHECK(m->header.request_id == 101);
      CHECK(m->header.partition == 3);
      CHECK_FALSE(s.first);
      nodes.push_back(s.to);
    }
    return nodes;
  };
  msg::CountReply holds;
  holds.found = true;
  holds.count = 5;
  holds.set_digest = 77;

  using Phase = CountCoordinator::Phase;
  CHECK(c.phase() == Phase::kIdle);
  // Start: every replica asked; the first tick at the first retry.
  const RequestOutput start = c.Start(1'000'000);
  CHECK(c.phase() == Phase::kAskingAll);
  CHECK(to(start) == std::vector<NodeId>{1, 2, 3});
  CHECK(start.tick_at == 1'200'000);
  CHECK_FALSE(start.done);
  // An answer short of R: nothing to do, no tick asked.
  const RequestOutput first = c.Step(2, holds);
  CHECK(first.sends.empty());
  CHECK(first.tick_at == 0);
  CHECK_FALSE(first.done);
  // Its duplicate, and a node not in the list: nothing.
  CHECK(c.Step(2, holds).sends.empty());
  CHECK_FALSE(c.Step(7, holds).done);
  // The tick: the silent replicas asked again, the next tick asked.
  const RequestOutput tick = c.Tick(1'200'000);
  CHECK(to(tick) == std::vector<NodeId>{1, 3});
  CHECK(tick.retransmits == 2);
  CHECK(tick.tick_at == 1'600'000);  // The next round waits twice as long.
  // A tick before the retry is due sends nothing but asks for the next.
  const RequestOutput early = c.Tick(1'300'000);
  CHECK(early.sends.empty());
  CHECK(early.tick_at == 1'600'000);
  // R agreeing answers: done, no tick; the answer runs when taken.
  CHECK(c.phase() == Phase::kAskingAll);
  const RequestOutput last = c.Step(3, holds);
  CHECK(c.phase() == Phase::kAnswered);
  CHECK(last.done);
  CHECK(last.tick_at == 0);
  CHECK_FALSE(answer.has_value());
  c.TakeAnswer()();
  REQUIRE(answer.has_value());
  REQUIRE(answer->ok());
  CHECK(**answer == std::optional<uint64_t>(5));
  // Once done, inputs do nothing.
  CHECK(c.Tick(3'000'000).sends.empty());
  CHECK_FALSE(c.Tick(3'000'000).done);
  CHECK(c.Step(1, holds).sends.empty());
  CHECK(c.phase() == Phase::kAnswered);
}

}  // namespace
}  // namespace bigset::testing
