// IteratorPool: LevelDB iterators of the latest state, kept between uses.
//
// Creating a LevelDB iterator and destroying it cost about as much as the
// seek a point lookup makes with it (a merging iterator over the memtables
// and every level, references taken and dropped under the database's mutex,
// a dozen allocations). A lookup that borrows one from here only seeks.
//
// An iterator sees the database as of its creation. The pool therefore
// counts the writes made through its store (WriteDone) and hands out an
// iterator only if no write was counted since it was created, so a borrowed
// iterator sees every write whose Store::Write has returned: the same as a
// new one. A write that has not returned yet may be missing from it, which
// is allowed (no caller can have been told that it happened).
//
// REQUIRES: every write to the keys that borrowed iterators read goes through
// the store that calls WriteDone; stores whose database others write to
// (LevelDbStore::Adopt) keep no pool.
//
// A pooled iterator pins the memtables and table files of its creation:
// WriteDone drops every pooled iterator (each is stale then), and an
// iterator goes back to the pool only a bounded number of times, so files
// replaced by compactions during a long run of reads are released too.
//
// Thread-safety: safe for concurrent use (lock-free). Ownership: pooled
// iterators are owned by the pool; destroy it before the database they read.

#ifndef BIGSET_STORE_ITERATOR_POOL_H_
#define BIGSET_STORE_ITERATOR_POOL_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "leveldb/iterator.h"

namespace bigset {

class IteratorPool {
 public:
  // An iterator lent by the pool, or made by the borrower, with what the
  // pool needs to take it back. Movable; owns its iterator.
  struct Entry {
    std::unique_ptr<leveldb::Iterator> it;
    uint64_t generation = 0;  // writes counted before it was created
    uint32_t uses = 0;        // times it was lent before
  };

  // Keeps at most kSlots idle iterators; each is lent at most `max_uses`
  // times.
  static constexpr size_t kSlots = 4;
  explicit IteratorPool(uint32_t max_uses);
  ~IteratorPool();

  IteratorPool(const IteratorPool&) = delete;
  IteratorPool& operator=(const IteratorPool&) = delete;

  // An idle iterator that sees every counted write; or, if there is none,
  // an entry with a null `it` and the generation to create one for: the
  // caller then creates the iterator itself, after this call.
  std::unique_ptr<Entry> Borrow();

  // Takes an entry back. Its iterator is kept if no write was counted
  // since its creation, it was lent fewer than max_uses times, its status
  // is OK and a slot is free; otherwise it is destroyed.
  void Return(std::unique_ptr<Entry> entry);

  // Counts a write. Call after the write, whether it succeeded or not (a
  // failed write may be applied in part), and before reporting it.
  void WriteDone();

  // Idle iterators now (for tests; a racing call may change it).
  size_t idle() const;

 private:
  const uint32_t max_uses_;
  std::atomic<uint64_t> generation_{0};
  // Lock-free: a lookup takes an entry and gives it back with one atomic
  // exchange each. An entry's generation is checked when it is taken, so
  // a stale one that a Return racing with a write left behind is dropped
  // then (or by the next write).
  std::array<std::atomic<Entry*>, kSlots> slots_{};
};

}  // namespace bigset

#endif  // BIGSET_STORE_ITERATOR_POOL_H_
