// The check the codec fuzz targets share: what decodes re-encodes to the
// same value. Header-only.

#ifndef BIGSET_TESTS_FUZZ_ROUND_TRIP_H_
#define BIGSET_TESTS_FUZZ_ROUND_TRIP_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace bigset::testing {

// T::Decode on the bytes; if they decode, aborts unless `valid` holds of
// the result and its Encode decodes again to an equal value. Returns 0
// (libFuzzer's LLVMFuzzerTestOneInput's answer).
template <typename T, typename Valid>
int DecodeRoundTrips(const uint8_t* data, size_t size, Valid valid) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto decoded = T::Decode(in);
  if (!decoded.ok()) return 0;
  if (!valid(*decoded)) std::abort();
  auto again = T::Decode(decoded->Encode());
  if (!again.ok() || !(*again == *decoded)) std::abort();
  return 0;
}

template <typename T>
int DecodeRoundTrips(const uint8_t* data, size_t size) {
  return DecodeRoundTrips<T>(data, size, [](const T&) { return true; });
}

}  // namespace bigset::testing

#endif  // BIGSET_TESTS_FUZZ_ROUND_TRIP_H_
