// CRC32C (Castagnoli), the checksum of every message on the wire.
// Internal header.
//
// Uses the SSE4.2 instruction when the CPU has it (about 20 GB/s), a
// table otherwise. Thread-safety: stateless.

#ifndef BIGSET_LIB_CORE_CRC32C_H_
#define BIGSET_LIB_CORE_CRC32C_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace bigset::crc32c {

// The CRC32C of `data`, continuing from `crc` (0 to start).
uint32_t Extend(uint32_t crc, const char* data, size_t n);

inline uint32_t Value(std::string_view data) {
  return Extend(0, data.data(), data.size());
}

}  // namespace bigset::crc32c

#endif  // BIGSET_LIB_CORE_CRC32C_H_
