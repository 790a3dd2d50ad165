#include "bigset/network/address_book.h"

#include <charconv>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/string_view_compat.h"

namespace bigset {

absl::StatusOr<PeerAddress> ParsePeerAddress(std::string_view text) {
  const absl::Status bad = absl::InvalidArgumentError(
      absl::StrCat("not host:port: '", ToAbsl(text), "'"));
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return bad;
  std::string_view host = text.substr(0, colon);
  const std::string_view port = text.substr(colon + 1);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return bad;
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return bad;  // An IPv6 host needs brackets.
  }
  unsigned value = 0;
  auto [end, ec] =
      std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || end != port.data() + port.size() || value == 0 ||
      value > 65535) {
    return bad;
  }
  return PeerAddress{std::string(host), static_cast<uint16_t>(value)};
}

void AddressBook::Set(NodeId node, PeerAddress address) {
  MutexLock lock(&mu_);
  addresses_[node] = std::move(address);
}

void AddressBook::Remove(NodeId node) {
  MutexLock lock(&mu_);
  addresses_.erase(node);
}

std::optional<PeerAddress> AddressBook::Lookup(NodeId node) const {
  MutexLock lock(&mu_);
  auto it = addresses_.find(node);
  if (it == addresses_.end()) return std::nullopt;
  return it->second;
}

std::map<NodeId, PeerAddress> AddressBook::All() const {
  MutexLock lock(&mu_);
  return addresses_;
}

}  // namespace bigset
