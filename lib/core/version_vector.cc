#include "bigset/core/version_vector.h"

#include <string>

#include "absl/strings/str_format.h"

namespace bigset {

std::string DotToString(Dot dot) {
  return absl::StrFormat("%x:%d", dot.actor, dot.counter);
}

void VersionVector::Set(ActorId actor, uint64_t counter) {
  auto it = LowerBound(actor);
  if (it != entries_.end() && it->actor == actor) {
    if (counter == 0) {
      entries_.erase(it);
    } else {
      it->counter = counter;
    }
  } else if (counter != 0) {
    entries_.insert(it, Entry{actor, counter});
  }
}

void VersionVector::Merge(const VersionVector& other) {
  if (other.entries_.empty()) return;
  // Fast path: same actor set (the common case between replicas of a set)
  // merges in place without allocating.
  if (entries_.size() == other.entries_.size()) {
    bool same = true;
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].actor != other.entries_[i].actor) {
        same = false;
        break;
      }
    }
    if (same) {
      for (size_t i = 0; i < entries_.size(); ++i) {
        entries_[i].counter =
            std::max(entries_[i].counter, other.entries_[i].counter);
      }
      return;
    }
  }
  std::vector<Entry> out;
  out.reserve(entries_.size() + other.entries_.size());
  auto a = entries_.begin();
  auto b = other.entries_.begin();
  while (a != entries_.end() || b != other.entries_.end()) {
    if (b == other.entries_.end() ||
        (a != entries_.end() && a->actor < b->actor)) {
      out.push_back(*a++);
    } else if (a == entries_.end() || b->actor < a->actor) {
      out.push_back(*b++);
    } else {
      out.push_back(Entry{a->actor, std::max(a->counter, b->counter)});
      ++a;
      ++b;
    }
  }
  entries_ = std::move(out);
}

bool VersionVector::Descends(const VersionVector& other) const {
  auto a = entries_.begin();
  for (const Entry& e : other.entries_) {
    while (a != entries_.end() && a->actor < e.actor) ++a;
    if (a == entries_.end() || a->actor != e.actor || a->counter < e.counter) {
      return false;
    }
  }
  return true;
}

std::string VersionVector::DebugString() const {
  std::string out = "{";
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (i > 0) out += ", ";
    absl::StrAppendFormat(&out, "%x:%d", entries_[i].actor,
                          entries_[i].counter);
  }
  out += "}";
  return out;
}

}  // namespace bigset
