// VerifyKeyspace: the read-only check behind Replica::Verify. Internal
// header.
//
// It scans one replica's keyspace from one snapshot and reports every
// inconsistency it finds, changing nothing: keys of another key format
// version, undecodable keys or values, element keys whose dot the
// set-clock has not seen, element keys or tombstones of a set without a
// set-clock, sweep snapshots and cursors that no sweep of the set could
// have written, a missing actor id. It needs nothing of an open replica but
// its store and keyspace.
//
// Thread-safety: reads a snapshot; safe beside writers.

#ifndef BIGSET_LIB_REPLICA_VERIFY_H_
#define BIGSET_LIB_REPLICA_VERIFY_H_

#include "absl/status/statusor.h"
#include "bigset/replica/replica.h"
#include "bigset/store/store.h"

namespace bigset {

// The report of Replica::Verify for `keyspace` of `store` (not owned).
// `progress`, if set, is called every few thousand keys.
absl::StatusOr<VerifyReport> VerifyKeyspace(Store* store, KeyspaceId keyspace,
                                            const KeysProgress& progress);

}  // namespace bigset

#endif  // BIGSET_LIB_REPLICA_VERIFY_H_
