// Replica::Verify: a read-only scan of the whole keyspace that reports every
// inconsistency it finds.

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bigset/replica/replica.h"
#include "core/clock_storage.h"
#include "core/status_macros.h"
#include "replica/replica_internal.h"

namespace bigset {

using replica_internal::kActorMetadata;
using replica_internal::Printable;

namespace {

// One set's clock or tombstone as Verify reads it: the loader, and the
// first problem with its keys.
struct StateCheck {
  clock_storage::Loader loader;
  std::optional<std::string> problem;
  bool any = false;  // Some key of it was seen.
  std::optional<Clock> clock;

  void Add(const ParsedKey& key, std::string_view value) {
    any = true;
    if (problem.has_value()) return;
    absl::Status s =
        key.segment ? loader.AddSegment(key.dot.actor, key.dot.counter, value)
                    : loader.AddHeader(value);
    if (!s.ok()) problem = std::string(s.message());
  }
  // The clock, once every key was added; nullopt (and `problem` set) if the
  // keys do not form one.
  void Finish() {
    if (!any || problem.has_value()) return;
    absl::StatusOr<Clock> c = loader.Finish();
    if (c.ok()) {
      clock = std::move(*c);
    } else {
      problem = std::string(c.status().message());
    }
  }
};

}  // namespace

absl::StatusOr<VerifyReport> Replica::Verify() {
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
  auto it = store_->NewIterator(ro, KeyspaceRange(options_.keyspace));

  // Keys of one set are contiguous: clock keys, then tombstone keys, then
  // elements.
  std::string current_set;
  bool in_set = false;
  std::optional<StateCheck> clock, tombstone;
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
  };
  ParsedKey key;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    absl::Status s = DecodeKey(it->key(), &key);
    if (!s.ok()) {
      problem(absl::StrCat("undecodable key: ", s.message()));
      continue;
    }
    if (key.kind == KeyKind::kMetadata) continue;
    if (!in_set || key.set != current_set) {
      if (in_set) finish_states();
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
  if (in_set) finish_states();
  BIGSET_RETURN_IF_ERROR(it->status());
  // The actor id itself.
  std::string value;
  absl::Status s =
      store_->Get(ro, MetadataKey(options_.keyspace, kActorMetadata), &value);
  if (!s.ok()) problem(absl::StrCat("actor id: ", s.message()));
  return report;
}

}  // namespace bigset
