// How a clock is stored: a header and per-(actor, window) segments, so that
// a write rewrites only what it changed (docs/FORMATS.md, "Stored clocks").
// Internal header.
//
// The header lists every actor with a dot and its base (0 for an actor
// that has only a cloud). A segment holds the cloud intervals of one actor
// whose first counter lies in one aligned window of kSegmentWindow
// counters, coded from the window's start (lib/core/cloud_codec.h). A long
// run is one interval in one segment, however many windows it spans; a
// window of scattered counters is at most one bitmap.
//
// Thread-safety: stateless functions; a Loader belongs to one thread.

#ifndef BIGSET_LIB_CORE_CLOCK_STORAGE_H_
#define BIGSET_LIB_CORE_CLOCK_STORAGE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "bigset/core/clock.h"

#ifndef BIGSET_SEGMENT_WINDOW
#define BIGSET_SEGMENT_WINDOW 1024
#endif

namespace bigset::clock_storage {

// Segments cover the intervals whose lo lies in [w, w + kSegmentWindow),
// w a multiple of kSegmentWindow. A divisor of IntervalSet::kWindow, so a
// segment of a dense window is a slice of its bitmap. The size is a writer's
// choice (the reader checks only that intervals start in their window), set
// from measurements: see docs/ARCHITECTURE.md, "Clock storage".
inline constexpr uint64_t kSegmentWindow = BIGSET_SEGMENT_WINDOW;
static_assert(IntervalSet::kWindow % kSegmentWindow == 0);
inline constexpr uint64_t SegmentOf(uint64_t counter) {
  return counter & ~(kSegmentWindow - 1);
}

struct HeaderEntry {
  ActorId actor;
  uint64_t base;
  friend bool operator==(const HeaderEntry&, const HeaderEntry&) = default;
};

// The header of `clock`: every actor with a dot, ascending, with its base.
std::vector<HeaderEntry> HeaderOf(const Clock& clock);
// The same into *out (replacing what it held, reusing its capacity).
void HeaderOfInto(const Clock& clock, std::vector<HeaderEntry>* out);
// True iff HeaderOf(clock) == header, without building it.
bool HeaderMatches(const Clock& clock, const std::vector<HeaderEntry>& header);
// Header value: varint count, then per entry u64be actor, varint base; a
// set-clock's header then carries its trailer: tagged fields in ascending
// tag order, each at most once (a field's absence means "not known"):
//   u8 kKeysDigestTag | u64be digest   the keys digest (lib/core/digest.h)
//   u8 kCountTag | varint count        elements present (the set's count)
// A tombstone's header has no trailer.
inline constexpr uint8_t kKeysDigestTag = 1;
inline constexpr uint8_t kCountTag = 2;
struct HeaderTrailer {
  std::optional<uint64_t> keys_digest;
  std::optional<uint64_t> count;
  bool empty() const { return !keys_digest && !count; }
  friend bool operator==(const HeaderTrailer&, const HeaderTrailer&) = default;
};
void EncodeHeader(const std::vector<HeaderEntry>& header, std::string* dst);
void EncodeHeader(const std::vector<HeaderEntry>& header,
                  const HeaderTrailer& trailer, std::string* dst);

// Appends the segment value of window `w` of `cloud` (one actor's cloud):
// varint segment count, then the intervals whose lo is in the window,
// coded from cursor w. Returns false, appending nothing, if there is none.
bool EncodeSegment(const IntervalSet& cloud, uint64_t w, std::string* dst);

// Rebuilds a clock from its header and its segments, given in key order
// (the header first, then segments by actor and window).
class Loader {
 public:
  absl::Status AddHeader(std::string_view value);
  absl::Status AddSegment(ActorId actor, uint64_t w, std::string_view value);
  bool has_header() const { return has_header_; }
  const std::vector<HeaderEntry>& header() const { return header_; }
  // The header's trailer (empty if it has none).
  const HeaderTrailer& trailer() const { return trailer_; }
  // DataLoss unless the parts form a normalised clock.
  absl::StatusOr<Clock> Finish();

 private:
  std::vector<HeaderEntry> header_;
  bool has_header_ = false;
  HeaderTrailer trailer_;
  std::vector<std::pair<ActorId, IntervalSet>> clouds_;
  uint64_t last_window_ = 0;
};

}  // namespace bigset::clock_storage

#endif  // BIGSET_LIB_CORE_CLOCK_STORAGE_H_
