// A range read answered from a std::set, for the bigsetd tests whose
// backends are in memory (set_merge_test, sampler_test). Header-only.

#ifndef BIGSET_TESTS_BIGSETD_RANGE_ANSWER_H_
#define BIGSET_TESTS_BIGSETD_RANGE_ANSWER_H_

#include <set>
#include <string>
#include <utility>

#include "bigset/replica/query.h"

namespace bigset::testing {

// Answers `q` from `set` the way Node::Range does: elements within the
// bounds, after the continuation, at most `limit`; a continuation iff the
// page is full (it may then be followed by nothing).
inline RangeResult AnswerRange(const std::set<std::string>& set,
                               const RangeQuery& q) {
  RangeResult r;
  auto it = set.begin();
  if (!q.continuation.empty()) {
    it = set.upper_bound(q.continuation);
  } else if (q.start.has_value()) {
    it = q.start_inclusive ? set.lower_bound(*q.start)
                           : set.upper_bound(*q.start);
  }
  for (; it != set.end() && !q.PastEnd(*it); ++it) {
    if (q.limit != 0 && r.elements.size() == q.limit) {
      r.continuation = r.elements.back().element;
      break;
    }
    ElementDots e;
    e.element = *it;
    r.elements.push_back(std::move(e));
  }
  return r;
}

}  // namespace bigset::testing

#endif  // BIGSET_TESTS_BIGSETD_RANGE_ANSWER_H_
