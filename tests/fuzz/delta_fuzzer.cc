// libFuzzer target: Delta::Decode on arbitrary bytes; decoded deltas round
// trip.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "bigset/core/delta.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto d = bigset::Delta::Decode(in);
  if (!d.ok()) return 0;
  auto again = bigset::Delta::Decode(d->Encode());
  if (!again.ok() || !(*again == *d)) std::abort();
  return 0;
}
