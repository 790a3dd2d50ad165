// Replica::Repair: makes a keyspace whose store lost data consistent again
// (Verify passes), reporting every loss, after retiring the actor id.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bigset/replica/replica.h"
#include "core/clock_storage.h"
#include "core/coding.h"
#include "core/digest.h"
#include "core/status_macros.h"
#include "replica/replica_internal.h"
#include "replica/stored_clock.h"

namespace bigset {

using replica_internal::CursorKey;
using replica_internal::DecodeSweepValue;
using replica_internal::EncodeSweepValue;
using replica_internal::kActorFormatVersion;
using replica_internal::kActorMetadata;
using replica_internal::kSweepCursor;
using replica_internal::kSweepQueue;
using replica_internal::kSweepSnapshot;
using replica_internal::Printable;
using replica_internal::SnapshotKey;
using replica_internal::StoredClockScan;
using replica_internal::SweepQueueKey;

namespace {

// The sweeper's persisted state as found.
struct SweepFound {
  std::set<std::string> queued;  // Sets with a well-formed queue entry.
  std::map<std::string, std::optional<Clock>> snapshots;  // nullopt: bad
  std::map<std::string, bool> cursors;                    // set -> valid
};

class Repairer {
 public:
  Repairer(Store* store, const ReplicaOptions& options,
           const KeysProgress& progress)
      : store_(store),
        ks_(options.keyspace),
        options_(options),
        progress_(progress) {}

  absl::StatusOr<RepairReport> Run() {
    BIGSET_RETURN_IF_ERROR(RetireActor());
    snapshot_ = store_->GetSnapshot();
    ro_.snapshot = snapshot_.get();
    ro_.fill_cache = false;
    BIGSET_RETURN_IF_ERROR(DeleteOutsideSections());
    BIGSET_RETURN_IF_ERROR(ScanSweepState());
    BIGSET_RETURN_IF_ERROR(ScanSets());
    // Leftover sweep state of sets that have no keys at all.
    WriteBatch batch;
    for (const auto& [set, snap] : sweep_.snapshots) {
      if (sets_seen_.count(set)) continue;
      DropSweepProgress(set, &batch);
    }
    for (const auto& [set, valid] : sweep_.cursors) {
      if (sets_seen_.count(set) || sweep_.snapshots.count(set)) continue;
      DropSweepProgress(set, &batch);
    }
    // A synced last write makes every earlier one durable too.
    batch.Put(
        MetadataKey(ks_, replica_internal::kShutdownMetadata),
        replica_internal::ShutdownValue(replica_internal::kClosedCleanly));
    WriteOptions sync;
    sync.sync = true;
    BIGSET_RETURN_IF_ERROR(store_->Write(sync, batch));
    return std::move(report_);
  }

 private:
  void Loss(std::string text) {
    ++report_.loss_count;
    if (report_.losses.size() < RepairReport::kMaxLosses) {
      report_.losses.push_back(std::move(text));
    }
  }

  // A new actor id before anything else: whatever the store lost, the old
  // actor's counters may be known elsewhere, so they are never used again.
  absl::Status RetireActor() {
    std::string value;
    absl::Status s =
        store_->Get(ReadOptions(), MetadataKey(ks_, kActorMetadata), &value);
    if (s.ok()) {
      ActorId actor = 0;
      // Actor 0 is invalid too (Open refuses it as undecodable).
      if (coding::DecodeVersionedFixed64(value, kActorFormatVersion, &actor)) {
        report_.old_actor = actor;
      } else {
        Loss("the actor id was undecodable");
      }
    } else if (absl::IsNotFound(s)) {
      Loss("the actor id was lost");
    } else {
      return s;
    }
    ActorId actor = 0;
    for (int i = 0; i < 16 && (actor == 0 || actor == report_.old_actor); ++i) {
      actor = replica_internal::NewActorId(options_);
    }
    if (actor == 0 || actor == report_.old_actor) {
      return absl::InvalidArgumentError("the actor id source gave no new id");
    }
    report_.new_actor = actor;
    WriteBatch batch;
    batch.Put(MetadataKey(ks_, kActorMetadata),
              replica_internal::ActorValue(actor));
    // Not clean until the repair is done: an interrupted repair leaves a
    // store whose next Open takes yet another epoch.
    batch.Delete(MetadataKey(ks_, replica_internal::kShutdownMetadata));
    WriteOptions sync;
    sync.sync = true;
    return store_->Write(sync, batch);
  }

  // Deletes the keys of the keyspace outside its metadata and set sections
  // (no such key decodes; Verify reports each).
  absl::Status DeleteOutsideSections() {
    const KeyRange all = KeyspaceRange(ks_);
    const KeyRange outside[] = {{all.start, MetadataRange(ks_).start},
                                {AllSetsRange(ks_).limit, all.limit}};
    WriteBatch batch;
    for (const KeyRange& range : outside) {
      auto it = store_->NewIterator(ro_, range);
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        batch.Delete(it->key());
        ++report_.keys_deleted;
        Loss(absl::StrCat("deleted a key outside the keyspace's sections: ",
                          Printable(it->key())));
        if (batch.Count() >= 1000) {
          BIGSET_RETURN_IF_ERROR(store_->Write(WriteOptions(), batch));
          batch.Clear();
        }
      }
      BIGSET_RETURN_IF_ERROR(it->status());
    }
    if (batch.Count() == 0) return absl::OkStatus();
    return store_->Write(WriteOptions(), batch);
  }

  absl::Status ScanSweepState() {
    auto meta = store_->NewIterator(ro_, MetadataRange(ks_));
    ParsedKey mk;
    WriteBatch batch;
    for (meta->SeekToFirst(); meta->Valid(); meta->Next()) {
      if (!DecodeKey(meta->key(), &mk).ok()) {
        batch.Delete(meta->key());
        ++report_.keys_deleted;
        Loss("deleted an undecodable metadata key");
        continue;
      }
      std::string_view name = mk.metadata_name;
      std::string_view value = meta->value();
      if (name.starts_with(kSweepQueue)) {
        name.remove_prefix(kSweepQueue.size());
        if (!replica_internal::ValidSweepQueueEntry(name, value)) {
          // Deleted; the set's check below queues it again if it needs it.
          batch.Delete(meta->key());
          ++report_.sweep_fixes;
          continue;
        }
        sweep_.queued.emplace(name.substr(1));
      } else if (name.starts_with(kSweepSnapshot)) {
        name.remove_prefix(kSweepSnapshot.size());
        sweep_.snapshots.emplace(std::string(name),
                                 replica_internal::DecodeSweepSnapshot(value));
      } else if (name.starts_with(kSweepCursor)) {
        name.remove_prefix(kSweepCursor.size());
        std::optional<std::string_view> at = DecodeSweepValue(value);
        sweep_.cursors.emplace(
            std::string(name),
            at.has_value() &&
                replica_internal::ValidSweepCursor(ks_, name, *at));
      }
    }
    BIGSET_RETURN_IF_ERROR(meta->status());
    if (batch.Count() == 0) return absl::OkStatus();
    return store_->Write(WriteOptions(), batch);
  }

  // Deletes the set's sweep snapshot and cursor: its sweep starts over from
  // its queue entry (a sweep deletes only keys its snapshot covers, so
  // starting over is always safe).
  void DropSweepProgress(const std::string& set, WriteBatch* batch) {
    batch->Delete(SnapshotKey(ks_, set));
    batch->Delete(CursorKey(ks_, set));
    ++report_.sweep_fixes;
  }

  absl::Status ScanSets() {
    auto it = store_->NewIterator(ro_, AllSetsRange(ks_));
    ParsedKey key;
    WriteBatch batch;
    bool in_set = false;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      if (progress_ && ++scanned_ % 4096 == 0) progress_(scanned_);
      absl::Status s = DecodeKey(it->key(), &key);
      // Counter 0 is not a dot: no clock can see such an element key.
      if (s.ok() && key.kind == KeyKind::kElement && key.dot.counter == 0) {
        s = absl::InvalidArgumentError("an element key with counter 0");
      }
      if (!s.ok()) {
        batch.Delete(it->key());
        ++report_.keys_deleted;
        Loss(absl::StrCat("deleted an undecodable key (", s.message(), ")"));
        if (batch.Count() >= 1000) {
          BIGSET_RETURN_IF_ERROR(store_->Write(WriteOptions(), batch));
          batch.Clear();
        }
        continue;
      }
      if (!in_set || key.set != set_) {
        if (in_set) BIGSET_RETURN_IF_ERROR(FinishSet(&batch));
        StartSet(key.set);
        in_set = true;
      }
      switch (key.kind) {
        case KeyKind::kSetClock:
          clock_.Add(key, it->value());
          break;
        case KeyKind::kSetTombstone:
          tombstone_.Add(key, it->value());
          break;
        case KeyKind::kElement:
          if (!tombstone_done_) {
            // Every tombstone key of the set comes before its elements.
            tombstone_.Finish();
            tombstone_done_ = true;
          }
          ++element_keys_;
          elements_.AddDot(key.dot);
          keys_digest_ += digest::KeyDigest(key.element, key.dot);
          // Present: a key the tombstone (if readable: else it is dropped)
          // does not cover.
          if ((!tombstone_.clock.has_value() ||
               !tombstone_.clock->Seen(key.dot)) &&
              (count_ == 0 || key.element != last_present_)) {
            ++count_;
            last_present_.assign(key.element);
          }
          break;
        default:
          break;
      }
    }
    BIGSET_RETURN_IF_ERROR(it->status());
    if (in_set) BIGSET_RETURN_IF_ERROR(FinishSet(&batch));
    if (batch.Count() == 0) return absl::OkStatus();
    return store_->Write(WriteOptions(), batch);
  }

  void StartSet(std::string_view set) {
    set_.assign(set);
    sets_seen_.insert(set_);
    clock_ = StoredClockScan();
    tombstone_ = StoredClockScan();
    elements_.clear();
    element_keys_ = 0;
    keys_digest_ = 0;
    count_ = 0;
    last_present_.clear();
    tombstone_done_ = false;
    ++report_.sets;
  }

  // Rewrites the whole stored clock of `kind` (deleting what is there).
  void RewriteClock(StateKind kind, const Clock& clock, WriteBatch* batch) {
    const KeyRange range = SetStateRange(ks_, set_, kind);
    auto old = store_->NewIterator(ro_, range);
    for (old->SeekToFirst(); old->Valid(); old->Next()) {
      batch->Delete(old->key());
    }
    ClockChanges all;
    all.TouchClock(clock);
    StoredClock stored;
    clock_storage::HeaderTrailer trailer;
    trailer.keys_digest = keys_digest_;
    trailer.count = count_;
    WriteClock(ks_, set_, kind, clock, all, &stored, batch,
               kind == StateKind::kClock ? &trailer : nullptr);
  }

  // Fixes one set's clock, tombstone and sweep state in one batch, with
  // whatever undecodable keys are pending in *batch.
  absl::Status FinishSet(WriteBatch* batch) {
    report_.element_keys += element_keys_;
    const std::string where = absl::StrCat("set \"", Printable(set_), "\"");
    clock_.Finish();
    if (!tombstone_done_) tombstone_.Finish();
    std::optional<Clock>& clock = clock_.clock;
    std::optional<Clock>& tombstone = tombstone_.clock;
    bool drop_sweep_progress = false;
    if (!tombstone.has_value()) {
      if (tombstone_.any) {
        ++report_.tombstones_dropped;
        Loss(absl::StrCat(where, ": the set-tombstone was unreadable (",
                          *tombstone_.problem,
                          ") and is dropped: elements it removed whose keys "
                          "were not swept yet are present again"));
        const KeyRange range = SetStateRange(ks_, set_, StateKind::kTombstone);
        auto old = store_->NewIterator(ro_, range);
        for (old->SeekToFirst(); old->Valid(); old->Next()) {
          batch->Delete(old->key());
        }
        drop_sweep_progress = true;
      }
      tombstone.emplace();
    }
    if (!clock.has_value()) {
      Clock rebuilt = elements_;
      rebuilt.Merge(*tombstone);
      ++report_.clocks_rebuilt;
      Loss(absl::StrCat(where, ": the set-clock was ",
                        clock_.any
                            ? absl::StrCat("unreadable (", *clock_.problem, ")")
                            : std::string("lost"),
                        "; rebuilt from ", element_keys_,
                        " element keys (removes it had seen are forgotten)"));
      RewriteClock(StateKind::kClock, rebuilt, batch);
    } else {
      const Clock unseen = Clock::Complement(elements_, *clock);
      bool changed = false;
      if (!unseen.empty()) {
        ++report_.clocks_extended;
        report_.dots_added += unseen.DotCount();
        Loss(absl::StrCat(where, ": the set-clock had not seen ",
                          unseen.DotCount(),
                          " dots of its element keys (an older set-clock "
                          "survived); added"));
        clock->Merge(unseen);
        changed = true;
      }
      if (!clock->Descends(*tombstone)) {
        clock->Merge(*tombstone);
        changed = true;
      }
      // The keys digest (anti-entropy's) and the count must match the keys.
      const clock_storage::HeaderTrailer& stored = clock_.loader.trailer();
      if (stored.count != std::optional<uint64_t>(count_)) {
        ++report_.counts_fixed;
        changed = true;
      }
      if (stored.keys_digest != std::optional<uint64_t>(keys_digest_)) {
        changed = true;
      }
      if (changed) RewriteClock(StateKind::kClock, *clock, batch);
    }
    // A tombstone needs its queue entry, and a sweep in progress a snapshot
    // the tombstone covers and a valid cursor.
    if (!tombstone->empty() && !sweep_.queued.count(set_)) {
      batch->Put(SweepQueueKey(ks_, set_), EncodeSweepValue(""));
      ++report_.sweep_fixes;
    }
    auto snap = sweep_.snapshots.find(set_);
    auto cursor = sweep_.cursors.find(set_);
    const bool has_snap = snap != sweep_.snapshots.end();
    const bool has_cursor = cursor != sweep_.cursors.end();
    if (has_snap || has_cursor) {
      const bool ok = has_snap && has_cursor && snap->second.has_value() &&
                      cursor->second && tombstone->Descends(*snap->second);
      if (!ok || drop_sweep_progress) {
        DropSweepProgress(set_, batch);
        if (!tombstone->empty()) {
          batch->Put(SweepQueueKey(ks_, set_), EncodeSweepValue(""));
        }
      }
    }
    if (batch->Count() == 0) return absl::OkStatus();
    BIGSET_RETURN_IF_ERROR(store_->Write(WriteOptions(), *batch));
    batch->Clear();
    return absl::OkStatus();
  }

  Store* const store_;
  const KeyspaceId ks_;
  const ReplicaOptions& options_;
  const KeysProgress& progress_;
  uint64_t scanned_ = 0;
  uint64_t keys_digest_ = 0;  // Of the current set's element keys.
  uint64_t count_ = 0;        // Of its present elements.
  std::string last_present_;  // The last element counted.
  bool tombstone_done_ = false;
  RepairReport report_;
  std::unique_ptr<const Snapshot> snapshot_;
  ReadOptions ro_;
  SweepFound sweep_;
  std::set<std::string> sets_seen_;
  // The set being scanned.
  std::string set_;
  StoredClockScan clock_;
  StoredClockScan tombstone_;
  Clock elements_;  // Dots of its element keys.
  uint64_t element_keys_ = 0;
};

}  // namespace

absl::StatusOr<RepairReport> Replica::Repair(Store* store,
                                             const ReplicaOptions& options,
                                             const KeysProgress& progress) {
  if (store == nullptr) return absl::InvalidArgumentError("store is null");
  if (options.read_only) {
    return absl::InvalidArgumentError("a repair cannot be read-only");
  }
  BIGSET_ASSIGN_OR_RETURN(const bool v1, replica_internal::HoldsKeyFormatV1(
                                             store, options.keyspace));
  if (v1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "keyspace ", options.keyspace,
        " holds data in bigset key format version 1, which this version "
        "neither reads nor repairs"));
  }
  return Repairer(store, options, progress).Run();
}

}  // namespace bigset
