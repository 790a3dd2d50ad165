// ReadHandlers the server's commands use to consume streaming reads:
// collect a set's elements (with or without their dots) up to a bound, or
// only its clock. Each deletes itself after calling `done` from OnDone.
//
// Thread-safety: driven by the node's thread (ReadHandler's contract);
// `done` runs there, so callers wrap it to run on their own thread.

#ifndef BIGSET_TOOLS_BIGSETD_READ_HANDLERS_H_
#define BIGSET_TOOLS_BIGSETD_READ_HANDLERS_H_

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bigset/cluster/node.h"

namespace bigset::server {

// Collects a merged read's elements, and their dots if `keep_dots`, up to
// `max` of them (ResourceExhausted past it).
class CollectingHandler final : public ReadHandler {
 public:
  using Done = std::function<void(absl::StatusOr<std::vector<ElementDots>>)>;
  CollectingHandler(size_t max, bool keep_dots, Done done)
      : max_(max), keep_dots_(keep_dots), done_(std::move(done)) {}
  void OnClock(const Clock&) override {}
  void OnChunk(std::vector<ElementDots>* elements,
               std::function<void()> next) override {
    for (ElementDots& e : *elements) {
      if (elements_.size() >= max_) {
        too_many_ = true;
        break;
      }
      if (!keep_dots_) std::vector<Dot>().swap(e.dots);
      elements_.push_back(std::move(e));
    }
    next();
  }
  void OnDone(absl::Status status) override {
    Done done = std::move(done_);
    if (!status.ok()) {
      done(status);
    } else if (too_many_) {
      done(absl::ResourceExhaustedError("too many"));
    } else {
      done(std::move(elements_));
    }
    delete this;
  }

 private:
  const size_t max_;
  const bool keep_dots_;
  Done done_;
  bool too_many_ = false;
  std::vector<ElementDots> elements_;
};

// Reads only a set's clock (give it bounds that hold nothing: Nothing()).
class ClockHandler final : public ReadHandler {
 public:
  using Done = std::function<void(absl::StatusOr<Clock>)>;
  explicit ClockHandler(Done done) : done_(std::move(done)) {}
  void OnClock(const Clock& clock) override { clock_ = clock; }
  void OnChunk(std::vector<ElementDots>*, std::function<void()> next) override {
    next();
  }
  void OnDone(absl::Status status) override {
    Done done = std::move(done_);
    if (status.ok()) {
      done(std::move(clock_));
    } else {
      done(status);
    }
    delete this;
  }

 private:
  Done done_;
  Clock clock_;
};

// Bounds that hold no element: a read of the clock alone.
inline ElementBounds Nothing() {
  ElementBounds b;
  b.start = "";
  b.end = "";
  b.end_inclusive = false;
  return b;
}

}  // namespace bigset::server

#endif  // BIGSET_TOOLS_BIGSETD_READ_HANDLERS_H_
