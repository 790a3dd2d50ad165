#include "core/cloud_codec.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/string_view_compat.h"

namespace bigset::cloud_codec {
namespace {

// Bitmaps are considered per window of this many counters: big enough that
// per-segment headers are noise, small enough that a dense patch inside a
// sparse cloud is found.
constexpr uint64_t kWindow = 4096;

struct Segment {
  bool bitmap;
  size_t begin;  // runs [begin, end)
  size_t end;
  uint64_t nbytes;  // bitmap only
};

uint64_t BitmapBytes(uint64_t first, uint64_t last) {
  return (last - first) / 8 + 1;
}

// Sets bits [a, b] (inclusive) of the LSB-first bitmap at p.
void SetBits(char* p, uint64_t a, uint64_t b) {
  const uint64_t ab = a / 8;
  const uint64_t bb = b / 8;
  const auto lo_mask = static_cast<uint8_t>(0xff << (a % 8));
  const auto hi_mask = static_cast<uint8_t>(0xff >> (7 - b % 8));
  if (ab == bb) {
    p[ab] =
        static_cast<char>(static_cast<uint8_t>(p[ab]) | (lo_mask & hi_mask));
    return;
  }
  p[ab] = static_cast<char>(static_cast<uint8_t>(p[ab]) | lo_mask);
  if (bb > ab + 1) std::memset(p + ab + 1, 0xff, bb - ab - 1);
  p[bb] = static_cast<char>(static_cast<uint8_t>(p[bb]) | hi_mask);
}

void AddRunsSegment(std::vector<Segment>* segs, size_t begin, size_t end) {
  if (!segs->empty() && !segs->back().bitmap) {
    segs->back().end = end;  // consecutive RUNS windows share one segment
  } else {
    segs->push_back({false, begin, end, 0});
  }
}

// Plans the segments of one actor's cloud. Windows are greedy: a window
// starts at the first run not yet placed and holds the runs that fit
// entirely within kWindow counters of it; a run that crosses the window's
// end starts the next window, and one longer than a window is RUNS-coded
// on its own. Each window takes the cheaper of RUNS and BITMAP, and a
// BITMAP window extends the preceding BITMAP segment when that costs less
// than a new segment. Linear in the number of runs.
std::vector<Segment> PlanSegments(std::span<const Run> runs, uint64_t cursor) {
  std::vector<Segment> segs;
  const size_t n = runs.size();
  size_t i = 0;
  while (i < n) {
    const uint64_t start = runs[i].lo;
    size_t j = i;
    uint64_t runs_cost = 0;
    uint64_t next_cursor = cursor;
    while (j < n && runs[j].hi - start < kWindow) {
      runs_cost += coding::VarintLength(runs[j].lo - next_cursor) +
                   coding::VarintLength(runs[j].hi - runs[j].lo);
      next_cursor = runs[j].hi + 2;  // wraps only after the last run
      ++j;
    }
    if (j == i) {
      AddRunsSegment(&segs, i, i + 1);
      cursor = runs[i].hi + 2;
      ++i;
      continue;
    }
    const uint64_t nbytes = BitmapBytes(start, runs[j - 1].hi);
    const uint64_t alone = coding::VarintLength(nbytes << 1 | 1) +
                           coding::VarintLength(start - cursor) + nbytes;
    bool placed = false;
    if (!segs.empty() && segs.back().bitmap) {
      Segment& prev = segs.back();
      const uint64_t merged = BitmapBytes(runs[prev.begin].lo, runs[j - 1].hi);
      const uint64_t extra = merged - prev.nbytes +
                             coding::VarintLength(merged << 1 | 1) -
                             coding::VarintLength(prev.nbytes << 1 | 1);
      if (extra < runs_cost && extra <= alone) {
        prev.end = j;
        prev.nbytes = merged;
        placed = true;
      }
    }
    if (!placed) {
      if (alone < runs_cost) {
        segs.push_back({true, i, j, nbytes});
      } else {
        AddRunsSegment(&segs, i, j);
      }
    }
    cursor = next_cursor;
    i = j;
  }
  return segs;
}

}  // namespace

void EncodeRuns(std::span<const Run> runs, uint64_t cursor, std::string* dst) {
  const std::vector<Segment> segs = PlanSegments(runs, cursor);
  coding::PutVarint64(dst, segs.size());
  for (const Segment& seg : segs) {
    if (!seg.bitmap) {
      coding::PutVarint64(dst, static_cast<uint64_t>(seg.end - seg.begin) << 1);
      for (size_t k = seg.begin; k < seg.end; ++k) {
        coding::PutVarint64(dst, runs[k].lo - cursor);
        coding::PutVarint64(dst, runs[k].hi - runs[k].lo);
        cursor = runs[k].hi + 2;
      }
      continue;
    }
    const uint64_t first = runs[seg.begin].lo;
    coding::PutVarint64(dst, seg.nbytes << 1 | 1);
    coding::PutVarint64(dst, first - cursor);
    const size_t offset = dst->size();
    dst->append(seg.nbytes, '\0');
    char* bits = dst->data() + offset;
    for (size_t k = seg.begin; k < seg.end; ++k) {
      SetBits(bits, runs[k].lo - first, runs[k].hi - first);
    }
    cursor = runs[seg.end - 1].hi + 2;
  }
}

namespace {

absl::Status Corrupt(std::string_view what) {
  return absl::DataLossError(
      absl::StrCat("corrupt clock encoding: ", ToAbsl(what)));
}

// Appends the runs of an LSB-first bitmap whose bit 0 is counter `start`.
// REQUIRES: start + (highest set bit) does not overflow; the caller checked.
void DecodeBitmap(std::string_view bytes, uint64_t start, uint64_t nbits,
                  IntervalSet* out) {
  out->InsertBits(start, bytes, nbits);
}

}  // namespace

absl::Status DecodeRuns(coding::Reader* r, uint64_t cursor, uint64_t nsegs,
                        IntervalSet* out) {
  bool full = false;  // true once no further counter fits
  for (uint64_t s = 0; s < nsegs; ++s) {
    uint64_t header;
    if (!r->GetVarint64(&header)) return Corrupt("truncated segment header");
    const uint64_t count = header >> 1;
    if (count == 0) return Corrupt("empty segment");
    if ((header & 1) == 0) {
      // Each run takes at least two bytes.
      if (count > r->remaining() / 2) return Corrupt("truncated runs");
      for (uint64_t k = 0; k < count; ++k) {
        uint64_t gap, len;
        if (!r->GetVarint64(&gap) || !r->GetVarint64(&len)) {
          return Corrupt("truncated run");
        }
        if (full || gap > UINT64_MAX - cursor)
          return Corrupt("counter overflow");
        const uint64_t lo = cursor + gap;
        if (len > UINT64_MAX - lo) return Corrupt("counter overflow");
        const uint64_t hi = lo + len;
        out->Append(lo, hi);
        if (hi >= UINT64_MAX - 1) {
          full = true;
        } else {
          cursor = hi + 2;
        }
      }
    } else {
      uint64_t gap;
      std::string_view bytes;
      if (!r->GetVarint64(&gap)) return Corrupt("truncated bitmap");
      if (count > r->remaining() || !r->GetBytes(count, &bytes)) {
        return Corrupt("truncated bitmap");
      }
      if (full || gap > UINT64_MAX - cursor) return Corrupt("counter overflow");
      const uint64_t start = cursor + gap;
      const auto first_byte = static_cast<uint8_t>(bytes.front());
      const auto last_byte = static_cast<uint8_t>(bytes.back());
      if ((first_byte & 1) == 0) return Corrupt("bitmap bit 0 is clear");
      if (last_byte == 0) return Corrupt("bitmap ends with a zero byte");
      const uint64_t last_bit =
          (uint64_t{count} - 1) * 8 +
          static_cast<uint64_t>(std::bit_width(last_byte)) - 1;
      if (last_bit > UINT64_MAX - start) return Corrupt("counter overflow");
      DecodeBitmap(bytes, start, last_bit + 1, out);
      const uint64_t end = start + last_bit;
      if (end >= UINT64_MAX - 1) {
        full = true;
      } else {
        cursor = end + 2;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace bigset::cloud_codec
