#include "set_merge.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"

namespace bigset::server {
namespace {

// Elements of the first page after a seek.
constexpr size_t kSeekPage = 16;
// Range reads in flight at once (a merge of thousands of sets asks the
// cluster for a page of each, a few at a time).
constexpr size_t kMaxFetches = 32;

}  // namespace

std::shared_ptr<SetMerge> SetMerge::Start(SetOp op,
                                          std::vector<std::string> sets,
                                          const Options& options, Fetch fetch,
                                          OnChunk on_chunk, OnDone on_done) {
  auto merge =
      std::make_shared<SetMerge>(op, std::move(sets), options, std::move(fetch),
                                 std::move(on_chunk), std::move(on_done));
  merge->Pump();
  return merge;
}

SetMerge::SetMerge(SetOp op, std::vector<std::string> sets,
                   const Options& options, Fetch fetch, OnChunk on_chunk,
                   OnDone on_done)
    : op_(op),
      options_{std::max<size_t>(options.page, 1),
               std::max<size_t>(options.chunk, 1)},
      fetch_(std::move(fetch)),
      on_chunk_(std::move(on_chunk)),
      on_done_(std::move(on_done)) {
  // A set named twice changes nothing (except the first set of a
  // difference named again: it stays, and empties the result): read once.
  std::vector<std::string> distinct;
  absl::flat_hash_set<std::string> seen;
  for (size_t i = 0; i < sets.size(); ++i) {
    if (op == SetOp::kDifference && i == 0) {
      distinct.push_back(sets[i]);
    } else if (seen.insert(sets[i]).second) {
      distinct.push_back(std::move(sets[i]));
    }
  }
  sources_.resize(distinct.size());
  for (size_t i = 0; i < distinct.size(); ++i) {
    sources_[i].set = std::move(distinct[i]);
    sources_[i].next.limit = options_.page;
  }
}

void SetMerge::Resume() {
  if (!waiting_consumer_) return;
  waiting_consumer_ = false;
  Pump();
}

void SetMerge::Stop() {
  stopped_ = true;
  on_chunk_ = nullptr;
  on_done_ = nullptr;
  fetch_ = nullptr;
  sources_.clear();
  out_.clear();
}

void SetMerge::Advance(Source& s) {
  ++s.pos;
  if (s.pos == s.buf.size()) {
    s.buf.clear();
    s.pos = 0;
  }
}

void SetMerge::SkipTo(Source& s, const std::string& target) {
  while (s.has_head() && s.head() < target) ++s.pos;
  if (!s.has_head()) {
    s.buf.clear();
    s.pos = 0;
    if (!s.exhausted) {
      // A seek: the next page starts at `target`, wherever the last one
      // ended.
      // A seek reads a short page first (a seek of an intersection often
      // needs one element); pages grow again while the reads continue.
      RangeQuery q;
      q.start = target;
      q.start_inclusive = true;
      q.limit = std::min<size_t>(kSeekPage, options_.page);
      s.next = std::move(q);
    }
  }
}

void SetMerge::FetchPage(size_t i) {
  if (in_flight_ >= kMaxFetches) return;  // Asked again when one returns.
  Source& s = sources_[i];
  s.fetching = true;
  ++in_flight_;
  ++fetches_;
  // The read keeps the merge alive until it comes back.
  std::shared_ptr<SetMerge> keep = shared_from_this();
  fetch_(s.set, s.next, [keep, i](absl::StatusOr<RangeResult> r) {
    SetMerge* self = keep.get();
    --self->in_flight_;
    if (self->stopped_) return;
    Source& s = self->sources_[i];
    s.fetching = false;
    if (!r.ok()) {
      self->Finish(r.status());
      return;
    }
    s.buf.clear();
    s.buf.reserve(r->elements.size());
    for (ElementDots& e : r->elements) s.buf.push_back(std::move(e.element));
    s.pos = 0;
    if (r->continuation.empty()) {
      s.exhausted = true;
    } else {
      s.next.continuation = std::move(r->continuation);
      s.next.limit = std::min(s.next.limit * 2, self->options_.page);
    }
    self->Pump();
  });
}

void SetMerge::Finish(absl::Status status) {
  OnDone done = std::move(on_done_);
  Stop();
  if (done) done(std::move(status));
}

void SetMerge::Pump() {
  if (pumping_) {
    repump_ = true;  // A page came, or Resume, inside the loop.
    return;
  }
  pumping_ = true;
  // The merge may be stopped (and its callbacks dropped) from inside a
  // callback; keep it alive until the loop is left.
  std::shared_ptr<SetMerge> keep = shared_from_this();
  do {
    repump_ = false;
    Step();
  } while (repump_ && !stopped_ && !waiting_consumer_);
  pumping_ = false;
}

void SetMerge::Step() {
  while (!stopped_ && !waiting_consumer_) {
    if (!result_complete_) {
      // Every source the next step looks at must have a head or be
      // exhausted; ask for the pages missing and wait for them.
      bool missing = false;
      auto ready = [&](size_t i) {
        Source& s = sources_[i];
        if (s.has_head() || s.exhausted) return true;
        if (!s.fetching) FetchPage(i);
        missing = true;
        return false;
      };
      if (op_ == SetOp::kUnion) {
        for (size_t i = 0; i < sources_.size(); ++i) ready(i);
        if (stopped_) break;  // A fetch failed at once.
        if (missing) break;
        const std::string* min = nullptr;
        for (Source& s : sources_) {
          if (s.has_head() && (min == nullptr || s.head() < *min)) {
            min = &s.head();
          }
        }
        if (min == nullptr) {
          result_complete_ = true;
          continue;
        }
        std::string m = *min;
        for (Source& s : sources_) {
          if (s.has_head() && s.head() == m) Advance(s);
        }
        out_.push_back(std::move(m));
      } else if (op_ == SetOp::kIntersection) {
        bool any_gone = false;
        for (Source& s : sources_) any_gone |= s.empty_for_good();
        if (any_gone) {
          result_complete_ = true;
          continue;
        }
        for (size_t i = 0; i < sources_.size(); ++i) ready(i);
        if (stopped_ || missing) break;
        const std::string* max = &sources_[0].head();
        for (Source& s : sources_) {
          if (s.head() > *max) max = &s.head();
        }
        std::string target = *max;
        bool all_equal = true;
        for (Source& s : sources_) all_equal &= s.head() == target;
        if (all_equal) {
          for (Source& s : sources_) Advance(s);
          out_.push_back(std::move(target));
        } else {
          for (Source& s : sources_) SkipTo(s, target);
        }
      } else {  // kDifference
        Source& first = sources_[0];
        if (first.empty_for_good()) {
          result_complete_ = true;
          continue;
        }
        ready(0);
        if (stopped_ || missing) break;
        const std::string h = first.head();
        for (size_t i = 1; i < sources_.size(); ++i) {
          SkipTo(sources_[i], h);
          ready(i);
        }
        if (stopped_ || missing) break;
        bool elsewhere = false;
        for (size_t i = 1; i < sources_.size(); ++i) {
          elsewhere |= sources_[i].has_head() && sources_[i].head() == h;
        }
        Advance(first);
        if (!elsewhere) out_.push_back(h);
      }
      if (out_.size() < options_.chunk) continue;
    } else if (out_.empty()) {
      Finish(absl::OkStatus());
      break;
    }
    // A full chunk, or the last one.
    waiting_consumer_ = true;
    std::vector<std::string> chunk = std::move(out_);
    out_.clear();
    // The consumer may Stop the merge from the callback: the callback
    // must outlive its own call.
    OnChunk on_chunk = std::move(on_chunk_);
    on_chunk(*this, std::move(chunk));
    if (!stopped_) on_chunk_ = std::move(on_chunk);
  }
}

}  // namespace bigset::server
