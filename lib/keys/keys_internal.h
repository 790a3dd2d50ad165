// Internal fast paths of the key codec, for scans of one set's element keys.

#ifndef BIGSET_LIB_KEYS_KEYS_INTERNAL_H_
#define BIGSET_LIB_KEYS_KEYS_INTERNAL_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "bigset/core/dot.h"

namespace bigset::internal {

// Decodes an element key whose first `prefix_len` bytes are a known set
// prefix followed by the element kind byte (as every key in an
// ElementsRange is). Skips re-validating the prefix; validates the rest
// exactly as DecodeKey does. *element points into `key` or into *storage.
// Returns false if the key is malformed.
bool DecodeElementKeyAfterPrefix(std::string_view key, size_t prefix_len,
                                 std::string_view* element,
                                 std::string* storage, Dot* dot);

// Length of the prefix of every element key of `set` in `keyspace`:
// everything up to and including the element kind byte.
size_t ElementKeyPrefixLength(std::string_view set);

// Appends what follows that prefix in the key of (element, dot): with
// ElementsRange(keyspace, set).start before it, the same bytes as
// AppendElementKey, for a writer of many keys of one set.
void AppendElementKeyAfterPrefix(std::string* dst, std::string_view element,
                                 Dot dot);

}  // namespace bigset::internal

#endif  // BIGSET_LIB_KEYS_KEYS_INTERNAL_H_
