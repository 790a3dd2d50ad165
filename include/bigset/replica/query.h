// Query types: membership and range queries over one set.

#ifndef BIGSET_REPLICA_QUERY_H_
#define BIGSET_REPLICA_QUERY_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "bigset/core/element_bounds.h"
#include "bigset/core/element_dots.h"

namespace bigset {

// The result of a subset query: each requested element with its dots (empty
// if absent), in request order.
struct Membership {
  bool all_present = false;
  std::vector<ElementDots> elements;
};

// A page of a range query: the elements within the bounds (see
// ElementBounds), ascending, at most `limit` of them.
struct RangeQuery : ElementBounds {
  // Maximum elements returned; 0 means no limit.
  size_t limit = 1000;
  // Resume after the previous page: the `continuation` of its result.
  std::string continuation;
};

struct RangeResult {
  std::vector<ElementDots> elements;
  // Non-empty iff more elements may follow: pass it in the next query (with
  // the same bounds) to get the next page. Opaque bytes.
  std::string continuation;
};

}  // namespace bigset

#endif  // BIGSET_REPLICA_QUERY_H_
