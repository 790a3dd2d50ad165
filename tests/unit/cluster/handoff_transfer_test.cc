// HandoffTransfer driven alone: a replica over an in-memory store, and the
// test as the receiver. No HandoffManager, no node, no transport: each
// input's sends are decoded from the ProtocolOutput it appends to.

#include "cluster/handoff_transfer.h"

#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cluster/request_ids.h"
#include "cluster/set_stream.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

using Phase = HandoffTransfer::Phase;
using AckResult = HandoffTransfer::AckResult;
using Answer = HandoffTransfer::Answer;

constexpr uint32_t kPartition = 3;
constexpr NodeId kReceiver = 2;
constexpr uint64_t kEpoch = 5;
constexpr uint64_t kRetry = 1000;

HandoffOptions TestOptions() {
  HandoffOptions o;
  o.window = 2;
  o.chunk_elements = 2;
  o.retry_micros = kRetry;
  return o;
}

struct Fixture {
  Fixture() { REQUIRE(ids.Open().ok()); }

  TransferEnv Env() {
    return TransferEnv{.now = now,
                       .epoch = kEpoch,
                       .replica = replica_gone ? nullptr : sender.replica.get(),
                       .ids = &ids,
                       .stats = &stats,
                       .out = &out};
  }

  // The messages sent since the last call, decoded; every one to the
  // receiver.
  std::vector<Message> Sent() {
    std::vector<Message> sent;
    for (const ProtocolOutput::Effect& e : out.effects) {
      REQUIRE_FALSE(e.is_timer);
      REQUIRE(e.to == kReceiver);
      absl::StatusOr<Message> m = DecodeMessage(e.bytes);
      REQUIRE(m.ok());
      REQUIRE(m->header.partition == kPartition);
      sent.push_back(std::move(*m));
    }
    out.effects.clear();
    return sent;
  }

  // The acknowledgement of `chunk` a receiver of incarnation `incarnation`
  // sends.
  static msg::TransferAck AckOf(const Message& chunk, uint64_t incarnation,
                                absl::Status status = absl::OkStatus()) {
    const auto* c = chunk.As<msg::TransferChunk>();
    REQUIRE(c != nullptr);
    return msg::TransferAck{.status = std::move(status),
                            .index = c->index,
                            .seq = c->seq,
                            .incarnation = incarnation};
  }

  MemReplica sender{7};
  MemStore meta;
  std::function<uint64_t()> random = [] { return uint64_t{42}; };
  RequestIds ids{1, meta.store.get(), &random};
  HandoffOptions options = TestOptions();
  NodeCounters stats;
  ProtocolOutput out;
  uint64_t now = 10'000;
  bool replica_gone = false;
  HandoffTransfer transfer{kPartition, kReceiver, /*supplement=*/false,
                           &options, now};
};

const msg::TransferChunk& Chunk(const Message& m) {
  const auto* c = m.As<msg::TransferChunk>();
  REQUIRE(c != nullptr);
  return *c;
}

// Receives a whole run as an in-order receiver would: acknowledges each
// chunk sent, and returns what arrived per set.
std::map<std::string, std::vector<std::string>> ReceiveRun(Fixture& f) {
  std::map<std::string, std::vector<std::string>> got;
  std::vector<Message> pending = f.Sent();
  while (!pending.empty()) {
    const Message m = std::move(pending.front());
    pending.erase(pending.begin());
    const msg::TransferChunk& c = Chunk(m);
    REQUIRE(c.epoch == kEpoch);
    REQUIRE(m.header.request_id == f.transfer.run());
    for (const ElementDots& e : c.elements) got[c.set].push_back(e.element);
    const AckResult r =
        f.transfer.OnAck(f.Env(), m.header.request_id, Fixture::AckOf(m, 9));
    REQUIRE(r != AckResult::kIgnored);
    if (c.end) {
      REQUIRE(r == AckResult::kSetsDone);
      REQUIRE(f.Sent().empty());
      return got;
    }
    for (Message& next : f.Sent()) pending.push_back(std::move(next));
  }
  FAIL("the run sent no end chunk");
  return got;
}

TEST_CASE("transfer: a run sends every set in order, then the end") {
  Fixture f;
  for (const char* e : {"a1", "a2", "a3", "a4", "a5"}) {
    AddElement(*f.sender.replica, "a", e);
  }
  AddElement(*f.sender.replica, "b", "b1");
  REQUIRE(f.transfer.phase() == Phase::kWaiting);

  f.transfer.StartRun(f.Env());
  REQUIRE(f.transfer.phase() == Phase::kStreaming);
  REQUIRE(f.transfer.run() != 0);
  // A set's first chunk travels alone; after its acknowledgement, a window
  // (2) of chunks.
  std::vector<Message> first = f.Sent();
  REQUIRE(first.size() == 1);
  REQUIRE(Chunk(first[0]).set == "a");
  REQUIRE(Chunk(first[0]).seq == 0);
  REQUIRE(f.transfer.OnAck(f.Env(), f.transfer.run(),
                           Fixture::AckOf(first[0], 9)) ==
          AckResult::kProgress);
  std::vector<Message> window = f.Sent();
  REQUIRE(window.size() == 2);
  REQUIRE(Chunk(window[0]).seq == 1);
  REQUIRE(Chunk(window[1]).seq == 2);
  REQUIRE(Chunk(window[1]).last);
  // Acknowledging the last chunk acknowledges the one before it too.
  REQUIRE(f.transfer.OnAck(f.Env(), f.transfer.run(),
                           Fixture::AckOf(window[1], 9)) ==
          AckResult::kProgress);
  std::vector<Message> next = f.Sent();
  REQUIRE(next.size() == 1);
  REQUIRE(Chunk(next[0]).set == "b");
  REQUIRE(Chunk(next[0]).index == 1);
  REQUIRE(Chunk(next[0]).last);
  REQUIRE(f.transfer.OnAck(f.Env(), f.transfer.run(),
                           Fixture::AckOf(next[0], 9)) == AckResult::kProgress);
  std::vector<Message> end = f.Sent();
  REQUIRE(end.size() == 1);
  REQUIRE(Chunk(end[0]).end);
  REQUIRE(Chunk(end[0]).index == 2);
  REQUIRE(f.transfer.phase() == Phase::kEnding);
  REQUIRE(f.transfer.control_in_flight());
  REQUIRE(f.transfer.OnAck(f.Env(), f.transfer.run(),
                           Fixture::AckOf(end[0], 9)) == AckResult::kSetsDone);
  REQUIRE(f.transfer.phase() == Phase::kSetsDone);
  REQUIRE_FALSE(f.transfer.control_in_flight());
  REQUIRE(f.Sent().empty());
  REQUIRE(f.stats.handoff_keys_sent == 6);
}

TEST_CASE("transfer: at most a window of chunks is in flight") {
  Fixture f;
  // Nine elements in chunks of two: five chunks.
  for (int e = 0; e < 9; ++e) {
    AddElement(*f.sender.replica, "x", "e" + std::to_string(e));
  }
  f.transfer.StartRun(f.Env());
  std::vector<Message> sent = f.Sent();
  REQUIRE(sent.size() == 1);
  REQUIRE(f.transfer.OnAck(f.Env(), f.transfer.run(),
                           Fixture::AckOf(sent[0], 9)) == AckResult::kProgress);
  sent = f.Sent();
  REQUIRE(sent.size() == 2);  // The window (2), not the rest of the set.
  REQUIRE(Chunk(sent[0]).seq == 1);
  REQUIRE(Chunk(sent[1]).seq == 2);
  // One acknowledged: one more goes.
  REQUIRE(f.transfer.OnAck(f.Env(), f.transfer.run(),
                           Fixture::AckOf(sent[0], 9)) == AckResult::kProgress);
  sent = f.Sent();
  REQUIRE(sent.size() == 1);
  REQUIRE(Chunk(sent[0]).seq == 3);
}

TEST_CASE("transfer: the end chunk is resent alone, and a restart then") {
  Fixture f;
  AddElement(*f.sender.replica, "x", "x1");
  f.transfer.StartRun(f.Env());
  std::vector<Message> sent = f.Sent();
  REQUIRE(f.transfer.OnAck(f.Env(), f.transfer.run(),
                           Fixture::AckOf(sent[0], 9)) == AckResult::kProgress);
  const std::vector<Message> end = f.Sent();
  REQUIRE(end.size() == 1);
  REQUIRE(Chunk(end[0]).end);
  REQUIRE(f.transfer.phase() == Phase::kEnding);
  f.now += kRetry;
  f.transfer.Continue(f.Env());
  sent = f.Sent();
  REQUIRE(sent.size() == 1);
  REQUIRE(Chunk(sent[0]).end);
  // A stale acknowledgement of the end (another index) is ignored.
  msg::TransferAck stale = Fixture::AckOf(end[0], 9);
  stale.index += 1;
  REQUIRE(f.transfer.OnAck(f.Env(), f.transfer.run(), stale) ==
          AckResult::kIgnored);
  // The receiver restarted before it acknowledged the end: the whole run.
  const uint64_t run = f.transfer.run();
  REQUIRE(f.transfer.OnAck(f.Env(), run, Fixture::AckOf(end[0], 10)) ==
          AckResult::kProgress);
  REQUIRE(f.transfer.run() != run);
  REQUIRE(f.transfer.phase() == Phase::kStreaming);
  REQUIRE_FALSE(f.transfer.control_in_flight());
  sent = f.Sent();
  REQUIRE(sent.size() == 1);
  REQUIRE(Chunk(sent[0]).set == "x");
  REQUIRE(Chunk(sent[0]).index == 0);
}

TEST_CASE("transfer: the receiver gets every element of every set") {
  Fixture f;
  std::map<std::string, std::vector<std::string>> want;
  for (int s = 0; s < 5; ++s) {
    const std::string set = "set" + std::to_string(s);
    for (int e = 0; e < 3 * s; ++e) {
      const std::string element = "e" + std::to_string(100 + e);
      AddElement(*f.sender.replica, set, element);
      want[set].push_back(element);
    }
  }
  f.transfer.StartRun(f.Env());
  // Empty sets hold nothing to send and are not listed.
  want.erase("set0");
  REQUIRE(ReceiveRun(f) == want);
}

TEST_CASE("transfer: stale and duplicate acknowledgements change nothing") {
  Fixture f;
  for (const char* e : {"x1", "x2", "x3"}) {
    AddElement(*f.sender.replica, "x", e);
  }
  f.transfer.StartRun(f.Env());
  const std::vector<Message> first = f.Sent();
  REQUIRE(first.size() == 1);
  const uint64_t run = f.transfer.run();
  msg::TransferAck ack = Fixture::AckOf(first[0], 9);
  // Another run's, another set attempt's, a chunk not in flight.
  REQUIRE(f.transfer.OnAck(f.Env(), run + 1, ack) == AckResult::kIgnored);
  msg::TransferAck other_index = ack;
  other_index.index = 1;
  REQUIRE(f.transfer.OnAck(f.Env(), run, other_index) == AckResult::kIgnored);
  msg::TransferAck unsent = ack;
  unsent.seq = 5;
  REQUIRE(f.transfer.OnAck(f.Env(), run, unsent) == AckResult::kIgnored);
  REQUIRE(f.Sent().empty());
  // The real one, then again: the second is a duplicate.
  REQUIRE(f.transfer.OnAck(f.Env(), run, ack) == AckResult::kProgress);
  REQUIRE_FALSE(f.Sent().empty());
  REQUIRE(f.transfer.OnAck(f.Env(), run, ack) == AckResult::kIgnored);
  REQUIRE(f.Sent().empty());
}

TEST_CASE("transfer: a receiver that restarted gets the whole run again") {
  Fixture f;
  for (const char* e : {"x1", "x2", "x3"}) {
    AddElement(*f.sender.replica, "x", e);
  }
  f.transfer.StartRun(f.Env());
  const uint64_t first_run = f.transfer.run();
  std::vector<Message> sent = f.Sent();
  REQUIRE(f.transfer.OnAck(f.Env(), first_run, Fixture::AckOf(sent[0], 9)) ==
          AckResult::kProgress);
  sent = f.Sent();
  REQUIRE(!sent.empty());
  // Another incarnation acknowledges the next chunk.
  REQUIRE(f.transfer.OnAck(f.Env(), first_run, Fixture::AckOf(sent[0], 10)) ==
          AckResult::kProgress);
  REQUIRE(f.transfer.run() != first_run);
  REQUIRE(f.stats.handoff_receiver_restarts == 1);
  REQUIRE(f.stats.handoff_restarts == 1);
  sent = f.Sent();
  REQUIRE(sent.size() == 1);
  REQUIRE(sent[0].header.request_id == f.transfer.run());
  REQUIRE(Chunk(sent[0]).index == 0);
  REQUIRE(Chunk(sent[0]).seq == 0);
}

TEST_CASE("transfer: a set whose state the receiver lost goes again") {
  Fixture f;
  for (const char* e : {"x1", "x2", "x3"}) {
    AddElement(*f.sender.replica, "x", e);
  }
  f.transfer.StartRun(f.Env());
  std::vector<Message> sent = f.Sent();
  REQUIRE(f.transfer.OnAck(
              f.Env(), f.transfer.run(),
              Fixture::AckOf(sent[0], 9, StreamStateLost("expired"))) ==
          AckResult::kProgress);
  sent = f.Sent();
  REQUIRE(sent.size() == 1);
  REQUIRE(Chunk(sent[0]).set == "x");
  REQUIRE(Chunk(sent[0]).index == 1);  // A new attempt of the set.
  REQUIRE(Chunk(sent[0]).seq == 0);
  REQUIRE(f.stats.handoff_restarts == 1);
}

TEST_CASE("transfer: a receiver not ready makes it back off, then resend") {
  Fixture f;
  AddElement(*f.sender.replica, "x", "x1");
  f.transfer.StartRun(f.Env());
  std::vector<Message> sent = f.Sent();
  REQUIRE(f.transfer.OnAck(
              f.Env(), f.transfer.run(),
              Fixture::AckOf(sent[0], 9, absl::UnavailableError("no ring"))) ==
          AckResult::kProgress);
  REQUIRE(f.Sent().empty());
  REQUIRE(f.transfer.Waiting(f.now));
  f.now += 4 * kRetry;
  f.transfer.Continue(f.Env());
  REQUIRE(f.Sent().empty());  // Still backing off (5 retry intervals).
  f.now += kRetry;
  f.transfer.Continue(f.Env());
  sent = f.Sent();
  REQUIRE(sent.size() == 1);  // The same chunk, the same bytes.
  REQUIRE(Chunk(sent[0]).set == "x");
  REQUIRE(Chunk(sent[0]).seq == 0);
  REQUIRE(f.stats.retransmits == 1);
  REQUIRE(f.transfer.silent() == 1);
}

TEST_CASE("transfer: a resend sends the whole window again (go-back-N)") {
  Fixture f;
  for (const char* e : {"x1", "x2", "x3", "x4", "x5"}) {
    AddElement(*f.sender.replica, "x", e);
  }
  f.transfer.StartRun(f.Env());
  std::vector<Message> sent = f.Sent();
  REQUIRE(f.transfer.OnAck(f.Env(), f.transfer.run(),
                           Fixture::AckOf(sent[0], 9)) == AckResult::kProgress);
  REQUIRE(f.Sent().size() == 2);
  // Not yet due: nothing.
  f.now += kRetry - 1;
  f.transfer.Continue(f.Env());
  REQUIRE(f.Sent().empty());
  f.now += 1;
  f.transfer.Continue(f.Env());
  sent = f.Sent();
  REQUIRE(sent.size() == 2);
  REQUIRE(Chunk(sent[0]).seq == 1);
  REQUIRE(Chunk(sent[1]).seq == 2);
  // A clock that went back makes it due too.
  f.now -= 5 * kRetry;
  REQUIRE(f.transfer.Due(f.now));
}

TEST_CASE("transfer: with no replica it backs off and starts later") {
  Fixture f;
  AddElement(*f.sender.replica, "x", "x1");
  f.replica_gone = true;
  f.transfer.StartRun(f.Env());
  REQUIRE(f.Sent().empty());
  REQUIRE(f.transfer.Waiting(f.now));
  f.replica_gone = false;
  f.now += kRetry;
  f.transfer.Continue(f.Env());
  const std::vector<Message> sent = f.Sent();
  REQUIRE(sent.size() == 1);
  REQUIRE(Chunk(sent[0]).set == "x");
}

Delta DeltaOf(const std::string& element, uint64_t counter) {
  Delta d;
  d.set = "x";
  d.ops.push_back(DeltaOp{.element = element,
                          .context = {},
                          .add = Dot{.actor = 99, .counter = counter}});
  return d;
}

TEST_CASE("transfer: forwards are kept until acknowledged") {
  Fixture f;
  AddElement(*f.sender.replica, "x", "x1");
  // Waiting: the run reads its sets after the delta; nothing forwarded.
  f.transfer.Forward(f.Env(), DeltaOf("w", 1));
  REQUIRE(f.Sent().empty());
  REQUIRE(f.transfer.forwards_empty());

  f.transfer.StartRun(f.Env());
  f.Sent();
  f.transfer.Forward(f.Env(), DeltaOf("f1", 2));
  f.transfer.Forward(f.Env(), DeltaOf("f2", 3));
  std::vector<Message> forwards = f.Sent();
  REQUIRE(forwards.size() == 2);
  std::set<uint64_t> ids;
  for (const Message& m : forwards) {
    REQUIRE(m.type() == MessageType::kHandoffDelta);
    REQUIRE(f.transfer.HasForward(m.header.request_id));
    ids.insert(m.header.request_id);
  }
  REQUIRE(ids.size() == 2);
  REQUIRE(f.stats.handoff_deltas_forwarded == 2);
  REQUIRE(f.transfer.forward_bytes() > 0);

  // The tick sends those not acknowledged again.
  f.transfer.ForwardAcked(forwards[0].header.request_id);
  f.transfer.ResendForwards(&f.out);
  std::vector<Message> again = f.Sent();
  REQUIRE(again.size() == 1);
  REQUIRE(again[0].header.request_id == forwards[1].header.request_id);
  f.transfer.ForwardAcked(forwards[1].header.request_id);
  REQUIRE(f.transfer.forwards_empty());
  REQUIRE(f.transfer.forward_bytes() == 0);
}

TEST_CASE("transfer: forwards over their bound restart the run") {
  Fixture f;
  f.options.forward_bytes = 200;
  AddElement(*f.sender.replica, "x", "x1");
  f.transfer.StartRun(f.Env());
  f.Sent();
  const uint64_t first_run = f.transfer.run();
  int forwarded = 0;
  while (f.stats.handoff_forward_overflows == 0) {
    f.transfer.Forward(f.Env(),
                       DeltaOf("f" + std::to_string(forwarded), 1 + forwarded));
    ++forwarded;
    REQUIRE(forwarded < 100);
  }
  REQUIRE(forwarded > 1);
  REQUIRE(f.transfer.forwards_empty());
  REQUIRE(f.transfer.forward_bytes() == 0);
  REQUIRE(f.transfer.run() != first_run);
  // The forwards before it went; the one over the bound did not (the new
  // run's snapshots hold it); the new run's first chunk went last.
  const std::vector<Message> sent = f.Sent();
  REQUIRE(sent.size() == static_cast<size_t>(forwarded));
  for (size_t i = 0; i + 1 < sent.size(); ++i) {
    REQUIRE(sent[i].type() == MessageType::kHandoffDelta);
  }
  REQUIRE(sent.back().type() == MessageType::kTransferChunk);
  REQUIRE(sent.back().header.request_id == f.transfer.run());
}

TEST_CASE("transfer: while a proposal is out, forwards wait past the bound") {
  Fixture f;
  f.options.forward_bytes = 200;
  AddElement(*f.sender.replica, "x", "x1");
  f.transfer.StartRun(f.Env());
  ReceiveRun(f);
  const uint64_t run = f.transfer.run();
  f.transfer.Propose(f.Env(), "proposal");
  f.out.effects.clear();
  // The receiver may accept this run: every forward must reach it.
  for (int i = 0; i < 20; ++i) {
    f.transfer.Forward(f.Env(), DeltaOf("p" + std::to_string(i), 1 + i));
  }
  REQUIRE(f.stats.handoff_forward_overflows == 0);
  REQUIRE(f.transfer.forward_bytes() > f.options.forward_bytes);
  REQUIRE(f.transfer.run() == run);
  REQUIRE(f.transfer.phase() == Phase::kProposing);
  REQUIRE(f.Sent().size() == 20);
}

TEST_CASE("transfer: proposal, acceptance, confirmation") {
  Fixture f;
  AddElement(*f.sender.replica, "x", "x1");
  f.transfer.StartRun(f.Env());
  ReceiveRun(f);
  const uint64_t run = f.transfer.run();
  f.transfer.Propose(f.Env(), "proposal");
  REQUIRE(f.transfer.phase() == Phase::kProposing);
  REQUIRE(f.out.effects.size() == 1);
  REQUIRE(f.out.effects[0].bytes == "proposal");
  f.out.effects.clear();
  // Resent alone when due.
  f.now += kRetry;
  f.transfer.Resend(f.Env());
  REQUIRE(f.out.effects.size() == 1);
  REQUIRE(f.out.effects[0].bytes == "proposal");
  f.out.effects.clear();
  REQUIRE(f.transfer.silent() == 1);

  REQUIRE(f.transfer.TakeAnswer(run + 1) == Answer::kIgnored);
  REQUIRE(f.transfer.TakeAnswer(run) == Answer::kProposal);
  REQUIRE(f.transfer.silent() == 0);
  f.transfer.Accepted(f.now);
  REQUIRE(f.transfer.phase() == Phase::kDraining);
  // A duplicate of the answer: nothing in flight to answer.
  REQUIRE(f.transfer.TakeAnswer(run) == Answer::kIgnored);
  // Accepted: deltas are passed on by the manager, not forwarded.
  f.transfer.Forward(f.Env(), DeltaOf("late", 7));
  REQUIRE(f.out.effects.empty());
  f.transfer.Confirm(f.Env(), "proposal");
  REQUIRE(f.out.effects.size() == 1);
  f.out.effects.clear();
  REQUIRE_FALSE(f.transfer.confirmed());
  REQUIRE(f.transfer.TakeAnswer(run) == Answer::kConfirmation);
  f.transfer.Confirmed();
  REQUIRE(f.transfer.confirmed());
}

TEST_CASE("transfer: a refusal backs off; a probe takes a fresh run id") {
  Fixture f;
  AddElement(*f.sender.replica, "x", "x1");
  f.transfer.StartRun(f.Env());
  ReceiveRun(f);
  f.transfer.Propose(f.Env(), "proposal");
  f.out.effects.clear();
  REQUIRE(f.transfer.TakeAnswer(f.transfer.run()) == Answer::kProposal);
  f.transfer.Refused(f.now);
  REQUIRE(f.transfer.phase() == Phase::kSetsDone);
  REQUIRE(f.transfer.Waiting(f.now + 5 * kRetry - 1));
  REQUIRE_FALSE(f.transfer.Waiting(f.now + 5 * kRetry));

  const uint64_t run = f.transfer.run();
  f.transfer.StartProbe(f.Env());
  REQUIRE(f.transfer.probe());
  REQUIRE(f.transfer.run() != run);
  REQUIRE(f.transfer.phase() == Phase::kProposing);
  f.transfer.SendProbe(f.Env(), "probe");
  REQUIRE(f.out.effects.size() == 1);
  f.out.effects.clear();
  REQUIRE(f.transfer.TakeAnswer(run) == Answer::kIgnored);
  REQUIRE(f.transfer.TakeAnswer(f.transfer.run()) == Answer::kProposal);
  f.transfer.ProbeAnswered(f.now);
  REQUIRE_FALSE(f.transfer.probe());
  REQUIRE(f.transfer.phase() == Phase::kSetsDone);
}

TEST_CASE("transfer: a new run ends a probe and what was in flight") {
  Fixture f;
  for (const char* e : {"x1", "x2", "x3"}) {
    AddElement(*f.sender.replica, "x", e);
  }
  f.transfer.StartRun(f.Env());
  f.Sent();
  // A probe in the middle of streaming (the ring moved the receiver away).
  f.transfer.StartProbe(f.Env());
  f.transfer.SendProbe(f.Env(), "probe");
  f.out.effects.clear();
  REQUIRE(f.transfer.probe());
  REQUIRE(f.transfer.control_in_flight());
  const uint64_t probe_run = f.transfer.run();
  f.transfer.StartRun(f.Env());
  REQUIRE_FALSE(f.transfer.probe());
  REQUIRE_FALSE(f.transfer.confirmed());
  REQUIRE(f.transfer.phase() == Phase::kStreaming);
  REQUIRE(f.transfer.run() != probe_run);
  // What is in flight is the new run's first chunk, not the probe.
  REQUIRE(f.transfer.TakeAnswer(probe_run) == Answer::kIgnored);
  const std::vector<Message> sent = f.Sent();
  REQUIRE(sent.size() == 1);
  REQUIRE(Chunk(sent[0]).seq == 0);
  REQUIRE(f.stats.handoff_restarts == 1);
}

TEST_CASE("transfer: Describe says what it does") {
  Fixture f;
  REQUIRE(f.transfer.Describe() == "sending to 2: waiting");
  AddElement(*f.sender.replica, "x", "x1");
  f.transfer.StartRun(f.Env());
  f.Sent();
  f.transfer.Forward(f.Env(), DeltaOf("f", 1));
  REQUIRE(f.transfer.Describe() ==
          "sending to 2: streaming (set #0, run 1), 1 forwards unacknowledged");
  HandoffTransfer supplement(kPartition, kReceiver, /*supplement=*/true,
                             &f.options, f.now);
  REQUIRE(supplement.Describe() == "supplement to 2: waiting");
}

}  // namespace
}  // namespace bigset::testing
