// libFuzzer target: Clock::Decode on arbitrary bytes; decoded clocks are
// normalised and round trip.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "bigset/core/clock.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto c = bigset::Clock::Decode(in);
  if (!c.ok()) return 0;
  if (!c->IsNormalized()) std::abort();
  auto again = bigset::Clock::Decode(c->Encode());
  if (!again.ok() || !(*again == *c)) std::abort();
  return 0;
}
