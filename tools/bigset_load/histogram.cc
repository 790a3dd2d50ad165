#include "histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace bigset::load {

int Histogram::Index(uint64_t v) {
  // Values below 2^kSubBits have a bucket each; above, the top kSubBits+1
  // bits choose the bucket.
  if (v < (uint64_t{1} << kSubBits)) return static_cast<int>(v);
  const int msb = 63 - std::countl_zero(v);
  const int shift = msb - kSubBits;
  const uint64_t sub = (v >> shift) & ((uint64_t{1} << kSubBits) - 1);
  return ((shift + 1) << kSubBits) + static_cast<int>(sub);
}

uint64_t Histogram::UpperEdge(int index) {
  if (index < (1 << kSubBits)) return static_cast<uint64_t>(index);
  const int shift = (index >> kSubBits) - 1;
  const uint64_t sub = static_cast<uint64_t>(index & ((1 << kSubBits) - 1));
  const uint64_t base = (uint64_t{1} << kSubBits) | sub;
  return ((base + 1) << shift) - 1;
}

void Histogram::Record(uint64_t nanos) {
  ++buckets_[Index(nanos)];
  ++count_;
  sum_ += nanos;
  max_ = std::max(max_, nanos);
}

void Histogram::Merge(const Histogram& o) {
  for (int i = 0; i < kBuckets; ++i) buckets_[i] += o.buckets_[i];
  count_ += o.count_;
  sum_ += o.sum_;
  max_ = std::max(max_, o.max_);
}

void Histogram::Reset() { *this = Histogram(); }

double Histogram::Mean() const {
  return count_ == 0 ? 0
                     : static_cast<double>(sum_) / static_cast<double>(count_);
}

uint64_t Histogram::Percentile(double q) const {
  if (count_ == 0) return 0;
  const uint64_t rank = static_cast<uint64_t>(
      std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(count_)));
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += buckets_[i];
    if (seen >= std::max<uint64_t>(rank, 1))
      return std::min(UpperEdge(i), max_);
  }
  return max_;
}

}  // namespace bigset::load
