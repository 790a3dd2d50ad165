// Continuation tokens of paged range queries: the one codec, used by
// Replica::Range and by the cluster's range coordinator. Internal header.
//
// A token is opaque to clients: version byte 0x01, then the last element of
// the page it continues (docs/FORMATS.md, "Continuation token").

#ifndef BIGSET_LIB_REPLICA_CONTINUATION_H_
#define BIGSET_LIB_REPLICA_CONTINUATION_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace bigset {

// The token that resumes a range after `last_element`.
std::string EncodeContinuation(std::string_view last_element);

// The last element of the page a token continues. InvalidArgument for a
// token this version did not produce.
absl::StatusOr<std::string> DecodeContinuation(std::string_view token);

}  // namespace bigset

#endif  // BIGSET_LIB_REPLICA_CONTINUATION_H_
