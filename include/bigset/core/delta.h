// Delta: what a coordinating replica sends downstream for one update.
//
// Per op: the element, the context the client observed (the dots this op
// removes or replaces) and, for an add, the new dot. A delta may also carry a
// Clear: a clock whose every dot is removed from the set. Deltas are
// idempotent and may be applied in any order, duplicated, or never (see
// Replica::Apply).
//
// The wire format is versioned; decoding never reads out of bounds and
// returns an error for malformed, truncated or trailing bytes.
//
// Thread-safety: value types.

#ifndef BIGSET_CORE_DELTA_H_
#define BIGSET_CORE_DELTA_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "bigset/core/clock.h"
#include "bigset/core/dot.h"
#include "bigset/export.h"

namespace bigset {

struct DeltaOp {
  std::string element;
  // Dots observed for `element`: removed (or, for an add, replaced).
  std::vector<Dot> context;
  // The add's new dot; absent for a remove.
  std::optional<Dot> add;

  friend bool operator==(const DeltaOp&, const DeltaOp&) = default;
};

struct BIGSET_EXPORT Delta {
  static constexpr uint8_t kFormatVersion = 1;

  std::string set;
  // Applied first when present: removes every dot this clock has seen.
  std::optional<Clock> clear;
  std::vector<DeltaOp> ops;

  // Appends the encoding to *dst:
  //   byte version | varint len, set | byte flags (bit 0: clear present) |
  //   [varint len, clock encoding] | varint op count |
  //   per op: varint len, element | byte has_add | [dot] |
  //           varint context size | dots
  // where a dot is fixed64 actor (big-endian) + varint counter (>= 1).
  void EncodeTo(std::string* dst) const;
  std::string Encode() const {
    std::string s;
    EncodeTo(&s);
    return s;
  }
  static absl::StatusOr<Delta> Decode(std::string_view in);
  // Decodes into *out, reusing its strings and vectors (a receiver that
  // applies many deltas allocates little). On error *out is unspecified.
  static absl::Status DecodeInto(std::string_view in, Delta* out);

  friend bool operator==(const Delta&, const Delta&) = default;
};

}  // namespace bigset

#endif  // BIGSET_CORE_DELTA_H_
