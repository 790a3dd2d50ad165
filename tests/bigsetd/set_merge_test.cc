// SetMerge against std::set_union / intersection / difference: random sets,
// page and chunk sizes, pages answered at once or later in random order,
// failed reads, and consumers that stop.

#include "set_merge.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "range_answer.h"
#include "test_util.h"

namespace bigset::server {
namespace {

using bigset::testing::Rng;
using bigset::testing::Uniform;

// Uniform in [0, n). REQUIRES: n > 0.
uint64_t Pick(Rng& rng, uint64_t n) { return Uniform(rng, 0, n - 1); }

using Sets = std::map<std::string, std::set<std::string>>;

std::vector<std::string> Expected(SetOp op, const Sets& sets,
                                  const std::vector<std::string>& names) {
  auto get = [&](const std::string& n) {
    auto it = sets.find(n);
    return it == sets.end() ? std::set<std::string>() : it->second;
  };
  std::set<std::string> acc = get(names[0]);
  for (size_t i = 1; i < names.size(); ++i) {
    std::set<std::string> other = get(names[i]), next;
    if (op == SetOp::kUnion) {
      std::set_union(acc.begin(), acc.end(), other.begin(), other.end(),
                     std::inserter(next, next.end()));
    } else if (op == SetOp::kIntersection) {
      std::set_intersection(acc.begin(), acc.end(), other.begin(), other.end(),
                            std::inserter(next, next.end()));
    } else {
      std::set_difference(acc.begin(), acc.end(), other.begin(), other.end(),
                          std::inserter(next, next.end()));
    }
    acc = std::move(next);
  }
  return {acc.begin(), acc.end()};
}

struct Harness {
  Sets sets;
  bool deferred = false;  // Pages answered later, in random order.
  Rng* rng = nullptr;
  int fail_after = -1;  // The n-th read fails (-1: none).
  int reads = 0;
  std::deque<std::function<void()>> queued;
  std::vector<std::string> got;
  std::optional<absl::Status> done;
  size_t chunks = 0;
  size_t max_chunk = 0;

  SetMerge::Fetch fetch() {
    return [this](const std::string& set, RangeQuery q,
                  std::function<void(absl::StatusOr<RangeResult>)> cb) {
      const int n = reads++;
      auto answer = [this, set, q, cb, n]() {
        if (n == fail_after) {
          cb(absl::UnavailableError("replica down"));
        } else {
          cb(bigset::testing::AnswerRange(sets[set], q));
        }
      };
      if (deferred) {
        queued.push_back(answer);
      } else {
        answer();
      }
    };
  }
  // Runs queued pages in random order until none is left.
  void Drain() {
    while (!queued.empty()) {
      const size_t i = Pick(*rng, queued.size());
      std::function<void()> f = std::move(queued[i]);
      queued.erase(queued.begin() + static_cast<long>(i));
      f();
    }
  }
};

std::string RandomElement(Rng& rng, int universe) {
  return absl::StrCat("e", Pick(rng, static_cast<uint64_t>(universe)));
}

// Runs `body(h, rng)` once for each of Seeds(seed_count), the seed
// captured: `rng` seeded with it, and `h` a Harness drawing from it whose
// pages are answered at once or later (its first draw).
template <typename Body>
void ForEachSeedHarness(int seed_count, Body body) {
  bigset::testing::ForEachSeed(seed_count, [&](Rng& rng) {
    Harness h;
    h.rng = &rng;
    h.deferred = Pick(rng, 2) == 1;
    body(h, rng);
  });
}

TEST_CASE("set merge: union, intersection and difference as std::set's") {
  ForEachSeedHarness(300, [](Harness& h, Rng& rng) {
    const int universe = 1 + static_cast<int>(Pick(rng, 300));
    const int nsets = 1 + static_cast<int>(Pick(rng, 4));
    std::vector<std::string> names;
    for (int i = 0; i < nsets; ++i) {
      // Sometimes a set named twice, or a missing one.
      std::string name = absl::StrCat("s", Pick(rng, 5));
      names.push_back(name);
      if (h.sets.count(name) || Pick(rng, 6) == 0) continue;
      const int size = static_cast<int>(
          Pick(rng, 3) == 0 ? Pick(rng, 4) : Pick(rng, universe + 1));
      for (int k = 0; k < size; ++k) {
        h.sets[name].insert(RandomElement(rng, universe));
      }
    }
    const SetOp op = static_cast<SetOp>(Pick(rng, 3));
    CAPTURE(static_cast<int>(op));
    SetMerge::Options o;
    o.page = 1 + Pick(rng, 20);
    o.chunk = 1 + Pick(rng, 20);
    std::shared_ptr<SetMerge> merge;
    merge = SetMerge::Start(
        op, names, o, h.fetch(),
        [&](SetMerge& m, std::vector<std::string> chunk) {
          REQUIRE(!chunk.empty());
          REQUIRE(chunk.size() <= o.chunk);
          ++h.chunks;
          h.got.insert(h.got.end(), chunk.begin(), chunk.end());
          // The consumer resumes now or later.
          if (h.deferred && Pick(rng, 2) == 0) {
            std::shared_ptr<SetMerge> later = m.shared_from_this();
            h.queued.push_back([later]() { later->Resume(); });
          } else {
            m.Resume();
          }
        },
        [&](absl::Status s) {
          REQUIRE(!h.done.has_value());
          h.done = s;
        });
    h.Drain();
    REQUIRE(h.done.has_value());
    REQUIRE(h.done->ok());
    REQUIRE(h.got == Expected(op, h.sets, names));
  });
}

TEST_CASE("set merge: an intersection seeks past what it cannot match") {
  Harness h;
  for (int i = 0; i < 100'000; ++i) {
    h.sets["big"].insert(absl::StrCat("k", 1'000'000 + i));
  }
  h.sets["small"] = {"k1000010", "k1050000", "k1099999", "zz"};
  SetMerge::Options o;
  o.page = 100;
  std::vector<std::string> got;
  bool done = false;
  std::shared_ptr<SetMerge> merge;
  merge = SetMerge::Start(
      SetOp::kIntersection, {"big", "small"}, o, h.fetch(),
      [&](SetMerge& m, std::vector<std::string> chunk) {
        got.insert(got.end(), chunk.begin(), chunk.end());
        m.Resume();
      },
      [&](absl::Status s) {
        REQUIRE(s.ok());
        done = true;
      });
  REQUIRE(done);
  REQUIRE(got == std::vector<std::string>{"k1000010", "k1050000", "k1099999"});
  // A page of each at the start, a seek per match: not 1,000 pages.
  REQUIRE(merge->fetches() < 12);
}

TEST_CASE("set merge: runs to its end with no owner but its reads") {
  Harness h;
  Rng rng(7);
  h.rng = &rng;
  h.deferred = true;
  h.sets["a"] = {"x", "y"};
  std::vector<std::string> got;
  bool done = false;
  // The caller drops the merge at once (as the server does).
  SetMerge::Start(
      SetOp::kUnion, {"a"}, {}, h.fetch(),
      [&](SetMerge& m, std::vector<std::string> chunk) {
        got = chunk;
        m.Resume();
      },
      [&](absl::Status s) { done = s.ok(); });
  h.Drain();
  REQUIRE(done);
  REQUIRE(got == std::vector<std::string>{"x", "y"});
}

TEST_CASE("set merge: a failed read ends the merge with its error") {
  ForEachSeedHarness(100, [](Harness& h, Rng& rng) {
    for (int i = 0; i < 200; ++i) {
      h.sets["a"].insert(RandomElement(rng, 400));
      h.sets["b"].insert(RandomElement(rng, 400));
    }
    h.fail_after = static_cast<int>(Pick(rng, 6));
    SetMerge::Options o;
    o.page = 1 + Pick(rng, 30);
    std::shared_ptr<SetMerge> merge;
    std::optional<absl::Status> done;
    std::vector<std::string> got;
    merge = SetMerge::Start(
        static_cast<SetOp>(Pick(rng, 3)), {"a", "b"}, o, h.fetch(),
        [&](SetMerge& m, std::vector<std::string> chunk) {
          got.insert(got.end(), chunk.begin(), chunk.end());
          std::shared_ptr<SetMerge> later = m.shared_from_this();
          h.queued.push_back([later]() { later->Resume(); });
        },
        [&](absl::Status s) {
          REQUIRE(!done.has_value());
          done = s;
        });
    h.Drain();
    REQUIRE(done.has_value());
    if (h.reads > h.fail_after) {
      REQUIRE(absl::IsUnavailable(*done));
    } else {
      REQUIRE(done->ok());  // It ended before that read.
    }
    REQUIRE(std::is_sorted(got.begin(), got.end()));
  });
}

TEST_CASE("set merge: many sets, some named twice, a few reads at a time") {
  Harness h;
  Rng rng(3);
  h.rng = &rng;
  h.deferred = true;
  std::vector<std::string> names;
  for (int i = 0; i < 300; ++i) {
    const std::string name = absl::StrCat("s", i % 150);  // Each twice.
    names.push_back(name);
    h.sets[name].insert(absl::StrCat("e", i % 150));
    h.sets[name].insert("common");
  }
  for (SetOp op : {SetOp::kUnion, SetOp::kIntersection, SetOp::kDifference}) {
    CAPTURE(static_cast<int>(op));
    h.reads = 0;
    size_t most_in_flight = 0;
    std::vector<std::string> got;
    bool done = false;
    SetMerge::Start(
        op, names, {},
        [&](const std::string& set, RangeQuery q,
            std::function<void(absl::StatusOr<RangeResult>)> cb) {
          h.fetch()(set, q, cb);
          most_in_flight = std::max(most_in_flight, h.queued.size());
        },
        [&](SetMerge& m, std::vector<std::string> chunk) {
          got.insert(got.end(), chunk.begin(), chunk.end());
          m.Resume();
        },
        [&](absl::Status s) { done = s.ok(); });
    h.Drain();
    REQUIRE(done);
    REQUIRE(got == Expected(op, h.sets, names));
    REQUIRE(most_in_flight <= 32);
    // One page per distinct set (a difference reads its first set again
    // as one of the others).
    REQUIRE(h.reads <= 151);
  }
}

TEST_CASE("set merge: a consumer that stops gets nothing more") {
  Harness h;
  for (int i = 0; i < 1000; ++i) h.sets["a"].insert(absl::StrCat("m", i));
  h.deferred = true;
  Rng rng(1);
  h.rng = &rng;
  SetMerge::Options o;
  o.page = 10;
  o.chunk = 7;
  std::shared_ptr<SetMerge> merge;
  int chunks = 0;
  bool done = false;
  merge = SetMerge::Start(
      SetOp::kUnion, {"a", "a"}, o, h.fetch(),
      [&](SetMerge& m, std::vector<std::string>) {
        ++chunks;
        if (chunks == 3) {
          m.Stop();
        } else {
          std::shared_ptr<SetMerge> later = m.shared_from_this();
          h.queued.push_back([later]() { later->Resume(); });
        }
      },
      [&](absl::Status) { done = true; });
  h.Drain();
  REQUIRE(chunks == 3);
  REQUIRE(!done);
  REQUIRE(h.reads < 10);
}

}  // namespace
}  // namespace bigset::server
