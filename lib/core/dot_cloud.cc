#include "bigset/core/dot_cloud.h"

#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_format.h"

namespace bigset {

IntervalSet& DotCloud::Mutable(ActorId actor) {
  auto it = LowerBound(actor);
  if (it == entries_.end() || it->actor != actor) {
    it = entries_.insert(it, Entry{actor, IntervalSet()});
  }
  return it->counters;
}

void DotCloud::InsertRange(ActorId actor, uint64_t lo, uint64_t hi) {
  Mutable(actor).InsertRange(lo, hi);
}

void DotCloud::EraseActor(ActorId actor) {
  auto it = LowerBound(actor);
  if (it != entries_.end() && it->actor == actor) entries_.erase(it);
}

uint64_t DotCloud::DotCount() const {
  uint64_t n = 0;
  for (const Entry& e : entries_) {
    const uint64_t c = e.counters.Count();
    if (UINT64_MAX - n < c) return UINT64_MAX;
    n += c;
  }
  return n;
}

std::string DotCloud::DebugString() const {
  std::string out = "{";
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (i > 0) out += ", ";
    absl::StrAppendFormat(&out, "%x:%s", entries_[i].actor,
                          entries_[i].counters.DebugString());
  }
  out += "}";
  return out;
}

}  // namespace bigset
