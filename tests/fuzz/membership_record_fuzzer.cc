// libFuzzer target: MembershipRecord::Decode (records read back from a
// membership authority such as etcd) on arbitrary bytes; a decoded record
// round trips.
#include <cstddef>
#include <cstdint>

#include "bigset/cluster/membership_authority.h"
#include "round_trip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return bigset::testing::DecodeRoundTrips<bigset::MembershipRecord>(data,
                                                                     size);
}
