#include "bigset/cluster/ring.h"

#include <algorithm>
#include <functional>
#include <set>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/coding.h"
#include "core/crc32c.h"
#include "core/string_view_compat.h"

namespace bigset {
namespace {

constexpr uint8_t kRingFormatVersion = 1;

}  // namespace

uint64_t StableHash(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : bytes) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  // FNV's low bits mix poorly; finish with a 64-bit avalanche.
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

absl::StatusOr<Ring> Ring::Create(std::vector<NodeId> nodes,
                                  const RingOptions& options) {
  if (nodes.empty()) return absl::InvalidArgumentError("ring has no nodes");
  std::set<NodeId> distinct(nodes.begin(), nodes.end());
  if (distinct.size() != nodes.size()) {
    return absl::InvalidArgumentError("ring nodes must be distinct");
  }
  if (options.ring_size == 0 || options.ring_size > kMaxRingSize) {
    return absl::InvalidArgumentError("ring_size must be in [1, 2^24]");
  }
  if (options.n < 1 || options.n > static_cast<int>(nodes.size())) {
    return absl::InvalidArgumentError("n must be in [1, number of nodes]");
  }
  Ring r;
  r.ring_size_ = options.ring_size;
  r.n_ = options.n;
  r.epoch_ = options.epoch;
  r.placement_ = options.placement;
  r.nodes_ = std::move(nodes);
  r.preference_.resize(r.ring_size_);
  std::vector<std::pair<uint64_t, NodeId>> scored;
  for (uint32_t p = 0; p < r.ring_size_; ++p) {
    if (r.placement_ == Placement::kRoundRobin) {
      for (int i = 0; i < r.n_; ++i) {
        r.preference_[p].push_back(r.nodes_[(p + i) % r.nodes_.size()]);
      }
      continue;
    }
    scored.clear();
    for (NodeId node : r.nodes_) {
      // The partition and the node id, each as 8 big-endian bytes (widened
      // first: NodeId is narrower than 64 bits).
      const uint64_t parts[2] = {p, static_cast<uint64_t>(node)};
      char key[16];
      for (int j = 0; j < 2; ++j) {
        for (int i = 0; i < 8; ++i) {
          key[8 * j + i] = static_cast<char>(parts[j] >> (56 - 8 * i));
        }
      }
      scored.emplace_back(StableHash(std::string_view(key, sizeof(key))), node);
    }
    // Highest score first; the node id breaks (astronomically rare) ties.
    std::partial_sort(scored.begin(), scored.begin() + r.n_, scored.end(),
                      std::greater<>());
    for (int i = 0; i < r.n_; ++i) r.preference_[p].push_back(scored[i].second);
  }
  return r;
}

uint32_t Ring::PartitionOf(std::string_view set) const {
  return static_cast<uint32_t>(StableHash(set) % ring_size_);
}

std::vector<uint32_t> Ring::PartitionsOf(NodeId node) const {
  std::vector<uint32_t> out;
  for (uint32_t p = 0; p < ring_size_; ++p) {
    const auto& pl = preference_[p];
    if (std::find(pl.begin(), pl.end(), node) != pl.end()) out.push_back(p);
  }
  return out;
}

std::map<NodeId, std::vector<uint32_t>> Ring::CoveragePlan() const {
  std::vector<bool> covered(ring_size_, false);
  uint32_t left = ring_size_;
  std::map<NodeId, std::vector<uint32_t>> plan;
  while (left > 0) {
    // The node covering the most uncovered partitions (lowest id on ties).
    NodeId best = 0;
    size_t best_count = 0;
    for (NodeId node : nodes_) {
      if (plan.count(node)) continue;
      size_t count = 0;
      for (uint32_t p : PartitionsOf(node)) count += !covered[p];
      if (count > best_count ||
          (count == best_count && count > 0 && node < best)) {
        best = node;
        best_count = count;
      }
    }
    std::vector<uint32_t>& mine = plan[best];
    for (uint32_t p : PartitionsOf(best)) {
      if (!covered[p]) {
        covered[p] = true;
        --left;
        mine.push_back(p);
      }
    }
  }
  return plan;
}

absl::StatusOr<std::vector<PartitionTransfer>> PlanTransfers(
    const Ring& old_ring, const Ring& new_ring) {
  if (old_ring.ring_size() != new_ring.ring_size()) {
    return absl::InvalidArgumentError(
        "a ring change cannot change the number of partitions");
  }
  if (new_ring.epoch() <= old_ring.epoch()) {
    return absl::InvalidArgumentError(
        "the new ring's epoch must be higher than the old one's");
  }
  std::vector<PartitionTransfer> plan;
  for (uint32_t p = 0; p < old_ring.ring_size(); ++p) {
    for (const PartitionTransfer& t : PlanPartitionTransfers(
             p, old_ring.PreferenceList(p), new_ring.PreferenceList(p))) {
      plan.push_back(t);
    }
  }
  return plan;
}

std::vector<PartitionTransfer> PlanPartitionTransfers(
    uint32_t partition, const std::vector<NodeId>& before,
    const std::vector<NodeId>& after) {
  auto holds = [](const std::vector<NodeId>& list, NodeId n) {
    return std::find(list.begin(), list.end(), n) != list.end();
  };
  std::vector<NodeId> leaving, joining;
  for (NodeId n : before) {
    if (!holds(after, n)) leaving.push_back(n);
  }
  for (NodeId n : after) {
    if (!holds(before, n)) joining.push_back(n);
  }
  std::vector<PartitionTransfer> plan;
  if (before.empty()) return plan;
  for (size_t i = 0; i < joining.size(); ++i) {
    plan.push_back(PartitionTransfer{
        partition, i < leaving.size() ? leaving[i] : before.front(),
        joining[i]});
  }
  return plan;
}

std::string Ring::Encode() const {
  std::string out;
  out.push_back(static_cast<char>(kRingFormatVersion));
  coding::PutVarint64(&out, epoch_);
  coding::PutVarint64(&out, ring_size_);
  coding::PutVarint64(&out, static_cast<uint64_t>(n_));
  out.push_back(placement_ == Placement::kRoundRobin ? 0 : 1);
  coding::PutVarint64(&out, nodes_.size());
  for (NodeId node : nodes_) coding::PutVarint64(&out, node);
  crc32c::AppendChecksum(&out);
  return out;
}

absl::StatusOr<Ring> Ring::Decode(std::string_view bytes) {
  auto bad = [](std::string_view what) {
    return absl::DataLossError(
        absl::StrCat("undecodable ring: ", ToAbsl(what)));
  };
  if (bytes.size() < 5) return bad("too short");
  if (!crc32c::StripChecksum(&bytes)) return bad("checksum mismatch");
  coding::Reader in(bytes);
  uint8_t version = 0, placement = 0;
  uint64_t epoch = 0, ring_size = 0, n = 0, count = 0;
  if (!in.GetByte(&version) || version != kRingFormatVersion) {
    return bad("unknown version");
  }
  if (!in.GetVarint64(&epoch) || !in.GetVarint64(&ring_size) ||
      !in.GetVarint64(&n) || !in.GetByte(&placement) || placement > 1 ||
      !in.GetCount(1, &count) || ring_size > kMaxRingSize || n > count) {
    return bad("fields");
  }
  std::vector<NodeId> nodes(static_cast<size_t>(count));
  for (NodeId& node : nodes) {
    uint64_t v = 0;
    if (!in.GetVarint64(&v) || v > UINT32_MAX) return bad("node id");
    node = static_cast<NodeId>(v);
  }
  if (!in.empty()) return bad("trailing bytes");
  RingOptions options;
  options.epoch = epoch;
  options.ring_size = static_cast<uint32_t>(ring_size);
  options.n = static_cast<int>(n);
  options.placement =
      placement == 0 ? Placement::kRoundRobin : Placement::kRendezvous;
  absl::StatusOr<Ring> ring = Ring::Create(std::move(nodes), options);
  if (!ring.ok()) return bad(ToStd(ring.status().message()));
  return ring;
}

}  // namespace bigset
