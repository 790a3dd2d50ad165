// ReplicaImpl: the implementation of Replica (bigset/replica/replica.h).
// Internal header. Its methods are defined by concern, one source file
// each:
//
//   replica.cc           close, the stripes, writes (Update, Clear, Apply),
//                        the commit of a change, stats, and the calls the
//                        nested classes below take
//   replica_open.cc      Replica::Open (the actor and epoch; no ReplicaImpl
//                        method)
//   replica_read.cc      reads and queries (SetReader, Contains, Range),
//                        set summaries and the digests' build at Open
//   replica_count.cc     counts and presence filters
//   transfer_receiver.cc transfer chunks (ReplicaImpl::TransferReceiver)
//   sweeper.cc           the sweeper (ReplicaImpl::Sweeper, whole)
//   verify.cc            Verify (VerifyKeyspace: the store and keyspace alone)
//   replica_repair.cc    Replica::Repair (static: no ReplicaImpl)
//
// Thread-safety: as Replica; the private state is guarded as annotated.

#ifndef BIGSET_LIB_REPLICA_REPLICA_IMPL_H_
#define BIGSET_LIB_REPLICA_REPLICA_IMPL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "bigset/core/memory_budget.h"
#include "bigset/core/mutex.h"
#include "bigset/replica/replica.h"
#include "replica/digest_buckets.h"

namespace bigset {

class SetState;
class ClockCache;
class PresenceFilter;

class ReplicaImpl final : public Replica {
 public:
  // Open's work once the actor is known (see Replica::Open).
  ReplicaImpl(Store* store, const ReplicaOptions& options, ActorId actor,
              bool new_epoch);
  ~ReplicaImpl() override;

  absl::Status Close() ABSL_NO_THREAD_SAFETY_ANALYSIS override;
  ActorId actor() const override { return actor_; }
  bool started_new_epoch() const override { return new_epoch_; }
  KeyspaceId keyspace() const override { return options_.keyspace; }
  absl::StatusOr<Delta> Update(std::string_view set,
                               std::span<const UpdateOp> ops) override;
  absl::Status Apply(const Delta& delta) override;
  absl::Status ApplyUnsynced(const Delta& delta) override;
  absl::Status Sync() override;
  bool sync_writes() const override { return options_.sync_writes; }
  absl::StatusOr<Delta> Clear(std::string_view set,
                              const Clock& clock) override;
  absl::StatusOr<SweepProgress> SweepSome(uint64_t budget) override;
  bool sweep_pending() const override {
    return sweep_pending_.load(std::memory_order_acquire);
  }
  absl::Status StartSweeper(const SweepOptions& options = {}) override;
  void StopSweeper() override;
  absl::Status ApplyTransferChunk(std::string_view set,
                                  std::span<const ElementDots> chunk,
                                  Clock* tracker) override;
  absl::Status FinishTransfer(std::string_view set, const Clock& sender_clock,
                              const Clock& tracker) override;
  absl::StatusOr<std::unique_ptr<SetReader>> Read(
      std::string_view set, const SetReadOptions& options = {}) override;
  absl::StatusOr<std::vector<Dot>> Contains(std::string_view set,
                                            std::string_view element) override;
  absl::StatusOr<Membership> ContainsAll(std::string_view set,
                                         std::span<const std::string> elements,
                                         Clock* clock = nullptr) override;
  absl::StatusOr<RangeResult> Range(std::string_view set,
                                    const RangeQuery& query) override;
  absl::StatusOr<RangeResult> Prefix(
      std::string_view set, std::string_view prefix, size_t limit,
      std::string_view continuation = {}) override;
  absl::StatusOr<uint64_t> Count(std::string_view set) override;
  absl::StatusOr<SetCount> CountSummary(std::string_view set) override;
  absl::StatusOr<Clock> GetClock(std::string_view set) override;
  absl::StatusOr<Clock> GetTombstone(std::string_view set) override;
  absl::StatusOr<std::vector<std::string>> ListSets(
      std::optional<std::string> after, size_t limit) override;
  absl::StatusOr<VerifyReport> Verify(
      const KeysProgress& progress = nullptr) override;
  ReplicaStats stats() const override;
  absl::StatusOr<SetStats> GetSetStats(std::string_view set) override;
  uint32_t digest_buckets() const override { return digests_.size(); }
  std::vector<uint64_t> BucketDigests() const override {
    return digests_.Values();
  }
  uint64_t PartitionDigest() const override {
    return digests_.PartitionDigest();
  }
  absl::Status ForEachSetSummary(
      std::span<const uint32_t> buckets,
      const std::function<bool(SetSummary&)>& fn) override;
  absl::StatusOr<SetSummary> Summarize(std::string_view set) override;

 private:
  friend class Replica;  // Open builds the digests.

  // Sets hash onto stripes; every change of a set runs under its stripe's
  // lock, which also guards the stripe's shard of the clock cache.
  struct Stripe {
    explicit Stripe(size_t cache_bytes);
    ~Stripe();
    Mutex mu;
    std::unique_ptr<ClockCache> cache ABSL_PT_GUARDED_BY(mu);
    // The presence filters of the stripe's sets that have one.
    absl::flat_hash_map<std::string, std::unique_ptr<PresenceFilter>> filters
        ABSL_GUARDED_BY(mu);
    // Where a write builds the key of each element it adds (no allocation
    // per add).
    std::string key_scratch ABSL_GUARDED_BY(mu);
    // The batch of an update or a delta (no allocation per write), lent
    // by StripeBatch (lib/replica/stripe_batch.h).
    WriteBatch batch_scratch ABSL_GUARDED_BY(mu);
  };
  class Reader;
  // The counters, each copied as is into the ReplicaStats field of its
  // name (stats()): one list, so a counter is added in one place here.
  // clang-format off
#define BIGSET_REPLICA_COUNTERS(X)                                      \
  X(updates_coordinated) X(deltas_applied) X(clears) X(keys_written)   \
  X(keys_deleted) X(clock_cache_hits) X(clock_cache_misses)            \
  X(deltas_rejected) X(bytes_written) X(sweep_entries_done)            \
  X(sweep_keys_read) X(sweep_keys_deleted) X(sweep_bytes_reclaimed)    \
  X(sweep_micros) X(sweep_errors) X(count_scans) X(presence_seeks)     \
  X(presence_seeks_saved) X(presence_filters_dropped)
  // clang-format on
  struct Counters {
#define BIGSET_REPLICA_COUNTER_FIELD(name) std::atomic<uint64_t> name{0};
    BIGSET_REPLICA_COUNTERS(BIGSET_REPLICA_COUNTER_FIELD)
#undef BIGSET_REPLICA_COUNTER_FIELD
  };
  // The sweeper (sweeper.h) and the receiving side of a transfer
  // (transfer_receiver.h): nested classes, so that they reach the stripes,
  // the set states and Commit.
  class Sweeper;
  class TransferReceiver;

  // FailedPrecondition after Close.
  absl::Status CheckOpen() const;
  // InvalidArgument if a dot of `dots` is of this replica's actor and above
  // the largest counter `clock` has seen for it.
  absl::Status CheckOwnDots(std::string_view set, const Clock& clock,
                            std::span<const Dot> dots) const;

  Stripe& StripeFor(std::string_view set);
  // Re-accounts the set's digest in its bucket after a committed change.
  void AccountDigest(SetState* state);
  // Sums the set digests of every set into the buckets (at Open).
  absl::Status BuildDigests();
  // The keys digest of `set` from a scan of its element keys.
  absl::StatusOr<uint64_t> ScanKeysDigest(std::string_view set);
  // Returns the cached state of `set`, loading it on a miss.
  absl::StatusOr<SetState*> LoadState(Stripe& stripe, std::string_view set)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(stripe.mu);
  // CheckOpen, then LoadState: the state of a set about to change.
  absl::StatusOr<SetState*> OpenState(Stripe& stripe, std::string_view set)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(stripe.mu);
  absl::StatusOr<SetState> ReadStateFromStore(std::string_view set);
  // What a change of a set did to its clock and tombstone.
  struct StateChanges;
  // Apply and ApplyUnsynced (`defer_sync`: the batch is not synced).
  absl::Status ApplyImpl(const Delta& delta, bool defer_sync);
  // Adds the clock and tombstone keys `changes` calls for to `batch`, writes
  // it and updates the cache; on failure drops the cached state, which was
  // already modified, so the next access reloads it from the store.
  absl::Status Commit(Stripe& stripe, std::string_view set, SetState* state,
                      WriteBatch* batch, const StateChanges& changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(stripe.mu);
  // A dot this set-clock has not seen enters it (and its digest).
  void AddNewDot(Dot dot, SetState* state, StateChanges* changes);
  // Puts the element key of an unseen dot (clock, digests, batch).
  void PutNewKey(Stripe& stripe, std::string_view set, std::string_view element,
                 Dot dot, SetState* state, WriteBatch* batch,
                 StateChanges* changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(stripe.mu);
  // Applies one op's context to the state and batch (docs/DESIGN.md: seen
  // dots delete their key, unseen dots enter the set-clock). Looks up each
  // key it deletes, so that the keys digest counts only real deletes.
  // With `live` (the element's live dots, see LiveDots), existence is read
  // from it and it is kept up to date.
  absl::Status ApplyContext(std::string_view set, std::string_view element,
                            std::span<const Dot> context, SetState* state,
                            WriteBatch* batch, StateChanges* changes,
                            std::vector<Dot>* live = nullptr);
  void ApplyClear(const Clock& clock, SetState* state, StateChanges* changes);
  // ---- Counts (docs/DESIGN.md, "Counts").
  // At the start of a write: the set's presence filter in changes->filter,
  // made (empty) for a set known to be empty, or built with a count scan
  // once enough seeks were made without one.
  absl::Status PrepareLiveness(Stripe& stripe, std::string_view set,
                               SetState* state, StateChanges* changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(stripe.mu);
  // For a write of one element (changes->one_element) with a filter: hashes
  // `element` and starts loading the filter's blocks it will probe.
  void StartPresenceProbe(std::string_view element, StateChanges* changes);
  // For a write of many elements with a filter: hashes them all and starts
  // loading the first ones' blocks; PrefetchPresence(i) before op i's
  // LiveDots loads those of an op further on and hands LiveDots op i's
  // hash, so that the filter's cache misses overlap.
  void HashForPresence(std::span<const std::string_view> elements,
                       StateChanges* changes);
  void PrefetchPresence(size_t op, StateChanges* changes);
  // The live dots of `element` as this write leaves them so far: the
  // filter's "absent", else one seek; then amended by the write itself.
  absl::StatusOr<std::vector<Dot>*> LiveDots(std::string_view set,
                                             std::string_view element,
                                             SetState* state,
                                             StateChanges* changes);
  // Op `op`'s LiveDots in a write of many elements (PrefetchPresence
  // first). On an error the set's cached state, which the write may have
  // changed already, is dropped.
  absl::StatusOr<std::vector<Dot>*> LiveDotsOfOp(
      Stripe& stripe, std::string_view set, size_t op, std::string_view element,
      SetState* state, StateChanges* changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(stripe.mu);
  // An element key is put for the element of presence hash `hash`
  // (PresenceFilter::Hash): the filter learns it.
  void NotePresent(Stripe& stripe, std::string_view set, uint64_t hash,
                   StateChanges* changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(stripe.mu);
  // Adjusts the count after an element went from `was` to `now` present.
  static void Recount(bool was, bool now, SetState* state);
  // The tombstone grew: the count is 0 if it now covers every dot that can
  // have a key (`all_covered`), else not known until a count scan.
  void TombstoneGrew(bool all_covered, SetState* state, StateChanges* changes);
  // Counts the set with a scan (and builds its presence filter if the
  // budget allows). REQUIRES: no uncommitted change in `state`.
  absl::Status CountScan(Stripe& stripe, std::string_view set, SetState* state)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(stripe.mu);
  // Count by a scan of a snapshot, without the stripe lock (no counts kept).
  absl::StatusOr<uint64_t> ScanCount(std::string_view set);
  // Makes room for `bytes` more of presence filters, dropping other filters
  // of the stripe if needed; false if it cannot.
  bool ReserveFilterBytes(Stripe& stripe, std::string_view set, size_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(stripe.mu);
  void DropFilter(Stripe& stripe, std::string_view set, StateChanges* changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(stripe.mu);
  // A filter's `bytes` were freed: back to the budget.
  void ReleaseFilterBytes(size_t bytes);

  // Dots of `element` present on the replica now (tombstone filtered).
  absl::StatusOr<std::vector<Dot>> CurrentDots(Iterator* it,
                                               std::string_view set,
                                               std::string_view element,
                                               const Clock& tombstone);
  // A snapshot and a copy of the set's tombstone and clock, consistent;
  // and, for each element of `probe`, whether the set's presence filter
  // (if it has one) says it is certainly absent from that snapshot.
  struct View {
    std::unique_ptr<const Snapshot> snapshot;
    Clock clock;
    Clock tombstone;
    std::vector<bool> absent;
  };
  absl::StatusOr<View> OpenView(std::string_view set, bool with_clock,
                                std::span<const std::string> probe = {});
  // The key a scan of `set` within `bounds` seeks to; empty for the start
  // of the set.
  std::string SeekKey(std::string_view set, const ElementBounds& bounds) const;

  Store* const store_;
  const ReplicaOptions options_;
  const ActorId actor_;
  const bool new_epoch_;
  const WriteOptions write_options_;
  std::atomic<bool> closed_{false};
  // Serialises sweeps; owns the background sweeper thread, if any.
  std::unique_ptr<Sweeper> sweeper_;
  // See sweep_pending(). Set after a queue entry is written, cleared by a
  // sweep before it looks at the queue, so an entry is never missed.
  std::atomic<bool> sweep_pending_{true};
  std::vector<std::unique_ptr<Stripe>> stripes_;
  // The anti-entropy digests, a sum of set digests per bucket of sets.
  DigestBuckets digests_;
  // Bytes of this replica's presence filters, reserved from
  // `filter_budget_` (its own, or one it shares).
  std::atomic<size_t> filter_bytes_{0};
  std::shared_ptr<MemoryBudget> filter_budget_;
  Counters counters_;
};

}  // namespace bigset

#endif  // BIGSET_LIB_REPLICA_REPLICA_IMPL_H_
