// ReplicaImpl::Sweeper: a replica's sweeper, the targeted sweep of keys
// covered by set-tombstones (docs/DESIGN.md, "Clear and sweep"), whole in
// one class: the sweep queue's round-robin over shards, one sweep at a time
// (SweepSome), and the background thread (Start, Stop). Internal header.
//
// Persisted state, all in the replica's metadata (replica_internal.h):
//   a queue entry per set with tombstoned dots, written with them;
//   per set being swept, the tombstone snapshot it sweeps with and a cursor
//   (the last element key done), written with each batch of deletes.
// Every step is one atomic batch:
//   start:  put snapshot, put cursor (empty);
//   sweep:  delete covered keys of the next batch, put cursor;
//   finish: subtract the snapshot from the tombstone (and its stored
//           segments), delete snapshot and cursor, delete the queue entry
//           unless dots arrived since.
// A crash between steps resumes from the cursor with the same snapshot.
// Keys covered by the snapshot are never written again (the set-clock has
// seen their dots), so deleting them needs no lock; only the finish takes
// the set's stripe lock (through the replica's Commit).
//
// Thread-safety: thread-safe; sweeps serialise on sweep_mu_. It is a
// nested class of ReplicaImpl (its stripes, states and Commit are the
// replica's), owned by it, and reaches it through `replica_`.

#ifndef BIGSET_LIB_REPLICA_SWEEPER_H_
#define BIGSET_LIB_REPLICA_SWEEPER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "bigset/replica/replica.h"
#include "replica/replica_impl.h"
#include "replica/replica_internal.h"

namespace bigset {

class ReplicaImpl::Sweeper {
 public:
  // `replica` (not owned) owns the sweeper.
  explicit Sweeper(ReplicaImpl* replica) : replica_(replica) {}
  Sweeper(const Sweeper&) = delete;
  Sweeper& operator=(const Sweeper&) = delete;

  // Replica::SweepSome.
  absl::StatusOr<SweepProgress> SweepSome(uint64_t budget);
  // Replica::StartSweeper, Replica::StopSweeper.
  absl::Status Start(const SweepOptions& options);
  void Stop();
  // Entries in the sweep queue (a scan of the queue's keys).
  uint64_t QueueLength() const;

 private:
  // Sweeps one queued set, reading at most `budget` keys; true when the
  // set is done (its entry handled).
  absl::StatusOr<bool> SweepSet(std::string_view set, uint64_t budget,
                                uint64_t batch_keys, SweepProgress* progress);
  // The start of a sweep of `set`: checks that a resumed sweep's snapshot
  // is covered by the tombstone, or persists the tombstone as a new
  // sweep's snapshot (*snapshot) with an empty cursor. True if there is
  // nothing to sweep (the queue entry is then gone).
  absl::StatusOr<bool> BeginSweep(std::string_view set, bool resuming,
                                  Clock* snapshot, SweepProgress* progress);
  // The end of a sweep of `set`: the snapshot's dots leave the tombstone,
  // the snapshot and cursor go, and the queue entry if nothing is left.
  absl::Status FinishSweep(std::string_view set, const Clock& snapshot);

  ReplicaImpl* const replica_;

  absl::Mutex sweep_mu_;  // Held by a sweep.
  uint32_t next_shard_ ABSL_GUARDED_BY(sweep_mu_) = 0;
  uint64_t batch_keys_ ABSL_GUARDED_BY(sweep_mu_) = 1000;
  // Sets of each shard take turns: the last queue entry a sweep took (or
  // failed on) per shard; the next sweep of the shard takes the entry after
  // it, wrapping round.
  std::string shard_last_[replica_internal::kSweepShards] ABSL_GUARDED_BY(
      sweep_mu_);

  absl::Mutex thread_mu_;
  // The running thread's own stop flag: a thread being stopped keeps its
  // flag even if Start starts another meanwhile.
  std::shared_ptr<bool> stop_ ABSL_GUARDED_BY(thread_mu_);
  bool running_ ABSL_GUARDED_BY(thread_mu_) = false;
  std::thread thread_ ABSL_GUARDED_BY(thread_mu_);
};

}  // namespace bigset

#endif  // BIGSET_LIB_REPLICA_SWEEPER_H_
