// Sampler: draws members of a large set uniformly at random without reading
// the whole set (SRANDMEMBER, SPOP).
//
// A Skeleton cuts the set into intervals: every `stride`-th element (as
// counted when it was built, by one streaming read) starts one. A draw
// picks an interval uniformly, reads it (one range read of at most
// 2 * stride elements), picks one of its s elements uniformly, and keeps
// it with probability s / (2 * stride) (otherwise it draws again). Every
// element of an interval of at most 2 * stride elements is thus drawn with
// the same probability, 1 / (intervals * 2 * stride) per attempt, however
// the intervals grew or shrank since the skeleton was built: the draw is
// exactly uniform while no interval has more than 2 * stride elements. A
// read that finds an interval fuller than that marks the skeleton stale
// (its elements past the bound are out of reach until it is rebuilt), as
// does a set whose count moved by a quarter since. About two range reads
// per member drawn while the intervals are as built; fewer members than
// asked when the set has fewer (a k-draw without repeats stops after
// 8 * k + 64 attempts).
//
// Thread-safety: not thread-safe; one thread (the server's), where `fetch`
// must call back.

#ifndef BIGSET_TOOLS_BIGSETD_SAMPLER_H_
#define BIGSET_TOOLS_BIGSETD_SAMPLER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "bigset/replica/query.h"

namespace bigset::server {

struct Skeleton {
  // Adds the element at `index` (from 0, ascending) of a read of the set.
  void Add(const std::string& element, uint64_t index) {
    if (index == 0) {
      starts.assign(1, "");
    } else if (index % stride == 0) {
      starts.push_back(element);
    }
  }

  // starts[0] is "" (the set's start); starts[i] the first element of
  // interval i, ascending.
  std::vector<std::string> starts;
  size_t stride = 1;
  uint64_t built_count = 0;  // The set's count when it was built.
  bool stale = false;
  size_t bytes() const {
    size_t b = sizeof(Skeleton);
    for (const std::string& s : starts) b += s.size() + sizeof(std::string);
    return b;
  }
};

// The stride for a set of `count` elements: intervals of at least 64
// elements, at most 16,384 intervals.
size_t SkeletonStride(uint64_t count);

class Sampler : public std::enable_shared_from_this<Sampler> {
 public:
  using Fetch = std::function<void(
      RangeQuery query, std::function<void(absl::StatusOr<RangeResult>)> done)>;
  using Done = std::function<void(absl::StatusOr<std::vector<ElementDots>>)>;

  // Draws `k` distinct members (fewer if the set has fewer), with their
  // dots, from the set `fetch` reads, through `skeleton` (which it may mark
  // stale). Calls `done` once.
  static void Draw(std::shared_ptr<Skeleton> skeleton, size_t k, uint64_t seed,
                   Fetch fetch, Done done);

  // Use Draw. Public for make_shared.
  Sampler(std::shared_ptr<Skeleton> skeleton, size_t k, uint64_t seed,
          Fetch fetch, Done done);

 private:
  void Next();
  // One attempt: a page of a random interval (or the end).
  void Attempt();
  void OnPage(absl::StatusOr<RangeResult> page);

  std::shared_ptr<Skeleton> skeleton_;
  const size_t k_;
  std::mt19937_64 rng_;
  Fetch fetch_;
  Done done_;
  size_t attempts_ = 0;
  bool running_ = false;
  bool more_ = false;
  std::vector<ElementDots> drawn_;
  absl::flat_hash_set<std::string> seen_;
};

}  // namespace bigset::server

#endif  // BIGSET_TOOLS_BIGSETD_SAMPLER_H_
