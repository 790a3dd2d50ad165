// VerifyKeyspace (verify.h), and the scan of a stored clock that it shares
// with Replica::Repair.

#include "replica/verify.h"

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bigset/replica/replica.h"
#include "core/clock_storage.h"
#include "core/digest.h"
#include "core/status_macros.h"
#include "replica/replica_internal.h"

namespace bigset {

using replica_internal::kActorMetadata;
using replica_internal::Printable;

namespace replica_internal {

void StoredClockScan::Add(const ParsedKey& key, std::string_view value) {
  any = true;
  if (problem.has_value()) return;
  absl::Status s =
      key.segment ? loader.AddSegment(key.dot.actor, key.dot.counter, value)
                  : loader.AddHeader(value);
  if (!s.ok()) problem = std::string(s.message());
}

void StoredClockScan::Finish() {
  if (!any || problem.has_value()) return;
  absl::StatusOr<Clock> c = loader.Finish();
  if (c.ok()) {
    clock = std::move(*c);
  } else {
    problem = std::string(c.status().message());
  }
}

bool ValidSweepQueueEntry(std::string_view name, std::string_view value) {
  return !name.empty() && static_cast<uint8_t>(name[0]) < kSweepShards &&
         static_cast<uint8_t>(name[0]) == SweepShardOf(name.substr(1)) &&
         DecodeSweepValue(value).has_value();
}

std::optional<Clock> DecodeSweepSnapshot(std::string_view value) {
  std::optional<std::string_view> bytes = DecodeSweepValue(value);
  if (!bytes.has_value()) return std::nullopt;
  absl::StatusOr<Clock> decoded = Clock::Decode(*bytes);
  if (!decoded.ok()) return std::nullopt;
  return std::move(*decoded);
}

}  // namespace replica_internal

namespace {

using replica_internal::StoredClockScan;

// The sweeper's persisted state, as Verify finds it (replica_internal.h).
struct SweepState {
  std::set<std::string> queued;
  std::map<std::string, std::optional<Clock>> snapshots;  // nullopt: bad
  std::set<std::string> cursors;
};

// Reads the sweeper's persisted state (queue entries, snapshots, cursors)
// into *sweep, reporting what is malformed or unpaired.
absl::Status ReadSweepState(Store* store, const ReadOptions& ro,
                            KeyspaceId keyspace,
                            const std::function<void(std::string)>& problem,
                            SweepState* sweep) {
  using replica_internal::DecodeSweepValue;
  using replica_internal::kSweepCursor;
  using replica_internal::kSweepQueue;
  using replica_internal::kSweepSnapshot;
  auto meta = store->NewIterator(ro, MetadataRange(keyspace));
  ParsedKey mk;
  for (meta->SeekToFirst(); meta->Valid(); meta->Next()) {
    if (!DecodeKey(meta->key(), &mk).ok()) continue;  // Reported below.
    std::string_view name = mk.metadata_name;
    std::string_view value = meta->value();
    if (name.starts_with(kSweepQueue)) {
      name.remove_prefix(kSweepQueue.size());
      if (!replica_internal::ValidSweepQueueEntry(name, value)) {
        problem(absl::StrCat("malformed sweep-queue entry \"",
                             Printable(mk.metadata_name), "\""));
        continue;
      }
      sweep->queued.emplace(name.substr(1));
    } else if (name.starts_with(kSweepSnapshot)) {
      name.remove_prefix(kSweepSnapshot.size());
      std::optional<Clock> c = replica_internal::DecodeSweepSnapshot(value);
      if (!c.has_value()) {
        problem(absl::StrCat("set \"", Printable(name),
                             "\": undecodable sweep snapshot"));
      }
      sweep->snapshots.emplace(std::string(name), std::move(c));
    } else if (name.starts_with(kSweepCursor)) {
      name.remove_prefix(kSweepCursor.size());
      std::optional<std::string_view> at = DecodeSweepValue(value);
      if (!at.has_value() ||
          !replica_internal::ValidSweepCursor(keyspace, name, *at)) {
        problem(absl::StrCat("set \"", Printable(name),
                             "\": malformed sweep cursor"));
      }
      sweep->cursors.emplace(name);
    }
  }
  BIGSET_RETURN_IF_ERROR(meta->status());
  for (const auto& [set, c] : sweep->snapshots) {
    if (!sweep->cursors.count(set)) {
      problem(absl::StrCat("set \"", Printable(set),
                           "\": sweep snapshot without a cursor"));
    }
  }
  for (const std::string& set : sweep->cursors) {
    if (!sweep->snapshots.count(set)) {
      problem(absl::StrCat("set \"", Printable(set),
                           "\": sweep cursor without a snapshot"));
    }
  }
  return absl::OkStatus();
}

// The checks of one set's keys, fed in key order: its clock keys, its
// tombstone keys, then its element keys.
class SetCheck {
 public:
  SetCheck(std::string set, const SweepState* sweep,
           std::set<std::string>* swept_sets_seen,
           std::function<void(std::string)> problem)
      : set_(std::move(set)),
        sweep_(sweep),
        swept_sets_seen_(swept_sets_seen),
        problem_(std::move(problem)) {}

  const std::string& name() const { return set_; }

  void AddState(const ParsedKey& key, std::string_view value) {
    (key.kind == KeyKind::kSetClock ? clock_ : tombstone_).Add(key, value);
  }

  void AddElement(const ParsedKey& key) {
    FinishStates();
    keys_sum_ += digest::KeyDigest(key.element, key.dot);
    if ((!tombstone_.clock.has_value() || !tombstone_.clock->Seen(key.dot)) &&
        (present_ == 0 || key.element != last_present_)) {
      ++present_;
      last_present_.assign(key.element);
    }
    if (!clock_.clock.has_value()) {
      problem_(absl::StrCat(Where(), ": element key \"", Printable(key.element),
                            "\" ", DotToString(key.dot),
                            clock_.problem.has_value()
                                ? " with an unreadable set-clock"
                                : " without a set-clock"));
    } else if (!clock_.clock->Seen(key.dot)) {
      problem_(absl::StrCat(Where(), ": element key \"", Printable(key.element),
                            "\" has dot ", DotToString(key.dot),
                            " its set-clock has not seen"));
    }
  }

  // The keys digest and the count a set-clock's header records must be
  // the sum over the set's element keys (anti-entropy compares it) and
  // its elements with a key the tombstone does not cover.
  void Finish() {
    FinishStates();
    const clock_storage::HeaderTrailer& trailer = clock_.loader.trailer();
    if (clock_.clock.has_value() && trailer.keys_digest.has_value() &&
        *trailer.keys_digest != keys_sum_) {
      problem_(absl::StrCat(Where(),
                            ": keys digest in the set-clock does not match "
                            "the set's element keys"));
    }
    if (clock_.clock.has_value() && trailer.count.has_value() &&
        *trailer.count != present_) {
      problem_(absl::StrCat(Where(), ": count in the set-clock (",
                            *trailer.count, ") does not match the set's ",
                            present_, " present elements"));
    }
  }

 private:
  std::string Where() const {
    return absl::StrCat("set \"", Printable(set_), "\"");
  }

  // Checks the set's clock and tombstone once all their keys were read.
  void FinishStates() {
    if (states_done_) return;
    states_done_ = true;
    clock_.Finish();
    tombstone_.Finish();
    if (clock_.problem.has_value()) {
      problem_(absl::StrCat(Where(), ": set-clock: ", *clock_.problem));
    }
    if (tombstone_.problem.has_value()) {
      problem_(absl::StrCat(Where(), ": set-tombstone: ", *tombstone_.problem));
    }
    if (tombstone_.clock.has_value() &&
        (!clock_.clock.has_value() ||
         !clock_.clock->Descends(*tombstone_.clock))) {
      problem_(absl::StrCat(Where(),
                            ": set-tombstone holds dots its set-clock has "
                            "not seen"));
    }
    // Covered keys stay until swept: a tombstone needs its queue entry.
    if (tombstone_.clock.has_value() && !tombstone_.clock->empty() &&
        !sweep_->queued.count(set_)) {
      problem_(absl::StrCat(Where(),
                            ": set-tombstone without a sweep-queue entry "
                            "(its keys would never be swept)"));
    }
    auto snap = sweep_->snapshots.find(set_);
    if (snap != sweep_->snapshots.end()) {
      swept_sets_seen_->insert(set_);
      if (snap->second.has_value() &&
          (!tombstone_.clock.has_value() ||
           !tombstone_.clock->Descends(*snap->second))) {
        problem_(absl::StrCat(Where(),
                              ": sweep snapshot not covered by the "
                              "set-tombstone"));
      }
    }
  }

  const std::string set_;
  const SweepState* const sweep_;
  std::set<std::string>* const swept_sets_seen_;
  const std::function<void(std::string)> problem_;
  StoredClockScan clock_, tombstone_;
  bool states_done_ = false;
  uint64_t keys_sum_ = 0;
  uint64_t present_ = 0;
  std::string last_present_;
};

}  // namespace

absl::StatusOr<VerifyReport> VerifyKeyspace(Store* store, KeyspaceId keyspace,
                                            const KeysProgress& progress) {
  VerifyReport report;
  auto problem = [&report](std::string text) {
    ++report.problem_count;
    if (report.problems.size() < VerifyReport::kMaxProblems) {
      report.problems.push_back(std::move(text));
    }
  };
  std::unique_ptr<const Snapshot> snapshot = store->GetSnapshot();
  ReadOptions ro;
  ro.snapshot = snapshot.get();
  ro.fill_cache = false;
  // Data of another key format version is never read: say so.
  {
    auto old = store->NewIterator(ro, KeyspaceRangeOfVersion(keyspace, 0x01));
    old->SeekToFirst();
    if (old->Valid()) problem("keys of key format version 1 (not read)");
  }
  // The sweeper's state first: the sets' checks refer to it.
  SweepState sweep;
  BIGSET_RETURN_IF_ERROR(ReadSweepState(store, ro, keyspace, problem, &sweep));
  std::set<std::string> swept_sets_seen;
  auto it = store->NewIterator(ro, KeyspaceRange(keyspace));
  // Keys of one set are contiguous: clock keys, then tombstone keys, then
  // elements.
  std::optional<SetCheck> current;
  ParsedKey key;
  uint64_t scanned = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    if (progress && ++scanned % 4096 == 0) progress(scanned);
    absl::Status s = DecodeKey(it->key(), &key);
    if (!s.ok()) {
      problem(absl::StrCat("undecodable key: ", s.message()));
      continue;
    }
    if (key.kind == KeyKind::kMetadata) continue;
    if (!current.has_value() || key.set != current->name()) {
      if (current.has_value()) current->Finish();
      current.emplace(std::string(key.set), &sweep, &swept_sets_seen, problem);
      ++report.sets;
    }
    switch (key.kind) {
      case KeyKind::kSetClock:
      case KeyKind::kSetTombstone:
        current->AddState(key, it->value());
        break;
      case KeyKind::kElement:
        ++report.element_keys;
        current->AddElement(key);
        break;
      default:
        break;
    }
  }
  if (current.has_value()) current->Finish();
  BIGSET_RETURN_IF_ERROR(it->status());
  for (const auto& [set, c] : sweep.snapshots) {
    if (c.has_value() && !c->empty() && !swept_sets_seen.count(set)) {
      problem(absl::StrCat("set \"", Printable(set),
                           "\": sweep snapshot of a set without state"));
    }
  }
  // The actor id itself.
  std::string value;
  absl::Status s =
      store->Get(ro, MetadataKey(keyspace, kActorMetadata), &value);
  if (!s.ok()) problem(absl::StrCat("actor id: ", s.message()));
  return report;
}

}  // namespace bigset
