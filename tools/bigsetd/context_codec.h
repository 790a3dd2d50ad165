// The text form of a causal context that BIGSET.CONTEXT returns and
// BIGSET.ADD / BIGSET.REMOVE take: the element's dots, each
// "<actor, 16 hex digits>.<counter, decimal>", joined by ",". Clients treat
// it as opaque.

#ifndef BIGSET_TOOLS_BIGSETD_CONTEXT_CODEC_H_
#define BIGSET_TOOLS_BIGSETD_CONTEXT_CODEC_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "bigset/core/dot.h"

namespace bigset::server {

std::string EncodeContext(const std::vector<Dot>& dots);
// InvalidArgument for anything EncodeContext would not write (at most
// 1024 dots; counters >= 1); "" is the empty context.
absl::StatusOr<std::vector<Dot>> DecodeContext(std::string_view text);

}  // namespace bigset::server

#endif  // BIGSET_TOOLS_BIGSETD_CONTEXT_CODEC_H_
