// RespCall: one blocking request to another bigsetd's client port, for the
// membership commands nodes send each other (the cluster map). Connects,
// authenticates if a password is given, sends one command and reads one
// reply (a simple string, error, integer or bulk string of at most
// max_reply_bytes), then closes. Every step is bounded by `timeout_ms`.
//
// Thread-safety: thread-safe (no shared state). Blocks: never call it on
// the server's or the node's thread.

#ifndef BIGSET_TOOLS_BIGSETD_RESP_CLIENT_H_
#define BIGSET_TOOLS_BIGSETD_RESP_CLIENT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bigset/network/address_book.h"

namespace bigset::server {

// The reply's text (for an integer, its digits). An error reply is
// FailedPrecondition with the error's text; a network failure Unavailable.
absl::StatusOr<std::string> RespCall(const PeerAddress& address,
                                     const std::string& password,
                                     const std::vector<std::string>& args,
                                     int timeout_ms,
                                     size_t max_reply_bytes = 16 << 20);

}  // namespace bigset::server

#endif  // BIGSET_TOOLS_BIGSETD_RESP_CLIENT_H_
