#include "bigset/replica.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/hash/hash.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "clock_cache.h"
#include "coding.h"
#include "keys_internal.h"
#include "set_state.h"
#include "string_view_compat.h"

namespace bigset {
namespace {

// Metadata key holding the replica's actor id: version byte + fixed64.
constexpr std::string_view kActorMetadata = "actor";
constexpr uint8_t kActorFormatVersion = 1;
// Continuation tokens: version byte + the last element returned.
constexpr char kContinuationVersion = 0x01;

#define BIGSET_RETURN_IF_ERROR(expr)   \
  do {                                 \
    absl::Status _status = (expr);     \
    if (!_status.ok()) return _status; \
  } while (0)

std::string Printable(std::string_view s) {
  return absl::CHexEscape(ToAbsl(s));
}

absl::Status SetCorruption(std::string_view set, std::string_view what,
                           absl::string_view detail = {}) {
  return absl::DataLossError(absl::StrCat("set \"", Printable(set),
                                          "\": ", ToAbsl(what),
                                          detail.empty() ? "" : ": ", detail));
}

ActorId NewActorId() {
  std::random_device rd;
  ActorId a = 0;
  while (a == 0) {
    a = (static_cast<uint64_t>(rd()) << 32) ^ static_cast<uint64_t>(rd());
  }
  return a;
}

// The smallest byte string greater than every string starting with
// `prefix`; nullopt if there is none (prefix empty or all 0xFF).
std::optional<std::string> PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty() && static_cast<uint8_t>(end.back()) == 0xFF) {
    end.pop_back();
  }
  if (end.empty()) return std::nullopt;
  end.back() = static_cast<char>(static_cast<uint8_t>(end.back()) + 1);
  return end;
}

}  // namespace

SetReader::~SetReader() = default;

struct Replica::Stripe {
  explicit Stripe(size_t cache_bytes) : cache(cache_bytes) {}
  absl::Mutex mu;
  ClockCache cache ABSL_GUARDED_BY(mu);
};

// Streams one set's elements from a snapshot (see set_reader.h).
class Replica::Reader final : public SetReader {
 public:
  Reader(View view, std::unique_ptr<Iterator> it, size_t prefix_len,
         const std::string& seek, std::optional<std::string> end,
         bool end_inclusive, size_t batch_size)
      : view_(std::move(view)),
        it_(std::move(it)),
        prefix_len_(prefix_len),
        end_(std::move(end)),
        end_inclusive_(end_inclusive),
        batch_size_(batch_size),
        filter_(!view_.tombstone.empty()) {
    if (seek.empty()) {
      it_->SeekToFirst();
    } else {
      it_->Seek(seek);
    }
  }

  const Clock& clock() const override { return view_.clock; }

  bool AtEnd() const override { return past_end_ || !it_->Valid(); }

  absl::StatusOr<bool> Next(std::vector<ElementDots>* chunk) override {
    // Reuse the caller's ElementDots (their strings and vectors keep their
    // capacity), so a steady read allocates nothing per element.
    size_t n = 0;
    ElementDots* current = nullptr;
    std::string_view element;
    Dot dot;
    while (!past_end_ && it_->Valid()) {
      if (!internal::DecodeElementKeyAfterPrefix(it_->key(), prefix_len_,
                                                 &element, &scratch_, &dot)) {
        return absl::DataLossError(absl::StrCat("bad element key in set read: ",
                                                Printable(it_->key())));
      }
      if (end_.has_value()) {
        int c = element.compare(*end_);
        if (c > 0 || (c == 0 && !end_inclusive_)) {
          past_end_ = true;
          break;
        }
      }
      if (filter_ && view_.tombstone.Seen(dot)) {
        it_->Next();
        continue;
      }
      if (current == nullptr || element != current->element) {
        // Stop before consuming the next element's first key: the next
        // call starts with it.
        if (n == batch_size_) break;
        if (n == chunk->size()) chunk->emplace_back();
        current = &(*chunk)[n++];
        current->element.assign(element);
        current->dots.clear();
      }
      current->dots.push_back(dot);
      it_->Next();
    }
    chunk->resize(n);
    BIGSET_RETURN_IF_ERROR(it_->status());
    return n > 0;
  }

 private:
  View view_;
  std::unique_ptr<Iterator> it_;
  const size_t prefix_len_;
  const std::optional<std::string> end_;
  const bool end_inclusive_;
  const size_t batch_size_;
  const bool filter_;  // Whether the tombstone has any dot.
  bool past_end_ = false;
  std::string scratch_;
};

Replica::Replica(Store* store, const ReplicaOptions& options, ActorId actor)
    : store_(store),
      options_(options),
      actor_(actor),
      write_options_{options.sync_writes} {
  size_t per_stripe =
      std::max<size_t>(1, options.clock_cache_bytes / options.lock_stripes);
  for (int i = 0; i < options.lock_stripes; ++i) {
    stripes_.push_back(std::make_unique<Stripe>(per_stripe));
  }
}

Replica::~Replica() = default;

absl::StatusOr<std::unique_ptr<Replica>> Replica::Open(
    Store* store, const ReplicaOptions& options) {
  if (store == nullptr) return absl::InvalidArgumentError("store is null");
  if (options.lock_stripes < 1) {
    return absl::InvalidArgumentError("lock_stripes must be >= 1");
  }
  const std::string key = MetadataKey(options.keyspace, kActorMetadata);
  std::string value;
  absl::Status s = store->Get(ReadOptions(), key, &value);
  ActorId actor = 0;
  if (s.ok()) {
    coding::Reader in(value);
    uint8_t version = 0;
    if (!in.GetByte(&version) || version != kActorFormatVersion ||
        !in.GetFixed64BE(&actor) || !in.empty() || actor == 0) {
      return absl::DataLossError(absl::StrCat("keyspace ", options.keyspace,
                                              ": undecodable actor id"));
    }
  } else if (absl::IsNotFound(s)) {
    // A keyspace that holds sets but no actor id lost its identity; starting
    // a new actor over its clocks could not be told apart from the old one
    // reusing counters, so refuse.
    auto it = store->NewIterator(ReadOptions(), AllSetsRange(options.keyspace));
    it->SeekToFirst();
    BIGSET_RETURN_IF_ERROR(it->status());
    if (it->Valid()) {
      return absl::DataLossError(absl::StrCat(
          "keyspace ", options.keyspace, " holds set data but no actor id"));
    }
    actor = options.actor_id_source ? options.actor_id_source() : NewActorId();
    if (actor == 0) return absl::InvalidArgumentError("actor id 0 is invalid");
    value.clear();
    value.push_back(static_cast<char>(kActorFormatVersion));
    coding::PutFixed64BE(&value, actor);
    WriteBatch batch;
    batch.Put(key, value);
    WriteOptions sync;
    sync.sync = true;
    BIGSET_RETURN_IF_ERROR(store->Write(sync, batch));
  } else {
    return s;
  }
  return std::unique_ptr<Replica>(new Replica(store, options, actor));
}

Replica::Stripe& Replica::StripeFor(std::string_view set) {
  size_t h = absl::Hash<absl::string_view>()(ToAbsl(set));
  return *stripes_[h % stripes_.size()];
}

absl::StatusOr<SetState> Replica::ReadStateFromStore(std::string_view set) {
  SetState state;
  std::string value;
  absl::Status s = store_->Get(
      ReadOptions(), SetClockKey(options_.keyspace, set, actor_), &value);
  if (s.ok()) {
    absl::StatusOr<Clock> clock = Clock::Decode(value);
    if (!clock.ok()) {
      return SetCorruption(set, "undecodable set-clock",
                           clock.status().message());
    }
    state.clock = std::move(*clock);
  } else if (absl::IsNotFound(s)) {
    // Never treat a missing clock as fresh when the set has keys: its
    // counters could be reused.
    auto it =
        store_->NewIterator(ReadOptions(), SetRange(options_.keyspace, set));
    it->SeekToFirst();
    BIGSET_RETURN_IF_ERROR(it->status());
    if (it->Valid()) {
      return SetCorruption(set, "has keys but no set-clock");
    }
    return state;
  } else {
    return s;
  }
  s = store_->Get(ReadOptions(),
                  SetTombstoneKey(options_.keyspace, set, actor_), &value);
  if (s.ok()) {
    absl::StatusOr<Clock> tombstone = Clock::Decode(value);
    if (!tombstone.ok()) {
      return SetCorruption(set, "undecodable set-tombstone",
                           tombstone.status().message());
    }
    state.tombstone = std::move(*tombstone);
  } else if (!absl::IsNotFound(s)) {
    return s;
  }
  return state;
}

absl::StatusOr<SetState*> Replica::LoadState(Stripe& stripe,
                                             std::string_view set) {
  if (SetState* cached = stripe.cache.Lookup(set)) {
    counters_.clock_cache_hits.fetch_add(1, std::memory_order_relaxed);
    return cached;
  }
  counters_.clock_cache_misses.fetch_add(1, std::memory_order_relaxed);
  absl::StatusOr<SetState> state = ReadStateFromStore(set);
  if (!state.ok()) return state.status();
  return stripe.cache.Insert(set, std::move(*state));
}

void Replica::ApplyContext(std::string_view set, std::string_view element,
                           std::span<const Dot> context, SetState* state,
                           WriteBatch* batch) {
  for (Dot dot : context) {
    if (!dot.valid()) continue;
    if (state->clock.Seen(dot)) {
      // The key is known exactly; deleting an absent key is harmless.
      batch->Delete(ElementKey(options_.keyspace, set, element, dot));
    } else {
      // Seen from now on, so the add carrying it is never written here.
      state->clock.AddDot(dot);
    }
  }
}

void Replica::ApplyClear(std::string_view set, const Clock& clock,
                         SetState* state) {
  (void)set;
  // Only dots already seen can have keys on disk; the others just enter the
  // set-clock so that their keys are never written.
  state->tombstone.Merge(Clock::Intersection(clock, state->clock));
  state->clock.Merge(clock);
}

absl::Status Replica::Commit(Stripe& stripe, std::string_view set,
                             SetState* state, WriteBatch* batch,
                             bool tombstone_changed) {
  std::string value;
  state->clock.EncodeTo(&value);
  batch->Put(SetClockKey(options_.keyspace, set, actor_), value);
  if (tombstone_changed) {
    std::string key = SetTombstoneKey(options_.keyspace, set, actor_);
    if (state->tombstone.empty()) {
      batch->Delete(key);
    } else {
      value.clear();
      state->tombstone.EncodeTo(&value);
      batch->Put(key, value);
    }
  }
  absl::Status s = store_->Write(write_options_, *batch);
  if (!s.ok()) {
    // The cached state already holds the change; drop it so the next access
    // reloads what is really on disk.
    stripe.cache.Erase(set);
    return s;
  }
  stripe.cache.Recharge(set);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Dot>> Replica::CurrentDots(std::string_view set,
                                                      std::string_view element,
                                                      const Clock& tombstone) {
  std::vector<Dot> dots;
  auto it = store_->NewIterator(ReadOptions(),
                                ElementRange(options_.keyspace, set, element));
  ParsedKey key;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    absl::Status s = DecodeKey(it->key(), &key);
    if (!s.ok()) return SetCorruption(set, "bad element key", s.message());
    if (!tombstone.Seen(key.dot)) dots.push_back(key.dot);
  }
  BIGSET_RETURN_IF_ERROR(it->status());
  return dots;
}

absl::StatusOr<Delta> Replica::Update(std::string_view set,
                                      std::span<const UpdateOp> ops) {
  Stripe& stripe = StripeFor(set);
  absl::MutexLock lock(&stripe.mu);
  absl::StatusOr<SetState*> loaded = LoadState(stripe, set);
  if (!loaded.ok()) return loaded.status();
  SetState* state = *loaded;

  Delta delta;
  delta.set.assign(set);
  delta.ops.reserve(ops.size());
  WriteBatch batch;
  uint64_t puts = 0, deletes = 0;
  for (const UpdateOp& op : ops) {
    DeltaOp& d = delta.ops.emplace_back();
    d.element = op.element;
    if (op.context_from_replica) {
      absl::StatusOr<std::vector<Dot>> current =
          CurrentDots(set, op.element, state->tombstone);
      if (!current.ok()) {
        stripe.cache.Erase(set);
        return current.status();
      }
      d.context = std::move(*current);
    } else {
      d.context = op.context;
    }
    size_t before = batch.Count();
    ApplyContext(set, op.element, d.context, state, &batch);
    deletes += batch.Count() - before;
    if (op.kind == UpdateOp::Kind::kAdd) {
      absl::StatusOr<Dot> dot = state->clock.Increment(actor_);
      if (!dot.ok()) {
        stripe.cache.Erase(set);
        return dot.status();
      }
      batch.Put(ElementKey(options_.keyspace, set, op.element, *dot), "");
      ++puts;
      d.add = *dot;
    }
  }
  BIGSET_RETURN_IF_ERROR(Commit(stripe, set, state, &batch, false));
  counters_.updates_coordinated.fetch_add(1, std::memory_order_relaxed);
  counters_.keys_written.fetch_add(puts + 1, std::memory_order_relaxed);
  counters_.keys_deleted.fetch_add(deletes, std::memory_order_relaxed);
  return delta;
}

absl::Status Replica::Apply(const Delta& delta) {
  const std::string_view set = delta.set;
  Stripe& stripe = StripeFor(set);
  absl::MutexLock lock(&stripe.mu);
  absl::StatusOr<SetState*> loaded = LoadState(stripe, set);
  if (!loaded.ok()) return loaded.status();
  SetState* state = *loaded;

  WriteBatch batch;
  bool changed = false;
  bool tombstone_changed = false;
  uint64_t puts = 0;
  if (delta.clear.has_value()) {
    ApplyClear(set, *delta.clear, state);
    changed = tombstone_changed = true;
  }
  for (const DeltaOp& op : delta.ops) {
    // The context part first, always, even if the add's dot was seen.
    for (Dot dot : op.context) {
      if (dot.valid() && !state->clock.Seen(dot)) changed = true;
    }
    ApplyContext(set, op.element, op.context, state, &batch);
    // Never rewrite a seen dot: its key may have been removed.
    if (op.add.has_value() && op.add->valid() && !state->clock.Seen(*op.add)) {
      state->clock.AddDot(*op.add);
      batch.Put(ElementKey(options_.keyspace, set, op.element, *op.add), "");
      ++puts;
      changed = true;
    }
  }
  uint64_t deletes = batch.Count() - puts;
  if (changed || batch.Count() > 0) {
    BIGSET_RETURN_IF_ERROR(
        Commit(stripe, set, state, &batch, tombstone_changed));
    counters_.keys_written.fetch_add(puts + 1, std::memory_order_relaxed);
    counters_.keys_deleted.fetch_add(deletes, std::memory_order_relaxed);
  }
  counters_.deltas_applied.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::StatusOr<Delta> Replica::Clear(std::string_view set, const Clock& clock) {
  Stripe& stripe = StripeFor(set);
  absl::MutexLock lock(&stripe.mu);
  absl::StatusOr<SetState*> loaded = LoadState(stripe, set);
  if (!loaded.ok()) return loaded.status();
  ApplyClear(set, clock, *loaded);
  WriteBatch batch;
  BIGSET_RETURN_IF_ERROR(Commit(stripe, set, *loaded, &batch, true));
  counters_.clears.fetch_add(1, std::memory_order_relaxed);
  counters_.keys_written.fetch_add(2, std::memory_order_relaxed);
  Delta delta;
  delta.set.assign(set);
  delta.clear = clock;
  return delta;
}

absl::StatusOr<Replica::View> Replica::OpenView(std::string_view set,
                                                bool with_clock) {
  Stripe& stripe = StripeFor(set);
  absl::MutexLock lock(&stripe.mu);
  absl::StatusOr<SetState*> loaded = LoadState(stripe, set);
  if (!loaded.ok()) return loaded.status();
  // Taken under the lock: no change of this set is half-way, so the
  // snapshot's keys agree with the clock and tombstone copied here.
  View view;
  view.snapshot = store_->GetSnapshot();
  view.tombstone = (*loaded)->tombstone;
  if (with_clock) view.clock = (*loaded)->clock;
  return view;
}

absl::StatusOr<std::unique_ptr<SetReader>> Replica::Read(
    std::string_view set, const SetReadOptions& options) {
  if (options.batch_size == 0) {
    return absl::InvalidArgumentError("batch_size must be >= 1");
  }
  absl::StatusOr<View> view = OpenView(set, /*with_clock=*/true);
  if (!view.ok()) return view.status();
  ReadOptions ro;
  ro.snapshot = view->snapshot.get();
  ro.fill_cache = options.fill_cache;
  auto it = store_->NewIterator(ro, ElementsRange(options_.keyspace, set));
  std::string seek;
  if (options.start.has_value()) {
    seek = options.start_inclusive
               ? ElementSeekKey(options_.keyspace, set, *options.start)
               : ElementRange(options_.keyspace, set, *options.start).limit;
  }
  return std::unique_ptr<SetReader>(new Reader(
      std::move(*view), std::move(it), internal::ElementKeyPrefixLength(set),
      seek, options.end, options.end_inclusive, options.batch_size));
}

absl::StatusOr<std::vector<Dot>> Replica::Contains(std::string_view set,
                                                   std::string_view element) {
  std::string e(element);
  absl::StatusOr<Membership> m = ContainsAll(set, std::span(&e, 1));
  if (!m.ok()) return m.status();
  return std::move(m->elements[0].dots);
}

absl::StatusOr<Membership> Replica::ContainsAll(
    std::string_view set, std::span<const std::string> elements, Clock* clock) {
  absl::StatusOr<View> view = OpenView(set, /*with_clock=*/clock != nullptr);
  if (!view.ok()) return view.status();
  ReadOptions ro;
  ro.snapshot = view->snapshot.get();
  auto it = store_->NewIterator(ro, ElementsRange(options_.keyspace, set));

  // Seek in element order so the iterator only moves forward.
  std::vector<size_t> order(elements.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return elements[a] < elements[b]; });
  if (clock != nullptr) *clock = std::move(view->clock);
  Membership result;
  result.elements.resize(elements.size());
  result.all_present = true;
  ParsedKey key;
  for (size_t n = 0; n < order.size(); ++n) {
    size_t i = order[n];
    ElementDots& out = result.elements[i];
    out.element = elements[i];
    if (n > 0 && elements[order[n - 1]] == elements[i]) {
      out.dots = result.elements[order[n - 1]].dots;
    } else {
      for (it->Seek(ElementSeekKey(options_.keyspace, set, elements[i]));
           it->Valid(); it->Next()) {
        absl::Status s = DecodeKey(it->key(), &key);
        if (!s.ok()) return SetCorruption(set, "bad element key", s.message());
        if (key.element != elements[i]) break;
        if (!view->tombstone.Seen(key.dot)) out.dots.push_back(key.dot);
      }
      BIGSET_RETURN_IF_ERROR(it->status());
    }
    if (out.dots.empty()) result.all_present = false;
  }
  return result;
}

absl::StatusOr<RangeResult> Replica::Range(std::string_view set,
                                           const RangeQuery& query) {
  // Where to start: after the continuation's element, or at the bound.
  std::string seek;
  std::optional<std::string> after;  // Skip elements <= this one.
  if (!query.continuation.empty()) {
    if (query.continuation[0] != kContinuationVersion) {
      return absl::InvalidArgumentError("unrecognised continuation token");
    }
    after = query.continuation.substr(1);
    seek = ElementRange(options_.keyspace, set, *after).limit;
  } else if (query.start.has_value()) {
    seek = query.start_inclusive
               ? ElementSeekKey(options_.keyspace, set, *query.start)
               : ElementRange(options_.keyspace, set, *query.start).limit;
  }

  absl::StatusOr<View> view = OpenView(set, /*with_clock=*/false);
  if (!view.ok()) return view.status();
  ReadOptions ro;
  ro.snapshot = view->snapshot.get();
  auto it = store_->NewIterator(ro, ElementsRange(options_.keyspace, set));
  if (seek.empty()) {
    it->SeekToFirst();
  } else {
    it->Seek(seek);
  }

  RangeResult result;
  ParsedKey key;
  for (; it->Valid(); it->Next()) {
    absl::Status s = DecodeKey(it->key(), &key);
    if (!s.ok()) return SetCorruption(set, "bad element key", s.message());
    if (query.end.has_value()) {
      int c = key.element.compare(*query.end);
      if (c > 0 || (c == 0 && !query.end_inclusive)) break;
    }
    if (view->tombstone.Seen(key.dot)) continue;
    if (result.elements.empty() ||
        result.elements.back().element != key.element) {
      if (query.limit != 0 && result.elements.size() == query.limit) {
        result.continuation.push_back(kContinuationVersion);
        result.continuation.append(result.elements.back().element);
        break;
      }
      result.elements.push_back(ElementDots{std::string(key.element), {}});
    }
    result.elements.back().dots.push_back(key.dot);
  }
  BIGSET_RETURN_IF_ERROR(it->status());
  return result;
}

absl::StatusOr<RangeResult> Replica::Prefix(std::string_view set,
                                            std::string_view prefix,
                                            size_t limit,
                                            std::string_view continuation) {
  RangeQuery q;
  q.start = std::string(prefix);
  q.start_inclusive = true;
  q.end = PrefixEnd(prefix);
  q.end_inclusive = false;
  q.limit = limit;
  q.continuation.assign(continuation);
  return Range(set, q);
}

absl::StatusOr<uint64_t> Replica::Count(std::string_view set) {
  absl::StatusOr<View> view = OpenView(set, /*with_clock=*/false);
  if (!view.ok()) return view.status();
  ReadOptions ro;
  ro.snapshot = view->snapshot.get();
  ro.fill_cache = false;
  auto it = store_->NewIterator(ro, ElementsRange(options_.keyspace, set));
  uint64_t count = 0;
  std::string last;
  ParsedKey key;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    absl::Status s = DecodeKey(it->key(), &key);
    if (!s.ok()) return SetCorruption(set, "bad element key", s.message());
    if (view->tombstone.Seen(key.dot)) continue;
    if (count == 0 || key.element != last) {
      ++count;
      last.assign(key.element);
    }
  }
  BIGSET_RETURN_IF_ERROR(it->status());
  return count;
}

absl::StatusOr<Clock> Replica::GetClock(std::string_view set) {
  Stripe& stripe = StripeFor(set);
  absl::MutexLock lock(&stripe.mu);
  absl::StatusOr<SetState*> loaded = LoadState(stripe, set);
  if (!loaded.ok()) return loaded.status();
  return (*loaded)->clock;
}

absl::StatusOr<std::vector<std::string>> Replica::ListSets(
    std::optional<std::string> after, size_t limit) {
  auto it = store_->NewIterator(ReadOptions(), AllSetsRange(options_.keyspace));
  if (after.has_value()) {
    it->Seek(SetRange(options_.keyspace, *after).limit);
  } else {
    it->SeekToFirst();
  }
  std::vector<std::string> sets;
  ParsedKey key;
  while (it->Valid() && (limit == 0 || sets.size() < limit)) {
    absl::Status s = DecodeKey(it->key(), &key);
    if (!s.ok()) return absl::DataLossError(s.message());
    sets.emplace_back(key.set);
    // Jump past every key of this set.
    it->Seek(SetRange(options_.keyspace, key.set).limit);
  }
  BIGSET_RETURN_IF_ERROR(it->status());
  return sets;
}

absl::StatusOr<SetStats> Replica::GetSetStats(std::string_view set) {
  Stripe& stripe = StripeFor(set);
  absl::MutexLock lock(&stripe.mu);
  absl::StatusOr<SetState*> loaded = LoadState(stripe, set);
  if (!loaded.ok()) return loaded.status();
  const SetState& s = **loaded;
  SetStats stats;
  stats.clock_bytes = s.clock.Encode().size();
  stats.tombstone_bytes = s.tombstone.empty() ? 0 : s.tombstone.Encode().size();
  stats.clock_dots = s.clock.DotCount();
  stats.tombstone_dots = s.tombstone.DotCount();
  return stats;
}

ReplicaStats Replica::stats() const {
  ReplicaStats s;
  s.updates_coordinated = counters_.updates_coordinated.load();
  s.deltas_applied = counters_.deltas_applied.load();
  s.clears = counters_.clears.load();
  s.keys_written = counters_.keys_written.load();
  s.keys_deleted = counters_.keys_deleted.load();
  s.clock_cache_hits = counters_.clock_cache_hits.load();
  s.clock_cache_misses = counters_.clock_cache_misses.load();
  return s;
}

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
        if (key.dot.actor != actor_) break;  // Another actor's copy.
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
