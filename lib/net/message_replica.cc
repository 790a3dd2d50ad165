// The coordinator <-> replica messages, with the hot paths (read chunks,
// replicated deltas and their acknowledgements) that bypass Message.

#include <utility>

#include "net/message.h"
#include "net/message_body.h"

namespace bigset {
namespace msg {

using message_internal::kMinStringBytes;
using message_internal::kMinUpdateOpBytes;
using message_internal::PutBounds;
using message_internal::PutDelta;
using message_internal::PutDots;
using message_internal::PutElements;
using message_internal::PutStatus;

void Update::EncodeBody(std::string* dst) const {
  coding::PutLengthPrefixed(dst, set);
  coding::PutVarint64(dst, ops.size());
  for (const UpdateOp& op : ops) {
    dst->push_back(static_cast<char>((op.kind == UpdateOp::Kind::kAdd ? 1 : 0) |
                                     (op.context_from_replica ? 2 : 0)));
    coding::PutLengthPrefixed(dst, op.element);
    PutDots(dst, op.context);
  }
}

bool Update::DecodeBody(BodyReader* d) {
  uint64_t n = 0;
  if (!d->String(&set) || !d->Count(kMinUpdateOpBytes, &n)) return false;
  ops.resize(static_cast<size_t>(n));
  for (UpdateOp& op : ops) {
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

void Clear::EncodeBody(std::string* dst) const {
  coding::PutLengthPrefixed(dst, set);
  coding::PutLengthPrefixed(dst, clock.Encode());
}

bool Clear::DecodeBody(BodyReader* d) {
  return d->String(&set) && d->Clock(&clock);
}

void UpdateReply::EncodeBody(std::string* dst) const {
  PutStatus(dst, status);
  if (status.ok()) PutDelta(dst, delta);
}

bool UpdateReply::DecodeBody(BodyReader* d) {
  return d->Status(&status) && (!status.ok() || d->Delta(&delta));
}

void Replicate::EncodeBody(std::string* dst) const { PutDelta(dst, delta); }
bool Replicate::DecodeBody(BodyReader* d) { return d->Delta(&delta); }

void ReplicateGivenUp::EncodeBody(std::string* dst) const {
  PutDelta(dst, delta);
}
bool ReplicateGivenUp::DecodeBody(BodyReader* d) { return d->Delta(&delta); }

void Repair::EncodeBody(std::string* dst) const { PutDelta(dst, delta); }
bool Repair::DecodeBody(BodyReader* d) { return d->Delta(&delta); }

void ReplicateAck::EncodeBody(std::string* dst) const {
  PutStatus(dst, status);
  coding::PutVarint64(dst, applied_by);
}

bool ReplicateAck::DecodeBody(BodyReader* d) {
  return d->Status(&status) && d->Node(&applied_by);
}

void ReplicateAckWithDelta::EncodeBody(std::string* dst) const {
  PutDelta(dst, delta);
}
bool ReplicateAckWithDelta::DecodeBody(BodyReader* d) {
  return d->Delta(&delta);
}

void Read::EncodeBody(std::string* dst) const {
  coding::PutLengthPrefixed(dst, set);
  PutBounds(dst, bounds, batch_size);
}

bool Read::DecodeBody(BodyReader* d) {
  return d->String(&set) && d->Bounds(&bounds, &batch_size);
}

void ReadClock::EncodeBody(std::string* dst) const {
  PutStatus(dst, status);
  if (status.ok()) coding::PutLengthPrefixed(dst, clock.Encode());
}

bool ReadClock::DecodeBody(BodyReader* d) {
  return d->Status(&status) && (!status.ok() || d->Clock(&clock));
}

void ReadChunk::EncodeBody(std::string* dst) const {
  coding::PutVarint64(dst, seq);
  dst->push_back(last ? 1 : 0);
  PutElements(dst, elements);
}

bool ReadChunk::DecodeBody(BodyReader* d) {
  uint8_t flag = 0;
  if (!d->Varint(&seq) || !d->Byte(&flag) || flag > 1) return false;
  last = flag == 1;
  return d->Elements(&elements);
}

void ChunkAck::EncodeBody(std::string* dst) const {
  coding::PutVarint64(dst, seq);
}
bool ChunkAck::DecodeBody(BodyReader* d) { return d->Varint(&seq); }

void Query::EncodeBody(std::string* dst) const {
  coding::PutLengthPrefixed(dst, set);
  coding::PutVarint64(dst, elements.size());
  for (const std::string& e : elements) coding::PutLengthPrefixed(dst, e);
}

bool Query::DecodeBody(BodyReader* d) {
  uint64_t n = 0;
  if (!d->String(&set) || !d->Count(kMinStringBytes, &n)) return false;
  elements.resize(static_cast<size_t>(n));
  for (std::string& e : elements) {
    if (!d->String(&e)) return false;
  }
  return true;
}

void QueryReply::EncodeBody(std::string* dst) const {
  PutStatus(dst, status);
  if (status.ok()) {
    coding::PutLengthPrefixed(dst, clock.Encode());
    PutElements(dst, elements);
  }
}

bool QueryReply::DecodeBody(BodyReader* d) {
  if (!d->Status(&status)) return false;
  if (!status.ok()) {
    elements.clear();
    return true;
  }
  return d->Clock(&clock) && d->Elements(&elements);
}

void Count::EncodeBody(std::string* dst) const {
  coding::PutLengthPrefixed(dst, set);
}
bool Count::DecodeBody(BodyReader* d) { return d->String(&set); }

void CountReply::EncodeBody(std::string* dst) const {
  PutStatus(dst, status);
  if (status.ok()) {
    dst->push_back(static_cast<char>(found ? 1 : 0));
    coding::PutVarint64(dst, count);
    coding::PutFixed64BE(dst, set_digest);
    coding::PutFixed64BE(dst, tombstone_digest);
  }
}

bool CountReply::DecodeBody(BodyReader* d) {
  if (!d->Status(&status)) return false;
  if (!status.ok()) return true;
  uint8_t flag = 0;
  if (!d->Byte(&flag) || flag > 1 || !d->Varint(&count) ||
      !d->Fixed64(&set_digest) || !d->Fixed64(&tombstone_digest)) {
    return false;
  }
  found = flag == 1;
  return true;
}

}  // namespace msg

using message_internal::BodyReader;
using message_internal::Malformed;
using message_internal::PutDelta;
using message_internal::PutElements;
using message_internal::PutStatus;

void EncodeReadChunk(const MessageHeader& header, uint64_t seq, bool last,
                     std::span<const ElementDots> elements, std::string* dst) {
  // The bytes of msg::ReadChunk, from a span rather than a vector.
  const size_t start = dst->size();
  EncodeHeader(header, dst);
  coding::PutVarint64(dst, seq);
  dst->push_back(last ? 1 : 0);
  PutElements(dst, elements);
  FinishMessage(start, dst);
}

absl::Status ParseReadChunkBody(std::string_view body, uint64_t* seq,
                                bool* last, std::string_view* elements) {
  BodyReader r(body);
  uint8_t flag = 0;
  if (!r.Varint(seq) || !r.Byte(&flag) || flag > 1) {
    return Malformed(MessageType::kReadChunk, "header");
  }
  *last = flag == 1;
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
  const size_t start = dst->size();
  EncodeHeader(header, dst);
  PutDelta(dst, delta);
  FinishMessage(start, dst);
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
