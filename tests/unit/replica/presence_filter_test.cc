// PresenceFilter: never a false negative, through every layer's growth and
// in layers large enough for huge pages; a false-positive rate near its
// design point (0.05% per full layer); the memory it reports and predicts;
// Prefetch and Reset. Randomized against a reference set, seeds printed.

#include "replica/presence_filter.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "test_util.h"

namespace bigset::testing {
namespace {

// At least 8 bytes: a fresh element is almost never one already added.
std::string RandomElement(Rng& rng) {
  std::string e(Uniform(rng, 8, 24), '\0');
  for (char& c : e) c = static_cast<char>(Uniform(rng, 0, 255));
  return e;
}

TEST_CASE("presence filter: no false negatives as layers grow",
          "[presence_filter]") {
  for (uint64_t seed : Seeds(4)) {
    CAPTURE(seed);
    Rng rng(seed);
    // Small first layers: many layers, each four times the last.
    PresenceFilter filter(Uniform(rng, 0, 3000));
    std::unordered_set<std::string> added;
    std::vector<uint64_t> hashes;
    const size_t n = Uniform(rng, 20'000, 120'000);
    size_t expected_bytes = 0;
    for (size_t i = 0; i < n; ++i) {
      std::string e = RandomElement(rng);
      const uint64_t h = PresenceFilter::Hash(e);
      expected_bytes += filter.GrowthBytes();
      filter.Prefetch(h);
      filter.Add(h);
      // What GrowthBytes predicted is what the Add allocated.
      REQUIRE(filter.MemoryBytes() == expected_bytes);
      if (added.insert(std::move(e)).second) hashes.push_back(h);
      if (Uniform(rng, 0, 999) == 0) {
        // Every element added so far, old layers included.
        for (uint64_t old : hashes) REQUIRE(filter.MayContain(old));
      }
    }
    for (uint64_t h : hashes) REQUIRE(filter.MayContain(h));
  }
}

TEST_CASE("presence filter: false positives stay near the design rate",
          "[presence_filter]") {
  for (uint64_t seed : Seeds(2)) {
    CAPTURE(seed);
    Rng rng(seed);
    PresenceFilter filter;
    std::unordered_set<std::string> added;
    for (int i = 0; i < 200'000; ++i) {
      std::string e = RandomElement(rng);
      filter.Add(PresenceFilter::Hash(e));
      added.insert(std::move(e));
    }
    int tried = 0, positives = 0;
    while (tried < 200'000) {
      std::string e = RandomElement(rng);
      if (added.count(e) > 0) continue;
      ++tried;
      if (filter.MayContain(PresenceFilter::Hash(e))) ++positives;
    }
    // About 0.05% per full layer, and a negative probes every layer (seven
    // here, the last one partly full): well under 1% in all.
    CAPTURE(positives);
    REQUIRE(positives < tried / 100);
  }
}

TEST_CASE(
    "presence filter: a layer of huge-page size (aligned, advised) holds "
    "what was added",
    "[presence_filter]") {
  for (uint64_t seed : Seeds(1)) {
    CAPTURE(seed);
    Rng rng(seed);
    // 1M elements of capacity: a 2.5 MB first layer.
    PresenceFilter filter(1'000'000);
    REQUIRE(filter.GrowthBytes() >= (size_t{2} << 20));
    std::vector<uint64_t> hashes;
    for (int i = 0; i < 50'000; ++i) {
      const uint64_t h = PresenceFilter::Hash(RandomElement(rng));
      filter.Add(h);
      hashes.push_back(h);
    }
    REQUIRE(filter.MemoryBytes() >= (size_t{2} << 20));
    for (uint64_t h : hashes) REQUIRE(filter.MayContain(h));
    // Mostly empty: a fresh element is almost never a false positive.
    int positives = 0;
    for (int i = 0; i < 10'000; ++i) {
      positives += filter.MayContain(PresenceFilter::Hash(RandomElement(rng)));
    }
    REQUIRE(positives < 10);
  }
}

TEST_CASE("presence filter: Reset forgets everything and frees its layers",
          "[presence_filter]") {
  PresenceFilter filter;
  std::vector<uint64_t> hashes;
  for (int i = 0; i < 5000; ++i) {
    hashes.push_back(PresenceFilter::Hash("element " + std::to_string(i)));
    filter.Add(hashes.back());
  }
  REQUIRE(filter.MemoryBytes() > 0);
  filter.Reset();
  REQUIRE(filter.MemoryBytes() == 0);
  int positives = 0;
  for (uint64_t h : hashes) positives += filter.MayContain(h);
  REQUIRE(positives == 0);
  // Usable again, from its first layer.
  REQUIRE(filter.GrowthBytes() > 0);
  filter.Add(hashes[0]);
  REQUIRE(filter.MayContain(hashes[0]));
}

}  // namespace
}  // namespace bigset::testing
