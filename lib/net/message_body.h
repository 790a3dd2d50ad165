// The pieces every message codec shares (internal to lib/net): the field
// writers and the bounds-checked body reader. The structs' codecs, one
// source file per protocol:
//
//   message.cc               header, checksum, names, EncodeMessage and
//                            DecodeMessageInto (by type), logs
//   message_body.cc          the field writers and BodyReader
//   message_replica.cc       coordinator <-> replica (and the hot paths:
//                            read chunks, deltas, their acknowledgements)
//   message_membership.cc    hand-off and membership
//   message_anti_entropy.cc  anti-entropy
//
// Thread-safety: stateless functions; a BodyReader is used by one thread.

#ifndef BIGSET_LIB_NET_MESSAGE_BODY_H_
#define BIGSET_LIB_NET_MESSAGE_BODY_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "core/coding.h"
#include "net/message.h"

namespace bigset {
namespace message_internal {

// Smallest encodings, to bound counts by the input before allocating.
inline constexpr size_t kMinElementBytes = 2;   // empty element, no dots
inline constexpr size_t kMinUpdateOpBytes = 3;  // flags, element length,
                                                // context size
inline constexpr size_t kMinStringBytes = 1;
// absl::StatusCode values are 0..16.
inline constexpr uint64_t kMaxStatusCode = 16;

// Field writers: append to *dst.
void PutDots(std::string* dst, std::span<const Dot> dots);
void PutStatus(std::string* dst, const absl::Status& s);
// Set summaries: varint n, then per summary: bytes set, fixed64 digest,
// fixed64 keys digest, u8 flags (bit 0: tombstone empty), and with clocks
// bytes clock.
void PutSummaries(std::string* dst, std::span<const SetSummary> summaries,
                  bool with_clocks);
void PutElements(std::string* dst, std::span<const ElementDots> elements);
// Node states (membership): varint n, then per state: varint node, varint
// version, varint count, and per entry varint partition (ascending), since,
// took_from, took_since, handing_to, u8 departed.
void PutStates(std::string* dst, std::span<const NodeServing> states);
void PutBounds(std::string* dst, const ElementBounds& b, uint32_t batch_size);
// A delta, length-prefixed, encoded in place (no temporary string).
void PutDelta(std::string* dst, const bigset::Delta& delta);

// DataLoss naming the message type and what was wrong.
absl::Status Malformed(MessageType type, std::string_view what);

// Reads the fields of a message body. Every method returns false on
// malformed or truncated input; allocations are bounded by the input.
class BodyReader {
 public:
  explicit BodyReader(std::string_view in) : in_(in) {}

  bool Byte(uint8_t* v) { return in_.GetByte(v); }
  bool Varint(uint64_t* v) { return in_.GetVarint64(v); }
  bool Fixed64(uint64_t* v) { return in_.GetFixed64BE(v); }
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
  bool Node(NodeId* node);
  bool Dots(std::vector<Dot>* dots);
  bool Status(absl::Status* s);
  bool Elements(std::vector<ElementDots>* elements);
  bool Clock(bigset::Clock* clock);
  bool Delta(bigset::Delta* delta);
  bool Bounds(ElementBounds* b, uint32_t* batch_size);
  bool Summaries(std::vector<SetSummary>* out, bool with_clocks);
  // Also checks the states' order: ascending by (partition, since), at most
  // one entry that is not departed per partition.
  bool States(std::vector<NodeServing>* out);

  bool empty() const { return in_.empty(); }
  std::string_view rest() const {
    return std::string_view(in_.position(), in_.remaining());
  }

 private:
  coding::Reader in_;
};

}  // namespace message_internal
}  // namespace bigset

#endif  // BIGSET_LIB_NET_MESSAGE_BODY_H_
