// CRC32C (Castagnoli), the checksum of every message on the wire.
// Internal header.
//
// Uses the SSE4.2 instruction when the CPU has it (about 20 GB/s), a
// table otherwise. Thread-safety: stateless.

#ifndef BIGSET_LIB_CORE_CRC32C_H_
#define BIGSET_LIB_CORE_CRC32C_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace bigset::crc32c {

// The CRC32C of `data`, continuing from `crc` (0 to start).
uint32_t Extend(uint32_t crc, const char* data, size_t n);

inline uint32_t Value(std::string_view data) {
  return Extend(0, data.data(), data.size());
}

// Self-checking records (the ring, a node's hand-off metadata): the record,
// then the CRC32C of it as a fixed32 big-endian trailer.
inline void AppendChecksum(std::string* record) {
  const uint32_t crc = Value(*record);
  for (int shift = 24; shift >= 0; shift -= 8) {
    record->push_back(static_cast<char>((crc >> shift) & 0xFF));
  }
}

// Removes the trailer from *record; false (and *record unchanged) if it is
// too short to have one or the checksum does not match.
inline bool StripChecksum(std::string_view* record) {
  if (record->size() < 4) return false;
  const auto* tail = reinterpret_cast<const unsigned char*>(record->data() +
                                                            record->size() - 4);
  const uint32_t want = (uint32_t{tail[0]} << 24) | (uint32_t{tail[1]} << 16) |
                        (uint32_t{tail[2]} << 8) | uint32_t{tail[3]};
  const std::string_view body = record->substr(0, record->size() - 4);
  if (Value(body) != want) return false;
  *record = body;
  return true;
}

}  // namespace bigset::crc32c

#endif  // BIGSET_LIB_CORE_CRC32C_H_
