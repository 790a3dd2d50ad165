// ReplicaImpl::Sweeper (sweeper.h), and the sweep's persisted values.

#include "replica/sweeper.h"

#include <algorithm>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bigset/replica/replica.h"
#include "core/coding.h"
#include "core/crc32c.h"
#include "core/digest.h"
#include "core/status_macros.h"
#include "keys/keys_internal.h"
#include "replica/replica_impl.h"
#include "replica/replica_internal.h"
#include "replica/set_state.h"
#include "replica/stored_clock.h"

namespace bigset {

using replica_internal::kSweepCursor;
using replica_internal::kSweepFormatVersion;
using replica_internal::kSweepQueue;
using replica_internal::kSweepShards;
using replica_internal::kSweepSnapshot;
using replica_internal::SetCorruption;

namespace replica_internal {

uint32_t SweepShardOf(std::string_view set) {
  return crc32c::Value(set) % kSweepShards;
}

std::string SweepQueueKey(KeyspaceId keyspace, std::string_view set) {
  std::string name(kSweepQueue);
  name.push_back(static_cast<char>(SweepShardOf(set)));
  name.append(set);
  return MetadataKey(keyspace, name);
}

std::string EncodeSweepValue(std::string_view payload) {
  std::string v(1, static_cast<char>(kSweepFormatVersion));
  v.append(payload);
  coding::PutFixed32BE(&v, crc32c::Value(payload));
  return v;
}

std::optional<std::string_view> DecodeSweepValue(std::string_view value) {
  // A torn or flipped snapshot or cursor could make the sweeper skip
  // covered keys for ever or delete the wrong ones: checksummed.
  if (value.size() < 5 ||
      static_cast<uint8_t>(value[0]) != kSweepFormatVersion) {
    return std::nullopt;
  }
  const std::string_view payload = value.substr(1, value.size() - 5);
  if (coding::DecodeFixed32BE(value.data() + value.size() - 4) !=
      crc32c::Value(payload)) {
    return std::nullopt;
  }
  return payload;
}

bool ValidSweepCursor(KeyspaceId keyspace, std::string_view set,
                      std::string_view cursor) {
  if (cursor.empty()) return true;
  const KeyRange elements = ElementsRange(keyspace, set);
  if (cursor < elements.start || cursor >= elements.limit) return false;
  std::string_view element;
  std::string scratch;
  Dot dot;
  return internal::DecodeElementKeyAfterPrefix(
      cursor, internal::ElementKeyPrefixLength(set), &element, &scratch, &dot);
}

std::string SnapshotKey(KeyspaceId keyspace, std::string_view set) {
  return MetadataKey(keyspace,
                     absl::StrCat(ToAbsl(kSweepSnapshot), ToAbsl(set)));
}

std::string CursorKey(KeyspaceId keyspace, std::string_view set) {
  return MetadataKey(keyspace, absl::StrCat(ToAbsl(kSweepCursor), ToAbsl(set)));
}

}  // namespace replica_internal

namespace {

using replica_internal::CursorKey;
using replica_internal::DecodeSweepValue;
using replica_internal::EncodeSweepValue;
using replica_internal::SnapshotKey;

// The snapshot and cursor an interrupted sweep of `set` persisted, into
// *snapshot and *cursor; NotFound if no sweep of the set is under way.
absl::Status ReadSweepPosition(Store* store, std::string_view set,
                               const std::string& snapshot_key,
                               const std::string& cursor_key, Clock* snapshot,
                               std::string* cursor) {
  std::string value;
  absl::Status s = store->Get(ReadOptions(), snapshot_key, &value);
  if (!s.ok()) return s;
  std::optional<std::string_view> bytes = DecodeSweepValue(value);
  if (!bytes.has_value()) {
    return SetCorruption(set, "sweep snapshot", "unknown version");
  }
  absl::StatusOr<Clock> c = Clock::Decode(*bytes);
  if (!c.ok()) {
    return SetCorruption(set, "sweep snapshot", c.status().message());
  }
  *snapshot = std::move(*c);
  s = store->Get(ReadOptions(), cursor_key, &value);
  if (!s.ok()) return SetCorruption(set, "sweep cursor", s.message());
  std::optional<std::string_view> at = DecodeSweepValue(value);
  if (!at.has_value()) {
    return SetCorruption(set, "sweep cursor", "unknown version");
  }
  cursor->assign(*at);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<bool> ReplicaImpl::Sweeper::SweepSet(std::string_view set,
                                                    uint64_t budget,
                                                    uint64_t batch_keys,
                                                    SweepProgress* progress) {
  ReplicaImpl& r = *replica_;
  const KeyspaceId ks = r.options_.keyspace;
  const std::string snapshot_key = SnapshotKey(ks, set);
  const std::string cursor_key = CursorKey(ks, set);
  // 1. The snapshot this sweep of the set works with, taken at its start
  // (or persisted by an earlier, interrupted sweep).
  Clock snapshot;
  std::string cursor;
  absl::Status s = ReadSweepPosition(r.store_, set, snapshot_key, cursor_key,
                                     &snapshot, &cursor);
  if (!s.ok() && !absl::IsNotFound(s)) return s;
  absl::StatusOr<bool> nothing = BeginSweep(set, s.ok(), &snapshot, progress);
  if (!nothing.ok()) return nothing.status();
  if (*nothing) return true;
  // A cursor that is not one of the set's element keys is not one this
  // sweeper wrote.
  const KeyRange elements = ElementsRange(ks, set);
  if (!replica_internal::ValidSweepCursor(ks, set, cursor)) {
    return SetCorruption(set, "sweep cursor", "not an element key of the set");
  }
  const bool fresh = cursor.empty();
  const uint64_t deleted_before = progress->keys_deleted;

  // 2. Delete the keys the snapshot covers, a bounded batch at a time, each
  // with the cursor.
  ReadOptions ro;
  ro.fill_cache = false;
  auto it = r.store_->NewIterator(ro, elements);
  if (cursor.empty()) {
    it->SeekToFirst();
  } else {
    it->Seek(cursor);
    if (it->Valid() && it->key() == cursor) it->Next();
  }
  const size_t prefix_len = internal::ElementKeyPrefixLength(set);
  std::string_view element;
  std::string scratch;
  Dot dot;
  uint64_t read = 0;
  while (it->Valid() && read < budget) {
    WriteBatch batch;
    uint64_t in_batch = 0, deleted = 0, bytes = 0;
    uint64_t removed_digest = 0;
    std::string last;
    while (it->Valid() && in_batch < batch_keys && read < budget) {
      if (!internal::DecodeElementKeyAfterPrefix(it->key(), prefix_len,
                                                 &element, &scratch, &dot)) {
        return SetCorruption(set, "bad element key in sweep");
      }
      if (snapshot.Seen(dot)) {
        batch.Delete(it->key());
        removed_digest += digest::KeyDigest(element, dot);
        ++deleted;
        bytes += it->key().size();
      }
      last.assign(it->key());
      ++in_batch;
      ++read;
      it->Next();
    }
    BIGSET_RETURN_IF_ERROR(it->status());
    batch.Put(cursor_key, EncodeSweepValue(last));
    if (deleted == 0) {
      BIGSET_RETURN_IF_ERROR(r.CheckOpen());
      BIGSET_RETURN_IF_ERROR(r.store_->Write(r.write_options_, batch));
    } else {
      // The keys digest changes with the deletes, in the same batch. Only
      // the sweeper deletes keys under the tombstone (writes leave them),
      // so these keys are still there.
      Stripe& stripe = r.StripeFor(set);
      MutexLock lock(&stripe.mu);
      BIGSET_ASSIGN_OR_RETURN(SetState * state, r.OpenState(stripe, set));
      state->keys_digest -= removed_digest;
      BIGSET_RETURN_IF_ERROR(
          r.Commit(stripe, set, state, &batch, StateChanges()));
    }
    progress->keys_read += in_batch;
    progress->keys_deleted += deleted;
    r.counters_.sweep_keys_read.fetch_add(in_batch, std::memory_order_relaxed);
    r.counters_.sweep_keys_deleted.fetch_add(deleted,
                                             std::memory_order_relaxed);
    r.counters_.sweep_bytes_reclaimed.fetch_add(bytes,
                                                std::memory_order_relaxed);
  }
  BIGSET_RETURN_IF_ERROR(it->status());
  if (it->Valid()) return false;  // Out of budget; resumes from the cursor.

  // 3. Finish: the snapshot's keys are gone and can never be written again
  // (the set-clock has seen their dots), so its dots leave the tombstone.
  BIGSET_RETURN_IF_ERROR(FinishSweep(set, snapshot));
  ++progress->entries_done;
  r.counters_.sweep_entries_done.fetch_add(1, std::memory_order_relaxed);
  // Give the space back (not for a set this sweep deleted nothing from:
  // a compaction of nothing still flushes the memtable).
  if (!fresh || progress->keys_deleted != deleted_before) {
    BIGSET_RETURN_IF_ERROR(r.store_->CompactRange(elements));
  }
  return true;
}

absl::StatusOr<bool> ReplicaImpl::Sweeper::BeginSweep(std::string_view set,
                                                      bool resuming,
                                                      Clock* snapshot,
                                                      SweepProgress* progress) {
  ReplicaImpl& r = *replica_;
  const KeyspaceId ks = r.options_.keyspace;
  Stripe& stripe = r.StripeFor(set);
  MutexLock lock(&stripe.mu);
  BIGSET_ASSIGN_OR_RETURN(const SetState* state, r.OpenState(stripe, set));
  const Clock& tombstone = state->tombstone;
  if (resuming) {
    // Only the finish shrinks the tombstone, and it deletes the snapshot
    // in the same batch: a snapshot the tombstone does not cover is not
    // one this sweeper wrote, and sweeping with it could delete live keys.
    if (!tombstone.Descends(*snapshot)) {
      return SetCorruption(set, "sweep snapshot",
                           "not covered by the set-tombstone");
    }
  } else {
    WriteBatch batch;
    if (tombstone.empty()) {
      // Nothing to sweep (the entry outlived its dots): done.
      batch.Delete(replica_internal::SweepQueueKey(ks, set));
      BIGSET_RETURN_IF_ERROR(r.store_->Write(r.write_options_, batch));
      ++progress->entries_done;
      r.counters_.sweep_entries_done.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
    *snapshot = tombstone;
    batch.Put(SnapshotKey(ks, set), EncodeSweepValue(snapshot->Encode()));
    batch.Put(CursorKey(ks, set), EncodeSweepValue(""));
    BIGSET_RETURN_IF_ERROR(r.store_->Write(r.write_options_, batch));
  }
  return false;
}

absl::Status ReplicaImpl::Sweeper::FinishSweep(std::string_view set,
                                               const Clock& snapshot) {
  // Dots added since the snapshot stay, with the queue entry that came with
  // them.
  ReplicaImpl& r = *replica_;
  const KeyspaceId ks = r.options_.keyspace;
  Stripe& stripe = r.StripeFor(set);
  MutexLock lock(&stripe.mu);
  BIGSET_ASSIGN_OR_RETURN(SetState * state, r.OpenState(stripe, set));
  StateChanges changes;
  state->tombstone.Subtract(snapshot);
  changes.tombstone.TouchClock(snapshot);
  WriteBatch batch;
  batch.Delete(SnapshotKey(ks, set));
  batch.Delete(CursorKey(ks, set));
  if (state->tombstone.empty()) {
    batch.Delete(replica_internal::SweepQueueKey(ks, set));
  }
  return r.Commit(stripe, set, state, &batch, changes);
}

absl::StatusOr<SweepProgress> ReplicaImpl::Sweeper::SweepSome(uint64_t budget) {
  ReplicaImpl& r = *replica_;
  BIGSET_RETURN_IF_ERROR(r.CheckOpen());
  SweepProgress progress;
  absl::MutexLock sweep_lock(&sweep_mu_);
  // Cleared before the queue is read: an entry written after this sets it
  // again.
  if (!r.sweep_pending_.exchange(false, std::memory_order_acq_rel)) {
    progress.idle = true;
    return progress;
  }
  const absl::Time start = absl::Now();
  const std::string queue_prefix =
      MetadataKey(r.options_.keyspace, kSweepQueue);
  absl::Status status = absl::OkStatus();
  // Every entry costs one unit of the budget besides the keys it reads, so
  // that a queue of sets with nothing left to delete is bounded too.
  uint64_t spent = 0;
  while (spent < budget) {
    // The next entry of the next shard that has one: after the shard's last
    // one taken, else its first.
    std::optional<std::string> set;
    std::string entry_key;
    uint32_t shard = 0;
    for (uint32_t i = 0; i < kSweepShards && !set.has_value(); ++i) {
      shard = (next_shard_ + i) % kSweepShards;
      std::string start = queue_prefix;
      start.push_back(static_cast<char>(shard));
      std::string limit = queue_prefix;
      limit.push_back(static_cast<char>(shard + 1));
      auto it = r.store_->NewIterator(ReadOptions(), KeyRange{start, limit});
      const std::string& last = shard_last_[shard];
      if (last.empty()) {
        it->SeekToFirst();
      } else {
        it->Seek(last);
        if (it->Valid() && it->key() == last) it->Next();
        if (it->status().ok() && !it->Valid()) it->SeekToFirst();
      }
      if (!it->status().ok()) {
        status = it->status();
        break;
      }
      if (it->Valid()) {
        entry_key.assign(it->key());
        set.emplace(it->key().substr(start.size()));
      }
    }
    if (!status.ok()) break;
    if (!set.has_value()) {
      progress.idle = true;
      break;
    }
    shard_last_[shard] = entry_key;
    // The next entry comes from the next shard: one hot set does not keep
    // the others waiting, and a set that fails does not stop them.
    next_shard_ = (shard + 1) % kSweepShards;
    ++spent;
    const std::string proper =
        replica_internal::SweepQueueKey(r.options_.keyspace, *set);
    if (entry_key != proper) {
      // Not an entry this replica wrote (its shard byte is not the set's):
      // moved where it belongs, so the set is still swept, and the bad key
      // can never be taken again.
      r.counters_.sweep_errors.fetch_add(1, std::memory_order_relaxed);
      WriteBatch batch;
      batch.Delete(entry_key);
      batch.Put(proper, EncodeSweepValue(""));
      status = r.store_->Write(r.write_options_, batch);
      if (!status.ok()) break;
      continue;
    }
    const uint64_t read_before = progress.keys_read;
    absl::StatusOr<bool> done =
        SweepSet(*set, std::max<uint64_t>(1, budget - std::min(budget, spent)),
                 batch_keys_, &progress);
    spent += progress.keys_read - read_before;
    if (!done.ok()) {
      r.counters_.sweep_errors.fetch_add(1, std::memory_order_relaxed);
      status = done.status();
      break;
    }
    if (!*done) break;  // Out of budget.
  }
  r.counters_.sweep_micros.fetch_add(
      static_cast<uint64_t>(absl::ToInt64Microseconds(absl::Now() - start)),
      std::memory_order_relaxed);
  if (!status.ok() || !progress.idle) {
    r.sweep_pending_.store(true, std::memory_order_release);
  }
  if (!status.ok()) return status;
  return progress;
}

absl::Status ReplicaImpl::Sweeper::Start(const SweepOptions& options) {
  BIGSET_RETURN_IF_ERROR(replica_->CheckOpen());
  if (options.keys_per_second == 0 || options.batch_keys == 0 ||
      options.tick_micros == 0) {
    return absl::InvalidArgumentError(
        "keys_per_second, batch_keys and tick_micros must be >= 1");
  }
  absl::MutexLock lock(&thread_mu_);
  if (running_) {
    return absl::FailedPreconditionError("the sweeper is running");
  }
  running_ = true;
  auto stop = std::make_shared<bool>(false);
  stop_ = stop;
  {
    absl::MutexLock sweep_lock(&sweep_mu_);
    batch_keys_ = options.batch_keys;
  }
  thread_ = std::thread([this, options, stop]() {
    // Slices of a tick's worth of keys; after each, wait until the rate
    // allows the next (or a second when the queue is empty), waking early
    // to stop.
    const uint64_t slice = options.KeysPerTick();
    while (true) {
      const absl::Time start = absl::Now();
      absl::StatusOr<SweepProgress> p = SweepSome(slice);
      absl::Duration wait = absl::Seconds(1);
      if (p.ok() && !p->idle) {
        wait = absl::Seconds(static_cast<double>(p->keys_read) /
                             static_cast<double>(options.keys_per_second)) -
               (absl::Now() - start);
      }
      absl::MutexLock l(&thread_mu_);
      const absl::Time until = absl::Now() + wait;
      while (!*stop && absl::Now() < until) {
        thread_mu_.AwaitWithDeadline(absl::Condition(stop.get()), until);
      }
      if (*stop) return;
    }
  });
  return absl::OkStatus();
}

void ReplicaImpl::Sweeper::Stop() {
  std::thread thread;
  {
    absl::MutexLock lock(&thread_mu_);
    if (!running_) return;
    *stop_ = true;
    running_ = false;
    thread = std::move(thread_);
  }
  if (thread.joinable()) thread.join();
}

uint64_t ReplicaImpl::Sweeper::QueueLength() const {
  const std::string prefix =
      MetadataKey(replica_->options_.keyspace, kSweepQueue);
  std::string limit = prefix;
  limit.push_back(static_cast<char>(kSweepShards));
  auto it =
      replica_->store_->NewIterator(ReadOptions(), KeyRange{prefix, limit});
  uint64_t n = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
  return n;
}

}  // namespace bigset
