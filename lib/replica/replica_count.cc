// Counts (docs/DESIGN.md, "Counts"): each set's number of present elements,
// kept exact by every write in the batch of the change, and the presence
// filters that let an add know without a read that its element was absent.
//
// An element is present iff it has a live key (one whose dot the tombstone
// does not cover). A write learns each touched element's live dots before
// it changes them (LiveDots), so it knows whether the element was present
// before and is after, and adjusts the count by the difference. A grown
// tombstone hides keys without naming their elements: a clear that covers
// every dot that can have a key sets the count to 0; any other makes the
// count unknown until a scan (CountScan) counts the set again.

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bigset/replica/replica.h"
#include "core/digest.h"
#include "core/status_macros.h"
#include "keys/keys_internal.h"
#include "replica/presence_filter.h"
#include "replica/replica_impl.h"
#include "replica/replica_internal.h"
#include "replica/set_state.h"

namespace bigset {

using replica_internal::SetCorruption;

namespace {

// A set without a filter builds one (with a count scan) after this many
// seeks, or a quarter of its count if that is more: the scan's cost, spread
// over the seeks it saves, stays a few key reads per write.
constexpr uint64_t kMinSeeksBeforeBuild = 256;

// How many ops ahead a write of many elements loads the filter's blocks
// (PrefetchPresence): enough to cover a cache miss's latency with the work
// of the ops in between.
constexpr size_t kPresencePrefetch = 8;

}  // namespace

absl::Status ReplicaImpl::PrepareLiveness(Stripe& stripe, std::string_view set,
                                          SetState* state,
                                          StateChanges* changes) {
  changes->filter = nullptr;
  if (!options_.keep_counts) return absl::OkStatus();
  auto it = stripe.filters.find(ToAbsl(set));
  if (it != stripe.filters.end()) {
    changes->filter = it->second.get();
    return absl::OkStatus();
  }
  if (state->count_known && state->count == 0) {
    // Nothing is present: an empty filter is exact.
    // (Its bytes are reserved as it grows, in NotePresent.)
    auto filter = std::make_unique<PresenceFilter>();
    changes->filter = filter.get();
    stripe.filters.emplace(std::string(set), std::move(filter));
    return absl::OkStatus();
  }
  const uint64_t threshold = std::max<uint64_t>(
      kMinSeeksBeforeBuild, state->count_known ? state->count / 4 : 0);
  if (state->presence_seeks < threshold) return absl::OkStatus();
  state->presence_seeks = 0;
  // A filter the budget cannot hold would be built by a scan of the whole
  // set and dropped again: wait until there is room for it.
  if (state->count_known &&
      filter_budget_->available() < PresenceFilter::BytesFor(state->count)) {
    return absl::OkStatus();
  }
  BIGSET_RETURN_IF_ERROR(CountScan(stripe, set, state));
  it = stripe.filters.find(ToAbsl(set));
  if (it != stripe.filters.end()) changes->filter = it->second.get();
  return absl::OkStatus();
}

void ReplicaImpl::HashForPresence(std::span<const std::string_view> elements,
                                  StateChanges* changes) {
  changes->op_hashes.clear();
  if (changes->one_element || changes->filter == nullptr) return;
  changes->op_hashes.reserve(elements.size());
  for (std::string_view e : elements) {
    changes->op_hashes.push_back(PresenceFilter::Hash(e));
  }
  for (size_t i = 0; i < kPresencePrefetch && i < elements.size(); ++i) {
    changes->filter->Prefetch(changes->op_hashes[i]);
  }
}

void ReplicaImpl::PrefetchPresence(size_t op, StateChanges* changes) {
  if (changes->op_hashes.empty() || changes->filter == nullptr) return;
  if (op + kPresencePrefetch < changes->op_hashes.size()) {
    changes->filter->Prefetch(changes->op_hashes[op + kPresencePrefetch]);
  }
  changes->element_hash = changes->op_hashes[op];
  changes->element_hash_known = true;
}

void ReplicaImpl::StartPresenceProbe(std::string_view element,
                                     StateChanges* changes) {
  if (!changes->one_element || changes->filter == nullptr) return;
  changes->element_hash = PresenceFilter::Hash(element);
  changes->element_hash_known = true;
  changes->filter->Prefetch(changes->element_hash);
}

absl::StatusOr<std::vector<Dot>*> ReplicaImpl::LiveDotsOfOp(
    Stripe& stripe, std::string_view set, size_t op, std::string_view element,
    SetState* state, StateChanges* changes) {
  PrefetchPresence(op, changes);
  absl::StatusOr<std::vector<Dot>*> dots =
      LiveDots(set, element, state, changes);
  if (!dots.ok()) stripe.cache->Erase(set);
  return dots;
}

absl::StatusOr<std::vector<Dot>*> ReplicaImpl::LiveDots(
    std::string_view set, std::string_view element, SetState* state,
    StateChanges* changes) {
  // A write of one element needs no map (the common insert).
  std::vector<Dot>* dots_out = nullptr;
  if (changes->one_element) {
    changes->single_live.clear();
    dots_out = &changes->single_live;
    if (!changes->element_hash_known) {
      changes->element_hash = PresenceFilter::Hash(element);
    }
  } else {
    // The hash PrefetchPresence computed, if it did.
    if (!changes->element_hash_known) {
      changes->element_hash = PresenceFilter::Hash(element);
    }
    changes->element_hash_known = false;
    auto [it, inserted] = changes->live.try_emplace(ToAbsl(element));
    if (!inserted) return &it->second;
    dots_out = &it->second;
  }
  if (changes->filter != nullptr &&
      !changes->filter->MayContain(changes->element_hash)) {
    return dots_out;  // Certainly absent.
  }
  counters_.presence_seeks.fetch_add(1, std::memory_order_relaxed);
  ++state->presence_seeks;
  if (changes->elements_it == nullptr) {
    changes->elements_it = store_->NewIterator(
        ReadOptions(), ElementsRange(options_.keyspace, set));
  }
  absl::StatusOr<std::vector<Dot>> dots =
      CurrentDots(changes->elements_it.get(), set, element, state->tombstone);
  if (!dots.ok()) {
    if (!changes->one_element) changes->live.erase(ToAbsl(element));
    return dots.status();
  }
  *dots_out = std::move(*dots);
  return dots_out;
}

void ReplicaImpl::NotePresent(Stripe& stripe, std::string_view set,
                              uint64_t hash, StateChanges* changes) {
  PresenceFilter* filter = changes->filter;
  if (filter == nullptr) return;
  const size_t growth = filter->GrowthBytes();
  if (growth > 0) {
    if (!ReserveFilterBytes(stripe, set, growth)) {
      // No room to grow: without the filter the set's adds seek.
      DropFilter(stripe, set, changes);
      counters_.presence_filters_dropped.fetch_add(1,
                                                   std::memory_order_relaxed);
      return;
    }
    // Reserved here, accounted by MemoryBytes from now on.
  }
  filter->Add(hash);
}

void ReplicaImpl::Recount(bool was, bool now, SetState* state) {
  if (!state->count_known || was == now) return;
  if (now) {
    ++state->count;
  } else {
    --state->count;
  }
}

void ReplicaImpl::TombstoneGrew(bool all_covered, SetState* state,
                                StateChanges* changes) {
  if (!options_.keep_counts) return;
  if (all_covered) {
    state->count = 0;
    state->count_known = true;
    // No element is present: the filter may forget them all, once the
    // write is committed (Commit; if it fails, the clear never happened).
    changes->reset_filter = true;
  } else {
    state->count_known = false;
    state->count = 0;
  }
  // Live dots learnt before the tombstone grew may be covered now.
  changes->live.clear();
}

absl::Status ReplicaImpl::CountScan(Stripe& stripe, std::string_view set,
                                    SetState* state) {
  counters_.count_scans.fetch_add(1, std::memory_order_relaxed);
  // A new filter: only live elements need to be in it.
  std::unique_ptr<PresenceFilter> filter;
  {
    auto old = stripe.filters.find(ToAbsl(set));
    if (old != stripe.filters.end()) {
      ReleaseFilterBytes(old->second->MemoryBytes());
      stripe.filters.erase(old);
    }
    // Sized for the count last known; its bytes are reserved as it grows.
    filter =
        std::make_unique<PresenceFilter>(state->count_known ? state->count : 0);
  }
  std::string last;
  uint64_t count = 0;
  BIGSET_RETURN_IF_ERROR(replica_internal::ScanElementKeys(
      store_, options_.keyspace, set,
      // Runs within this call, under the stripe's lock.
      [&](std::string_view element, Dot dot)
          ABSL_EXCLUSIVE_LOCKS_REQUIRED(stripe.mu) {
            if (state->tombstone.Seen(dot)) return;
            if (count > 0 && element == last) return;
            ++count;
            last.assign(element);
            if (filter == nullptr) return;
            const size_t growth = filter->GrowthBytes();
            if (growth > 0 && !ReserveFilterBytes(stripe, set, growth)) {
              filter.reset();
              counters_.presence_filters_dropped.fetch_add(
                  1, std::memory_order_relaxed);
            } else {
              filter->Add(PresenceFilter::Hash(element));
            }
          }));
  state->count = count;
  state->count_known = true;
  if (filter != nullptr) {
    // Reserved as it grew; now accounted by the map.
    stripe.filters.emplace(std::string(set), std::move(filter));
  }
  return absl::OkStatus();
}

bool ReplicaImpl::ReserveFilterBytes(Stripe& stripe, std::string_view set,
                                     size_t bytes) {
  if (filter_budget_->TryReserve(bytes)) {
    filter_bytes_.fetch_add(bytes, std::memory_order_relaxed);
    return true;
  }
  // Over: drop other filters of this stripe (other stripes' filters are
  // under their own locks, other replicas' under theirs) until the new
  // bytes fit.
  for (auto it = stripe.filters.begin(); it != stripe.filters.end();) {
    if (it->first == set) {
      ++it;
      continue;
    }
    ReleaseFilterBytes(it->second->MemoryBytes());
    counters_.presence_filters_dropped.fetch_add(1, std::memory_order_relaxed);
    stripe.filters.erase(it++);
    if (filter_budget_->TryReserve(bytes)) {
      filter_bytes_.fetch_add(bytes, std::memory_order_relaxed);
      return true;
    }
  }
  return false;
}

void ReplicaImpl::ReleaseFilterBytes(size_t bytes) {
  filter_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  filter_budget_->Release(bytes);
}

void ReplicaImpl::DropFilter(Stripe& stripe, std::string_view set,
                             StateChanges* changes) {
  auto it = stripe.filters.find(ToAbsl(set));
  if (it != stripe.filters.end()) {
    ReleaseFilterBytes(it->second->MemoryBytes());
    stripe.filters.erase(it);
  }
  changes->filter = nullptr;
}

absl::StatusOr<uint64_t> ReplicaImpl::Count(std::string_view set) {
  if (!options_.keep_counts) return ScanCount(set);  // replica_read.cc
  absl::StatusOr<SetCount> summary = CountSummary(set);
  if (!summary.ok()) return summary.status();
  return summary->count;
}

absl::StatusOr<SetCount> ReplicaImpl::CountSummary(std::string_view set) {
  SetCount out;
  bool scan = !options_.keep_counts;
  {
    Stripe& stripe = StripeFor(set);
    MutexLock lock(&stripe.mu);
    BIGSET_ASSIGN_OR_RETURN(SetState * state, LoadState(stripe, set));
    out.found = !state->clock.empty();
    out.digest = state->set_digest;
    // Linear in the tombstone's runs; a tombstone is empty once swept.
    if (options_.keep_digests && !state->tombstone.empty()) {
      out.tombstone_digest = digest::ClockDigest(state->tombstone);
    }
    if (!scan && !state->count_known) {
      if (options_.read_only) {
        scan = true;  // Nothing can be stored: count a snapshot (below).
      } else {
        BIGSET_RETURN_IF_ERROR(CountScan(stripe, set, state));
        if (!closed_.load(std::memory_order_relaxed) && out.found) {
          WriteBatch batch;
          BIGSET_RETURN_IF_ERROR(
              Commit(stripe, set, state, &batch, StateChanges()));
        }
      }
    }
    if (!scan) {
      out.count = state->count;
      return out;
    }
  }
  absl::StatusOr<uint64_t> count = ScanCount(set);
  if (!count.ok()) return count.status();
  out.count = *count;
  return out;
}

}  // namespace bigset
