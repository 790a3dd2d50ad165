#include "store/iterator_pool.h"

#include <utility>

namespace bigset {

IteratorPool::IteratorPool(size_t capacity, uint32_t max_uses)
    : capacity_(capacity), max_uses_(max_uses) {
  idle_.reserve(capacity);
}

IteratorPool::~IteratorPool() = default;

IteratorPool::Lease IteratorPool::Borrow() {
  Lease lease;
  std::vector<Idle> stale;  // destroyed outside the lock
  {
    MutexLock lock(&mu_);
    // Read under the lock, after any WriteDone that Return saw: an iterator
    // pooled with this generation was created after every counted write.
    const uint64_t now = generation_.load(std::memory_order_acquire);
    while (!idle_.empty()) {
      Idle idle = std::move(idle_.back());
      idle_.pop_back();
      if (idle.generation == now) {
        lease.it = std::move(idle.it);
        lease.generation = idle.generation;
        lease.uses = idle.uses;
        break;
      }
      stale.push_back(std::move(idle));
    }
    idle_count_.store(idle_.size(), std::memory_order_relaxed);
    if (lease.it == nullptr) lease.generation = now;
  }
  return lease;
}

void IteratorPool::Return(Lease lease) {
  if (lease.it == nullptr) return;
  const uint32_t uses = lease.uses + 1;
  if (uses >= max_uses_ || !lease.it->status().ok()) return;
  MutexLock lock(&mu_);
  if (idle_.size() >= capacity_ ||
      lease.generation != generation_.load(std::memory_order_acquire)) {
    return;  // `lease` is destroyed after the lock is released
  }
  idle_.push_back(Idle{std::move(lease.it), lease.generation, uses});
  idle_count_.store(idle_.size(), std::memory_order_relaxed);
}

void IteratorPool::WriteDone() {
  generation_.fetch_add(1, std::memory_order_acq_rel);
  // Stale now: release what they pin. Correctness does not depend on this
  // (Borrow checks the generation); a Return racing with it may leave one
  // stale iterator idle until the next Borrow or write.
  if (idle_count_.load(std::memory_order_relaxed) == 0) return;
  std::vector<Idle> stale;
  {
    MutexLock lock(&mu_);
    stale.swap(idle_);
    idle_count_.store(0, std::memory_order_relaxed);
  }
}

size_t IteratorPool::idle() const {
  MutexLock lock(&mu_);
  return idle_.size();
}

}  // namespace bigset
