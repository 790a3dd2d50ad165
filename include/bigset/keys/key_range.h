// KeyRange: a half-open interval of encoded store keys.

#ifndef BIGSET_KEYS_KEY_RANGE_H_
#define BIGSET_KEYS_KEY_RANGE_H_

#include <string>

namespace bigset {

// The keys k with start <= k < limit under the store's comparator. An empty
// `limit` means "no upper bound". A value type; safe to copy.
struct KeyRange {
  std::string start;
  std::string limit;

  friend bool operator==(const KeyRange&, const KeyRange&) = default;
};

}  // namespace bigset

#endif  // BIGSET_KEYS_KEY_RANGE_H_
