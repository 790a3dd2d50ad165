// Glob patterns as Redis's MATCH takes them: '*', '?', '[abc]', '[^a-z]'
// and '\' to quote the next character.
//
// Thread-safety: pure functions.

#ifndef BIGSET_TOOLS_BIGSETD_GLOB_H_
#define BIGSET_TOOLS_BIGSETD_GLOB_H_

#include <string>
#include <string_view>

#include "bigset/core/element_bounds.h"

namespace bigset::server {

// Whether `text` matches `pattern`. Time O(|pattern| * |text|) at worst
// (a pattern of many stars cannot make it exponential).
bool GlobMatch(std::string_view pattern, std::string_view text);

// The literal prefix every match of `pattern` starts with (the characters
// before its first special one, unquoted), so that a scan may seek to it.
std::string GlobLiteralPrefix(std::string_view pattern);

// The bounds of the elements that start with `prefix` (all of them for "").
ElementBounds PrefixBounds(std::string_view prefix);

}  // namespace bigset::server

#endif  // BIGSET_TOOLS_BIGSETD_GLOB_H_
