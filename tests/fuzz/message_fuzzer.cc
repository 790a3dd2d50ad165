// libFuzzer target: Message::Decode on arbitrary bytes. A decoded message
// must re-encode to bytes that decode again.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "net/message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto m = bigset::Message::Decode(in);
  if (!m.ok()) return 0;
  auto again = bigset::Message::Decode(m->Encode());
  if (!again.ok() || again->type() != m->type() ||
      again->header.request_id != m->header.request_id) {
    std::abort();
  }
  return 0;
}
