// MemoryBudget: a bound on the bytes several owners hold together (a
// node's replicas' presence filters), so that their total stays within one
// limit however it is spread among them.
//
// Owners reserve before they allocate and release what they free; a
// reservation that would pass the limit fails, and the owner does without
// (or frees something of its own first).
//
// Thread-safety: thread-safe (lock-free).

#ifndef BIGSET_CORE_MEMORY_BUDGET_H_
#define BIGSET_CORE_MEMORY_BUDGET_H_

#include <atomic>
#include <cstddef>

namespace bigset {

class MemoryBudget {
 public:
  explicit MemoryBudget(size_t limit) : limit_(limit) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // Takes `bytes` if the total stays within the limit.
  bool TryReserve(size_t bytes) {
    size_t used = used_.load(std::memory_order_relaxed);
    do {
      if (bytes > limit_ || used > limit_ - bytes) return false;
    } while (!used_.compare_exchange_weak(used, used + bytes,
                                          std::memory_order_relaxed));
    return true;
  }
  // Gives back `bytes` of what was reserved. REQUIRES: they were.
  void Release(size_t bytes) {
    used_.fetch_sub(bytes, std::memory_order_relaxed);
  }

  size_t limit() const { return limit_; }
  size_t used() const { return used_.load(std::memory_order_relaxed); }
  // What a reservation could take now.
  size_t available() const {
    const size_t u = used();
    return u >= limit_ ? 0 : limit_ - u;
  }

 private:
  const size_t limit_;
  std::atomic<size_t> used_{0};
};

}  // namespace bigset

#endif  // BIGSET_CORE_MEMORY_BUDGET_H_
