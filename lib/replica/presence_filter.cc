#include "replica/presence_filter.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/digest.h"

namespace bigset {

namespace {

// 20 bits per element and 12 probes in one 512-bit block: a false positive
// costs a seek (tens of microseconds on a large store), so the rate is kept
// near 0.05% per full layer (tests/unit/replica/presence_filter_test.cc).
constexpr uint64_t kBitsPerElement = 20;
constexpr int kProbes = 12;
// Each layer is this many times larger than the previous one: few layers
// to probe (a negative answer probes every layer).
constexpr uint64_t kGrowth = 4;

using digest::Mix;

// A block from the high 32 bits (a layer has fewer than 2^32 blocks); the
// probes come from another mix of the hash.
uint64_t BlockOf(uint64_t h, uint64_t blocks) {
  return ((h >> 32) * blocks) >> 32;
}

// The bit positions within a block, the same in every layer (the layers
// differ by the block): independent 9-bit pieces of two mixes of the hash.
struct Probes {
  explicit Probes(uint64_t h) {
    uint64_t bits = Mix(h ^ 0x5bd1e9955bd1e995ULL);
    for (int p = 0; p < kProbes; ++p) {
      if (p == 7) bits = Mix(h ^ 0x2545f4914f6cdd1dULL);
      bit[p] = static_cast<uint16_t>(bits & 511);
      bits >>= 9;
    }
  }
  uint16_t bit[kProbes];
};

// Layers of at least this size are aligned to it and asked for
// transparent huge pages: an insert probes a random block of every layer,
// and with 4 KiB pages the probe of a multi-megabyte layer also misses the
// TLB (a page walk, costlier still in a virtual machine).
constexpr size_t kHugePage = size_t{2} << 20;

// The block of `hash` in layer `layer` of `blocks` blocks.
uint64_t BlockIn(uint64_t hash, size_t layer, uint64_t blocks) {
  return BlockOf(Mix(hash + (layer + 1) * 0x9e3779b97f4a7c15ULL), blocks);
}

}  // namespace

PresenceFilter::PresenceFilter(uint64_t expected)
    : first_capacity_(std::max(kMinCapacity, expected)) {}

uint64_t PresenceFilter::Hash(std::string_view element) {
  return digest::Hash64(element, 0x9e3779b97f4a7c15ULL);
}

size_t PresenceFilter::LayerBytes(uint64_t capacity) {
  const uint64_t blocks =
      std::max<uint64_t>(1, (capacity * kBitsPerElement + 511) / 512);
  return blocks * kBlockWords * sizeof(uint64_t);
}

void PresenceFilter::FreeWords::operator()(uint64_t* words) const {
  std::free(words);
}

uint64_t* PresenceFilter::AllocateWords(size_t bytes) {
  void* p = nullptr;
  const size_t align = bytes >= kHugePage ? kHugePage : 64;
  if (posix_memalign(&p, align, bytes) != 0) throw std::bad_alloc();
  if (align == kHugePage) {
    // Advice only: without huge pages the layer works the same.
    (void)madvise(p, bytes, MADV_HUGEPAGE);
  }
  std::memset(p, 0, bytes);
  return static_cast<uint64_t*>(p);
}

void PresenceFilter::AddLayer(uint64_t capacity) {
  Layer& layer = layers_.emplace_back();
  layer.capacity = capacity;
  const size_t bytes = LayerBytes(capacity);
  layer.blocks = bytes / (kBlockWords * sizeof(uint64_t));
  layer.words.reset(AllocateWords(bytes));
  bytes_ += bytes;
}

size_t PresenceFilter::GrowthBytes() const {
  if (layers_.empty()) return LayerBytes(first_capacity_);
  const Layer& last = layers_.back();
  return last.added < last.capacity ? 0 : LayerBytes(last.capacity * kGrowth);
}

bool PresenceFilter::MayContain(uint64_t hash) const {
  // A negative answer reads one block of every layer: fetch them all first,
  // so that the cache misses of the large layers overlap.
  constexpr size_t kMaxPrefetch = 16;
  const uint64_t* blocks[kMaxPrefetch];
  const size_t n = std::min(layers_.size(), kMaxPrefetch);
  for (size_t i = 0; i < n; ++i) {
    const Layer& layer = layers_[i];
    blocks[i] = &layer.words[BlockIn(hash, i, layer.blocks) * kBlockWords];
    __builtin_prefetch(blocks[i]);
  }
  const Probes probes(hash);
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& layer = layers_[i];
    const uint64_t* words =
        i < n ? blocks[i]
              : &layer.words[BlockIn(hash, i, layer.blocks) * kBlockWords];
    bool all = true;
    for (int p = 0; p < kProbes && all; ++p) {
      const uint64_t bit = probes.bit[p];
      all = (words[bit / 64] >> (bit % 64)) & 1;
    }
    if (all) return true;
  }
  return false;
}

void PresenceFilter::Prefetch(uint64_t hash) const {
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& layer = layers_[i];
    __builtin_prefetch(
        &layer.words[BlockIn(hash, i, layer.blocks) * kBlockWords]);
  }
}

void PresenceFilter::Add(uint64_t hash) {
  if (layers_.empty()) {
    AddLayer(first_capacity_);
  } else if (layers_.back().added >= layers_.back().capacity) {
    AddLayer(layers_.back().capacity * kGrowth);
  }
  const size_t i = layers_.size() - 1;
  Layer& layer = layers_[i];
  uint64_t* words = &layer.words[BlockIn(hash, i, layer.blocks) * kBlockWords];
  const Probes probes(hash);
  for (int p = 0; p < kProbes; ++p) {
    const uint64_t bit = probes.bit[p];
    words[bit / 64] |= uint64_t{1} << (bit % 64);
  }
  ++layer.added;
}

void PresenceFilter::PrefetchAdd(uint64_t hash) const {
  if (layers_.empty()) return;
  const size_t i = layers_.size() - 1;
  const Layer& layer = layers_[i];
  __builtin_prefetch(&layer.words[BlockIn(hash, i, layer.blocks) * kBlockWords],
                     1);
}

void PresenceFilter::Reset() {
  layers_.clear();
  bytes_ = 0;
}

}  // namespace bigset
