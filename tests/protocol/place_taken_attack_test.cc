// Attacks on the place an acknowledgement names (msg::PlaceTaken, the
// trailing `took from`, `episode` of ReplicateAck and HandoffDeltaAck) and
// on the write coordinator's merging of places (WriteCoordinator::
// Acknowledged, MergePlaces; MembershipState::PlaceGivers):
//
// 1. Bad bytes: acknowledgements whose place is truncated, extended, names
//    node 0, a node id past 32 bits, or is random, with valid checksums.
//    Nothing crashes, they count as malformed and for nothing, and the
//    write still ends by its deadline.
// 2. Forged places on truthful acknowledgements (the node did apply the
//    delta): a place taken from a node outside the list, from the node
//    itself, from the coordinating node, from another list member in its
//    current episode or in an episode the view does not know. A place can
//    only merge places: the write never answers OK with fewer than W
//    replicas holding its delta, and it still ends.
// 3. Order and duplicates: the taker's acknowledgement before and after
//    the giver's, duplicated, and places on the acknowledgements of extra
//    (failover) deltas.
// 4. The defect of 294ff43 at the node level: a write coordinated by a
//    listed replica whose place another listed replica names as taken.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#define private public
#include "bigset/cluster/node.h"
#include "cluster/node_impl.h"
#undef private

#include "absl/strings/escaping.h"
#include "core/coding.h"
#include "failover_fixture.h"
#include "manual_cluster.h"
#include "net/message.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

using Sent = ManualCluster::Sent;
constexpr uint64_t kHuge = std::numeric_limits<uint64_t>::max();

struct Fx : FailoverFixture {
  using FailoverFixture::FailoverFixture;

  Node::Impl& I(NodeId id) { return *c.node(id).impl_; }

  // The write's request id, from a queued delta it replicates, and when it
  // started (the client's clock).
  uint64_t id = 0;
  uint64_t start = 0;

  // A node of 1..5 outside the list and not the client (0: none).
  NodeId Outsider() {
    for (NodeId n = 1; n <= 5; ++n) {
      if (n != client && std::find(pl.begin(), pl.end(), n) == pl.end()) {
        return n;
      }
    }
    return 0;
  }

  // `node`'s episode of serving the partition in the client's view.
  uint64_t Since(NodeId node) {
    auto e = I(client).roles_.view_->EntryOf(node, partition);
    REQUIRE(e.has_value());
    return e->since;
  }

  // Starts a write of x through the client, coordinated by pl[0], whose
  // replicates and their acknowledgements stay queued: only pl[0] holds x.
  void StartHeld() {
    c.Hold(Or(OfType(MessageType::kReplicate),
              OfType(MessageType::kReplicateAck)));
    Write({UpdateOp::Add("x")});
    REQUIRE(c.DeliverOne(And(To(pl[0]), OfType(MessageType::kUpdate))));
    REQUIRE(c.DeliverOne(And(From(pl[0]), OfType(MessageType::kUpdateReply))));
    id = QueuedWriteId();
    REQUIRE(id != 0);
    start = c.Now(client);
    REQUIRE(!result.has_value());
  }

  // An acknowledgement of the write from `from`, as its body bytes.
  std::string AckBody(NodeId applied_by, msg::PlaceTaken taken) {
    std::string bytes;
    EncodeStatusReply(MessageHeader{MessageType::kReplicateAck, id, partition},
                      absl::OkStatus(), applied_by, taken, &bytes);
    MessageHeader h;
    std::string_view body;
    REQUIRE(ParseHeader(bytes, &h, &body).ok());
    return std::string(body);
  }
  // A message of `type` with `body` and a valid checksum.
  std::string Frame(MessageType type, std::string_view body, uint64_t rid = 0) {
    std::string bytes;
    EncodeHeader(MessageHeader{type, rid != 0 ? rid : id, partition}, &bytes);
    bytes.append(body);
    FinishMessage(0, &bytes);
    return bytes;
  }
  void Inject(NodeId from, std::string bytes) {
    c.queue().push_back(Sent{from, client, std::move(bytes)});
    REQUIRE(c.DeliverOne(And(From(from), To(client))));
  }

  // Lets `node` apply the held replicate; returns its real acknowledgement
  // (taken out of the network).
  Sent ApplyOn(NodeId node) {
    REQUIRE(c.DeliverOne(And(To(node), OfType(MessageType::kReplicate))));
    for (int i = 0; i < 3; ++i) {
      for (auto it = c.queue().begin(); it != c.queue().end(); ++it) {
        if (it->from == node && it->type() == MessageType::kReplicateAck) {
          Sent s = *it;
          c.queue().erase(it);
          return s;
        }
      }
      c.RunTimers(node);
    }
    FAIL("no acknowledgement from node " << node);
    return Sent{};
  }
  // `ack` with its place replaced by `taken`.
  std::string WithPlace(const Sent& ack, msg::PlaceTaken taken) {
    MessageHeader h;
    std::string_view body;
    REQUIRE(ParseHeader(ack.bytes, &h, &body).ok());
    absl::Status status;
    NodeId applied_by = 0;
    msg::PlaceTaken old;
    REQUIRE(ParseStatusBody(body, &status, &applied_by, &old).ok());
    std::string out;
    EncodeStatusReply(h, status, applied_by, taken, &out);
    return out;
  }

  // How many replicas of the list hold x.
  size_t Holders() {
    size_t n = 0;
    for (NodeId node : pl) n += DotsOn(node, "x").empty() ? 0 : 1;
    return n;
  }
  // The write must end: answered within its deadline, and gone from the
  // client after it.
  void CheckEnds() {
    for (int i = 0; i < 40 && !result.has_value(); ++i) c.Advance(100'000);
    REQUIRE(result.has_value());
    CHECK(c.Now(client) - start <= wo.timeout_micros + wo.retry_micros);
    if (result->ok()) CHECK(Holders() >= static_cast<size_t>(wo.w));
    c.Unhold();
    for (int i = 0; i < 40; ++i) c.Advance(100'000);
    CHECK(calls == 1);
    CHECK(I(client).requests_.running(RequestKind::kWrite) == 0);
    CHECK(I(client).requests_.routes(RequestKind::kWrite) == 0);
  }
};

std::string Varints(std::initializer_list<uint64_t> vs) {
  std::string out;
  for (uint64_t v : vs) coding::PutVarint64(&out, v);
  return out;
}

// ---------------------------------------------------------------------------
// 1. Bad bytes.

TEST_CASE(
    "place taken attack: acknowledgements with bad place bytes are malformed, "
    "count for nothing, and the write still ends") {
  Fx f(5, 3);
  f.StartHeld();
  const NodeId b = f.pl[1];
  const std::string bare = f.AckBody(b, msg::PlaceTaken());
  const std::string full = f.AckBody(b, msg::PlaceTaken{f.pl[2], 300});
  REQUIRE(full.size() > bare.size() + 2);
  std::vector<std::string> bodies;
  // Truncated inside the place (the body ends in the middle of it).
  for (size_t len = bare.size() + 1; len < full.size(); ++len) {
    bodies.push_back(full.substr(0, len));
  }
  // Extended past a complete place.
  for (int extra = 1; extra <= 8; ++extra) {
    bodies.push_back(full + std::string(static_cast<size_t>(extra), '\x01'));
  }
  // Node 0 as the giver, with an episode, with none, with more.
  bodies.push_back(bare + Varints({0, 7}));
  bodies.push_back(bare + Varints({0}));
  bodies.push_back(bare + Varints({0, 0}));
  bodies.push_back(bare + Varints({0, kHuge}));
  // A giver past 32 bits.
  bodies.push_back(bare + Varints({uint64_t{1} << 32, 1}));
  bodies.push_back(bare + Varints({kHuge, 1}));
  // A varint that never ends.
  for (int n = 1; n <= 11; ++n) {
    bodies.push_back(bare + std::string(static_cast<size_t>(n), '\x80'));
  }
  bodies.push_back(bare + Varints({f.pl[2]}) + std::string(11, '\xff'));
  const uint64_t malformed_before =
      Stat(f.ClientStats(), "node.malformed_messages");
  for (const std::string& body : bodies) {
    for (MessageType t :
         {MessageType::kReplicateAck, MessageType::kHandoffDeltaAck}) {
      CAPTURE(absl::CEscape(body), static_cast<int>(t));
      f.Inject(b, f.Frame(t, body));
      CHECK_FALSE(f.result.has_value());
    }
  }
  CHECK(Stat(f.ClientStats(), "node.malformed_messages") - malformed_before ==
        2 * bodies.size());
  CHECK_FALSE(f.result.has_value());
  CHECK(f.Holders() == 1);
  // The real acknowledgements still make it.
  f.c.Unhold();
  f.CheckEnds();
  CHECK(f.result->ok());
  CHECK(f.Holders() == 3);
}

TEST_CASE(
    "place taken attack: random place bytes on acknowledgements that name the "
    "coordinating replica never make W") {
  for (uint64_t seed : {1u, 77u, 4242u}) {
    CAPTURE(seed);
    Fx f(5, 3);
    f.StartHeld();
    Rng rng(seed);
    // Acknowledgements passed on by the other list members (and outsiders)
    // for the node that coordinated: whatever place they name, one replica
    // holds x.
    const std::string bare = f.AckBody(f.pl[0], msg::PlaceTaken());
    const std::vector<NodeId> senders = {f.pl[1], f.pl[2], f.Outsider(),
                                         f.client};
    for (int i = 0; i < 400; ++i) {
      std::string body = bare;
      switch (Uniform(rng, 0, 2)) {
        case 0:
          body += AdversarialBytes(rng, 24);
          break;
        case 1:  // A well-formed place of a random node and episode.
          body += Varints({Uniform(rng, 1, 6), Uniform(rng, 0, 4)});
          break;
        default:  // A place naming a list member in its episode.
          const NodeId g = f.pl[Uniform(rng, 0, 2)];
          body += Varints({g, f.Since(g)});
          break;
      }
      const MessageType t = Uniform(rng, 0, 3) == 0
                                ? MessageType::kHandoffDeltaAck
                                : MessageType::kReplicateAck;
      f.Inject(senders[Uniform(rng, 0, senders.size() - 1)], f.Frame(t, body));
      INFO("message " << i << ": " << absl::CEscape(body));
      // Forged relays may merge every place and end the write refused;
      // never answered OK with x on one replica.
      if (f.result.has_value()) REQUIRE_FALSE(f.result->ok());
    }
    CHECK(f.Holders() == 1);
    CHECK(Stat(f.ClientStats(), "node.malformed_messages") > 0);
    f.c.Unhold();
    f.CheckEnds();
    UNSCOPED_INFO("seed " << seed << ": " << f.result->status());
  }
}

// ---------------------------------------------------------------------------
// 2. Forged places on truthful acknowledgements.

TEST_CASE(
    "place taken attack: a forged place on a true acknowledgement only ever "
    "merges places") {
  Fx f(5, 3);
  f.StartHeld();
  const NodeId a = f.pl[0], b = f.pl[1], cc = f.pl[2];
  INFO("list " << a << " " << b << " " << cc << ", client " << f.client
               << ", since " << f.Since(a) << " " << f.Since(b) << " "
               << f.Since(cc));
  // The client's view knows the list's episodes (not guesses).
  REQUIRE(f.Since(a) != 0);
  REQUIRE(f.Since(cc) != 0);
  const Sent b_ack = f.ApplyOn(b);  // A and B hold x: W = 2 is true.
  REQUIRE(f.Holders() == 2);
  // Whether B's acknowledgement, naming `taken`, makes W at once (two
  // places) or waits for C (B's place merged with another).
  auto run = [&](msg::PlaceTaken taken, bool answers_at_once) {
    f.Inject(b, f.WithPlace(b_ack, taken));
    if (answers_at_once) {
      REQUIRE(f.result.has_value());
      CHECK(f.result->ok());
    } else {
      CHECK_FALSE(f.result.has_value());
      // A duplicate changes nothing.
      f.Inject(b, f.WithPlace(b_ack, taken));
      CHECK_FALSE(f.result.has_value());
      const Sent c_ack = f.ApplyOn(cc);
      f.c.queue().push_back(c_ack);
      REQUIRE(f.c.DeliverOne(From(cc)));
      REQUIRE(f.result.has_value());
      CHECK(f.result->ok());
      CHECK(f.Holders() == 3);
    }
  };
  SECTION("a node outside the list") {
    run(msg::PlaceTaken{f.Outsider(), 1}, true);
  }
  SECTION("the client node, which coordinates") {
    run(msg::PlaceTaken{f.client, 1}, true);
  }
  SECTION("the acknowledging node itself") {
    run(msg::PlaceTaken{b, f.Since(b)}, true);
  }
  SECTION("a node id no cluster has") {
    run(msg::PlaceTaken{std::numeric_limits<NodeId>::max(), kHuge}, true);
  }
  SECTION("the coordinating replica in its episode: one place with it") {
    run(msg::PlaceTaken{a, f.Since(a)}, false);
  }
  SECTION("the coordinating replica in an episode the view does not know") {
    run(msg::PlaceTaken{a, kHuge}, true);
  }
  SECTION("the other list member in its episode") {
    run(msg::PlaceTaken{cc, f.Since(cc)}, false);
  }
  SECTION("the other list member in an earlier episode") {
    run(msg::PlaceTaken{cc, f.Since(cc) - 1}, true);
  }
  f.CheckEnds();
}

// ---------------------------------------------------------------------------
// 3. Order and duplicates.

TEST_CASE(
    "place taken attack: the taker's acknowledgement before or after the "
    "giver's, duplicated") {
  // B acknowledges naming C's place (B took it): A's place and {B, C}.
  Fx f(5, 3);
  f.StartHeld();
  const NodeId b = f.pl[1], cc = f.pl[2];
  const Sent b_ack = f.ApplyOn(b);
  const Sent c_ack = f.ApplyOn(cc);
  const std::string taker = f.WithPlace(b_ack, {cc, f.Since(cc)});
  SECTION("taker first: the place waits for the giver") {
    for (int i = 0; i < 3; ++i) f.Inject(b, taker);
    CHECK_FALSE(f.result.has_value());
    f.c.queue().push_back(c_ack);
    REQUIRE(f.c.DeliverOne(From(cc)));
    REQUIRE(f.result.has_value());
    CHECK(f.result->ok());
  }
  SECTION("giver first: it is a place of its own until the taker speaks") {
    f.c.queue().push_back(c_ack);
    REQUIRE(f.c.DeliverOne(From(cc)));
    REQUIRE(f.result.has_value());
    CHECK(f.result->ok());
    for (int i = 0; i < 3; ++i) f.Inject(b, taker);
  }
  SECTION("taker, a plain copy of its acknowledgement, the taker again") {
    f.Inject(b, taker);
    f.Inject(b, b_ack.bytes);  // Without the place: merged places stay.
    f.Inject(b, taker);
    CHECK_FALSE(f.result.has_value());
    f.c.queue().push_back(c_ack);
    REQUIRE(f.c.DeliverOne(From(cc)));
    REQUIRE(f.result.has_value());
  }
  SECTION("every place merged: no W places, the write still ends") {
    // B took C's place and C took A's: one place left of three.
    f.Inject(b, taker);
    f.Inject(cc, f.WithPlace(c_ack, {f.pl[0], f.Since(f.pl[0])}));
    // Every replica acknowledged, one place: refused at once.
    REQUIRE(f.result.has_value());
    CHECK(absl::IsUnavailable(f.result->status()));
    f.CheckEnds();
    return;
  }
  f.CheckEnds();
  CHECK(f.result->ok());
}

TEST_CASE(
    "place taken attack: places on the acknowledgements of an extra delta "
    "leave the write to end with every dot everywhere") {
  Fx f(5, 3);
  const NodeId a = f.pl[0];
  f.WriteWhileCutOff(a, {UpdateOp::Add("x")});
  REQUIRE(f.result->ok());
  f.GivenUpAnswers(a);  // A's own dot is an extra delta now.
  f.c.Hold(OfType(MessageType::kReplicateAck));
  f.c.Advance(1000);
  // Every acknowledgement, of the chosen delta and of the extra one, names
  // the place of another list member, and comes twice.
  std::vector<Sent> acks;
  for (const Sent& s : f.c.queue()) {
    if (s.type() == MessageType::kReplicateAck && s.to == f.client) {
      acks.push_back(s);
    }
  }
  f.c.Drop(And(OfType(MessageType::kReplicateAck), To(f.client)));
  REQUIRE(!acks.empty());
  for (const Sent& s : acks) {
    const size_t i = std::find(f.pl.begin(), f.pl.end(), s.from) - f.pl.begin();
    REQUIRE(i < f.pl.size());
    const NodeId g = f.pl[(i + 1) % f.pl.size()];
    const std::string bytes = f.WithPlace(s, {g, f.Since(g)});
    f.c.queue().push_back(Sent{s.from, f.client, bytes});
    f.c.queue().push_back(Sent{s.from, f.client, bytes});
  }
  f.c.Unhold();
  for (int i = 0; i < 60; ++i) f.c.Advance(100'000);
  CHECK(f.calls == 1);
  for (NodeId n : f.pl) {
    INFO("node " << n);
    CHECK(f.DotsOn(n, "x").size() == 2);
  }
  CHECK(f.I(f.client).requests_.running(RequestKind::kWrite) == 0);
  CHECK(f.I(f.client).requests_.routes(RequestKind::kWrite) == 0);
}

// ---------------------------------------------------------------------------
// 4. The defect at the node level.

TEST_CASE(
    "place taken attack: a listed replica coordinating a write does not count "
    "an acknowledgement naming its own place as a second place",
    "[regression]") {
  // pl[0] coordinates (in-process) and applies x; pl[1] acknowledges naming
  // pl[0]'s place in the episode it serves (as the node that took pl[0]'s
  // place would, pl[0]'s list being from before the move). W = 2 waits for
  // pl[2].
  Fx f(5, 3);
  const NodeId a = f.pl[0], b = f.pl[1], cc = f.pl[2];
  f.c.Hold(OfType(MessageType::kReplicateAck));
  std::optional<absl::StatusOr<Delta>> got;
  f.c.node(a).Update(f.set, {UpdateOp::Add("x")}, f.wo,
                     [&](absl::StatusOr<Delta> d) { got = d; });
  f.c.Advance(1000);
  REQUIRE(!got.has_value());
  REQUIRE(f.DotsOn(a, "x").size() == 1);
  auto take = [&](NodeId from) {
    std::vector<Sent> out;
    for (const Sent& s : f.c.queue()) {
      if (s.from == from && s.to == a &&
          s.type() == MessageType::kReplicateAck) {
        out.push_back(s);
      }
    }
    f.c.Drop(And(From(from), And(To(a), OfType(MessageType::kReplicateAck))));
    REQUIRE(!out.empty());
    return out.front();
  };
  const Sent b_ack = take(b);
  const Sent c_ack = take(cc);
  auto own = f.I(a).roles_.view_->Own(f.partition);
  REQUIRE(own != nullptr);
  std::string forged = f.WithPlace(b_ack, {a, own->since});
  f.c.queue().push_back(Sent{b, a, forged});
  REQUIRE(f.c.DeliverOne(To(a)));
  f.c.Advance(1000);
  CHECK_FALSE(got.has_value());
  SECTION("then the third place") {
    f.c.queue().push_back(c_ack);
    REQUIRE(f.c.DeliverOne(To(a)));
    f.c.Advance(1000);
    REQUIRE(got.has_value());
    CHECK(got->ok());
  }
  SECTION("nothing else: the write times out") {
    for (int i = 0; i < 30 && !got.has_value(); ++i) f.c.Advance(100'000);
    REQUIRE(got.has_value());
    CHECK(absl::IsDeadlineExceeded(got->status()));
  }
}

}  // namespace
}  // namespace bigset::testing

namespace bigset::testing {
namespace {

TEST_CASE(
    "place taken attack: defect: a place handed on twice during a write (its "
    "giver not in the list) counted as a second place",
    "[regression]") {
  // The client's list {A, B, C} is from before the moves. While the write
  // waits, A (which applied x) hands its place to M (not in the list), and
  // M hands it on to C, which had left the place the list has it in. The
  // client's view then hears all of it (gossip), and C acknowledges naming
  // the place it took: M's. Following took_from (C -> M -> A, M departed)
  // A and C are one place (DESIGN, "Quorums count places"): W = 2 must
  // wait for B.
  Fx f(5, 3);
  f.StartHeld();
  const NodeId a = f.pl[0], cc = f.pl[2], m = f.Outsider();
  const Sent c_ack = f.ApplyOn(cc);
  const MembershipState& view = *f.I(f.client).roles_.view_;
  REQUIRE(view.states_.count(a) == 1);
  REQUIRE(view.states_.count(cc) == 1);
  REQUIRE(view.states_.count(m) == 1);
  const uint64_t a_since = f.Since(a);
  NodeServing sa = view.states_.at(a), sm = view.states_.at(m),
              sc = view.states_.at(cc);
  const uint64_t m_since = sm.version + 5;
  const uint64_t c_since = sc.version + 7;
  auto drop_p = [&](NodeServing& s) {
    std::erase_if(s.entries, [&](const ServeEntry& e) {
      return e.partition == f.partition;
    });
  };
  drop_p(sa);
  sa.version += 10;
  drop_p(sm);
  sm.entries.push_back(ServeEntry{.partition = f.partition,
                                  .since = m_since,
                                  .took_from = a,
                                  .took_since = a_since,
                                  .handing_to = cc,
                                  .departed = true});
  sm.version += 10;
  drop_p(sc);
  sc.entries.push_back(ServeEntry{.partition = f.partition,
                                  .since = c_since,
                                  .took_from = m,
                                  .took_since = m_since});
  sc.version = c_since + 1;
  for (NodeServing* s : {&sa, &sm, &sc}) {
    std::sort(s->entries.begin(), s->entries.end(),
              [](const ServeEntry& x, const ServeEntry& y) {
                return std::pair(x.partition, x.since) <
                       std::pair(y.partition, y.since);
              });
  }
  // Gossip stays queued: node 4 itself would answer the states that name
  // it with its own, at once.
  f.c.QueueMembership(true);
  f.c.queue().push_back(
      Sent{m, f.client,
           EncodeMessage(0, 0,
                         msg::Membership{.epoch = f.c.ring().epoch(),
                                         .versions = {},
                                         .states = {sa, sm, sc}})});
  REQUIRE(f.c.DeliverOne(And(From(m), To(f.client))));
  // The view heard it: C took M's place, M took A's and departed.
  REQUIRE(view.EntryOf(cc, f.partition).has_value());
  REQUIRE(view.EntryOf(cc, f.partition)->took_from == m);
  INFO("client's list of the partition now:" << [&] {
    std::string s;
    for (NodeId n : f.c.node(f.client).ServingList(f.partition)) {
      s += " " + std::to_string(n);
    }
    return s;
  }());
  const std::vector<NodeId> givers = view.PlaceGivers(f.partition, m, m_since);
  CAPTURE(givers, a_since, m_since);
  REQUIRE_FALSE(f.result.has_value());
  f.Inject(cc, f.WithPlace(c_ack, {m, m_since}));
  INFO("list " << a << " " << f.pl[1] << " " << cc << ", M " << m << "; "
               << (f.result.has_value() ? f.result->status().ToString()
                                        : std::string("no answer")));
  CHECK_FALSE(f.result.has_value());
}

}  // namespace
}  // namespace bigset::testing
