// ServerContext: what every connection of the server shares: the node, the
// configuration, the log, the SSCAN cursors, the counters, and the worker
// thread for calls that block.
//
// Thread-safety: used on the server's thread only, except `worker` (its
// own thread) and `stats` (atomics, read by the worker for INFO).

#ifndef BIGSET_TOOLS_BIGSETD_SERVER_CONTEXT_H_
#define BIGSET_TOOLS_BIGSETD_SERVER_CONTEXT_H_

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "bigset/network/node_runner.h"
#include "config.h"
#include "cursor_table.h"
#include "log.h"
#include "sampler.h"
#include "set_batcher.h"
#include "set_locks.h"
#include "worker.h"

namespace bigset::server {

class ClusterMembership;
class Session;

struct ServerStats {
  std::atomic<uint64_t> connections_received{0};
  std::atomic<uint64_t> connections_rejected{0};
  std::atomic<uint64_t> commands_processed{0};
  std::atomic<uint64_t> net_input_bytes{0};
  std::atomic<uint64_t> net_output_bytes{0};
  // Bad input: protocol errors (the connection is closed), unknown
  // commands, wrong argument counts, query buffers over their bound,
  // failed AUTH, commands refused before AUTH.
  std::atomic<uint64_t> protocol_errors{0};
  std::atomic<uint64_t> unknown_commands{0};
  std::atomic<uint64_t> wrong_arity{0};
  std::atomic<uint64_t> query_buffer_overflows{0};
  std::atomic<uint64_t> auth_failures{0};
  std::atomic<uint64_t> noauth_refusals{0};
  std::atomic<uint64_t> tls_failures{0};
  // Replies that were errors (of any kind), and errors of the cluster
  // (quorum not reached, deadline).
  std::atomic<uint64_t> error_replies{0};
  std::atomic<uint64_t> cluster_errors{0};
  std::atomic<uint64_t> smembers_refused{0};
  std::atomic<uint64_t> cursors_unknown{0};
  // SRANDMEMBER and SPOP draws (batches): from one full read of the set,
  // or through its skeleton; and the skeletons built (a full read each).
  std::atomic<uint64_t> draws_by_full_read{0};
  std::atomic<uint64_t> draws_by_skeleton{0};
  std::atomic<uint64_t> skeleton_builds{0};
};

// INFO commandstats: per command name. `usec` is the time the server's
// thread spent from the command's start until the connection could run
// its next command (for a batched command, its hand-off to the batcher;
// its answer comes later); `failed_calls` counts error replies (a batched
// command's too), `rejected_calls` the calls refused before running (wrong
// argument count, not authenticated).
struct CommandStats {
  uint64_t calls = 0;
  uint64_t usec = 0;
  uint64_t rejected_calls = 0;
  uint64_t failed_calls = 0;
};

// An SPOP waiting for its set's next batch (Session::QueuePop): how many
// members it wants (1 without a count), its quorums, and where its members
// go (write_failed: the remove failed and may have applied).
struct PendingPop {
  int64_t want = 1;
  int r = 2;
  int w = 2;
  std::function<void(absl::Status status, bool write_failed,
                     std::vector<std::string> members)>
      done;
};

struct ServerContext {
  asio::io_context* io = nullptr;
  NodeRunner* runner = nullptr;
  ClusterMembership* membership = nullptr;
  const DaemonConfig* config = nullptr;
  Logger* log = nullptr;
  std::unique_ptr<CursorTable> cursors;
  // The batched set commands of every connection (SetBatcher), and what
  // they run on.
  std::unique_ptr<BatchBackend> batch_backend;
  std::unique_ptr<SetBatcher> batcher;
  std::unique_ptr<Worker> worker;
  // Membership changes (they wait on other nodes).
  std::unique_ptr<Worker> membership_worker;
  // SPOPs passed on to the node that owns their set.
  std::unique_ptr<Worker> forward_worker;
  // Walks of the keyspace (DBSIZE, SCAN, ...), and the pages of names other
  // nodes' walks ask this one for (BIGSET.LOCALSETS): never behind a walk.
  std::unique_ptr<Worker> keyspace_worker;
  std::unique_ptr<Worker> local_sets_worker;
  // Redis's encoding thresholds and snapshot schedule, as CONFIG SET left
  // them (they change nothing: CmdConfig).
  absl::flat_hash_map<std::string, std::string> noop_config = {
      {"set-max-intset-entries", "512"},
      {"set-max-listpack-entries", "128"},
      {"set-max-listpack-value", "64"},
      {"save", ""},
  };
  // By command name (server thread only).
  absl::flat_hash_map<std::string, CommandStats> command_stats;
  // SPOP and SRANDMEMBER's draws.
  std::mt19937_64 rng{std::random_device{}()};
  // Skeletons of large sets for SRANDMEMBER and SPOP (Sampler), by set,
  // and their bytes (bounded: kSkeletonBudget in algebra_commands.cc).
  absl::flat_hash_map<std::string, std::shared_ptr<Skeleton>> skeletons;
  size_t skeleton_bytes = 0;
  // SPOPs waiting, by set: the next batch takes them all (one read, one
  // write). A set has an entry iff one batch is waiting for its lock.
  absl::flat_hash_map<std::string, std::deque<PendingPop>> pops_waiting;
  // SPOP and SMOVE of one set, one at a time on this node.
  SetLocks set_locks;
  ServerStats stats;
  std::chrono::steady_clock::time_point started;
  uint16_t port = 0;
  uint64_t next_client_id = 1;
  absl::flat_hash_map<uint64_t, std::weak_ptr<Session>> sessions;
};

}  // namespace bigset::server

#endif  // BIGSET_TOOLS_BIGSETD_SERVER_CONTEXT_H_
