// Histogram: latencies in logarithmic buckets (HdrHistogram-like: 2^k
// ranges split into 32 linear sub-buckets, so a percentile is within about
// 3% of the true value), in constant memory and O(1) per record. Written
// by hand: no Debian package offers one for C++.
//
// Thread-safety: not thread-safe; one per worker, merged by the reporter.

#ifndef BIGSET_TOOLS_BIGSET_LOAD_HISTOGRAM_H_
#define BIGSET_TOOLS_BIGSET_LOAD_HISTOGRAM_H_

#include <array>
#include <cstdint>

namespace bigset::load {

class Histogram {
 public:
  void Record(uint64_t nanos);
  void Merge(const Histogram& other);
  void Reset();

  uint64_t count() const { return count_; }
  uint64_t max() const { return max_; }
  double Mean() const;
  // The value at quantile q (0..1): the upper edge of its bucket, capped
  // at the maximum seen. 0 when empty.
  uint64_t Percentile(double q) const;

 private:
  static constexpr int kSubBits = 5;  // 32 sub-buckets per power of two.
  static constexpr int kBuckets = (64 - kSubBits + 1) << kSubBits;
  static int Index(uint64_t v);
  static uint64_t UpperEdge(int index);

  std::array<uint64_t, kBuckets> buckets_{};
  uint64_t count_ = 0;
  uint64_t sum_ = 0;
  uint64_t max_ = 0;
};

}  // namespace bigset::load

#endif  // BIGSET_TOOLS_BIGSET_LOAD_HISTOGRAM_H_
