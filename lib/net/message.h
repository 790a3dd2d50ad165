// The wire format of every message between nodes: the one codec of the
// cluster's protocols (docs/FORMATS.md, "Messages"). Internal header: an
// embedder's transport only moves the bytes, and node.h is the API.
//
// One struct per message type, each field with one meaning, by protocol:
// net/replica_messages.h (coordinator <-> replica), net/membership_messages.h
// (hand-off and membership), net/anti_entropy_messages.h. A protocol sends
// one with EncodeMessage(request_id, partition, body) and receives it
// through the node's dispatcher, which decodes the bytes into a Message (a
// header and the body of its type) and hands the handler of that type its
// struct.
//
// Every message starts with the same header: format version, type, request
// id (matches replies to requests) and ring partition (the replica it is
// about), and ends with a CRC32C of everything before it, so that a message
// truncated or corrupted in flight is rejected rather than misread. The
// framing is written by EncodeHeader/FinishMessage and read by ParseHeader
// only; nothing else in the library reads raw message bytes. Decoding never
// reads out of bounds, bounds every allocation by the input's size, and
// returns an error for malformed, truncated or trailing bytes.
//
// Thread-safety: value types and stateless functions.

#ifndef BIGSET_LIB_NET_MESSAGE_H_
#define BIGSET_LIB_NET_MESSAGE_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bigset/core/delta.h"
#include "bigset/core/element_dots.h"
#include "bigset/net/transport.h"
#include "net/anti_entropy_messages.h"
#include "net/membership_messages.h"
#include "net/message_archive.h"
#include "net/message_type.h"
#include "net/replica_messages.h"

namespace bigset {

// The fixed part of every message.
struct MessageHeader {
  MessageType type = MessageType::kUpdate;
  uint64_t request_id = 0;
  uint32_t partition = 0;
};

// Appends the header of a message to *dst. The message starts at `start`
// in *dst; once its body is appended, FinishMessage appends its checksum.
void EncodeHeader(const MessageHeader& header, std::string* dst);
void FinishMessage(size_t start, std::string* dst);
// Checks the checksum of message `in`, parses its header into *header and
// points *body at the rest (without the checksum). DataLoss for a bad
// checksum or malformed bytes, InvalidArgument for another format version.
absl::Status ParseHeader(std::string_view in, MessageHeader* header,
                         std::string_view* body);

// The body of any message: alternative i is the struct of MessageType i+1.
using MessageBody = std::variant<
    msg::Update, msg::UpdateReply, msg::Replicate, msg::ReplicateAck, msg::Read,
    msg::ReadClock, msg::ReadChunk, msg::ChunkAck, msg::StopFold, msg::Query,
    msg::QueryReply, msg::Repair, msg::KeepFold, msg::Clear,
    msg::ReplicateGivenUp, msg::ReplicateAckWithDelta, msg::TransferChunk,
    msg::TransferAck, msg::HandoffDelta, msg::HandoffDeltaAck, msg::HandoffDone,
    msg::HandoffDoneAck, msg::RingEpoch, msg::AeDigest, msg::AeDigestReply,
    msg::AeSets, msg::AeSetsReply, msg::AePull, msg::AePush, msg::AePushAck,
    msg::Membership, msg::Count, msg::CountReply>;

// A decoded message: its header (whose type is the body's) and its body.
struct Message {
  MessageHeader header;
  MessageBody body;

  MessageType type() const { return header.type; }
  // The body as `Body`; nullptr if the message is of another type.
  template <typename Body>
  Body* As() {
    return std::get_if<Body>(&body);
  }
  template <typename Body>
  const Body* As() const {
    return std::get_if<Body>(&body);
  }
};

// Appends message `body` (of type Body::kType) about `partition`, answering
// or asking `request_id`, to *dst.
template <typename Body>
void EncodeMessageTo(uint64_t request_id, uint32_t partition, const Body& body,
                     std::string* dst) {
  const size_t start = dst->size();
  EncodeHeader(MessageHeader{Body::kType, request_id, partition}, dst);
  message_internal::EncodeBody(body, dst);
  FinishMessage(start, dst);
}
template <typename Body>
std::string EncodeMessage(uint64_t request_id, uint32_t partition,
                          const Body& body) {
  std::string s;
  EncodeMessageTo(request_id, partition, body, &s);
  return s;
}
// The same for a decoded message (with the body's type, whatever
// m.header.type says).
std::string EncodeMessage(const Message& m);

absl::StatusOr<Message> DecodeMessage(std::string_view in);
// The same into *out, which it replaces whole (also on error, when *out is
// left a valid message whose header names its body's type). The element
// storage of the body *out held (of any type with elements) is reused: a
// receiver of many chunks decodes them without allocating per element.
absl::Status DecodeMessageInto(std::string_view in, Message* out);

// ---- Hot paths: the bulk of the traffic, without a struct per message.

// ReadChunk: sequence number, last-chunk flag, then the elements.
void EncodeReadChunk(const MessageHeader& header, uint64_t seq, bool last,
                     std::span<const ElementDots> elements, std::string* dst);
// Parses a ReadChunk body (after ParseHeader); *elements points at its
// still encoded elements (see DecodeChunkElements).
absl::Status ParseReadChunkBody(std::string_view body, uint64_t* seq,
                                bool* last, std::string_view* elements);
// Decodes the elements of a chunk into *out, reusing the strings and
// vectors already in it (a steady stream allocates nothing). On error *out
// is unspecified.
absl::Status DecodeChunkElements(std::string_view in,
                                 std::vector<ElementDots>* out);

// Replicate, ReplicateGivenUp, Repair and HandoffDelta (header.type says
// which): the encoded Delta, length-prefixed.
void EncodeDeltaMessage(const MessageHeader& header, const Delta& delta,
                        std::string* dst);
// Points *delta at the encoded Delta of such a body (see Delta::DecodeInto).
absl::Status ParseDeltaBody(std::string_view body, std::string_view* delta);

// Acknowledgements of deltas (ReplicateAck, HandoffDeltaAck; header.type
// says which): a status, the node that applied the delta, and the place
// that node took (msg::PlaceTaken; absent from the bytes when none).
void EncodeStatusReply(const MessageHeader& header, const absl::Status& status,
                       NodeId applied_by, const msg::PlaceTaken& taken,
                       std::string* dst);
absl::Status ParseStatusBody(std::string_view body, absl::Status* status,
                             NodeId* applied_by, msg::PlaceTaken* taken);

}  // namespace bigset

#endif  // BIGSET_LIB_NET_MESSAGE_H_
