// Replica: one actor's copy of many decomposed ORSWOT sets over one Store
// (docs/DESIGN.md, sections 1 to 3).
//
// Per set the replica keeps, in its keyspace of the store, a set-clock (every
// event it has seen), an optional set-tombstone (events whose keys may still
// be on disk but are removed) and one key per element insert. An update reads
// only the (cached) set-clock and writes one atomic batch, so its cost does
// not depend on the set's size.
//
// Semantics are add-wins. A remove or an add carries a context: the dots the
// client observed for that element (what a read or query returned). A remove
// with an empty context does nothing; an add with an empty context is
// concurrent with every existing add of the element.
//
// Durability: every method that changes state writes exactly one atomic
// batch before returning; a crash at any point leaves either the whole
// change or none of it. With `sync_writes` the batch is also fsynced, so an
// acknowledged change survives a machine crash; without it a process crash
// loses nothing, but a power loss may lose the last changes.
//
// Actor epochs: counters are never reused, also after such a loss. Open
// keeps the replica's actor id only if the store provably lost nothing of
// what the replica wrote (Close ran, or every write was synced); otherwise
// the replica takes a new actor id for its new events (docs/DESIGN.md,
// "Durability and actor epochs"). So call Close for a clean shutdown;
// destroying a replica without it is treated like a crash.
//
// The class is an interface (its implementation is internal to the
// library): Open makes one.
//
// Thread-safety: all methods are safe to call concurrently. Changes to one
// set serialise on a striped lock; different sets proceed in parallel.
// Reads and queries see a consistent snapshot.

#ifndef BIGSET_REPLICA_REPLICA_H_
#define BIGSET_REPLICA_REPLICA_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bigset/core/clock.h"
#include "bigset/core/delta.h"
#include "bigset/core/dot.h"
#include "bigset/core/element_dots.h"
#include "bigset/core/memory_budget.h"
#include "bigset/core/set_summary.h"
#include "bigset/core/update_op.h"
#include "bigset/export.h"
#include "bigset/keys/keys.h"
#include "bigset/replica/query.h"
#include "bigset/replica/replica_stats.h"
#include "bigset/replica/set_reader.h"
#include "bigset/store/store.h"

namespace bigset {

struct ReplicaOptions {
  // The replica's keyspace in the store (several replicas may share one).
  KeyspaceId keyspace = 0;
  // Upper bound on the memory of cached set-clocks and set-tombstones.
  size_t clock_cache_bytes = 64 << 20;
  // Number of lock stripes (and cache shards). REQUIRES: >= 1.
  int lock_stripes = 64;
  // fsync every write before acknowledging it.
  bool sync_writes = false;
  // Generates the actor id of a new keyspace, and of a new epoch (an open
  // after a run that may have lost writes); empty means random (from
  // std::random_device). A simulator injects a seeded source here so that
  // the same seed gives the same run. Must not return 0, nor repeat an id:
  // Open fails (FailedPrecondition) if a new epoch gets its predecessor's.
  std::function<ActorId()> actor_id_source;
  // Open without writing anything (for inspection, e.g. over a read-only
  // LevelDbStore): no actor id is created and no open marker written, and
  // every change (Update, Apply, Clear, SweepSome, StartSweeper) fails with
  // FailedPrecondition. actor() is the stored actor id (0 if there is none).
  bool read_only = false;
  // Buckets of the anti-entropy digest (see Replica::BucketDigests): the
  // replica keeps 8 bytes per bucket in memory. More buckets make a
  // comparison of replicas that differ narrow down to fewer sets. >= 1.
  uint32_t digest_buckets = 256;
  // Keep the anti-entropy digests (keys digest per set, bucket digests).
  // Off, writes skip that bookkeeping (a remove then does not look up the
  // keys it deletes) and the digests read as if nothing were stored: for a
  // replica no anti-entropy ever compares (e.g. a single node). A store
  // written with it off is counted once per set (a scan of its keys) when
  // opened with it on again.
  bool keep_digests = true;
  // Keep each set's count (Count in constant time): every write learns
  // whether the elements it touches were present, from the set's presence
  // filter or, when the filter cannot tell, with one seek. Off, Count scans
  // the set and a write reads nothing for it (for benchmarks, and embedders
  // that never count). A store written with it off is counted once per set
  // when a count is next needed.
  bool keep_counts = true;
  // Upper bound on the memory of the presence filters (20 to 80 bits per
  // element of each set that has one, as its filter grows by layers). A set
  // without a filter still has an exact count; its adds then cost a seek
  // each, as do membership queries of elements it lacks.
  size_t presence_filter_bytes = 64 << 20;
  // If set, the presence filters draw on this budget, shared with other
  // replicas (a node's), instead of presence_filter_bytes of their own.
  std::shared_ptr<MemoryBudget> presence_filter_budget;
};

// A set's count and what tells whether two replicas count the same
// elements (see Replica::CountSummary).
struct SetCount {
  bool found = false;  // The set has a clock here (something was written).
  uint64_t count = 0;
  // The set digest (SetSummary::digest; 0 without
  // ReplicaOptions::keep_digests) and the digest of the set-tombstone (0 if
  // it is empty): replicas whose digests are both equal hold the same
  // element keys, clock and tombstone, so the same elements.
  uint64_t digest = 0;
  uint64_t tombstone_digest = 0;
};

struct SweepOptions {
  // Keys read per atomic batch of deletes (and persisted progress).
  uint64_t batch_keys = 1000;
  // Rate limit of the background sweeper, in keys read per second, so that
  // foreground writes keep their latency.
  uint64_t keys_per_second = 100'000;
  // The sweeper works in ticks: every tick_micros it sweeps up to
  // keys_per_second * tick_micros / 1e6 keys (at least one). Used by the
  // replica's own sweeper thread (StartSweeper) and by a node's sweep timer.
  uint64_t tick_micros = 100'000;

  // Keys one tick sweeps.
  uint64_t KeysPerTick() const {
    const double keys = static_cast<double>(keys_per_second) *
                        static_cast<double>(tick_micros) / 1e6;
    if (keys < 1) return 1;
    if (keys >= 1e18) return uint64_t{1} << 60;
    return static_cast<uint64_t>(keys);
  }
};

// What one call of SweepSome did.
struct SweepProgress {
  uint64_t keys_read = 0;
  uint64_t keys_deleted = 0;
  uint64_t entries_done = 0;
  // True when the queue is empty: nothing is left to sweep.
  bool idle = false;
};

class BIGSET_EXPORT Replica {
 public:
  // Opens the replica of `options.keyspace` in `store`. A keyspace without
  // data gets a new random actor id, persisted; an existing one keeps its
  // actor. DataLoss if the keyspace holds sets but no actor id.
  // REQUIRES: `store` outlives the replica.
  static absl::StatusOr<std::unique_ptr<Replica>> Open(
      Store* store, const ReplicaOptions& options);

  // Repairs the keyspace of `options.keyspace` after its store lost data
  // (e.g. after LevelDbStore::Repair), so that Verify passes: retires the
  // actor id first (a new actor epoch, so no counter can be reused whatever
  // was lost), then, one atomic batch per set, rebuilds a lost or
  // unreadable set-clock from the set's element keys (and tombstone), adds
  // to a set-clock the dots of element keys it has not seen, drops an
  // unreadable set-tombstone, fixes the sweep queue, and deletes
  // undecodable keys. Reports each loss. Idempotent: run it again after an
  // interruption. REQUIRES: no replica of the keyspace is open.
  // `progress`, if set, is called every few thousand keys.
  static absl::StatusOr<RepairReport> Repair(
      Store* store, const ReplicaOptions& options,
      const KeysProgress& progress = nullptr);

  // Destroying a replica without Close is a crash, for the next Open.
  virtual ~Replica();
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  // Marks a clean shutdown (one synced write, which also makes every
  // earlier write durable), so the next Open keeps this actor id. Waits for
  // the writes in progress; later writes fail with FailedPrecondition.
  // Reads keep working. Idempotent.
  virtual absl::Status Close() = 0;

  // The actor id of this epoch of the replica.
  virtual ActorId actor() const = 0;
  // True if Open started a new actor epoch (a new keyspace, or one that was
  // not closed cleanly).
  virtual bool started_new_epoch() const = 0;
  virtual KeyspaceId keyspace() const = 0;

  // Coordinates `ops` on `set` (docs/DESIGN.md, "Coordinate an update"),
  // in order: for each context dot, deletes its key if the set-clock has
  // seen it, else adds the dot to the set-clock so the key is never written
  // later; for each add, increments the set-clock and puts the element key.
  // One atomic batch. Returns the delta to send to the other replicas.
  // InvalidArgument, changing nothing, if a context holds a dot of this
  // replica's actor that it never generated.
  virtual absl::StatusOr<Delta> Update(std::string_view set,
                                       std::span<const UpdateOp> ops) = 0;

  // Applies a delta from another replica (docs/DESIGN.md, "Apply a delta"):
  // idempotent, in any order, duplicates harmless. One atomic batch.
  // InvalidArgument, applying nothing (counted in deltas_rejected), if it
  // claims an event of this replica's actor that it never generated.
  virtual absl::Status Apply(const Delta& delta) = 0;
  // Apply, with the write not synced even under sync_writes: the caller
  // makes it durable with Sync() before anyone may learn that it was
  // applied (a node that acknowledges many deltas syncs once for all of
  // them: group commit). Deltas carry no event of this replica's actor, so
  // losing an unsynced one to a crash never lets a counter be reused.
  virtual absl::Status ApplyUnsynced(const Delta& delta) = 0;
  // Makes every earlier write of the store durable: one synced write (the
  // store's log is one file). OK at once without sync_writes.
  virtual absl::Status Sync() = 0;
  virtual bool sync_writes() const = 0;

  // Removes every dot `clock` has seen from `set` by merging it into the
  // set-tombstone (and the set-clock); reads honour it at once, and the
  // set's sweep-queue entry, written in the same batch, lets the sweeper
  // delete the covered keys later. Returns the delta that replicates the
  // clear. An empty clock clears nothing and writes nothing. InvalidArgument
  // if `clock` claims events of this replica's actor that it never
  // generated.
  virtual absl::StatusOr<Delta> Clear(std::string_view set,
                                      const Clock& clock) = 0;

  // ---- Sweeping (docs/DESIGN.md, "Clear and sweep").
  //
  // Keys covered by a set-tombstone stay on disk until swept. Every write
  // that adds dots to a tombstone queues its set (a sweep-queue entry in
  // the same batch); the sweeper takes entries shard by shard, deletes the
  // covered keys in bounded batches with its progress, and at the end of a
  // set subtracts the tombstone snapshot it swept with. It never reads a
  // set without an entry. Safe to run concurrently with every other
  // method; sweeps serialise among themselves.

  // Sweeps until it has read about `budget` keys or the queue is empty.
  // On an error (e.g. a set's undecodable sweep state) the next call starts
  // at the next shard, so one bad set does not stop the others.
  virtual absl::StatusOr<SweepProgress> SweepSome(uint64_t budget) = 0;
  // False only when the sweep queue is known to be empty (a SweepSome found
  // it so and no tombstone grew since): a cheap test for schedulers.
  virtual bool sweep_pending() const = 0;
  // Runs SweepSome on a background thread at about
  // `options.keys_per_second`, until StopSweeper, Close or destruction.
  // FailedPrecondition if one is running.
  virtual absl::Status StartSweeper(const SweepOptions& options = {}) = 0;
  virtual void StopSweeper() = 0;

  // ---- Transfer of a set (hand-off; docs/DESIGN.md, "Membership changes
  // and hand-off"). The sender streams the set with Read: one snapshot's
  // set-clock and the element keys its tombstone does not cover, in key
  // order, in chunks. The receiver applies the chunks in order with
  // ApplyTransferChunk, which records every dot it was sent in the
  // caller's `tracker` (one per transfer, starting empty), then calls
  // FinishTransfer with the sender's set-clock. A transfer that fails
  // restarts from the beginning of the set with an empty tracker; applying
  // a chunk again is harmless. Several transfers to one set may run at once,
  // each with its own tracker.

  // Stores each sent key whose dot the set-clock has not seen (the dot
  // enters the set-clock) and adds every sent dot to *tracker. One atomic
  // batch. InvalidArgument, changing nothing, if a dot claims an event of
  // this replica's actor that it never generated.
  virtual absl::Status ApplyTransferChunk(std::string_view set,
                                          std::span<const ElementDots> chunk,
                                          Clock* tracker) = 0;
  // Ends a transfer: the events the sender saw but did not send
  // (`sender_clock` minus `tracker`: removed there) that this replica has
  // seen go into the set-tombstone (with the set's sweep-queue entry), and
  // `sender_clock` into the set-clock. One atomic batch. InvalidArgument if
  // `sender_clock` claims events of this replica's actor it never
  // generated.
  virtual absl::Status FinishTransfer(std::string_view set,
                                      const Clock& sender_clock,
                                      const Clock& tracker) = 0;

  // Streams `set` from one snapshot (see set_reader.h).
  virtual absl::StatusOr<std::unique_ptr<SetReader>> Read(
      std::string_view set, const SetReadOptions& options = {}) = 0;

  // The dots of `element` (empty if absent): one seek.
  virtual absl::StatusOr<std::vector<Dot>> Contains(
      std::string_view set, std::string_view element) = 0;
  // Membership of many elements (a subset query), from one snapshot. If
  // `clock` is not null it receives the set-clock of that same snapshot.
  virtual absl::StatusOr<Membership> ContainsAll(
      std::string_view set, std::span<const std::string> elements,
      Clock* clock = nullptr) = 0;
  // Elements in a range, paged by `limit` and continuation tokens.
  virtual absl::StatusOr<RangeResult> Range(std::string_view set,
                                            const RangeQuery& query) = 0;
  // Elements starting with `prefix`, paged like Range.
  virtual absl::StatusOr<RangeResult> Prefix(
      std::string_view set, std::string_view prefix, size_t limit,
      std::string_view continuation = {}) = 0;
  // Number of present elements. With ReplicaOptions::keep_counts, the
  // count kept with the set-clock: constant time, unless the count is not
  // known (a set written before counts were kept, or after a clear whose
  // context covered only part of what this replica held): then one scan,
  // under the set's stripe lock, and the count is known again from then on
  // (and stored with the next write). Without keep_counts, a scan.
  virtual absl::StatusOr<uint64_t> Count(std::string_view set) = 0;
  // Count, with the set digest of the same moment (under the stripe lock):
  // what a cluster count compares across replicas.
  virtual absl::StatusOr<SetCount> CountSummary(std::string_view set) = 0;

  // The set's clock as of now (a copy).
  virtual absl::StatusOr<Clock> GetClock(std::string_view set) = 0;
  // The set's tombstone as of now (a copy): removed events whose keys may
  // not be swept yet.
  virtual absl::StatusOr<Clock> GetTombstone(std::string_view set) = 0;

  // Names of the sets in this keyspace, ascending: those after `after` (all
  // if absent), at most `limit` of them (0: no limit). Seeks from set to
  // set; never scans a set's elements.
  virtual absl::StatusOr<std::vector<std::string>> ListSets(
      std::optional<std::string> after, size_t limit) = 0;

  // Scans the whole keyspace and reports every inconsistency without
  // changing anything: element keys whose dot the set-clock has not seen,
  // element keys or tombstones of a set without a set-clock, undecodable
  // keys or values. `progress`, if set, is called every few thousand keys.
  virtual absl::StatusOr<VerifyReport> Verify(
      const KeysProgress& progress = nullptr) = 0;

  virtual ReplicaStats stats() const = 0;
  virtual absl::StatusOr<SetStats> GetSetStats(std::string_view set) = 0;

  // ---- Digests for anti-entropy (docs/ARCHITECTURE.md, "Anti-entropy").
  //
  // Every set has a digest: a hash of its name, of its element keys on disk
  // (the *keys digest*, kept in the set-clock's header and updated in every
  // write's batch), of its set-clock and of whether its tombstone is empty.
  // Sets hash onto `digest_buckets` buckets; the replica keeps each
  // bucket's sum of set digests in memory, built at Open from the sets'
  // clocks (no element key read) and updated by every write. Replicas that
  // hold the same sets with the same keys and clocks have equal buckets.
  // Keys covered by a tombstone count until swept: compare sets whose
  // tombstones are empty.

  virtual uint32_t digest_buckets() const = 0;
  // The buckets' digests now (each read atomically; a write in progress may
  // show in some and not yet in others).
  virtual std::vector<uint64_t> BucketDigests() const = 0;
  // The digest of the whole keyspace: a hash of BucketDigests().
  virtual uint64_t PartitionDigest() const = 0;
  // Calls `fn` with the summary (without its clock) of each set of
  // `buckets` (others are skipped), ascending by name, until `fn` returns
  // false. Lists every set of the keyspace and reads the clocks of those in
  // `buckets` (through the clock cache), never an element key; holds one
  // summary at a time, so memory does not grow with the sets. `fn` runs
  // with no lock held (it may call Summarize).
  virtual absl::Status ForEachSetSummary(
      std::span<const uint32_t> buckets,
      const std::function<bool(SetSummary&)>& fn) = 0;
  // The summary of one set, with its clock (empty for a set never written).
  virtual absl::StatusOr<SetSummary> Summarize(std::string_view set) = 0;

 protected:
  Replica() = default;
};

}  // namespace bigset

#endif  // BIGSET_REPLICA_REPLICA_H_
