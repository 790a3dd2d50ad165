// QueryCoordinator (lib/cluster/query_coordinator.h), a state machine
// driven alone (machine_driver.h carries out its outputs): whom it asks and
// when (the hedge),
// the ORSWOT merge of R places' answers, the repairs it sends, and how a
// reply that cannot help changes what it waits for. No node, no
// simulator, no store.

#include "cluster/query_coordinator.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "machine_driver.h"
#include "net/message.h"

namespace bigset::testing {
namespace {

constexpr uint64_t kActor = 0xA;

class QueryRun {
 public:
  QueryRun(std::vector<NodeId> serving, std::vector<uint32_t> places,
           ClusterReadOptions options,
           std::vector<std::string> elements = {"a", "b"})
      : serving_(std::move(serving)), places_(std::move(places)) {
    options.timeout_micros = 2'000'000;
    options.retry_micros = 200'000;
    Begin(options, std::move(elements));
  }

  // A second query through the same driver (its hedge state carries over,
  // as the node's does).
  void Begin(const ClusterReadOptions& options,
             std::vector<std::string> elements = {"a", "b"}) {
    elements_ = elements;
    outcome_.reset();
    ++id_;
    QuorumReadSetup setup{.partition = 3,
                          .serving = serving_,
                          .places = places_,
                          .self = kSelf,
                          .now = driver_.NowMicros()};
    driver_.Begin(std::make_unique<QueryCoordinator>(
                      id_, "s", std::move(setup), std::move(elements), options,
                      [this](absl::StatusOr<Membership> r) {
                        REQUIRE_FALSE(outcome_.has_value());  // Once.
                        outcome_ = std::move(r);
                      }),
                  [this](QueryCoordinator& q) {
                    const uint64_t now = driver_.NowMicros();
                    return q.Start(now, driver_.slow);
                  });
  }

  // Replies for `from`: `held` are the elements it holds with their dots
  // (one entry per element asked, as a replica answers), under `clock`.
  void Reply(NodeId from, const Clock& clock,
             std::vector<std::pair<std::string, std::vector<Dot>>> held) {
    msg::QueryReply reply;
    reply.clock = clock;
    for (const std::string& e : elements_) {
      ElementDots& out = reply.elements.emplace_back();
      out.element = e;
      for (auto& [element, dots] : held) {
        if (element == e) out.dots = dots;
      }
    }
    Deliver(from, reply);
  }
  void Deliver(NodeId from, msg::QueryReply& reply) {
    driver_.Input([&](QueryCoordinator& q) { return q.Step(from, reply); });
  }

  // The nodes asked (kQuery sent) so far, in order.
  std::vector<NodeId> Asked() const {
    std::vector<NodeId> to;
    for (const auto& [node, m] : driver_.sent) {
      if (m.type() == MessageType::kQuery) to.push_back(node);
    }
    return to;
  }
  std::vector<std::string> RepairedAt(NodeId node) const {
    return driver_.RepairedAt(node);
  }

  testing::MachineDriver<QueryCoordinator>& host() { return driver_; }
  uint64_t id() const { return id_; }
  bool pending() const { return !outcome_.has_value(); }
  const absl::StatusOr<Membership>& result() const {
    REQUIRE(outcome_.has_value());
    return *outcome_;
  }
  // The dots the answer gives `element`.
  std::vector<Dot> DotsOf(const std::string& element) const {
    REQUIRE(result().ok());
    for (const ElementDots& e : result()->elements) {
      if (e.element == element) return e.dots;
    }
    FAIL("element " << element << " not in the answer");
    return {};
  }

 private:
  std::vector<NodeId> serving_;
  std::vector<uint32_t> places_;
  testing::MachineDriver<QueryCoordinator> driver_;
  uint64_t id_ = 100;
  std::vector<std::string> elements_;
  std::optional<absl::StatusOr<Membership>> outcome_;
};

ClusterReadOptions Options(int r, uint64_t hedge_micros,
                           bool notfound_ok = true) {
  ClusterReadOptions o;
  o.r = r;
  o.query_hedge_micros = hedge_micros;
  o.notfound_ok = notfound_ok;
  return o;
}

TEST_CASE("query coordinator: without a hedge every replica is asked") {
  QueryRun run({1, 2, 3}, {0, 1, 2}, Options(2, 0));
  CHECK(run.Asked() == std::vector<NodeId>{1, 2, 3});
  CHECK(run.host().sent_first.empty());
}

TEST_CASE(
    "query coordinator: with a hedge, R places first (this node's own "
    "ahead of the queue), the rest when the hedge runs out") {
  QueryRun run({1, kSelf, 2}, {0, 1, 2}, Options(2, 20'000));
  // Its own replica and the list's first other node; its own is sent first
  // but after the peers', so that they work meanwhile.
  CHECK(run.Asked() == std::vector<NodeId>{1, kSelf});
  CHECK(run.host().sent_first == std::vector<NodeId>{kSelf});
  run.host().Advance(19'000);
  CHECK(run.Asked().size() == 2);
  run.host().Advance(1'000);
  CHECK(run.Asked() == std::vector<NodeId>{1, kSelf, 2});
  CHECK(run.host().totals.queries_hedged == 1);
  // Nobody is marked slow yet: 1 may still answer first.
  CHECK(run.host().slow.Rank(1, 3, run.host().NowMicros()) == 0);
  Clock clock;
  run.Reply(kSelf, clock, {});
  run.Reply(2, clock, {});
  CHECK_FALSE(run.pending());
  // 2, asked after 1, answered before it: for the next second, queries
  // ask 1 last. They still ask only R places.
  CHECK(run.host().slow.Rank(1, 3, run.host().NowMicros()) > 0);
  CHECK(run.host().slow.Rank(2, 3, run.host().NowMicros()) == 0);
  run.host().sent.clear();
  run.Begin(Options(2, 20'000));
  CHECK(run.Asked() == std::vector<NodeId>{2, kSelf});
  // After that second, the list's order again.
  run.host().Advance(SlowReplicas::kSlowMicros);
  run.host().sent.clear();
  run.Begin(Options(2, 20'000));
  CHECK(run.Asked() == std::vector<NodeId>{1, kSelf});
}

TEST_CASE(
    "query coordinator: a replica slow lately is asked last; of two, the "
    "one slow longest ago first") {
  QueryRun run({1, 2, 3, kSelf}, {0, 1, 2, 3}, Options(2, 20'000));
  CHECK(run.Asked() == std::vector<NodeId>{1, kSelf});
  // The hedge runs out with 1 silent: 2 and 3 are asked, 1 marked.
  run.host().Advance(20'000);
  CHECK(run.Asked() == std::vector<NodeId>{1, kSelf, 2, 3});
  Clock clock;
  run.Reply(kSelf, clock, {});
  run.Reply(2, clock, {});
  CHECK_FALSE(run.pending());
  run.host().Advance(100'000);
  run.host().sent.clear();
  run.Begin(Options(2, 20'000));
  CHECK(run.Asked() == std::vector<NodeId>{2, kSelf});
  // 2 fails at once: it is marked too, later than 1; 3 answers.
  msg::QueryReply failed;
  failed.status = absl::UnavailableError("closing");
  run.Deliver(2, failed);
  CHECK(run.Asked() == std::vector<NodeId>{2, kSelf, 1, 3});
  run.Reply(kSelf, clock, {});
  run.Reply(3, clock, {});
  CHECK_FALSE(run.pending());
  // 3 first (never slow); then 1, marked before 2.
  run.host().sent.clear();
  run.Begin(Options(3, 20'000));
  CHECK(run.Asked() == std::vector<NodeId>{1, 3, kSelf});
  // 1's mark (silent) holds for every partition; 2's (a failure) for this
  // query's partition only: another may be served there.
  const uint64_t now = run.host().NowMicros();
  CHECK(run.host().slow.Rank(1, 4, now) > 0);
  CHECK(run.host().slow.Rank(2, 3, now) > 0);
  CHECK(run.host().slow.Rank(2, 4, now) == 0);
}

TEST_CASE(
    "query coordinator: this node is never marked slow, silent or failing") {
  // Itself and 1 asked first; both silent when the hedge's 2 and 3 answer.
  QueryRun run({1, kSelf, 2, 3}, {0, 1, 2, 3}, Options(2, 20'000));
  CHECK(run.Asked() == std::vector<NodeId>{1, kSelf});
  run.host().Advance(20'000);
  Clock clock;
  run.Reply(2, clock, {});
  run.Reply(3, clock, {});
  CHECK_FALSE(run.pending());
  const uint64_t now = run.host().NowMicros();
  CHECK(run.host().slow.Rank(1, 3, now) > 0);
  CHECK(run.host().slow.Rank(kSelf, 3, now) == 0);
  // Its own replica fails: the others are asked, nobody is marked.
  run.host().sent.clear();
  run.Begin(Options(2, 20'000));
  CHECK(run.Asked() == std::vector<NodeId>{2, kSelf});
  msg::QueryReply failed;
  failed.status = absl::UnavailableError("closing");
  run.Deliver(kSelf, failed);
  CHECK(run.Asked() == std::vector<NodeId>{2, kSelf, 1, 3});
  CHECK(run.host().slow.Rank(kSelf, 3, run.host().NowMicros()) == 0);
}

// A place with two nodes (a leaver and the node that took its place)
// counts once both answered: it ranks as its slowest marked node.
TEST_CASE(
    "query coordinator: a place ranks as its slowest marked node, this "
    "node's own place too") {
  auto start = [](std::vector<NodeId> serving, std::vector<uint32_t> places,
                  const SlowReplicas& slow) {
    QueryCoordinator q(7, "s",
                       QuorumReadSetup{.partition = 3,
                                       .serving = std::move(serving),
                                       .places = std::move(places),
                                       .self = kSelf,
                                       .now = 0},
                       std::vector<std::string>{"a"}, Options(2, 20'000),
                       [](absl::StatusOr<Membership>) {});
    std::vector<NodeId> to;
    for (const RequestOutput::Send& s : q.Start(500'000, slow).sends) {
      to.push_back(s.to);
    }
    return to;
  };
  SlowReplicas none;
  SlowReplicas one_marked;
  one_marked.Mark(1, 0);
  // 2 took 1's place; this node holds none of the partition.
  CHECK(start({2, 3, 4, 1}, {0, 1, 2, 0}, none) ==
        std::vector<NodeId>{2, 3, 1});
  CHECK(start({2, 3, 4, 1}, {0, 1, 2, 0}, one_marked) ==
        std::vector<NodeId>{3, 4});
  // This node took 1's place (1 still serves until it lets go): its own
  // place goes first unless 1 is marked.
  CHECK(start({kSelf, 2, 3, 1}, {0, 1, 2, 0}, none) ==
        std::vector<NodeId>{2, 1, kSelf});
  CHECK(start({kSelf, 2, 3, 1}, {0, 1, 2, 0}, one_marked) ==
        std::vector<NodeId>{2, 3});
}

TEST_CASE(
    "query coordinator: a peer asked first that answers before those asked "
    "at the hedge is not marked slow (a busy moment, not a slow replica)") {
  QueryRun run({1, kSelf, 2}, {0, 1, 2}, Options(2, 20'000));
  run.host().Advance(20'000);
  CHECK(run.Asked() == std::vector<NodeId>{1, kSelf, 2});
  Clock clock;
  run.Reply(1, clock, {});
  run.Reply(kSelf, clock, {});
  CHECK_FALSE(run.pending());
  CHECK(run.host().slow.Rank(1, 3, run.host().NowMicros()) == 0);
  CHECK(run.host().slow.Rank(2, 3, run.host().NowMicros()) == 0);
  run.host().sent.clear();
  run.Begin(Options(2, 20'000));
  CHECK(run.Asked() == std::vector<NodeId>{1, kSelf});
}

TEST_CASE("query coordinator: a hedge asks a leaver's place whole") {
  // 2 took 1's place: both are asked with the first place.
  QueryRun run({1, 2, 3, 4}, {0, 0, 1, 2}, Options(2, 20'000));
  CHECK(run.Asked() == std::vector<NodeId>{1, 2, 3});
}

TEST_CASE("query coordinator: answers in time ask nobody else") {
  QueryRun run({1, 2, 3}, {0, 1, 2}, Options(2, 20'000));
  const Clock clock = ClockOf({{kActor, 1}});
  run.Reply(1, clock, {{"a", {{kActor, 1}}}});
  CHECK(run.pending());
  run.Reply(2, clock, {{"a", {{kActor, 1}}}});
  REQUIRE_FALSE(run.pending());
  run.host().Advance(100'000);
  CHECK(run.Asked() == std::vector<NodeId>{1, 2});
  CHECK(run.host().totals.queries_hedged == 0);
  CHECK(run.result()->all_present == false);
  CHECK(run.DotsOf("a") == std::vector<Dot>{{kActor, 1}});
  CHECK(run.DotsOf("b").empty());
}

TEST_CASE(
    "query coordinator: a reply that cannot count towards R asks the rest "
    "at once, not after the hedge") {
  SECTION("an error") {
    QueryRun run({1, 2, 3}, {0, 1, 2}, Options(2, 20'000));
    msg::QueryReply failed;
    failed.status = absl::UnavailableError("closing");
    run.Deliver(1, failed);
    CHECK(run.Asked() == std::vector<NodeId>{1, 2, 3});
  }
  SECTION("an empty replica with notfound_ok off") {
    QueryRun run({1, 2, 3}, {0, 1, 2}, Options(2, 20'000, false));
    run.Reply(2, Clock(), {});
    CHECK(run.Asked() == std::vector<NodeId>{1, 2, 3});
    CHECK(run.pending());
  }
  SECTION("a reply with the wrong number of elements") {
    QueryRun run({1, 2, 3}, {0, 1, 2}, Options(2, 20'000));
    msg::QueryReply short_reply;
    short_reply.elements.resize(1);
    run.Deliver(1, short_reply);
    CHECK(run.Asked() == std::vector<NodeId>{1, 2, 3});
    CHECK(run.pending());  // It does not count.
  }
}

TEST_CASE(
    "query coordinator: merges by the ORSWOT join and repairs what a "
    "replica lacks") {
  QueryRun run({1, 2, 3}, {0, 1, 2}, Options(2, 0));
  // 1 saw adds (A,1) of "a" and (A,2) of "b"; 2 saw only (A,1) and then
  // removed "a" (its clock has the dot, its keys do not).
  run.Reply(1, ClockOf({{kActor, 1}, {kActor, 2}}),
            {{"a", {{kActor, 1}}}, {"b", {{kActor, 2}}}});
  run.Reply(2, ClockOf({{kActor, 1}}), {});
  REQUIRE_FALSE(run.pending());
  CHECK(run.DotsOf("a").empty());  // Removed where it was seen.
  CHECK(run.DotsOf("b") == std::vector<Dot>{{kActor, 2}});  // Unseen by 2.
  CHECK_FALSE(run.result()->all_present);
  // 2 lacks the add of "b" it never saw.
  const std::vector<std::string> at2 = run.RepairedAt(2);
  CHECK(std::count(at2.begin(), at2.end(), "b") == 1);
  CHECK(std::count(at2.begin(), at2.end(), "a") == 0);
}

TEST_CASE("query coordinator: concurrent adds on two replicas both survive") {
  QueryRun run({1, 2, 3}, {0, 1, 2}, Options(2, 0), {"a"});
  run.Reply(1, ClockOf({{1, 1}}), {{"a", {{1, 1}}}});
  run.Reply(3, ClockOf({{3, 1}}), {{"a", {{3, 1}}}});
  REQUIRE_FALSE(run.pending());
  CHECK(run.result()->all_present);
  CHECK(run.DotsOf("a") == std::vector<Dot>{{1, 1}, {3, 1}});
  CHECK(run.RepairedAt(1) == std::vector<std::string>{"a"});
  CHECK(run.RepairedAt(3) == std::vector<std::string>{"a"});
}

TEST_CASE("query coordinator: without read repair nothing is repaired") {
  ClusterReadOptions o = Options(2, 0);
  o.read_repair = false;
  QueryRun run({1, 2, 3}, {0, 1, 2}, o, {"a"});
  run.Reply(1, ClockOf({{1, 1}}), {{"a", {{1, 1}}}});
  run.Reply(2, Clock(), {});
  REQUIRE_FALSE(run.pending());
  CHECK(run.DotsOf("a") == std::vector<Dot>{{1, 1}});
  CHECK(run.RepairedAt(2).empty());
}

TEST_CASE("query coordinator: silent replicas end in DeadlineExceeded") {
  QueryRun run({1, 2, 3}, {0, 1, 2}, Options(2, 20'000));
  run.Reply(1, Clock(), {});
  run.host().Advance(2'000'000);
  REQUIRE_FALSE(run.pending());
  CHECK(absl::IsDeadlineExceeded(run.result().status()));
  CHECK_FALSE(run.host().running());
  CHECK_FALSE(run.host().tick_at().has_value());
}

// Regression: a fixed retransmission interval sent a slow replica (one
// that answers a query of 100,000 members in a second, and works through
// every copy it gets) a copy every 200 ms: ten per query, each costing it
// as much as the first, which kept it behind (a bigsetd pipelining such
// SMISMEMBERs timed out under the sanitizers).
TEST_CASE(
    "query coordinator: a slow replica is asked again after 0.2, 0.6 and "
    "1.4 s, not each interval (retransmissions back off)") {
  QueryRun run({1, 2, 3}, {0, 1, 2}, Options(3, 0));
  auto copies_to_2 = [&run]() {
    const std::vector<NodeId> asked = run.Asked();
    return std::count(asked.begin(), asked.end(), NodeId{2});
  };
  run.Reply(1, Clock(), {});
  CHECK(copies_to_2() == 1);
  const std::vector<std::pair<uint64_t, long>> at = {
      {199'999, 1}, {1, 2}, {399'999, 2}, {1, 3},
      {799'999, 3}, {1, 4}, {599'999, 4}};
  uint64_t now = 0;
  for (const auto& [advance, copies] : at) {
    run.host().Advance(advance);
    now += advance;
    INFO("at " << now << " us");
    CHECK(copies_to_2() == copies);
  }
  CHECK(run.pending());  // 1,999,999 us: the deadline is next.
  run.host().Advance(1);
  REQUIRE_FALSE(run.pending());
  CHECK(absl::IsDeadlineExceeded(run.result().status()));
}

// The machine's phase and outputs, input by input (no driver).
TEST_CASE("query coordinator: the phase after each input") {
  using Phase = QueryCoordinator::Phase;
  ClusterReadOptions o = Options(2, 20'000);
  o.timeout_micros = 2'000'000;
  o.retry_micros = 200'000;
  auto make = [&o](bool* answered) {
    return std::make_unique<QueryCoordinator>(
        7, "s",
        QuorumReadSetup{.partition = 3,
                        .serving = {1, kSelf, 2},
                        .places = {0, 1, 2},
                        .self = kSelf,
                        .now = 0},
        std::vector<std::string>{"a"}, o,
        [answered](absl::StatusOr<Membership> r) {
          CHECK(r.ok());
          *answered = true;
        });
  };
  auto to = [](const RequestOutput& out) {
    std::vector<NodeId> nodes;
    for (const RequestOutput::Send& s : out.sends) nodes.push_back(s.to);
    return nodes;
  };
  msg::QueryReply reply;
  reply.elements.resize(1);
  reply.elements[0].element = "a";

  SECTION("R places, the hedge, the answer") {
    bool answered = false;
    std::unique_ptr<QueryCoordinator> q = make(&answered);
    CHECK(q->phase() == Phase::kIdle);
    CHECK(q->Tick(0).sends.empty());  // Not started: nothing.
    const RequestOutput start = q->Start(0, SlowReplicas());
    CHECK(q->phase() == Phase::kAskingSome);
    CHECK(to(start) == std::vector<NodeId>{1, kSelf});
    CHECK(start.tick_at == 20'000);  // The hedge, before the first retry.
    msg::QueryReply r1 = reply;
    CHECK_FALSE(q->Step(1, r1).done);
    CHECK(q->phase() == Phase::kAskingSome);
    const RequestOutput hedge = q->Tick(20'000);
    CHECK(q->phase() == Phase::kAskingAll);
    CHECK(to(hedge) == std::vector<NodeId>{2});
    CHECK(hedge.queries_hedged == 1);
    CHECK(hedge.slow.empty());        // A hedge's tick marks nobody.
    CHECK(hedge.tick_at == 200'000);  // Now the retry.
    // Asked all: another tick at the hedge's time asks nobody again.
    CHECK(q->Tick(20'001).sends.empty());
    msg::QueryReply r2 = reply;
    const RequestOutput last = q->Step(2, r2);
    CHECK(last.done);
    CHECK(last.slow.empty());  // 1, asked first, answered first.
    CHECK(q->phase() == Phase::kAnswered);
    q->TakeAnswer()();
    CHECK(answered);
    msg::QueryReply late = reply;
    CHECK(q->Step(kSelf, late).sends.empty());
    CHECK(q->Tick(3'000'000).sends.empty());
    CHECK(q->phase() == Phase::kAnswered);
  }
  SECTION("a peer slow lately: the other asked instead, still R places") {
    bool answered = false;
    std::unique_ptr<QueryCoordinator> q = make(&answered);
    SlowReplicas slow;
    slow.Mark(1, 0);
    const RequestOutput start = q->Start(500'000, slow);
    CHECK(q->phase() == Phase::kAskingSome);
    CHECK(to(start) == std::vector<NodeId>{2, kSelf});
    CHECK(start.tick_at == 520'000);
  }
  SECTION("no hedge: every replica at once") {
    bool answered = false;
    o.query_hedge_micros = 0;
    std::unique_ptr<QueryCoordinator> q = make(&answered);
    const RequestOutput start = q->Start(0, SlowReplicas());
    CHECK(q->phase() == Phase::kAskingAll);
    CHECK(to(start).size() == 3);
    CHECK(start.tick_at == 200'000);
  }
  SECTION("a failed reply asks the rest at once") {
    bool answered = false;
    std::unique_ptr<QueryCoordinator> q = make(&answered);
    q->Start(0, SlowReplicas());
    msg::QueryReply failed;
    failed.status = absl::UnavailableError("closing");
    const RequestOutput out = q->Step(1, failed);
    CHECK(q->phase() == Phase::kAskingAll);
    CHECK(to(out) == std::vector<NodeId>{2});
    CHECK(out.slow ==
          std::vector<RequestOutput::SlowPeer>{{.node = 1, .partition = 3}});
  }
  SECTION("the deadline") {
    bool answered = false;
    std::unique_ptr<QueryCoordinator> q = make(&answered);
    q->Start(0, SlowReplicas());
    const RequestOutput out = q->Tick(2'000'000);
    CHECK(out.done);
    CHECK(q->phase() == Phase::kAnswered);
  }
}

}  // namespace
}  // namespace bigset::testing
