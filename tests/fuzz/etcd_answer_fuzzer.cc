// libFuzzer target: what etcd's gateway sends bigset (lib/etcd): the JSON
// parser and the chunked-body decoder on arbitrary bytes, the decoder fed
// in two pieces split where the input's first byte says. Neither may crash
// or read out of bounds; a decoded body is never longer than its input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "etcd/http_client.h"
#include "etcd/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view in(reinterpret_cast<const char*>(data), size);
  (void)bigset::etcd::Json::Parse(in);
  bigset::etcd::ChunkedDecoder chunked;
  std::string out;
  const size_t split = size == 0 ? 0 : data[0] % (size + 1);
  if (chunked.Feed(in.substr(0, split), &out).ok()) {
    (void)chunked.Feed(in.substr(split), &out);
  }
  if (out.size() > size) std::abort();
  return 0;
}
