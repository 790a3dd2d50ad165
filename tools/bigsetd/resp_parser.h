// RespParser: splits the bytes a Redis client sends into commands.
//
// Accepts what Redis accepts: multibulk requests ("*2\r\n$4\r\nPING\r\n...")
// and inline commands (a line of words, "PING\r\n", so that telnet works;
// double and single quotes group words, with Redis's escapes). Incremental:
// bytes are appended as they arrive and a command is returned once whole,
// without parsing its beginning again.
//
// Bad input never crashes and never allocates more than the limits allow:
// a frame that breaks the protocol, an argument count over max_args or a
// bulk length over max_bulk_bytes is a protocol error (Redis's wording, for
// the reply), after which the parser must not be used again (the connection
// is closed). Bytes buffered while a command is incomplete are bounded by
// the caller (buffered()).
//
// Thread-safety: not thread-safe; one per connection.

#ifndef BIGSET_TOOLS_BIGSETD_RESP_PARSER_H_
#define BIGSET_TOOLS_BIGSETD_RESP_PARSER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace bigset::server {

struct RespLimits {
  // Largest argument (Redis: proto-max-bulk-len).
  size_t max_bulk_bytes = 64 << 20;
  // Most arguments of one command.
  size_t max_args = 1 << 20;
  // Longest inline command, and longest "*<n>" / "$<n>" header line.
  size_t max_inline_bytes = 64 << 10;
};

class RespParser {
 public:
  explicit RespParser(const RespLimits& limits) : limits_(limits) {}

  // Appends bytes read from the connection.
  void Feed(std::string_view bytes);

  // The next whole command: true with *args set (at least one argument),
  // false if more bytes are needed. A protocol error is InvalidArgument
  // whose message is the reply ("Protocol error: ..."); the parser is then
  // unusable. Empty commands (an empty line, "*0") are skipped.
  absl::StatusOr<bool> Next(std::vector<std::string>* args);

  // Bytes received and not yet returned as commands: unparsed bytes and
  // the arguments of the incomplete command parsed so far (what the
  // connection holds for the client).
  size_t buffered() const {
    return buf_.size() - pos_ + partial_bytes_ +
           partial_.capacity() * sizeof(std::string);
  }

 private:
  // Reads a line ending in "\n" (a "\r" before it is dropped; required if
  // `crlf`) from pos_: true and *line if whole; false if incomplete.
  absl::StatusOr<bool> Line(std::string_view* line, std::string_view what,
                            bool crlf);
  absl::StatusOr<bool> NextInline(std::vector<std::string>* args);
  absl::StatusOr<bool> NextMultibulk(std::vector<std::string>* args);
  void Compact();

  RespLimits limits_;
  std::string buf_;
  size_t pos_ = 0;
  // Multibulk state: arguments expected (-1: between commands), those read
  // so far, and the length of the bulk being read (-1: its header next).
  int64_t expected_ = -1;
  std::vector<std::string> partial_;
  size_t partial_bytes_ = 0;
  int64_t bulk_len_ = -1;
};

// Splits an inline command line into words the way Redis does (quotes,
// "\xHH" and the usual escapes inside double quotes). InvalidArgument for
// unbalanced quotes.
absl::StatusOr<std::vector<std::string>> SplitInline(std::string_view line);

}  // namespace bigset::server

#endif  // BIGSET_TOOLS_BIGSETD_RESP_PARSER_H_
