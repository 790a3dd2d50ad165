// SetMerge: set algebra (union, intersection, difference) over sets of any
// size, as a streaming k-way merge of their elements in ascending order.
//
// Each source set is read page by page (a quorum range read per page, of at
// most `page` elements), so memory is bounded by one page per source and
// one chunk of output, whatever the sets' sizes. The result comes out
// ascending, in chunks; the consumer asks for the next chunk when it is done
// with one (a *STORE writes each before the next is made), or stops.
//
// An intersection or a difference seeks: a source behind the others skips
// to the largest element the others are at (a new range read starting
// there, of 16 elements; pages double from there while the reads go on),
// so the intersection of a small set with a huge one reads about a short
// page of the huge one per element of the small one, not all of it. An
// intersection ends as soon as one source is exhausted.
//
// What it sees: each page is its own read, as SSCAN's pages are; a set
// written while it is merged may show some of the writes and not others,
// but every element present throughout the merge is seen, and none absent
// throughout is.
//
// Thread-safety: not thread-safe; runs on one thread (the server's), which
// is where `fetch` must call its callback, and where the consumer's
// callbacks run. Owned by shared pointers (its pending fetches keep it
// alive).

#ifndef BIGSET_TOOLS_BIGSETD_SET_MERGE_H_
#define BIGSET_TOOLS_BIGSETD_SET_MERGE_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bigset/replica/query.h"

namespace bigset::server {

enum class SetOp {
  kUnion,         // Elements of any source.
  kIntersection,  // Elements of every source.
  kDifference,    // Elements of the first source and of no other.
};

class SetMerge : public std::enable_shared_from_this<SetMerge> {
 public:
  // One page of `set`: the elements `query` names, ascending, and whether
  // more may follow (RangeResult::continuation). Calls `done` once, on the
  // merge's thread.
  using Fetch = std::function<void(
      const std::string& set, RangeQuery query,
      std::function<void(absl::StatusOr<RangeResult>)> done)>;
  // A chunk of the result, ascending, never empty. The consumer then calls
  // `merge.Resume()` (for the next chunk, now or later: keep
  // merge.shared_from_this() to call it later) or `merge.Stop()`.
  using OnChunk =
      std::function<void(SetMerge& merge, std::vector<std::string> chunk)>;
  // The end: OK once every chunk was delivered and resumed, or the first
  // read's error. Not called after Stop.
  using OnDone = std::function<void(absl::Status status)>;

  struct Options {
    size_t page = 1000;   // Elements per range read. >= 1.
    size_t chunk = 1000;  // Elements per chunk. >= 1.
  };

  // REQUIRES: `sets` non-empty.
  static std::shared_ptr<SetMerge> Start(SetOp op,
                                         std::vector<std::string> sets,
                                         const Options& options, Fetch fetch,
                                         OnChunk on_chunk, OnDone on_done);

  // The next chunk (after OnChunk).
  void Resume();
  // No further chunks and no OnDone; reads in flight are dropped when they
  // come back.
  void Stop();

  // Range reads issued so far (seeks and pages).
  size_t fetches() const { return fetches_; }

  // Use Start. Public for make_shared.
  SetMerge(SetOp op, std::vector<std::string> sets, const Options& options,
           Fetch fetch, OnChunk on_chunk, OnDone on_done);

 private:
  struct Source {
    std::string set;
    std::vector<std::string> buf;  // The current page.
    size_t pos = 0;
    bool exhausted = false;  // No page after `buf`.
    bool fetching = false;
    // Where the next page starts: after the last element read, or at a
    // seek target.
    RangeQuery next;
    bool has_head() const { return pos < buf.size(); }
    const std::string& head() const { return buf[pos]; }
    bool empty_for_good() const { return !has_head() && exhausted; }
  };

  // Runs the merge until it needs a page, fills a chunk, or ends.
  void Pump();
  // Pump's loop, once.
  void Step();
  // Moves `s` past every element < `target` (a seek if its page runs out).
  void SkipTo(Source& s, const std::string& target);
  void Advance(Source& s);
  void FetchPage(size_t i);
  void Finish(absl::Status status);

  const SetOp op_;
  const Options options_;
  Fetch fetch_;
  OnChunk on_chunk_;
  OnDone on_done_;
  std::vector<Source> sources_;
  std::vector<std::string> out_;
  bool waiting_consumer_ = false;  // A chunk is out; Resume not yet called.
  bool result_complete_ = false;   // No more elements: flush, then done.
  bool stopped_ = false;
  bool pumping_ = false;
  bool repump_ = false;
  size_t fetches_ = 0;
  size_t in_flight_ = 0;
};

}  // namespace bigset::server

#endif  // BIGSET_TOOLS_BIGSETD_SET_MERGE_H_
