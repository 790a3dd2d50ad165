#include "cluster/membership.h"

#include <algorithm>
#include <functional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bigset/keys/keys.h"
#include "cluster/node_metadata.h"
#include "core/coding.h"
#include "core/crc32c.h"
#include "core/status_macros.h"

namespace bigset {
namespace {

constexpr std::string_view kRingKey = "ring";
constexpr std::string_view kBaseRingKey = "base_ring";
constexpr std::string_view kMembershipKey = "membership";
constexpr uint8_t kMembershipFormatVersion = 1;
// Keys of the earlier format (serving lists, completion notices and move
// numbers), converted at open.
constexpr std::string_view kOldServingKey = "serving";
constexpr std::string_view kOldAnnounceKey = "announce";
constexpr std::string_view kOldMoveNumbersKey = "move_numbers";
constexpr uint8_t kOldServingFormatVersion = 1;

// The live (not departed) entry of `partition`, if any.
const ServeEntry* FindEntry(const NodeServing& state, uint32_t partition) {
  auto it = std::lower_bound(
      state.entries.begin(), state.entries.end(), partition,
      [](const ServeEntry& e, uint32_t p) { return e.partition < p; });
  for (; it != state.entries.end() && it->partition == partition; ++it) {
    if (!it->departed) return &*it;
  }
  return nullptr;
}

// The entry (live or departed) of `node`'s state that took the place of
// `from` in its episode `since` of serving `partition`.
const ServeEntry* FindTaker(const NodeServing& state, uint32_t partition,
                            NodeId from, uint64_t since) {
  auto it = std::lower_bound(
      state.entries.begin(), state.entries.end(), partition,
      [](const ServeEntry& e, uint32_t p) { return e.partition < p; });
  for (; it != state.entries.end() && it->partition == partition; ++it) {
    if (it->took_from == from && it->took_since == since) return &*it;
  }
  return nullptr;
}

ServeEntry* FindEntry(NodeServing& state, uint32_t partition) {
  return const_cast<ServeEntry*>(
      FindEntry(static_cast<const NodeServing&>(state), partition));
}

absl::StatusOr<Ring> GetRing(Store* store, std::string_view name) {
  std::string value;
  absl::Status s =
      store->Get(ReadOptions(), MetadataKey(kNodeMetaKeyspace, name), &value);
  if (!s.ok()) return s;
  return Ring::Decode(value);
}

// The earlier format's serving lists: partition -> nodes.
absl::Status DecodeOldServing(std::string_view bytes, uint32_t ring_size,
                              std::map<uint32_t, std::vector<NodeId>>* out) {
  const absl::Status bad =
      absl::DataLossError("undecodable serving lists in the node's metadata");
  uint8_t version = 0;
  uint64_t count = 0;
  if (!crc32c::StripChecksum(&bytes)) return bad;
  coding::Reader in(bytes);
  if (!in.GetByte(&version) || version != kOldServingFormatVersion ||
      !in.GetCount(2, &count)) {
    return bad;
  }
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t p = 0, k = 0;
    if (!in.GetVarint64(&p) || p >= ring_size || !in.GetCount(1, &k)) {
      return bad;
    }
    std::vector<NodeId>& list = (*out)[static_cast<uint32_t>(p)];
    for (uint64_t j = 0; j < k; ++j) {
      uint64_t n = 0;
      if (!in.GetVarint64(&n) || n > UINT32_MAX) return bad;
      list.push_back(static_cast<NodeId>(n));
    }
  }
  return in.empty() ? absl::OkStatus() : bad;
}

}  // namespace

std::string EncodeMembershipRecord(
    const std::set<NodeId>& ring_nodes,
    const std::map<NodeId, NodeServing>& states) {
  std::string out;
  out.push_back(static_cast<char>(kMembershipFormatVersion));
  coding::PutVarint64(&out, ring_nodes.size());
  for (NodeId n : ring_nodes) coding::PutVarint64(&out, n);
  std::vector<NodeServing> list;
  list.reserve(states.size());
  for (const auto& [node, state] : states) list.push_back(state);
  EncodeNodeStates(list, &out);
  crc32c::AppendChecksum(&out);
  return out;
}

absl::Status DecodeMembershipRecord(std::string_view bytes,
                                    std::set<NodeId>* ring_nodes,
                                    std::map<NodeId, NodeServing>* states) {
  const absl::Status bad =
      absl::DataLossError("undecodable membership in the node's metadata");
  if (!crc32c::StripChecksum(&bytes)) return bad;
  coding::Reader in(bytes);
  uint8_t version = 0;
  uint64_t count = 0;
  if (!in.GetByte(&version) || version != kMembershipFormatVersion ||
      !in.GetCount(1, &count)) {
    return bad;
  }
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t n = 0;
    if (!in.GetVarint64(&n) || n > UINT32_MAX) return bad;
    ring_nodes->insert(static_cast<NodeId>(n));
  }
  std::vector<NodeServing> list;
  if (!DecodeNodeStates(std::string_view(in.position(), in.remaining()), &list)
           .ok()) {
    return bad;
  }
  for (NodeServing& st : list) {
    const NodeId node = st.node;
    if (!states->emplace(node, std::move(st)).second) return bad;
  }
  return absl::OkStatus();
}

MembershipState::MembershipState(NodeId self, Store* store)
    : self_(self), store_(store) {}

absl::Status MembershipState::Load(const Ring& ring, uint64_t first_version) {
  absl::StatusOr<Ring> stored = GetRing(store_, kRingKey);
  if (absl::IsNotFound(stored.status())) {
    // A new store: this node serves what the ring gives it. Its node id may
    // have served before on a store now gone, and other nodes' states may
    // still name that store's episodes (a place it handed over is "took
    // from this node, episode e" for as long as the taker serves it). Were
    // the new store's episodes numbered from 1 again, an entry of the new
    // store would be taken for the old one's: the node would hand its new,
    // empty place to the taker of an old one and stop serving a partition
    // its ring gives it, and proposals of its new episodes would meet
    // refusals meant for the old ones. So the first version (and episode)
    // is one no earlier store used (`first_version`: random per store).
    first_version = std::max<uint64_t>(first_version, 1);
    base_.emplace(ring);
    latest_.emplace(ring);
    ring_nodes_.insert(ring.nodes().begin(), ring.nodes().end());
    NodeServing own;
    own.node = self_;
    own.version = first_version;
    for (uint32_t p = 0; p < ring.ring_size(); ++p) {
      if (Contains(ring.PreferenceList(p), self_)) {
        own.entries.push_back(ServeEntry{p, first_version, 0, 0, 0});
      }
    }
    states_[self_] = std::move(own);
    Rebuild();
    return Persist(/*sync=*/true);
  }
  if (!stored.ok()) return stored.status();
  if (stored->epoch() > ring.epoch()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the store has seen ring epoch ", stored->epoch(),
                     "; open the node with that ring or a later one (got ",
                     ring.epoch(), ")"));
  }
  if (stored->epoch() == ring.epoch() && stored->Encode() != ring.Encode()) {
    return absl::InvalidArgumentError(
        absl::StrCat("two different rings with epoch ", ring.epoch(),
                     ": the one given and the one this store has seen"));
  }
  latest_.emplace(std::move(*stored));
  absl::StatusOr<Ring> base = GetRing(store_, kBaseRingKey);
  if (absl::IsNotFound(base.status())) {
    std::string serving;
    absl::Status s =
        store_->Get(ReadOptions(),
                    MetadataKey(kNodeMetaKeyspace, kOldServingKey), &serving);
    if (!s.ok() && !absl::IsNotFound(s)) return s;
    BIGSET_RETURN_IF_ERROR(LoadOldFormat(serving));
  } else {
    if (!base.ok()) return base.status();
    if (base->ring_size() != latest_->ring_size()) {
      return absl::DataLossError("base ring of another size in the metadata");
    }
    base_.emplace(std::move(*base));
    std::string value;
    BIGSET_RETURN_IF_ERROR(store_->Get(
        ReadOptions(), MetadataKey(kNodeMetaKeyspace, kMembershipKey), &value));
    BIGSET_RETURN_IF_ERROR(
        DecodeMembershipRecord(value, &ring_nodes_, &states_));
    for (const auto& [node, state] : states_) {
      for (const ServeEntry& e : state.entries) {
        if (e.partition >= latest_->ring_size()) {
          return absl::DataLossError("membership names a partition too high");
        }
      }
    }
    if (states_.count(self_) == 0) {
      return absl::DataLossError("membership without this node's own state");
    }
  }
  Rebuild();
  if (ring.epoch() > latest_->epoch()) return InstallRing(ring);
  return absl::OkStatus();
}

absl::Status MembershipState::LoadOldFormat(const std::string& serving_bytes) {
  std::map<uint32_t, std::vector<NodeId>> serving;
  if (!serving_bytes.empty()) {
    absl::Status s =
        DecodeOldServing(serving_bytes, latest_->ring_size(), &serving);
    if (!s.ok()) return s;
  }
  base_.emplace(*latest_);
  ring_nodes_.insert(latest_->nodes().begin(), latest_->nodes().end());
  NodeServing own;
  own.node = self_;
  own.version = 1;
  for (uint32_t p = 0; p < latest_->ring_size(); ++p) {
    auto it = serving.find(p);
    const std::vector<NodeId>& list =
        it != serving.end() ? it->second : latest_->PreferenceList(p);
    if (Contains(list, self_)) own.entries.push_back(ServeEntry{p, 1, 0, 0, 0});
  }
  states_[self_] = std::move(own);
  WriteBatch batch;
  batch.Delete(MetadataKey(kNodeMetaKeyspace, kOldServingKey));
  batch.Delete(MetadataKey(kNodeMetaKeyspace, kOldAnnounceKey));
  batch.Delete(MetadataKey(kNodeMetaKeyspace, kOldMoveNumbersKey));
  return Persist(/*sync=*/true, &batch);
}

absl::Status MembershipState::Persist(bool sync, WriteBatch* batch) {
  WriteBatch own;
  if (batch == nullptr) batch = &own;
  batch->Put(MetadataKey(kNodeMetaKeyspace, kRingKey), latest_->Encode());
  batch->Put(MetadataKey(kNodeMetaKeyspace, kBaseRingKey), base_->Encode());
  batch->Put(MetadataKey(kNodeMetaKeyspace, kMembershipKey),
             EncodeMembershipRecord(ring_nodes_, states_));
  WriteOptions options;
  options.sync = sync;
  return store_->Write(options, *batch);
}

absl::Status MembershipState::InstallRing(const Ring& ring) {
  if (ring.ring_size() != latest_->ring_size()) {
    return absl::InvalidArgumentError(
        "a ring change cannot change the number of partitions");
  }
  if (ring.n() != latest_->n()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a ring change cannot change n, the replicas per partition (",
        latest_->n(), " -> ", ring.n(), ")"));
  }
  if (ring.epoch() <= latest_->epoch()) {
    return absl::FailedPreconditionError(
        absl::StrCat("ring epoch ", ring.epoch(), " is not above the latest (",
                     latest_->epoch(), ")"));
  }
  const Ring previous = *latest_;
  const std::set<NodeId> previous_nodes = ring_nodes_;
  latest_.emplace(ring);
  ring_nodes_.insert(ring.nodes().begin(), ring.nodes().end());
  absl::Status s = Persist(/*sync=*/true);
  if (!s.ok()) {
    latest_.emplace(previous);
    ring_nodes_ = previous_nodes;
    return s;
  }
  Rebuild();
  return absl::OkStatus();
}

bool MembershipState::GuessesFromBase() const {
  // The base ring is the cluster's first only for a node it places: every
  // node of it began with that ring's placement as its own state. A node
  // opened with a later ring that leaves it out (a joiner) cannot tell
  // which of that ring's nodes began with it: one may itself have been a
  // joiner then, only receiving, that later took another's place.
  return Contains(base_->nodes(), self_);
}

bool MembershipState::NodeServes(NodeId node, uint32_t partition) const {
  auto it = states_.find(node);
  if (it != states_.end()) return FindEntry(it->second, partition) != nullptr;
  return Contains(base_->PreferenceList(partition), node);
}

void MembershipState::Rebuild() {
  ++generation_;
  const uint32_t size = latest_->ring_size();
  serving_.assign(size, {});
  places_.assign(size, {});
  moving_by_partition_.assign(size, false);
  moving_ = 0;
  // Every node that may serve something: those with a state, and those the
  // base ring places (guessed until heard of).
  std::set<NodeId> candidates(base_->nodes().begin(), base_->nodes().end());
  for (const auto& [node, state] : states_) candidates.insert(node);
  for (uint32_t p = 0; p < size; ++p) {
    const std::vector<NodeId>& want = latest_->PreferenceList(p);
    std::vector<NodeId>& list = serving_[p];
    for (NodeId n : want) {
      if (NodeServes(n, p)) list.push_back(n);
    }
    const size_t in_ring = list.size();
    for (NodeId n : candidates) {
      if (!Contains(want, n) && NodeServes(n, p)) list.push_back(n);
    }
    if (in_ring != want.size() || list.size() != want.size()) {
      moving_by_partition_[p] = true;
      ++moving_;
    }
    places_[p] = PlacesOf(p, list);
  }
}

std::vector<uint32_t> MembershipState::PlacesOf(
    uint32_t partition, const std::vector<NodeId>& list) const {
  std::vector<uint32_t> place(list.size());
  for (uint32_t i = 0; i < list.size(); ++i) place[i] = i;
  auto root = [&place](uint32_t i) {
    while (place[i] != i) i = place[i];
    return i;
  };
  // Follows each node's place back to the node it was taken from, through
  // nodes that handed it on and departed, to a node of the list. That node
  // shares the place if it still serves in that episode, or this view has
  // never heard of it (grouping two places as one costs availability,
  // counting one place twice costs a quorum). A node of the list serving
  // another episode (it came back in another place, or on a new store:
  // episodes of different stores are unordered) is passed through like a
  // departed one; a chain this view cannot follow groups the node with
  // every leaver of the list. Lists are a handful of nodes.
  //
  // Two nodes whose chains pass through one episode of one node took the
  // same place (its giver handed it out twice: it gave up on a taker cut
  // off from it that had accepted, and handed the place to another): they
  // share it, one place's writes split between them until one hands its
  // data to the other.
  const std::vector<NodeId>& ring_list = latest_->PreferenceList(partition);
  if (!GuessesFromBase()) {
    // A joiner's guesses (nodes it has no state of) are one place: two of
    // them may be a leaver and the node that took its place, and counting
    // one place twice costs a quorum (a write acknowledged by a leaver and
    // its taker alone, found by the lifecycle soak). Their states, once
    // heard, tell the places apart.
    int first = -1;
    for (uint32_t i = 0; i < list.size(); ++i) {
      if (list[i] == self_ || states_.count(list[i]) > 0) continue;
      if (first < 0) {
        first = static_cast<int>(i);
      } else {
        place[i] = static_cast<uint32_t>(first);
      }
    }
  }
  std::map<std::pair<NodeId, uint64_t>, uint32_t> taken;  // Episode -> node.
  for (uint32_t i = 0; i < list.size(); ++i) {
    const std::optional<ServeEntry> e = EntryOf(list[i], partition);
    if (!e.has_value()) continue;
    NodeId from = e->took_from;
    uint64_t since = e->took_since;
    for (size_t step = 0; from != 0 && step <= states_.size(); ++step) {
      const auto [at, fresh] = taken.try_emplace({from, since}, i);
      if (!fresh && root(at->second) != root(i)) {
        const uint32_t a = root(i), b = root(at->second);
        place[std::max(a, b)] = std::min(a, b);
      }
      const auto j = std::find(list.begin(), list.end(), from);
      if (j != list.end()) {
        const std::optional<ServeEntry> giver = EntryOf(from, partition);
        if (giver.has_value() &&
            (giver->since == since || states_.count(from) == 0)) {
          const uint32_t a = root(i);
          const uint32_t b = root(static_cast<uint32_t>(j - list.begin()));
          place[std::max(a, b)] = std::min(a, b);
          break;
        }
      }
      const ServeEntry* then = EpisodeOf(from, partition, since);
      if (then == nullptr) {
        // A state of `from` at or after the episode without it: `from`
        // left it (and its giver no longer serves it, or the departed
        // entry would be kept). A view that knows no such state cannot
        // follow the place: it may be a leaver's of the list, so the node
        // is grouped with every one of them.
        const auto known = states_.find(from);
        if (known != states_.end() && known->second.version >= since) break;
        for (uint32_t j = 0; j < list.size(); ++j) {
          if (j == i || Contains(ring_list, list[j])) continue;
          const uint32_t a = root(i), b = root(j);
          place[std::max(a, b)] = std::min(a, b);
        }
        break;
      }
      from = then->took_from;
      since = then->took_since;
    }
  }
  for (uint32_t i = 0; i < list.size(); ++i) place[i] = root(i);
  return place;
}

const ServeEntry* MembershipState::EpisodeOf(NodeId node, uint32_t partition,
                                             uint64_t since) const {
  auto it = states_.find(node);
  if (it == states_.end()) return nullptr;
  // Entries are ascending by (partition, since): an acknowledgement's
  // place is followed through here on the write path.
  const std::vector<ServeEntry>& entries = it->second.entries;
  auto e = std::lower_bound(
      entries.begin(), entries.end(), std::pair(partition, since),
      [](const ServeEntry& x, std::pair<uint32_t, uint64_t> k) {
        return std::pair(x.partition, x.since) < k;
      });
  if (e == entries.end() || e->partition != partition || e->since != since) {
    return nullptr;
  }
  return &*e;
}

bool MembershipState::Moving(uint32_t partition) const {
  return partition < moving_by_partition_.size() &&
         moving_by_partition_[partition];
}

const ServeEntry* MembershipState::Own(uint32_t partition) const {
  return FindEntry(own(), partition);
}

std::optional<ServeEntry> MembershipState::EntryOf(NodeId node,
                                                   uint32_t partition) const {
  auto it = states_.find(node);
  if (it != states_.end()) {
    const ServeEntry* e = FindEntry(it->second, partition);
    if (e == nullptr) return std::nullopt;
    return *e;
  }
  if (partition < base_->ring_size() &&
      Contains(base_->PreferenceList(partition), node)) {
    return ServeEntry{partition, 0, 0, 0, 0};
  }
  return std::nullopt;
}

std::vector<NodeId> MembershipState::PlaceGivers(uint32_t partition,
                                                 NodeId from,
                                                 uint64_t since) const {
  std::vector<NodeId> givers;
  while (from != 0 && givers.size() < kMaxGivers) {
    const std::optional<ServeEntry> now = EntryOf(from, partition);
    if (!now.has_value() || now->since == 0 || now->since == since) {
      givers.push_back(from);
    }
    const ServeEntry* then = EpisodeOf(from, partition, since);
    if (then == nullptr) break;
    from = then->took_from;
    since = then->took_since;
  }
  return givers;
}

std::optional<MembershipState::Taker> MembershipState::ReplacedBy(
    uint32_t partition) const {
  const ServeEntry* mine = Own(partition);
  if (mine == nullptr) return std::nullopt;
  return Follow(partition, self_, mine->since, /*skip=*/0);
}

std::optional<MembershipState::Taker> MembershipState::Follow(
    uint32_t partition, NodeId from, uint64_t since, NodeId skip) const {
  // Every node that took the place (twins: more than one), and where the
  // place went from each: the first whose chain reaches a node holding it
  // now. A twin that yielded its data by supplement and let go has a
  // departed entry nobody took from, so the other twin's chain is the one
  // that leads somewhere.
  std::optional<Taker> first;
  for (const auto& [node, state] : states_) {
    if (node == from || node == skip) continue;
    const ServeEntry* found = FindTaker(state, partition, from, since);
    if (found == nullptr) continue;
    const NodeId holder =
        found->departed
            ? HolderAfter(partition, node, found->since, states_.size())
            : node;
    if (holder != 0) return Taker{node, holder};
    if (!first.has_value()) first = Taker{node, 0};
  }
  // Taken, but this view does not know yet where the place went (or
  // nobody took it: nullopt).
  return first;
}

NodeId MembershipState::HolderAfter(uint32_t partition, NodeId node,
                                    uint64_t since, size_t depth) const {
  // Each step is a later episode, so chains end; bounded all the same.
  if (depth == 0) return 0;
  for (const auto& [n, state] : states_) {
    if (n == node) continue;
    const ServeEntry* found = FindTaker(state, partition, node, since);
    if (found == nullptr) continue;
    if (!found->departed) return n;
    const NodeId holder = HolderAfter(partition, n, found->since, depth - 1);
    if (holder != 0) return holder;
  }
  return 0;
}

NodeId MembershipState::TwinHolder(NodeId node, uint32_t partition) const {
  const std::optional<ServeEntry> e = EntryOf(node, partition);
  if (!e.has_value() || e->took_from == 0) return 0;
  const std::optional<Taker> twin =
      Follow(partition, e->took_from, e->took_since, /*skip=*/node);
  return twin.has_value() && twin->holder != node ? twin->holder : 0;
}

bool MembershipState::Claimed(uint32_t partition, NodeId node) const {
  for (const auto& [n, state] : states_) {
    const ServeEntry* e = FindEntry(state, partition);
    if (e != nullptr && e->handing_to == node) return true;
  }
  return false;
}

bool MembershipState::Replaced(NodeId node, uint32_t partition) const {
  auto own = states_.find(node);
  if (own == states_.end()) return false;
  const ServeEntry* mine = FindEntry(own->second, partition);
  if (mine == nullptr) return false;
  for (const auto& [n, state] : states_) {
    if (n != node &&
        FindTaker(state, partition, node, mine->since) != nullptr) {
      return true;
    }
  }
  return false;
}

absl::Status MembershipState::PruneDeparted() {
  // A departed entry tells the node whose place it took that the place is
  // gone, and where it went; once nobody follows the place through it any
  // more, nobody needs it. The place (from, since) is followed while
  // `from` serves that episode, or while `from` handed it on too (its own
  // departed entry of that episode) and the place `from` took is still
  // followed: a node whose place was taken and that has not finished
  // handing over (it restarted after the acceptance) follows the chain of
  // takers to the holder, so every departed link of it stays until that
  // node stops serving, whatever the order in which the links hand on.
  std::function<bool(uint32_t, NodeId, uint64_t, size_t)> followed =
      [&](uint32_t partition, NodeId from, uint64_t since,
          size_t depth) -> bool {
    if (from == 0) return false;
    auto it = states_.find(from);
    if (it == states_.end()) return true;  // Never heard of: keep.
    const ServeEntry* live = FindEntry(it->second, partition);
    if (live != nullptr && live->since == since) return true;
    if (depth > states_.size()) return true;  // Bounded; keep.
    for (const ServeEntry& x : it->second.entries) {
      if (x.partition == partition && x.departed && x.since == since) {
        return followed(partition, x.took_from, x.took_since, depth + 1);
      }
    }
    return false;
  };
  auto needed = [&](const ServeEntry& e) {
    if (!e.departed) return true;
    return followed(e.partition, e.took_from, e.took_since, 0);
  };
  const NodeServing& own = states_.at(self_);
  if (std::all_of(own.entries.begin(), own.entries.end(), needed)) {
    return absl::OkStatus();
  }
  return ChangeOwn(
      [&](NodeServing& st) { std::erase_if(st.entries, std::not_fn(needed)); });
}

template <typename Fn>
absl::Status MembershipState::ChangeOwn(Fn change) {
  NodeServing& own = states_.at(self_);
  const NodeServing before = own;
  change(own);
  ++own.version;
  absl::Status s = Persist(/*sync=*/true);
  if (!s.ok()) {
    own = before;
    return s;
  }
  Rebuild();
  return absl::OkStatus();
}

absl::Status MembershipState::BeginServing(uint32_t partition, NodeId took_from,
                                           uint64_t took_since) {
  if (Serves(partition)) return absl::OkStatus();
  return ChangeOwn([&](NodeServing& own) {
    ServeEntry e;
    e.partition = partition;
    e.since = own.version + 1;  // The version this change gets.
    e.took_from = took_from;
    e.took_since = took_since;
    // After every entry of the partition (their episodes are earlier).
    own.entries.insert(
        std::upper_bound(
            own.entries.begin(), own.entries.end(), partition,
            [](uint32_t p, const ServeEntry& x) { return p < x.partition; }),
        e);
  });
}

absl::Status MembershipState::SetHandingTo(uint32_t partition, NodeId to) {
  const ServeEntry* e = Own(partition);
  if (e == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", self_, " does not serve partition ", partition));
  }
  if (e->handing_to == to) return absl::OkStatus();
  return ChangeOwn(
      [&](NodeServing& own) { FindEntry(own, partition)->handing_to = to; });
}

absl::Status MembershipState::StopServing(uint32_t partition) {
  if (!Serves(partition)) return absl::OkStatus();
  return ChangeOwn([&](NodeServing& own) {
    ServeEntry* e = FindEntry(own, partition);
    if (e->took_from != 0) {
      // The node whose place this one took may still need to learn that
      // its place was taken, and where it went.
      e->departed = true;
    } else {
      std::erase_if(own.entries, [&](const ServeEntry& x) {
        return x.partition == partition && !x.departed;
      });
    }
  });
}

bool MembershipState::Merge(const std::vector<NodeServing>& states,
                            bool* own_raised, size_t* refused) {
  bool changed = false;
  for (const NodeServing& st : states) {
    // A state naming partitions this ring does not have is not one of
    // this cluster's (or is garbage): ignored whole.
    if (std::any_of(st.entries.begin(), st.entries.end(),
                    [&](const ServeEntry& e) {
                      return e.partition >= latest_->ring_size();
                    })) {
      if (refused != nullptr) ++*refused;
      continue;
    }
    if (st.node == self_ && st.version > kMaxOwnVersion) {
      // No store of this node came near that version: garbage. Raising
      // above it would wrap the version around (to 0: every later change
      // of this node ignored everywhere) or leave no room for changes.
      if (refused != nullptr) ++*refused;
      continue;
    }
    if (st.node == self_) {
      NodeServing& own = states_.at(self_);
      if (st.version > own.version ||
          (st.version == own.version && !(st == own))) {
        // Others remember a later state of this node than its store does
        // (the store was replaced): its own account stays, under a version
        // above theirs, so that it wins everywhere.
        const uint64_t before = own.version;
        own.version = st.version + 1;
        if (!Persist(/*sync=*/true).ok()) {
          own.version = before;
          continue;
        }
        *own_raised = true;
      }
      continue;
    }
    auto it = states_.find(st.node);
    if (it != states_.end() && it->second.version >= st.version) continue;
    states_[st.node] = st;
    changed = true;
  }
  if (changed) {
    Rebuild();
    (void)Persist(/*sync=*/false);  // Gossip brings them again if lost.
  }
  return changed;
}

std::vector<std::pair<NodeId, uint64_t>> MembershipState::Versions() const {
  std::vector<std::pair<NodeId, uint64_t>> out;
  out.reserve(states_.size());
  for (const auto& [node, state] : states_)
    out.emplace_back(node, state.version);
  return out;
}

std::vector<NodeServing> MembershipState::NewerThan(
    const std::vector<std::pair<NodeId, uint64_t>>& versions) const {
  std::map<NodeId, uint64_t> theirs(versions.begin(), versions.end());
  std::vector<NodeServing> out;
  for (const auto& [node, state] : states_) {
    auto it = theirs.find(node);
    if (it == theirs.end() || it->second < state.version) out.push_back(state);
  }
  return out;
}

bool MembershipState::Behind(
    const std::vector<std::pair<NodeId, uint64_t>>& versions) const {
  for (const auto& [node, version] : versions) {
    auto it = states_.find(node);
    if (it == states_.end() ? version > 0 : version > it->second.version) {
      return true;
    }
  }
  return false;
}

const NodeServing* MembershipState::StateOf(NodeId node) const {
  auto it = states_.find(node);
  return it == states_.end() ? nullptr : &it->second;
}

std::vector<NodeId> MembershipState::Peers() const {
  std::set<NodeId> all = ring_nodes_;
  all.insert(base_->nodes().begin(), base_->nodes().end());
  all.insert(latest_->nodes().begin(), latest_->nodes().end());
  for (const auto& [node, state] : states_) all.insert(node);
  all.erase(self_);
  return std::vector<NodeId>(all.begin(), all.end());
}

}  // namespace bigset
