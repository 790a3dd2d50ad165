// WriteBatch's representation: a LevelDB batch, built by WriteBatch's Put
// and Delete and handed to LevelDB by LevelDbStore::Write as it is, so that
// a write copies nothing. Internal to the store layer.

#ifndef BIGSET_LIB_STORE_WRITE_BATCH_REP_H_
#define BIGSET_LIB_STORE_WRITE_BATCH_REP_H_

#include "bigset/store/store.h"
#include "leveldb/write_batch.h"

namespace bigset {

struct WriteBatch::Rep {
  // Mutable: LevelDB's DB::Write stamps its sequence number into the batch
  // (its header, not its operations).
  mutable leveldb::WriteBatch native;
};

struct WriteBatchAccess {
  // The LevelDB batch of `batch`, or nullptr for a batch that never held an
  // operation (an empty one). Valid until `batch` is moved from or
  // destroyed.
  static leveldb::WriteBatch* Native(const WriteBatch& batch) {
    return batch.rep_ == nullptr ? nullptr : &batch.rep_->native;
  }
};

}  // namespace bigset

#endif  // BIGSET_LIB_STORE_WRITE_BATCH_REP_H_
