// What the files of Replica's implementation share: the lock stripe, error
// helpers and the metadata key names. Internal header.
//
//   replica.cc          open, the write paths (Update, Apply, Clear), state
//   replica_read.cc     streaming reads, membership, ranges, counts, sets
//   replica_verify.cc   Verify

#ifndef BIGSET_LIB_REPLICA_REPLICA_INTERNAL_H_
#define BIGSET_LIB_REPLICA_REPLICA_INTERNAL_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "bigset/replica/replica.h"
#include "core/string_view_compat.h"
#include "replica/clock_cache.h"
#include "replica/stored_clock.h"

namespace bigset {

// What a change of one set did to its clock and its tombstone.
struct Replica::StateChanges {
  ClockChanges clock;
  ClockChanges tombstone;
};

namespace replica_internal {

// Metadata key holding the replica's actor id: version byte + fixed64.
inline constexpr std::string_view kActorMetadata = "actor";
inline constexpr uint8_t kActorFormatVersion = 1;

inline std::string Printable(std::string_view s) {
  return absl::CHexEscape(ToAbsl(s));
}

inline absl::Status SetCorruption(std::string_view set, std::string_view what,
                                  absl::string_view detail = {}) {
  return absl::DataLossError(absl::StrCat("set \"", Printable(set),
                                          "\": ", ToAbsl(what),
                                          detail.empty() ? "" : ": ", detail));
}

}  // namespace replica_internal
}  // namespace bigset

#endif  // BIGSET_LIB_REPLICA_REPLICA_INTERNAL_H_
