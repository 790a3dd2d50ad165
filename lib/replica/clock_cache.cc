#include "replica/clock_cache.h"

#include <utility>

#include "core/string_view_compat.h"

namespace bigset {

size_t ApproximateMemory(const Clock& clock) {
  // Flat vector entries, plus per cloud actor its vector entry and per
  // interval a btree slot (two uint64) with node overhead.
  size_t bytes = sizeof(Clock) + clock.vv().size() * 16;
  for (const auto& entry : clock.cloud()) {
    bytes += 64 + entry.counters.MemoryBytes();
  }
  return bytes;
}

namespace {
size_t Charge(const std::string& set, const SetState& s) {
  return 64 + set.size() + ApproximateMemory(s.clock) +
         ApproximateMemory(s.tombstone) + s.stored_clock.MemoryBytes() +
         s.stored_tombstone.MemoryBytes();
}
}  // namespace

SetState* ClockCache::Lookup(std::string_view set) {
  // The most recently used set again (a run of writes to one set): found
  // without hashing its name, and already in place.
  if (!lru_.empty() && lru_.front().set == set) return &lru_.front().state;
  auto it = map_.find(ToAbsl(set));
  if (it == map_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return &it->second->state;
}

SetState* ClockCache::Insert(std::string_view set, SetState state) {
  Erase(set);
  lru_.push_front(Entry{std::string(set), std::move(state)});
  Entry& e = lru_.front();
  e.state.charge = Charge(e.set, e.state);
  usage_ += e.state.charge;
  map_.emplace(e.set, lru_.begin());
  EvictOverCapacity();
  return &e.state;
}

void ClockCache::Erase(std::string_view set) {
  auto it = map_.find(ToAbsl(set));
  if (it == map_.end()) return;
  usage_ -= it->second->state.charge;
  lru_.erase(it->second);
  map_.erase(it);
}

void ClockCache::RechargeByName(std::string_view set) {
  auto it = map_.find(ToAbsl(set));
  if (it == map_.end()) return;
  Entry& e = *it->second;
  usage_ -= e.state.charge;
  e.state.charge = Charge(e.set, e.state);
  usage_ += e.state.charge;
  lru_.splice(lru_.begin(), lru_, it->second);
  EvictOverCapacity();
}

void ClockCache::Recharge(std::string_view set, SetState* state) {
  if (lru_.empty() || &lru_.front().state != state) {
    RechargeByName(set);
    return;
  }
  usage_ -= state->charge;
  state->charge = Charge(lru_.front().set, *state);
  usage_ += state->charge;
  EvictOverCapacity();
}

void ClockCache::EvictOverCapacity() {
  while (usage_ > capacity_ && lru_.size() > 1) {
    Entry& victim = lru_.back();
    usage_ -= victim.state.charge;
    map_.erase(victim.set);
    lru_.pop_back();
  }
}

}  // namespace bigset
