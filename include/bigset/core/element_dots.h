// ElementDots: one element of a set with its surviving dots.
//
// What reads and queries return for each present element. The dots are the
// element's context: pass them back in an UpdateOp to remove the element or
// to replace it with a new add.

#ifndef BIGSET_CORE_ELEMENT_DOTS_H_
#define BIGSET_CORE_ELEMENT_DOTS_H_

#include <string>
#include <vector>

#include "bigset/core/dot.h"

namespace bigset {

struct ElementDots {
  std::string element;
  // Ascending; never empty for a present element. Two dots of one actor are
  // two entries (a list of dots, not a version vector).
  std::vector<Dot> dots;

  friend bool operator==(const ElementDots&, const ElementDots&) = default;
};

}  // namespace bigset

#endif  // BIGSET_CORE_ELEMENT_DOTS_H_
