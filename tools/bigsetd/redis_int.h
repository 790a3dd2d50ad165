// RedisInt: Redis's parser of integer arguments (string2ll): an optional
// '-', digits without leading zeros, within int64. Stricter than
// absl::SimpleAtoi, which takes '+', spaces and leading zeros.
//
// Thread-safety: a pure function.

#ifndef BIGSET_TOOLS_BIGSETD_REDIS_INT_H_
#define BIGSET_TOOLS_BIGSETD_REDIS_INT_H_

#include <cstdint>
#include <string_view>

namespace bigset::server {

// Redis's string2ll: an optional '-', digits without leading zeros, within
// int64.
inline bool RedisInt(std::string_view s, int64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  size_t i = 0;
  const bool negative = s[0] == '-';
  if (negative) ++i;
  if (i == s.size()) return false;
  if (s[i] == '0') {
    if (s.size() == 1) {
      *out = 0;
      return true;
    }
    return false;
  }
  uint64_t v = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    const uint64_t d = static_cast<uint64_t>(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  if (negative) {
    if (v > static_cast<uint64_t>(INT64_MAX) + 1) return false;
    *out = static_cast<int64_t>(0 - v);
  } else {
    if (v > static_cast<uint64_t>(INT64_MAX)) return false;
    *out = static_cast<int64_t>(v);
  }
  return true;
}

}  // namespace bigset::server

#endif  // BIGSET_TOOLS_BIGSETD_REDIS_INT_H_
