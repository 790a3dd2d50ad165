// libFuzzer target: bigsetd's cluster map decoder (a file in the data
// directory, and the payload of BIGSET.CLUSTER INSTALL) on arbitrary
// bytes; a decoded map round trips.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cluster_map.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto map = bigset::server::ClusterMap::Decode(in);
  if (!map.ok()) return 0;
  auto again = bigset::server::ClusterMap::Decode(map->Encode());
  if (!again.ok() || again->Encode() != map->Encode()) std::abort();
  return 0;
}
