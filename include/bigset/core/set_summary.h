// SetSummary: what anti-entropy compares of one set of a replica (its
// digests, and its clock when asked for).
//
// Thread-safety: a value type.

#ifndef BIGSET_CORE_SET_SUMMARY_H_
#define BIGSET_CORE_SET_SUMMARY_H_

#include <cstdint>
#include <string>

#include "bigset/core/clock.h"

namespace bigset {

// What anti-entropy compares of one set (see Replica::Summarize).
struct SetSummary {
  std::string set;
  // Mixes the name, keys digest, clock digest and tombstone emptiness.
  uint64_t digest = 0;
  // Sum of the hashes of the set's element keys on disk.
  uint64_t keys_digest = 0;
  bool tombstone_empty = true;
  Clock clock;  // Only if asked for.

  friend bool operator==(const SetSummary&, const SetSummary&) = default;
};

}  // namespace bigset

#endif  // BIGSET_CORE_SET_SUMMARY_H_
