// The coordinator <-> replica messages, with the hot paths (read chunks,
// replicated deltas and their acknowledgements) that bypass Message.

#include <utility>

#include "net/message.h"
#include "net/message_body.h"

namespace bigset {
namespace message_internal {

void EncodeReplicaBody(const Message& m, std::string* dst) {
  switch (m.type()) {
    case MessageType::kUpdate:
      coding::PutLengthPrefixed(dst, m.set);
      coding::PutVarint64(dst, m.ops.size());
      for (const UpdateOp& op : m.ops) {
        dst->push_back(
            static_cast<char>((op.kind == UpdateOp::Kind::kAdd ? 1 : 0) |
                              (op.context_from_replica ? 2 : 0)));
        coding::PutLengthPrefixed(dst, op.element);
        PutDots(dst, op.context);
      }
      break;
    case MessageType::kClear:
      coding::PutLengthPrefixed(dst, m.set);
      coding::PutLengthPrefixed(dst, m.clock.Encode());
      break;
    case MessageType::kUpdateReply:
      PutStatus(dst, m.status);
      if (m.status.ok()) coding::PutLengthPrefixed(dst, m.delta.Encode());
      break;
    case MessageType::kReplicateAckWithDelta:
      coding::PutLengthPrefixed(dst, m.delta.Encode());
      break;
    case MessageType::kRead:
      coding::PutLengthPrefixed(dst, m.set);
      PutBounds(dst, m.bounds, m.batch_size);
      break;
    case MessageType::kReadClock:
      PutStatus(dst, m.status);
      if (m.status.ok()) coding::PutLengthPrefixed(dst, m.clock.Encode());
      break;
    case MessageType::kChunkAck:
      coding::PutVarint64(dst, m.seq);
      break;
    case MessageType::kQuery:
      coding::PutLengthPrefixed(dst, m.set);
      coding::PutVarint64(dst, m.query.size());
      for (const std::string& e : m.query) coding::PutLengthPrefixed(dst, e);
      break;
    case MessageType::kQueryReply:
      PutStatus(dst, m.status);
      if (m.status.ok()) {
        coding::PutLengthPrefixed(dst, m.clock.Encode());
        PutElements(dst, m.elements);
      }
      break;
    case MessageType::kCount:
      coding::PutLengthPrefixed(dst, m.set);
      break;
    case MessageType::kCountReply:
      PutStatus(dst, m.status);
      if (m.status.ok()) {
        dst->push_back(static_cast<char>(m.found ? 1 : 0));
        coding::PutVarint64(dst, m.count);
        coding::PutFixed64BE(dst, m.digest);
        coding::PutFixed64BE(dst, m.tombstone_digest);
      }
      break;
    default:  // kStopFold, kKeepFold: no body.
      break;
  }
}

namespace {

bool DecodeUpdate(BodyReader* d, Message* m) {
  uint64_t n = 0;
  if (!d->String(&m->set) || !d->Count(kMinUpdateOpBytes, &n)) return false;
  m->ops.resize(static_cast<size_t>(n));
  for (UpdateOp& op : m->ops) {
    uint8_t flags = 0;
    if (!d->Byte(&flags) || flags > 3 || !d->String(&op.element) ||
        !d->Dots(&op.context)) {
      return false;
    }
    op.kind = (flags & 1) ? UpdateOp::Kind::kAdd : UpdateOp::Kind::kRemove;
    op.context_from_replica = (flags & 2) != 0;
  }
  return true;
}

bool DecodeQuery(BodyReader* d, Message* m) {
  uint64_t n = 0;
  if (!d->String(&m->set) || !d->Count(kMinStringBytes, &n)) return false;
  m->query.resize(static_cast<size_t>(n));
  for (std::string& e : m->query) {
    if (!d->String(&e)) return false;
  }
  return true;
}

bool DecodeCountReply(BodyReader* d, Message* m) {
  if (!d->Status(&m->status)) return false;
  if (!m->status.ok()) return true;
  uint8_t found = 0;
  if (!d->Byte(&found) || found > 1 || !d->Varint(&m->count) ||
      !d->Fixed64(&m->digest) || !d->Fixed64(&m->tombstone_digest)) {
    return false;
  }
  m->found = found == 1;
  return true;
}

}  // namespace

bool DecodeReplicaBody(BodyReader* d, Message* m,
                       std::vector<ElementDots>* spare) {
  switch (m->type()) {
    case MessageType::kUpdate:
      return DecodeUpdate(d, m);
    case MessageType::kClear:
      return d->String(&m->set) && d->Clock(&m->clock);
    case MessageType::kUpdateReply:
      return d->Status(&m->status) && (!m->status.ok() || d->Delta(&m->delta));
    case MessageType::kReplicateAckWithDelta:
      return d->Delta(&m->delta);
    case MessageType::kRead:
      return d->String(&m->set) && d->Bounds(&m->bounds, &m->batch_size);
    case MessageType::kReadClock:
      return d->Status(&m->status) && (!m->status.ok() || d->Clock(&m->clock));
    case MessageType::kChunkAck:
      return d->Varint(&m->seq);
    case MessageType::kQuery:
      return DecodeQuery(d, m);
    case MessageType::kQueryReply:
      if (!d->Status(&m->status)) return false;
      if (!m->status.ok()) return true;
      m->elements = std::move(*spare);
      return d->Clock(&m->clock) && d->Elements(&m->elements);
    case MessageType::kCount:
      return d->String(&m->set);
    case MessageType::kCountReply:
      return DecodeCountReply(d, m);
    default:  // kStopFold, kKeepFold: no body.
      return true;
  }
}

}  // namespace message_internal

using message_internal::BodyReader;
using message_internal::Malformed;
using message_internal::PutElements;
using message_internal::PutStatus;

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

}  // namespace bigset
