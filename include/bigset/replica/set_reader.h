// SetReader: a streaming read of one set on one replica.
//
// A reader holds one consistent snapshot for its whole life: first the
// replica's set-clock, then the set's elements in ascending byte order, in
// chunks of at most `batch_size` elements, with keys covered by the
// set-tombstone filtered out. The next chunk is produced only when the
// consumer calls Next (back-pressure), so memory is O(batch_size) whatever
// the set's size.
//
// Thread-safety: not safe for concurrent use. REQUIRES: destroyed before the
// Replica (and Store) that created it.

#ifndef BIGSET_REPLICA_SET_READER_H_
#define BIGSET_REPLICA_SET_READER_H_

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "bigset/core/clock.h"
#include "bigset/core/element_bounds.h"
#include "bigset/core/element_dots.h"
#include "bigset/export.h"

namespace bigset {

struct SetReadOptions {
  // Elements per chunk. REQUIRES: >= 1.
  size_t batch_size = 1000;
  // Bytes per chunk, counting each element's bytes plus 16 per dot: a chunk
  // ends early when it reaches this size (an element with thousands of dots
  // counts by its size). A chunk holds at least one element.
  // REQUIRES: >= 1.
  size_t max_chunk_bytes = 1 << 20;
  // Whether the scan populates the block cache. Off by default so that a
  // full read does not evict the working set of inserts and queries.
  bool fill_cache = false;
  // Read only the elements within these bounds.
  ElementBounds bounds;
};

class BIGSET_EXPORT SetReader {
 public:
  virtual ~SetReader();

  // The replica's set-clock at the snapshot: every event it has seen,
  // including removed ones.
  virtual const Clock& clock() const = 0;

  // Replaces *chunk with the next up to batch_size elements. Returns false,
  // with *chunk empty, once the set is exhausted. DataLoss on corruption.
  virtual absl::StatusOr<bool> Next(std::vector<ElementDots>* chunk) = 0;

  // True if the set is known to be exhausted: the next Next would return
  // false. (False does not promise more elements: the rest may all be
  // removed.)
  virtual bool AtEnd() const = 0;
};

}  // namespace bigset

#endif  // BIGSET_REPLICA_SET_READER_H_
