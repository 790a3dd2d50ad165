#include "store/iterator_pool.h"

#include <utility>

namespace bigset {

IteratorPool::IteratorPool(uint32_t max_uses) : max_uses_(max_uses) {}

IteratorPool::~IteratorPool() {
  for (std::atomic<Entry*>& slot : slots_) {
    delete slot.exchange(nullptr, std::memory_order_acquire);
  }
}

std::unique_ptr<IteratorPool::Entry> IteratorPool::Borrow() {
  // Read before the slots: an entry of this generation was created after
  // every write counted so far.
  const uint64_t now = generation_.load(std::memory_order_acquire);
  for (std::atomic<Entry*>& slot : slots_) {
    if (slot.load(std::memory_order_relaxed) == nullptr) continue;
    std::unique_ptr<Entry> entry(
        slot.exchange(nullptr, std::memory_order_acquire));
    if (entry != nullptr && entry->generation == now) return entry;
    // Stale (or taken by another borrower): destroyed here.
  }
  auto fresh = std::make_unique<Entry>();
  fresh->generation = now;
  return fresh;
}

void IteratorPool::Return(std::unique_ptr<Entry> entry) {
  if (entry == nullptr || entry->it == nullptr) return;
  if (++entry->uses >= max_uses_ || !entry->it->status().ok()) return;
  if (entry->generation != generation_.load(std::memory_order_acquire)) {
    return;
  }
  for (std::atomic<Entry*>& slot : slots_) {
    Entry* expected = nullptr;
    if (slot.compare_exchange_strong(expected, entry.get(),
                                     std::memory_order_release,
                                     std::memory_order_relaxed)) {
      entry.release();
      return;
    }
  }
}

void IteratorPool::WriteDone() {
  generation_.fetch_add(1, std::memory_order_acq_rel);
  // Stale now: release what they pin. Correctness does not depend on this
  // (Borrow checks the generation).
  for (std::atomic<Entry*>& slot : slots_) {
    if (slot.load(std::memory_order_relaxed) == nullptr) continue;
    delete slot.exchange(nullptr, std::memory_order_acquire);
  }
}

size_t IteratorPool::idle() const {
  size_t n = 0;
  for (const std::atomic<Entry*>& slot : slots_) {
    if (slot.load(std::memory_order_acquire) != nullptr) ++n;
  }
  return n;
}

}  // namespace bigset
