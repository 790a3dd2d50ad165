// StoredClock and ClockChanges: a set's clock (or tombstone) as it is on
// disk, and the writes that keep it there up to date with the clock in
// memory at a cost proportional to what changed. Internal header.
//
// On disk a clock is a header key and one segment key per actor and window
// of its cloud (lib/core/clock_storage.h, docs/FORMATS.md "Stored
// clocks"). A write records what it touched in a ClockChanges; WriteClock
// then rewrites the header only if an actor's base changed, and only the
// segments of the windows the change reached: an insert of this replica's
// own actor writes the header (a few bytes per actor) whatever the cloud;
// a scattered dot of another actor rewrites one segment.
//
// Thread-safety: value types, used under the set's stripe lock.

#ifndef BIGSET_LIB_REPLICA_STORED_CLOCK_H_
#define BIGSET_LIB_REPLICA_STORED_CLOCK_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "bigset/core/clock.h"
#include "bigset/keys/keys.h"
#include "bigset/store/store.h"
#include "core/clock_storage.h"

namespace bigset {

// What is on disk for one clock: the header last written and, per actor,
// the windows that have a segment key.
struct StoredClock {
  std::vector<clock_storage::HeaderEntry> header;
  absl::flat_hash_map<ActorId, absl::btree_set<uint64_t>> windows;
  // The header's trailer (set-clocks only): its keys digest is absent in a
  // header written before digests were kept, its count in one written
  // before counts were kept or while the count was not known.
  clock_storage::HeaderTrailer trailer;
  // The header's key, once a write needed it, and the buffer its value is
  // encoded in: an insert rewrites the header and allocates neither.
  std::string header_key;
  std::string header_value;

  bool empty() const { return header.empty() && windows.empty(); }
  size_t MemoryBytes() const;
};

// What a write changed in one clock: counters it added or removed, per
// actor, or whole actors (merges and subtractions).
class ClockChanges {
 public:
  void Touch(ActorId actor, uint64_t counter) {
    // The common change, one actor's consecutive counters (an insert's new
    // dot), is kept without a map: WriteClock then often rewrites the
    // header alone.
    if (ranges_.empty() && whole_.empty()) {
      if (!has_single_) {
        has_single_ = true;
        single_ = {actor, counter, counter};
        return;
      }
      if (single_.actor == actor && single_.hi != UINT64_MAX &&
          counter == single_.hi + 1) {
        ++single_.hi;
        return;
      }
    }
    Spill();
    ranges_[actor].Insert(counter);
  }
  // Every dot of `dots`. REQUIRES: sorted ascending.
  void TouchSorted(std::span<const Dot> dots);
  void TouchActor(ActorId actor) {
    Spill();
    whole_.insert(actor);
  }
  // Every actor of `clock` (after merging or subtracting it).
  void TouchClock(const Clock& clock);
  bool empty() const {
    return !has_single_ && ranges_.empty() && whole_.empty();
  }

 private:
  struct Run {
    ActorId actor = 0;
    uint64_t lo = 0;
    uint64_t hi = 0;
  };
  void Spill() {
    if (!has_single_) return;
    has_single_ = false;
    ranges_[single_.actor].InsertRange(single_.lo, single_.hi);
  }

  friend void WriteClock(KeyspaceId keyspace, std::string_view set,
                         StateKind kind, const Clock& clock,
                         const ClockChanges& changes, StoredClock* stored,
                         WriteBatch* batch,
                         const clock_storage::HeaderTrailer* trailer);
  bool has_single_ = false;
  Run single_;  // While has_single_, the only change.
  absl::flat_hash_map<ActorId, IntervalSet> ranges_;
  absl::flat_hash_set<ActorId> whole_;
};

// Appends to *batch the puts and deletes that make the stored form of
// `clock` (of `kind`, for `set`) match it, for the parts `changes` names
// and for every actor whose base moved; updates *stored to what the batch
// leaves on disk. An empty clock has no keys at all. A set-clock passes its
// header trailer (`trailer`, else null for none): the header is rewritten
// when the trailer changed too.
void WriteClock(KeyspaceId keyspace, std::string_view set, StateKind kind,
                const Clock& clock, const ClockChanges& changes,
                StoredClock* stored, WriteBatch* batch,
                const clock_storage::HeaderTrailer* trailer = nullptr);

// Loads the clock of `kind` of `set` with one seek and a scan of its keys.
// *found is false (and *clock empty) if it has no header key. DataLoss for
// undecodable or inconsistent keys.
absl::Status ReadClock(Store* store, const ReadOptions& options,
                       KeyspaceId keyspace, std::string_view set,
                       StateKind kind, Clock* clock, StoredClock* stored,
                       bool* found);

// Loads both the set-clock and the set-tombstone of `set` with one seek (the
// two ranges are adjacent). *found tells whether the set-clock has a header.
// DataLoss (naming which) for undecodable or inconsistent keys.
absl::Status ReadClockAndTombstone(Store* store, const ReadOptions& options,
                                   KeyspaceId keyspace, std::string_view set,
                                   Clock* clock, StoredClock* stored_clock,
                                   Clock* tombstone,
                                   StoredClock* stored_tombstone, bool* found);

}  // namespace bigset

#endif  // BIGSET_LIB_REPLICA_STORED_CLOCK_H_
