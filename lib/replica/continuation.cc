#include "replica/continuation.h"

namespace bigset {
namespace {
constexpr char kContinuationVersion = 0x01;
}  // namespace

std::string EncodeContinuation(std::string_view last_element) {
  std::string token;
  token.reserve(1 + last_element.size());
  token.push_back(kContinuationVersion);
  token.append(last_element);
  return token;
}

absl::StatusOr<std::string> DecodeContinuation(std::string_view token) {
  if (token.empty() || token[0] != kContinuationVersion) {
    return absl::InvalidArgumentError("unrecognised continuation token");
  }
  return std::string(token.substr(1));
}

}  // namespace bigset
