// Message: every interaction between a coordinator and a replica, with a
// versioned binary wire format.
//
//   coordinator -> replica          replica -> coordinator
//   kUpdate (set, ops)              kUpdateReply (status, delta)
//   kReplicate (delta)              kReplicateAck (status)
//   kRead (set, bounds, batch)      kReadClock (status, clock)
//                                   kReadChunk (seq, elements, done)
//   kChunkAck (seq)
//   kStopFold
//   kQuery (set, elements)          kQueryReply (status, clock, elements)
//   kRepair (delta)                 (none: repairs are idempotent and
//                                    re-found by the next read)
//
// Every message carries the request id its reply is matched by and the ring
// partition (the replica) it is about. Decoding never reads out of bounds
// and returns an error for malformed, truncated or trailing bytes.
//
// Thread-safety: value types.

#ifndef BIGSET_MESSAGE_H_
#define BIGSET_MESSAGE_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bigset/clock.h"
#include "bigset/delta.h"
#include "bigset/element_dots.h"
#include "bigset/export.h"
#include "bigset/replica.h"

namespace bigset {

enum class MessageType : uint8_t {
  kUpdate = 1,
  kUpdateReply = 2,
  kReplicate = 3,
  kReplicateAck = 4,
  kRead = 5,
  kReadClock = 6,
  kReadChunk = 7,
  kChunkAck = 8,
  kStopFold = 9,
  kQuery = 10,
  kQueryReply = 11,
  kRepair = 12,
};

BIGSET_EXPORT const char* MessageTypeName(MessageType type);

// One message. Only the fields of its type are encoded; the others keep
// their defaults after decoding.
struct BIGSET_EXPORT Message {
  static constexpr uint8_t kFormatVersion = 1;

  MessageType type = MessageType::kUpdate;
  uint64_t request_id = 0;
  uint32_t partition = 0;

  // kUpdateReply, kReplicateAck, kReadClock, kQueryReply.
  absl::Status status;
  // kUpdate, kRead, kQuery.
  std::string set;
  // kUpdate.
  std::vector<UpdateOp> ops;
  // kUpdateReply, kReplicate, kRepair.
  Delta delta;
  // kRead: element bounds and chunk size.
  std::optional<std::string> start;
  std::optional<std::string> end;
  bool start_inclusive = true;
  bool end_inclusive = false;
  uint32_t batch_size = 1000;
  // kReadClock, kQueryReply.
  Clock clock;
  // kReadChunk, kChunkAck: chunk sequence number (from 0).
  uint64_t seq = 0;
  // kReadChunk: last chunk of the fold.
  bool done = false;
  // kReadChunk, kQueryReply.
  std::vector<ElementDots> elements;
  // kQuery: the elements asked about.
  std::vector<std::string> query;

  void EncodeTo(std::string* dst) const;
  std::string Encode() const {
    std::string s;
    EncodeTo(&s);
    return s;
  }
  static absl::StatusOr<Message> Decode(std::string_view in);
};

// The fixed part of a message, all the hot paths below decode: they skip
// constructing a whole Message (a Delta, a Clock, vectors) per message.
struct MessageHeader {
  MessageType type = MessageType::kUpdate;
  uint64_t request_id = 0;
  uint32_t partition = 0;
  uint64_t seq = 0;   // kReadChunk only.
  bool done = false;  // kReadChunk only.
};

// The hot path of streaming reads, without a Message per chunk.
//
// Appends a kReadChunk message of `elements` to *dst.
BIGSET_EXPORT void EncodeReadChunk(uint64_t request_id, uint32_t partition,
                                   uint64_t seq, bool done,
                                   std::span<const ElementDots> elements,
                                   std::string* dst);
// Decodes the header of a kReadChunk message into *header (type, request
// id, partition, seq, done) and points *elements at its undecoded elements.
BIGSET_EXPORT absl::Status ParseReadChunk(std::string_view in,
                                          MessageHeader* header,
                                          std::string_view* elements);
// The hot path of replication, likewise without a Message per delta:
// decodes the header of a kReplicate or kRepair message into *header and
// points *delta at its encoded Delta (see Delta::DecodeInto).
BIGSET_EXPORT absl::Status ParseDeltaMessage(std::string_view in,
                                             MessageHeader* header,
                                             std::string_view* delta);
// Appends a kReplicate or kRepair message carrying `delta` to *dst.
BIGSET_EXPORT void EncodeDeltaMessage(MessageType type, uint64_t request_id,
                                      uint32_t partition, const Delta& delta,
                                      std::string* dst);
// Replies that carry only a status (kReplicateAck): encoded and decoded
// without a Message; ParseStatusReply stores the carried status in
// *status.
BIGSET_EXPORT void EncodeStatusReply(MessageType type, uint64_t request_id,
                                     uint32_t partition,
                                     const absl::Status& status,
                                     std::string* dst);
BIGSET_EXPORT absl::Status ParseStatusReply(std::string_view in,
                                            MessageHeader* header,
                                            absl::Status* status);
// Decodes the elements of a chunk into *out, reusing the strings and
// vectors already in it (a steady stream allocates nothing).
BIGSET_EXPORT absl::Status DecodeChunkElements(std::string_view in,
                                               std::vector<ElementDots>* out);

}  // namespace bigset

#endif  // BIGSET_MESSAGE_H_
