// What the files of Replica's implementation share: the lock stripe, error
// helpers and the metadata key names. Internal header.
//
//   replica.cc          open, the write paths (Update, Apply, Clear), state
//   replica_count.cc    counts: liveness of written elements, count scans
//   replica_read.cc     streaming reads, membership, ranges, counts, sets
//   verify.cc           VerifyKeyspace (Replica::Verify)
//   sweeper.cc          the sweep queue and the sweeper

#ifndef BIGSET_LIB_REPLICA_REPLICA_INTERNAL_H_
#define BIGSET_LIB_REPLICA_REPLICA_INTERNAL_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "bigset/replica/replica.h"
#include "core/clock_storage.h"
#include "core/string_view_compat.h"
#include "replica/clock_cache.h"
#include "replica/replica_impl.h"
#include "replica/stored_clock.h"

namespace bigset {

// What a change of one set did to its clock and its tombstone.
struct ReplicaImpl::StateChanges {
  ClockChanges clock;
  ClockChanges tombstone;
  // Dots were added to the tombstone: the set goes in the sweep queue.
  bool tombstone_grew = false;
  // Element keys this change put (kept only when a later op of the same
  // batch may delete them) and deleted: whether a key exists is the store's
  // answer amended by the batch.
  bool track_keys = false;
  absl::flat_hash_set<std::string> put_keys;
  absl::flat_hash_set<std::string> deleted_keys;
  // Counts and contexts taken from the replica: the live dots of each
  // element the change touched, as it leaves them (see Replica::LiveDots),
  // the iterator their seeks share, and the set's presence filter (null if
  // it has none).
  absl::flat_hash_map<std::string, std::vector<Dot>> live;
  // Set by a write that touches one element once: LiveDots then keeps its
  // dots here, without the map.
  bool one_element = false;
  std::vector<Dot> single_live;
  // The presence hash (PresenceFilter::Hash) of the element LiveDots last
  // looked up; of a one-element write's element from StartPresenceProbe on
  // (element_hash_known).
  uint64_t element_hash = 0;
  bool element_hash_known = false;
  // A write of many elements with a filter: their presence hashes, in op
  // order, so that the filter's blocks of the ops a few ahead load while
  // this one is looked up (PrefetchPresence).
  std::vector<uint64_t> op_hashes;
  std::unique_ptr<Iterator> elements_it;
  PresenceFilter* filter = nullptr;
  // A clear hid every element: the filter is reset once the write commits.
  bool reset_filter = false;
  // Written unsynced whatever sync_writes says (ApplyUnsynced).
  bool defer_sync = false;
};

namespace replica_internal {

// Metadata key holding the replica's actor id: version byte + fixed64.
inline constexpr std::string_view kActorMetadata = "actor";
inline constexpr uint8_t kActorFormatVersion = 1;
// The actor id value: version byte, u64 BE actor.
std::string ActorValue(ActorId actor);
// A new actor id from options.actor_id_source, else random. May be 0 only
// if the source returns 0.
ActorId NewActorId(const ReplicaOptions& options);

// The shutdown marker (metadata "shutdown"): version byte + state.
inline constexpr std::string_view kShutdownMetadata = "shutdown";
inline constexpr uint8_t kShutdownFormatVersion = 1;
enum ShutdownState : uint8_t {
  // Open, writes not synced: a power loss may lose its tail.
  kOpenUnsynced = 0,
  // Closed by Close(): everything it wrote is durable.
  kClosedCleanly = 1,
  // Open with every write synced: nothing acknowledged can be lost.
  kOpenSynced = 2,
};
std::string ShutdownValue(ShutdownState state);

// Sweep queue and progress (metadata keys of the replica's keyspace); each
// value is u8 version 2 | payload | fixed32 crc32c(payload):
//   "sweep-queue" | u8 shard | set   -> (empty payload)      an entry
//   "sweep-snapshot" | set           -> clock encoding       swept with
//   "sweep-cursor" | set             -> element key done up to (or empty)
inline constexpr std::string_view kSweepQueue = "sweep-queue";
inline constexpr std::string_view kSweepSnapshot = "sweep-snapshot";
inline constexpr std::string_view kSweepCursor = "sweep-cursor";
inline constexpr uint8_t kSweepFormatVersion = 2;
inline constexpr uint32_t kSweepShards = 16;

uint32_t SweepShardOf(std::string_view set);
std::string SweepQueueKey(KeyspaceId keyspace, std::string_view set);
// A sweep metadata value holding `payload`, and its payload back (nullopt
// for another version, a bad checksum or too few bytes).
// The metadata keys of a set's sweep in progress: the tombstone snapshot it
// sweeps with and the element key it reached.
std::string SnapshotKey(KeyspaceId keyspace, std::string_view set);
std::string CursorKey(KeyspaceId keyspace, std::string_view set);
std::string EncodeSweepValue(std::string_view payload);
std::optional<std::string_view> DecodeSweepValue(std::string_view value);
// True if `cursor` is empty or one of `set`'s element keys.
bool ValidSweepCursor(KeyspaceId keyspace, std::string_view set,
                      std::string_view cursor);

// The sweep-queue entry named `name` (the metadata name after kSweepQueue:
// shard byte, set) with `value` is well formed.
bool ValidSweepQueueEntry(std::string_view name, std::string_view value);
// A sweep snapshot's clock; nullopt if its value is undecodable.
std::optional<Clock> DecodeSweepSnapshot(std::string_view value);

// One stored clock (set-clock or set-tombstone) read key by key, as Verify
// and Repair scan a keyspace: whether any key was seen, the first problem
// with its keys, and after Finish the clock if it is readable.
struct StoredClockScan {
  clock_storage::Loader loader;
  bool any = false;
  std::optional<std::string> problem;
  std::optional<Clock> clock;

  void Add(const ParsedKey& key, std::string_view value);
  // Sets `clock`, or `problem` if the keys do not form one. Call once.
  void Finish();
};

// Calls fn(element, dot) for each element key of `set` in keyspace
// `keyspace` of `store`, in key order, without filling the block cache (a
// full scan would evict what reads use). DataLoss for a key that does not
// decode; the iterator's error if the scan fails.
absl::Status ScanElementKeys(
    Store* store, KeyspaceId keyspace, std::string_view set,
    absl::FunctionRef<void(std::string_view element, Dot dot)> fn);

// Whether `store` holds keys of bigset key format version 1 in
// `keyspace` (one key per set-clock): data this version would misread.
absl::StatusOr<bool> HoldsKeyFormatV1(Store* store, KeyspaceId keyspace);

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
