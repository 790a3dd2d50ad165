// The node states the membership messages carry, also as the node
// metadata stores them.

#include <utility>

#include "net/membership_messages.h"
#include "net/message_archive.h"

namespace bigset {
namespace message_internal {

bool EntriesInOrder(std::span<const ServeEntry> entries) {
  bool live = false;  // The current partition has a live entry.
  for (size_t i = 0; i < entries.size(); ++i) {
    const ServeEntry& e = entries[i];
    if (i > 0) {
      const ServeEntry& prev = entries[i - 1];
      if (e.partition < prev.partition ||
          (e.partition == prev.partition && e.since <= prev.since)) {
        return false;
      }
      if (e.partition != prev.partition) live = false;
    }
    if (!e.departed && std::exchange(live, true)) return false;
  }
  return true;
}

}  // namespace message_internal

void EncodeNodeStates(std::span<const NodeServing> states, std::string* dst) {
  message_internal::BodyWriter w(dst);
  message_internal::NodeStates(w, states);
}

absl::Status DecodeNodeStates(std::string_view in,
                              std::vector<NodeServing>* out) {
  message_internal::BodyReader r(in);
  if (!message_internal::NodeStates(r, *out) || !r.empty()) {
    return absl::DataLossError("undecodable node states");
  }
  return absl::OkStatus();
}

}  // namespace bigset
