// StripeBatch: lends a replica stripe's reused WriteBatch to one write, so
// that a write allocates no batch; bounds what the stripe keeps.
//
// The batch is empty when lent and emptied when given back (when the
// StripeBatch goes), whether the write succeeded, failed or returned
// early. A batch whose buffer grew or was reserved past kMaxKeptBytes is
// replaced by an empty one then, so that a stripe keeps only an insert's
// worth of buffer after a bulk write.
//
// Thread-safety: the caller holds the lock that guards the batch for the
// StripeBatch's whole life (declare it after the lock). Not reentrant: one
// StripeBatch per batch at a time.

#ifndef BIGSET_LIB_REPLICA_STRIPE_BATCH_H_
#define BIGSET_LIB_REPLICA_STRIPE_BATCH_H_

#include <cstddef>
#include <utility>

#include "bigset/store/store.h"

namespace bigset {

class StripeBatch {
 public:
  static constexpr size_t kMaxKeptBytes = 16 << 10;

  // REQUIRES: `batch` outlives this object.
  explicit StripeBatch(WriteBatch* batch) : batch_(batch) { batch_->Clear(); }
  ~StripeBatch() {
    if (batch_->ReservedBytes() > kMaxKeptBytes) {
      // Moved out, so its buffer goes with `dropped`.
      WriteBatch dropped(std::move(*batch_));
    }
    batch_->Clear();
  }
  StripeBatch(const StripeBatch&) = delete;
  StripeBatch& operator=(const StripeBatch&) = delete;

  WriteBatch& get() { return *batch_; }

 private:
  WriteBatch* const batch_;
};

}  // namespace bigset

#endif  // BIGSET_LIB_REPLICA_STRIPE_BATCH_H_
