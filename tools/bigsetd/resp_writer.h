// RespWriter: appends replies in RESP2 or RESP3 to a connection's output.
//
// The aggregate headers take the element count up front; a RESP3-only type
// is written as its nearest RESP2 form when the connection speaks RESP2
// (a map as a flat array of twice the pairs, a set as an array, a null as
// the null bulk string, a boolean as an integer), as Redis does.
//
// Thread-safety: not thread-safe; owned by one connection.

#ifndef BIGSET_TOOLS_BIGSETD_RESP_WRITER_H_
#define BIGSET_TOOLS_BIGSETD_RESP_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace bigset::server {

class RespWriter {
 public:
  // REQUIRES: `out` outlives the writer. `protocol` is 2 or 3.
  RespWriter(std::string* out, int protocol) : out_(out), protocol_(protocol) {}

  int protocol() const { return protocol_; }

  // "+OK": REQUIRES no CR or LF in `text`.
  void Simple(std::string_view text);
  // "-ERR ...": the first word is the error code. CR and LF are replaced
  // by spaces (an error is one line).
  void Error(std::string_view text);
  void Integer(int64_t value);
  void Bulk(std::string_view bytes);
  void Null();
  void Bool(bool value);
  void Array(size_t n);
  void Set(size_t n);
  void Map(size_t pairs);

 private:
  void Header(char type, int64_t n);
  std::string* out_;
  int protocol_;
};

}  // namespace bigset::server

#endif  // BIGSET_TOOLS_BIGSETD_RESP_WRITER_H_
