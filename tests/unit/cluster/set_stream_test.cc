// The set stream (cluster/set_stream_receiver.h, set_stream_window.h): the
// one protocol by which hand-off transfers and anti-entropy pushes send sets
// in acknowledged chunks. A sender with a window of chunks in flight streams
// sets to a receiver over a channel that loses, duplicates and reorders
// messages both ways, while the receiver loses its stream states (a
// restart, an expiry, an eviction); the receiving replica must end with the
// ORSWOT join of what it held and what the sender held. Plus the rules one
// by one.

#include "cluster/set_stream.h"

#include <catch2/catch.hpp>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bigset/replica/replica.h"
#include "cluster/set_stream_receiver.h"
#include "cluster/set_stream_window.h"
#include "net/message.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

constexpr NodeId kSender = 7;
constexpr uint32_t kPartition = 3;

using Node = testing::MemReplica;

using Value = std::map<std::string, std::set<Dot>>;

Value ValueOf(Replica& r, std::string_view set) {
  Value v;
  for (const ElementDots& e : ReadAll(r, set)) {
    v[e.element].insert(e.dots.begin(), e.dots.end());
  }
  return v;
}

// Random adds and removes of a few elements in `sets` on `r`.
void Write(Rng& rng, Replica& r, const std::vector<std::string>& sets,
           int ops) {
  for (int i = 0; i < ops; ++i) {
    const std::string& set = sets[Uniform(rng, 0, sets.size() - 1)];
    std::string element = "e" + std::to_string(Uniform(rng, 0, 40));
    UpdateOp op = Uniform(rng, 0, 3) == 0
                      ? UpdateOp::Remove(std::move(element), {})
                      : UpdateOp::Add(std::move(element));
    op.context_from_replica = true;
    REQUIRE(r.Update(set, std::span(&op, 1)).ok());
  }
}

// The sender: a partition's sets one after another, each from a snapshot,
// at most `window` chunks in flight; a set the receiver lost goes again
// under a new index; an end chunk after the last set.
class Sender {
 public:
  Sender(Replica* replica, std::vector<std::string> sets, size_t window,
         size_t batch)
      : replica_(replica),
        sets_(std::move(sets)),
        window_(window),
        batch_(batch) {
    Open();
  }

  bool ended() const { return ended_; }
  uint64_t restarts() const { return restarts_; }

  // Reads and queues chunks while the window has room.
  void Fill(std::deque<std::string>* out) {
    if (pos_ == sets_.size()) {
      if (end_.empty()) {
        msg::TransferChunk end;
        end.index = index_;
        end.end = true;
        end_ = EncodeMessage(kStream, kPartition, end);
        out->push_back(end_);
      }
      return;
    }
    while (reader_ != nullptr && !window_.full()) {
      std::vector<ElementDots> chunk;
      absl::StatusOr<bool> more = reader_->Next(&chunk);
      REQUIRE(more.ok());
      const bool last = !*more || reader_->AtEnd();
      msg::TransferChunk m;
      m.set = sets_[pos_];
      m.index = index_;
      m.seq = window_.next_seq();
      m.last = last;
      if (last) m.set_clock = reader_->clock();
      m.elements = std::move(chunk);
      out->push_back(window_.Add(last, EncodeMessage(kStream, kPartition, m)));
      if (last) reader_.reset();
    }
  }

  // A timeout: every unacknowledged message again.
  void Resend(std::deque<std::string>* out) {
    window_.ForEach([&](const std::string& b) { out->push_back(b); });
    if (!end_.empty() && !ended_) out->push_back(end_);
  }

  void OnAck(const msg::TransferAck& ack) {
    if (ack.index != index_) return;  // An earlier set's: stale.
    if (!end_.empty()) {
      if (ack.status.ok()) ended_ = true;
      return;
    }
    if (!window_.Holds(ack.seq)) return;  // Stale or a duplicate.
    if (IsStreamStateLost(ack.status)) {
      ++restarts_;
      ++index_;
      Open();
      return;
    }
    REQUIRE(ack.status.ok());
    if (window_.Acknowledge(ack.seq)) {
      ++pos_;
      ++index_;
      Open();
    }
  }

  static constexpr uint64_t kStream = 991;

 private:
  void Open() {
    window_.Restart();
    reader_.reset();
    if (pos_ == sets_.size()) return;
    SetReadOptions o;
    o.batch_size = batch_;
    auto r = replica_->Read(sets_[pos_], o);
    REQUIRE(r.ok());
    reader_ = std::move(*r);
  }

  Replica* replica_;
  std::vector<std::string> sets_;
  SetStreamWindow window_;
  size_t batch_;
  size_t pos_ = 0;
  uint64_t index_ = 0;
  std::unique_ptr<SetReader> reader_;
  std::string end_;
  bool ended_ = false;
  uint64_t restarts_ = 0;
};

// The receiver's side of a message, as the protocols do it.
std::string Answer(SetStreamReceiver& receiver, Replica* replica,
                   const std::string& bytes, uint64_t now) {
  absl::StatusOr<Message> decoded = DecodeMessage(bytes);
  REQUIRE(decoded.ok());
  const MessageHeader& h = decoded->header;
  const msg::TransferChunk* m = decoded->As<msg::TransferChunk>();
  REQUIRE(m != nullptr);
  msg::TransferAck ack;
  ack.index = m->index;
  ack.seq = m->seq;
  if (m->end) {
    receiver.Finish(kSender, h.request_id, h.partition);
    return EncodeMessage(h.request_id, h.partition, ack);
  }
  const SetStreamChunk chunk{.from = kSender,
                             .stream = h.request_id,
                             .partition = h.partition,
                             .index = m->index,
                             .seq = m->seq,
                             .set = m->set,
                             .last = m->last,
                             .clock = &m->set_clock,
                             .elements = m->elements};
  SetStreamReceiver::Received r =
      receiver.Receive(chunk, kPartition, replica, now);
  if (!r.answer.has_value()) return "";
  ack.status = *r.answer;
  return EncodeMessage(h.request_id, h.partition, ack);
}

// Takes a random message out of *q (reordering).
std::string TakeAny(Rng& rng, std::deque<std::string>* q) {
  const size_t k = Uniform(rng, 0, q->size() - 1);
  std::string m = std::move((*q)[k]);
  q->erase(q->begin() + static_cast<ptrdiff_t>(k));
  return m;
}

TEST_CASE(
    "set stream: over a lossy, reordering channel with receiver "
    "restarts, the receiver ends with the join of both replicas") {
  uint64_t total_restarts = 0, total_clears = 0, total_steps = 0;
  for (uint64_t seed : Seeds(200)) {
    CAPTURE(seed);
    Rng rng(seed);
    Node sender_node(0xA1);
    Node receiver_node(0xB2);
    std::vector<std::string> sets;
    const size_t n_sets = Uniform(rng, 1, 5);
    for (size_t i = 0; i < n_sets; ++i) sets.push_back("s" + std::to_string(i));
    Write(rng, *sender_node.replica, sets,
          static_cast<int>(Uniform(rng, 0, 300)));
    Write(rng, *receiver_node.replica, sets,
          static_cast<int>(Uniform(rng, 0, 60)));
    std::map<std::string, Value> expected;
    for (const std::string& s : sets) {
      // Different actors, no deltas exchanged: the join is the union.
      expected[s] = ValueOf(*receiver_node.replica, s);
      for (auto& [e, dots] : ValueOf(*sender_node.replica, s)) {
        expected[s][e].insert(dots.begin(), dots.end());
      }
    }
    const size_t window = Uniform(rng, 1, 4);
    Sender sender(sender_node.replica.get(), sets, window, Uniform(rng, 1, 9));
    SetStreamReceiver receiver(SetStreamReceiver::Limits{
        .max_streams = Uniform(rng, 1, 3), .max_finished = 4});
    std::deque<std::string> to_receiver, to_sender;
    const uint64_t loss = Uniform(rng, 0, 25);  // Percent, each way.
    uint64_t now = 0;
    int steps = 0;
    int clears = 0;
    for (; !sender.ended() && steps < 200000; ++steps) {
      now += Uniform(rng, 0, 10);
      sender.Fill(&to_receiver);
      const uint64_t event = Uniform(rng, 0, 999);
      if (event < 450) {
        if (to_receiver.empty()) continue;
        std::string m = TakeAny(rng, &to_receiver);
        if (Uniform(rng, 0, 99) < 10) to_receiver.push_back(m);  // Twice.
        if (Uniform(rng, 0, 99) < loss) continue;
        std::string ack = Answer(receiver, receiver_node.replica.get(), m, now);
        if (!ack.empty()) to_sender.push_back(std::move(ack));
      } else if (event < 900) {
        if (to_sender.empty()) continue;
        std::string m = TakeAny(rng, &to_sender);
        if (Uniform(rng, 0, 99) < loss) continue;
        absl::StatusOr<Message> ack = DecodeMessage(m);
        REQUIRE(ack.ok());
        REQUIRE(ack->As<msg::TransferAck>() != nullptr);
        sender.OnAck(*ack->As<msg::TransferAck>());
      } else if (event < 903) {
        receiver.Clear();  // The receiving node restarted.
        ++clears;
      } else if (event < 905) {
        receiver.Expire(now, Uniform(rng, 0, 2000));
      } else if (to_receiver.empty() && to_sender.empty()) {
        sender.Resend(&to_receiver);  // A timeout.
      }
    }
    INFO("steps " << steps << ", restarts " << sender.restarts()
                  << ", receiver restarts " << clears);
    REQUIRE(sender.ended());
    CHECK(receiver.FinishedPartition(kSender, Sender::kStream) == kPartition);
    for (const std::string& s : sets) {
      CAPTURE(s);
      CHECK(ValueOf(*receiver_node.replica, s) == expected[s]);
    }
    total_restarts += sender.restarts();
    total_clears += static_cast<uint64_t>(clears);
    total_steps += static_cast<uint64_t>(steps);
  }
  // The adversary did its part: states were lost and sets sent again.
  CHECK(total_clears > 0);
  CHECK(total_restarts > 0);
  WARN("set streams: " << total_steps << " steps, " << total_clears
                       << " receiver restarts, " << total_restarts
                       << " sets sent again");
}

// One chunk of set `set` (its elements: `n` keys of actor 0xA1).
struct Chunk {
  std::vector<ElementDots> elements;
  Clock clock;
  SetStreamChunk Of(uint64_t index, uint64_t seq, std::string_view set,
                    bool last, uint64_t stream = 5) const {
    return SetStreamChunk{.from = kSender,
                          .stream = stream,
                          .partition = kPartition,
                          .index = index,
                          .seq = seq,
                          .set = set,
                          .last = last,
                          .clock = &clock,
                          .elements = elements};
  }
};

Chunk MakeChunk(uint64_t first_counter, int n) {
  Chunk c;
  for (int i = 0; i < n; ++i) {
    const uint64_t counter = first_counter + static_cast<uint64_t>(i);
    c.elements.push_back(
        ElementDots{"x" + std::to_string(counter), {Dot{0xA1, counter}}});
  }
  // The sender's clock has seen every dot up to the chunk's last.
  for (uint64_t k = 1; k < first_counter + static_cast<uint64_t>(n); ++k) {
    c.clock.AddDot(Dot{0xA1, k});
  }
  return c;
}

TEST_CASE("set stream receiver: each rule of the protocol") {
  Node node(0xB2);
  Replica* r = node.replica.get();
  SetStreamReceiver rx(SetStreamReceiver::Limits{});
  const Chunk first = MakeChunk(1, 3);
  const Chunk second = MakeChunk(4, 2);

  SECTION("a set of another partition is refused and nothing is applied") {
    auto out = rx.Receive(first.Of(0, 0, "s", false), kPartition + 1, r, 1);
    REQUIRE(out.answer.has_value());
    CHECK(out.answer->code() == absl::StatusCode::kInvalidArgument);
    CHECK(rx.empty());
    CHECK(ValueOf(*r, "s").empty());
  }
  SECTION("no replica: Unavailable, but an ended stream answers OK") {
    auto out = rx.Receive(first.Of(0, 0, "s", false), kPartition, nullptr, 1);
    REQUIRE(out.answer.has_value());
    CHECK(out.answer->code() == absl::StatusCode::kUnavailable);
    rx.Finish(kSender, 5, kPartition);
    out = rx.Receive(first.Of(0, 0, "s", false), kPartition, nullptr, 1);
    REQUIRE(out.answer.has_value());
    CHECK(out.answer->ok());
    CHECK(out.keys == 0);
  }
  SECTION("in order: applied; a duplicate: OK, not applied again") {
    auto out = rx.Receive(first.Of(0, 0, "s", false), kPartition, r, 1);
    CHECK(out.answer == absl::OkStatus());
    CHECK(out.keys == 3);
    out = rx.Receive(first.Of(0, 0, "s", false), kPartition, r, 2);
    CHECK(out.answer == absl::OkStatus());
    CHECK(out.keys == 0);
    out = rx.Receive(second.Of(0, 1, "s", true), kPartition, r, 3);
    CHECK(out.answer == absl::OkStatus());
    CHECK(out.set_done);
    CHECK(ValueOf(*r, "s").size() == 5);
  }
  SECTION("past a gap: no answer, nothing applied") {
    REQUIRE(rx.Receive(first.Of(0, 0, "s", false), kPartition, r, 1).answer ==
            absl::OkStatus());
    auto out = rx.Receive(second.Of(0, 2, "s", true), kPartition, r, 2);
    CHECK_FALSE(out.answer.has_value());
    CHECK(ValueOf(*r, "s").size() == 3);
  }
  SECTION("a lost state: Aborted for any chunk but a set's first") {
    auto out = rx.Receive(second.Of(0, 1, "s", true), kPartition, r, 1);
    REQUIRE(out.answer.has_value());
    CHECK(IsStreamStateLost(*out.answer));
    REQUIRE(rx.Receive(first.Of(0, 0, "s", false), kPartition, r, 1).answer ==
            absl::OkStatus());
    rx.Clear();  // A restart.
    out = rx.Receive(second.Of(0, 1, "s", true), kPartition, r, 2);
    REQUIRE(out.answer.has_value());
    CHECK(IsStreamStateLost(*out.answer));
    // A later index is the set again, from its first chunk.
    out = rx.Receive(second.Of(1, 1, "s", true), kPartition, r, 2);
    CHECK(IsStreamStateLost(*out.answer));
    CHECK(rx.Receive(first.Of(1, 0, "s", false), kPartition, r, 3).answer ==
          absl::OkStatus());
  }
  SECTION("another set at the current index: Aborted, the state dropped") {
    REQUIRE(rx.Receive(first.Of(0, 0, "s", false), kPartition, r, 1).answer ==
            absl::OkStatus());
    auto out = rx.Receive(second.Of(0, 1, "t", true), kPartition, r, 2);
    REQUIRE(out.answer.has_value());
    CHECK(IsStreamStateLost(*out.answer));
    CHECK(rx.empty());
  }
  SECTION("an earlier set's chunk: no answer") {
    REQUIRE(rx.Receive(first.Of(2, 0, "s", false), kPartition, r, 1).answer ==
            absl::OkStatus());
    CHECK_FALSE(
        rx.Receive(second.Of(1, 1, "s", true), kPartition, r, 2).answer);
  }
  SECTION("the replica's error is answered and the set starts over") {
    // A dot of the receiver's own actor it never generated: refused.
    Chunk bad = MakeChunk(1, 2);
    bad.elements[1].dots = {Dot{0xB2, 1000}};
    auto out = rx.Receive(bad.Of(0, 0, "s", true), kPartition, r, 1);
    REQUIRE(out.answer.has_value());
    CHECK(out.answer->code() == absl::StatusCode::kInvalidArgument);
    CHECK_FALSE(IsStreamStateLost(*out.answer));
    CHECK(rx.empty());
  }
}

TEST_CASE("set stream receiver: bounded states, expiry, ended streams") {
  Node node(0xB2);
  Replica* r = node.replica.get();
  const Chunk c = MakeChunk(1, 1);
  SECTION("beyond max_streams the idlest state is evicted") {
    SetStreamReceiver rx(SetStreamReceiver::Limits{.max_streams = 2});
    REQUIRE(rx.Receive(c.Of(0, 0, "a", false, 1), kPartition, r, 10).answer);
    REQUIRE(rx.Receive(c.Of(0, 0, "b", false, 2), kPartition, r, 5).answer);
    REQUIRE(rx.Receive(c.Of(0, 0, "c", false, 3), kPartition, r, 20).answer);
    CHECK(rx.size() == 2);
    // Stream 2 (idlest) is gone; 1 and 3 go on.
    CHECK(IsStreamStateLost(
        *rx.Receive(c.Of(0, 1, "b", false, 2), kPartition, r, 21).answer));
    CHECK(rx.Receive(c.Of(0, 1, "a", false, 1), kPartition, r, 21).answer ==
          absl::OkStatus());
  }
  SECTION("idle states expire; a clock that went back expires nothing") {
    SetStreamReceiver rx(SetStreamReceiver::Limits{});
    REQUIRE(rx.Receive(c.Of(0, 0, "a", false), kPartition, r, 100).answer);
    rx.Expire(50, 10);  // The clock went back.
    CHECK(rx.size() == 1);
    rx.Expire(109, 10);
    CHECK(rx.size() == 1);
    rx.Expire(110, 10);
    CHECK(rx.empty());
  }
  SECTION("ended streams: bounded, forgotten by partition") {
    SetStreamReceiver rx(SetStreamReceiver::Limits{.max_finished = 2});
    rx.Finish(kSender, 1, 0);
    rx.Finish(kSender, 2, 1);
    rx.Finish(kSender, 2, 1);  // Idempotent.
    CHECK(rx.FinishedPartition(kSender, 1) == 0u);
    rx.Finish(kSender, 3, 1);
    CHECK_FALSE(rx.FinishedPartition(kSender, 1).has_value());
    CHECK(rx.FinishedPartition(kSender, 2) == 1u);
    rx.ForgetPartition(1);
    CHECK_FALSE(rx.FinishedPartition(kSender, 2).has_value());
    CHECK_FALSE(rx.FinishedPartition(kSender, 3).has_value());
  }
  SECTION("a partition's replica goes away: its streams in progress too") {
    // Regression (found by the set stream attack): a state outlived the
    // replica it applied chunks to, and the set's next chunks went to the
    // replica opened later under its tracker.
    SetStreamReceiver rx(SetStreamReceiver::Limits{});
    const SetStreamChunk other{.from = kSender,
                               .stream = 9,
                               .partition = kPartition + 1,
                               .set = "b",
                               .elements = c.elements};
    REQUIRE(rx.Receive(c.Of(0, 0, "a", false, 1), kPartition, r, 1).answer);
    REQUIRE(rx.Receive(other, kPartition + 1, r, 1).answer);
    rx.Finish(kSender, 2, kPartition);
    rx.ForgetPartition(kPartition);
    CHECK(rx.size() == 1);  // The other partition's stream goes on.
    CHECK_FALSE(rx.FinishedPartition(kSender, 2).has_value());
    auto out = rx.Receive(c.Of(0, 1, "a", false, 1), kPartition, r, 2);
    REQUIRE(out.answer.has_value());
    CHECK(IsStreamStateLost(*out.answer));
    CHECK(out.keys == 0);
  }
}

TEST_CASE(
    "set stream window: a set's first chunk alone, then cumulative "
    "acknowledgements and go-back-N") {
  SetStreamWindow w(3);
  CHECK(w.empty());
  CHECK(w.Add(false, "a") == "a");
  CHECK(w.full());  // The set's first chunk travels alone.
  CHECK_FALSE(w.Acknowledge(0));
  CHECK(w.empty());
  w.Add(false, "bb");
  w.Add(false, "ccc");
  CHECK_FALSE(w.full());
  w.Add(true, "dddd");
  CHECK(w.full());
  CHECK(w.bytes() == 9);
  CHECK(w.next_seq() == 4);
  CHECK(w.Holds(1));
  CHECK_FALSE(w.Holds(0));
  CHECK_FALSE(w.Holds(4));
  std::string sent;
  w.ForEach([&](const std::string& b) { sent += b; });
  CHECK(sent == "bbcccdddd");
  CHECK_FALSE(w.Acknowledge(2));  // 1 and 2 leave.
  CHECK(w.size() == 1);
  CHECK(w.Acknowledge(3));  // The set's last chunk.
  CHECK(w.empty());
  w.Restart();  // The set again: its first chunk alone again.
  CHECK(w.next_seq() == 0);
  w.Add(false, "a");
  CHECK(w.full());
  SetStreamWindow one(0);  // A capacity of at least one.
  one.Add(false, "x");
  one.Acknowledge(0);
  one.Add(false, "y");
  CHECK(one.full());
}

// A receiver that lost a stream's state (a restart, an expiry, an
// eviction) and then gets a late duplicate of the set's first chunk starts
// the set from it; the sender acknowledged that chunk long ago and has
// chunks further on in flight. Those are past a gap for the new state, so
// they get no answer; the sender retransmits them and hears nothing until
// the state expires (hand-off: receiver_idle_micros, 30 s by default, the
// whole transfer stalled; a push: abandoned after its retries). The first
// retransmission that finds such a state should learn that the set must
// start over.
TEST_CASE(
    "set stream: a late first chunk after a lost state does not silence the "
    "chunks in flight",
    "[regression]") {
  Node node(0xB2);
  Replica* r = node.replica.get();
  SetStreamReceiver rx(SetStreamReceiver::Limits{});
  const Chunk c0 = MakeChunk(1, 2);
  const Chunk c1 = MakeChunk(3, 2);
  const Chunk c2 = MakeChunk(5, 2);
  const Chunk c3 = MakeChunk(7, 2);
  REQUIRE(rx.Receive(c0.Of(0, 0, "s", false), kPartition, r, 1).answer ==
          absl::OkStatus());
  REQUIRE(rx.Receive(c1.Of(0, 1, "s", false), kPartition, r, 2).answer ==
          absl::OkStatus());
  REQUIRE(rx.Receive(c2.Of(0, 2, "s", false), kPartition, r, 3).answer ==
          absl::OkStatus());
  rx.Clear();  // The receiving node restarted (or expired the state).
  // The late duplicate of chunk 0: a new state; its ack is stale for the
  // sender, whose window holds chunk 3 only.
  REQUIRE(rx.Receive(c0.Of(0, 0, "s", false), kPartition, r, 4).answer ==
          absl::OkStatus());
  int answered = 0;
  for (uint64_t now = 5; now < 15; ++now) {  // Retransmissions of chunk 3.
    answered += rx.Receive(c3.Of(0, 3, "s", true), kPartition, r, now)
                    .answer.has_value();
  }
  CHECK(answered > 0);
  // Nothing was lost meanwhile: what was applied is there.
  CHECK(ValueOf(*r, "s").size() == 6);
}

// A push (one set, index 0, one chunk) retransmitted after the receiver
// forgot that it ended (the bound on ended streams) is applied again from
// the start: it must not bring back an element removed here since.
TEST_CASE(
    "set stream receiver: a one-chunk push replayed after its end was "
    "forgotten resurrects nothing") {
  Node node(0xB2);
  Replica* r = node.replica.get();
  SetStreamReceiver rx(SetStreamReceiver::Limits{.max_finished = 1});
  const Chunk push = MakeChunk(1, 3);  // x1..x3, clock {A1:1..3}.
  auto out = rx.Receive(push.Of(0, 0, "s", true, 40), kPartition, r, 1);
  REQUIRE(out.answer == absl::OkStatus());
  REQUIRE(out.set_done);
  rx.Finish(kSender, 40, kPartition);
  REQUIRE(ValueOf(*r, "s").size() == 3);
  // x2 removed here (its observed dots as context).
  UpdateOp rm = UpdateOp::Remove("x2", {});
  rm.context_from_replica = true;
  REQUIRE(r->Update("s", std::span(&rm, 1)).ok());
  REQUIRE_FALSE(ValueOf(*r, "s").contains("x2"));
  rx.Finish(kSender, 41, kPartition);  // Push 40 is forgotten.
  REQUIRE_FALSE(rx.FinishedPartition(kSender, 40).has_value());
  // Its retransmission: a new state, the chunk applied again.
  out = rx.Receive(push.Of(0, 0, "s", true, 40), kPartition, r, 2);
  REQUIRE(out.answer == absl::OkStatus());
  const Value v = ValueOf(*r, "s");
  CHECK(v.size() == 2);
  CHECK_FALSE(v.contains("x2"));
  // And a later chunk of a forgotten multi-chunk push (39, ended before
  // 40) is Aborted (its sender, done, ignores it), applying nothing.
  out = rx.Receive(push.Of(0, 1, "s", true, 39), kPartition, r, 3);
  REQUIRE(out.answer.has_value());
  CHECK(IsStreamStateLost(*out.answer));
}

}  // namespace
}  // namespace bigset::testing
