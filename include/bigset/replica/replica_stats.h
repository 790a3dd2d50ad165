// Counters and reports about a replica.

#ifndef BIGSET_REPLICA_REPLICA_STATS_H_
#define BIGSET_REPLICA_REPLICA_STATS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace bigset {

// Monotonic counters since the replica was opened.
struct ReplicaStats {
  uint64_t updates_coordinated = 0;
  uint64_t deltas_applied = 0;
  uint64_t clears = 0;
  uint64_t keys_written = 0;
  uint64_t keys_deleted = 0;
  uint64_t clock_cache_hits = 0;
  uint64_t clock_cache_misses = 0;
  // Deltas refused whole (InvalidArgument): they claimed events of this
  // replica's actor that it never generated.
  uint64_t deltas_rejected = 0;
  // Bytes of the batches written (keys and values, as the store's log
  // receives them).
  uint64_t bytes_written = 0;
  // The sweeper: sets queued now (a gauge), entries finished, keys read and
  // deleted, bytes of deleted keys, time spent sweeping, and sweeps of a set
  // that failed (e.g. undecodable sweep state; see Verify).
  uint64_t sweep_queue_length = 0;
  uint64_t sweep_entries_done = 0;
  uint64_t sweep_keys_read = 0;
  uint64_t sweep_keys_deleted = 0;
  uint64_t sweep_bytes_reclaimed = 0;
  uint64_t sweep_micros = 0;
  uint64_t sweep_errors = 0;
  // Counts (ReplicaOptions::keep_counts): scans that counted a set whose
  // count was not known (a store written before counts were kept, or a
  // clear that covered part of the set), and seeks an add or remove made
  // to learn whether its element was present (the presence filter could
  // not tell, or the set had none).
  uint64_t count_scans = 0;
  uint64_t presence_seeks = 0;
  // Elements of membership queries (ContainsAll) that the presence filter
  // answered "absent" without a seek.
  uint64_t presence_seeks_saved = 0;
  // Memory of the presence filters now, and filters dropped to stay within
  // ReplicaOptions::presence_filter_bytes.
  uint64_t presence_filter_bytes = 0;
  uint64_t presence_filters_dropped = 0;
};

// Called now and then by long scans (Verify, Repair) with the number of keys
// scanned so far, on the scanning thread; for progress displays.
using KeysProgress = std::function<void(uint64_t keys_scanned)>;

// Sizes of one set's causal metadata on this replica.
struct SetStats {
  uint64_t clock_bytes = 0;      // encoded set-clock
  uint64_t tombstone_bytes = 0;  // encoded set-tombstone (0 if none)
  uint64_t clock_dots = 0;
  uint64_t tombstone_dots = 0;
};

// What Replica::Verify found. `problems` lists the first inconsistencies
// found (at most kMaxProblems), `problem_count` counts all of them.
struct VerifyReport {
  static constexpr size_t kMaxProblems = 100;

  uint64_t sets = 0;
  uint64_t element_keys = 0;
  uint64_t problem_count = 0;
  std::vector<std::string> problems;

  bool ok() const { return problem_count == 0; }
};

// What Replica::Repair found and did. `losses` describes the first
// problems (at most kMaxLosses), one line each; the counts count all.
struct RepairReport {
  static constexpr size_t kMaxLosses = 100;

  uint64_t sets = 0;
  uint64_t element_keys = 0;
  // The actor id before (0 if it was lost) and the new one.
  uint64_t old_actor = 0;
  uint64_t new_actor = 0;
  // Sets whose set-clock was missing or unreadable: rebuilt from their
  // element keys and tombstone. Events the set had seen without keeping a
  // key (removes) are forgotten.
  uint64_t clocks_rebuilt = 0;
  // Sets whose set-clock had not seen some of their element keys' dots (an
  // older clock survived): the dots were added.
  uint64_t clocks_extended = 0;
  uint64_t dots_added = 0;
  // Unreadable set-tombstones dropped: elements they removed but whose keys
  // were not swept yet are present again.
  uint64_t tombstones_dropped = 0;
  // Sweep-queue entries, snapshots and cursors rewritten or deleted.
  uint64_t sweep_fixes = 0;
  // Sets whose stored count was missing (written before counts were kept,
  // or not known) or did not match their keys: rewritten.
  uint64_t counts_fixed = 0;
  // Undecodable keys deleted.
  uint64_t keys_deleted = 0;
  uint64_t loss_count = 0;
  std::vector<std::string> losses;
};

}  // namespace bigset

#endif  // BIGSET_REPLICA_REPLICA_STATS_H_
