// The message wire format: round trips of every type, truncations, trailing
// bytes, bit flips and garbage.

#include "net/message.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "bigset/net/transport.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

// ---- Messages.

Message RandomMessage(Rng& rng) {
  Message m;
  m.header.type = static_cast<MessageType>(Uniform(rng, 1, kMaxMessageType));
  m.header.request_id = rng();
  m.header.partition = static_cast<uint32_t>(rng());
  auto dots = [&]() {
    std::vector<Dot> d;
    for (int i = 0, n = Uniform(rng, 0, 3); i < n; ++i) {
      d.push_back(Dot{rng(), Uniform(rng, 1, ~0ull)});
    }
    return d;
  };
  auto elements = [&]() {
    std::vector<ElementDots> es;
    for (int i = 0, n = Uniform(rng, 0, 4); i < n; ++i) {
      es.push_back({AdversarialBytes(rng, 6), dots()});
    }
    return es;
  };
  // Node states: entries ascending by (partition, since), one live entry
  // per partition.
  auto states = [&]() {
    std::vector<NodeServing> out;
    for (int i = 0, n = Uniform(rng, 0, 3); i < n; ++i) {
      NodeServing st;
      st.node = static_cast<NodeId>(rng());
      st.version = rng();
      uint32_t p = 0;
      for (int k = 0, m = Uniform(rng, 0, 5); k < m; ++k) {
        p += static_cast<uint32_t>(Uniform(rng, 1, 3));
        ServeEntry e;
        e.partition = p;
        e.since = Uniform(rng, 1, 1000);
        e.took_from = static_cast<NodeId>(Uniform(rng, 0, 9));
        e.took_since = rng();
        e.handing_to = static_cast<NodeId>(Uniform(rng, 0, 9));
        e.departed = Uniform(rng, 0, 1);
        st.entries.push_back(e);
        if (e.departed && Uniform(rng, 0, 1)) {
          // The same partition served again, in a later episode.
          e.since += 1 + Uniform(rng, 0, 10);
          e.departed = false;
          st.entries.push_back(e);
        }
      }
      out.push_back(std::move(st));
    }
    return out;
  };
  Clock c;
  for (int i = 0; i < 4; ++i)
    c.AddDot(Dot{Uniform(rng, 1, 3), Uniform(rng, 1, 40)});
  absl::Status err = absl::UnavailableError(AdversarialBytes(rng, 5));
  auto delta = [&]() {
    Delta d;
    d.set = AdversarialBytes(rng, 4);
    d.ops.push_back(DeltaOp{AdversarialBytes(rng, 4), dots(), Dot{7, 9}});
    return d;
  };
  auto summaries = [&](bool clocks) {
    std::vector<SetSummary> out;
    for (int i = 0, n = Uniform(rng, 0, 3); i < n; ++i) {
      SetSummary s;
      s.set = AdversarialBytes(rng, 6);
      s.digest = rng();
      s.keys_digest = rng();
      s.tombstone_empty = Uniform(rng, 0, 1);
      if (clocks) s.clock = c;
      out.push_back(std::move(s));
    }
    return out;
  };
  switch (m.type()) {
    case MessageType::kUpdate: {
      auto& b = m.body.emplace<msg::Update>();
      b.set = AdversarialBytes(rng, 6);
      for (int i = 0, n = Uniform(rng, 0, 3); i < n; ++i) {
        UpdateOp op = Uniform(rng, 0, 1)
                          ? UpdateOp::Add(AdversarialBytes(rng, 5), dots())
                          : UpdateOp::Remove(AdversarialBytes(rng, 5), dots());
        op.context_from_replica = Uniform(rng, 0, 1);
        b.ops.push_back(op);
      }
      break;
    }
    case MessageType::kClear:
      m.body = msg::Clear{.set = AdversarialBytes(rng, 6), .clock = c};
      break;
    case MessageType::kUpdateReply: {
      auto& b = m.body.emplace<msg::UpdateReply>();
      if (Uniform(rng, 0, 1)) {
        b.status = err;
      } else {
        b.delta = delta();
      }
      break;
    }
    case MessageType::kReplicate:
      m.body = msg::Replicate{delta()};
      break;
    case MessageType::kReplicateGivenUp:
      m.body = msg::ReplicateGivenUp{delta()};
      break;
    case MessageType::kReplicateAckWithDelta:
      m.body = msg::ReplicateAckWithDelta{delta()};
      break;
    case MessageType::kRepair:
      m.body = msg::Repair{delta()};
      break;
    case MessageType::kHandoffDelta:
      m.body = msg::HandoffDelta{delta()};
      break;
    case MessageType::kReplicateAck: {
      auto& b = m.body.emplace<msg::ReplicateAck>();
      if (Uniform(rng, 0, 1)) b.status = err;
      b.applied_by = static_cast<NodeId>(rng());
      if (Uniform(rng, 0, 1)) {
        b.taken = msg::PlaceTaken{.from = static_cast<NodeId>(rng() | 1),
                                  .since = rng()};
      }
      break;
    }
    case MessageType::kHandoffDeltaAck: {
      auto& b = m.body.emplace<msg::HandoffDeltaAck>();
      if (Uniform(rng, 0, 1)) b.status = err;
      b.applied_by = static_cast<NodeId>(rng());
      if (Uniform(rng, 0, 1)) {
        b.taken = msg::PlaceTaken{.from = static_cast<NodeId>(rng() | 1),
                                  .since = rng()};
      }
      break;
    }
    case MessageType::kTransferChunk: {
      auto& b = m.body.emplace<msg::TransferChunk>();
      b.epoch = rng();
      b.index = rng();
      b.seq = rng();
      b.end = Uniform(rng, 0, 1);
      b.last = !b.end && Uniform(rng, 0, 1);
      if (!b.end) {
        b.set = AdversarialBytes(rng, 6);
        b.elements = elements();
      }
      if (b.last) b.set_clock = c;
      break;
    }
    case MessageType::kTransferAck: {
      auto& b = m.body.emplace<msg::TransferAck>();
      if (Uniform(rng, 0, 1)) b.status = err;
      b.index = rng();
      b.seq = rng();
      b.incarnation = rng();
      break;
    }
    case MessageType::kHandoffDone:
      m.body = msg::HandoffDone{.epoch = rng(),
                                .from_node = static_cast<NodeId>(rng()),
                                .to_node = static_cast<NodeId>(rng()),
                                .episode = rng(),
                                .supplement = Uniform(rng, 0, 1) == 1};
      break;
    case MessageType::kHandoffDoneAck: {
      auto& b = m.body.emplace<msg::HandoffDoneAck>();
      if (Uniform(rng, 0, 1)) b.status = err;
      b.epoch = rng();
      b.from_node = static_cast<NodeId>(rng());
      b.to_node = static_cast<NodeId>(rng());
      b.states = states();
      break;
    }
    case MessageType::kMembership: {
      auto& b = m.body.emplace<msg::Membership>();
      b.epoch = rng();
      for (int i = 0, n = Uniform(rng, 0, 4); i < n; ++i) {
        b.versions.emplace_back(static_cast<NodeId>(rng()), rng());
      }
      b.states = states();
      break;
    }
    case MessageType::kRingEpoch:
      m.body = msg::RingEpoch{rng()};
      break;
    case MessageType::kCount:
      m.body = msg::Count{AdversarialBytes(rng, 6)};
      break;
    case MessageType::kCountReply: {
      auto& b = m.body.emplace<msg::CountReply>();
      if (Uniform(rng, 0, 1)) {
        b.status = err;
      } else {
        b.found = Uniform(rng, 0, 1);
        b.count = rng() >> Uniform(rng, 0, 63);
        b.set_digest = rng();
        b.tombstone_digest = rng();
      }
      break;
    }
    case MessageType::kRead: {
      auto& b = m.body.emplace<msg::Read>();
      b.set = AdversarialBytes(rng, 6);
      if (Uniform(rng, 0, 1)) b.bounds.start = AdversarialBytes(rng, 4);
      if (Uniform(rng, 0, 1)) b.bounds.end = AdversarialBytes(rng, 4);
      b.bounds.start_inclusive = Uniform(rng, 0, 1);
      b.bounds.end_inclusive = Uniform(rng, 0, 1);
      b.batch_size = static_cast<uint32_t>(Uniform(rng, 1, 5000));
      break;
    }
    case MessageType::kReadClock: {
      auto& b = m.body.emplace<msg::ReadClock>();
      if (Uniform(rng, 0, 1)) {
        b.status = err;
      } else {
        b.clock = c;
      }
      break;
    }
    case MessageType::kReadChunk: {
      auto& b = m.body.emplace<msg::ReadChunk>();
      b.seq = rng();
      b.last = Uniform(rng, 0, 1);
      b.elements = elements();
      break;
    }
    case MessageType::kChunkAck:
      m.body = msg::ChunkAck{rng()};
      break;
    case MessageType::kStopFold:
      m.body = msg::StopFold{};
      break;
    case MessageType::kKeepFold:
      m.body = msg::KeepFold{};
      break;
    case MessageType::kQuery: {
      auto& b = m.body.emplace<msg::Query>();
      b.set = AdversarialBytes(rng, 6);
      for (int i = 0, n = Uniform(rng, 0, 4); i < n; ++i) {
        b.elements.push_back(AdversarialBytes(rng, 5));
      }
      break;
    }
    case MessageType::kQueryReply: {
      auto& b = m.body.emplace<msg::QueryReply>();
      if (Uniform(rng, 0, 1)) {
        b.status = err;
      } else {
        b.clock = c;
        b.elements = elements();
      }
      break;
    }
    case MessageType::kAeDigest:
      m.body = msg::AeDigest{.digest = rng(), .bucket_count = rng()};
      break;
    case MessageType::kAeDigestReply: {
      auto& b = m.body.emplace<msg::AeDigestReply>();
      if (Uniform(rng, 0, 1)) b.status = err;
      b.digests_equal = Uniform(rng, 0, 1);
      for (int i = 0, n = Uniform(rng, 0, 5); i < n; ++i) {
        b.bucket_digests.push_back(rng());
      }
      break;
    }
    case MessageType::kAeSets: {
      auto& b = m.body.emplace<msg::AeSets>();
      for (int i = 0, n = Uniform(rng, 0, 5); i < n; ++i) {
        b.bucket_ids.push_back(Uniform(rng, 0, ~0ull));
      }
      b.summaries = summaries(/*clocks=*/false);
      break;
    }
    case MessageType::kAeSetsReply: {
      auto& b = m.body.emplace<msg::AeSetsReply>();
      if (Uniform(rng, 0, 1)) b.status = err;
      b.summaries = summaries(/*clocks=*/true);
      break;
    }
    case MessageType::kAePull:
      m.body = msg::AePull{.set = AdversarialBytes(rng, 6), .dots = c};
      break;
    case MessageType::kAePush: {
      auto& b = m.body.emplace<msg::AePush>();
      b.set = AdversarialBytes(rng, 6);
      b.seq = rng();
      b.last = Uniform(rng, 0, 1);
      if (b.last) b.dots = c;
      b.elements = elements();
      break;
    }
    case MessageType::kAePushAck: {
      auto& b = m.body.emplace<msg::AePushAck>();
      if (Uniform(rng, 0, 1)) b.status = err;
      b.seq = rng();
      break;
    }
  }
  REQUIRE(m.body.index() + 1 == static_cast<size_t>(m.type()));
  return m;
}

// Every field of a decoded message against the one encoded (each body
// struct compares field by field).
void CheckSame(const Message& back, const Message& m) {
  CAPTURE(MessageTypeName(m.type()));
  CHECK(back.type() == m.type());
  CHECK(back.header.request_id == m.header.request_id);
  CHECK(back.header.partition == m.header.partition);
  CHECK(back.body == m.body);
}

TEST_CASE("message: round trip, truncation and garbage") {
  for (uint64_t seed : Seeds(10)) {
    CAPTURE(seed);
    Rng rng(seed);
    for (int i = 0; i < 500; ++i) {
      Message m = RandomMessage(rng);
      std::string enc = EncodeMessage(m);
      auto back = DecodeMessage(enc);
      REQUIRE(back.ok());
      CheckSame(*back, m);
      for (size_t len = 0; len < enc.size(); ++len) {
        REQUIRE_FALSE(DecodeMessage(enc.substr(0, len)).ok());
      }
      REQUIRE_FALSE(DecodeMessage(enc + "z").ok());
      std::string flipped = enc;
      flipped[Uniform(rng, 0, flipped.size() - 1)] ^=
          static_cast<char>(1 << Uniform(rng, 0, 7));
      (void)DecodeMessage(flipped);  // An error or a message; no crash.
    }
    for (int i = 0; i < 3000; ++i) {
      std::string junk = AdversarialBytes(rng, 48);
      if (!junk.empty() && Uniform(rng, 0, 1)) {
        junk[0] = static_cast<char>(kMessageFormatVersion);
      }
      if (junk.size() > 1 && Uniform(rng, 0, 1)) {
        junk[1] = static_cast<char>(Uniform(rng, 1, kMaxMessageType));
      }
      (void)DecodeMessage(junk);
    }
  }
}

TEST_CASE("message: the hot paths write and read their structs' bytes") {
  // Chunks, deltas and their acknowledgements skip the structs on the way
  // out and in; the bytes must be the structs' all the same.
  for (uint64_t seed : Seeds(10)) {
    CAPTURE(seed);
    Rng rng(seed);
    for (int i = 0; i < 2000; ++i) {
      const Message m = RandomMessage(rng);
      CAPTURE(MessageTypeName(m.type()));
      const std::string want = EncodeMessage(m);
      std::string got = "prefix";  // Appends: what is there stays.
      MessageHeader header;
      std::string_view body;
      if (const auto* chunk = m.As<msg::ReadChunk>()) {
        EncodeReadChunk(m.header, chunk->seq, chunk->last, chunk->elements,
                        &got);
        REQUIRE(ParseHeader(want, &header, &body).ok());
        uint64_t seq = 0;
        bool last = false;
        std::string_view encoded;
        REQUIRE(ParseReadChunkBody(body, &seq, &last, &encoded).ok());
        std::vector<ElementDots> elements(3);  // Storage to reuse.
        REQUIRE(DecodeChunkElements(encoded, &elements).ok());
        CHECK(seq == chunk->seq);
        CHECK(last == chunk->last);
        CHECK(elements == chunk->elements);
        CHECK_FALSE(DecodeChunkElements(encoded.substr(0, encoded.size() - 1),
                                        &elements)
                        .ok());
      } else if (m.type() == MessageType::kReplicate ||
                 m.type() == MessageType::kReplicateGivenUp ||
                 m.type() == MessageType::kRepair ||
                 m.type() == MessageType::kHandoffDelta) {
        const Delta& delta = std::visit(
            [](const auto& b) -> const Delta& {
              if constexpr (requires { b.delta; }) {
                return b.delta;
              } else {
                static const Delta kNone;
                return kNone;
              }
            },
            m.body);
        EncodeDeltaMessage(m.header, delta, &got);
        REQUIRE(ParseHeader(want, &header, &body).ok());
        std::string_view encoded;
        REQUIRE(ParseDeltaBody(body, &encoded).ok());
        Delta back;
        REQUIRE(Delta::DecodeInto(encoded, &back).ok());
        CHECK(back == delta);
        CHECK_FALSE(ParseDeltaBody(std::string(body) + "z", &encoded).ok());
      } else if (m.type() == MessageType::kReplicateAck ||
                 m.type() == MessageType::kHandoffDeltaAck) {
        const auto* ack = m.As<msg::ReplicateAck>();
        const auto* handoff_ack = m.As<msg::HandoffDeltaAck>();
        const absl::Status& status =
            ack != nullptr ? ack->status : handoff_ack->status;
        const NodeId by =
            ack != nullptr ? ack->applied_by : handoff_ack->applied_by;
        const msg::PlaceTaken& taken =
            ack != nullptr ? ack->taken : handoff_ack->taken;
        EncodeStatusReply(m.header, status, by, taken, &got);
        REQUIRE(ParseHeader(want, &header, &body).ok());
        absl::Status back_status;
        NodeId back_by = 0;
        msg::PlaceTaken back_taken{.from = 5, .since = 5};
        REQUIRE(
            ParseStatusBody(body, &back_status, &back_by, &back_taken).ok());
        CHECK(back_status == status);
        CHECK(back_by == by);
        CHECK(back_taken == taken);
        CHECK_FALSE(ParseStatusBody(body.substr(0, body.size() - 1),
                                    &back_status, &back_by, &back_taken)
                        .ok());
      } else {
        continue;
      }
      CHECK(got == "prefix" + want);
    }
  }
}

TEST_CASE(
    "message: an acknowledgement names the place its node took only when "
    "there is one, and keeps its old bytes otherwise") {
  const MessageHeader header{MessageType::kReplicateAck, 9, 3};
  std::string plain, placed;
  EncodeStatusReply(header, absl::OkStatus(), 4, msg::PlaceTaken(), &plain);
  EncodeStatusReply(header, absl::OkStatus(), 4,
                    msg::PlaceTaken{.from = 3, .since = 300}, &placed);
  MessageHeader h;
  std::string_view plain_body, body;
  REQUIRE(ParseHeader(plain, &h, &plain_body).ok());
  REQUIRE(ParseHeader(placed, &h, &body).ok());
  // The place follows the fields every acknowledgement had: node 3 and
  // episode 300 as varints (the trailing checksum aside).
  REQUIRE(body.size() == plain_body.size() + 3);
  CHECK(body.substr(0, plain_body.size()) == plain_body);
  absl::Status status;
  NodeId by = 0;
  msg::PlaceTaken taken;
  REQUIRE(ParseStatusBody(body, &status, &by, &taken).ok());
  CHECK(by == 4);
  CHECK(taken == msg::PlaceTaken{.from = 3, .since = 300});
  // A place cut short is malformed, and so is one that names node 0 (it
  // is sent only when there is one) or has bytes after it.
  for (size_t n = plain_body.size() + 1; n < body.size(); ++n) {
    CAPTURE(n);
    CHECK_FALSE(ParseStatusBody(body.substr(0, n), &status, &by, &taken).ok());
  }
  CHECK_FALSE(ParseStatusBody(std::string(plain_body) + std::string("\0\1", 2),
                              &status, &by, &taken)
                  .ok());
  CHECK_FALSE(
      ParseStatusBody(std::string(body) + "x", &status, &by, &taken).ok());
  // An acknowledgement without a place, as every earlier node sends it.
  taken = msg::PlaceTaken{.from = 8, .since = 8};
  REQUIRE(ParseStatusBody(plain_body, &status, &by, &taken).ok());
  CHECK(taken == msg::PlaceTaken());
}

TEST_CASE("message: DescribeMessage names what membership messages move") {
  const std::string proposal =
      EncodeMessage(42, 3,
                    msg::HandoffDone{.epoch = 0,
                                     .from_node = 5,
                                     .to_node = 6,
                                     .episode = 12,
                                     .supplement = true});
  const std::string done = DescribeMessage(proposal);
  CHECK(done.find("HandoffDone #42 p3") == 0);
  CHECK(done.find("5->6 episode 12 supplement") != std::string::npos);
  const std::string gossip = DescribeMessage(
      EncodeMessage(0, 0,
                    msg::Membership{.epoch = 7,
                                    .versions = {{1, 3}, {2, 9}},
                                    .states = {NodeServing{2, 9, {}}}}));
  CHECK(gossip.find("epoch 7 versions 2, states 2@9") != std::string::npos);
  msg::HandoffDoneAck a;
  a.status = absl::AlreadyExistsError("x");
  a.from_node = 5;
  a.to_node = 6;
  CHECK(DescribeMessage(EncodeMessage(42, 3, a)).find("5->6 ALREADY_EXISTS") !=
        std::string::npos);
  std::string bytes = proposal;
  bytes[bytes.size() / 2] ^= 1;
  CHECK(DescribeMessage(bytes).find("undecodable") == 0);
}

TEST_CASE("message: DecodeMessageInto a reused message equals a fresh decode") {
  for (uint64_t seed : Seeds(10)) {
    CAPTURE(seed);
    Rng rng(seed);
    Message reused;
    for (int i = 0; i < 500; ++i) {
      CAPTURE(i);
      const Message m = RandomMessage(rng);
      const std::string enc = EncodeMessage(m);
      if (Uniform(rng, 0, 4) == 0) {
        // A failed decode in between leaves it usable.
        std::string broken = enc.substr(0, Uniform(rng, 0, enc.size() - 1));
        REQUIRE_FALSE(DecodeMessageInto(broken, &reused).ok());
        CHECK(reused.body.index() + 1 == static_cast<size_t>(reused.type()));
      }
      if (Uniform(rng, 0, 4) == 0) {
        // A header that fails after its checksum passed (a request id cut
        // short) leaves a header that names the body's type.
        std::string bad;
        bad.push_back(static_cast<char>(kMessageFormatVersion));
        bad.push_back(static_cast<char>(Uniform(rng, 1, kMaxMessageType)));
        bad.push_back(static_cast<char>(0x80));
        FinishMessage(0, &bad);
        REQUIRE_FALSE(DecodeMessageInto(bad, &reused).ok());
        CHECK(reused.body.index() + 1 == static_cast<size_t>(reused.type()));
      }
      REQUIRE(DecodeMessageInto(enc, &reused).ok());
      CheckSame(reused, m);
    }
  }
}

TEST_CASE("message: a reused message keeps its element storage across types",
          "[regression]") {
  // Hand-off chunks and pushes reach a node interleaved: each decodes into
  // the storage the other left.
  msg::AePush push;
  push.set = "s";
  for (int i = 0; i < 8; ++i) {
    push.elements.push_back(ElementDots{"e" + std::to_string(i), {Dot{1, 1}}});
  }
  msg::TransferChunk chunk;
  chunk.set = "t";
  chunk.elements.assign(push.elements.begin(), push.elements.begin() + 5);
  Message reused;
  REQUIRE(DecodeMessageInto(EncodeMessage(1, 2, push), &reused).ok());
  const ElementDots* storage = reused.As<msg::AePush>()->elements.data();
  REQUIRE(DecodeMessageInto(EncodeMessage(1, 2, chunk), &reused).ok());
  CHECK(reused.As<msg::TransferChunk>()->elements == chunk.elements);
  CHECK(reused.As<msg::TransferChunk>()->elements.data() == storage);
  REQUIRE(DecodeMessageInto(EncodeMessage(1, 2, push), &reused).ok());
  CHECK(reused.As<msg::AePush>()->elements == push.elements);
  CHECK(reused.As<msg::AePush>()->elements.data() == storage);
}

TEST_CASE("message: node states out of order or with two live entries") {
  auto encode = [](std::vector<ServeEntry> entries) {
    msg::Membership m;
    m.states.push_back(NodeServing{3, 7, std::move(entries)});
    return EncodeMessage(0, 0, m);
  };
  ServeEntry a{4, 10, 0, 0, 0, false};
  ServeEntry b{4, 12, 1, 3, 0, false};
  ServeEntry gone = a;
  gone.departed = true;
  ServeEntry later{2, 1, 0, 0, 0, false};
  CHECK(DecodeMessage(encode({gone, b})).ok());
  // Two live entries of one partition, adjacent or not.
  CHECK_FALSE(DecodeMessage(encode({a, b})).ok());
  ServeEntry mid = a;
  mid.since = 11;
  mid.departed = true;
  CHECK_FALSE(DecodeMessage(encode({a, mid, b})).ok());
  // Not ascending: by partition, or by episode within one.
  CHECK_FALSE(DecodeMessage(encode({a, later})).ok());
  CHECK_FALSE(DecodeMessage(encode({b, gone})).ok());
  // The node states' own encoding (node metadata) refuses the same.
  std::string bytes;
  EncodeNodeStates(std::vector<NodeServing>{NodeServing{3, 7, {a, b}}}, &bytes);
  std::vector<NodeServing> out;
  CHECK(absl::IsDataLoss(DecodeNodeStates(bytes, &out)));
}

// ---- The bytes of every type, pinned (docs/FORMATS.md, "Messages"): both
// sides of every other test share the codec, so only this one sees a change
// of the wire format. A deliberate change bumps kMessageFormatVersion and
// these bytes together.

std::vector<Message> PinnedMessages() {
  Clock clock;
  clock.AddDot(Dot{1, 1});
  clock.AddDot(Dot{1, 2});
  clock.AddDot(Dot{2, 5});
  Delta delta;
  delta.set = "s";
  delta.ops.push_back(DeltaOp{"e", {Dot{1, 2}}, Dot{2, 5}});
  const std::vector<ElementDots> elements = {{"a", {Dot{1, 1}}},
                                             {"b", {Dot{2, 5}, Dot{1, 2}}}};
  const absl::Status refused = absl::AbortedError("no");
  const std::vector<NodeServing> states = {NodeServing{
      4,
      9,
      {ServeEntry{3, 2, 1, 1, 0, true}, ServeEntry{3, 8, 0, 0, 5, false}}}};
  SetSummary summary;
  summary.set = "s";
  summary.digest = 0x0102030405060708;
  summary.keys_digest = 9;
  summary.tombstone_empty = false;
  SetSummary with_clock = summary;
  with_clock.clock = clock;
  ElementBounds bounds;
  bounds.start = "a";
  bounds.start_inclusive = true;
  msg::Update update;
  update.set = "s";
  update.ops.push_back(UpdateOp::Add("e", {Dot{1, 1}}));
  UpdateOp remove = UpdateOp::Remove("f", {});
  remove.context_from_replica = true;
  update.ops.push_back(remove);
  std::vector<MessageBody> bodies = {
      update,
      msg::UpdateReply{absl::OkStatus(), delta},
      msg::Replicate{delta},
      msg::ReplicateAck{refused, 7, {}},
      msg::Read{.set = "s", .bounds = bounds, .batch_size = 300},
      msg::ReadClock{absl::OkStatus(), clock},
      msg::ReadChunk{.seq = 3, .last = true, .elements = elements},
      msg::ChunkAck{4},
      msg::StopFold{},
      msg::Query{.set = "s", .elements = {"a", "z"}},
      msg::QueryReply{absl::OkStatus(), clock, elements},
      msg::Repair{delta},
      msg::KeepFold{},
      msg::Clear{.set = "s", .clock = clock},
      msg::ReplicateGivenUp{delta},
      msg::ReplicateAckWithDelta{delta},
      msg::TransferChunk{.epoch = 6,
                         .set = "s",
                         .index = 2,
                         .seq = 1,
                         .last = true,
                         .set_clock = clock,
                         .end = false,
                         .elements = elements},
      msg::TransferAck{refused, 2, 1, 0xabcdef},
      msg::HandoffDelta{delta},
      msg::HandoffDeltaAck{absl::OkStatus(), 3, {}},
      msg::HandoffDone{.epoch = 6,
                       .from_node = 1,
                       .to_node = 2,
                       .episode = 8,
                       .supplement = true},
      msg::HandoffDoneAck{refused, 6, 1, 2, states},
      msg::RingEpoch{6},
      msg::AeDigest{.digest = 0x1122334455667788, .bucket_count = 64},
      msg::AeDigestReply{absl::OkStatus(), false, {1, 2}},
      msg::AeSets{.bucket_ids = {5, 300}, .summaries = {summary}},
      msg::AeSetsReply{absl::OkStatus(), {with_clock}},
      msg::AePull{.set = "s", .dots = clock},
      msg::AePush{.set = "s",
                  .seq = 2,
                  .last = true,
                  .dots = clock,
                  .elements = elements},
      msg::AePushAck{refused, 2},
      msg::Membership{.epoch = 6, .versions = {{4, 9}}, .states = states},
      msg::Count{"s"},
      msg::CountReply{absl::OkStatus(), true, 2, 0x0a0b, 0x0c0d},
  };
  std::vector<Message> out;
  for (size_t i = 0; i < bodies.size(); ++i) {
    Message m;
    m.header = MessageHeader{static_cast<MessageType>(i + 1), 100 + i, 3};
    m.body = std::move(bodies[i]);
    out.push_back(std::move(m));
  }
  return out;
}

TEST_CASE("message: the bytes of every type are pinned") {
  static const char* const kPinned[] = {
      "0401640301730201016501000000000000000101020166001a0eb65f",
      "0402650300001b010173000101650100000000000000020501000000000000000102037b"
      "536a",
      "040366031b0101730001016501000000000000000205010000000000000001027511116"
      "0",
      "040467030a026e6f075c4ed82e",
      "040568030173050161ac026bc822c4",
      "040669030000190102000000000000000102000000000000000002000102030084f841c"
      "6",
      "04076a030301020161010000000000000001010162020000000000000002050000000000"
      "00000102c53780bf",
      "04086b03045450119e",
      "04096c03ee07a219",
      "040a6d030173020161017a6bdb7346",
      "040b6e030000190102000000000000000102000000000000000002000102030002016101"
      "0000000000000001010162020000000000000002050000000000000001021ca0fd52",
      "040c6f031b01017300010165010000000000000002050100000000000000010268e7920"
      "8",
      "040d70039c8255e6",
      "040e71030173190102000000000000000102000000000000000002000102030023f4f42"
      "9",
      "040f72031b01017300010165010000000000000002050100000000000000010251da189"
      "b",
      "041073031b0101730001016501000000000000000205010000000000000001027205dbb"
      "c",
      "041174030601730201011901020000000000000001020000000000000000020001020300"
      "0201610100000000000000010101620200000000000000020500000000000000010269b4"
      "823c",
      "041275030a026e6f0201ef9baf05d18d5544",
      "041376031b010173000101650100000000000000020501000000000000000102b8ba3f0"
      "6",
      "0414770300000316f86256",
      "0415780306010208014569cd60",
      "041679030a026e6f06010201040902030201010001030800000500852f2b54",
      "04177a030666a8e48c",
      "04187b03112233445566778840539681af",
      "04197c030000000200000000000000010000000000000002e6105074",
      "041a7d030205ac0201017301020304050607080000000000000009006b50ec0c",
      "041b7e030000010173010203040506070800000000000000090019010200000000000000"
      "0102000000000000000002000102030056557660",
      "041c7f03017319010200000000000000010200000000000000000200010203009108f34"
      "a",
      "041d80010301730201190102000000000000000102000000000000000002000102030002"
      "016101000000000000000101016202000000000000000205000000000000000102d01f51"
      "06",
      "041e8101030a026e6f025c29ebfc",
      "041f8201030601040901040902030201010001030800000500af0593e9",
      "04208301030173fbba89dc",
      "0421840103000001020000000000000a0b0000000000000c0d0e65c49c",
  };
  const std::vector<Message> messages = PinnedMessages();
  REQUIRE(messages.size() == kMaxMessageType);
  REQUIRE(std::size(kPinned) == messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const Message& m = messages[i];
    CAPTURE(MessageTypeName(m.type()));
    REQUIRE(m.body.index() == i);
    const std::string bytes = EncodeMessage(m);
    CHECK(absl::BytesToHexString(bytes) == kPinned[i]);
    absl::StatusOr<Message> back = DecodeMessage(bytes);
    REQUIRE(back.ok());
    CheckSame(*back, m);
  }
}

}  // namespace
}  // namespace bigset::testing
