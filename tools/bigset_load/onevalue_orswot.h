// The baseline the seeds compare against: a whole ORSWOT serialised in one
// LevelDB value (what Riak's one-object sets did). Every insert reads,
// decodes, changes, encodes and writes the whole set: O(n).
//
// The baseline of bigset-load's onevalue target and of bigset_bench;
// not part of the library.

#ifndef BIGSET_TOOLS_BIGSET_LOAD_ONEVALUE_ORSWOT_H_
#define BIGSET_TOOLS_BIGSET_LOAD_ONEVALUE_ORSWOT_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bigset/core/clock.h"

namespace bigset::bench {

struct OneValueOrswot {
  Clock clock;
  // Sorted by element; each element with its dots.
  std::vector<std::pair<std::string, std::vector<Dot>>> entries;

  // Adds `element` with a new dot of `actor` (replacing none).
  absl::Status Add(ActorId actor, std::string_view element);

  std::string Encode() const;
  static absl::StatusOr<OneValueOrswot> Decode(std::string_view in);
};

}  // namespace bigset::bench

#endif  // BIGSET_TOOLS_BIGSET_LOAD_ONEVALUE_ORSWOT_H_
