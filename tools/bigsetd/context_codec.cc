#include "context_codec.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace bigset::server {
namespace {
constexpr size_t kMaxDots = 1024;
}  // namespace

std::string EncodeContext(const std::vector<Dot>& dots) {
  std::string out;
  for (const Dot& d : dots) {
    if (!out.empty()) out.push_back(',');
    absl::StrAppendFormat(&out, "%016x.%d", d.actor, d.counter);
  }
  return out;
}

absl::StatusOr<std::vector<Dot>> DecodeContext(std::string_view text) {
  std::vector<Dot> dots;
  if (text.empty()) return dots;
  for (absl::string_view part :
       absl::StrSplit(absl::string_view(text.data(), text.size()), ',')) {
    if (dots.size() >= kMaxDots) {
      return absl::InvalidArgumentError("too many dots");
    }
    std::pair<absl::string_view, absl::string_view> ac =
        absl::StrSplit(part, absl::MaxSplits('.', 1));
    Dot d;
    if (ac.first.size() != 16 ||
        !std::all_of(ac.first.begin(), ac.first.end(),
                     [](char c) { return absl::ascii_isxdigit(c); }) ||
        !absl::SimpleHexAtoi(ac.first, &d.actor) ||
        !std::all_of(ac.second.begin(), ac.second.end(),
                     [](char c) { return absl::ascii_isdigit(c); }) ||
        !absl::SimpleAtoi(ac.second, &d.counter) || d.counter == 0) {
      return absl::InvalidArgumentError("expected ACTOR.COUNTER,...");
    }
    dots.push_back(d);
  }
  std::sort(dots.begin(), dots.end());
  dots.erase(std::unique(dots.begin(), dots.end()), dots.end());
  return dots;
}

}  // namespace bigset::server
