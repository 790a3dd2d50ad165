// Helpers for the sweep tests (sweep_test.cc, sweep_attack_test.cc): a
// replica in keyspace kSweepKs, numbered elements, clears, full sweeps, and
// direct access to the sweeper's metadata keys.

#ifndef BIGSET_TESTS_SWEEP_UTIL_H_
#define BIGSET_TESTS_SWEEP_UTIL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bigset/replica/replica.h"
#include "bigset/store/store.h"
#include "bigset/testing/sim.h"

namespace bigset::testing {

inline constexpr KeyspaceId kSweepKs = 7;

// Opens the replica of keyspace `ks` (REQUIREs success); its new actor
// ids from `actor_ids` (random if empty: see SeededActorIds).
std::unique_ptr<Replica> OpenSweepReplica(
    Store* store, bool sync = false, KeyspaceId ks = kSweepKs,
    std::function<ActorId()> actor_ids = nullptr);
// Element keys of `set` in kSweepKs, live or covered.
uint64_t ElementKeys(Store& store, std::string_view set);
// Adds elements "e<100000 + i>" for i in [from, to), 100 per update.
void AddRange(Replica& r, std::string_view set, int from, int to);
// Clears everything the set's clock has seen.
void ClearAll(Replica& r, std::string_view set);
// REQUIREs a clean Verify (printing the first problem).
void RequireVerified(Replica& r);
// Sweeps until the queue is empty; the summed progress.
SweepProgress SweepAll(Replica& r);
// The sweeper's metadata keys in kSweepKs, and a queue key under any shard.
std::string SnapshotKey(std::string_view set);
std::string CursorKey(std::string_view set);
std::string QueueKeyWithShard(uint8_t shard, std::string_view set);
// A sweep metadata value (version and checksum) holding `payload`.
std::string SweepValue(std::string_view payload);
// Element keys of `set` on each replica of its preference list, each of
// which must pass Verify.
std::vector<uint64_t> KeysOnReplicas(Simulator& sim, const std::string& set);
// Writes one key directly into the store.
void Put(Store& store, const std::string& key, std::string_view value);

}  // namespace bigset::testing

#endif  // BIGSET_TESTS_SWEEP_UTIL_H_
