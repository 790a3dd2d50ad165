// PickQuorum (lib/cluster/place_quorum.h): a read quorum counts places, a
// place only once every node of it answered; targeted cases, and random
// inputs against a model of the rules.

#include "cluster/place_quorum.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <vector>

#include "test_util.h"

namespace bigset::testing {
namespace {

using R = QuorumReply;
using Outcome = QuorumPick::Outcome;

TEST_CASE("place quorum: a leaver and its taker count as one place") {
  // Serving list {5, 1, 7, 3}: 7 took 3's place (places 0, 1, 2, 2).
  const std::vector<uint32_t> places = {0, 1, 2, 2};
  std::vector<R> replies = {R::kNone, R::kNone, R::kFound, R::kFound};
  std::vector<size_t> order = {3, 2};
  // The two answers that came first are one place: not a quorum of two.
  CHECK(PickQuorum(places, replies, order, 2).outcome == Outcome::kWait);
  replies[1] = R::kFound;
  order.push_back(1);
  const QuorumPick pick = PickQuorum(places, replies, order, 2);
  REQUIRE(pick.outcome == Outcome::kChosen);
  // Both nodes of the pair are merged, then node 1's place.
  CHECK(pick.members == std::vector<size_t>{2, 3, 1});
  CHECK(pick.live_places == 3);
}

TEST_CASE("place quorum: half a place answered does not count") {
  const std::vector<uint32_t> places = {0, 1, 2, 2};
  // 5 and 7 answered; 3 has not: one place and a half.
  const std::vector<R> replies = {R::kFound, R::kNone, R::kFound, R::kNone};
  const std::vector<size_t> order = {0, 2};
  CHECK(PickQuorum(places, replies, order, 2).outcome == Outcome::kWait);
  CHECK(PickQuorum(places, replies, order, 1).members ==
        std::vector<size_t>{0});
}

TEST_CASE("place quorum: a failed node fails its whole place") {
  const std::vector<uint32_t> places = {0, 1, 2, 2};
  std::vector<R> replies = {R::kNone, R::kFailed, R::kFound, R::kFailed};
  std::vector<size_t> order = {1, 2, 3};
  const QuorumPick pick = PickQuorum(places, replies, order, 2);
  CHECK(pick.outcome == Outcome::kUnavailable);
  CHECK(pick.live_places == 1);
}

TEST_CASE("place quorum: a node that no longer serves leaves its place") {
  // 3 handed its place to 7 and let go: 7 stands for the place alone.
  const std::vector<uint32_t> places = {0, 1, 2, 2};
  std::vector<R> replies = {R::kNone, R::kFound, R::kFound, R::kGone};
  std::vector<size_t> order = {3, 2, 1};
  QuorumPick pick = PickQuorum(places, replies, order, 2);
  REQUIRE(pick.outcome == Outcome::kChosen);
  CHECK(pick.members == std::vector<size_t>{2, 1});
  CHECK(pick.live_places == 3);
  // Alone in its place, a node that does not serve fails the place.
  replies = {R::kGone, R::kGone, R::kNone, R::kNone};
  order = {0, 1};
  pick = PickQuorum(places, replies, order, 2);
  CHECK(pick.outcome == Outcome::kUnavailable);
  CHECK(pick.live_places == 1);
}

TEST_CASE(
    "place quorum: a replica whose store lost a table file answered a read "
    "NOT_FOUND, which a coordinator took for 'does not serve'",
    "[regression]") {
  // LevelDB reports a missing table file as NotFound. Sent as it is, the
  // coordinator counted the node as gone and let its place-mate stand for
  // the place alone; the error must fail the place instead.
  const absl::Status lost = absl::NotFoundError("000123.ldb: No such file");
  const absl::Status sent = ReadErrorForReply(lost);
  CHECK(absl::IsDataLoss(sent));
  CHECK(sent.message() == lost.message());
  CHECK(ReplyOfError(sent) == R::kFailed);
  const std::vector<uint32_t> places = {0, 1, 1};
  const std::vector<R> replies = {R::kFound, R::kFound, ReplyOfError(sent)};
  const std::vector<size_t> order = {0, 1, 2};
  const QuorumPick pick = PickQuorum(places, replies, order, 2);
  CHECK(pick.outcome == Outcome::kUnavailable);
  CHECK(pick.live_places == 1);
  // Every other error travels unchanged, and the service's own NotFound
  // ("does not serve") still means gone.
  for (const absl::Status& s :
       {absl::UnavailableError("draining"), absl::DataLossError("crc"),
        absl::InternalError("io"), absl::InvalidArgumentError("bad")}) {
    CHECK(ReadErrorForReply(s) == s);
  }
  CHECK(ReplyOfError(absl::NotFoundError("node 3 holds no replica")) ==
        R::kGone);
}

TEST_CASE("place quorum: empty places make up the quorum once all answered") {
  const std::vector<uint32_t> places = {0, 1, 1};
  std::vector<R> replies = {R::kEmpty, R::kEmpty, R::kNone};
  std::vector<size_t> order = {0, 1};
  CHECK(PickQuorum(places, replies, order, 2).outcome == Outcome::kWait);
  // The pair holds the set through one of its nodes: a place that holds it.
  replies[2] = R::kFound;
  order.push_back(2);
  QuorumPick pick = PickQuorum(places, replies, order, 1);
  REQUIRE(pick.outcome == Outcome::kChosen);
  CHECK(pick.members == std::vector<size_t>{1, 2});
  pick = PickQuorum(places, replies, order, 2);
  REQUIRE(pick.outcome == Outcome::kChosen);
  CHECK(pick.members == std::vector<size_t>{1, 2, 0});
}

// The rules, restated over the whole input: places that completed (every
// node answered, none failed) in the order of `order`.
struct Expected {
  Outcome outcome;
  std::vector<uint32_t> chosen;  // Places, in the order chosen.
};

Expected Model(const std::vector<uint32_t>& places,
               const std::vector<R>& replies, const std::vector<size_t>& order,
               size_t r) {
  // A node that does not serve the partition any more is not of its place.
  std::map<uint32_t, std::vector<size_t>> nodes;
  for (size_t i = 0; i < places.size(); ++i) {
    if (replies[i] != R::kGone) nodes[places[i]].push_back(i);
  }
  std::vector<uint32_t> full, empty;
  std::set<size_t> seen;
  for (size_t i : order) {
    seen.insert(i);
    if (replies[i] == R::kGone) continue;
    const std::vector<size_t>& of = nodes[places[i]];
    const bool done = std::all_of(of.begin(), of.end(), [&](size_t j) {
      return seen.count(j) && replies[j] != R::kFailed &&
             replies[j] != R::kNone;
    });
    // Completed with this answer: it is the place's last.
    const bool last = std::all_of(of.begin(), of.end(), [&](size_t j) {
      return j == i || seen.count(j);
    });
    if (!done || !last) continue;
    const bool found = std::any_of(of.begin(), of.end(), [&](size_t j) {
      return replies[j] == R::kFound;
    });
    (found ? full : empty).push_back(places[i]);
  }
  size_t live = 0;
  for (const auto& [p, of] : nodes) {
    live += !of.empty() && std::none_of(of.begin(), of.end(), [&](size_t j) {
      return replies[j] == R::kFailed;
    });
  }
  const bool everyone = std::none_of(replies.begin(), replies.end(),
                                     [](R x) { return x == R::kNone; });
  if (full.size() >= r) {
    full.resize(r);
    return {Outcome::kChosen, full};
  }
  if (everyone && full.size() + empty.size() >= r) {
    for (uint32_t p : empty) {
      if (full.size() < r) full.push_back(p);
    }
    return {Outcome::kChosen, full};
  }
  return {live < r ? Outcome::kUnavailable : Outcome::kWait, {}};
}

TEST_CASE("place quorum: random lists, answers and orders match the model") {
  for (uint64_t seed : Seeds(400)) {
    CAPTURE(seed);
    Rng rng(seed);
    const size_t n = Uniform(rng, 1, 7);
    // Places: each node joins an earlier node's place now and then.
    std::vector<uint32_t> places(n);
    for (size_t i = 0; i < n; ++i) {
      places[i] = static_cast<uint32_t>(i);
      if (i > 0 && Uniform(rng, 0, 3) == 0) {
        places[i] = places[Uniform(rng, 0, i - 1)];
      }
    }
    std::vector<R> replies(n);
    std::vector<size_t> order;
    for (size_t i = 0; i < n; ++i) {
      replies[i] = static_cast<R>(Uniform(rng, 0, 4));
      if (replies[i] != R::kNone) order.push_back(i);
    }
    std::shuffle(order.begin(), order.end(), rng);
    const size_t r = Uniform(rng, 1, 3);
    CAPTURE(places, order, r);
    const QuorumPick pick = PickQuorum(places, replies, order, r);
    const Expected want = Model(places, replies, order, r);
    REQUIRE(pick.outcome == want.outcome);
    if (pick.outcome != Outcome::kChosen) continue;
    // Every node of each chosen place, place by place.
    std::vector<size_t> members;
    for (uint32_t p : want.chosen) {
      for (size_t i = 0; i < n; ++i) {
        if (places[i] == p && replies[i] != R::kGone) members.push_back(i);
      }
    }
    CHECK(pick.members == members);
    std::set<uint32_t> distinct;
    for (size_t i : pick.members) {
      distinct.insert(places[i]);
      CHECK((replies[i] == R::kFound || replies[i] == R::kEmpty));
    }
    CHECK(distinct.size() == r);
  }
}

}  // namespace
}  // namespace bigset::testing
