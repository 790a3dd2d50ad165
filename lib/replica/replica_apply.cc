// Replica::Apply and its group-commit form: a delta from another replica
// applied in one atomic batch (see replica.h).

#include "absl/strings/str_cat.h"
#include "bigset/replica/replica.h"
#include "core/status_macros.h"
#include "replica/clock_cache.h"
#include "replica/presence_filter.h"
#include "replica/replica_impl.h"
#include "replica/replica_internal.h"
#include "replica/set_state.h"
#include "replica/stripe_batch.h"

namespace bigset {

using replica_internal::Printable;

absl::Status ReplicaImpl::Apply(const Delta& delta) {
  return ApplyImpl(delta, /*defer_sync=*/false);
}

absl::Status ReplicaImpl::ApplyUnsynced(const Delta& delta) {
  return ApplyImpl(delta, /*defer_sync=*/true);
}

absl::Status ReplicaImpl::Sync() {
  BIGSET_RETURN_IF_ERROR(CheckOpen());
  if (!options_.sync_writes) return absl::OkStatus();
  WriteOptions sync;
  sync.sync = true;
  return store_->Write(sync, WriteBatch());
}

absl::Status ReplicaImpl::ApplyImpl(const Delta& delta, bool defer_sync) {
  const std::string_view set = delta.set;
  Stripe& stripe = StripeFor(set);
  MutexLock lock(&stripe.mu);
  BIGSET_ASSIGN_OR_RETURN(SetState * state, OpenState(stripe, set));
  // A delta claiming events of this replica's actor that it never generated
  // is refused whole (applying it would block every later add).
  if (delta.clear.has_value() &&
      delta.clear->MaxCounter(actor_) > state->clock.MaxCounter(actor_)) {
    counters_.deltas_rejected.fetch_add(1, std::memory_order_relaxed);
    return absl::InvalidArgumentError(absl::StrCat(
        "set \"", Printable(set),
        "\": clear clock claims events of this replica's actor that it never "
        "generated"));
  }
  for (const DeltaOp& op : delta.ops) {
    absl::Status s = CheckOwnDots(set, state->clock, op.context);
    if (s.ok() && op.add.has_value()) {
      s = CheckOwnDots(set, state->clock, std::span(&*op.add, 1));
    }
    if (!s.ok()) {
      counters_.deltas_rejected.fetch_add(1, std::memory_order_relaxed);
      return s;
    }
  }

  StripeBatch lent(&stripe.batch_scratch);
  WriteBatch& batch = lent.get();
  StateChanges changes;
  changes.defer_sync = defer_sync;
  changes.track_keys = delta.ops.size() > 1 && !options_.keep_counts;
  changes.one_element = delta.ops.size() == 1;
  if (absl::Status s = PrepareLiveness(stripe, set, state, &changes); !s.ok()) {
    stripe.cache->Erase(set);
    return s;
  }
  if (options_.keep_counts && changes.one_element) {
    StartPresenceProbe(delta.ops.front().element, &changes);
  }
  uint64_t puts = 0;
  if (delta.clear.has_value() && !delta.clear->empty())
    ApplyClear(*delta.clear, state, &changes);
  if (options_.keep_counts && !changes.one_element &&
      changes.filter != nullptr) {
    std::vector<std::string_view> elements;
    elements.reserve(delta.ops.size());
    for (const DeltaOp& op : delta.ops) elements.push_back(op.element);
    HashForPresence(elements, &changes);
  }
  for (size_t i = 0; i < delta.ops.size(); ++i) {
    const DeltaOp& op = delta.ops[i];
    std::vector<Dot>* live = nullptr;
    if (options_.keep_counts) {
      BIGSET_ASSIGN_OR_RETURN(
          live, LiveDotsOfOp(stripe, set, i, op.element, state, &changes));
    }
    const bool was_present = live != nullptr && !live->empty();
    // The context part first, always, even if the add's dot was seen.
    if (absl::Status s = ApplyContext(set, op.element, op.context, state,
                                      &batch, &changes, live);
        !s.ok()) {
      stripe.cache->Erase(set);
      return s;
    }
    // Never rewrite a seen dot: its key may have been removed.
    if (op.add.has_value() && op.add->valid() && !state->clock.Seen(*op.add)) {
      PutNewKey(stripe, set, op.element, *op.add, state, &batch, &changes);
      if (live != nullptr) live->push_back(*op.add);
      NotePresent(stripe, set, changes.element_hash, &changes);
      ++puts;
    }
    if (live != nullptr) Recount(was_present, !live->empty(), state);
  }
  const uint64_t deletes = batch.Count() - puts;
  if (!changes.clock.empty() || !changes.tombstone.empty() ||
      batch.Count() > 0) {
    BIGSET_RETURN_IF_ERROR(Commit(stripe, set, state, &batch, changes));
    counters_.keys_written.fetch_add(puts, std::memory_order_relaxed);
    counters_.keys_deleted.fetch_add(deletes, std::memory_order_relaxed);
  }
  counters_.deltas_applied.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace bigset
