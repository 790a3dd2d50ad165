// libFuzzer target: Delta::Decode on arbitrary bytes; decoded deltas round
// trip.
#include <cstddef>
#include <cstdint>

#include "bigset/core/delta.h"
#include "round_trip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return bigset::testing::DecodeRoundTrips<bigset::Delta>(data, size);
}
