// Mutex and MutexLock: the lock of bigset's per-operation paths (a replica's
// stripes, the store's batch pool), a std::mutex that Clang's thread-safety
// analysis understands (ABSL_GUARDED_BY, ABSL_EXCLUSIVE_LOCKS_REQUIRED).
//
// Why not absl::Mutex: an Abseil built without NDEBUG (Debian's is) runs
// deadlock detection in every absl::Mutex::Lock, a lookup in one global
// graph of every mutex: about 50 ns per uncontended lock and unlock against
// 7 ns for std::mutex on the machines of docs/BENCHMARKS.md, and an insert
// takes three locks. Paths that wait on a condition keep absl::Mutex (its
// Await); none of them runs per operation.
//
// Thread-safety: the point of the class. Not recursive; Unlock by the thread
// that locked.
#ifndef BIGSET_CORE_MUTEX_H_
#define BIGSET_CORE_MUTEX_H_

#include <mutex>

#include "absl/base/thread_annotations.h"

namespace bigset {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

// Holds `mu` for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }

 private:
  Mutex* const mu_;
};

}  // namespace bigset

#endif  // BIGSET_CORE_MUTEX_H_
