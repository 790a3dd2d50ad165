// Conversions between std::string_view (public API) and absl::string_view
// (Debian's Abseil is built without ABSL_OPTION_USE_STD_STRING_VIEW, so the
// two are distinct types). Internal header.

#ifndef BIGSET_LIB_CORE_STRING_VIEW_COMPAT_H_
#define BIGSET_LIB_CORE_STRING_VIEW_COMPAT_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace bigset {

inline absl::string_view ToAbsl(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

inline std::string_view ToStd(absl::string_view s) {
  return std::string_view(s.data(), s.size());
}

}  // namespace bigset

#endif  // BIGSET_LIB_CORE_STRING_VIEW_COMPAT_H_
