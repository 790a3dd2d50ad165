#include "sampler.h"

#include <algorithm>
#include <utility>

namespace bigset::server {

size_t SkeletonStride(uint64_t count) {
  return static_cast<size_t>(std::max<uint64_t>(64, count / 16384 + 1));
}

void Sampler::Draw(std::shared_ptr<Skeleton> skeleton, size_t k, uint64_t seed,
                   Fetch fetch, Done done) {
  auto sampler = std::make_shared<Sampler>(std::move(skeleton), k, seed,
                                           std::move(fetch), std::move(done));
  sampler->Next();
}

Sampler::Sampler(std::shared_ptr<Skeleton> skeleton, size_t k, uint64_t seed,
                 Fetch fetch, Done done)
    : skeleton_(std::move(skeleton)),
      k_(k),
      rng_(seed),
      fetch_(std::move(fetch)),
      done_(std::move(done)) {}

void Sampler::Next() {
  // A page that comes back at once (tests) does not recurse: the loop
  // below takes the next attempt.
  more_ = true;
  if (running_) return;
  running_ = true;
  std::shared_ptr<Sampler> keep = shared_from_this();
  while (more_ && done_) {
    more_ = false;
    Attempt();
  }
  running_ = false;
}

void Sampler::Attempt() {
  if (drawn_.size() >= k_ || attempts_ >= 8 * k_ + 64 ||
      skeleton_->starts.empty()) {
    Done done = std::move(done_);
    done(std::move(drawn_));
    return;
  }
  ++attempts_;
  const size_t intervals = skeleton_->starts.size();
  const size_t i =
      std::uniform_int_distribution<size_t>(0, intervals - 1)(rng_);
  RangeQuery q;
  if (i > 0) {
    q.start = skeleton_->starts[i];
    q.start_inclusive = true;
  }
  if (i + 1 < intervals) {
    q.end = skeleton_->starts[i + 1];
    q.end_inclusive = false;
  }
  q.limit = 2 * skeleton_->stride;
  std::shared_ptr<Sampler> self = shared_from_this();
  fetch_(std::move(q), [self](absl::StatusOr<RangeResult> page) {
    self->OnPage(std::move(page));
  });
}

void Sampler::OnPage(absl::StatusOr<RangeResult> page) {
  if (!page.ok()) {
    Done done = std::move(done_);
    done(page.status());
    return;
  }
  const size_t cap = 2 * skeleton_->stride;
  if (!page->continuation.empty()) {
    // More than `cap` elements in the interval: the ones past it cannot be
    // drawn until the skeleton is rebuilt.
    skeleton_->stale = true;
  }
  const size_t s = std::min(page->elements.size(), cap);
  // Keep the element with probability s / cap: each element of the set
  // then has the same chance per attempt.
  if (s > 0 && std::uniform_int_distribution<size_t>(0, cap - 1)(rng_) < s) {
    const size_t j = std::uniform_int_distribution<size_t>(0, s - 1)(rng_);
    ElementDots& e = page->elements[j];
    if (seen_.insert(e.element).second) drawn_.push_back(std::move(e));
  }
  Next();
}

}  // namespace bigset::server
