// libFuzzer target: DecodeMessage on arbitrary bytes. A decoded message
// must re-encode to bytes that decode again to the same message.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "net/message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto m = bigset::DecodeMessage(in);
  if (!m.ok()) return 0;
  auto again = bigset::DecodeMessage(bigset::EncodeMessage(*m));
  if (!again.ok() || again->type() != m->type() ||
      again->header.request_id != m->header.request_id ||
      again->header.partition != m->header.partition ||
      !(again->body == m->body)) {
    std::abort();
  }
  return 0;
}
