// SortDots: dots in ascending order (Dot's order: actor, then counter),
// sorted by radix when there are many of them. Internal header.
//
// A transfer chunk carries tens of thousands of dots in element order, so
// their counters arrive at random, but they come from few actors and span a
// narrow range of counters: a stable counting sort over only the counter
// bytes that differ between them, then over the actor's rank among the
// few actors present, is a handful of linear passes where a comparison sort
// takes n log n compares.

#ifndef BIGSET_LIB_CORE_DOT_SORT_H_
#define BIGSET_LIB_CORE_DOT_SORT_H_

#include <vector>

#include "bigset/core/dot.h"

namespace bigset {

// Sorts *dots ascending; equal dots stay (repeats are kept). Thread-
// compatible; allocates a buffer the size of *dots for large inputs.
void SortDots(std::vector<Dot>* dots);

}  // namespace bigset

#endif  // BIGSET_LIB_CORE_DOT_SORT_H_
