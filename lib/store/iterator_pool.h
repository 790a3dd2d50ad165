// IteratorPool: LevelDB iterators of the latest state, kept between uses.
//
// Creating a LevelDB iterator and destroying it cost about as much as the
// seek a point lookup makes with it (a merging iterator over the memtables
// and every level, references taken and dropped under the database's mutex,
// a dozen allocations). A lookup that borrows one from here only seeks.
//
// An iterator sees the database as of its creation. The pool therefore
// counts the writes made through its store (WriteStarted before each,
// WriteDone after) and lends an iterator only if no write was counted since
// it was created and none is in progress. A thread that has seen a write in
// any way (its Write returned, or a Get or a new iterator showed it) and
// then borrows gets an iterator that shows it too, as a new one would; an
// iterator lent during a concurrent write may miss it, as a new one may.
//
// REQUIRES: every write to the keys that borrowed iterators read goes through
// the store that calls WriteStarted and WriteDone; stores whose database
// others write to (LevelDbStore::Adopt) keep no pool.
//
// A kept iterator pins the memtables and table files of its creation. A
// write drops every kept iterator (each is stale then); lookups take the
// slots in turn, and an iterator is lent at most max_uses times, so what
// compactions replace during a long run of reads is released too.
//
// Thread-safety: safe for concurrent use (lock-free). Ownership: pooled
// iterators are owned by the pool; destroy it before the database they read.

#ifndef BIGSET_STORE_ITERATOR_POOL_H_
#define BIGSET_STORE_ITERATOR_POOL_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

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
  // is OK and a slot is free; otherwise it is destroyed. `status_ok`: the
  // borrower read an OK status after the iterator's last move (LevelDB's
  // status() walks every level's iterator; it is not asked twice).
  void Return(std::unique_ptr<Entry> entry, bool status_ok = false);

  // Bracket every write: WriteStarted before it is applied, WriteDone after
  // (whether it succeeded or not: a failed write may be applied in part)
  // and before it is reported. Nothing is lent in between.
  void WriteStarted();
  void WriteDone();

  // Destroys the idle iterators. Call (between WriteStarted and WriteDone)
  // before a compaction, so that no kept iterator pins its inputs: LevelDB
  // deletes replaced files only after a compaction and only if no iterator
  // holds them, and never when it closes.
  void DropIdle();

  // Idle iterators now (for tests; a racing call may change it).
  size_t idle() const;

 private:
  const uint32_t max_uses_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint64_t> writing_{0};  // writes started and not done
  std::atomic<uint32_t> cursor_{0};   // where the next lookup starts
  // Lock-free: a lookup takes an entry and gives it back with one atomic
  // exchange each. An entry's generation is checked when it is taken, so
  // a stale one that a Return racing with a write left behind is dropped
  // then (or by the next write).
  std::array<std::atomic<Entry*>, kSlots> slots_{};
};

}  // namespace bigset

#endif  // BIGSET_STORE_ITERATOR_POOL_H_
