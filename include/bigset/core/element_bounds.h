// ElementBounds: a range of elements of one set, by their bytes.
//
// The one bounds type of reads, range queries and the read messages between
// replicas. A value type.

#ifndef BIGSET_CORE_ELEMENT_BOUNDS_H_
#define BIGSET_CORE_ELEMENT_BOUNDS_H_

#include <optional>
#include <string>
#include <string_view>

namespace bigset {

// The elements e with start <(=) e <(=) end, compared as byte strings. An
// absent bound is unbounded.
struct ElementBounds {
  std::optional<std::string> start;
  std::optional<std::string> end;
  bool start_inclusive = true;
  bool end_inclusive = false;

  // True if `element` lies past the end bound.
  bool PastEnd(std::string_view element) const {
    if (!end.has_value()) return false;
    const int c = element.compare(*end);
    return c > 0 || (c == 0 && !end_inclusive);
  }
  // True if `element` lies before the start bound.
  bool BeforeStart(std::string_view element) const {
    if (!start.has_value()) return false;
    const int c = element.compare(*start);
    return c < 0 || (c == 0 && !start_inclusive);
  }
  bool Contains(std::string_view element) const {
    return !BeforeStart(element) && !PastEnd(element);
  }

  friend bool operator==(const ElementBounds&, const ElementBounds&) = default;
};

}  // namespace bigset

#endif  // BIGSET_CORE_ELEMENT_BOUNDS_H_
