// BulkAdd: the adds of `bigset add SET -` and `bigset load`, in batches.
//
// Each add replaces the element's earlier dots, which needs its current
// dots: a store seek per element (UpdateOp::context_from_replica), unless
// an ElementFilter holding the set's elements says the element certainly
// has none (a hash instead of a seek). Filling the filter is one streaming
// read of the whole set, which pays only when the input is large against
// the set. So the adds start with seeks, and fill the filter once the lines
// read so far have cost, in seeks, what the read costs (the set's size
// estimated from the store, without reading it): then the lines still to
// come are expected to be at least as many again. Neither an add into a
// huge set nor a huge load pays more than about twice the better of the
// two, and an add's cost never grows with the set.
//
// Thread-safety: not thread-safe.

#ifndef BIGSET_TOOLS_BIGSET_BULK_ADD_H_
#define BIGSET_TOOLS_BIGSET_BULK_ADD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bigset/replica/replica.h"
#include "element_filter.h"

namespace bigset::tool {

class BulkAdd {
 public:
  // About the bytes of element keys on disk (Store::ApproximateSize) a
  // streaming read gets through in the time of one seek of an element's
  // dots: measured with BM_BulkAddCost (docs/BENCHMARKS.md), about 1,000
  // for an element the set lacks and 2,000 for one it holds.
  static constexpr uint64_t kScanBytesPerSeek = 1024;

  // Adds to `set` of `replica`, whose element keys take about `set_bytes`
  // on disk. `on_scanned` (may be null) gets the elements the filling read
  // went through, chunk by chunk.
  BulkAdd(Replica& replica, std::string set, uint64_t set_bytes,
          std::function<void(uint64_t)> on_scanned = nullptr);

  // Adds `elements` (moved from) in one atomic update; counts them into
  // *changed. Fills the filter first if the lines so far (these included)
  // make the read cheaper than the seeks still expected.
  absl::Status Add(std::vector<std::string>& elements, uint64_t* changed);

  // Whether the filter is in use (the set was read).
  bool filtering() const { return filter_ != nullptr; }
  // The lines after which the set is read.
  uint64_t switch_after() const { return switch_after_; }

 private:
  absl::Status FillFilter();

  Replica& replica_;
  const std::string set_;
  const uint64_t switch_after_;
  std::function<void(uint64_t)> on_scanned_;
  std::unique_ptr<ElementFilter> filter_;
  uint64_t lines_ = 0;
};

}  // namespace bigset::tool

#endif  // BIGSET_TOOLS_BIGSET_BULK_ADD_H_
