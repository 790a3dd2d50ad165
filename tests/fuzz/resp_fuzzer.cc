// libFuzzer target: bigsetd's RESP request parser on arbitrary bytes, fed
// whole and split in two at a point the input chooses: both must give the
// same commands and the same error, and every command stays within the
// limits.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "resp_parser.h"

namespace {

struct Result {
  std::vector<std::vector<std::string>> commands;
  std::string error;
};

Result Run(std::string_view in, size_t split) {
  bigset::server::RespLimits limits;
  limits.max_bulk_bytes = 256;
  limits.max_args = 16;
  limits.max_inline_bytes = 128;
  bigset::server::RespParser p(limits);
  Result r;
  for (std::string_view piece : {in.substr(0, split), in.substr(split)}) {
    p.Feed(piece);
    while (r.error.empty()) {
      std::vector<std::string> args;
      auto got = p.Next(&args);
      if (!got.ok()) {
        r.error = std::string(got.status().message());
        break;
      }
      if (!*got) break;
      if (args.empty() || args.size() > limits.max_args) std::abort();
      for (const std::string& a : args) {
        if (a.size() > limits.max_bulk_bytes &&
            a.size() > limits.max_inline_bytes) {
          std::abort();
        }
      }
      r.commands.push_back(std::move(args));
    }
    if (!r.error.empty()) break;
  }
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t split = data[0] % size;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  const Result whole = Run(in, in.size());
  const Result parts = Run(in, std::min(split, in.size()));
  // The parser is incremental: where the bytes are split changes nothing.
  if (whole.error != parts.error || whole.commands != parts.commands) {
    std::abort();
  }
  return 0;
}
