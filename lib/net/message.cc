#include "net/message.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bigset/net/transport.h"
#include "core/coding.h"
#include "core/crc32c.h"
#include "core/string_view_compat.h"

namespace bigset {
namespace {

// Smallest encodings, to bound counts by the input before allocating.
constexpr size_t kMinElementBytes = 2;   // empty element, no dots
constexpr size_t kMinUpdateOpBytes = 3;  // flags, element length, context size
constexpr size_t kMinStringBytes = 1;
// absl::StatusCode values are 0..16.
constexpr uint64_t kMaxStatusCode = 16;

void PutDots(std::string* dst, std::span<const Dot> dots) {
  coding::PutVarint64(dst, dots.size());
  for (Dot d : dots) coding::PutDot(dst, d.actor, d.counter);
}

void PutStatus(std::string* dst, const absl::Status& s) {
  coding::PutVarint64(dst, static_cast<uint64_t>(s.code()));
  coding::PutLengthPrefixed(dst, ToStd(s.message()));
}

// The bulk of every read: sized once, then written through a pointer.
void PutSummaries(std::string* dst, std::span<const SetSummary> summaries,
                  bool with_clocks) {
  coding::PutVarint64(dst, summaries.size());
  for (const SetSummary& s : summaries) {
    coding::PutLengthPrefixed(dst, s.set);
    coding::PutFixed64BE(dst, s.digest);
    coding::PutFixed64BE(dst, s.keys_digest);
    dst->push_back(static_cast<char>(s.tombstone_empty ? 1 : 0));
    if (with_clocks) coding::PutLengthPrefixed(dst, s.clock.Encode());
  }
}

void PutElements(std::string* dst, std::span<const ElementDots> elements) {
  size_t bound = coding::kMaxVarint64Bytes;
  for (const ElementDots& e : elements) {
    bound += 2 * coding::kMaxVarint64Bytes + e.element.size() +
             e.dots.size() * coding::kMaxDotBytes;
  }
  const size_t start = dst->size();
  dst->resize(start + bound);
  char* p = dst->data() + start;
  p += coding::EncodeVarint64(p, elements.size());
  for (const ElementDots& e : elements) {
    p += coding::EncodeVarint64(p, e.element.size());
    std::memcpy(p, e.element.data(), e.element.size());
    p += e.element.size();
    p += coding::EncodeVarint64(p, e.dots.size());
    for (Dot d : e.dots) p += coding::EncodeDot(p, d.actor, d.counter);
  }
  dst->resize(static_cast<size_t>(p - dst->data()));
}

// Node states (membership): varint n, then per state: varint node, varint
// version, varint count, and per entry varint partition (ascending), since,
// took_from, took_since, handing_to, u8 departed.
void PutStates(std::string* dst, std::span<const NodeServing> states) {
  coding::PutVarint64(dst, states.size());
  for (const NodeServing& st : states) {
    coding::PutVarint64(dst, st.node);
    coding::PutVarint64(dst, st.version);
    coding::PutVarint64(dst, st.entries.size());
    for (const ServeEntry& e : st.entries) {
      coding::PutVarint64(dst, e.partition);
      coding::PutVarint64(dst, e.since);
      coding::PutVarint64(dst, e.took_from);
      coding::PutVarint64(dst, e.took_since);
      coding::PutVarint64(dst, e.handing_to);
      dst->push_back(static_cast<char>(e.departed ? 1 : 0));
    }
  }
}

// Reads the fields of a message body. Every method returns false on
// malformed or truncated input.
class BodyReader {
 public:
  explicit BodyReader(std::string_view in) : in_(in) {}

  bool Byte(uint8_t* v) { return in_.GetByte(v); }
  bool Varint(uint64_t* v) { return in_.GetVarint64(v); }
  bool Fixed64(uint64_t* v) { return in_.GetFixed64BE(v); }
  // Set summaries: varint n, then per summary: bytes set, fixed64 digest,
  // fixed64 keys digest, u8 flags (bit 0: tombstone empty), and with clocks
  // bytes clock.
  bool Summaries(std::vector<SetSummary>* out, bool with_clocks) {
    uint64_t n = 0;
    if (!Count(18, &n)) return false;
    out->resize(static_cast<size_t>(n));
    for (SetSummary& s : *out) {
      uint8_t flags = 0;
      if (!String(&s.set) || !Fixed64(&s.digest) || !Fixed64(&s.keys_digest) ||
          !Byte(&flags) || flags > 1) {
        return false;
      }
      s.tombstone_empty = flags == 1;
      if (with_clocks && !Clock(&s.clock)) return false;
    }
    return true;
  }
  bool Node(NodeId* node) {
    uint64_t v = 0;
    if (!Varint(&v) || v > UINT32_MAX) return false;
    *node = static_cast<NodeId>(v);
    return true;
  }
  bool States(std::vector<NodeServing>* out) {
    uint64_t n = 0;
    if (!Count(3, &n)) return false;
    out->resize(static_cast<size_t>(n));
    for (NodeServing& st : *out) {
      uint64_t k = 0;
      if (!Node(&st.node) || !Varint(&st.version) || !Count(6, &k)) {
        return false;
      }
      st.entries.resize(static_cast<size_t>(k));
      bool live = false;  // The current partition has a live entry.
      for (size_t i = 0; i < st.entries.size(); ++i) {
        ServeEntry& e = st.entries[i];
        uint64_t p = 0;
        uint8_t departed = 0;
        if (!Varint(&p) || p > UINT32_MAX || !Varint(&e.since) ||
            !Node(&e.took_from) || !Varint(&e.took_since) ||
            !Node(&e.handing_to) || !Byte(&departed) || departed > 1) {
          return false;
        }
        e.partition = static_cast<uint32_t>(p);
        e.departed = departed == 1;
        // Ascending by (partition, since); one live entry per partition.
        if (i > 0) {
          const ServeEntry& prev = st.entries[i - 1];
          if (e.partition < prev.partition ||
              (e.partition == prev.partition && e.since <= prev.since)) {
            return false;
          }
          if (e.partition != prev.partition) live = false;
        }
        if (!e.departed && std::exchange(live, true)) return false;
      }
    }
    return true;
  }
  bool Bytes(std::string_view* out) { return in_.GetLengthPrefixed(out); }
  bool String(std::string* out) {
    std::string_view v;
    if (!Bytes(&v)) return false;
    out->assign(v);
    return true;
  }
  bool Count(size_t min_bytes, uint64_t* n) {
    return in_.GetCount(min_bytes, n);
  }
  bool Dots(std::vector<Dot>* dots) {
    uint64_t n = 0;
    if (!Count(coding::kMinDotBytes, &n)) return false;
    dots->resize(static_cast<size_t>(n));
    for (Dot& d : *dots) {
      if (!in_.GetDot(&d.actor, &d.counter)) return false;
    }
    return true;
  }
  bool Status(absl::Status* s) {
    uint64_t code = 0;
    std::string_view msg;
    if (!in_.GetVarint64(&code) || code > kMaxStatusCode || !Bytes(&msg)) {
      return false;
    }
    *s = absl::Status(static_cast<absl::StatusCode>(code), ToAbsl(msg));
    return true;
  }
  bool Elements(std::vector<ElementDots>* elements) {
    uint64_t n = 0;
    if (!Count(kMinElementBytes, &n)) return false;
    elements->resize(static_cast<size_t>(n));
    for (ElementDots& e : *elements) {
      if (!String(&e.element) || !Dots(&e.dots)) return false;
    }
    return true;
  }
  bool Clock(bigset::Clock* clock) {
    std::string_view bytes;
    if (!Bytes(&bytes)) return false;
    absl::StatusOr<bigset::Clock> c = bigset::Clock::Decode(bytes);
    if (!c.ok()) return false;
    *clock = std::move(*c);
    return true;
  }
  bool Delta(bigset::Delta* delta) {
    std::string_view bytes;
    return Bytes(&bytes) && bigset::Delta::DecodeInto(bytes, delta).ok();
  }
  bool Bounds(ElementBounds* b, uint32_t* batch_size) {
    uint8_t flags = 0;
    if (!Byte(&flags) || flags > 15) return false;
    b->start_inclusive = (flags & 4) != 0;
    b->end_inclusive = (flags & 8) != 0;
    if ((flags & 1) && !String(&b->start.emplace())) return false;
    if ((flags & 2) && !String(&b->end.emplace())) return false;
    uint64_t batch = 0;
    if (!Varint(&batch) || batch < 1 || batch > UINT32_MAX) return false;
    *batch_size = static_cast<uint32_t>(batch);
    return true;
  }
  bool empty() const { return in_.empty(); }
  std::string_view rest() const {
    return std::string_view(in_.position(), in_.remaining());
  }

 private:
  coding::Reader in_;
};

void PutBounds(std::string* dst, const ElementBounds& b, uint32_t batch_size) {
  dst->push_back(static_cast<char>(
      (b.start.has_value() ? 1 : 0) | (b.end.has_value() ? 2 : 0) |
      (b.start_inclusive ? 4 : 0) | (b.end_inclusive ? 8 : 0)));
  if (b.start.has_value()) coding::PutLengthPrefixed(dst, *b.start);
  if (b.end.has_value()) coding::PutLengthPrefixed(dst, *b.end);
  coding::PutVarint64(dst, batch_size);
}

absl::Status Malformed(MessageType type, absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat("malformed ", MessageTypeName(type), " message: ", what));
}

}  // namespace

const char* MessageTypeName(MessageType type) {
  switch (type) {
    case MessageType::kUpdate:
      return "Update";
    case MessageType::kUpdateReply:
      return "UpdateReply";
    case MessageType::kClear:
      return "Clear";
    case MessageType::kReplicate:
      return "Replicate";
    case MessageType::kReplicateAck:
      return "ReplicateAck";
    case MessageType::kRead:
      return "Read";
    case MessageType::kReadClock:
      return "ReadClock";
    case MessageType::kReadChunk:
      return "ReadChunk";
    case MessageType::kChunkAck:
      return "ChunkAck";
    case MessageType::kStopFold:
      return "StopFold";
    case MessageType::kQuery:
      return "Query";
    case MessageType::kQueryReply:
      return "QueryReply";
    case MessageType::kRepair:
      return "Repair";
    case MessageType::kKeepFold:
      return "KeepFold";
    case MessageType::kReplicateGivenUp:
      return "ReplicateGivenUp";
    case MessageType::kReplicateAckWithDelta:
      return "ReplicateAckWithDelta";
    case MessageType::kTransferChunk:
      return "TransferChunk";
    case MessageType::kTransferAck:
      return "TransferAck";
    case MessageType::kHandoffDelta:
      return "HandoffDelta";
    case MessageType::kHandoffDeltaAck:
      return "HandoffDeltaAck";
    case MessageType::kHandoffDone:
      return "HandoffDone";
    case MessageType::kHandoffDoneAck:
      return "HandoffDoneAck";
    case MessageType::kRingEpoch:
      return "RingEpoch";
    case MessageType::kAeDigest:
      return "AeDigest";
    case MessageType::kAeDigestReply:
      return "AeDigestReply";
    case MessageType::kAeSets:
      return "AeSets";
    case MessageType::kAeSetsReply:
      return "AeSetsReply";
    case MessageType::kAePull:
      return "AePull";
    case MessageType::kAePush:
      return "AePush";
    case MessageType::kAePushAck:
      return "AePushAck";
    case MessageType::kMembership:
      return "Membership";
    case MessageType::kCount:
      return "Count";
    case MessageType::kCountReply:
      return "CountReply";
  }
  return "Unknown";
}

void FinishMessage(size_t start, std::string* dst) {
  const uint32_t crc =
      crc32c::Extend(0, dst->data() + start, dst->size() - start);
  coding::PutFixed32BE(dst, crc);
}

void EncodeHeader(const MessageHeader& header, std::string* dst) {
  char buf[2 + 2 * coding::kMaxVarint64Bytes];
  char* p = buf;
  *p++ = static_cast<char>(kMessageFormatVersion);
  *p++ = static_cast<char>(header.type);
  p += coding::EncodeVarint64(p, header.request_id);
  p += coding::EncodeVarint64(p, header.partition);
  dst->append(buf, static_cast<size_t>(p - buf));
}

absl::Status ParseHeader(std::string_view in, MessageHeader* header,
                         std::string_view* body) {
  // The checksum first: a truncated or bit-flipped message is rejected
  // whatever its bytes would decode to.
  if (in.size() < 4) return absl::DataLossError("message too short");
  const uint32_t want = coding::DecodeFixed32BE(in.data() + in.size() - 4);
  in.remove_suffix(4);
  if (crc32c::Value(in) != want) {
    return absl::DataLossError("message checksum mismatch");
  }
  coding::Reader r(in);
  uint8_t version = 0, type = 0;
  uint64_t partition = 0;
  if (!r.GetByte(&version)) return absl::DataLossError("empty message");
  if (version != kMessageFormatVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported message format version ", version));
  }
  if (!r.GetByte(&type) || type < 1 || type > kMaxMessageType) {
    return absl::DataLossError(absl::StrCat("unknown message type ", type));
  }
  header->type = static_cast<MessageType>(type);
  if (!r.GetVarint64(&header->request_id) || !r.GetVarint64(&partition) ||
      partition > UINT32_MAX) {
    return Malformed(header->type, "header");
  }
  header->partition = static_cast<uint32_t>(partition);
  *body = std::string_view(r.position(), r.remaining());
  return absl::OkStatus();
}

void Message::EncodeTo(std::string* dst) const {
  switch (header.type) {
    case MessageType::kReadChunk:
      EncodeReadChunk(header, seq, done, elements, dst);
      return;
    case MessageType::kReplicate:
    case MessageType::kReplicateGivenUp:
    case MessageType::kRepair:
    case MessageType::kHandoffDelta:
      EncodeDeltaMessage(header, delta, dst);
      return;
    case MessageType::kReplicateAck:
    case MessageType::kHandoffDeltaAck:
      EncodeStatusReply(header, status, applied_by, dst);
      return;
    default:
      break;
  }
  const size_t start = dst->size();
  EncodeHeader(header, dst);
  switch (header.type) {
    case MessageType::kUpdate:
      coding::PutLengthPrefixed(dst, set);
      coding::PutVarint64(dst, ops.size());
      for (const UpdateOp& op : ops) {
        dst->push_back(
            static_cast<char>((op.kind == UpdateOp::Kind::kAdd ? 1 : 0) |
                              (op.context_from_replica ? 2 : 0)));
        coding::PutLengthPrefixed(dst, op.element);
        PutDots(dst, op.context);
      }
      break;
    case MessageType::kClear:
      coding::PutLengthPrefixed(dst, set);
      coding::PutLengthPrefixed(dst, clock.Encode());
      break;
    case MessageType::kUpdateReply:
      PutStatus(dst, status);
      if (status.ok()) coding::PutLengthPrefixed(dst, delta.Encode());
      break;
    case MessageType::kReplicateAckWithDelta:
      coding::PutLengthPrefixed(dst, delta.Encode());
      break;
    case MessageType::kRead:
      coding::PutLengthPrefixed(dst, set);
      PutBounds(dst, bounds, batch_size);
      break;
    case MessageType::kReadClock:
      PutStatus(dst, status);
      if (status.ok()) coding::PutLengthPrefixed(dst, clock.Encode());
      break;
    case MessageType::kChunkAck:
      coding::PutVarint64(dst, seq);
      break;
    case MessageType::kStopFold:
    case MessageType::kKeepFold:
      break;
    case MessageType::kQuery:
      coding::PutLengthPrefixed(dst, set);
      coding::PutVarint64(dst, query.size());
      for (const std::string& e : query) coding::PutLengthPrefixed(dst, e);
      break;
    case MessageType::kQueryReply:
      PutStatus(dst, status);
      if (status.ok()) {
        coding::PutLengthPrefixed(dst, clock.Encode());
        PutElements(dst, elements);
      }
      break;
    case MessageType::kTransferChunk:
      coding::PutVarint64(dst, epoch);
      coding::PutLengthPrefixed(dst, set);
      coding::PutVarint64(dst, index);
      coding::PutVarint64(dst, seq);
      dst->push_back(static_cast<char>((done ? 1 : 0) | (end ? 2 : 0)));
      if (done) coding::PutLengthPrefixed(dst, clock.Encode());
      PutElements(dst, elements);
      break;
    case MessageType::kTransferAck:
      PutStatus(dst, status);
      coding::PutVarint64(dst, index);
      coding::PutVarint64(dst, seq);
      coding::PutVarint64(dst, incarnation);
      break;
    case MessageType::kHandoffDone:
      coding::PutVarint64(dst, epoch);
      coding::PutVarint64(dst, from_node);
      coding::PutVarint64(dst, to_node);
      coding::PutVarint64(dst, episode);
      dst->push_back(static_cast<char>(supplement ? 1 : 0));
      break;
    case MessageType::kHandoffDoneAck:
      PutStatus(dst, status);
      coding::PutVarint64(dst, epoch);
      coding::PutVarint64(dst, from_node);
      coding::PutVarint64(dst, to_node);
      PutStates(dst, states);
      break;
    case MessageType::kMembership:
      coding::PutVarint64(dst, epoch);
      coding::PutVarint64(dst, versions.size());
      for (const auto& [node, version] : versions) {
        coding::PutVarint64(dst, node);
        coding::PutVarint64(dst, version);
      }
      PutStates(dst, states);
      break;
    case MessageType::kRingEpoch:
      coding::PutVarint64(dst, epoch);
      break;
    case MessageType::kCount:
      coding::PutLengthPrefixed(dst, set);
      break;
    case MessageType::kCountReply:
      PutStatus(dst, status);
      if (status.ok()) {
        dst->push_back(static_cast<char>(found ? 1 : 0));
        coding::PutVarint64(dst, count);
        coding::PutFixed64BE(dst, digest);
        coding::PutFixed64BE(dst, tombstone_digest);
      }
      break;
    case MessageType::kAeDigest:
      coding::PutFixed64BE(dst, digest);
      coding::PutVarint64(dst, index);
      break;
    case MessageType::kAeDigestReply:
      PutStatus(dst, status);
      dst->push_back(static_cast<char>(done ? 1 : 0));
      coding::PutVarint64(dst, numbers.size());
      for (uint64_t v : numbers) coding::PutFixed64BE(dst, v);
      break;
    case MessageType::kAeSets:
      coding::PutVarint64(dst, numbers.size());
      for (uint64_t v : numbers) coding::PutVarint64(dst, v);
      PutSummaries(dst, summaries, /*with_clocks=*/false);
      break;
    case MessageType::kAeSetsReply:
      PutStatus(dst, status);
      PutSummaries(dst, summaries, /*with_clocks=*/true);
      break;
    case MessageType::kAePull:
      coding::PutLengthPrefixed(dst, set);
      coding::PutLengthPrefixed(dst, clock.Encode());
      break;
    case MessageType::kAePush:
      coding::PutLengthPrefixed(dst, set);
      coding::PutVarint64(dst, seq);
      dst->push_back(static_cast<char>(done ? 1 : 0));
      if (done) coding::PutLengthPrefixed(dst, clock.Encode());
      PutElements(dst, elements);
      break;
    case MessageType::kAePushAck:
      PutStatus(dst, status);
      coding::PutVarint64(dst, seq);
      break;
    case MessageType::kReadChunk:
    case MessageType::kReplicate:
    case MessageType::kReplicateGivenUp:
    case MessageType::kRepair:
    case MessageType::kReplicateAck:
    case MessageType::kHandoffDelta:
    case MessageType::kHandoffDeltaAck:
      break;  // Encoded above.
  }
  FinishMessage(start, dst);
}

absl::StatusOr<Message> Message::Decode(std::string_view in) {
  Message m;
  absl::Status s = DecodeInto(in, &m);
  if (!s.ok()) return s;
  return m;
}

absl::Status Message::DecodeInto(std::string_view in, Message* out) {
  // A fresh message. The old elements (their strings and vectors keep their
  // capacity) are handed back only to a type that decodes elements, which
  // resizes and overwrites them.
  std::vector<ElementDots> spare = std::move(out->elements);
  *out = Message();
  Message& m = *out;
  auto elements = [&]() {
    m.elements = std::move(spare);
    return &m.elements;
  };
  std::string_view body;
  absl::Status s = ParseHeader(in, &m.header, &body);
  if (!s.ok()) return s;
  BodyReader d(body);
  bool ok = true;
  switch (m.header.type) {
    case MessageType::kUpdate: {
      uint64_t n = 0;
      ok = d.String(&m.set) && d.Count(kMinUpdateOpBytes, &n);
      if (!ok) break;
      m.ops.resize(static_cast<size_t>(n));
      for (UpdateOp& op : m.ops) {
        uint8_t flags = 0;
        ok = d.Byte(&flags) && flags <= 3 && d.String(&op.element) &&
             d.Dots(&op.context);
        if (!ok) break;
        op.kind = (flags & 1) ? UpdateOp::Kind::kAdd : UpdateOp::Kind::kRemove;
        op.context_from_replica = (flags & 2) != 0;
      }
      break;
    }
    case MessageType::kClear:
      ok = d.String(&m.set) && d.Clock(&m.clock);
      break;
    case MessageType::kUpdateReply:
      ok = d.Status(&m.status) && (!m.status.ok() || d.Delta(&m.delta));
      break;
    case MessageType::kReplicateAckWithDelta:
      ok = d.Delta(&m.delta);
      break;
    case MessageType::kReplicate:
    case MessageType::kReplicateGivenUp:
    case MessageType::kRepair:
    case MessageType::kHandoffDelta: {
      std::string_view delta;
      s = ParseDeltaBody(body, &delta);
      if (!s.ok()) return s;
      s = Delta::DecodeInto(delta, &m.delta);
      if (!s.ok()) return Malformed(m.header.type, s.message());
      return absl::OkStatus();
    }
    case MessageType::kReplicateAck:
    case MessageType::kHandoffDeltaAck:
      s = ParseStatusBody(body, &m.status, &m.applied_by);
      if (!s.ok()) return s;
      return absl::OkStatus();
    case MessageType::kRead:
      ok = d.String(&m.set) && d.Bounds(&m.bounds, &m.batch_size);
      break;
    case MessageType::kReadClock:
      ok = d.Status(&m.status) && (!m.status.ok() || d.Clock(&m.clock));
      break;
    case MessageType::kReadChunk: {
      std::string_view chunk;
      s = ParseReadChunkBody(body, &m.seq, &m.done, &chunk);
      if (!s.ok()) return s;
      s = DecodeChunkElements(chunk, elements());
      if (!s.ok()) return s;
      return absl::OkStatus();
    }
    case MessageType::kChunkAck:
      ok = d.Varint(&m.seq);
      break;
    case MessageType::kStopFold:
    case MessageType::kKeepFold:
      break;
    case MessageType::kQuery: {
      uint64_t n = 0;
      ok = d.String(&m.set) && d.Count(kMinStringBytes, &n);
      if (!ok) break;
      m.query.resize(static_cast<size_t>(n));
      for (std::string& e : m.query) {
        ok = d.String(&e);
        if (!ok) break;
      }
      break;
    }
    case MessageType::kQueryReply:
      ok = d.Status(&m.status) &&
           (!m.status.ok() || (d.Clock(&m.clock) && d.Elements(elements())));
      break;
    case MessageType::kTransferChunk: {
      uint8_t flags = 0;
      ok = d.Varint(&m.epoch) && d.String(&m.set) && d.Varint(&m.index) &&
           d.Varint(&m.seq) && d.Byte(&flags) && flags <= 3;
      if (!ok) break;
      m.done = (flags & 1) != 0;
      m.end = (flags & 2) != 0;
      ok = (!m.done || d.Clock(&m.clock)) && d.Elements(elements());
      break;
    }
    case MessageType::kTransferAck:
      ok = d.Status(&m.status) && d.Varint(&m.index) && d.Varint(&m.seq) &&
           d.Varint(&m.incarnation);
      break;
    case MessageType::kHandoffDone: {
      uint8_t supplement = 0;
      ok = d.Varint(&m.epoch) && d.Node(&m.from_node) && d.Node(&m.to_node) &&
           d.Varint(&m.episode) && d.Byte(&supplement) && supplement <= 1;
      m.supplement = supplement == 1;
      break;
    }
    case MessageType::kHandoffDoneAck:
      ok = d.Status(&m.status) && d.Varint(&m.epoch) && d.Node(&m.from_node) &&
           d.Node(&m.to_node) && d.States(&m.states);
      break;
    case MessageType::kMembership: {
      uint64_t n = 0;
      ok = d.Varint(&m.epoch) && d.Count(2, &n);
      if (!ok) break;
      m.versions.resize(static_cast<size_t>(n));
      for (auto& [node, version] : m.versions) {
        ok = d.Node(&node) && d.Varint(&version);
        if (!ok) break;
      }
      ok = ok && d.States(&m.states);
      break;
    }
    case MessageType::kRingEpoch:
      ok = d.Varint(&m.epoch);
      break;
    case MessageType::kCount:
      ok = d.String(&m.set);
      break;
    case MessageType::kCountReply: {
      uint8_t found = 0;
      ok = d.Status(&m.status);
      if (!ok || !m.status.ok()) break;
      ok = d.Byte(&found) && found <= 1 && d.Varint(&m.count) &&
           d.Fixed64(&m.digest) && d.Fixed64(&m.tombstone_digest);
      m.found = found == 1;
      break;
    }
    case MessageType::kAeDigest:
      ok = d.Fixed64(&m.digest) && d.Varint(&m.index);
      break;
    case MessageType::kAeDigestReply: {
      uint8_t equal = 0;
      uint64_t n = 0;
      ok =
          d.Status(&m.status) && d.Byte(&equal) && equal <= 1 && d.Count(8, &n);
      if (!ok) break;
      m.done = equal == 1;
      m.numbers.resize(static_cast<size_t>(n));
      for (uint64_t& v : m.numbers) {
        ok = d.Fixed64(&v);
        if (!ok) break;
      }
      break;
    }
    case MessageType::kAeSets: {
      uint64_t n = 0;
      ok = d.Count(1, &n);
      if (!ok) break;
      m.numbers.resize(static_cast<size_t>(n));
      for (uint64_t& v : m.numbers) {
        ok = d.Varint(&v);
        if (!ok) break;
      }
      ok = ok && d.Summaries(&m.summaries, /*with_clocks=*/false);
      break;
    }
    case MessageType::kAeSetsReply:
      ok = d.Status(&m.status) && d.Summaries(&m.summaries, true);
      break;
    case MessageType::kAePull:
      ok = d.String(&m.set) && d.Clock(&m.clock);
      break;
    case MessageType::kAePush: {
      uint8_t flags = 0;
      ok = d.String(&m.set) && d.Varint(&m.seq) && d.Byte(&flags) && flags <= 1;
      if (!ok) break;
      m.done = flags == 1;
      ok = (!m.done || d.Clock(&m.clock)) && d.Elements(elements());
      break;
    }
    case MessageType::kAePushAck:
      ok = d.Status(&m.status) && d.Varint(&m.seq);
      break;
  }
  if (!ok) return Malformed(m.header.type, "body");
  if (!d.empty()) return Malformed(m.header.type, "trailing bytes");
  return absl::OkStatus();
}

void EncodeNodeStates(std::span<const NodeServing> states, std::string* dst) {
  PutStates(dst, states);
}

absl::Status DecodeNodeStates(std::string_view in,
                              std::vector<NodeServing>* out) {
  BodyReader d(in);
  if (!d.States(out) || !d.empty()) {
    return absl::DataLossError("undecodable node states");
  }
  return absl::OkStatus();
}

void EncodeReadChunk(const MessageHeader& header, uint64_t seq, bool done,
                     std::span<const ElementDots> elements, std::string* dst) {
  const size_t start = dst->size();
  EncodeHeader(header, dst);
  coding::PutVarint64(dst, seq);
  dst->push_back(done ? 1 : 0);
  PutElements(dst, elements);
  FinishMessage(start, dst);
}

absl::Status ParseReadChunkBody(std::string_view body, uint64_t* seq,
                                bool* done, std::string_view* elements) {
  BodyReader r(body);
  uint8_t flag = 0;
  if (!r.Varint(seq) || !r.Byte(&flag) || flag > 1) {
    return Malformed(MessageType::kReadChunk, "header");
  }
  *done = flag == 1;
  *elements = r.rest();
  return absl::OkStatus();
}

absl::Status DecodeChunkElements(std::string_view in,
                                 std::vector<ElementDots>* out) {
  BodyReader d(in);
  if (!d.Elements(out) || !d.empty()) {
    return Malformed(MessageType::kReadChunk, "elements");
  }
  return absl::OkStatus();
}

void EncodeDeltaMessage(const MessageHeader& header, const Delta& delta,
                        std::string* dst) {
  const size_t message_start = dst->size();
  EncodeHeader(header, dst);
  // Length-prefixed, but encoded in place: the delta is appended, then its
  // length inserted before it (a few bytes moved instead of a temporary
  // string).
  const size_t start = dst->size();
  delta.EncodeTo(dst);
  char len[coding::kMaxVarint64Bytes];
  const size_t n = coding::EncodeVarint64(len, dst->size() - start);
  dst->insert(start, len, n);
  FinishMessage(message_start, dst);
}

absl::Status ParseDeltaBody(std::string_view body, std::string_view* delta) {
  BodyReader r(body);
  if (!r.Bytes(delta) || !r.empty()) {
    return Malformed(MessageType::kReplicate, "body");
  }
  return absl::OkStatus();
}

void EncodeStatusReply(const MessageHeader& header, const absl::Status& status,
                       NodeId applied_by, std::string* dst) {
  const size_t start = dst->size();
  EncodeHeader(header, dst);
  PutStatus(dst, status);
  coding::PutVarint64(dst, applied_by);
  FinishMessage(start, dst);
}

absl::Status ParseStatusBody(std::string_view body, absl::Status* status,
                             NodeId* applied_by) {
  BodyReader r(body);
  if (!r.Status(status) || !r.Node(applied_by) || !r.empty()) {
    return Malformed(MessageType::kReplicateAck, "body");
  }
  return absl::OkStatus();
}

std::string DescribeMessage(std::string_view bytes) {
  MessageHeader header;
  std::string_view body;
  if (!ParseHeader(bytes, &header, &body).ok()) {
    return absl::StrCat("undecodable ", bytes.size(), "B");
  }
  std::string out =
      absl::StrCat(MessageTypeName(header.type), " #", header.request_id, " p",
                   header.partition, " ", bytes.size(), "B");
  // The membership messages say what they are about: an operator reading
  // a log sees which transfer and which states moved.
  switch (header.type) {
    case MessageType::kHandoffDone:
    case MessageType::kHandoffDoneAck:
    case MessageType::kTransferAck:
    case MessageType::kMembership: {
      absl::StatusOr<Message> m = Message::Decode(bytes);
      if (!m.ok()) break;
      if (header.type == MessageType::kTransferAck) {
        absl::StrAppend(&out, " set#", m->index, " seq ", m->seq, " inc ",
                        m->incarnation);
      } else if (header.type == MessageType::kMembership) {
        absl::StrAppend(&out, " epoch ", m->epoch, " versions ",
                        m->versions.size(), ", states");
        for (const NodeServing& st : m->states) {
          absl::StrAppend(&out, " ", st.node, "@", st.version);
        }
      } else {
        absl::StrAppend(&out, " ", m->from_node, "->", m->to_node);
        if (header.type == MessageType::kHandoffDone) {
          absl::StrAppend(&out, " episode ", m->episode,
                          m->supplement ? " supplement" : "");
        }
      }
      if (header.type != MessageType::kMembership && !m->status.ok()) {
        absl::StrAppend(&out, " ", absl::StatusCodeToString(m->status.code()));
      }
      break;
    }
    default:
      break;
  }
  return out;
}

}  // namespace bigset
