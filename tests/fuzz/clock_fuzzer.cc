// libFuzzer target: Clock::Decode on arbitrary bytes; decoded clocks are
// normalised and round trip.
#include <cstddef>
#include <cstdint>

#include "bigset/core/clock.h"
#include "round_trip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return bigset::testing::DecodeRoundTrips<bigset::Clock>(
      data, size, [](const bigset::Clock& c) { return c.IsNormalized(); });
}
