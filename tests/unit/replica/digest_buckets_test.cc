// DigestBuckets alone: sums per bucket in any order, the partition digest
// equal for equal buckets and different otherwise, and its bucket of a set
// the same on every replica.

#include "replica/digest_buckets.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"

namespace bigset::testing {
namespace {

TEST_CASE(
    "digest buckets: a bucket sums what is added to it, in any order, "
    "mod 2^64") {
  ForEachSeed(20, [](Rng& rng) {
    const uint32_t n = static_cast<uint32_t>(Uniform(rng, 1, 16));
    DigestBuckets a(n), b(n);
    std::vector<uint64_t> expected(n, 0);
    std::vector<std::pair<uint32_t, uint64_t>> adds;
    for (int i = 0; i < 200; ++i) {
      const uint32_t bucket = static_cast<uint32_t>(Uniform(rng, 0, n - 1));
      const uint64_t delta = rng();
      adds.emplace_back(bucket, delta);
      expected[bucket] += delta;  // Wraps, as the buckets do.
      a.Add(bucket, delta);
    }
    // The same adds in reverse: a set's changes reach replicas in any order.
    for (auto it = adds.rbegin(); it != adds.rend(); ++it) {
      b.Add(it->first, it->second);
    }
    CHECK(a.Values() == expected);
    CHECK(b.Values() == expected);
    CHECK(a.PartitionDigest() == b.PartitionDigest());
    // Taking a set's digest out again (adding its negation) restores the
    // bucket: how a changed set's digest is replaced.
    a.Add(adds[0].first, 0 - adds[0].second);
    expected[adds[0].first] -= adds[0].second;
    CHECK(a.Values() == expected);
    CHECK((adds[0].second == 0 || a.PartitionDigest() != b.PartitionDigest()));
  });
}

TEST_CASE(
    "digest buckets: the partition digest tells buckets apart, by "
    "value, by position and by their number") {
  DigestBuckets empty4(4), empty5(5), one(4), other(4), moved(4);
  CHECK(empty4.PartitionDigest() != empty5.PartitionDigest());
  one.Add(1, 7);
  other.Add(1, 8);
  moved.Add(2, 7);
  CHECK(one.PartitionDigest() != empty4.PartitionDigest());
  CHECK(one.PartitionDigest() != other.PartitionDigest());
  CHECK(one.PartitionDigest() != moved.PartitionDigest());
  DigestBuckets same(4);
  same.Add(1, 3);
  same.Add(1, 4);
  CHECK(same.PartitionDigest() == one.PartitionDigest());
}

TEST_CASE(
    "digest buckets: a set's bucket depends on its name and the "
    "number of buckets only; zero buckets are one") {
  DigestBuckets a(8), b(8);
  for (int i = 0; i < 100; ++i) {
    const std::string set = "set-" + std::to_string(i);
    CHECK(a.BucketOf(set) == b.BucketOf(set));
    CHECK(a.BucketOf(set) < 8);
  }
  DigestBuckets zero(0);
  CHECK(zero.size() == 1);
  CHECK(zero.BucketOf("anything") == 0);
  CHECK(zero.Values() == std::vector<uint64_t>{0});
}

}  // namespace
}  // namespace bigset::testing
