#include "net/message.h"

#include <array>
#include <concepts>
#include <cstddef>
#include <type_traits>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "bigset/net/transport.h"
#include "core/coding.h"
#include "core/crc32c.h"
#include "net/message_archive.h"

namespace bigset {

using message_internal::BodyReader;
using message_internal::Malformed;

namespace {

// Checks, at compile time, that alternative i of MessageBody is the struct
// of MessageType i+1, and builds the tables indexed by type.
template <size_t... I>
constexpr bool AlternativesInTypeOrder(std::index_sequence<I...>) {
  return ((static_cast<size_t>(
               std::variant_alternative_t<I, MessageBody>::kType) == I + 1) &&
          ...);
}
constexpr size_t kBodies = std::variant_size_v<MessageBody>;
static_assert(kBodies == kMaxMessageType);
static_assert(AlternativesInTypeOrder(std::make_index_sequence<kBodies>()));

// By type - 1, as MessageType names them.
constexpr std::array<const char*, kBodies> kNames = {"Update",
                                                     "UpdateReply",
                                                     "Replicate",
                                                     "ReplicateAck",
                                                     "Read",
                                                     "ReadClock",
                                                     "ReadChunk",
                                                     "ChunkAck",
                                                     "StopFold",
                                                     "Query",
                                                     "QueryReply",
                                                     "Repair",
                                                     "KeepFold",
                                                     "Clear",
                                                     "ReplicateGivenUp",
                                                     "ReplicateAckWithDelta",
                                                     "TransferChunk",
                                                     "TransferAck",
                                                     "HandoffDelta",
                                                     "HandoffDeltaAck",
                                                     "HandoffDone",
                                                     "HandoffDoneAck",
                                                     "RingEpoch",
                                                     "AeDigest",
                                                     "AeDigestReply",
                                                     "AeSets",
                                                     "AeSetsReply",
                                                     "AePull",
                                                     "AePush",
                                                     "AePushAck",
                                                     "Membership",
                                                     "Count",
                                                     "CountReply"};

// A body whose `elements` are a chunk's (storage worth reusing).
template <typename Body>
concept HasChunkElements = requires(Body b) {
  { b.elements } -> std::same_as<std::vector<ElementDots>&>;
};

// The element storage of whatever *body holds (empty if its type has no
// elements), for the next body to reuse.
std::vector<ElementDots> TakeElements(MessageBody* body) {
  return std::visit(
      [](auto& b) -> std::vector<ElementDots> {
        if constexpr (HasChunkElements<std::decay_t<decltype(b)>>) {
          return std::move(b.elements);
        } else {
          return {};
        }
      },
      *body);
}

// Decodes a body of alternative I into *out, a fresh struct that reuses the
// element storage *out held, whatever its type (chunks of hand-offs and
// pushes may interleave).
template <size_t I>
bool DecodeAlternative(BodyReader* d, MessageBody* out) {
  using Body = std::variant_alternative_t<I, MessageBody>;
  if constexpr (HasChunkElements<Body>) {
    std::vector<ElementDots> spare = TakeElements(out);
    Body& body = out->template emplace<Body>();
    body.elements = std::move(spare);
    return Body::Fields(*d, body);
  } else {
    return Body::Fields(*d, out->template emplace<Body>());
  }
}

using DecodeFn = bool (*)(BodyReader*, MessageBody*);
template <size_t... I>
constexpr std::array<DecodeFn, kBodies> Decoders(std::index_sequence<I...>) {
  return {&DecodeAlternative<I>...};
}
constexpr std::array<DecodeFn, kBodies> kDecoders =
    Decoders(std::make_index_sequence<kBodies>());

}  // namespace

const char* MessageTypeName(MessageType type) {
  const size_t t = static_cast<size_t>(type);
  return t >= 1 && t <= kBodies ? kNames[t - 1] : "Unknown";
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

std::string EncodeMessage(const Message& m) {
  return std::visit(
      [&m](const auto& body) {
        return EncodeMessage(m.header.request_id, m.header.partition, body);
      },
      m.body);
}

absl::StatusOr<Message> DecodeMessage(std::string_view in) {
  Message m;
  absl::Status s = DecodeMessageInto(in, &m);
  if (!s.ok()) return s;
  return m;
}

absl::Status DecodeMessageInto(std::string_view in, Message* out) {
  MessageHeader header;
  std::string_view body;
  absl::Status s = ParseHeader(in, &header, &body);
  if (!s.ok()) {
    *out = Message();
    return s;
  }
  out->header = header;
  BodyReader d(body);
  const MessageType type = header.type;
  if (!kDecoders[static_cast<size_t>(type) - 1](&d, &out->body)) {
    return Malformed(type, "body");
  }
  if (!d.empty()) return Malformed(type, "trailing bytes");
  return absl::OkStatus();
}

bool IsAnswerMessage(std::string_view bytes) {
  // The header's first two bytes: format version, type (EncodeHeader).
  if (bytes.size() < 2 ||
      static_cast<uint8_t>(bytes[0]) != kMessageFormatVersion) {
    return false;
  }
  switch (static_cast<MessageType>(static_cast<uint8_t>(bytes[1]))) {
    case MessageType::kUpdateReply:
    case MessageType::kReplicateAck:
    case MessageType::kReplicateAckWithDelta:
    case MessageType::kReadClock:
    case MessageType::kReadChunk:
    case MessageType::kChunkAck:  // Asks for the next chunk of an answer.
    case MessageType::kQueryReply:
    case MessageType::kCountReply:
    case MessageType::kTransferAck:
    case MessageType::kHandoffDeltaAck:
    case MessageType::kHandoffDoneAck:
    case MessageType::kAeDigestReply:
    case MessageType::kAeSetsReply:
    case MessageType::kAePushAck:
      return true;
    default:
      return false;
  }
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
  const bool described = header.type == MessageType::kHandoffDone ||
                         header.type == MessageType::kHandoffDoneAck ||
                         header.type == MessageType::kTransferAck ||
                         header.type == MessageType::kMembership;
  if (!described) return out;
  absl::StatusOr<Message> m = DecodeMessage(bytes);
  if (!m.ok()) return out;
  if (const auto* ack = m->As<msg::TransferAck>()) {
    absl::StrAppend(&out, " set#", ack->index, " seq ", ack->seq, " inc ",
                    ack->incarnation);
    if (!ack->status.ok()) {
      absl::StrAppend(&out, " ", absl::StatusCodeToString(ack->status.code()));
    }
  } else if (const auto* gossip = m->As<msg::Membership>()) {
    absl::StrAppend(&out, " epoch ", gossip->epoch, " versions ",
                    gossip->versions.size(), ", states");
    for (const NodeServing& st : gossip->states) {
      absl::StrAppend(&out, " ", st.node, "@", st.version);
    }
  } else if (const auto* done = m->As<msg::HandoffDone>()) {
    absl::StrAppend(&out, " ", done->from_node, "->", done->to_node,
                    " episode ", done->episode,
                    done->supplement ? " supplement" : "");
  } else if (const auto* done_ack = m->As<msg::HandoffDoneAck>()) {
    absl::StrAppend(&out, " ", done_ack->from_node, "->", done_ack->to_node);
    if (!done_ack->status.ok()) {
      absl::StrAppend(&out, " ",
                      absl::StatusCodeToString(done_ack->status.code()));
    }
  }
  return out;
}

}  // namespace bigset
