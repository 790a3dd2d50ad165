// Order-independent digests of a set's state, for anti-entropy
// (docs/ARCHITECTURE.md, "Anti-entropy"). Internal header.
//
// Every digest is a sum of per-item hashes, so it is updated by adding an
// item's hash when the item appears and subtracting it when it goes, in any
// order, and two replicas holding the same items have the same digest
// whatever their histories. Hashes are fixed functions of the bytes (no
// per-process seed): replicas on different machines must agree.
//
//   KeyDigest      one element key (element, dot); a set's *keys digest* is
//                  the sum over its element keys on disk (mod 2^64).
//   ClockDigest    a polynomial hash of a set of dots over the prime field
//                  2^61 - 1, summable over a run of counters in O(log)
//                  time, so a clock's digest costs O(runs), not O(dots).
//   SetDigest      mixes a set's name, keys digest, clock digest and whether
//                  its tombstone is empty into one value; a partition's
//                  bucket digests are sums of these.
//
// Thread-safety: stateless functions.

#ifndef BIGSET_LIB_CORE_DIGEST_H_
#define BIGSET_LIB_CORE_DIGEST_H_

#include <cstdint>
#include <string_view>

#include "bigset/core/clock.h"
#include "bigset/core/dot.h"

namespace bigset::digest {

// A 64-bit hash of `bytes` (stable across processes and machines).
uint64_t Hash64(std::string_view bytes, uint64_t seed = 0);

// The murmur3 finaliser: every bit of `x` affects every bit of the result.
inline uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

// The hash of the element key (element, dot).
uint64_t KeyDigest(std::string_view element, Dot dot);

// The digest of the dots (actor, lo..hi), lo <= hi, a value in [0, 2^61-1).
uint64_t RunDigest(ActorId actor, uint64_t lo, uint64_t hi);
// RunDigest(dot.actor, dot.counter, dot.counter), computed directly.
uint64_t DotDigest(Dot dot);
// Sum of RunDigest over the runs of `clock`, mod 2^61 - 1.
uint64_t ClockDigest(const Clock& clock);
// (a + b) mod 2^61 - 1, for a, b below it.
uint64_t AddClockDigests(uint64_t a, uint64_t b);

// One set's contribution to its partition's bucket digest.
uint64_t SetDigest(std::string_view set, uint64_t keys_digest,
                   uint64_t clock_digest, bool tombstone_empty);
// The same from SetNameHash(set), for a caller that keeps it (a write
// should not hash the set's name again).
uint64_t SetNameHash(std::string_view set);
uint64_t SetDigestOfHash(uint64_t name_hash, uint64_t keys_digest,
                         uint64_t clock_digest, bool tombstone_empty);

// The bucket of `set` among `buckets` buckets (REQUIRES: buckets >= 1).
inline uint32_t BucketOf(std::string_view set, uint32_t buckets) {
  return static_cast<uint32_t>(Hash64(set, 0x5e7b0c4e7ULL) % buckets);
}

}  // namespace bigset::digest

#endif  // BIGSET_LIB_CORE_DIGEST_H_
