// The text form of a causal context that BIGSET.CONTEXT returns and
// BIGSET.ADD / BIGSET.REMOVE take: "<16 hex digits>:" then the element's
// dots, each "<actor, 16 hex digits>.<counter, decimal>", joined by ",".
// The first part is a hash of the set, the element and the dots, so that a
// context read for one element is refused for another, and a mistyped one
// is refused. It is a check against mistakes, not against forgery: the
// server also keeps only the dots a read quorum holds for the element
// (bigset_commands.cc). Clients treat it as opaque.

#ifndef BIGSET_TOOLS_BIGSETD_CONTEXT_CODEC_H_
#define BIGSET_TOOLS_BIGSETD_CONTEXT_CODEC_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "bigset/core/dot.h"

namespace bigset::server {

// "" for no dots.
std::string EncodeContext(std::string_view set, std::string_view element,
                          const std::vector<Dot>& dots);
// InvalidArgument for anything EncodeContext would not write for `set`
// and `element` (at most 1024 dots; counters >= 1); "" is the empty context.
absl::StatusOr<std::vector<Dot>> DecodeContext(std::string_view set,
                                               std::string_view element,
                                               std::string_view text);

}  // namespace bigset::server

#endif  // BIGSET_TOOLS_BIGSETD_CONTEXT_CODEC_H_
