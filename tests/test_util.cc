#include "test_util.h"

#include <algorithm>
#include <cstdlib>

namespace bigset::testing {

std::vector<uint64_t> Seeds(int base_count) {
  if (const char* one = std::getenv("BIGSET_TEST_SEED")) {
    return {std::strtoull(one, nullptr, 10)};
  }
  int scale = 1;
  if (const char* s = std::getenv("BIGSET_TEST_SCALE")) {
    scale = std::max(1, std::atoi(s));
  }
  std::vector<uint64_t> seeds;
  for (int i = 0; i < base_count * scale; ++i) {
    seeds.push_back(0x5eed0000u + static_cast<uint64_t>(i));
  }
  return seeds;
}

uint64_t Uniform(Rng& rng, uint64_t lo, uint64_t hi) {
  return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
}

std::string AdversarialBytes(Rng& rng, size_t max_len) {
  static constexpr char kSpecial[] = {'\x00', '\x01', '\xff', 'a', 'b'};
  size_t len = Uniform(rng, 0, max_len);
  std::string s;
  s.reserve(len);
  for (size_t i = 0; i < len; ++i) {
    if (Uniform(rng, 0, 3) == 0) {
      s.push_back(static_cast<char>(Uniform(rng, 0, 255)));
    } else {
      s.push_back(kSpecial[Uniform(rng, 0, sizeof(kSpecial) - 1)]);
    }
  }
  return s;
}

}  // namespace bigset::testing
