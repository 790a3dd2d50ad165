#include "bigset/replica/replica.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/coding.h"
#include "core/digest.h"
#include "core/status_macros.h"
#include "core/string_view_compat.h"
#include "replica/clock_cache.h"
#include "replica/presence_filter.h"
#include "replica/replica_impl.h"
#include "replica/replica_internal.h"
#include "replica/set_state.h"
#include "replica/stored_clock.h"
#include "replica/stripe_batch.h"
#include "replica/sweeper.h"
#include "replica/transfer_receiver.h"
#include "replica/verify.h"

namespace bigset {

using replica_internal::Printable;
using replica_internal::SetCorruption;

namespace {

// Puts the key of `element`'s `dot`, built in *scratch (a stripe's buffer:
// no allocation per insert once it has grown), and returns it.
const std::string& PutElementKey(std::string* scratch, KeyspaceId keyspace,
                                 std::string_view set, std::string_view element,
                                 Dot dot, WriteBatch* batch) {
  scratch->clear();
  AppendElementKey(scratch, keyspace, set, element, dot);
  batch->Put(*scratch, "");
  return *scratch;
}

}  // namespace

using replica_internal::kClosedCleanly;
using replica_internal::kShutdownMetadata;
using replica_internal::ShutdownValue;

ReplicaImpl::ReplicaImpl(Store* store, const ReplicaOptions& options,
                         ActorId actor, bool new_epoch)
    : store_(store),
      options_(options),
      actor_(actor),
      new_epoch_(new_epoch),
      write_options_{options.sync_writes},
      sweeper_(std::make_unique<Sweeper>(this)),
      digests_(options.digest_buckets) {
  filter_budget_ =
      options.presence_filter_budget != nullptr
          ? options.presence_filter_budget
          : std::make_shared<MemoryBudget>(options.presence_filter_bytes);
  size_t per_stripe =
      std::max<size_t>(1, options.clock_cache_bytes / options.lock_stripes);
  for (int i = 0; i < options.lock_stripes; ++i) {
    stripes_.push_back(std::make_unique<Stripe>(per_stripe));
  }
}

ReplicaImpl::~ReplicaImpl() {
  StopSweeper();
  // A shared budget outlives this replica's filters.
  filter_budget_->Release(filter_bytes_.load());
}

absl::Status ReplicaImpl::Close() {
  if (options_.read_only) return absl::OkStatus();
  StopSweeper();
  // Every stripe's lock: no write is half-way, and none starts after the
  // marker (it would be unsynced behind a "clean" record).
  for (auto& stripe : stripes_) stripe->mu.Lock();
  absl::Status s = absl::OkStatus();
  if (!closed_.load(std::memory_order_relaxed)) {
    WriteBatch batch;
    batch.Put(MetadataKey(options_.keyspace, kShutdownMetadata),
              ShutdownValue(kClosedCleanly));
    // A synced write makes every earlier write in the log durable too.
    WriteOptions sync;
    sync.sync = true;
    s = store_->Write(sync, batch);
    if (s.ok()) closed_.store(true, std::memory_order_relaxed);
  }
  for (auto& stripe : stripes_) stripe->mu.Unlock();
  return s;
}

absl::Status ReplicaImpl::CheckOpen() const {
  if (options_.read_only) {
    return absl::FailedPreconditionError("replica is read-only");
  }
  if (closed_.load(std::memory_order_relaxed)) {
    return absl::FailedPreconditionError("replica is closed");
  }
  return absl::OkStatus();
}

absl::StatusOr<SweepProgress> ReplicaImpl::SweepSome(uint64_t budget) {
  return sweeper_->SweepSome(budget);
}

absl::Status ReplicaImpl::StartSweeper(const SweepOptions& options) {
  return sweeper_->Start(options);
}

void ReplicaImpl::StopSweeper() { sweeper_->Stop(); }

absl::Status ReplicaImpl::ApplyTransferChunk(std::string_view set,
                                             std::span<const ElementDots> chunk,
                                             Clock* tracker) {
  return TransferReceiver(this).ApplyChunk(set, chunk, tracker);
}

absl::Status ReplicaImpl::FinishTransfer(std::string_view set,
                                         const Clock& sender_clock,
                                         const Clock& tracker) {
  return TransferReceiver(this).Finish(set, sender_clock, tracker);
}

absl::StatusOr<VerifyReport> ReplicaImpl::Verify(const KeysProgress& progress) {
  return VerifyKeyspace(store_, options_.keyspace, progress);
}

ReplicaImpl::Stripe::Stripe(size_t cache_bytes)
    : cache(std::make_unique<ClockCache>(cache_bytes)) {}
ReplicaImpl::Stripe::~Stripe() = default;

ReplicaImpl::Stripe& ReplicaImpl::StripeFor(std::string_view set) {
  // A fixed hash, not absl::Hash (seeded per process): which sets share a
  // stripe, and so a clock cache, is then the same in every run, and a
  // test's cache misses (its time) depend on its seed alone.
  const uint64_t h = digest::Hash64(set, 0x7a3c5e1f0b2d4968ULL);
  return *stripes_[h % stripes_.size()];
}

absl::StatusOr<SetState> ReplicaImpl::ReadStateFromStore(std::string_view set) {
  SetState state;
  if (options_.keep_digests) {
    state.name_hash = digest::SetNameHash(set);
    state.bucket = digests_.BucketOf(set);
  }
  bool found = false;
  absl::Status s = ReadClockAndTombstone(
      store_, ReadOptions(), options_.keyspace, set, &state.clock,
      &state.stored_clock, &state.tombstone, &state.stored_tombstone, &found);
  if (!s.ok()) return SetCorruption(set, ToStd(s.message()));
  if (!found) {
    // Never treat a missing clock as fresh when the set has keys: its
    // counters could be reused.
    auto it =
        store_->NewIterator(ReadOptions(), SetRange(options_.keyspace, set));
    it->SeekToFirst();
    BIGSET_RETURN_IF_ERROR(it->status());
    if (it->Valid()) {
      return SetCorruption(set, "has keys but no set-clock");
    }
    // A set with no clock is in no bucket: its digest is 0 until it exists.
    state.count_known = true;
    return state;
  }
  if (options_.keep_counts && state.stored_clock.trailer.count.has_value()) {
    state.count_known = true;
    state.count = *state.stored_clock.trailer.count;
  }
  if (!options_.keep_digests) return state;
  state.clock_digest = digest::ClockDigest(state.clock);
  if (!state.stored_clock.trailer.keys_digest.has_value()) {
    // Written before keys digests were kept: count the keys once; the next
    // write stores the digest.
    absl::StatusOr<uint64_t> keys = ScanKeysDigest(set);
    if (!keys.ok()) return keys.status();
    state.keys_digest = *keys;
  } else {
    state.keys_digest = *state.stored_clock.trailer.keys_digest;
  }
  state.set_digest =
      digest::SetDigestOfHash(state.name_hash, state.keys_digest,
                              state.clock_digest, state.tombstone.empty());
  return state;
}

absl::StatusOr<SetState*> ReplicaImpl::LoadState(Stripe& stripe,
                                                 std::string_view set) {
  if (SetState* cached = stripe.cache->Lookup(set)) {
    counters_.clock_cache_hits.fetch_add(1, std::memory_order_relaxed);
    return cached;
  }
  counters_.clock_cache_misses.fetch_add(1, std::memory_order_relaxed);
  absl::StatusOr<SetState> state = ReadStateFromStore(set);
  if (!state.ok()) return state.status();
  return stripe.cache->Insert(set, std::move(*state));
}

absl::StatusOr<SetState*> ReplicaImpl::OpenState(Stripe& stripe,
                                                 std::string_view set) {
  BIGSET_RETURN_IF_ERROR(CheckOpen());
  return LoadState(stripe, set);
}

absl::Status ReplicaImpl::ApplyContext(std::string_view set,
                                       std::string_view element,
                                       std::span<const Dot> context,
                                       SetState* state, WriteBatch* batch,
                                       StateChanges* changes,
                                       std::vector<Dot>* live) {
  for (Dot dot : context) {
    if (!dot.valid()) continue;
    if (state->clock.Seen(dot)) {
      // A key under the tombstone is removed already and only the sweeper
      // deletes it (so that the keys digest counts each delete once).
      if (state->tombstone.Seen(dot)) continue;
      if (live != nullptr) {
        // The element's live dots are known: a seen, uncovered dot has a
        // key iff it is one of them.
        auto pos = std::find(live->begin(), live->end(), dot);
        if (pos == live->end()) continue;  // Removed already.
        live->erase(pos);
        if (options_.keep_digests) {
          state->keys_digest -= digest::KeyDigest(element, dot);
        }
        batch->Delete(ElementKey(options_.keyspace, set, element, dot));
        continue;
      }
      std::string key = ElementKey(options_.keyspace, set, element, dot);
      if (!options_.keep_digests) {
        // Deleting an absent key is harmless; no digest to keep exact.
        batch->Delete(key);
        continue;
      }
      bool exists = false;
      if (changes->deleted_keys.contains(key)) {
        exists = false;
      } else if (changes->put_keys.contains(key)) {
        exists = true;
      } else {
        std::string value;
        absl::Status s = store_->Get(ReadOptions(), key, &value);
        if (!s.ok() && !absl::IsNotFound(s)) return s;
        exists = s.ok();
      }
      if (!exists) continue;  // Removed already.
      state->keys_digest -= digest::KeyDigest(element, dot);
      batch->Delete(key);
      // Always remembered: a context may name a dot twice.
      changes->put_keys.erase(key);
      changes->deleted_keys.insert(std::move(key));
    } else {
      // Seen from now on, so the add carrying it is never written here.
      AddNewDot(dot, state, changes);
    }
  }
  return absl::OkStatus();
}

void ReplicaImpl::AddNewDot(Dot dot, SetState* state, StateChanges* changes) {
  state->clock.AddDot(dot);
  if (options_.keep_digests) {
    state->clock_digest =
        digest::AddClockDigests(state->clock_digest, digest::DotDigest(dot));
  }
  changes->clock.Touch(dot.actor, dot.counter);
}

void ReplicaImpl::PutNewKey(Stripe& stripe, std::string_view set,
                            std::string_view element, Dot dot, SetState* state,
                            WriteBatch* batch, StateChanges* changes) {
  const std::string& key = PutElementKey(&stripe.key_scratch, options_.keyspace,
                                         set, element, dot, batch);
  if (options_.keep_digests) {
    state->keys_digest += digest::KeyDigest(element, dot);
  }
  AddNewDot(dot, state, changes);
  if (changes->track_keys) {
    changes->deleted_keys.erase(key);
    changes->put_keys.insert(key);
  }
}

void ReplicaImpl::ApplyClear(const Clock& clock, SetState* state,
                             StateChanges* changes) {
  // Only dots already seen can have keys on disk; the others just enter the
  // set-clock so that their keys are never written.
  const Clock hidden = Clock::Intersection(clock, state->clock);
  if (options_.keep_counts && !state->tombstone.Descends(hidden)) {
    // Every dot that can have a key covered (by this clear or an earlier
    // one): nothing is present. Otherwise which elements lost their last
    // live key is not known without a scan.
    const bool all_covered =
        clock.Descends(state->clock) ||
        state->tombstone.Descends(Clock::Complement(state->clock, clock));
    TombstoneGrew(all_covered, state, changes);
  }
  state->tombstone.Merge(hidden);
  state->clock.Merge(clock);
  // As costly as the merge: linear in the runs.
  if (options_.keep_digests) {
    state->clock_digest = digest::ClockDigest(state->clock);
  }
  changes->tombstone.TouchClock(clock);
  changes->clock.TouchClock(clock);
  changes->tombstone_grew = true;
}

absl::Status ReplicaImpl::Commit(Stripe& stripe, std::string_view set,
                                 SetState* state, WriteBatch* batch,
                                 const StateChanges& changes) {
  // The header's trailer: what is not kept (or not known) is left out, so
  // that a stale value never stays behind.
  clock_storage::HeaderTrailer trailer;
  if (options_.keep_digests) trailer.keys_digest = state->keys_digest;
  if (options_.keep_counts && state->count_known) {
    trailer.count = state->count;
  }
  if (!changes.clock.empty() ||
      (!state->clock.empty() && !(state->stored_clock.trailer == trailer))) {
    WriteClock(options_.keyspace, set, StateKind::kClock, state->clock,
               changes.clock, &state->stored_clock, batch, &trailer);
  }
  if (!changes.tombstone.empty()) {
    WriteClock(options_.keyspace, set, StateKind::kTombstone, state->tombstone,
               changes.tombstone, &state->stored_tombstone, batch);
  }
  if (changes.tombstone_grew) {
    // In the same batch as the dots: the sweeper will find the set.
    batch->Put(replica_internal::SweepQueueKey(options_.keyspace, set),
               replica_internal::EncodeSweepValue(""));
  }
  if (batch->Count() == 0) {
    AccountDigest(state);
    stripe.cache->Recharge(set, state);
    return absl::OkStatus();
  }
  absl::Status s = store_->Write(
      changes.defer_sync ? WriteOptions() : write_options_, *batch);
  if (!s.ok()) {
    // The cached state already holds the change; drop it so the next access
    // reloads what is really on disk.
    stripe.cache->Erase(set);
    return s;
  }
  counters_.bytes_written.fetch_add(batch->ApproximateSize(),
                                    std::memory_order_relaxed);
  if (changes.tombstone_grew) {
    sweep_pending_.store(true, std::memory_order_release);
  }
  if (changes.reset_filter && changes.filter != nullptr) {
    ReleaseFilterBytes(changes.filter->MemoryBytes());
    changes.filter->Reset();
  }
  AccountDigest(state);
  stripe.cache->Recharge(set, state);
  return absl::OkStatus();
}

void ReplicaImpl::AccountDigest(SetState* state) {
  if (!options_.keep_digests) return;
  const uint64_t now =
      digest::SetDigestOfHash(state->name_hash, state->keys_digest,
                              state->clock_digest, state->tombstone.empty());
  if (now == state->set_digest) return;
  digests_.Add(state->bucket, now - state->set_digest);
  state->set_digest = now;
}

absl::StatusOr<std::vector<Dot>> ReplicaImpl::CurrentDots(
    Iterator* it, std::string_view set, std::string_view element,
    const Clock& tombstone) {
  std::vector<Dot> dots;
  const KeyRange range = ElementRange(options_.keyspace, set, element);
  ParsedKey key;
  // Bigset keys compare bytewise, so the range's limit bounds the scan.
  for (it->Seek(range.start); it->Valid() && it->key() < range.limit;
       it->Next()) {
    absl::Status s = DecodeKey(it->key(), &key);
    if (!s.ok()) return SetCorruption(set, "bad element key", s.message());
    if (!tombstone.Seen(key.dot)) dots.push_back(key.dot);
  }
  BIGSET_RETURN_IF_ERROR(it->status());
  return dots;
}

absl::Status ReplicaImpl::CheckOwnDots(std::string_view set, const Clock& clock,
                                       std::span<const Dot> dots) const {
  const uint64_t max = clock.MaxCounter(actor_);
  for (Dot dot : dots) {
    if (dot.actor == actor_ && dot.counter > max) {
      return absl::InvalidArgumentError(absl::StrCat(
          "set \"", Printable(set), "\": dot ", DotToString(dot),
          " claims an event of this replica's actor that it never generated "
          "(its latest is ",
          max, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Delta> ReplicaImpl::Update(std::string_view set,
                                          std::span<const UpdateOp> ops) {
  Stripe& stripe = StripeFor(set);
  MutexLock lock(&stripe.mu);
  BIGSET_ASSIGN_OR_RETURN(SetState * state, OpenState(stripe, set));
  // Validate before changing the (cached) state.
  bool from_replica = false;
  for (const UpdateOp& op : ops) {
    BIGSET_RETURN_IF_ERROR(CheckOwnDots(set, state->clock, op.context));
    from_replica |= op.context_from_replica;
  }

  StateChanges changes;
  // Counts, and contexts taken from the replica, need each element's live
  // dots; without them a remove looks up the keys it deletes (digests) or
  // deletes blindly.
  const bool track_live = options_.keep_counts || from_replica;
  changes.track_keys = ops.size() > 1 && !track_live;
  changes.one_element = ops.size() == 1;
  if (absl::Status s = PrepareLiveness(stripe, set, state, &changes); !s.ok()) {
    stripe.cache->Erase(set);
    return s;
  }
  // A large set's filter misses the cache: its loads start now, under the
  // delta's and the batch's setup.
  if (track_live && changes.one_element) {
    StartPresenceProbe(ops.front().element, &changes);
  }

  Delta delta;
  delta.set.assign(set);
  delta.ops.reserve(ops.size());
  StripeBatch lent(&stripe.batch_scratch);
  WriteBatch& batch = lent.get();
  {
    // Each add's key (prefix, set, element, dot) and framing, and the
    // set-clock's header: one allocation for the common batch.
    size_t bytes = 64 + set.size();
    for (const UpdateOp& op : ops) bytes += 48 + set.size() + op.element.size();
    batch.Reserve(bytes);
  }
  uint64_t puts = 0, deletes = 0;
  if (track_live && !changes.one_element && changes.filter != nullptr) {
    std::vector<std::string_view> elements;
    elements.reserve(ops.size());
    for (const UpdateOp& op : ops) elements.push_back(op.element);
    HashForPresence(elements, &changes);
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    const UpdateOp& op = ops[i];
    DeltaOp& d = delta.ops.emplace_back();
    d.element = op.element;
    std::vector<Dot>* live = nullptr;
    if (track_live) {
      BIGSET_ASSIGN_OR_RETURN(
          live, LiveDotsOfOp(stripe, set, i, op.element, state, &changes));
    }
    const bool was_present = live != nullptr && !live->empty();
    if (op.context_from_replica) {
      // The replica's dots and the caller's (a read quorum's), each once.
      d.context = *live;
      d.context.insert(d.context.end(), op.context.begin(), op.context.end());
      std::sort(d.context.begin(), d.context.end());
      d.context.erase(std::unique(d.context.begin(), d.context.end()),
                      d.context.end());
    } else {
      d.context = op.context;
    }
    const size_t before = batch.Count();
    if (absl::Status s = ApplyContext(set, op.element, d.context, state, &batch,
                                      &changes, live);
        !s.ok()) {
      stripe.cache->Erase(set);
      return s;
    }
    deletes += batch.Count() - before;
    if (op.kind == UpdateOp::Kind::kAdd) {
      absl::StatusOr<Dot> dot = state->clock.Increment(actor_);
      if (!dot.ok()) {
        stripe.cache->Erase(set);
        return dot.status();
      }
      const std::string& key =
          PutElementKey(&stripe.key_scratch, options_.keyspace, set, op.element,
                        *dot, &batch);
      if (options_.keep_digests) {
        state->keys_digest += digest::KeyDigest(op.element, *dot);
        state->clock_digest = digest::AddClockDigests(state->clock_digest,
                                                      digest::DotDigest(*dot));
      }
      changes.clock.Touch(dot->actor, dot->counter);
      if (changes.track_keys) changes.put_keys.insert(key);
      ++puts;
      d.add = *dot;
      if (live != nullptr) live->push_back(*dot);
      NotePresent(stripe, set, changes.element_hash, &changes);
    }
    if (live != nullptr) Recount(was_present, !live->empty(), state);
  }
  BIGSET_RETURN_IF_ERROR(Commit(stripe, set, state, &batch, changes));
  counters_.updates_coordinated.fetch_add(1, std::memory_order_relaxed);
  counters_.keys_written.fetch_add(puts + 1, std::memory_order_relaxed);
  counters_.keys_deleted.fetch_add(deletes, std::memory_order_relaxed);
  return delta;
}

absl::StatusOr<Delta> ReplicaImpl::Clear(std::string_view set,
                                         const Clock& clock) {
  Stripe& stripe = StripeFor(set);
  MutexLock lock(&stripe.mu);
  BIGSET_ASSIGN_OR_RETURN(SetState * state, OpenState(stripe, set));
  Delta delta;
  delta.set.assign(set);
  if (clock.empty()) return delta;  // Clears nothing.
  if (clock.MaxCounter(actor_) > state->clock.MaxCounter(actor_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "set \"", Printable(set),
        "\": clear clock claims events of this replica's actor that it never "
        "generated"));
  }
  StateChanges changes;
  BIGSET_RETURN_IF_ERROR(PrepareLiveness(stripe, set, state, &changes));
  ApplyClear(clock, state, &changes);
  WriteBatch batch;
  BIGSET_RETURN_IF_ERROR(Commit(stripe, set, state, &batch, changes));
  counters_.clears.fetch_add(1, std::memory_order_relaxed);
  delta.clear = clock;
  return delta;
}

// ---- Deltas from other replicas: each applied in one atomic batch.

absl::Status ReplicaImpl::Apply(const Delta& delta) {
  return ApplyImpl(delta, /*defer_sync=*/false);
}

absl::Status ReplicaImpl::ApplyUnsynced(const Delta& delta) {
  return ApplyImpl(delta, /*defer_sync=*/true);
}

absl::Status ReplicaImpl::Sync() {
  BIGSET_RETURN_IF_ERROR(CheckOpen());
  if (!options_.sync_writes) return absl::OkStatus();
  WriteOptions sync;
  sync.sync = true;
  return store_->Write(sync, WriteBatch());
}

absl::Status ReplicaImpl::ApplyImpl(const Delta& delta, bool defer_sync) {
  const std::string_view set = delta.set;
  Stripe& stripe = StripeFor(set);
  MutexLock lock(&stripe.mu);
  BIGSET_ASSIGN_OR_RETURN(SetState * state, OpenState(stripe, set));
  // A delta claiming events of this replica's actor that it never generated
  // is refused whole (applying it would block every later add).
  if (delta.clear.has_value() &&
      delta.clear->MaxCounter(actor_) > state->clock.MaxCounter(actor_)) {
    counters_.deltas_rejected.fetch_add(1, std::memory_order_relaxed);
    return absl::InvalidArgumentError(absl::StrCat(
        "set \"", Printable(set),
        "\": clear clock claims events of this replica's actor that it never "
        "generated"));
  }
  for (const DeltaOp& op : delta.ops) {
    absl::Status s = CheckOwnDots(set, state->clock, op.context);
    if (s.ok() && op.add.has_value()) {
      s = CheckOwnDots(set, state->clock, std::span(&*op.add, 1));
    }
    if (!s.ok()) {
      counters_.deltas_rejected.fetch_add(1, std::memory_order_relaxed);
      return s;
    }
  }

  StripeBatch lent(&stripe.batch_scratch);
  WriteBatch& batch = lent.get();
  StateChanges changes;
  changes.defer_sync = defer_sync;
  changes.track_keys = delta.ops.size() > 1 && !options_.keep_counts;
  changes.one_element = delta.ops.size() == 1;
  if (absl::Status s = PrepareLiveness(stripe, set, state, &changes); !s.ok()) {
    stripe.cache->Erase(set);
    return s;
  }
  if (options_.keep_counts && changes.one_element) {
    StartPresenceProbe(delta.ops.front().element, &changes);
  }
  uint64_t puts = 0;
  if (delta.clear.has_value() && !delta.clear->empty())
    ApplyClear(*delta.clear, state, &changes);
  if (options_.keep_counts && !changes.one_element &&
      changes.filter != nullptr) {
    std::vector<std::string_view> elements;
    elements.reserve(delta.ops.size());
    for (const DeltaOp& op : delta.ops) elements.push_back(op.element);
    HashForPresence(elements, &changes);
  }
  for (size_t i = 0; i < delta.ops.size(); ++i) {
    const DeltaOp& op = delta.ops[i];
    std::vector<Dot>* live = nullptr;
    if (options_.keep_counts) {
      BIGSET_ASSIGN_OR_RETURN(
          live, LiveDotsOfOp(stripe, set, i, op.element, state, &changes));
    }
    const bool was_present = live != nullptr && !live->empty();
    // The context part first, always, even if the add's dot was seen.
    if (absl::Status s = ApplyContext(set, op.element, op.context, state,
                                      &batch, &changes, live);
        !s.ok()) {
      stripe.cache->Erase(set);
      return s;
    }
    // Never rewrite a seen dot: its key may have been removed.
    if (op.add.has_value() && op.add->valid() && !state->clock.Seen(*op.add)) {
      PutNewKey(stripe, set, op.element, *op.add, state, &batch, &changes);
      if (live != nullptr) live->push_back(*op.add);
      NotePresent(stripe, set, changes.element_hash, &changes);
      ++puts;
    }
    if (live != nullptr) Recount(was_present, !live->empty(), state);
  }
  const uint64_t deletes = batch.Count() - puts;
  if (!changes.clock.empty() || !changes.tombstone.empty() ||
      batch.Count() > 0) {
    BIGSET_RETURN_IF_ERROR(Commit(stripe, set, state, &batch, changes));
    counters_.keys_written.fetch_add(puts, std::memory_order_relaxed);
    counters_.keys_deleted.fetch_add(deletes, std::memory_order_relaxed);
  }
  counters_.deltas_applied.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::StatusOr<Clock> ReplicaImpl::GetClock(std::string_view set) {
  Stripe& stripe = StripeFor(set);
  MutexLock lock(&stripe.mu);
  BIGSET_ASSIGN_OR_RETURN(const SetState* state, LoadState(stripe, set));
  return state->clock;
}

absl::StatusOr<Clock> ReplicaImpl::GetTombstone(std::string_view set) {
  Stripe& stripe = StripeFor(set);
  MutexLock lock(&stripe.mu);
  BIGSET_ASSIGN_OR_RETURN(const SetState* state, LoadState(stripe, set));
  return state->tombstone;
}

absl::StatusOr<SetStats> ReplicaImpl::GetSetStats(std::string_view set) {
  Stripe& stripe = StripeFor(set);
  MutexLock lock(&stripe.mu);
  BIGSET_ASSIGN_OR_RETURN(const SetState* state, LoadState(stripe, set));
  const SetState& s = *state;
  SetStats stats;
  stats.clock_bytes = s.clock.Encode().size();
  stats.tombstone_bytes = s.tombstone.empty() ? 0 : s.tombstone.Encode().size();
  stats.clock_dots = s.clock.DotCount();
  stats.tombstone_dots = s.tombstone.DotCount();
  return stats;
}

ReplicaStats ReplicaImpl::stats() const {
  ReplicaStats s;
#define BIGSET_REPLICA_COPY_COUNTER(name) s.name = counters_.name.load();
  BIGSET_REPLICA_COUNTERS(BIGSET_REPLICA_COPY_COUNTER)
#undef BIGSET_REPLICA_COPY_COUNTER
  // The gauges.
  s.sweep_queue_length = sweeper_->QueueLength();
  s.presence_filter_bytes = filter_bytes_.load();
  return s;
}

}  // namespace bigset
