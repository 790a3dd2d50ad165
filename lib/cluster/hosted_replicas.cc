#include "cluster/hosted_replicas.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace bigset {

HostedReplicas::HostedReplicas(NodeId node, Store* store,
                               const ReplicaOptions* options,
                               std::shared_ptr<MemoryBudget> filter_budget,
                               uint32_t partitions)
    : node_(node),
      store_(store),
      options_(options),
      filter_budget_(std::move(filter_budget)),
      replicas_(partitions) {}

HostedReplicas::~HostedReplicas() = default;

absl::Status HostedReplicas::Open(uint32_t partition, size_t partitions_here) {
  ReplicaOptions ro = *options_;
  ro.keyspace = partition;
  ro.clock_cache_bytes = std::max<size_t>(
      4096, options_->clock_cache_bytes / std::max<size_t>(1, partitions_here));
  ro.presence_filter_budget = filter_budget_;
  absl::StatusOr<std::unique_ptr<Replica>> r = Replica::Open(store_, ro);
  if (!r.ok()) {
    return absl::Status(r.status().code(),
                        absl::StrCat("node ", node_, ": replica of partition ",
                                     partition, ": ", r.status().message()));
  }
  replicas_[partition] = std::move(*r);
  return absl::OkStatus();
}

bool HostedReplicas::Retire(uint32_t partition) {
  retired_.push_back(std::move(replicas_[partition]));
  return retired_.size() == 1;
}

absl::Status HostedReplicas::CloseAll() {
  absl::Status first = absl::OkStatus();
  for (auto& replica : replicas_) {
    if (replica == nullptr) continue;
    absl::Status s = replica->Close();
    if (first.ok()) first = s;
  }
  return first;
}

void HostedReplicas::Clear() {
  replicas_.clear();
  retired_.clear();
}

void HostedReplicas::FillStats(NodeCounters* s) const {
  s->replicas_open = retired_.size();
  for (const auto& r : replicas_) {
    if (r == nullptr) continue;
    ++s->replicas_open;
    const ReplicaStats rs = r->stats();
    s->sweep_queue_length += rs.sweep_queue_length;
    s->sweep_entries_done += rs.sweep_entries_done;
    s->sweep_keys_deleted += rs.sweep_keys_deleted;
    s->sweep_bytes_reclaimed += rs.sweep_bytes_reclaimed;
    s->sweep_micros += rs.sweep_micros;
  }
}

}  // namespace bigset
