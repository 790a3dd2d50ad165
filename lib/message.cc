#include "bigset/message.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "coding.h"
#include "string_view_compat.h"

namespace bigset {
namespace {

// Smallest encodings, to bound counts before allocating.
constexpr size_t kMinDotBytes = 9;
constexpr size_t kMinElementBytes = 2;
constexpr size_t kMinOpBytes = 3;  // flags, element length, context size
constexpr size_t kMinStringBytes = 1;

void PutBytes(std::string* dst, std::string_view s) {
  coding::PutVarint64(dst, s.size());
  dst->append(s.data(), s.size());
}

void PutDots(std::string* dst, const std::vector<Dot>& dots) {
  coding::PutVarint64(dst, dots.size());
  for (Dot d : dots) {
    coding::PutFixed64BE(dst, d.actor);
    coding::PutVarint64(dst, d.counter);
  }
}

void PutStatus(std::string* dst, const absl::Status& s) {
  coding::PutVarint64(dst, static_cast<uint64_t>(s.code()));
  PutBytes(dst, ToStd(s.message()));
}

// The bulk of every read: sized once, then written through a pointer.
void PutElements(std::string* dst, std::span<const ElementDots> elements) {
  size_t bound = coding::kMaxVarint64Bytes;
  for (const ElementDots& e : elements) {
    bound += 2 * coding::kMaxVarint64Bytes + e.element.size() +
             e.dots.size() * (8 + coding::kMaxVarint64Bytes);
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
    for (Dot d : e.dots) {
      for (int i = 7; i >= 0; --i) *p++ = static_cast<char>(d.actor >> (8 * i));
      p += coding::EncodeVarint64(p, d.counter);
    }
  }
  dst->resize(static_cast<size_t>(p - dst->data()));
}

class Decoder {
 public:
  explicit Decoder(std::string_view in) : in_(in) {}

  bool Byte(uint8_t* v) { return in_.GetByte(v); }
  bool Varint(uint64_t* v) { return in_.GetVarint64(v); }
  bool Bytes(std::string_view* out) {
    uint64_t len = 0;
    return in_.GetVarint64(&len) && len <= in_.remaining() &&
           in_.GetBytes(static_cast<size_t>(len), out);
  }
  bool String(std::string* out) {
    std::string_view v;
    if (!Bytes(&v)) return false;
    out->assign(v);
    return true;
  }
  // A count of items of at least `min_bytes` each that fit in the input.
  bool Count(size_t min_bytes, uint64_t* n) {
    return in_.GetVarint64(n) && *n <= in_.remaining() / min_bytes;
  }
  bool Dots(std::vector<Dot>* dots) {
    uint64_t n = 0;
    if (!Count(kMinDotBytes, &n)) return false;
    dots->resize(static_cast<size_t>(n));
    for (Dot& d : *dots) {
      if (!in_.GetFixed64BE(&d.actor) || !in_.GetVarint64(&d.counter) ||
          d.counter == 0) {
        return false;
      }
    }
    return true;
  }
  bool Status(absl::Status* s) {
    uint64_t code = 0;
    std::string_view msg;
    if (!in_.GetVarint64(&code) || code > 16 || !Bytes(&msg)) return false;
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
    if (!Bytes(&bytes)) return false;
    absl::StatusOr<bigset::Delta> d = bigset::Delta::Decode(bytes);
    if (!d.ok()) return false;
    *delta = std::move(*d);
    return true;
  }
  bool empty() const { return in_.empty(); }

 private:
  coding::Reader in_;
};

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
  }
  return "Unknown";
}

void Message::EncodeTo(std::string* dst) const {
  if (type == MessageType::kReadChunk) {
    EncodeReadChunk(request_id, partition, seq, done, elements, dst);
    return;
  }
  dst->push_back(static_cast<char>(kFormatVersion));
  dst->push_back(static_cast<char>(type));
  coding::PutVarint64(dst, request_id);
  coding::PutVarint64(dst, partition);
  switch (type) {
    case MessageType::kUpdate:
      PutBytes(dst, set);
      coding::PutVarint64(dst, ops.size());
      for (const UpdateOp& op : ops) {
        dst->push_back(
            static_cast<char>((op.kind == UpdateOp::Kind::kAdd ? 1 : 0) |
                              (op.context_from_replica ? 2 : 0)));
        PutBytes(dst, op.element);
        PutDots(dst, op.context);
      }
      break;
    case MessageType::kUpdateReply:
      PutStatus(dst, status);
      if (status.ok()) PutBytes(dst, delta.Encode());
      break;
    case MessageType::kReplicate:
    case MessageType::kRepair:
      PutBytes(dst, delta.Encode());  // As EncodeDeltaMessage.
      break;
    case MessageType::kReplicateAck:
      PutStatus(dst, status);  // As EncodeStatusReply.
      break;
    case MessageType::kRead:
      PutBytes(dst, set);
      dst->push_back(static_cast<char>(
          (start.has_value() ? 1 : 0) | (end.has_value() ? 2 : 0) |
          (start_inclusive ? 4 : 0) | (end_inclusive ? 8 : 0)));
      if (start.has_value()) PutBytes(dst, *start);
      if (end.has_value()) PutBytes(dst, *end);
      coding::PutVarint64(dst, batch_size);
      break;
    case MessageType::kReadClock:
      PutStatus(dst, status);
      if (status.ok()) PutBytes(dst, clock.Encode());
      break;
    case MessageType::kReadChunk:
      break;  // Handled above.
    case MessageType::kChunkAck:
      coding::PutVarint64(dst, seq);
      break;
    case MessageType::kStopFold:
      break;
    case MessageType::kQuery:
      PutBytes(dst, set);
      coding::PutVarint64(dst, query.size());
      for (const std::string& e : query) PutBytes(dst, e);
      break;
    case MessageType::kQueryReply:
      PutStatus(dst, status);
      if (status.ok()) {
        PutBytes(dst, clock.Encode());
        PutElements(dst, elements);
      }
      break;
  }
}

absl::StatusOr<Message> Message::Decode(std::string_view in) {
  Decoder d(in);
  Message m;
  uint8_t version = 0, type = 0;
  uint64_t partition = 0;
  if (!d.Byte(&version)) return absl::DataLossError("empty message");
  if (version != kFormatVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported message format version ", version));
  }
  if (!d.Byte(&type) || type < 1 || type > 12) {
    return absl::DataLossError("unknown message type");
  }
  m.type = static_cast<MessageType>(type);
  if (!d.Varint(&m.request_id) || !d.Varint(&partition) ||
      partition > UINT32_MAX) {
    return Malformed(m.type, "header");
  }
  m.partition = static_cast<uint32_t>(partition);
  bool ok = true;
  switch (m.type) {
    case MessageType::kUpdate: {
      uint64_t n = 0;
      ok = d.String(&m.set) && d.Count(kMinOpBytes, &n);
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
    case MessageType::kUpdateReply:
      ok = d.Status(&m.status) && (!m.status.ok() || d.Delta(&m.delta));
      break;
    case MessageType::kReplicate:
    case MessageType::kRepair: {
      std::string_view delta;
      MessageHeader h;
      absl::Status s = ParseDeltaMessage(in, &h, &delta);
      if (!s.ok()) return s;
      s = Delta::DecodeInto(delta, &m.delta);
      if (!s.ok()) return Malformed(m.type, s.message());
      return m;
    }
    case MessageType::kReplicateAck:
      ok = d.Status(&m.status);
      break;
    case MessageType::kRead: {
      uint8_t flags = 0;
      uint64_t batch = 0;
      ok = d.String(&m.set) && d.Byte(&flags) && flags <= 15;
      if (!ok) break;
      m.start_inclusive = (flags & 4) != 0;
      m.end_inclusive = (flags & 8) != 0;
      if (flags & 1) ok = ok && d.String(&m.start.emplace());
      if (flags & 2) ok = ok && d.String(&m.end.emplace());
      ok = ok && d.Varint(&batch) && batch >= 1 && batch <= UINT32_MAX;
      m.batch_size = static_cast<uint32_t>(batch);
      break;
    }
    case MessageType::kReadClock:
      ok = d.Status(&m.status) && (!m.status.ok() || d.Clock(&m.clock));
      break;
    case MessageType::kReadChunk: {
      std::string_view elements;
      MessageHeader h;
      absl::Status s = ParseReadChunk(in, &h, &elements);
      if (!s.ok()) return s;
      m.seq = h.seq;
      m.done = h.done;
      s = DecodeChunkElements(elements, &m.elements);
      if (!s.ok()) return s;
      return m;
    }
    case MessageType::kChunkAck:
      ok = d.Varint(&m.seq);
      break;
    case MessageType::kStopFold:
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
           (!m.status.ok() || (d.Clock(&m.clock) && d.Elements(&m.elements)));
      break;
  }
  if (!ok) return Malformed(m.type, "body");
  if (!d.empty()) return Malformed(m.type, "trailing bytes");
  return m;
}

void EncodeReadChunk(uint64_t request_id, uint32_t partition, uint64_t seq,
                     bool done, std::span<const ElementDots> elements,
                     std::string* dst) {
  dst->push_back(static_cast<char>(Message::kFormatVersion));
  dst->push_back(static_cast<char>(MessageType::kReadChunk));
  coding::PutVarint64(dst, request_id);
  coding::PutVarint64(dst, partition);
  coding::PutVarint64(dst, seq);
  dst->push_back(done ? 1 : 0);
  PutElements(dst, elements);
}

absl::Status ParseReadChunk(std::string_view in, MessageHeader* header,
                            std::string_view* elements) {
  coding::Reader r(in);
  uint8_t version = 0, type = 0, done = 0;
  uint64_t partition = 0;
  if (!r.GetByte(&version) || version != Message::kFormatVersion ||
      !r.GetByte(&type) ||
      type != static_cast<uint8_t>(MessageType::kReadChunk) ||
      !r.GetVarint64(&header->request_id) || !r.GetVarint64(&partition) ||
      partition > UINT32_MAX || !r.GetVarint64(&header->seq) ||
      !r.GetByte(&done) || done > 1) {
    return Malformed(MessageType::kReadChunk, "header");
  }
  header->type = MessageType::kReadChunk;
  header->partition = static_cast<uint32_t>(partition);
  header->done = done == 1;
  r.GetBytes(r.remaining(), elements);
  return absl::OkStatus();
}

void EncodeDeltaMessage(MessageType type, uint64_t request_id,
                        uint32_t partition, const Delta& delta,
                        std::string* dst) {
  dst->push_back(static_cast<char>(Message::kFormatVersion));
  dst->push_back(static_cast<char>(type));
  coding::PutVarint64(dst, request_id);
  coding::PutVarint64(dst, partition);
  // Length-prefixed like PutBytes, but encoded in place: the delta is
  // appended, then its length inserted before it (a few bytes moved
  // instead of a temporary string).
  const size_t start = dst->size();
  delta.EncodeTo(dst);
  char len[coding::kMaxVarint64Bytes];
  const size_t n = coding::EncodeVarint64(len, dst->size() - start);
  dst->insert(start, len, n);
}

void EncodeStatusReply(MessageType type, uint64_t request_id,
                       uint32_t partition, const absl::Status& status,
                       std::string* dst) {
  // One append of a stack buffer: an OK reply fits a string's inline
  // storage and allocates nothing.
  char buf[2 + 4 * coding::kMaxVarint64Bytes];
  char* p = buf;
  *p++ = static_cast<char>(Message::kFormatVersion);
  *p++ = static_cast<char>(type);
  p += coding::EncodeVarint64(p, request_id);
  p += coding::EncodeVarint64(p, partition);
  p += coding::EncodeVarint64(p, static_cast<uint64_t>(status.code()));
  const absl::string_view message = status.message();
  p += coding::EncodeVarint64(p, message.size());
  dst->append(buf, static_cast<size_t>(p - buf));
  dst->append(message.data(), message.size());
}

absl::Status ParseStatusReply(std::string_view in, MessageHeader* header,
                              absl::Status* status) {
  Decoder d(in);
  uint8_t version = 0, type = 0;
  uint64_t partition = 0;
  if (!d.Byte(&version) || version != Message::kFormatVersion ||
      !d.Byte(&type) ||
      type != static_cast<uint8_t>(MessageType::kReplicateAck) ||
      !d.Varint(&header->request_id) || !d.Varint(&partition) ||
      partition > UINT32_MAX || !d.Status(status) || !d.empty()) {
    return Malformed(MessageType::kReplicateAck, "reply");
  }
  header->type = MessageType::kReplicateAck;
  header->partition = static_cast<uint32_t>(partition);
  return absl::OkStatus();
}

absl::Status ParseDeltaMessage(std::string_view in, MessageHeader* header,
                               std::string_view* delta) {
  coding::Reader r(in);
  uint8_t version = 0, type = 0;
  uint64_t partition = 0, len = 0;
  if (!r.GetByte(&version) || version != Message::kFormatVersion ||
      !r.GetByte(&type) ||
      (type != static_cast<uint8_t>(MessageType::kReplicate) &&
       type != static_cast<uint8_t>(MessageType::kRepair)) ||
      !r.GetVarint64(&header->request_id) || !r.GetVarint64(&partition) ||
      partition > UINT32_MAX || !r.GetVarint64(&len) || len != r.remaining()) {
    return Malformed(MessageType::kReplicate, "header");
  }
  header->type = static_cast<MessageType>(type);
  header->partition = static_cast<uint32_t>(partition);
  r.GetBytes(r.remaining(), delta);
  return absl::OkStatus();
}

absl::Status DecodeChunkElements(std::string_view in,
                                 std::vector<ElementDots>* out) {
  Decoder d(in);
  if (!d.Elements(out) || !d.empty()) {
    return Malformed(MessageType::kReadChunk, "elements");
  }
  return absl::OkStatus();
}

}  // namespace bigset
