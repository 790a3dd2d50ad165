#include "net/message.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "bigset/net/transport.h"
#include "core/coding.h"
#include "core/crc32c.h"
#include "core/string_view_compat.h"
#include "net/message_body.h"

namespace bigset {

using message_internal::BodyReader;
using message_internal::Malformed;
using message_internal::MessageProtocol;

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

namespace message_internal {

MessageProtocol ProtocolOf(MessageType type) {
  switch (type) {
    case MessageType::kUpdate:
    case MessageType::kUpdateReply:
    case MessageType::kClear:
    case MessageType::kReplicate:
    case MessageType::kReplicateAck:
    case MessageType::kReplicateGivenUp:
    case MessageType::kReplicateAckWithDelta:
    case MessageType::kRead:
    case MessageType::kReadClock:
    case MessageType::kReadChunk:
    case MessageType::kChunkAck:
    case MessageType::kStopFold:
    case MessageType::kKeepFold:
    case MessageType::kQuery:
    case MessageType::kQueryReply:
    case MessageType::kRepair:
    case MessageType::kCount:
    case MessageType::kCountReply:
      return MessageProtocol::kReplica;
    case MessageType::kTransferChunk:
    case MessageType::kTransferAck:
    case MessageType::kHandoffDelta:
    case MessageType::kHandoffDeltaAck:
    case MessageType::kHandoffDone:
    case MessageType::kHandoffDoneAck:
    case MessageType::kRingEpoch:
    case MessageType::kMembership:
      return MessageProtocol::kMembership;
    case MessageType::kAeDigest:
    case MessageType::kAeDigestReply:
    case MessageType::kAeSets:
    case MessageType::kAeSetsReply:
    case MessageType::kAePull:
    case MessageType::kAePush:
    case MessageType::kAePushAck:
      return MessageProtocol::kAntiEntropy;
  }
  return MessageProtocol::kReplica;
}

}  // namespace message_internal

void Message::EncodeTo(std::string* dst) const {
  // The hot messages have encoders of their own (used without a Message).
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
  switch (message_internal::ProtocolOf(header.type)) {
    case MessageProtocol::kReplica:
      message_internal::EncodeReplicaBody(*this, dst);
      break;
    case MessageProtocol::kMembership:
      message_internal::EncodeMembershipBody(*this, dst);
      break;
    case MessageProtocol::kAntiEntropy:
      message_internal::EncodeAntiEntropyBody(*this, dst);
      break;
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
  std::string_view body;
  absl::Status s = ParseHeader(in, &m.header, &body);
  if (!s.ok()) return s;
  switch (m.header.type) {
    case MessageType::kReplicate:
    case MessageType::kReplicateGivenUp:
    case MessageType::kRepair:
    case MessageType::kHandoffDelta: {
      std::string_view delta;
      s = ParseDeltaBody(body, &delta);
      if (!s.ok()) return s;
      s = Delta::DecodeInto(delta, &m.delta);
      if (!s.ok()) return Malformed(m.header.type, ToStd(s.message()));
      return absl::OkStatus();
    }
    case MessageType::kReplicateAck:
    case MessageType::kHandoffDeltaAck:
      return ParseStatusBody(body, &m.status, &m.applied_by);
    case MessageType::kReadChunk: {
      std::string_view chunk;
      s = ParseReadChunkBody(body, &m.seq, &m.done, &chunk);
      if (!s.ok()) return s;
      m.elements = std::move(spare);
      return DecodeChunkElements(chunk, &m.elements);
    }
    default:
      break;
  }
  BodyReader d(body);
  bool ok = false;
  switch (message_internal::ProtocolOf(m.header.type)) {
    case MessageProtocol::kReplica:
      ok = message_internal::DecodeReplicaBody(&d, &m, &spare);
      break;
    case MessageProtocol::kMembership:
      ok = message_internal::DecodeMembershipBody(&d, &m, &spare);
      break;
    case MessageProtocol::kAntiEntropy:
      ok = message_internal::DecodeAntiEntropyBody(&d, &m, &spare);
      break;
  }
  if (!ok) return Malformed(m.header.type, "body");
  if (!d.empty()) return Malformed(m.header.type, "trailing bytes");
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
