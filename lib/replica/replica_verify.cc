// Replica::Verify: a read-only scan of the whole keyspace that reports every
// inconsistency it finds.

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

}  // namespace

absl::StatusOr<VerifyReport> Replica::Verify(const KeysProgress& progress) {
  VerifyReport report;
  auto problem = [&report](std::string text) {
    ++report.problem_count;
    if (report.problems.size() < VerifyReport::kMaxProblems) {
      report.problems.push_back(std::move(text));
    }
  };
  std::unique_ptr<const Snapshot> snapshot = store_->GetSnapshot();
  ReadOptions ro;
  ro.snapshot = snapshot.get();
  ro.fill_cache = false;
  // Data of another key format version is never read: say so.
  {
    auto old = store_->NewIterator(
        ro, KeyspaceRangeOfVersion(options_.keyspace, 0x01));
    old->SeekToFirst();
    if (old->Valid()) problem("keys of key format version 1 (not read)");
  }
  // The sweeper's state first: the sets' checks refer to it.
  SweepState sweep;
  {
    using replica_internal::DecodeSweepValue;
    using replica_internal::kSweepCursor;
    using replica_internal::kSweepQueue;
    using replica_internal::kSweepSnapshot;
    auto meta = store_->NewIterator(ro, MetadataRange(options_.keyspace));
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
        sweep.queued.emplace(name.substr(1));
      } else if (name.starts_with(kSweepSnapshot)) {
        name.remove_prefix(kSweepSnapshot.size());
        std::optional<Clock> c = replica_internal::DecodeSweepSnapshot(value);
        if (!c.has_value()) {
          problem(absl::StrCat("set \"", Printable(name),
                               "\": undecodable sweep snapshot"));
        }
        sweep.snapshots.emplace(std::string(name), std::move(c));
      } else if (name.starts_with(kSweepCursor)) {
        name.remove_prefix(kSweepCursor.size());
        std::optional<std::string_view> at = DecodeSweepValue(value);
        if (!at.has_value() ||
            !replica_internal::ValidSweepCursor(options_.keyspace, name, *at)) {
          problem(absl::StrCat("set \"", Printable(name),
                               "\": malformed sweep cursor"));
        }
        sweep.cursors.emplace(name);
      }
    }
    BIGSET_RETURN_IF_ERROR(meta->status());
    for (const auto& [set, c] : sweep.snapshots) {
      if (!sweep.cursors.count(set)) {
        problem(absl::StrCat("set \"", Printable(set),
                             "\": sweep snapshot without a cursor"));
      }
    }
    for (const std::string& set : sweep.cursors) {
      if (!sweep.snapshots.count(set)) {
        problem(absl::StrCat("set \"", Printable(set),
                             "\": sweep cursor without a snapshot"));
      }
    }
  }
  std::set<std::string> swept_sets_seen;

  auto it = store_->NewIterator(ro, KeyspaceRange(options_.keyspace));

  // Keys of one set are contiguous: clock keys, then tombstone keys, then
  // elements.
  std::string current_set;
  bool in_set = false;
  std::optional<StoredClockScan> clock, tombstone;
  bool states_done = false;
  auto where = [&]() {
    return absl::StrCat("set \"", Printable(current_set), "\"");
  };
  // Checks the set's clock and tombstone once all their keys were read.
  auto finish_states = [&]() {
    if (states_done) return;
    states_done = true;
    clock->Finish();
    tombstone->Finish();
    if (clock->problem.has_value()) {
      problem(absl::StrCat(where(), ": set-clock: ", *clock->problem));
    }
    if (tombstone->problem.has_value()) {
      problem(absl::StrCat(where(), ": set-tombstone: ", *tombstone->problem));
    }
    if (tombstone->clock.has_value() &&
        (!clock->clock.has_value() ||
         !clock->clock->Descends(*tombstone->clock))) {
      problem(absl::StrCat(where(),
                           ": set-tombstone holds dots its set-clock has not "
                           "seen"));
    }
    // Covered keys stay until swept: a tombstone needs its queue entry.
    if (tombstone->clock.has_value() && !tombstone->clock->empty() &&
        !sweep.queued.count(current_set)) {
      problem(absl::StrCat(where(),
                           ": set-tombstone without a sweep-queue entry (its "
                           "keys would never be swept)"));
    }
    auto snap = sweep.snapshots.find(current_set);
    if (snap != sweep.snapshots.end()) {
      swept_sets_seen.insert(current_set);
      if (snap->second.has_value() &&
          (!tombstone->clock.has_value() ||
           !tombstone->clock->Descends(*snap->second))) {
        problem(absl::StrCat(where(),
                             ": sweep snapshot not covered by the "
                             "set-tombstone"));
      }
    }
  };
  // The keys digest a set-clock's header records must be the sum over the
  // set's element keys (anti-entropy compares it).
  uint64_t keys_sum = 0;
  // So must its count: the elements with a key the tombstone does not
  // cover.
  uint64_t present = 0;
  std::string last_present;
  auto check_digest = [&]() {
    finish_states();
    const clock_storage::HeaderTrailer& trailer = clock->loader.trailer();
    if (clock->clock.has_value() && trailer.keys_digest.has_value() &&
        *trailer.keys_digest != keys_sum) {
      problem(absl::StrCat(where(),
                           ": keys digest in the set-clock does not match "
                           "the set's element keys"));
    }
    if (clock->clock.has_value() && trailer.count.has_value() &&
        *trailer.count != present) {
      problem(absl::StrCat(where(), ": count in the set-clock (",
                           *trailer.count, ") does not match the set's ",
                           present, " present elements"));
    }
  };
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
    if (!in_set || key.set != current_set) {
      if (in_set) check_digest();
      keys_sum = 0;
      present = 0;
      current_set.assign(key.set);
      in_set = true;
      clock.emplace();
      tombstone.emplace();
      states_done = false;
      ++report.sets;
    }
    switch (key.kind) {
      case KeyKind::kSetClock:
        clock->Add(key, it->value());
        break;
      case KeyKind::kSetTombstone:
        tombstone->Add(key, it->value());
        break;
      case KeyKind::kElement:
        finish_states();
        ++report.element_keys;
        keys_sum += digest::KeyDigest(key.element, key.dot);
        if ((!tombstone->clock.has_value() ||
             !tombstone->clock->Seen(key.dot)) &&
            (present == 0 || key.element != last_present)) {
          ++present;
          last_present.assign(key.element);
        }
        if (!clock->clock.has_value()) {
          problem(absl::StrCat(
              where(), ": element key \"", Printable(key.element), "\" ",
              DotToString(key.dot),
              clock->problem.has_value() ? " with an unreadable set-clock"
                                         : " without a set-clock"));
        } else if (!clock->clock->Seen(key.dot)) {
          problem(absl::StrCat(where(), ": element key \"",
                               Printable(key.element), "\" has dot ",
                               DotToString(key.dot),
                               " its set-clock has not seen"));
        }
        break;
      default:
        break;
    }
  }
  if (in_set) check_digest();
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
      store_->Get(ro, MetadataKey(options_.keyspace, kActorMetadata), &value);
  if (!s.ok()) problem(absl::StrCat("actor id: ", s.message()));
  return report;
}

}  // namespace bigset
