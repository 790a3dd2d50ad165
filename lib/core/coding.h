// Internal byte-coding helpers: varints, big-endian fixed-width integers and
// a bounds-checked reader. Shared by every encoder in the library.
//
// Not part of the public API. Thread-safety: stateless functions; a Reader is
// not safe for concurrent use.

#ifndef BIGSET_LIB_CORE_CODING_H_
#define BIGSET_LIB_CORE_CODING_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace bigset::coding {

// Longest LEB128 encoding of a uint64_t.
inline constexpr size_t kMaxVarint64Bytes = 10;

inline size_t VarintLength(uint64_t v) {
  size_t len = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++len;
  }
  return len;
}

// Writes v to buf (at least kMaxVarint64Bytes); returns the bytes used.
inline size_t EncodeVarint64(char* buf, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  return n;
}

inline void PutVarint64(std::string* dst, uint64_t v) {
  char buf[kMaxVarint64Bytes];
  dst->append(buf, EncodeVarint64(buf, v));
}

// Length-prefixed bytes: varint length, then the bytes. The one encoding of
// a byte string inside every format (deltas, messages, write batches).
inline void PutLengthPrefixed(std::string* dst, std::string_view s) {
  PutVarint64(dst, s.size());
  dst->append(s.data(), s.size());
}

// Big-endian so that byte order equals numeric order (used inside keys).
inline void EncodeFixed64BE(char* buf, uint64_t v) {
  for (int i = 7; i >= 0; --i) {
    buf[i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
}

inline void PutFixed64BE(std::string* dst, uint64_t v) {
  char buf[8];
  EncodeFixed64BE(buf, v);
  dst->append(buf, 8);
}

// A dot: fixed64 actor (big-endian; actor ids are random, a varint would
// only grow them), then varint counter (>= 1). Returns the bytes written to
// buf (at least kMaxDotBytes).
inline constexpr size_t kMaxDotBytes = 8 + kMaxVarint64Bytes;
inline constexpr size_t kMinDotBytes = 9;
inline size_t EncodeDot(char* buf, uint64_t actor, uint64_t counter) {
  EncodeFixed64BE(buf, actor);
  return 8 + EncodeVarint64(buf + 8, counter);
}
inline void PutDot(std::string* dst, uint64_t actor, uint64_t counter) {
  char buf[kMaxDotBytes];
  dst->append(buf, EncodeDot(buf, actor, counter));
}

inline void EncodeFixed32BE(char* buf, uint32_t v) {
  for (int i = 3; i >= 0; --i) {
    buf[i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
}

inline void PutFixed32BE(std::string* dst, uint32_t v) {
  char buf[4];
  EncodeFixed32BE(buf, v);
  dst->append(buf, 4);
}

// REQUIRES: p points at 8 readable bytes.
inline uint64_t DecodeFixed64BE(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// REQUIRES: p points at 4 readable bytes.
inline uint32_t DecodeFixed32BE(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// Reads from a byte range without ever reading past its end. Every Get*
// returns false (and leaves the reader in an unspecified position) when the
// input is too short or malformed.
class Reader {
 public:
  explicit Reader(std::string_view in)
      : p_(in.data()), end_(in.data() + in.size()) {}

  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  bool empty() const { return p_ == end_; }
  const char* position() const { return p_; }

  bool GetByte(uint8_t* v) {
    if (p_ == end_) return false;
    *v = static_cast<uint8_t>(*p_++);
    return true;
  }

  // Rejects encodings longer than 10 bytes and 10th bytes that overflow.
  bool GetVarint64(uint64_t* v) {
    uint64_t result = 0;
    for (int shift = 0; shift <= 63; shift += 7) {
      if (p_ == end_) return false;
      uint64_t byte = static_cast<uint8_t>(*p_++);
      if (shift == 63 && byte > 1) return false;
      result |= (byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        *v = result;
        return true;
      }
    }
    return false;
  }

  bool GetFixed64BE(uint64_t* v) {
    if (remaining() < 8) return false;
    *v = DecodeFixed64BE(p_);
    p_ += 8;
    return true;
  }

  bool GetFixed32BE(uint32_t* v) {
    if (remaining() < 4) return false;
    *v = DecodeFixed32BE(p_);
    p_ += 4;
    return true;
  }

  bool GetBytes(size_t n, std::string_view* out) {
    if (remaining() < n) return false;
    *out = std::string_view(p_, n);
    p_ += n;
    return true;
  }

  // Length-prefixed bytes (see PutLengthPrefixed); *out points into the
  // input.
  bool GetLengthPrefixed(std::string_view* out) {
    uint64_t len = 0;
    return GetVarint64(&len) && len <= remaining() &&
           GetBytes(static_cast<size_t>(len), out);
  }

  // A dot (see PutDot). Rejects counter 0, which names no event.
  bool GetDot(uint64_t* actor, uint64_t* counter) {
    return GetFixed64BE(actor) && GetVarint64(counter) && *counter != 0;
  }

  // A count of items that take at least `min_bytes` each (>= 1) and must
  // all fit in the rest of the input: bounds what a decoder allocates for
  // them by the size of its input.
  bool GetCount(size_t min_bytes, uint64_t* n) {
    return GetVarint64(n) && *n <= remaining() / min_bytes;
  }

 private:
  const char* p_;
  const char* end_;
};

// A small metadata value: a format-version byte, then one fixed64. Returns
// false for another version, a wrong length, or a value of 0 (which no
// such record holds: actor ids and lease ends are never 0).
inline std::string VersionedFixed64(uint8_t version, uint64_t v) {
  std::string out(1, static_cast<char>(version));
  PutFixed64BE(&out, v);
  return out;
}
inline bool DecodeVersionedFixed64(std::string_view in, uint8_t version,
                                   uint64_t* v) {
  if (in.size() != 9 || static_cast<uint8_t>(in[0]) != version) return false;
  *v = DecodeFixed64BE(in.data() + 1);
  return *v != 0;
}

}  // namespace bigset::coding

#endif  // BIGSET_LIB_CORE_CODING_H_
