// The message wire format: round trips of every type, truncations, trailing
// bytes, bit flips and garbage.

#include "net/message.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "bigset/net/transport.h"
#include "test_util.h"

namespace bigset {
namespace {

using testing::AdversarialBytes;
using testing::Rng;
using testing::Seeds;
using testing::Uniform;

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
  switch (m.type()) {
    case MessageType::kUpdate:
      m.set = AdversarialBytes(rng, 6);
      for (int i = 0, n = Uniform(rng, 0, 3); i < n; ++i) {
        UpdateOp op = Uniform(rng, 0, 1)
                          ? UpdateOp::Add(AdversarialBytes(rng, 5), dots())
                          : UpdateOp::Remove(AdversarialBytes(rng, 5), dots());
        op.context_from_replica = Uniform(rng, 0, 1);
        m.ops.push_back(op);
      }
      break;
    case MessageType::kClear:
      m.set = AdversarialBytes(rng, 6);
      m.clock = c;
      break;
    case MessageType::kUpdateReply:
    case MessageType::kReplicate:
    case MessageType::kReplicateGivenUp:
    case MessageType::kReplicateAckWithDelta:
    case MessageType::kRepair:
    case MessageType::kHandoffDelta:
      if (m.type() == MessageType::kUpdateReply && Uniform(rng, 0, 1)) {
        m.status = err;
        break;
      }
      m.delta.set = AdversarialBytes(rng, 4);
      m.delta.ops.push_back(
          DeltaOp{AdversarialBytes(rng, 4), dots(), Dot{7, 9}});
      break;
    case MessageType::kReplicateAck:
    case MessageType::kHandoffDeltaAck:
      if (Uniform(rng, 0, 1)) m.status = err;
      m.applied_by = static_cast<NodeId>(rng());
      break;
    case MessageType::kTransferChunk:
      m.epoch = rng();
      m.index = rng();
      m.seq = rng();
      m.end = Uniform(rng, 0, 1);
      m.done = !m.end && Uniform(rng, 0, 1);
      if (!m.end) {
        m.set = AdversarialBytes(rng, 6);
        m.elements = elements();
      }
      if (m.done) m.clock = c;
      break;
    case MessageType::kTransferAck:
      if (Uniform(rng, 0, 1)) m.status = err;
      m.index = rng();
      m.seq = rng();
      m.incarnation = rng();
      break;
    case MessageType::kHandoffDone:
      m.epoch = rng();
      m.from_node = static_cast<NodeId>(rng());
      m.to_node = static_cast<NodeId>(rng());
      m.episode = rng();
      m.supplement = Uniform(rng, 0, 1);
      break;
    case MessageType::kHandoffDoneAck:
      if (Uniform(rng, 0, 1)) m.status = err;
      m.epoch = rng();
      m.from_node = static_cast<NodeId>(rng());
      m.to_node = static_cast<NodeId>(rng());
      m.states = states();
      break;
    case MessageType::kMembership:
      m.epoch = rng();
      for (int i = 0, n = Uniform(rng, 0, 4); i < n; ++i) {
        m.versions.emplace_back(static_cast<NodeId>(rng()), rng());
      }
      m.states = states();
      break;
    case MessageType::kRingEpoch:
      m.epoch = rng();
      break;
    case MessageType::kCount:
      m.set = AdversarialBytes(rng, 6);
      break;
    case MessageType::kCountReply:
      if (Uniform(rng, 0, 1)) {
        m.status = err;
      } else {
        m.found = Uniform(rng, 0, 1);
        m.count = rng() >> Uniform(rng, 0, 63);
        m.digest = rng();
        m.tombstone_digest = rng();
      }
      break;
    case MessageType::kRead:
      m.set = AdversarialBytes(rng, 6);
      if (Uniform(rng, 0, 1)) m.bounds.start = AdversarialBytes(rng, 4);
      if (Uniform(rng, 0, 1)) m.bounds.end = AdversarialBytes(rng, 4);
      m.bounds.start_inclusive = Uniform(rng, 0, 1);
      m.bounds.end_inclusive = Uniform(rng, 0, 1);
      m.batch_size = static_cast<uint32_t>(Uniform(rng, 1, 5000));
      break;
    case MessageType::kReadClock:
      if (Uniform(rng, 0, 1))
        m.status = err;
      else
        m.clock = c;
      break;
    case MessageType::kReadChunk:
      m.seq = rng();
      m.done = Uniform(rng, 0, 1);
      m.elements = elements();
      break;
    case MessageType::kChunkAck:
      m.seq = rng();
      break;
    case MessageType::kStopFold:
    case MessageType::kKeepFold:
      break;
    case MessageType::kQuery:
      m.set = AdversarialBytes(rng, 6);
      for (int i = 0, n = Uniform(rng, 0, 4); i < n; ++i) {
        m.query.push_back(AdversarialBytes(rng, 5));
      }
      break;
    case MessageType::kQueryReply:
      if (Uniform(rng, 0, 1)) {
        m.status = err;
      } else {
        m.clock = c;
        m.elements = elements();
      }
      break;
    case MessageType::kAeDigest:
      m.digest = rng();
      m.bucket_count = rng();
      break;
    case MessageType::kAeDigestReply:
      if (Uniform(rng, 0, 1)) m.status = err;
      m.digests_equal = Uniform(rng, 0, 1);
      for (int i = 0, n = Uniform(rng, 0, 5); i < n; ++i) {
        m.bucket_digests.push_back(rng());
      }
      break;
    case MessageType::kAeSets:
    case MessageType::kAeSetsReply: {
      const bool clocks = m.type() == MessageType::kAeSetsReply;
      if (clocks && Uniform(rng, 0, 1)) m.status = err;
      if (!clocks) {
        for (int i = 0, n = Uniform(rng, 0, 5); i < n; ++i) {
          m.bucket_ids.push_back(Uniform(rng, 0, ~0ull));
        }
      }
      for (int i = 0, n = Uniform(rng, 0, 3); i < n; ++i) {
        SetSummary s;
        s.set = AdversarialBytes(rng, 6);
        s.digest = rng();
        s.keys_digest = rng();
        s.tombstone_empty = Uniform(rng, 0, 1);
        if (clocks) s.clock = c;
        m.summaries.push_back(std::move(s));
      }
      break;
    }
    case MessageType::kAePull:
      m.set = AdversarialBytes(rng, 6);
      m.clock = c;
      break;
    case MessageType::kAePush:
      m.set = AdversarialBytes(rng, 6);
      m.seq = rng();
      m.done = Uniform(rng, 0, 1);
      if (m.done) m.clock = c;
      m.elements = elements();
      break;
    case MessageType::kAePushAck:
      if (Uniform(rng, 0, 1)) m.status = err;
      m.seq = rng();
      break;
  }
  return m;
}

bool SameOps(const std::vector<UpdateOp>& a, const std::vector<UpdateOp>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].kind != b[i].kind || a[i].element != b[i].element ||
        a[i].context != b[i].context ||
        a[i].context_from_replica != b[i].context_from_replica) {
      return false;
    }
  }
  return true;
}

// Every field of a decoded message against the one encoded.
void CheckSame(const Message& back, const Message& m) {
  CHECK(back.type() == m.type());
  CHECK(back.header.request_id == m.header.request_id);
  CHECK(back.header.partition == m.header.partition);
  CHECK(back.status == m.status);
  CHECK(back.set == m.set);
  CHECK(SameOps(back.ops, m.ops));
  CHECK(back.delta == m.delta);
  CHECK(back.bounds.start == m.bounds.start);
  CHECK(back.bounds.end == m.bounds.end);
  CHECK(back.clock == m.clock);
  CHECK(back.elements == m.elements);
  CHECK(back.query == m.query);
  CHECK(back.seq == m.seq);
  CHECK(back.done == m.done);
  CHECK(back.epoch == m.epoch);
  CHECK(back.index == m.index);
  CHECK(back.end == m.end);
  CHECK(back.from_node == m.from_node);
  CHECK(back.to_node == m.to_node);
  CHECK(back.digest == m.digest);
  CHECK(back.bucket_count == m.bucket_count);
  CHECK(back.digests_equal == m.digests_equal);
  CHECK(back.bucket_digests == m.bucket_digests);
  CHECK(back.bucket_ids == m.bucket_ids);
  CHECK(back.episode == m.episode);
  CHECK(back.supplement == m.supplement);
  CHECK(back.incarnation == m.incarnation);
  CHECK(back.versions == m.versions);
  CHECK(back.states == m.states);
  CHECK(back.applied_by == m.applied_by);
  CHECK(back.found == m.found);
  CHECK(back.count == m.count);
  CHECK(back.tombstone_digest == m.tombstone_digest);
  REQUIRE(back.summaries.size() == m.summaries.size());
  for (size_t k = 0; k < m.summaries.size(); ++k) {
    CHECK(back.summaries[k].set == m.summaries[k].set);
    CHECK(back.summaries[k].digest == m.summaries[k].digest);
    CHECK(back.summaries[k].keys_digest == m.summaries[k].keys_digest);
    CHECK(back.summaries[k].tombstone_empty == m.summaries[k].tombstone_empty);
    CHECK(back.summaries[k].clock == m.summaries[k].clock);
  }
  if (m.type() == MessageType::kRead) {
    CHECK(back.batch_size == m.batch_size);
    CHECK(back.bounds.start_inclusive == m.bounds.start_inclusive);
    CHECK(back.bounds.end_inclusive == m.bounds.end_inclusive);
  }
}

TEST_CASE("message: round trip, truncation and garbage") {
  for (uint64_t seed : Seeds(10)) {
    CAPTURE(seed);
    Rng rng(seed);
    for (int i = 0; i < 500; ++i) {
      Message m = RandomMessage(rng);
      std::string enc = m.Encode();
      auto back = Message::Decode(enc);
      REQUIRE(back.ok());
      CheckSame(*back, m);
      for (size_t len = 0; len < enc.size(); ++len) {
        REQUIRE_FALSE(Message::Decode(enc.substr(0, len)).ok());
      }
      REQUIRE_FALSE(Message::Decode(enc + "z").ok());
      std::string flipped = enc;
      flipped[Uniform(rng, 0, flipped.size() - 1)] ^=
          static_cast<char>(1 << Uniform(rng, 0, 7));
      (void)Message::Decode(flipped);  // An error or a message; no crash.
    }
    for (int i = 0; i < 3000; ++i) {
      std::string junk = AdversarialBytes(rng, 48);
      if (!junk.empty() && Uniform(rng, 0, 1)) {
        junk[0] = static_cast<char>(kMessageFormatVersion);
      }
      if (junk.size() > 1 && Uniform(rng, 0, 1)) {
        junk[1] = static_cast<char>(Uniform(rng, 1, kMaxMessageType));
      }
      (void)Message::Decode(junk);
    }
  }
}

TEST_CASE("message: DescribeMessage names what membership messages move") {
  Message m;
  m.header = MessageHeader{MessageType::kHandoffDone, 42, 3};
  m.from_node = 5;
  m.to_node = 6;
  m.episode = 12;
  m.supplement = true;
  const std::string done = DescribeMessage(m.Encode());
  CHECK(done.find("HandoffDone #42 p3") == 0);
  CHECK(done.find("5->6 episode 12 supplement") != std::string::npos);
  Message g;
  g.header = MessageHeader{MessageType::kMembership, 0, 0};
  g.epoch = 7;
  g.versions = {{1, 3}, {2, 9}};
  g.states = {NodeServing{2, 9, {}}};
  const std::string gossip = DescribeMessage(g.Encode());
  CHECK(gossip.find("epoch 7 versions 2, states 2@9") != std::string::npos);
  Message a;
  a.header = MessageHeader{MessageType::kHandoffDoneAck, 42, 3};
  a.from_node = 5;
  a.to_node = 6;
  a.status = absl::AlreadyExistsError("x");
  CHECK(DescribeMessage(a.Encode()).find("5->6 ALREADY_EXISTS") !=
        std::string::npos);
  std::string bytes = m.Encode();
  bytes[bytes.size() / 2] ^= 1;
  CHECK(DescribeMessage(bytes).find("undecodable") == 0);
}

TEST_CASE("message: DecodeInto a reused message equals a fresh decode") {
  for (uint64_t seed : Seeds(10)) {
    CAPTURE(seed);
    Rng rng(seed);
    Message reused;
    for (int i = 0; i < 500; ++i) {
      CAPTURE(i);
      const Message m = RandomMessage(rng);
      const std::string enc = m.Encode();
      if (Uniform(rng, 0, 4) == 0) {
        // A failed decode in between leaves it usable.
        std::string broken = enc.substr(0, Uniform(rng, 0, enc.size() - 1));
        REQUIRE_FALSE(Message::DecodeInto(broken, &reused).ok());
      }
      REQUIRE(Message::DecodeInto(enc, &reused).ok());
      CheckSame(reused, m);
    }
  }
}

TEST_CASE("message: node states out of order or with two live entries") {
  auto encode = [](std::vector<ServeEntry> entries) {
    Message m;
    m.header.type = MessageType::kMembership;
    m.states.push_back(NodeServing{3, 7, std::move(entries)});
    return m.Encode();
  };
  ServeEntry a{4, 10, 0, 0, 0, false};
  ServeEntry b{4, 12, 1, 3, 0, false};
  ServeEntry gone = a;
  gone.departed = true;
  ServeEntry later{2, 1, 0, 0, 0, false};
  CHECK(Message::Decode(encode({gone, b})).ok());
  // Two live entries of one partition, adjacent or not.
  CHECK_FALSE(Message::Decode(encode({a, b})).ok());
  ServeEntry mid = a;
  mid.since = 11;
  mid.departed = true;
  CHECK_FALSE(Message::Decode(encode({a, mid, b})).ok());
  // Not ascending: by partition, or by episode within one.
  CHECK_FALSE(Message::Decode(encode({a, later})).ok());
  CHECK_FALSE(Message::Decode(encode({b, gone})).ok());
  // The node states' own encoding (node metadata) refuses the same.
  std::string bytes;
  EncodeNodeStates(std::vector<NodeServing>{NodeServing{3, 7, {a, b}}}, &bytes);
  std::vector<NodeServing> out;
  CHECK(absl::IsDataLoss(DecodeNodeStates(bytes, &out)));
}

}  // namespace
}  // namespace bigset
