// Sampler: draws are uniform over the set as it is now, whatever it became
// since its skeleton was built (within the skeleton's bounds), k-draws have
// no repeats, an overfull interval marks the skeleton stale.

#include "sampler.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "range_answer.h"
#include "test_util.h"

namespace bigset::server {
namespace {

using bigset::testing::Rng;
using bigset::testing::Seeds;
using bigset::testing::Uniform;

std::shared_ptr<Skeleton> Build(const std::set<std::string>& set) {
  auto sk = std::make_shared<Skeleton>();
  sk->stride = SkeletonStride(set.size());
  sk->built_count = set.size();
  uint64_t i = 0;
  for (const std::string& e : set) sk->Add(e, i++);
  return sk;
}

std::vector<std::string> DrawOnce(std::shared_ptr<Skeleton> sk,
                                  const std::set<std::string>& set, size_t k,
                                  uint64_t seed) {
  std::vector<std::string> got;
  bool done = false;
  Sampler::Draw(
      sk, k, seed,
      [&set](RangeQuery q,
             std::function<void(absl::StatusOr<RangeResult>)> cb) {
        cb(bigset::testing::AnswerRange(set, q));
      },
      [&](absl::StatusOr<std::vector<ElementDots>> r) {
        REQUIRE(r.ok());
        for (ElementDots& e : *r) got.push_back(e.element);
        done = true;
      });
  REQUIRE(done);
  return got;
}

TEST_CASE("sampler: uniform over the set as it is now") {
  // Skewed keys: a dense run of long keys and sparse short ones; then the
  // set changes (a dense region grows, others shrink) after the skeleton.
  std::set<std::string> set;
  for (int i = 0; i < 3000; ++i) set.insert(absl::StrFormat("a%06d", i));
  for (int i = 0; i < 2000; ++i) set.insert(absl::StrFormat("z%d", i * 7919));
  auto sk = Build(set);
  REQUIRE(sk->stride == 64);
  Rng rng(99);
  for (int i = 0; i < 40; ++i) set.insert(absl::StrFormat("a%06d5", i));
  int removed = 0;
  for (auto it = set.begin(); it != set.end() && removed < 600;) {
    if (Uniform(rng, 0, 3) == 0) {
      it = set.erase(it);
      ++removed;
    } else {
      ++it;
    }
  }
  // 200,000 single draws, counted per rank bucket (50 buckets).
  const std::vector<std::string> ranked(set.begin(), set.end());
  std::map<std::string, size_t> rank;
  for (size_t i = 0; i < ranked.size(); ++i) rank[ranked[i]] = i;
  std::vector<double> buckets(50, 0);
  const int draws = 200'000;
  for (int d = 0; d < draws; ++d) {
    std::vector<std::string> got = DrawOnce(sk, set, 1, 1000 + d);
    REQUIRE(got.size() == 1);
    buckets[rank.at(got[0]) * 50 / ranked.size()] += 1;
  }
  REQUIRE(!sk->stale);
  // Each bucket holds 1/50 of the members (within one member): its share
  // of the draws is 4,000 +- 63 (one sigma); allow 5 sigma.
  for (size_t b = 0; b < 50; ++b) {
    const double members = static_cast<double>((b + 1) * ranked.size() / 50 -
                                               b * ranked.size() / 50);
    const double expected = draws * members / ranked.size();
    CAPTURE(b, buckets[b], expected);
    REQUIRE(std::abs(buckets[b] - expected) < 5 * std::sqrt(expected));
  }
}

TEST_CASE("sampler: k members without repeats, fewer if the set has fewer") {
  for (uint64_t seed : Seeds(30)) {
    CAPTURE(seed);
    Rng rng(seed);
    std::set<std::string> set;
    const int n = static_cast<int>(Uniform(rng, 0, 3000));
    for (int i = 0; i < n; ++i) set.insert(absl::StrFormat("m%d", i));
    auto sk = Build(set);
    const size_t k = Uniform(rng, 1, 100);
    std::vector<std::string> got = DrawOnce(sk, set, k, seed);
    REQUIRE(got.size() == std::min<size_t>(k, set.size()));
    REQUIRE(std::set<std::string>(got.begin(), got.end()).size() == got.size());
    for (const std::string& g : got) REQUIRE(set.count(g) == 1);
  }
}

TEST_CASE("sampler: an interval fuller than twice its stride marks it stale") {
  std::set<std::string> set;
  for (int i = 0; i < 1000; ++i) set.insert(absl::StrFormat("b%04d", i));
  auto sk = Build(set);  // 16 intervals of 64.
  for (int i = 0; i < 500; ++i) set.insert(absl::StrFormat("b0000x%03d", i));
  for (int d = 0; d < 200 && !sk->stale; ++d) DrawOnce(sk, set, 1, d);
  REQUIRE(sk->stale);
}

TEST_CASE("sampler: a failed read ends the draw with its error") {
  auto sk = std::make_shared<Skeleton>();
  sk->starts = {""};
  bool failed = false;
  Sampler::Draw(
      sk, 3, 1,
      [](RangeQuery, std::function<void(absl::StatusOr<RangeResult>)> cb) {
        cb(absl::UnavailableError("down"));
      },
      [&](absl::StatusOr<std::vector<ElementDots>> r) {
        failed = absl::IsUnavailable(r.status());
      });
  REQUIRE(failed);
}

}  // namespace
}  // namespace bigset::server
