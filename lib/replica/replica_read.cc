// Replica's read side: streaming reads (SetReader), membership, ranges,
// counts, the list of sets, and the sets' summaries and digests for
// anti-entropy. Every read works on one store snapshot taken
// under the set's stripe lock, so it agrees with the clock and tombstone
// copied at the same moment.

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bigset/replica/replica.h"
#include "core/coding.h"
#include "core/digest.h"
#include "core/status_macros.h"
#include "keys/keys_internal.h"
#include "replica/continuation.h"
#include "replica/presence_filter.h"
#include "replica/replica_impl.h"
#include "replica/replica_internal.h"
#include "replica/set_state.h"

namespace bigset {

using replica_internal::Printable;
using replica_internal::SetCorruption;

namespace {

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

// Streams one set's elements from a snapshot (see set_reader.h).
class ReplicaImpl::Reader final : public SetReader {
 public:
  Reader(View view, std::unique_ptr<Iterator> it, size_t prefix_len,
         const std::string& seek, const SetReadOptions& options)
      : view_(std::move(view)),
        it_(std::move(it)),
        prefix_len_(prefix_len),
        bounds_(options.bounds),
        batch_size_(options.batch_size),
        max_chunk_bytes_(options.max_chunk_bytes),
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
    size_t bytes = 0;
    ElementDots* current = nullptr;
    std::string_view element;
    Dot dot;
    while (!past_end_ && it_->Valid()) {
      if (!internal::DecodeElementKeyAfterPrefix(it_->key(), prefix_len_,
                                                 &element, &scratch_, &dot)) {
        return absl::DataLossError(absl::StrCat("bad element key in set read: ",
                                                Printable(it_->key())));
      }
      if (bounds_.PastEnd(element)) {
        past_end_ = true;
        break;
      }
      if (filter_ && view_.tombstone.Seen(dot)) {
        it_->Next();
        continue;
      }
      if (current == nullptr || element != current->element) {
        // Stop before consuming the next element's first key: the next
        // call starts with it.
        if (n == batch_size_ || bytes >= max_chunk_bytes_) break;
        if (n == chunk->size()) chunk->emplace_back();
        current = &(*chunk)[n++];
        current->element.assign(element);
        current->dots.clear();
        bytes += element.size();
      }
      current->dots.push_back(dot);
      bytes += kBytesPerDot;
      it_->Next();
    }
    chunk->resize(n);
    BIGSET_RETURN_IF_ERROR(it_->status());
    return n > 0;
  }

 private:
  // What a dot adds to a chunk's size (its encoding is at most 18 bytes).
  static constexpr size_t kBytesPerDot = 16;

  View view_;
  std::unique_ptr<Iterator> it_;
  const size_t prefix_len_;
  const ElementBounds bounds_;
  const size_t batch_size_;
  const size_t max_chunk_bytes_;
  const bool filter_;  // Whether the tombstone has any dot.
  bool past_end_ = false;
  std::string scratch_;
};

absl::StatusOr<ReplicaImpl::View> ReplicaImpl::OpenView(
    std::string_view set, bool with_clock, std::span<const std::string> probe) {
  Stripe& stripe = StripeFor(set);
  MutexLock lock(&stripe.mu);
  BIGSET_ASSIGN_OR_RETURN(const SetState* state, LoadState(stripe, set));
  // Taken under the lock: no change of this set is half-way, so the
  // snapshot's keys agree with the clock and tombstone copied here, and
  // with the presence filter (every element with a live key was added to
  // it before its write committed).
  View view;
  view.snapshot = store_->GetSnapshot();
  view.tombstone = state->tombstone;
  if (with_clock) view.clock = state->clock;
  if (!probe.empty()) {
    view.absent.assign(probe.size(), false);
    auto it = stripe.filters.find(ToAbsl(set));
    if (it != stripe.filters.end()) {
      // The blocks of an element a few ahead load while this one is
      // probed: a large filter misses the cache on every probe.
      constexpr size_t kAhead = 8;
      const PresenceFilter& filter = *it->second;
      std::vector<uint64_t> hashes(probe.size());
      for (size_t i = 0; i < probe.size(); ++i) {
        hashes[i] = PresenceFilter::Hash(probe[i]);
        if (i < kAhead) filter.Prefetch(hashes[i]);
      }
      for (size_t i = 0; i < probe.size(); ++i) {
        if (i + kAhead < probe.size()) filter.Prefetch(hashes[i + kAhead]);
        view.absent[i] = !filter.MayContain(hashes[i]);
      }
    }
  }
  return view;
}

std::string ReplicaImpl::SeekKey(std::string_view set,
                                 const ElementBounds& bounds) const {
  if (!bounds.start.has_value()) return {};
  return bounds.start_inclusive
             ? ElementSeekKey(options_.keyspace, set, *bounds.start)
             : ElementRange(options_.keyspace, set, *bounds.start).limit;
}

absl::StatusOr<std::unique_ptr<SetReader>> ReplicaImpl::Read(
    std::string_view set, const SetReadOptions& options) {
  if (options.batch_size == 0 || options.max_chunk_bytes == 0) {
    return absl::InvalidArgumentError(
        "batch_size and max_chunk_bytes must be >= 1");
  }
  absl::StatusOr<View> view = OpenView(set, /*with_clock=*/true);
  if (!view.ok()) return view.status();
  ReadOptions ro;
  ro.snapshot = view->snapshot.get();
  ro.fill_cache = options.fill_cache;
  auto it = store_->NewIterator(ro, ElementsRange(options_.keyspace, set));
  return std::unique_ptr<SetReader>(new Reader(
      std::move(*view), std::move(it), internal::ElementKeyPrefixLength(set),
      SeekKey(set, options.bounds), options));
}

absl::StatusOr<std::vector<Dot>> ReplicaImpl::Contains(
    std::string_view set, std::string_view element) {
  // One element: no snapshot object. The iterator, created under the stripe
  // lock, sees the store as of then (Store::NewIterator), which is what the
  // tombstone copied under the same lock describes.
  KeyRange range = ElementRange(options_.keyspace, set, element);
  const size_t key_size = range.start.size() + 16;  // + the dot.
  std::unique_ptr<Iterator> it;
  Clock tombstone;
  {
    Stripe& stripe = StripeFor(set);
    MutexLock lock(&stripe.mu);
    BIGSET_ASSIGN_OR_RETURN(const SetState* state, LoadState(stripe, set));
    if (!state->tombstone.empty()) tombstone = state->tombstone;
    // Moved: the iterator keeps its bounds (a copy is two allocations).
    it = store_->NewIterator(ReadOptions(), std::move(range));
  }
  std::vector<Dot> dots;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    // Every key of the range is this element's: its key, then a dot.
    const std::string_view key = it->key();
    if (key.size() != key_size) {
      return SetCorruption(set, "bad element key", Printable(key));
    }
    const Dot dot{coding::DecodeFixed64BE(key.data() + key_size - 16),
                  coding::DecodeFixed64BE(key.data() + key_size - 8)};
    if (!tombstone.Seen(dot)) dots.push_back(dot);
  }
  BIGSET_RETURN_IF_ERROR(it->status());
  return dots;
}

absl::StatusOr<Membership> ReplicaImpl::ContainsAll(
    std::string_view set, std::span<const std::string> elements, Clock* clock) {
  // Elements the presence filter knows are absent need no seek (a query
  // of members the set lacks, the read before an add).
  absl::StatusOr<View> view =
      OpenView(set, /*with_clock=*/clock != nullptr, elements);
  if (!view.ok()) return view.status();
  ReadOptions ro;
  ro.snapshot = view->snapshot.get();
  auto it = store_->NewIterator(ro, ElementsRange(options_.keyspace, set));

  // Seek in element order so the iterator only moves forward.
  std::vector<size_t> order(elements.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  // Callers often ask in element order already (bigsetd's batches).
  if (!std::is_sorted(elements.begin(), elements.end())) {
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return elements[a] < elements[b]; });
  }
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
    } else if (view->absent[i]) {
      counters_.presence_seeks_saved.fetch_add(1, std::memory_order_relaxed);
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

absl::StatusOr<RangeResult> ReplicaImpl::Range(std::string_view set,
                                               const RangeQuery& query) {
  // Where to start: after the continuation's element, or at the bound.
  ElementBounds bounds = query;
  if (!query.continuation.empty()) {
    absl::StatusOr<std::string> after = DecodeContinuation(query.continuation);
    if (!after.ok()) return after.status();
    bounds.start = std::move(*after);
    bounds.start_inclusive = false;
  }
  const std::string seek = SeekKey(set, bounds);

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
    if (bounds.PastEnd(key.element)) break;
    if (view->tombstone.Seen(key.dot)) continue;
    if (result.elements.empty() ||
        result.elements.back().element != key.element) {
      if (query.limit != 0 && result.elements.size() == query.limit) {
        result.continuation =
            EncodeContinuation(result.elements.back().element);
        break;
      }
      result.elements.push_back(ElementDots{std::string(key.element), {}});
    }
    result.elements.back().dots.push_back(key.dot);
  }
  BIGSET_RETURN_IF_ERROR(it->status());
  return result;
}

absl::StatusOr<RangeResult> ReplicaImpl::Prefix(std::string_view set,
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

absl::StatusOr<uint64_t> ReplicaImpl::ScanCount(std::string_view set) {
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

absl::StatusOr<std::vector<std::string>> ReplicaImpl::ListSets(
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

// ---- Anti-entropy: set summaries, and the digests built at Open.

absl::StatusOr<uint64_t> ReplicaImpl::ScanKeysDigest(std::string_view set) {
  uint64_t sum = 0;
  BIGSET_RETURN_IF_ERROR(replica_internal::ScanElementKeys(
      store_, options_.keyspace, set,
      [&sum](std::string_view element, Dot dot) {
        sum += digest::KeyDigest(element, dot);
      }));
  return sum;
}

namespace replica_internal {

absl::Status ScanElementKeys(
    Store* store, KeyspaceId keyspace, std::string_view set,
    absl::FunctionRef<void(std::string_view element, Dot dot)> fn) {
  ReadOptions ro;
  ro.fill_cache = false;
  auto it = store->NewIterator(ro, ElementsRange(keyspace, set));
  const size_t prefix_len = internal::ElementKeyPrefixLength(set);
  std::string_view element;
  std::string scratch;
  Dot dot;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    if (!internal::DecodeElementKeyAfterPrefix(it->key(), prefix_len, &element,
                                               &scratch, &dot)) {
      return SetCorruption(set, "bad element key");
    }
    fn(element, dot);
  }
  return it->status();
}

}  // namespace replica_internal

absl::Status ReplicaImpl::BuildDigests() {
  std::optional<std::string> after;
  for (;;) {
    absl::StatusOr<std::vector<std::string>> sets = ListSets(after, 1000);
    if (!sets.ok()) return sets.status();
    for (const std::string& set : *sets) {
      absl::StatusOr<SetState> state = ReadStateFromStore(set);
      // A set whose state cannot be read counts as nothing: its reads and
      // writes fail the same way until it is repaired.
      if (!state.ok()) continue;
      digests_.Add(digests_.BucketOf(set), state->set_digest);
    }
    if (sets->size() < 1000) return absl::OkStatus();
    after = sets->back();
  }
}

namespace {

SetSummary SummaryOf(std::string_view set, const SetState& state,
                     bool with_clock) {
  SetSummary s;
  s.set.assign(set);
  s.digest = state.set_digest;
  s.keys_digest = state.keys_digest;
  s.tombstone_empty = state.tombstone.empty();
  if (with_clock) s.clock = state.clock;
  return s;
}

}  // namespace

absl::StatusOr<SetSummary> ReplicaImpl::Summarize(std::string_view set) {
  Stripe& stripe = StripeFor(set);
  MutexLock lock(&stripe.mu);
  BIGSET_ASSIGN_OR_RETURN(const SetState* state, LoadState(stripe, set));
  return SummaryOf(set, *state, /*with_clock=*/true);
}

absl::Status ReplicaImpl::ForEachSetSummary(
    std::span<const uint32_t> buckets,
    const std::function<bool(SetSummary&)>& fn) {
  std::vector<uint32_t> wanted(buckets.begin(), buckets.end());
  std::sort(wanted.begin(), wanted.end());
  if (wanted.empty()) return absl::OkStatus();
  std::optional<std::string> after;
  for (;;) {
    absl::StatusOr<std::vector<std::string>> sets = ListSets(after, 1000);
    if (!sets.ok()) return sets.status();
    for (const std::string& set : *sets) {
      if (!std::binary_search(wanted.begin(), wanted.end(),
                              digests_.BucketOf(set))) {
        continue;
      }
      SetSummary summary;
      {
        Stripe& stripe = StripeFor(set);
        MutexLock lock(&stripe.mu);
        absl::StatusOr<SetState*> loaded = LoadState(stripe, set);
        if (!loaded.ok()) continue;  // Unreadable: skipped, as at Open.
        summary = SummaryOf(set, **loaded, /*with_clock=*/false);
      }
      if (!fn(summary)) return absl::OkStatus();
    }
    if (sets->size() < 1000) return absl::OkStatus();
    after = sets->back();
  }
}

}  // namespace bigset
