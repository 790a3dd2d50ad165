// The two archives every message body goes through (internal to lib/net):
// BodyWriter appends fields to a string, BodyReader reads them back from
// bytes. They offer the same field methods, so that a message is defined
// once, by a template that names its fields in order:
//
//   template <typename Ar, typename Self>
//   static bool Fields(Ar& ar, Self& m) {
//     return ar.String(m.set) && ar.Status(m.status) &&
//            (!m.status.ok() || ar.Clock(m.clock));
//   }
//
// With a BodyWriter (Self const) every method appends and returns true; with
// a BodyReader every method fills its argument and returns false on
// malformed or truncated bytes, so the same expression encodes and decodes
// the same bytes. A condition on a field already read (the status above)
// holds for both. Archive::kReading says which one a template has, for the
// few fields packed into flag bits.
//
// The wire encoding of each field (docs/FORMATS.md, "Messages"):
//   Varint, U32, Node  varint (U32 and Node at most 2^32 - 1)
//   Fixed64            8 bytes, big-endian
//   Bool, Bits         one byte: 0/1, or two flags in bits 0 and 1
//   String             varint length, bytes
//   Status             varint code (0..16), String message
//   Clock              String of the clock's encoding
//   Delta              String of the delta's encoding
//   Dot                8-byte actor, varint counter
//   Seq                varint count, then each item
//   Elements           Seq of (String element, Seq of Dot)
//   Bounds             u8 flags (1 start, 2 end, 4 start inclusive, 8 end
//                      inclusive), String start, String end (when present),
//                      varint batch size (>= 1, < 2^32)
//
// Decoding never reads out of bounds and bounds every allocation by the
// input's size (a count is refused when the bytes left cannot hold that many
// items of their smallest encoding).
//
// Thread-safety: an archive is used by one thread.

#ifndef BIGSET_LIB_NET_MESSAGE_ARCHIVE_H_
#define BIGSET_LIB_NET_MESSAGE_ARCHIVE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "bigset/core/clock.h"
#include "bigset/core/delta.h"
#include "bigset/core/dot.h"
#include "bigset/core/element_bounds.h"
#include "bigset/core/element_dots.h"
#include "bigset/net/transport.h"
#include "core/coding.h"
#include "net/message_type.h"

namespace bigset {
namespace message_internal {

// Smallest encodings, to bound counts by the input before allocating.
inline constexpr size_t kMinElementBytes = 2;  // empty element, no dots
inline constexpr size_t kMinStringBytes = 1;
inline constexpr size_t kMinDotBytes = coding::kMinDotBytes;
// Flags, element length, context size.
inline constexpr size_t kMinUpdateOpBytes = 3;
// absl::StatusCode values are 0..16.
inline constexpr uint64_t kMaxStatusCode = 16;

// DataLoss naming the message type and what was wrong.
absl::Status Malformed(MessageType type, std::string_view what);

// Appends fields to *dst (not owned; must outlive the writer).
class BodyWriter {
 public:
  static constexpr bool kReading = false;

  explicit BodyWriter(std::string* dst) : dst_(dst) {}

  bool Varint(uint64_t v) {
    coding::PutVarint64(dst_, v);
    return true;
  }
  bool U32(uint32_t v) { return Varint(v); }
  bool Node(NodeId v) { return Varint(v); }
  bool Fixed64(uint64_t v) {
    coding::PutFixed64BE(dst_, v);
    return true;
  }
  bool Bool(bool v) {
    dst_->push_back(static_cast<char>(v ? 1 : 0));
    return true;
  }
  bool Bits(bool bit0, bool bit1) {
    dst_->push_back(static_cast<char>((bit0 ? 1 : 0) | (bit1 ? 2 : 0)));
    return true;
  }
  bool String(std::string_view v) {
    coding::PutLengthPrefixed(dst_, v);
    return true;
  }
  bool Dot(const bigset::Dot& d) {
    coding::PutDot(dst_, d.actor, d.counter);
    return true;
  }
  bool Status(const absl::Status& s);
  bool Clock(const bigset::Clock& c) { return String(c.Encode()); }
  // Encoded in place, its length inserted before it (no temporary).
  bool Delta(const bigset::Delta& delta);
  // The hot path of every chunk: one resize, then raw copies.
  bool Elements(std::span<const ElementDots> elements);
  bool Bounds(const ElementBounds& b, uint32_t batch_size);

  // A count, then `each(item)` for every item of `items`. min_bytes is the
  // reader's bound (unused here).
  template <typename Items, typename Each>
  bool Seq(const Items& items, size_t /*min_bytes*/, Each each) {
    Varint(items.size());
    for (const auto& item : items) each(item);
    return true;
  }
  // A field the body leaves out (after an error status): nothing to write.
  template <typename T>
  bool Omitted(const T&) {
    return true;
  }

 private:
  std::string* dst_;
};

// Reads fields from a message body. Every method returns false on malformed
// or truncated input.
class BodyReader {
 public:
  static constexpr bool kReading = true;

  explicit BodyReader(std::string_view in) : in_(in) {}

  bool Varint(uint64_t& v) { return in_.GetVarint64(&v); }
  bool U32(uint32_t& v);
  bool Node(NodeId& v) { return U32(v); }
  bool Fixed64(uint64_t& v) { return in_.GetFixed64BE(&v); }
  bool Bool(bool& v);
  bool Bits(bool& bit0, bool& bit1);
  bool String(std::string& v);
  // The bytes of a String without copying them (valid while the input is).
  bool Bytes(std::string_view& v) { return in_.GetLengthPrefixed(&v); }
  bool Dot(bigset::Dot& d) { return in_.GetDot(&d.actor, &d.counter); }
  bool Status(absl::Status& s);
  bool Clock(bigset::Clock& c);
  bool Delta(bigset::Delta& delta);
  // The encoded delta, not decoded (see Delta::DecodeInto).
  bool Delta(std::string_view& encoded) { return Bytes(encoded); }
  // Reuses the strings and vectors already in *elements.
  bool Elements(std::vector<ElementDots>& elements);
  // The elements still encoded: the rest of the body, which it consumes
  // (see DecodeChunkElements).
  bool Elements(std::string_view& encoded);
  bool Bounds(ElementBounds& b, uint32_t& batch_size);

  template <typename T, typename Each>
  bool Seq(std::vector<T>& items, size_t min_bytes, Each each) {
    uint64_t n = 0;
    if (!in_.GetCount(min_bytes, &n)) return false;
    items.resize(static_cast<size_t>(n));
    for (T& item : items) {
      if (!each(item)) return false;
    }
    return true;
  }
  // A field the body leaves out: back to its default, so that storage kept
  // for reuse does not show through.
  template <typename T>
  bool Omitted(T& field) {
    field = T();
    return true;
  }

  bool empty() const { return in_.empty(); }

 private:
  coding::Reader in_;
};

// Appends a whole body of type Body (Body::Fields) to *dst.
template <typename Body>
void EncodeBody(const Body& body, std::string* dst) {
  BodyWriter w(dst);
  Body::Fields(w, body);
}

}  // namespace message_internal
}  // namespace bigset

#endif  // BIGSET_LIB_NET_MESSAGE_ARCHIVE_H_
