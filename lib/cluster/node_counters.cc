#include "cluster/node_counters.h"

#include <string>
#include <utility>
#include <vector>

#include "bigset/cluster/node_stats.h"

namespace bigset {

std::span<const CounterEntry> CounterTable() {
  static constexpr CounterEntry kTable[] = {
      {"node.messages_received", &NodeCounters::messages_received},
      {"node.malformed_messages", &NodeCounters::malformed_messages},
      {"node.retransmits", &NodeCounters::retransmits},
      {"service.group_commits", &NodeCounters::group_commits},
      {"node.replicas_open", &NodeCounters::replicas_open},
      {"read.repairs_sent", &NodeCounters::repairs_sent},
      {"read.repair_ops_sent", &NodeCounters::repair_ops_sent},
      {"read.replica_switches", &NodeCounters::read_replica_switches},
      {"read.counts_agreed", &NodeCounters::counts_agreed},
      {"read.counts_merged", &NodeCounters::counts_merged},
      {"read.queries_hedged", &NodeCounters::queries_hedged},
      {"read.fold_routes", &NodeCounters::fold_routes},
      {"node.stale_routes", &NodeCounters::stale_routes},
      {"write.coordinator_switches", &NodeCounters::coordinator_switches},
      {"write.late_coordinator_replies",
       &NodeCounters::late_coordinator_replies},
      {"write.extra_dots", &NodeCounters::extra_dots},
      {"write.failovers_unsettled", &NodeCounters::failovers_unsettled},
      {"write.failovers_refused", &NodeCounters::failovers_refused},
      {"service.repairs_applied", &NodeCounters::repairs_applied},
      {"service.updates_fenced", &NodeCounters::updates_fenced},
      {"service.duplicate_updates", &NodeCounters::duplicate_updates},
      {"service.deltas_rejected", &NodeCounters::deltas_rejected},
      {"service.folds_expired", &NodeCounters::folds_expired},
      {"service.folds_open", &NodeCounters::folds_open},
      {"service.reply_cache_bytes", &NodeCounters::reply_cache_bytes},
      {"sweep.errors", &NodeCounters::sweep_errors},
      {"sweep.queue_length", &NodeCounters::sweep_queue_length},
      {"sweep.entries_done", &NodeCounters::sweep_entries_done},
      {"sweep.keys_deleted", &NodeCounters::sweep_keys_deleted},
      {"sweep.bytes_reclaimed", &NodeCounters::sweep_bytes_reclaimed},
      {"sweep.micros", &NodeCounters::sweep_micros},
      {"presence.seeks", &NodeCounters::presence_seeks},
      {"presence.seeks_saved", &NodeCounters::presence_seeks_saved},
      {"presence.count_scans", &NodeCounters::count_scans},
      {"presence.filter_bytes", &NodeCounters::presence_filter_bytes},
      {"presence.filters_dropped", &NodeCounters::presence_filters_dropped},
      {"handoff.ring_epoch", &NodeCounters::ring_epoch},
      {"handoff.partitions_moving", &NodeCounters::partitions_moving},
      {"handoff.pending", &NodeCounters::handoffs_pending},
      {"handoff.running", &NodeCounters::handoffs_running},
      {"handoff.incoming", &NodeCounters::handoffs_incoming},
      {"handoff.partitions_releasing", &NodeCounters::partitions_releasing},
      {"handoff.forward_bytes", &NodeCounters::handoff_forward_bytes},
      {"handoff.rings_installed", &NodeCounters::rings_installed},
      {"handoff.done", &NodeCounters::handoffs_done},
      {"handoff.cancelled", &NodeCounters::handoffs_cancelled},
      {"handoff.restarts", &NodeCounters::handoff_restarts},
      {"handoff.keys_sent", &NodeCounters::handoff_keys_sent},
      {"handoff.bytes_sent", &NodeCounters::handoff_bytes_sent},
      {"handoff.keys_received", &NodeCounters::handoff_keys_received},
      {"handoff.sets_received", &NodeCounters::handoff_sets_received},
      {"handoff.deltas_forwarded", &NodeCounters::handoff_deltas_forwarded},
      {"handoff.deltas_proxied", &NodeCounters::handoff_deltas_proxied},
      {"handoff.forward_overflows", &NodeCounters::handoff_forward_overflows},
      {"handoff.partitions_released", &NodeCounters::partitions_released},
      {"handoff.keys_released", &NodeCounters::handoff_keys_released},
      {"handoff.bytes_released", &NodeCounters::handoff_bytes_released},
      {"handoff.stale_ring_reports", &NodeCounters::stale_ring_reports},
      {"handoff.receiver_restarts", &NodeCounters::handoff_receiver_restarts},
      {"membership.version", &NodeCounters::membership_version},
      {"membership.messages_sent", &NodeCounters::membership_messages_sent},
      {"membership.messages_received",
       &NodeCounters::membership_messages_received},
      {"membership.changes", &NodeCounters::membership_changes},
      {"anti_entropy.hints", &NodeCounters::ae_hints},
      {"anti_entropy.hint_bytes", &NodeCounters::ae_hint_bytes},
      {"anti_entropy.pushes_running", &NodeCounters::ae_pushes_running},
      {"anti_entropy.rounds", &NodeCounters::ae_rounds},
      {"anti_entropy.rounds_equal", &NodeCounters::ae_rounds_equal},
      {"anti_entropy.sets_compared", &NodeCounters::ae_sets_compared},
      {"anti_entropy.sets_repaired", &NodeCounters::ae_sets_repaired},
      {"anti_entropy.updates_sent", &NodeCounters::ae_updates_sent},
      {"anti_entropy.keys_pushed", &NodeCounters::ae_keys_pushed},
      {"anti_entropy.keys_received", &NodeCounters::ae_keys_received},
      {"anti_entropy.keys_read", &NodeCounters::ae_keys_read},
      {"anti_entropy.bytes_sent", &NodeCounters::ae_bytes_sent},
      {"anti_entropy.full_exchanges", &NodeCounters::ae_full_exchanges},
      {"anti_entropy.hints_dropped", &NodeCounters::ae_hints_dropped},
      {"anti_entropy.hint_rounds", &NodeCounters::ae_hint_rounds},
      {"anti_entropy.pushes_abandoned", &NodeCounters::ae_pushes_abandoned},
  };
  return kTable;
}

NodeStats::NodeStats() = default;
NodeStats::NodeStats(const NodeStats&) = default;
NodeStats& NodeStats::operator=(const NodeStats&) = default;
NodeStats::NodeStats(NodeStats&&) noexcept = default;
NodeStats& NodeStats::operator=(NodeStats&&) noexcept = default;
NodeStats::~NodeStats() = default;

bool NodeStats::Get(std::string_view name, uint64_t* value) const {
  const std::span<const CounterEntry> table = CounterTable();
  for (size_t i = 0; i < table.size() && i < values_.size(); ++i) {
    if (name == table[i].name) {
      *value = values_[i];
      return true;
    }
  }
  return false;
}

std::vector<std::pair<std::string, uint64_t>> NodeStats::All() const {
  const std::span<const CounterEntry> table = CounterTable();
  std::vector<std::pair<std::string, uint64_t>> out;
  out.reserve(values_.size());
  for (size_t i = 0; i < table.size() && i < values_.size(); ++i) {
    out.emplace_back(table[i].name, values_[i]);
  }
  return out;
}

NodeStats NodeStats::FromCounters(const NodeCounters& counters) {
  NodeStats stats;
  for (const CounterEntry& e : CounterTable()) {
    stats.values_.push_back(counters.*e.field);
  }
  return stats;
}

}  // namespace bigset
