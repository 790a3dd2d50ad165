// ReplicaImpl::TransferReceiver (transfer_receiver.h).

#include "replica/transfer_receiver.h"

#include <algorithm>
#include <string>
#include <vector>

#include "bigset/replica/replica.h"
#include "core/digest.h"
#include "core/dot_sort.h"
#include "core/status_macros.h"
#include "keys/keys_internal.h"
#include "replica/presence_filter.h"
#include "replica/replica_impl.h"
#include "replica/replica_internal.h"
#include "replica/set_state.h"

namespace bigset {
namespace {

// Elements in ascending order (as senders stream them) are each touched
// once: their presence needs no per-write map.
bool Ascending(std::span<const ElementDots> chunk) {
  for (size_t i = 1; i < chunk.size(); ++i) {
    if (!(chunk[i - 1].element < chunk[i].element)) return false;
  }
  return true;
}

// Which of the chunk's dots `clock` has seen already (rare: sent twice, or
// stored here), found in one ordered pass over the clock; both sorted, and
// *fresh is what the clock, its digest and the stored clock take.
void SplitChunkDots(const Clock& clock, std::span<const ElementDots> chunk,
                    std::vector<Dot>* seen, std::vector<Dot>* fresh) {
  std::vector<Dot> all;
  size_t total = 0;
  for (const ElementDots& e : chunk) total += e.dots.size();
  all.reserve(total);
  for (const ElementDots& e : chunk) {
    all.insert(all.end(), e.dots.begin(), e.dots.end());
  }
  SortDots(&all);
  fresh->reserve(all.size());
  clock.SplitSeen(all, seen, fresh);
}

// Bytes to reserve for a chunk's batch, so that it is built with one
// allocation, not grown by doubling (a copy of everything so far and fresh
// pages, per doubling, per chunk): per key its prefix, the element, its
// terminator and dot (18 bytes) and the batch's framing (5; escaped NULs
// may need more), then room for the stored clock's segments.
size_t ChunkBatchBytes(std::span<const ElementDots> chunk, size_t prefix_len) {
  size_t bytes = 0;
  for (const ElementDots& e : chunk) {
    bytes += e.dots.size() * (prefix_len + e.element.size() + 25);
  }
  return bytes + bytes / 8 + 4096;
}

// The presence filter's hash of every element, computed first so that the
// filter's line of an element a few ahead can be fetched while one is
// handled (each is a cache miss).
std::vector<uint64_t> ElementHashes(std::span<const ElementDots> chunk) {
  std::vector<uint64_t> hashes;
  hashes.reserve(chunk.size());
  for (const ElementDots& e : chunk) {
    hashes.push_back(PresenceFilter::Hash(e.element));
  }
  return hashes;
}

}  // namespace

absl::Status ReplicaImpl::TransferReceiver::ApplyChunk(
    std::string_view set, std::span<const ElementDots> chunk, Clock* tracker) {
  if (tracker == nullptr) return absl::InvalidArgumentError("tracker is null");
  Stripe& stripe = replica_->StripeFor(set);
  MutexLock lock(&stripe.mu);
  BIGSET_ASSIGN_OR_RETURN(SetState * state, replica_->OpenState(stripe, set));
  BIGSET_RETURN_IF_ERROR(CheckChunkDots(set, state->clock, chunk));
  // A chunk's keys are new here as a rule: their dots enter the clock, its
  // digest and the stored-clock changes in bulk (sorted, per actor, a window
  // at a time), not one btree update each.
  WriteBatch batch;
  StateChanges changes;
  BIGSET_RETURN_IF_ERROR(
      replica_->PrepareLiveness(stripe, set, state, &changes));
  const bool ascending = Ascending(chunk);
  // An ascending chunk whose span holds no element key here (a replica
  // receiving a set it lacks) holds no present element: one seek instead of
  // a filter probe (a cache miss per layer) or a seek per element.
  absl::StatusOr<bool> none_present = false;
  if (ascending && replica_->options_.keep_counts && !chunk.empty()) {
    none_present = SpanHasNoKeys(set, chunk.front().element,
                                 chunk.back().element, &changes);
  }
  if (!none_present.ok()) {
    stripe.cache->Erase(set);
    return none_present.status();
  }
  std::vector<Dot> fresh;
  std::vector<Dot> seen;
  SplitChunkDots(state->clock, chunk, &seen, &fresh);
  uint64_t dots_digest = 0;
  // Every key is the set's element-key prefix, then the element and dot:
  // the prefix is escaped once per chunk. Reused: one allocation per chunk.
  std::string key = ElementsRange(replica_->options_.keyspace, set).start;
  const size_t prefix_len = key.size();
  batch.Reserve(ChunkBatchBytes(chunk, prefix_len));
  std::vector<uint64_t> hashes;
  if (replica_->options_.keep_counts) hashes = ElementHashes(chunk);
  constexpr size_t kPrefetchAhead = 8;
  for (size_t i = 0; i < chunk.size(); ++i) {
    const ElementDots& e = chunk[i];
    if (changes.filter != nullptr && i + kPrefetchAhead < chunk.size()) {
      changes.filter->PrefetchAdd(hashes[i + kPrefetchAhead]);
    }
    bool first = true;
    for (Dot dot : e.dots) {
      // A seen dot is either stored already or removed here: never write
      // it (that would resurrect a removed element).
      if (!seen.empty() && std::binary_search(seen.begin(), seen.end(), dot)) {
        continue;
      }
      if (first && replica_->options_.keep_counts) {
        // The element gains a live key: present from now on; was it?
        first = false;
        bool was_present = false;
        const uint64_t hash = hashes[i];
        if (ascending) {
          if (!*none_present &&
              (changes.filter == nullptr || changes.filter->MayContain(hash))) {
            replica_->counters_.presence_seeks.fetch_add(
                1, std::memory_order_relaxed);
            ++state->presence_seeks;
            if (changes.elements_it == nullptr) {
              changes.elements_it = replica_->store_->NewIterator(
                  ReadOptions(),
                  ElementsRange(replica_->options_.keyspace, set));
            }
            absl::StatusOr<std::vector<Dot>> dots = replica_->CurrentDots(
                changes.elements_it.get(), set, e.element, state->tombstone);
            if (!dots.ok()) {
              stripe.cache->Erase(set);
              return dots.status();
            }
            was_present = !dots->empty();
          }
        } else {
          absl::StatusOr<std::vector<Dot>*> live =
              replica_->LiveDots(set, e.element, state, &changes);
          if (!live.ok()) {
            stripe.cache->Erase(set);
            return live.status();
          }
          was_present = !(*live)->empty();
          (*live)->push_back(dot);  // Present from now on.
        }
        replica_->NotePresent(stripe, set, hash, &changes);
        replica_->Recount(was_present, true, state);
      }
      key.resize(prefix_len);
      internal::AppendElementKeyAfterPrefix(&key, e.element, dot);
      batch.Put(key, "");
      if (replica_->options_.keep_digests) {
        state->keys_digest += digest::KeyDigest(e.element, dot);
        dots_digest =
            digest::AddClockDigests(dots_digest, digest::DotDigest(dot));
      }
      if (changes.track_keys) changes.put_keys.insert(key);
    }
  }
  if (std::adjacent_find(fresh.begin(), fresh.end()) != fresh.end()) {
    // The count and filter were changed for a write that is not made.
    stripe.cache->Erase(set);
    return absl::InvalidArgumentError(
        "a transfer chunk holds one dot under two elements");
  }
  state->clock.AddDots(fresh);
  if (replica_->options_.keep_digests) {
    state->clock_digest =
        digest::AddClockDigests(state->clock_digest, dots_digest);
  }
  changes.clock.TouchSorted(fresh);
  BIGSET_RETURN_IF_ERROR(replica_->Commit(stripe, set, state, &batch, changes));
  replica_->counters_.keys_written.fetch_add(batch.Count(),
                                             std::memory_order_relaxed);
  tracker->AddDots(fresh);
  tracker->AddDots(seen);
  return absl::OkStatus();
}

absl::Status ReplicaImpl::TransferReceiver::CheckChunkDots(
    std::string_view set, const Clock& clock,
    std::span<const ElementDots> chunk) const {
  for (const ElementDots& e : chunk) {
    BIGSET_RETURN_IF_ERROR(replica_->CheckOwnDots(set, clock, e.dots));
    for (Dot dot : e.dots) {
      if (!dot.valid()) {
        return absl::InvalidArgumentError("a transfer chunk holds dot 0");
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> ReplicaImpl::TransferReceiver::SpanHasNoKeys(
    std::string_view set, std::string_view first, std::string_view last,
    StateChanges* changes) {
  if (changes->elements_it == nullptr) {
    changes->elements_it = replica_->store_->NewIterator(
        ReadOptions(), ElementsRange(replica_->options_.keyspace, set));
  }
  Iterator* it = changes->elements_it.get();
  it->Seek(ElementSeekKey(replica_->options_.keyspace, set, first));
  BIGSET_RETURN_IF_ERROR(it->status());
  // Bigset keys compare bytewise.
  return !it->Valid() ||
         it->key() >=
             ElementRange(replica_->options_.keyspace, set, last).limit;
}

absl::Status ReplicaImpl::TransferReceiver::Finish(std::string_view set,
                                                   const Clock& sender_clock,
                                                   const Clock& tracker) {
  Stripe& stripe = replica_->StripeFor(set);
  MutexLock lock(&stripe.mu);
  BIGSET_ASSIGN_OR_RETURN(SetState * state, replica_->OpenState(stripe, set));
  if (sender_clock.MaxCounter(replica_->actor_) >
      state->clock.MaxCounter(replica_->actor_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "set \"", replica_internal::Printable(set),
        "\": the sender's set-clock claims events of this replica's actor "
        "that it never generated"));
  }
  // Removed at the sender: seen there, not sent. Only what this replica has
  // seen can have keys here to hide.
  const Clock removed = Clock::Complement(sender_clock, tracker);
  const Clock to_tombstone = Clock::Intersection(removed, state->clock);
  WriteBatch batch;
  StateChanges changes;
  if (!state->tombstone.Descends(to_tombstone)) {
    if (replica_->options_.keep_counts) {
      BIGSET_RETURN_IF_ERROR(
          replica_->PrepareLiveness(stripe, set, state, &changes));
      Clock covered = state->tombstone;
      covered.Merge(to_tombstone);
      replica_->TombstoneGrew(covered.Descends(state->clock), state, &changes);
    }
    state->tombstone.Merge(to_tombstone);
    changes.tombstone.TouchClock(to_tombstone);
    changes.tombstone_grew = true;
  }
  if (!state->clock.Descends(sender_clock)) {
    state->clock.Merge(sender_clock);
    if (replica_->options_.keep_digests) {
      state->clock_digest = digest::ClockDigest(state->clock);
    }
    changes.clock.TouchClock(sender_clock);
  }
  return replica_->Commit(stripe, set, state, &batch, changes);
}

}  // namespace bigset
