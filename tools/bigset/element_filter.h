// ElementFilter: a growing Bloom filter of element names, so that a bulk
// add can skip the store seek that finds an element's current dots when
// the element certainly has none.
//
// The filter answers "maybe present" for every element inserted and, with
// a false-positive rate of about 1%, for others. It grows by adding a layer
// of twice the capacity when the newest is full (a scalable Bloom filter),
// so it needs no size up front: about 1.2 bytes per element.
//
// Thread-safety: not thread-safe.

#ifndef BIGSET_TOOLS_BIGSET_ELEMENT_FILTER_H_
#define BIGSET_TOOLS_BIGSET_ELEMENT_FILTER_H_

#include <cstdint>
#include <string_view>
#include <vector>

namespace bigset::tool {

class ElementFilter {
 public:
  void Insert(std::string_view element);
  bool MayContain(std::string_view element) const;
  size_t MemoryBytes() const;

 private:
  struct Layer {
    std::vector<uint64_t> bits;
    uint64_t capacity = 0;
    uint64_t count = 0;
  };
  static constexpr int kProbes = 7;  // For 10 bits per element.
  std::vector<Layer> layers_;
};

}  // namespace bigset::tool

#endif  // BIGSET_TOOLS_BIGSET_ELEMENT_FILTER_H_
