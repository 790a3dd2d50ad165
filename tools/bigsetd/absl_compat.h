// Debian's Abseil has its own absl::string_view, distinct from
// std::string_view: these convert at the boundary.

#ifndef BIGSET_TOOLS_BIGSETD_ABSL_COMPAT_H_
#define BIGSET_TOOLS_BIGSETD_ABSL_COMPAT_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace bigset::server {

inline absl::string_view AV(std::string_view s) { return {s.data(), s.size()}; }
inline std::string_view SV(absl::string_view s) { return {s.data(), s.size()}; }

}  // namespace bigset::server

#endif  // BIGSET_TOOLS_BIGSETD_ABSL_COMPAT_H_
