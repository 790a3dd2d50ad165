// Replica: the anti-entropy digests (replica.h, "Digests for
// anti-entropy").

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "bigset/replica/replica.h"
#include "core/digest.h"
#include "core/status_macros.h"
#include "keys/keys_internal.h"
#include "replica/clock_cache.h"
#include "replica/replica_impl.h"
#include "replica/replica_internal.h"
#include "replica/set_state.h"

namespace bigset {

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
      buckets_[digest::BucketOf(set, digest_buckets_)].fetch_add(
          state->set_digest, std::memory_order_relaxed);
    }
    if (sets->size() < 1000) return absl::OkStatus();
    after = sets->back();
  }
}

std::vector<uint64_t> ReplicaImpl::BucketDigests() const {
  std::vector<uint64_t> out(digest_buckets_);
  for (uint32_t i = 0; i < digest_buckets_; ++i) {
    out[i] = buckets_[i].load(std::memory_order_relaxed);
  }
  return out;
}

uint64_t ReplicaImpl::PartitionDigest() const {
  uint64_t h = digest_buckets_;
  for (uint32_t i = 0; i < digest_buckets_; ++i) {
    h = digest::Hash64(
        std::string_view(reinterpret_cast<const char*>(&h), sizeof(h)),
        buckets_[i].load(std::memory_order_relaxed));
  }
  return h;
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
                              digest::BucketOf(set, digest_buckets_))) {
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
