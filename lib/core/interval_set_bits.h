// Word operations on the 4096-bit windows of IntervalSet, shared by its
// implementation files. Internal header.

#ifndef BIGSET_LIB_CORE_INTERVAL_SET_BITS_H_
#define BIGSET_LIB_CORE_INTERVAL_SET_BITS_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "bigset/core/interval_set.h"

namespace bigset::interval_set_internal {

inline constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
inline constexpr uint64_t kWindow = IntervalSet::kWindow;
inline constexpr uint32_t kWords = kWindow / 64;
// A window with more runs than this becomes a bitmap (32 runs take about
// the bitmap's 512 bytes); a bitmap with this many runs or fewer goes back.
inline constexpr size_t kDenseRuns = 32;
inline constexpr size_t kSparseRuns = 16;

// True iff an interval starting at `lo` overlaps or is adjacent to one ending
// at `hi`, i.e. lo <= hi + 1, written so that hi == UINT64_MAX cannot wrap.
inline bool Touches(uint64_t hi, uint64_t lo) {
  return lo == 0 || lo - 1 <= hi;
}

using Block = IntervalSet::Block;

// Index of the first set bit at or after `from` in `b`, or kWindow.
inline uint32_t NextSet(const Block& b, uint32_t from) {
  for (uint32_t w = from / 64; w < kWords; ++w) {
    uint64_t word = b.words[w];
    if (w == from / 64) word &= ~uint64_t{0} << (from % 64);
    if (word != 0)
      return w * 64 + static_cast<uint32_t>(std::countr_zero(word));
  }
  return kWindow;
}

// Index of the first clear bit at or after `from` in `b`, or kWindow.
inline uint32_t NextClear(const Block& b, uint32_t from) {
  for (uint32_t w = from / 64; w < kWords; ++w) {
    uint64_t word = ~b.words[w];
    if (w == from / 64) word &= ~uint64_t{0} << (from % 64);
    if (word != 0)
      return w * 64 + static_cast<uint32_t>(std::countr_zero(word));
  }
  return kWindow;
}

// Index of the last clear bit below `below` in `b`, or -1 if bits
// [0, below) are all set.
inline int PrevClear(const Block& b, uint32_t below) {
  for (int64_t w = below / 64; w >= 0; --w) {
    uint64_t word = ~b.words[static_cast<size_t>(w)];
    if (static_cast<uint32_t>(w) == below / 64) {
      if (below % 64 == 0) continue;
      word &= (uint64_t{1} << (below % 64)) - 1;
    }
    if (word != 0) {
      return static_cast<int>(w * 64 + 63 - std::countl_zero(word));
    }
  }
  return -1;
}

// Index of the last set bit of `b`. REQUIRES: some bit set.
inline uint32_t LastSet(const Block& b) {
  for (uint32_t w = kWords; w-- > 0;) {
    if (b.words[w] != 0) {
      return w * 64 + 63 - static_cast<uint32_t>(std::countl_zero(b.words[w]));
    }
  }
  return 0;
}

// Sets (or clears) bits [a, z] of `b`. REQUIRES: a <= z < kWindow.
inline void SetBits(Block* b, uint32_t a, uint32_t z, bool value) {
  for (uint32_t w = a / 64; w <= z / 64; ++w) {
    const uint32_t from = w == a / 64 ? a % 64 : 0;
    const uint32_t to = w == z / 64 ? z % 64 : 63;
    const uint64_t mask =
        (to == 63 ? ~uint64_t{0} : ((uint64_t{1} << (to + 1)) - 1)) &
        (~uint64_t{0} << from);
    if (value) {
      b->words[w] |= mask;
    } else {
      b->words[w] &= ~mask;
    }
  }
}

// Number of runs of set bits in `b`.
inline size_t RunsIn(const Block& b) {
  size_t runs = 0;
  uint64_t carry = 0;  // Bit 63 of the previous word.
  for (uint32_t w = 0; w < kWords; ++w) {
    const uint64_t x = b.words[w];
    // A run starts at every set bit whose predecessor is clear.
    runs += static_cast<size_t>(std::popcount(x & ~((x << 1) | carry)));
    carry = x >> 63;
  }
  return runs;
}

inline bool IsZero(const Block& b) {
  for (uint64_t w : b.words) {
    if (w != 0) return false;
  }
  return true;
}

// Below this ratio of sizes, updating the larger set interval by interval
// (O(m log n)) beats rebuilding it by a linear merge (O(n + m)).
inline constexpr size_t kPointwiseRatio = 16;

}  // namespace bigset::interval_set_internal

#endif  // BIGSET_LIB_CORE_INTERVAL_SET_BITS_H_
