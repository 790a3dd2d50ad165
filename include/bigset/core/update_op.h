// UpdateOp: one operation of an update to a set (an add or a remove of one
// element, with the context the client observed).
//
// Thread-safety: a value type.

#ifndef BIGSET_CORE_UPDATE_OP_H_
#define BIGSET_CORE_UPDATE_OP_H_

#include <string>
#include <utility>
#include <vector>

#include "bigset/core/dot.h"

namespace bigset {

// One operation of an update.
struct UpdateOp {
  enum class Kind { kAdd, kRemove };

  Kind kind = Kind::kAdd;
  std::string element;
  // The dots observed for `element`: removed by a remove, replaced by an add.
  // REQUIRES: each is a dot some replica returned for this same element (a
  // dot names one add of one element; an invented dot could later name
  // another element's add, which would then be lost).
  std::vector<Dot> context;
  // Add the element's dots currently on this replica to `context` (read
  // under the set's lock, so nothing slips in between): for single-node
  // use with an empty `context`, or with a read quorum's dots so that the
  // coordinator's own stale dots are replaced too.
  bool context_from_replica = false;

  static UpdateOp Add(std::string element, std::vector<Dot> context = {}) {
    return UpdateOp{Kind::kAdd, std::move(element), std::move(context), false};
  }
  static UpdateOp Remove(std::string element, std::vector<Dot> context) {
    return UpdateOp{Kind::kRemove, std::move(element), std::move(context),
                    false};
  }

  friend bool operator==(const UpdateOp&, const UpdateOp&) = default;
};

}  // namespace bigset

#endif  // BIGSET_CORE_UPDATE_OP_H_
