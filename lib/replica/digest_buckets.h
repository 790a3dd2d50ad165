// DigestBuckets: a replica's anti-entropy digests, one per bucket of sets
// (Replica::BucketDigests, PartitionDigest; docs/DESIGN.md "Anti-entropy").
// Internal header.
//
// A set falls in bucket BucketOf(set) (a fixed hash of its name, the same
// on every replica); a bucket's digest is the sum (mod 2^64) of the set
// digests of its sets, so a set's change is accounted by adding the
// difference of its digest, in any order, and two replicas that hold the
// same sets have the same buckets. The partition digest folds the buckets
// in order into one value: equal partitions give equal values.
//
// Thread-safety: thread-safe. Each bucket is an atomic sum; a reader sees
// each bucket as of some moment, not all buckets as of one.

#ifndef BIGSET_LIB_REPLICA_DIGEST_BUCKETS_H_
#define BIGSET_LIB_REPLICA_DIGEST_BUCKETS_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "core/digest.h"

namespace bigset {

class DigestBuckets {
 public:
  // `buckets` buckets (at least one), each 0.
  explicit DigestBuckets(uint32_t buckets)
      : size_(std::max<uint32_t>(1, buckets)),
        sums_(std::make_unique<std::atomic<uint64_t>[]>(size_)) {}
  DigestBuckets(const DigestBuckets&) = delete;
  DigestBuckets& operator=(const DigestBuckets&) = delete;

  uint32_t size() const { return size_; }
  // The bucket of `set`.
  uint32_t BucketOf(std::string_view set) const {
    return digest::BucketOf(set, size_);
  }
  // Adds `delta` (mod 2^64) to bucket `bucket`. REQUIRES: bucket < size().
  void Add(uint32_t bucket, uint64_t delta) {
    sums_[bucket].fetch_add(delta, std::memory_order_relaxed);
  }
  // Every bucket's digest, in bucket order.
  std::vector<uint64_t> Values() const {
    std::vector<uint64_t> out(size_);
    for (uint32_t i = 0; i < size_; ++i) {
      out[i] = sums_[i].load(std::memory_order_relaxed);
    }
    return out;
  }
  // The buckets folded into one value (their number first).
  uint64_t PartitionDigest() const {
    uint64_t h = size_;
    for (uint32_t i = 0; i < size_; ++i) {
      h = digest::Hash64(
          std::string_view(reinterpret_cast<const char*>(&h), sizeof(h)),
          sums_[i].load(std::memory_order_relaxed));
    }
    return h;
  }

 private:
  const uint32_t size_;
  std::unique_ptr<std::atomic<uint64_t>[]> sums_;
};

}  // namespace bigset

#endif  // BIGSET_LIB_REPLICA_DIGEST_BUCKETS_H_
