// ReadSink: where a read coordinator sends what it merged, and the sinks of
// the node's read-side client API (a ReadHandler's stream, a range page, a
// count). Internal header.
//
// Thread-safety: runs on the node's thread.

#ifndef BIGSET_LIB_CLUSTER_READ_SINK_H_
#define BIGSET_LIB_CLUSTER_READ_SINK_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bigset/cluster/node.h"
#include "bigset/core/clock.h"
#include "bigset/core/element_dots.h"
#include "bigset/replica/query.h"

namespace bigset {

class ReadSink {
 public:
  virtual ~ReadSink() = default;
  virtual void OnClock(const Clock& clock) = 0;
  // Returns true to continue at once; false to wait for `next`.
  // `*elements` may be consumed until `next` is called (or, if this
  // returns true, until it returns).
  virtual bool OnChunk(std::vector<ElementDots>* elements,
                       std::function<void()> next) = 0;
  virtual void OnDone(absl::Status status) = 0;
};

// Forwards to a client's ReadHandler (Node::Read).
std::unique_ptr<ReadSink> NewHandlerSink(ReadHandler* handler);
// Collects one page of a range query (Node::Range): at most `limit`
// elements, and a continuation token when the page is full.
std::unique_ptr<ReadSink> NewRangeSink(
    size_t limit, std::function<void(absl::StatusOr<RangeResult>)> done);
// Counts the elements (Node::Count).
std::unique_ptr<ReadSink> NewCountSink(
    std::function<void(absl::StatusOr<uint64_t>)> done);

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_READ_SINK_H_
