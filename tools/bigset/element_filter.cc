#include "element_filter.h"

#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"

namespace bigset::tool {
namespace {

struct Hashes {
  uint64_t h1, h2;
};

Hashes HashOf(std::string_view element) {
  const uint64_t h = absl::Hash<absl::string_view>()(
      absl::string_view(element.data(), element.size()));
  // Double hashing: probe i is h1 + i * h2 (h2 odd, so probes differ).
  return {h, (h >> 29 | h << 35) * 0x9E3779B97F4A7C15ull | 1};
}

}  // namespace

void ElementFilter::Insert(std::string_view element) {
  if (layers_.empty() || layers_.back().count == layers_.back().capacity) {
    Layer layer;
    layer.capacity = layers_.empty() ? 1 << 16 : layers_.back().capacity * 2;
    layer.bits.assign(layer.capacity * 10 / 64 + 1, 0);
    layers_.push_back(std::move(layer));
  }
  Layer& l = layers_.back();
  const Hashes h = HashOf(element);
  const uint64_t nbits = l.bits.size() * 64;
  for (int i = 0; i < kProbes; ++i) {
    const uint64_t bit = (h.h1 + static_cast<uint64_t>(i) * h.h2) % nbits;
    l.bits[bit / 64] |= uint64_t{1} << (bit % 64);
  }
  ++l.count;
}

bool ElementFilter::MayContain(std::string_view element) const {
  const Hashes h = HashOf(element);
  for (const Layer& l : layers_) {
    const uint64_t nbits = l.bits.size() * 64;
    bool all = true;
    for (int i = 0; i < kProbes && all; ++i) {
      const uint64_t bit = (h.h1 + static_cast<uint64_t>(i) * h.h2) % nbits;
      all = (l.bits[bit / 64] >> (bit % 64)) & 1;
    }
    if (all) return true;
  }
  return false;
}

size_t ElementFilter::MemoryBytes() const {
  size_t n = 0;
  for (const Layer& l : layers_) n += l.bits.size() * sizeof(uint64_t);
  return n;
}

}  // namespace bigset::tool
