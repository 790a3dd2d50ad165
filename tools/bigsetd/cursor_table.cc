#include "cursor_table.h"

#include <utility>

namespace bigset::server {
namespace {
constexpr size_t kEntryOverhead = 64;
}  // namespace

CursorTable::CursorTable(size_t max_entries, size_t max_bytes, uint64_t seed)
    : max_entries_(max_entries < 1 ? 1 : max_entries),
      max_bytes_(max_bytes),
      rng_(seed) {}

uint64_t CursorTable::Put(std::string set, std::string after) {
  uint64_t id = 0;
  do {
    id = rng_() >> 1;  // Below 2^63.
  } while (id == 0 || entries_.contains(id));
  bytes_ += set.size() + after.size() + kEntryOverhead;
  entries_.emplace(id, Position{std::move(set), std::move(after)});
  order_.push_back(id);
  Evict();
  return id;
}

void CursorTable::Evict() {
  while (!order_.empty() &&
         (entries_.size() > max_entries_ || bytes_ > max_bytes_) &&
         order_.size() > 1) {
    auto it = entries_.find(order_.front());
    order_.pop_front();
    if (it == entries_.end()) continue;
    bytes_ -= it->second.set.size() + it->second.after.size() + kEntryOverhead;
    entries_.erase(it);
  }
}

std::optional<std::string> CursorTable::Find(uint64_t cursor,
                                             std::string_view set) const {
  auto it = entries_.find(cursor);
  if (it == entries_.end() || it->second.set != set) return std::nullopt;
  return it->second.after;
}

}  // namespace bigset::server
