#include "context_codec.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bigset/cluster/ring.h"

namespace bigset::server {
namespace {
constexpr size_t kMaxDots = 1024;
}  // namespace

namespace {
uint64_t Check(std::string_view set, std::string_view element,
               std::string_view dots) {
  // Lengths first, so that no two (set, element) pairs hash the same text.
  std::string all = std::to_string(set.size()) + ":" + std::string(set) +
                    std::to_string(element.size()) + ":" + std::string(element);
  all.append(dots);
  return StableHash(all);
}
}  // namespace

std::string EncodeContext(std::string_view set, std::string_view element,
                          const std::vector<Dot>& dots) {
  if (dots.empty()) return "";
  std::string list;
  for (const Dot& d : dots) {
    if (!list.empty()) list.push_back(',');
    absl::StrAppendFormat(&list, "%016x.%d", d.actor, d.counter);
  }
  return absl::StrFormat("%016x:", Check(set, element, list)) + list;
}

absl::StatusOr<std::vector<Dot>> DecodeContext(std::string_view set,
                                               std::string_view element,
                                               std::string_view text) {
  std::vector<Dot> dots;
  if (text.empty()) return dots;
  uint64_t check = 0;
  if (text.size() < 18 || text[16] != ':' ||
      !std::all_of(text.begin(), text.begin() + 16,
                   [](char c) { return absl::ascii_isxdigit(c); }) ||
      !absl::SimpleHexAtoi(absl::string_view(text.data(), 16), &check)) {
    return absl::InvalidArgumentError("not a context of BIGSET.CONTEXT");
  }
  const std::string_view list = text.substr(17);
  if (check != Check(set, element, list)) {
    return absl::InvalidArgumentError(
        "the context is not one BIGSET.CONTEXT returned for this element");
  }
  for (absl::string_view part :
       absl::StrSplit(absl::string_view(list.data(), list.size()), ',')) {
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
