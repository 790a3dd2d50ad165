// INFO and BIGSET.STATS: the server's and the node's counters.

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl_compat.h"
#include "session.h"

namespace bigset::server {
namespace {

using Fields = std::vector<std::pair<std::string, uint64_t>>;

// Every node counter, by its name ("read.counts_agreed"; see
// bigset/cluster/node_stats.h).
Fields NodeFields(const NodeStats& s) { return s.All(); }

// One node counter; 0 if the node has none of that name.
uint64_t NodeStat(const NodeStats& s, std::string_view name) {
  uint64_t v = 0;
  s.Get(name, &v);
  return v;
}

Fields ServerFields(const ServerStats& s) {
  auto v = [](const std::atomic<uint64_t>& a) {
    return a.load(std::memory_order_relaxed);
  };
  return {
      {"total_connections_received", v(s.connections_received)},
      {"total_commands_processed", v(s.commands_processed)},
      {"rejected_connections", v(s.connections_rejected)},
      {"total_net_input_bytes", v(s.net_input_bytes)},
      {"total_net_output_bytes", v(s.net_output_bytes)},
      {"total_error_replies", v(s.error_replies)},
      {"protocol_errors", v(s.protocol_errors)},
      {"unknown_commands", v(s.unknown_commands)},
      {"wrong_arity_commands", v(s.wrong_arity)},
      {"client_query_buffer_limit_disconnections", v(s.query_buffer_overflows)},
      {"auth_failures", v(s.auth_failures)},
      {"noauth_refusals", v(s.noauth_refusals)},
      {"client_tls_failures", v(s.tls_failures)},
      {"cluster_errors", v(s.cluster_errors)},
      {"smembers_refused", v(s.smembers_refused)},
      {"sscan_cursors_unknown", v(s.cursors_unknown)},
      {"draws_by_full_read", v(s.draws_by_full_read)},
      {"draws_by_skeleton", v(s.draws_by_skeleton)},
      {"skeleton_builds", v(s.skeleton_builds)},
  };
}

uint64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

std::string Human(uint64_t bytes) {
  const char* units[] = {"B", "K", "M", "G", "T"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return absl::StrFormat("%.2f%s", v, units[u]);
}

// What the worker gathers from the node for INFO and BIGSET.STATS.
struct NodeSnapshot {
  absl::Status status;
  NodeStats stats;
  TransportStats transport;
  std::string ring_nodes;
};

void Gather(NodeRunner* runner, NodeSnapshot* out) {
  absl::StatusOr<NodeStats> stats = runner->Stats();
  if (!stats.ok()) {
    out->status = stats.status();
    return;
  }
  out->stats = *stats;
  out->transport = runner->TransportStatistics();
  out->status = runner->RunOnNode([out](Node& node) {
    std::string nodes;
    for (NodeId id : node.ring().nodes()) {
      absl::StrAppend(&nodes, nodes.empty() ? "" : ",", id);
    }
    out->ring_nodes = std::move(nodes);
  });
}

}  // namespace

void Session::CmdStats(Args&) {
  NodeRunner* runner = ctx_->runner;
  auto reply = Later<std::shared_ptr<NodeSnapshot>>(
      [this](std::shared_ptr<NodeSnapshot> snap) {
        if (!snap->status.ok()) {
          ReplyStatus(snap->status, false);
          Done();
          return;
        }
        Fields fields = ServerFields(ctx_->stats);
        for (auto& f : NodeFields(snap->stats)) fields.push_back(std::move(f));
        RespWriter w = Out();
        w.Map(fields.size());
        for (const auto& [name, value] : fields) {
          w.Bulk(name);
          w.Integer(static_cast<int64_t>(value));
        }
        Done();
      });
  ctx_->worker->Run([runner, reply]() {
    auto snap = std::make_shared<NodeSnapshot>();
    Gather(runner, snap.get());
    reply(std::move(snap));
  });
}

void Session::CmdInfo(Args& a) {
  std::vector<std::string> wanted;
  for (size_t i = 1; i < a.size(); ++i)
    wanted.push_back(absl::AsciiStrToLower(a[i]));
  auto want = [wanted](std::string_view section) {
    if (wanted.empty()) return true;
    for (const std::string& w : wanted) {
      if (w == section || w == "all" || w == "everything" || w == "default") {
        return true;
      }
    }
    return false;
  };
  // Sections Redis leaves out of a plain INFO ("all" and "everything"
  // name them).
  auto want_only = [wanted](std::string_view section) {
    for (const std::string& w : wanted) {
      if (w == section || w == "all" || w == "everything") return true;
    }
    return false;
  };
  NodeRunner* runner = ctx_->runner;
  auto reply = Later<
      std::shared_ptr<NodeSnapshot>>([this, want, want_only](
                                         std::shared_ptr<NodeSnapshot> snap) {
    const DaemonConfig& c = *ctx_->config;
    const auto uptime = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::steady_clock::now() - ctx_->started)
                            .count();
    std::string text;
    auto line = [&text](std::string_view k, const auto& v) {
      absl::StrAppend(&text, AV(k), ":", v, "\r\n");
    };
    if (want("server")) {
      text += "# Server\r\n";
      line("redis_version", "7.0.0");
      line("bigset_version", "0.2.0");
      line("redis_mode", "standalone");
      line("os", "Linux");
      line("process_id", getpid());
      line("tcp_port", ctx_->port);
      line("uptime_in_seconds", uptime);
      line("uptime_in_days", uptime / 86400);
      text += "\r\n";
    }
    if (want("clients")) {
      text += "# Clients\r\n";
      line("connected_clients", ctx_->sessions.size());
      line("maxclients", c.max_clients);
      line("blocked_clients", 0);
      text += "\r\n";
    }
    if (want("memory")) {
      const uint64_t rss = ResidentBytes();
      text += "# Memory\r\n";
      line("used_memory", rss);
      line("used_memory_human", Human(rss));
      line("used_memory_rss", rss);
      line("used_memory_rss_human", Human(rss));
      line("maxmemory", 0);
      line("clock_cache_bytes", c.clock_cache_bytes);
      line("block_cache_bytes", c.block_cache_bytes);
      line("write_buffer_bytes", c.write_buffer_bytes);
      line("compression", c.snappy_compression ? "snappy" : "none");
      line("presence_filter_budget_bytes", c.presence_filter_bytes);
      line("sscan_cursors", ctx_->cursors->size());
      line("sscan_cursor_bytes", ctx_->cursors->bytes());
      text += "\r\n";
    }
    if (want("replication")) {
      // Every node is a primary of the sets it holds (leaderless).
      text += "# Replication\r\n";
      line("role", "master");
      line("connected_slaves", 0);
      text += "\r\n";
    }
    if (want("cluster")) {
      text += "# Cluster\r\n";
      line("cluster_enabled", 0);  // Not the Redis Cluster protocol.
      line("bigset_node_id", c.id);
      line("bigset_n", c.n);
      line("bigset_w", c.w);
      line("bigset_r", c.r);
      if (snap->status.ok()) {
        line("bigset_ring_nodes", snap->ring_nodes);
        line("bigset_ring_epoch", NodeStat(snap->stats, "handoff.ring_epoch"));
        line("bigset_partitions_moving",
             NodeStat(snap->stats, "handoff.partitions_moving"));
        line("bigset_handoffs_running",
             NodeStat(snap->stats, "handoff.running"));
        line("bigset_handoffs_pending",
             NodeStat(snap->stats, "handoff.pending"));
        uint64_t connected = 0;
        for (const PeerStats& p : snap->transport.peers)
          connected += p.connected;
        line("bigset_peers", snap->transport.peers.size());
        line("bigset_peers_connected", connected);
      }
      text += "\r\n";
    }
    if (want("stats")) {
      text += "# Stats\r\n";
      for (const auto& [k, v] : ServerFields(ctx_->stats)) line(k, v);
      // How the set commands were batched (SetBatcher).
      const SetBatcherStats b = ctx_->batcher->stats();
      line("batch_batches", b.batches);
      line("batch_commands", b.commands);
      line("batch_largest", b.largest_batch);
      line("batch_reads", b.reads);
      line("batch_reads_hedged", b.bulk_reads);
      line("batch_reads_with_write", b.reads_with_write);
      line("batch_reads_repeated", b.reads_repeated);
      line("batch_writes", b.writes);
      line("batch_expired", b.expired);
      line("batch_waiting", b.waiting);
      if (snap->status.ok()) {
        for (const auto& [k, v] : NodeFields(snap->stats)) {
          // INFO's fields are words: "node_read_counts_agreed".
          line(absl::StrCat("node_", absl::StrReplaceAll(k, {{".", "_"}})), v);
        }
      }
      text += "\r\n";
    }
    if (want("peers") && snap->status.ok()) {
      // Per peer, Redis's "slaveN:" style: what the transport holds for it
      // and what it shed (a peer that falls behind is shed requests).
      text += "# Peers\r\n";
      for (const PeerStats& p : snap->transport.peers) {
        line(absl::StrCat("peer", p.node),
             absl::StrCat("connected=", p.connected ? 1 : 0,
                          ",queued_bytes=", p.queued_bytes,
                          ",dropped_queue_full=", p.dropped_queue_full,
                          ",dropped_duplicates=", p.dropped_duplicates,
                          ",frames_out=", p.frames_out,
                          ",frames_in=", p.frames_in, ",connects=", p.connects,
                          ",disconnects=", p.disconnects,
                          ",stall_resets=", p.stall_resets));
      }
      text += "\r\n";
    }
    if (want("cpu")) {
      text += "# CPU\r\n";
      auto seconds = [](const timeval& t) {
        return absl::StrFormat("%d.%06d", static_cast<int64_t>(t.tv_sec),
                               static_cast<int64_t>(t.tv_usec));
      };
      rusage self{}, children{}, thread{};
      getrusage(RUSAGE_SELF, &self);
      getrusage(RUSAGE_CHILDREN, &children);
      getrusage(RUSAGE_THREAD, &thread);  // The server's thread: this one.
      line("used_cpu_sys", seconds(self.ru_stime));
      line("used_cpu_user", seconds(self.ru_utime));
      line("used_cpu_sys_children", seconds(children.ru_stime));
      line("used_cpu_user_children", seconds(children.ru_utime));
      line("used_cpu_sys_main_thread", seconds(thread.ru_stime));
      line("used_cpu_user_main_thread", seconds(thread.ru_utime));
      text += "\r\n";
    }
    if (want_only("commandstats")) {
      text += "# Commandstats\r\n";
      std::vector<std::pair<std::string, CommandStats>> all(
          ctx_->command_stats.begin(), ctx_->command_stats.end());
      std::sort(all.begin(), all.end(),
                [](const auto& x, const auto& y) { return x.first < y.first; });
      for (const auto& [name, st] : all) {
        line(absl::StrCat("cmdstat_", name),
             absl::StrFormat("calls=%d,usec=%d,usec_per_call=%.2f,"
                             "rejected_calls=%d,failed_calls=%d",
                             st.calls, st.usec,
                             st.calls == 0 ? 0.0
                                           : static_cast<double>(st.usec) /
                                                 static_cast<double>(st.calls),
                             st.rejected_calls, st.failed_calls));
      }
      text += "\r\n";
    }
    if (want("keyspace")) text += "# Keyspace\r\n";
    Out().Bulk(text);
    Done();
  });
  ctx_->worker->Run([runner, reply]() {
    auto snap = std::make_shared<NodeSnapshot>();
    Gather(runner, snap.get());
    reply(std::move(snap));
  });
}

}  // namespace bigset::server
