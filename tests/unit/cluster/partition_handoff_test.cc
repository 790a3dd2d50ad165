// PartitionHandoff alone: one partition's hand-off state and its
// decisions, as tables of facts and the decision each gives. No
// HandoffManager, no node, no store but the transfers' replica.

#include "cluster/partition_handoff.h"

#include <catch2/catch.hpp>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "cluster/request_ids.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

using Phase = HandoffTransfer::Phase;
using Role = PartitionRole;
using TickDo = PartitionHandoff::OnTickDo;
using AnswerDo = PartitionHandoff::AfterAnswerDo;
using AcceptDo = PartitionHandoff::AcceptDo;

TEST_CASE(
    "partition hand-off: the role follows the replica, the drain, "
    "the serving and the commitment, in that order") {
  struct Row {
    bool has_replica, serves, committed, draining;
    Role role;
  };
  const std::vector<Row> table = {
      // No replica: released, whatever else holds.
      {false, false, false, false, Role::kReleased},
      {false, true, true, true, Role::kReleased},
      // A transfer accepted: draining, serving or not.
      {true, true, false, true, Role::kDraining},
      {true, true, true, true, Role::kDraining},
      {true, false, false, true, Role::kDraining},
      // Not serving, not draining: a receiver.
      {true, false, false, false, Role::kReceiving},
      {true, false, true, false, Role::kReceiving},
      // Serving.
      {true, true, true, false, Role::kCommitted},
      {true, true, false, false, Role::kServing},
  };
  for (const Row& row : table) {
    CAPTURE(row.has_replica, row.serves, row.committed, row.draining);
    const PartitionRoles::Entry e =
        PartitionHandoff::RoleOf({.has_replica = row.has_replica,
                                  .serves = row.serves,
                                  .committed = row.committed},
                                 row.draining);
    CHECK(e.role == row.role);
    CHECK(e.serves == row.serves);
  }
}

constexpr uint32_t kPartition = 4;
constexpr NodeId kSelf = 1;
constexpr NodeId kReceiver = 2;
constexpr uint64_t kRetry = 1000;

Delta DeltaOf(const std::string& element) {
  Delta d;
  d.set = "x";
  d.ops.push_back(DeltaOp{.element = element,
                          .context = {},
                          .add = Dot{.actor = 99, .counter = 1}});
  return d;
}

// One partition's hand-off state over a replica on an in-memory store,
// with the test as the receiver: drives its transfer to each phase.
struct Fixture {
  Fixture() {
    REQUIRE(ids.Open().ok());
    options.retry_micros = kRetry;
  }

  TransferEnv Env() {
    return TransferEnv{.now = now,
                       .epoch = 5,
                       .replica = sender.replica.get(),
                       .ids = &ids,
                       .stats = &stats,
                       .out = &out};
  }

  // A transfer to `to` (added), in `phase`, with nothing in flight where
  // the phase allows it: the end chunk and the proposal were answered.
  HandoffTransfer& InPhase(Phase phase, NodeId to = kReceiver,
                           bool supplement = false) {
    REQUIRE(handoff.Add(to, supplement, &options, now));
    HandoffTransfer& t = *handoff.Find(to);
    if (phase == Phase::kWaiting) return t;
    if (phase == Phase::kStreaming) {
      AddElement(*sender.replica, "x", "x1");
      t.StartRun(Env());
      REQUIRE(t.phase() == Phase::kStreaming);
      return t;
    }
    // An empty replica: the run is its end chunk alone.
    t.StartRun(Env());
    REQUIRE(t.phase() == Phase::kEnding);
    if (phase == Phase::kEnding) return t;
    REQUIRE(out.effects.size() == 1);
    absl::StatusOr<Message> end = DecodeMessage(out.effects.back().bytes);
    REQUIRE(end.ok());
    const auto* chunk = end->As<msg::TransferChunk>();
    REQUIRE((chunk != nullptr && chunk->end));
    REQUIRE(t.OnAck(Env(), t.run(),
                    msg::TransferAck{.status = absl::OkStatus(),
                                     .index = chunk->index,
                                     .seq = chunk->seq,
                                     .incarnation = 9}) ==
            HandoffTransfer::AckResult::kSetsDone);
    if (phase == Phase::kSetsDone) return t;
    t.Propose(Env(), "proposal");
    if (phase == Phase::kProposing) return t;
    REQUIRE(t.TakeAnswer(t.run()) == HandoffTransfer::Answer::kProposal);
    t.Accepted(now);
    REQUIRE(phase == Phase::kDraining);
    REQUIRE(t.phase() == Phase::kDraining);
    return t;
  }

  MemReplica sender{7};
  MemStore meta;
  std::function<uint64_t()> random = [] { return uint64_t{42}; };
  RequestIds ids{1, meta.store.get(), &random};
  HandoffOptions options;
  NodeCounters stats;
  ProtocolOutput out;
  uint64_t now = 10'000;
  PartitionHandoff handoff{kPartition};
};

TEST_CASE(
    "partition hand-off: its transfers, one per receiver, and the drain "
    "once any of them was accepted") {
  Fixture f;
  CHECK_FALSE(f.handoff.sending());
  CHECK(f.handoff.Find(kReceiver) == nullptr);
  HandoffTransfer& t = f.InPhase(Phase::kSetsDone);
  CHECK(f.handoff.sending());
  CHECK(f.handoff.Find(kReceiver) == &t);
  CHECK(t.partition() == kPartition);
  // One per receiver: a second Add keeps the running one.
  CHECK_FALSE(f.handoff.Add(kReceiver, /*supplement=*/true, &f.options, 0));
  CHECK_FALSE(f.handoff.Find(kReceiver)->supplement());
  CHECK(f.handoff.Add(3, /*supplement=*/true, &f.options, f.now));
  CHECK_FALSE(f.handoff.Draining());
  // In receiver order.
  std::vector<NodeId> order;
  for (const auto& [to, transfer] : f.handoff.transfers()) order.push_back(to);
  CHECK(order == std::vector<NodeId>{kReceiver, 3});

  t.Propose(f.Env(), "proposal");
  CHECK_FALSE(f.handoff.Draining());
  t.Accepted(f.now);
  CHECK(f.handoff.Draining());
  // The role a drain gives.
  CHECK(f.handoff.Role({.has_replica = true, .serves = true}).role ==
        Role::kDraining);
  f.handoff.Erase(kReceiver);
  CHECK_FALSE(f.handoff.Draining());
  CHECK(f.handoff.Role({.has_replica = true, .serves = true}).role ==
        Role::kServing);
  f.handoff.Erase(3);
  CHECK_FALSE(f.handoff.sending());
  f.handoff.Erase(3);  // Nothing to end.
}

TEST_CASE(
    "partition hand-off: a re-plan keeps what it plans as planned, and "
    "a proposal in flight or accepted whatever it plans") {
  struct Row {
    Phase phase;
    bool supplement;
    std::optional<bool> planned;
    bool keeps;
  };
  const std::vector<Row> table = {
      {Phase::kWaiting, false, false, true},
      {Phase::kWaiting, false, std::nullopt, false},
      // Planned as the other kind: a new transfer replaces it.
      {Phase::kWaiting, false, true, false},
      {Phase::kWaiting, true, true, true},
      {Phase::kSetsDone, false, std::nullopt, false},
      {Phase::kSetsDone, true, false, false},
      {Phase::kProposing, false, std::nullopt, true},
      {Phase::kProposing, false, true, true},
      {Phase::kDraining, false, std::nullopt, true},
      {Phase::kDraining, true, false, true},
  };
  for (const Row& row : table) {
    CAPTURE(HandoffTransfer::PhaseName(row.phase), row.supplement,
            row.planned.has_value(), row.planned.value_or(false));
    Fixture f;
    const HandoffTransfer& t = f.InPhase(row.phase, kReceiver, row.supplement);
    CHECK(PartitionHandoff::Keeps(t, row.planned) == row.keeps);
  }
}

// Facts under which a transfer to kReceiver goes on as its phase says.
PartitionHandoff::TickFacts Going() {
  return {.serves = true,
          .handing_to = 0,
          .receiver_wanted = true,
          .replaced = false,
          .receiver_member = true,
          .may_start = true,
          .has_replica = true};
}

TEST_CASE(
    "partition hand-off: on the tick, each phase's next step under "
    "the facts of the moment") {
  using Facts = PartitionHandoff::TickFacts;
  struct Row {
    const char* what;
    Phase phase;
    std::function<void(Facts&)> facts;
    TickDo expected;
  };
  const auto none = [](Facts&) {};
  // Committed to the receiver, which the latest ring no longer lists.
  const auto dropped = [](Facts& f) {
    f.handing_to = kReceiver;
    f.receiver_wanted = false;
  };
  const std::vector<Row> table = {
      {"waiting, its turn", Phase::kWaiting, none, TickDo::kStart},
      {"waiting, enough run", Phase::kWaiting,
       [](Facts& f) { f.may_start = false; }, TickDo::kNothing},
      {"waiting, no replica open", Phase::kWaiting,
       [](Facts& f) { f.has_replica = false; }, TickDo::kNothing},
      {"no longer serving", Phase::kStreaming,
       [](Facts& f) { f.serves = false; }, TickDo::kGiveUp},
      {"no longer serving, accepted", Phase::kDraining,
       [](Facts& f) { f.serves = false; }, TickDo::kGiveUp},
      {"streaming", Phase::kStreaming, none, TickDo::kContinue},
      {"ending", Phase::kEnding, none, TickDo::kContinue},
      {"sets done", Phase::kSetsDone, none, TickDo::kPropose},
      {"committed to a receiver the ring dropped", Phase::kSetsDone, dropped,
       TickDo::kProbe},
      {"committed to a receiver the ring dropped, while waiting",
       Phase::kWaiting, dropped, TickDo::kProbe},
      {"committed to a dropped receiver that took the place", Phase::kSetsDone,
       [&](Facts& f) {
         dropped(f);
         f.replaced = true;
       },
       TickDo::kPropose},
      {"committed to another receiver", Phase::kSetsDone,
       [](Facts& f) {
         f.handing_to = 3;
         f.receiver_wanted = false;
       },
       TickDo::kPropose},
      {"committed, the proposal in flight", Phase::kProposing, dropped,
       TickDo::kNothing},
      {"proposing, not due", Phase::kProposing, none, TickDo::kNothing},
      {"draining, drained", Phase::kDraining, none, TickDo::kComplete},
  };
  for (const Row& row : table) {
    CAPTURE(row.what);
    Fixture f;
    const HandoffTransfer& t = f.InPhase(row.phase);
    Facts facts = Going();
    row.facts(facts);
    CHECK(PartitionHandoff::OnTick(t, facts, f.now) == row.expected);
  }
}

TEST_CASE(
    "partition hand-off: on the tick, what is in flight is resent "
    "when due, and a silent receiver that left the ring is given up") {
  Fixture f;
  HandoffTransfer& t = f.InPhase(Phase::kProposing);
  PartitionHandoff::TickFacts facts = Going();
  CHECK(PartitionHandoff::OnTick(t, facts, f.now) == TickDo::kNothing);
  CHECK(PartitionHandoff::OnTick(t, facts, f.now + kRetry) == TickDo::kResend);
  // A clock that went back: due too.
  CHECK(PartitionHandoff::OnTick(t, facts, f.now - 1) == TickDo::kResend);
  for (int i = 0; i <= 100; ++i) {
    f.now += kRetry;
    t.Resend(f.Env());
  }
  REQUIRE(t.silent() > 100);
  CHECK(PartitionHandoff::OnTick(t, facts, f.now) == TickDo::kNothing);
  facts.receiver_member = false;
  CHECK(PartitionHandoff::OnTick(t, facts, f.now) == TickDo::kGiveUp);

  // Draining: the confirmation in flight is resent when due; forwards
  // unacknowledged hold everything.
  Fixture g;
  HandoffTransfer& d = g.InPhase(Phase::kDraining);
  d.Confirm(g.Env(), "confirmation");
  CHECK(PartitionHandoff::OnTick(d, Going(), g.now) == TickDo::kNothing);
  CHECK(PartitionHandoff::OnTick(d, Going(), g.now + kRetry) ==
        TickDo::kResend);
}

TEST_CASE(
    "partition hand-off: sets done proposes only once the forwards "
    "drained and no back-off holds it") {
  Fixture f;
  HandoffTransfer& t = f.InPhase(Phase::kSetsDone);
  t.Forward(f.Env(), DeltaOf("late"));
  REQUIRE_FALSE(t.forwards_empty());
  CHECK(PartitionHandoff::OnTick(t, Going(), f.now) == TickDo::kNothing);
  CHECK(PartitionHandoff::AfterAnswer(t, f.now) == AnswerDo::kNothing);
  for (const ProtocolOutput::Effect& e : f.out.effects) {
    absl::StatusOr<Message> m = DecodeMessage(e.bytes);
    REQUIRE(m.ok());
    if (m->type() == MessageType::kHandoffDelta) {
      t.ForwardAcked(m->header.request_id);
    }
  }
  REQUIRE(t.forwards_empty());
  CHECK(PartitionHandoff::OnTick(t, Going(), f.now) == TickDo::kPropose);
  CHECK(PartitionHandoff::AfterAnswer(t, f.now) == AnswerDo::kPropose);
  t.BackOff(f.now + kRetry);
  CHECK(PartitionHandoff::OnTick(t, Going(), f.now) == TickDo::kNothing);
  CHECK(PartitionHandoff::AfterAnswer(t, f.now) == AnswerDo::kNothing);
  CHECK(PartitionHandoff::AfterAnswer(t, f.now + kRetry) == AnswerDo::kPropose);
}

TEST_CASE(
    "partition hand-off: after an answer, an accepted transfer "
    "confirms once drained, then completes once confirmed") {
  Fixture f;
  HandoffTransfer& t = f.InPhase(Phase::kDraining);
  CHECK(PartitionHandoff::AfterAnswer(t, f.now) == AnswerDo::kConfirm);
  t.Confirm(f.Env(), "confirmation");
  CHECK(PartitionHandoff::AfterAnswer(t, f.now) == AnswerDo::kNothing);
  REQUIRE(t.TakeAnswer(t.run()) == HandoffTransfer::Answer::kConfirmation);
  t.Confirmed();
  CHECK(PartitionHandoff::AfterAnswer(t, f.now) == AnswerDo::kComplete);
  // Phases before the end's answer wait.
  for (Phase phase : {Phase::kWaiting, Phase::kStreaming, Phase::kEnding,
                      Phase::kProposing}) {
    CAPTURE(HandoffTransfer::PhaseName(phase));
    Fixture g;
    CHECK(PartitionHandoff::AfterAnswer(g.InPhase(phase), g.now) ==
          AnswerDo::kNothing);
  }
}

TEST_CASE(
    "partition hand-off: a proposal older than one taken from the "
    "same sender's place is refused") {
  PartitionHandoff h(kPartition);
  CHECK(h.TakeProposal(2, /*episode=*/7, /*run=*/10));
  CHECK(h.TakeProposal(2, 7, 10));  // The same again (a retransmission).
  CHECK(h.TakeProposal(2, 7, 12));
  CHECK_FALSE(h.TakeProposal(2, 7, 11));
  CHECK_FALSE(h.TakeProposal(2, 7, 10));
  // Another episode of the sender's place, and another sender: their own.
  CHECK(h.TakeProposal(2, 8, 1));
  CHECK(h.TakeProposal(3, 7, 1));
  CHECK(h.TakeProposal(2, 7, 12));
}

TEST_CASE(
    "partition hand-off: supplements given are remembered until "
    "forgotten together") {
  PartitionHandoff h(kPartition);
  CHECK_FALSE(h.Supplied(2));
  h.NoteSupplied(2);
  h.NoteSupplied(3);
  CHECK(h.Supplied(2));
  CHECK(h.Supplied(3));
  CHECK_FALSE(h.Supplied(4));
  h.ForgetSupplied();
  CHECK_FALSE(h.Supplied(2));
  CHECK_FALSE(h.Supplied(3));
}

TEST_CASE(
    "partition hand-off: a proposal is refused, taken or synced as "
    "the receiver's facts say") {
  using Facts = PartitionHandoff::ProposalFacts;
  struct Row {
    const char* what;
    std::function<void(Facts&)> facts;
    AcceptDo expected;
    absl::StatusCode code;
    const char* says;  // In the refusal's message.
  };
  const auto none = [](Facts&) {};
  const std::vector<Row> table = {
      {"a joiner the ring places here takes the place", none,
       AcceptDo::kBeginServing, absl::StatusCode::kOk, ""},
      {"a run not received whole", [](Facts& f) { f.run_received = false; },
       AcceptDo::kRefuse, absl::StatusCode::kFailedPrecondition,
       "did not keep run 77"},
      {"a run not received, a supplement",
       [](Facts& f) {
         f.run_received = false;
         f.supplement = true;
         f.serving_took = std::make_pair(NodeId{5}, uint64_t{1});
       },
       AcceptDo::kRefuse, absl::StatusCode::kFailedPrecondition,
       "send the partition again"},
      {"not placed here", [](Facts& f) { f.placed_here = false; },
       AcceptDo::kRefuse, absl::StatusCode::kAborted,
       "does not place partition 4 on node 1"},
      {"taken and handed on since",
       [](Facts& f) { f.took_and_handed_on = true; }, AcceptDo::kRefuse,
       absl::StatusCode::kAlreadyExists, "took and handed on"},
      {"the same place again",
       [](Facts& f) {
         f.serving_took = std::make_pair(f.from, f.episode);
         f.placed_here = false;
       },
       AcceptDo::kSync, absl::StatusCode::kOk, ""},
      {"serving in another place",
       [](Facts& f) { f.serving_took = std::make_pair(f.from, f.episode + 1); },
       AcceptDo::kRefuse, absl::StatusCode::kAlreadyExists,
       "already serves partition 4"},
      {"serving, taken from another node",
       [](Facts& f) { f.serving_took = std::make_pair(NodeId{9}, f.episode); },
       AcceptDo::kRefuse, absl::StatusCode::kAlreadyExists, "already serves"},
      {"a supplement to a node that serves",
       [](Facts& f) {
         f.supplement = true;
         f.serving_took = std::make_pair(NodeId{9}, uint64_t{3});
         f.placed_here = false;
       },
       AcceptDo::kSync, absl::StatusCode::kOk, ""},
      {"a supplement to a node that does not serve",
       [](Facts& f) { f.supplement = true; }, AcceptDo::kRefuse,
       absl::StatusCode::kAborted, "does not serve partition 4"},
  };
  for (const Row& row : table) {
    CAPTURE(row.what);
    Facts facts{.self = kSelf,
                .from = kReceiver,
                .run = 77,
                .episode = 6,
                .supplement = false,
                .run_received = true,
                .serving_took = std::nullopt,
                .took_and_handed_on = false,
                .placed_here = true};
    row.facts(facts);
    const auto [decision, status] = PartitionHandoff::Accept(kPartition, facts);
    CHECK(decision == row.expected);
    CHECK(status.code() == row.code);
    CAPTURE(status.message());
    CHECK(absl::StrContains(status.message(), row.says));
  }
}

}  // namespace
}  // namespace bigset::testing
