// PresenceFilter: an in-memory Bloom filter of the elements of one set that
// may have live keys, so that an add of an element the filter has never
// seen knows without a read that the element was absent, and the set's
// count (docs/DESIGN.md, "Counts") stays exact at no read per insert.
//
// The contract the replica keeps: every element that has a live key (one
// its tombstone does not cover) was added, so MayContain(e) == false means
// "e has no live key". Elements are never removed; a removed element only
// costs a false positive (one seek) when it is added again. The filter
// grows by layers, each larger than the previous one, so that it
// never needs the set's keys again: 20 bits per element of capacity, each
// layer four times the previous one, and a false-positive rate near 0.05%
// per full layer.
//
// Thread-safety: not thread-safe; a filter belongs to one set and is used
// under the set's stripe lock.

#ifndef BIGSET_LIB_REPLICA_PRESENCE_FILTER_H_
#define BIGSET_LIB_REPLICA_PRESENCE_FILTER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace bigset {

class PresenceFilter {
 public:
  // `expected`: elements the first layer holds (at least a small minimum).
  explicit PresenceFilter(uint64_t expected = 0);

  // The hash every other member takes (computed once per element).
  static uint64_t Hash(std::string_view element);

  bool MayContain(uint64_t hash) const;
  // Starts loading the blocks MayContain(hash) reads, so that their cache
  // misses overlap the caller's work until then. Changes nothing.
  void Prefetch(uint64_t hash) const;
  void Add(uint64_t hash);
  // Starts loading the cache line Add(hash) will set, so that a caller
  // adding many elements overlaps their cache misses. Changes nothing.
  void PrefetchAdd(uint64_t hash) const;
  // Forgets every element (after a clear that removed all of them).
  void Reset();

  // Heap bytes of the bit arrays.
  size_t MemoryBytes() const { return bytes_; }
  // The bytes of a filter made for `expected` elements, once it holds them.
  static size_t BytesFor(uint64_t expected) {
    return LayerBytes(expected < kMinCapacity ? kMinCapacity : expected);
  }
  // Bytes the next Add may allocate (0 unless the last layer is full).
  size_t GrowthBytes() const;

 private:
  struct FreeWords {
    void operator()(uint64_t* words) const;
  };
  struct Layer {
    // Blocks of kBlockWords words, zeroed (AllocateWords).
    std::unique_ptr<uint64_t[], FreeWords> words;
    uint64_t blocks = 0;
    uint64_t capacity = 0;
    uint64_t added = 0;
  };
  static constexpr uint64_t kBlockWords = 8;  // One 64-byte cache line.
  static constexpr uint64_t kMinCapacity = 1024;
  static size_t LayerBytes(uint64_t capacity);
  static uint64_t* AllocateWords(size_t bytes);
  void AddLayer(uint64_t capacity);

  uint64_t first_capacity_;
  std::vector<Layer> layers_;
  size_t bytes_ = 0;
};

}  // namespace bigset

#endif  // BIGSET_LIB_REPLICA_PRESENCE_FILTER_H_
