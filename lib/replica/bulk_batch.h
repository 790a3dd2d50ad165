// BulkBatch: lends the one WriteBatch a replica keeps for its bulk writes
// (transfer chunks, a megabyte or so each) to one write, so that a chunk
// fills a buffer that has its capacity already instead of reserving a new
// one per chunk. A write that finds the kept batch lent (another set's
// chunk, under another stripe's lock) gets a new batch. When the BulkBatch
// goes, its batch is emptied and kept, unless its buffer may hold more than
// kMaxKeptBytes or a batch as large is kept already.
//
// Thread-safety: `mu` guards `*kept` and is held only inside the
// constructor and destructor (take it after any stripe lock). A BulkBatch
// belongs to one thread.

#ifndef BIGSET_LIB_REPLICA_BULK_BATCH_H_
#define BIGSET_LIB_REPLICA_BULK_BATCH_H_

#include <cstddef>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "bigset/core/mutex.h"
#include "bigset/store/store.h"

namespace bigset {

class BulkBatch {
 public:
  static constexpr size_t kMaxKeptBytes = 8 << 20;

  // REQUIRES: `mu` and `kept` outlive this object.
  BulkBatch(Mutex* mu, WriteBatch* kept) : mu_(mu), kept_(kept) {
    MutexLock lock(mu_);
    batch_ = std::move(*kept_);
  }
  ~BulkBatch() {
    if (batch_.ReservedBytes() > kMaxKeptBytes) return;
    batch_.Clear();
    MutexLock lock(mu_);
    if (kept_->ReservedBytes() < batch_.ReservedBytes()) {
      *kept_ = std::move(batch_);
    }
  }
  BulkBatch(const BulkBatch&) = delete;
  BulkBatch& operator=(const BulkBatch&) = delete;

  // Empty when lent.
  WriteBatch& get() { return batch_; }

 private:
  Mutex* const mu_;
  WriteBatch* const kept_ ABSL_PT_GUARDED_BY(mu_);
  WriteBatch batch_;
};

}  // namespace bigset

#endif  // BIGSET_LIB_REPLICA_BULK_BATCH_H_
