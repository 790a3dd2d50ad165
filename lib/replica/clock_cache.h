// ClockCache: a bounded LRU cache of SetStates keyed by set name, so that an
// insert does not read and decode its set-clock from the store every time.
//
// The cache is never stale because every change of a set's clock goes
// through the replica while it holds the set's stripe lock, and the replica
// updates (or erases) the cached entry before releasing it. Internal header.
//
// Thread-safety: not thread-safe; each replica stripe owns one cache and
// guards it with the stripe's mutex.

#ifndef BIGSET_LIB_REPLICA_CLOCK_CACHE_H_
#define BIGSET_LIB_REPLICA_CLOCK_CACHE_H_

#include <cstddef>
#include <list>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "replica/set_state.h"

namespace bigset {

class ClockCache {
 public:
  explicit ClockCache(size_t capacity_bytes) : capacity_(capacity_bytes) {}
  ClockCache(const ClockCache&) = delete;
  ClockCache& operator=(const ClockCache&) = delete;

  // The cached state of `set`, made most recently used; nullptr on a miss.
  // The pointer stays valid until the entry is erased or evicted, which
  // happens only in Insert, Erase and Recharge.
  SetState* Lookup(std::string_view set);

  // Caches `state` for `set` (replacing any entry) as most recently used.
  SetState* Insert(std::string_view set, SetState state);

  void Erase(std::string_view set);

  // Recomputes the charge of `state`, the entry of `set` that Lookup or
  // Insert returned, after it changed (a write recharges the state it just
  // changed), makes it most recently used, and evicts least recently used
  // entries while over capacity. Never evicts the most recently used entry.
  // Without a lookup when `state` is still the most recently used entry.
  void Recharge(std::string_view set, SetState* state);

  size_t size() const { return map_.size(); }
  size_t usage() const { return usage_; }

 private:
  struct Entry {
    std::string set;
    SetState state;
  };
  using List = std::list<Entry>;

  // Recharge by name: a lookup of the entry first.
  void RechargeByName(std::string_view set);
  void EvictOverCapacity();

  const size_t capacity_;
  size_t usage_ = 0;
  List lru_;  // Most recently used first.
  absl::flat_hash_map<std::string, List::iterator> map_;
};

}  // namespace bigset

#endif  // BIGSET_LIB_REPLICA_CLOCK_CACHE_H_
