// ReadMerger: the streaming merge of R replicas' folds of one set
// (docs/DESIGN.md, "Merge of R replicas").
//
// Each replica's elements arrive in ascending chunks. `least_last` is the
// smallest last buffered element among replicas that are not done; every
// buffered element <= least_last can be merged, because no replica can still
// send anything smaller. An element's dots are joined ORSWOT-style: a dot one
// replica holds survives unless another replica's clock has seen it and that
// replica does not hold it. An element without surviving dots is absent.
//
// Every difference found is a read repair: dots a replica lacks (adds), and
// removes it has not seen (by context): removed dots it still holds, and
// removed dots its clock has never seen (so that the remove is known to
// every replica read, and a key that comes back later from a replica that
// lost the remove stays removed). Repairs are accumulated per replica and
// taken by the caller (never dropped).
//
// Memory: the caller feeds at most one chunk per replica between merges, so
// buffers are O(R * batch_size).
//
// Thread-safety: not thread-safe. Internal header.

#ifndef BIGSET_LIB_CLUSTER_READ_MERGER_H_
#define BIGSET_LIB_CLUSTER_READ_MERGER_H_

#include <cstddef>
#include <vector>

#include "bigset/core/clock.h"
#include "bigset/core/delta.h"
#include "bigset/core/element_dots.h"

namespace bigset {

class ReadMerger {
 public:
  // One clock per replica, as each reported it for this read.
  explicit ReadMerger(std::vector<Clock> clocks);

  size_t replicas() const { return buffers_.size(); }

  // The join of the clocks given at construction: the read's context. It
  // stays that after Replace: the answer holds only dots it has seen.
  Clock MergedClock() const;

  // Gives replica `r` its next chunk. Returns false, and keeps nothing of
  // the chunk, if it does not continue the replica's stream (elements must
  // be strictly ascending, after everything that replica sent and after
  // last_merged(), each with at least one dot: a peer's bytes are not
  // trusted) or if `r`'s buffer still holds elements.
  bool Push(size_t r, std::vector<ElementDots> chunk, bool done);

  // In-place refill, for decoding a chunk straight into the buffer (its
  // strings and vectors keep their capacity). REQUIRES: NeedsMore(r).
  // Overwrite *RefillBuffer(r) (resizing it), then call Refilled, which
  // validates it like Push (on false the buffer is empty and `r` still
  // needs its chunk).
  std::vector<ElementDots>* RefillBuffer(size_t r) {
    return &buffers_[r].elements;
  }
  bool Refilled(size_t r, bool done);

  // True if replica `r` has consumed its buffer and has more to send.
  bool NeedsMore(size_t r) const;
  bool done(size_t r) const { return buffers_[r].done; }

  // True once every replica is done and every buffer is empty.
  bool Finished() const;

  // Merges every element that can be merged, appending surviving elements
  // to *out (at most `limit` of them if limit > 0). Returns the number of
  // elements appended.
  size_t Merge(std::vector<ElementDots>* out, size_t limit = 0);

  // Takes back the ElementDots of an earlier output (clearing *consumed),
  // to be reused: emitting an element swaps strings and vectors between
  // buffers and these spares, so a steady stream allocates nothing.
  void Recycle(std::vector<ElementDots>* consumed);

  // The repair ops found so far for replica `r`; clears them.
  std::vector<DeltaOp> TakeRepairs(size_t r);

  // The largest element merged so far (emitted or found absent); nullptr
  // before the first. A read that resumes a replica's fold starts after it.
  const std::string* last_merged() const {
    return has_merged_ ? &last_merged_ : nullptr;
  }

  // Replaces replica `r` by another one whose fold starts after
  // last_merged(): its buffer is emptied and `clock` is used for every
  // later element. Its pending repairs are dropped (take them first).
  // From then on an element is emitted with only the dots the read's
  // context (MergedClock) has seen: the replacement may hold dots newer
  // than the read, which a remove or clear built from the read's context
  // would not cover (they are still repaired to the other replicas).
  void Replace(size_t r, Clock clock);

 private:
  struct Buffer {
    std::vector<ElementDots> elements;
    size_t head = 0;  // Next element to merge.
    bool done = false;
    std::vector<DeltaOp> repairs;
    // The last element this replica sent, to check the next chunk.
    std::string last;
    bool has_last = false;
    bool empty() const { return head == elements.size(); }
  };

  // Joins the element `min`, the smallest front of the buffers, whose
  // holders Merge has put in entry_.
  void JoinOne(const std::string& min, std::vector<ElementDots>* out);
  // Appends `from`'s element and dots to *out (swapping them with a spare).
  void Emit(ElementDots* from, std::vector<ElementDots>* out);

  // Drops the dots of `e` that the context has not seen (only once a
  // replica was replaced). Returns whether any dot is left.
  bool WithinContext(ElementDots* e) const;

  std::vector<Clock> clocks_;
  Clock context_;          // The join of the first clocks, once replaced_.
  bool replaced_ = false;  // Whether Replace was called.
  std::vector<Buffer> buffers_;
  // Scratch, reused across elements.
  std::vector<ElementDots*> entry_;
  std::vector<Dot> survivors_;
  std::vector<Dot> removed_;
  std::vector<ElementDots> spares_;
  std::string last_merged_;
  bool has_merged_ = false;
};

// `ops` (repairs the merger found for one replica) as the bytes of one
// kRepair delta of `set`.
std::string EncodeRepair(uint32_t partition, const std::string& set,
                         std::vector<DeltaOp> ops);

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_READ_MERGER_H_
