// PickQuorum: which replies make a read quorum of R places
// (docs/DESIGN.md, "Places"). Internal header.
//
// While a partition moves, its serving list may hold a leaver and the node
// that took its place: two nodes, one place. Each may lack writes the other
// holds (the leaver passes writes on once its place is taken; forwards to
// the taker may still be in flight), so a place counts towards R only once
// every node of it answered (a node that no longer serves, kGone, aside),
// and then all of them are merged.
//
// Thread-safety: a pure function.

#ifndef BIGSET_LIB_CLUSTER_PLACE_QUORUM_H_
#define BIGSET_LIB_CLUSTER_PLACE_QUORUM_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace bigset {

// One serving node's answer so far.
enum class QuorumReply : uint8_t {
  kNone,    // Not (yet) answered.
  kFound,   // Holds the set (or notfound_ok).
  kEmpty,   // Answered and holds nothing of the set.
  kFailed,  // Answered with an error: its place cannot be read.
  // Does not serve the partition (any more): the rest of its place stands
  // for it (a leaver lets go only once the node that took its place holds
  // everything); alone in its place, it fails it.
  kGone,
};

// The reply kind of a read-side answer's error: kGone for NotFound (the
// replica service's "does not serve"), else kFailed.
QuorumReply ReplyOfError(const absl::Status& status);

// The status a replica service sends for its replica's own read error. A
// reply's NotFound means only "does not serve" (ReplyOfError lets the rest
// of the place stand for the node), so the replica's NotFound (a table
// file gone) travels as DataLoss; any other status as it is.
absl::Status ReadErrorForReply(const absl::Status& status);

struct QuorumPick {
  enum class Outcome { kWait, kChosen, kUnavailable };
  Outcome outcome = Outcome::kWait;
  // kChosen: the list indices of every node of the R chosen places, place
  // by place in the order the places completed.
  std::vector<size_t> members;
  // Places none of whose nodes failed, and not all gone.
  size_t live_places = 0;
};

// `places`: ServingPlaces (a place per list index); `replies`: each index's
// answer; `order`: the indices that answered, in the order they did (each
// once). R places that hold the set win, in the order they completed;
// once every node answered, complete places that hold nothing make up the
// rest (as with nodes: empty replicas count only when nobody else can).
// kUnavailable once fewer than `r` places can still complete.
// REQUIRES: places.size() == replies.size(); r >= 1.
QuorumPick PickQuorum(const std::vector<uint32_t>& places,
                      const std::vector<QuorumReply>& replies,
                      std::span<const size_t> order, size_t r);

// Unavailable: a `what` ("query", "count") of `set` that only `live`
// places can still answer, fewer than `r`.
absl::Status TooFewPlaces(std::string_view what, std::string_view set,
                          size_t live, int r);

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_PLACE_QUORUM_H_
