// Replica::Verify: a read-only scan of the whole keyspace that reports every
// inconsistency it finds.

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bigset/replica/replica.h"
#include "core/status_macros.h"
#include "replica/replica_internal.h"

namespace bigset {

using replica_internal::kActorMetadata;
using replica_internal::Printable;

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
  auto it = store_->NewIterator(ro, KeyspaceRange(options_.keyspace));

  // Keys of one set are contiguous: clocks, then tombstones, then elements.
  std::string current_set;
  bool in_set = false;
  std::optional<Clock> clock;
  std::optional<Clock> tombstone;
  auto finish_set = [&]() {
    if (in_set && tombstone.has_value() &&
        (!clock.has_value() || !clock->Descends(*tombstone))) {
      problem(absl::StrCat("set \"", Printable(current_set),
                           "\": set-tombstone holds dots its set-clock has not "
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
      finish_set();
      current_set.assign(key.set);
      in_set = true;
      clock.reset();
      tombstone.reset();
      ++report.sets;
    }
    const std::string where =
        absl::StrCat("set \"", Printable(current_set), "\"");
    switch (key.kind) {
      case KeyKind::kSetClock:
      case KeyKind::kSetTombstone: {
        if (key.dot.actor != replica_internal::kStateKeyActor) {
          problem(absl::StrCat(where,
                               ": set-clock or set-tombstone key with actor ",
                               key.dot.actor));
          break;
        }
        absl::StatusOr<Clock> c = Clock::Decode(it->value());
        if (!c.ok()) {
          problem(absl::StrCat(
              where, ": undecodable ",
              key.kind == KeyKind::kSetClock ? "set-clock" : "set-tombstone",
              ": ", c.status().message()));
          break;
        }
        (key.kind == KeyKind::kSetClock ? clock : tombstone) = std::move(*c);
        break;
      }
      case KeyKind::kElement:
        ++report.element_keys;
        if (!clock.has_value()) {
          problem(absl::StrCat(where, ": element key \"",
                               Printable(key.element), "\" ",
                               DotToString(key.dot), " without a set-clock"));
        } else if (!clock->Seen(key.dot)) {
          problem(absl::StrCat(
              where, ": element key \"", Printable(key.element), "\" has dot ",
              DotToString(key.dot), " its set-clock has not seen"));
        }
        break;
      default:
        break;
    }
  }
  finish_set();
  BIGSET_RETURN_IF_ERROR(it->status());
  // The actor id itself.
  std::string value;
  absl::Status s =
      store_->Get(ro, MetadataKey(options_.keyspace, kActorMetadata), &value);
  if (!s.ok()) problem(absl::StrCat("actor id: ", s.message()));
  return report;
}

}  // namespace bigset
