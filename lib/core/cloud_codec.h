// The coding of a set of counters as segments of runs or bitmaps, shared by
// the clock encoding (docs/FORMATS.md, "Clock encoding") and the stored
// clock's window segments. Internal header.
//
// Counters are delta-coded from a cursor: the smallest counter that may come
// next (hi + 2 after a run ending at hi, since runs are maximal). A segment
// starts with varint (count << 1 | kind): RUNS (kind 0) of `count` runs,
// each varint (lo - cursor), varint (hi - lo); or BITMAP (kind 1) of `count`
// bytes after varint (start - cursor), bit i meaning start + i, bit 0 and
// the last byte non-zero.
//
// Thread-safety: stateless functions.

#ifndef BIGSET_LIB_CORE_CLOUD_CODEC_H_
#define BIGSET_LIB_CORE_CLOUD_CODEC_H_

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "bigset/core/interval_set.h"
#include "core/coding.h"

namespace bigset::cloud_codec {

struct Run {
  uint64_t lo;
  uint64_t hi;
};

// Appends varint (number of segments) and the segments coding `runs`.
// Windows of up to 4096 counters take whichever of RUNS and BITMAP is
// smaller. REQUIRES: runs maximal and ascending, the first lo >= cursor.
void EncodeRuns(std::span<const Run> runs, uint64_t cursor, std::string* dst);

// Decodes `nsegs` segments (the count already read) starting at `cursor`
// and adds their counters to *out. DataLoss for malformed, truncated or
// overflowing input; never reads out of bounds.
absl::Status DecodeRuns(coding::Reader* r, uint64_t cursor, uint64_t nsegs,
                        IntervalSet* out);

}  // namespace bigset::cloud_codec

#endif  // BIGSET_LIB_CORE_CLOUD_CODEC_H_
