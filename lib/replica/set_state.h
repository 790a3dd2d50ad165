// SetState: a replica's in-memory copy of one set's causal metadata.
// Internal header.

#ifndef BIGSET_LIB_REPLICA_SET_STATE_H_
#define BIGSET_LIB_REPLICA_SET_STATE_H_

#include <cstddef>
#include <cstdint>

#include "bigset/core/clock.h"
#include "replica/stored_clock.h"

namespace bigset {

class SetState {
 public:
  // Every event this replica has seen for the set.
  Clock clock;
  // Events whose keys may still be on disk but are removed (Clear).
  Clock tombstone;
  // What is on disk for each (which header and segments), so that a write
  // rewrites only what it changed.
  StoredClock stored_clock;
  StoredClock stored_tombstone;
  // Anti-entropy digests (lib/core/digest.h): of the element keys on disk,
  // of `clock`, and the set digest last added to the set's bucket.
  uint64_t keys_digest = 0;
  uint64_t clock_digest = 0;
  uint64_t set_digest = 0;
  // digest::SetNameHash of the set and its digest bucket, computed once.
  uint64_t name_hash = 0;
  uint32_t bucket = 0;
  // Elements present (ReplicaOptions::keep_counts), when known: not known
  // for a set loaded without a stored count or after a clear that covered
  // part of it, until a count scan.
  bool count_known = false;
  uint64_t count = 0;
  // Seeks writes made since the state was loaded while the set had no
  // presence filter: past a share of the count, a scan builds one.
  uint64_t presence_seeks = 0;
  // Bytes the entry is charged in the clock cache (see ClockCache).
  size_t charge = 0;
};

// Approximate heap bytes of a clock: what caching it costs.
size_t ApproximateMemory(const Clock& clock);

}  // namespace bigset

#endif  // BIGSET_LIB_REPLICA_SET_STATE_H_
