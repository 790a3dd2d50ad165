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
  // A write in progress may already show to other reads: lend nothing.
  if (writing_.load(std::memory_order_seq_cst) != 0) {
    auto fresh = std::make_unique<Entry>();
    fresh->generation = generation_.load(std::memory_order_seq_cst);
    return fresh;
  }
  // Read before the slots: an entry of this generation (or a later one)
  // was created after every write counted so far.
  const uint64_t now = generation_.load(std::memory_order_seq_cst);
  // Start at a slot after the last lookup's, so that every kept iterator
  // is lent in turn (and retires after max_uses), not only the first.
  const uint32_t start = cursor_.fetch_add(1, std::memory_order_relaxed);
  for (size_t i = 0; i < kSlots; ++i) {
    std::atomic<Entry*>& slot = slots_[(start + i) % kSlots];
    if (slot.load(std::memory_order_relaxed) == nullptr) continue;
    std::unique_ptr<Entry> entry(
        slot.exchange(nullptr, std::memory_order_acquire));
    if (entry != nullptr && entry->generation >= now) return entry;
    // Stale (or taken by another borrower): destroyed here.
  }
  auto fresh = std::make_unique<Entry>();
  fresh->generation = now;
  return fresh;
}

void IteratorPool::Return(std::unique_ptr<Entry> entry, bool status_ok) {
  if (entry == nullptr || entry->it == nullptr) return;
  if (++entry->uses >= max_uses_) return;
  if (!status_ok && !entry->it->status().ok()) return;
  if (entry->generation != generation_.load(std::memory_order_seq_cst)) {
    return;
  }
  const uint32_t start = cursor_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < kSlots; ++i) {
    std::atomic<Entry*>& slot = slots_[(start + i) % kSlots];
    Entry* expected = nullptr;
    if (slot.compare_exchange_strong(expected, entry.get(),
                                     std::memory_order_release,
                                     std::memory_order_relaxed)) {
      entry.release();
      return;
    }
  }
}

void IteratorPool::WriteStarted() {
  writing_.fetch_add(1, std::memory_order_seq_cst);
}

void IteratorPool::WriteDone() {
  // The generation moves before the write stops counting as in progress:
  // a Borrow that sees no write in progress sees the new generation.
  generation_.fetch_add(1, std::memory_order_seq_cst);
  writing_.fetch_sub(1, std::memory_order_seq_cst);
  // Stale now: release what they pin. Correctness does not depend on this
  // (Borrow checks the generation).
  DropIdle();
}

void IteratorPool::DropIdle() {
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
