#include "network/stream.h"

#include <cstdint>
#include <string_view>

#include "absl/strings/numbers.h"
#include "core/string_view_compat.h"

namespace bigset {
namespace tcp_internal {

// The node id a certificate's common name ("node-<id>") names, or 0.
NodeId CertNode(X509* cert) {
  if (cert == nullptr) return 0;
  char cn[256] = {0};
  const int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert),
                                          NID_commonName, cn, sizeof(cn));
  if (n <= 0) return 0;
  std::string_view name(cn, static_cast<size_t>(n));
  constexpr std::string_view kPrefix = "node-";
  if (name.substr(0, kPrefix.size()) != kPrefix) return 0;
  uint32_t id = 0;
  if (!absl::SimpleAtoi(ToAbsl(name.substr(kPrefix.size())), &id)) return 0;
  return id;
}

}  // namespace tcp_internal
}  // namespace bigset
