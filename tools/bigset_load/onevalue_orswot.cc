#include "onevalue_orswot.h"

#include <algorithm>

#include "core/coding.h"

namespace bigset::bench {

absl::Status OneValueOrswot::Add(ActorId actor, std::string_view element) {
  absl::StatusOr<Dot> dot = clock.Increment(actor);
  if (!dot.ok()) return dot.status();
  auto it = std::lower_bound(
      entries.begin(), entries.end(), element,
      [](const auto& e, std::string_view x) { return e.first < x; });
  if (it != entries.end() && it->first == element) {
    it->second.push_back(*dot);
  } else {
    entries.insert(it, {std::string(element), {*dot}});
  }
  return absl::OkStatus();
}

std::string OneValueOrswot::Encode() const {
  std::string out;
  std::string c = clock.Encode();
  coding::PutVarint64(&out, c.size());
  out += c;
  coding::PutVarint64(&out, entries.size());
  for (const auto& [element, dots] : entries) {
    coding::PutVarint64(&out, element.size());
    out += element;
    coding::PutVarint64(&out, dots.size());
    for (Dot d : dots) {
      coding::PutFixed64BE(&out, d.actor);
      coding::PutVarint64(&out, d.counter);
    }
  }
  return out;
}

absl::StatusOr<OneValueOrswot> OneValueOrswot::Decode(std::string_view in) {
  coding::Reader r(in);
  OneValueOrswot o;
  uint64_t len = 0, n = 0;
  std::string_view bytes;
  if (!r.GetVarint64(&len) || !r.GetBytes(len, &bytes)) {
    return absl::DataLossError("onevalue: clock");
  }
  absl::StatusOr<Clock> clock = Clock::Decode(bytes);
  if (!clock.ok()) return clock.status();
  o.clock = std::move(*clock);
  if (!r.GetVarint64(&n) || n > r.remaining()) {
    return absl::DataLossError("onevalue: count");
  }
  o.entries.resize(n);
  for (auto& [element, dots] : o.entries) {
    uint64_t ndots = 0;
    if (!r.GetVarint64(&len) || !r.GetBytes(len, &bytes) ||
        !r.GetVarint64(&ndots) || ndots > r.remaining()) {
      return absl::DataLossError("onevalue: entry");
    }
    element.assign(bytes);
    dots.resize(ndots);
    for (Dot& d : dots) {
      if (!r.GetFixed64BE(&d.actor) || !r.GetVarint64(&d.counter)) {
        return absl::DataLossError("onevalue: dot");
      }
    }
  }
  return o;
}

}  // namespace bigset::bench
