// The hot paths of the coordinator <-> replica messages (read chunks,
// replicated deltas and their acknowledgements): the same fields as their
// structs (net/replica_messages.h), without building one per message.

#include "net/message.h"
#include "net/message_archive.h"

namespace bigset {

using message_internal::BodyReader;
using message_internal::BodyWriter;
using message_internal::Malformed;

void EncodeReadChunk(const MessageHeader& header, uint64_t seq, bool last,
                     std::span<const ElementDots> elements, std::string* dst) {
  const size_t start = dst->size();
  EncodeHeader(header, dst);
  BodyWriter w(dst);
  msg::ReadChunk::Fields(w, seq, last, elements);
  FinishMessage(start, dst);
}

absl::Status ParseReadChunkBody(std::string_view body, uint64_t* seq,
                                bool* last, std::string_view* elements) {
  BodyReader r(body);
  if (!msg::ReadChunk::Fields(r, *seq, *last, *elements)) {
    return Malformed(MessageType::kReadChunk, "header");
  }
  return absl::OkStatus();
}

absl::Status DecodeChunkElements(std::string_view in,
                                 std::vector<ElementDots>* out) {
  BodyReader r(in);
  if (!r.Elements(*out) || !r.empty()) {
    return Malformed(MessageType::kReadChunk, "elements");
  }
  return absl::OkStatus();
}

void EncodeDeltaMessage(const MessageHeader& header, const Delta& delta,
                        std::string* dst) {
  const size_t start = dst->size();
  EncodeHeader(header, dst);
  BodyWriter w(dst);
  w.Delta(delta);
  FinishMessage(start, dst);
}

absl::Status ParseDeltaBody(std::string_view body, std::string_view* delta) {
  BodyReader r(body);
  if (!r.Delta(*delta) || !r.empty()) {
    return Malformed(MessageType::kReplicate, "body");
  }
  return absl::OkStatus();
}

void EncodeStatusReply(const MessageHeader& header, const absl::Status& status,
                       NodeId applied_by, const msg::PlaceTaken& taken,
                       std::string* dst) {
  const size_t start = dst->size();
  EncodeHeader(header, dst);
  BodyWriter w(dst);
  msg::ReplicateAck::Fields(w, status, applied_by, taken);
  FinishMessage(start, dst);
}

absl::Status ParseStatusBody(std::string_view body, absl::Status* status,
                             NodeId* applied_by, msg::PlaceTaken* taken) {
  BodyReader r(body);
  if (!msg::ReplicateAck::Fields(r, *status, *applied_by, *taken) ||
      !r.empty()) {
    return Malformed(MessageType::kReplicateAck, "body");
  }
  return absl::OkStatus();
}

}  // namespace bigset
