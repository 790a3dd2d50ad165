#include "cluster/place_quorum.h"

#include "absl/strings/str_cat.h"
#include "core/string_view_compat.h"

namespace bigset {

QuorumPick PickQuorum(const std::vector<uint32_t>& places,
                      const std::vector<QuorumReply>& replies,
                      std::span<const size_t> order, size_t r) {
  const size_t n = places.size();
  // Per place (named by a list index): nodes, answers, and what they said.
  std::vector<uint32_t> nodes(n, 0), answered(n, 0);
  std::vector<bool> failed(n, false), found(n, false);
  bool everyone = true;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t p = places[i];
    if (replies[i] == QuorumReply::kGone) continue;  // Not of its place.
    ++nodes[p];
    if (replies[i] == QuorumReply::kNone) everyone = false;
    if (replies[i] == QuorumReply::kFailed) failed[p] = true;
  }
  QuorumPick pick;
  for (size_t p = 0; p < n; ++p) {
    if (nodes[p] > 0 && !failed[p]) ++pick.live_places;
  }
  // Places in the order their last node answered.
  std::vector<uint32_t> full, empty;
  for (size_t i : order) {
    if (i >= n) continue;
    const uint32_t p = places[i];
    if (replies[i] == QuorumReply::kFound) found[p] = true;
    if (replies[i] == QuorumReply::kNone || replies[i] == QuorumReply::kGone ||
        failed[p]) {
      continue;
    }
    if (++answered[p] == nodes[p]) (found[p] ? full : empty).push_back(p);
  }
  std::vector<uint32_t> chosen;
  if (full.size() >= r) {
    chosen.assign(full.begin(), full.begin() + static_cast<ptrdiff_t>(r));
  } else if (everyone && full.size() + empty.size() >= r) {
    chosen = full;
    for (uint32_t p : empty) {
      if (chosen.size() < r) chosen.push_back(p);
    }
  } else {
    if (pick.live_places < r) pick.outcome = QuorumPick::Outcome::kUnavailable;
    return pick;
  }
  pick.outcome = QuorumPick::Outcome::kChosen;
  for (uint32_t p : chosen) {
    for (size_t i = 0; i < n; ++i) {
      if (places[i] == p && replies[i] != QuorumReply::kGone) {
        pick.members.push_back(i);
      }
    }
  }
  return pick;
}

QuorumReply ReplyOfError(const absl::Status& status) {
  return absl::IsNotFound(status) ? QuorumReply::kGone : QuorumReply::kFailed;
}

absl::Status ReadErrorForReply(const absl::Status& status) {
  if (!absl::IsNotFound(status)) return status;
  return absl::DataLossError(status.message());
}

absl::Status TooFewPlaces(std::string_view what, std::string_view set,
                          size_t live, int r) {
  return absl::UnavailableError(absl::StrCat(ToAbsl(what), " of set \"",
                                             ToAbsl(set), "\": only ", live,
                                             " places can answer, r = ", r));
}

}  // namespace bigset
