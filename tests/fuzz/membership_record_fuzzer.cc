// libFuzzer target: MembershipRecord::Decode (records read back from a
// membership authority such as etcd) on arbitrary bytes; a decoded record
// round trips.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "bigset/cluster/membership_authority.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto record = bigset::MembershipRecord::Decode(in);
  if (!record.ok()) return 0;
  auto again = bigset::MembershipRecord::Decode(record->Encode());
  if (!again.ok() || !(*again == *record)) std::abort();
  return 0;
}
