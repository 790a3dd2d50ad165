#include "replica/stored_clock.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "core/string_view_compat.h"

namespace bigset {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

uint64_t BaseIn(const std::vector<clock_storage::HeaderEntry>& header,
                ActorId actor) {
  auto it = std::lower_bound(header.begin(), header.end(), actor,
                             [](const clock_storage::HeaderEntry& e,
                                ActorId a) { return e.actor < a; });
  return it != header.end() && it->actor == actor ? it->base : 0;
}

}  // namespace

size_t StoredClock::MemoryBytes() const {
  size_t bytes = sizeof(StoredClock) + header.capacity() * 16 +
                 header_key.capacity() + header_value.capacity();
  for (const auto& [actor, w] : windows) bytes += 48 + w.size() * 12;
  return bytes;
}

void ClockChanges::TouchClock(const Clock& clock) {
  Spill();
  for (ActorId actor : clock.Actors()) whole_.insert(actor);
}

void ClockChanges::TouchSorted(std::span<const Dot> dots) {
  if (dots.empty()) return;
  Spill();
  std::vector<uint64_t> counters;
  for (size_t i = 0; i < dots.size();) {
    const ActorId actor = dots[i].actor;
    counters.clear();
    for (; i < dots.size() && dots[i].actor == actor; ++i) {
      counters.push_back(dots[i].counter);
    }
    IntervalSet added = IntervalSet::FromSorted(counters);
    IntervalSet& ranges = ranges_[actor];
    if (ranges.empty()) {
      ranges = std::move(added);  // A write's first dots of this actor.
    } else {
      ranges.Union(added);
    }
  }
}

namespace {

// The windows of one actor's segments that counter ranges `ranges` may
// have changed: those on disk in the ranges (`persisted`, some may now be
// empty), and those of the cloud's intervals that reach into them.
absl::btree_set<uint64_t> DirtyWindows(
    const IntervalSet& ranges, const IntervalSet* cloud,
    const absl::btree_set<uint64_t>* persisted) {
  using clock_storage::SegmentOf;
  absl::btree_set<uint64_t> windows;
  // A range within one window W, after a range that started in W (and so
  // lay within it) and whose windows were found, adds nothing when W is
  // among them: W's own segment is there, an interval starting in the range
  // starts in W, and one reaching into it from below either starts in W or
  // reached into the previous range too. (A chunk of transferred dots holds
  // dozens of ranges per window.) kMax is no window's first counter.
  static_assert(SegmentOf(kMax) != kMax);
  uint64_t previous_window = kMax;
  for (const auto& [a, b] : ranges) {
    const uint64_t after = b == kMax ? kMax : b + 1;
    const uint64_t window = SegmentOf(a);
    if (SegmentOf(after) == window && window == previous_window &&
        windows.contains(window)) {
      continue;
    }
    previous_window = window;
    if (persisted != nullptr) {
      for (auto w = persisted->lower_bound(SegmentOf(a));
           w != persisted->end() && *w <= SegmentOf(after); ++w) {
        windows.insert(*w);
      }
    }
    if (cloud == nullptr) continue;
    // The interval that reaches into the range from below, and those
    // starting in it (or just after: one may have merged into another).
    if (a > 0 && cloud->Contains(a - 1)) {
      windows.insert(SegmentOf(cloud->IntervalStart(a - 1)));
    }
    for (auto it = cloud->LowerBound(a);
         it != cloud->end() && it->first <= after; ++it) {
      windows.insert(SegmentOf(it->first));
      if (it->second == kMax) break;
    }
  }
  return windows;
}

}  // namespace

void WriteClock(KeyspaceId keyspace, std::string_view set, StateKind kind,
                const Clock& clock, const ClockChanges& changes,
                StoredClock* stored, WriteBatch* batch,
                const clock_storage::HeaderTrailer* trailer) {
  using clock_storage::SegmentOf;
  // A header written with a trailer and rewritten without one (digests and
  // counts no longer kept) loses it.
  const clock_storage::HeaderTrailer want =
      trailer != nullptr ? *trailer : clock_storage::HeaderTrailer();
  const bool trailer_changed = !(stored->trailer == want);
  // Writes stored->header (already the new one) with `want`.
  auto write_header = [&]() {
    if (stored->header_key.empty()) {
      AppendSetStateKey(&stored->header_key, keyspace, set, kind);
    }
    if (stored->header.empty()) {
      batch->Delete(stored->header_key);
      stored->trailer = clock_storage::HeaderTrailer();
    } else {
      stored->header_value.clear();
      clock_storage::EncodeHeader(stored->header, want, &stored->header_value);
      batch->Put(stored->header_key, stored->header_value);
      stored->trailer = want;
    }
  };
  if (changes.has_single_ &&
      clock.cloud().Find(changes.single_.actor) == nullptr &&
      !stored->windows.contains(changes.single_.actor)) {
    // One actor's counters, and no cloud of it in memory or on disk: its
    // base moved (or a counter joined it), and no segment can have changed.
    // (An insert: the header is rebuilt in place.)
    if (!clock_storage::HeaderMatches(clock, stored->header) ||
        trailer_changed) {
      clock_storage::HeaderOfInto(clock, &stored->header);
      write_header();
    }
    return;
  }
  std::vector<clock_storage::HeaderEntry> header =
      clock_storage::HeaderOf(clock);
  auto put_header = [&]() {
    stored->header = std::move(header);
    write_header();
  };
  // Per actor: the counter ranges whose segments may have changed beyond
  // changes.ranges_ (which is not copied: a transfer chunk's holds tens of
  // thousands of ranges).
  absl::flat_hash_map<ActorId, IntervalSet> dirty;
  if (changes.has_single_) {
    dirty[changes.single_.actor].InsertRange(changes.single_.lo,
                                             changes.single_.hi);
  }
  absl::flat_hash_set<ActorId> whole = changes.whole_;
  if (header != stored->header || trailer_changed) {
    // A base that moved absorbed (or gave back) the cloud counters between
    // its old and new values.
    auto moved = [&](ActorId actor) {
      const uint64_t before = BaseIn(stored->header, actor);
      const uint64_t after = BaseIn(header, actor);
      if (before == after) return;
      const uint64_t lo = std::min(before, after);
      const uint64_t hi = std::max(before, after);
      dirty[actor].InsertRange(lo == kMax ? kMax : lo + 1,
                               hi == kMax ? kMax : hi + 1);
    };
    for (const auto& e : stored->header) moved(e.actor);
    for (const auto& e : header) moved(e.actor);
    put_header();
  }
  // The windows to rewrite, per actor.
  auto rewrite = [&](ActorId actor, const absl::btree_set<uint64_t>& windows) {
    const IntervalSet* cloud = clock.cloud().Find(actor);
    auto found = stored->windows.find(actor);
    std::string value;
    for (uint64_t w : windows) {
      value.clear();
      if (cloud != nullptr && clock_storage::EncodeSegment(*cloud, w, &value)) {
        batch->Put(SetStateSegmentKey(keyspace, set, kind, actor, w), value);
        if (found == stored->windows.end()) {
          found =
              stored->windows.emplace(actor, absl::btree_set<uint64_t>()).first;
        }
        found->second.insert(w);
      } else if (found != stored->windows.end() && found->second.erase(w)) {
        batch->Delete(SetStateSegmentKey(keyspace, set, kind, actor, w));
      }
    }
    if (found != stored->windows.end() && found->second.empty()) {
      stored->windows.erase(found);
    }
  };
  for (ActorId actor : whole) {
    absl::btree_set<uint64_t> windows;
    if (auto it = stored->windows.find(actor); it != stored->windows.end()) {
      windows = it->second;
    }
    if (const IntervalSet* cloud = clock.cloud().Find(actor)) {
      for (const auto& [lo, hi] : *cloud) windows.insert(SegmentOf(lo));
    }
    rewrite(actor, windows);
  }
  auto rewrite_ranges = [&](ActorId actor, const IntervalSet& ranges) {
    const auto persisted = stored->windows.find(actor);
    rewrite(actor, DirtyWindows(ranges, clock.cloud().Find(actor),
                                persisted == stored->windows.end()
                                    ? nullptr
                                    : &persisted->second));
  };
  for (const auto& [actor, ranges] : changes.ranges_) {
    if (whole.contains(actor)) continue;
    if (auto more = dirty.find(actor); more != dirty.end()) {
      more->second.Union(ranges);  // Rewritten with the others below.
      continue;
    }
    rewrite_ranges(actor, ranges);
  }
  for (const auto& [actor, ranges] : dirty) {
    if (!whole.contains(actor)) rewrite_ranges(actor, ranges);
  }
}

namespace {

// Feeds the keys of one clock, read in order, to a loader.
struct ClockReader {
  clock_storage::Loader loader;
  StoredClock* stored;

  absl::Status Add(const ParsedKey& key, std::string_view value) {
    absl::Status s =
        key.segment ? loader.AddSegment(key.dot.actor, key.dot.counter, value)
                    : loader.AddHeader(value);
    if (s.ok() && key.segment) {
      stored->windows[key.dot.actor].insert(key.dot.counter);
    }
    return s;
  }
  absl::Status Finish(Clock* clock, bool* found) {
    *found = loader.has_header();
    if (!loader.has_header()) {
      if (!stored->windows.empty()) {
        return absl::DataLossError("clock segments without a header");
      }
      return absl::OkStatus();
    }
    stored->header = loader.header();
    stored->trailer = loader.trailer();
    absl::StatusOr<Clock> loaded = loader.Finish();
    if (!loaded.ok()) return loaded.status();
    *clock = std::move(*loaded);
    return absl::OkStatus();
  }
};

absl::Status Named(std::string_view what, const absl::Status& s) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(ToAbsl(what), ": ", s.message()));
}

}  // namespace

absl::Status ReadClock(Store* store, const ReadOptions& options,
                       KeyspaceId keyspace, std::string_view set,
                       StateKind kind, Clock* clock, StoredClock* stored,
                       bool* found) {
  *clock = Clock();
  *stored = StoredClock();
  auto it = store->NewIterator(options, SetStateRange(keyspace, set, kind));
  ClockReader reader{{}, stored};
  ParsedKey key;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    absl::Status s = DecodeKey(it->key(), &key);
    if (!s.ok()) return absl::DataLossError(s.message());
    BIGSET_RETURN_IF_ERROR(reader.Add(key, it->value()));
  }
  BIGSET_RETURN_IF_ERROR(it->status());
  return reader.Finish(clock, found);
}

absl::Status ReadClockAndTombstone(Store* store, const ReadOptions& options,
                                   KeyspaceId keyspace, std::string_view set,
                                   Clock* clock, StoredClock* stored_clock,
                                   Clock* tombstone,
                                   StoredClock* stored_tombstone, bool* found) {
  *clock = Clock();
  *tombstone = Clock();
  *stored_clock = StoredClock();
  *stored_tombstone = StoredClock();
  KeyRange range = SetStateRange(keyspace, set, StateKind::kClock);
  range.limit = SetStateRange(keyspace, set, StateKind::kTombstone).limit;
  auto it = store->NewIterator(options, std::move(range));
  ClockReader clocks{{}, stored_clock};
  ClockReader tombstones{{}, stored_tombstone};
  ParsedKey key;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    absl::Status s = DecodeKey(it->key(), &key);
    if (!s.ok()) return absl::DataLossError(s.message());
    if (key.kind == KeyKind::kSetClock) {
      BIGSET_RETURN_IF_ERROR(Named("set-clock", clocks.Add(key, it->value())));
    } else {
      BIGSET_RETURN_IF_ERROR(
          Named("set-tombstone", tombstones.Add(key, it->value())));
    }
  }
  BIGSET_RETURN_IF_ERROR(it->status());
  BIGSET_RETURN_IF_ERROR(Named("set-clock", clocks.Finish(clock, found)));
  bool any_tombstone = false;
  return Named("set-tombstone", tombstones.Finish(tombstone, &any_tombstone));
}

}  // namespace bigset
