#include "net/message_archive.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/string_view_compat.h"

namespace bigset {
namespace message_internal {

absl::Status Malformed(MessageType type, std::string_view what) {
  return absl::DataLossError(absl::StrCat("malformed ", MessageTypeName(type),
                                          " message: ", ToAbsl(what)));
}

bool BodyWriter::Status(const absl::Status& s) {
  Varint(static_cast<uint64_t>(s.code()));
  return String(ToStd(s.message()));
}

bool BodyWriter::Delta(const bigset::Delta& delta) {
  const size_t start = dst_->size();
  delta.EncodeTo(dst_);
  char len[coding::kMaxVarint64Bytes];
  const size_t n = coding::EncodeVarint64(len, dst_->size() - start);
  dst_->insert(start, len, n);
  return true;
}

bool BodyWriter::Elements(std::span<const ElementDots> elements) {
  size_t bound = coding::kMaxVarint64Bytes;
  for (const ElementDots& e : elements) {
    bound += 2 * coding::kMaxVarint64Bytes + e.element.size() +
             e.dots.size() * coding::kMaxDotBytes;
  }
  const size_t start = dst_->size();
  dst_->resize(start + bound);
  char* p = dst_->data() + start;
  p += coding::EncodeVarint64(p, elements.size());
  for (const ElementDots& e : elements) {
    p += coding::EncodeVarint64(p, e.element.size());
    std::memcpy(p, e.element.data(), e.element.size());
    p += e.element.size();
    p += coding::EncodeVarint64(p, e.dots.size());
    for (bigset::Dot d : e.dots) p += coding::EncodeDot(p, d.actor, d.counter);
  }
  dst_->resize(static_cast<size_t>(p - dst_->data()));
  return true;
}

bool BodyWriter::Bounds(const ElementBounds& b, uint32_t batch_size) {
  dst_->push_back(static_cast<char>(
      (b.start.has_value() ? 1 : 0) | (b.end.has_value() ? 2 : 0) |
      (b.start_inclusive ? 4 : 0) | (b.end_inclusive ? 8 : 0)));
  if (b.start.has_value()) String(*b.start);
  if (b.end.has_value()) String(*b.end);
  return Varint(batch_size);
}

bool BodyReader::U32(uint32_t& v) {
  uint64_t x = 0;
  if (!Varint(x) || x > UINT32_MAX) return false;
  v = static_cast<uint32_t>(x);
  return true;
}

bool BodyReader::Bool(bool& v) {
  uint8_t b = 0;
  if (!in_.GetByte(&b) || b > 1) return false;
  v = b == 1;
  return true;
}

bool BodyReader::Bits(bool& bit0, bool& bit1) {
  uint8_t b = 0;
  if (!in_.GetByte(&b) || b > 3) return false;
  bit0 = (b & 1) != 0;
  bit1 = (b & 2) != 0;
  return true;
}

bool BodyReader::String(std::string& v) {
  std::string_view bytes;
  if (!Bytes(bytes)) return false;
  v.assign(bytes);
  return true;
}

bool BodyReader::Status(absl::Status& s) {
  uint64_t code = 0;
  std::string_view msg;
  if (!Varint(code) || code > kMaxStatusCode || !Bytes(msg)) return false;
  s = absl::Status(static_cast<absl::StatusCode>(code), ToAbsl(msg));
  return true;
}

bool BodyReader::Clock(bigset::Clock& c) {
  std::string_view bytes;
  if (!Bytes(bytes)) return false;
  absl::StatusOr<bigset::Clock> decoded = bigset::Clock::Decode(bytes);
  if (!decoded.ok()) return false;
  c = std::move(*decoded);
  return true;
}

bool BodyReader::Delta(bigset::Delta& delta) {
  std::string_view bytes;
  return Bytes(bytes) && bigset::Delta::DecodeInto(bytes, &delta).ok();
}

bool BodyReader::Elements(std::vector<ElementDots>& elements) {
  return Seq(elements, kMinElementBytes, [this](ElementDots& e) {
    return String(e.element) &&
           Seq(e.dots, kMinDotBytes, [this](bigset::Dot& d) { return Dot(d); });
  });
}

bool BodyReader::Elements(std::string_view& encoded) {
  encoded = std::string_view(in_.position(), in_.remaining());
  std::string_view skipped;
  return in_.GetBytes(in_.remaining(), &skipped);
}

bool BodyReader::Bounds(ElementBounds& b, uint32_t& batch_size) {
  uint8_t flags = 0;
  if (!in_.GetByte(&flags) || flags > 15) return false;
  b.start_inclusive = (flags & 4) != 0;
  b.end_inclusive = (flags & 8) != 0;
  if ((flags & 1) && !String(b.start.emplace())) return false;
  if ((flags & 2) && !String(b.end.emplace())) return false;
  return U32(batch_size) && batch_size >= 1;
}

}  // namespace message_internal
}  // namespace bigset
