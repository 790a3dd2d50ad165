// bigsetd: one node of a Bigset cluster, serving its sets to Redis clients.
// See README.md ("bigsetd") for how to run a cluster and what each command
// means here.

#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <asio.hpp>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl_compat.h"
#include "bigset/etcd/etcd_authority.h"
#include "bigset/network/node_runner.h"
#include "config.h"
#include "log.h"
#include "membership.h"
#include "move_watch.h"
#include "server.h"

namespace bigset::server {
namespace {

absl::StatusOr<Ring> FirstRing(const DaemonConfig& c) {
  std::vector<NodeId> nodes;
  for (const auto& [id, address] : c.nodes) nodes.push_back(id);
  RingOptions ro;
  ro.ring_size = c.ring_size;
  ro.n = c.n;
  ro.epoch = 1;
  ro.placement = Placement::kRendezvous;
  return Ring::Create(nodes, ro);
}

// The signals the serving loop handles. Run blocks them first (every
// thread started later inherits that), so that one that comes while the
// node starts waits, pending, for the loop, which stops the node cleanly;
// the start's own waits look for one and give up.
sigset_t StopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}

// Whether a SIGTERM or SIGINT is pending (blocked since Run began).
bool StopPending() {
  sigset_t pending;
  sigemptyset(&pending);
  if (sigpending(&pending) != 0) return false;
  return sigismember(&pending, SIGTERM) == 1 ||
         sigismember(&pending, SIGINT) == 1;
}

// The cluster map to start with: the data directory's if it has one, else
// the one a running node gives (--join), else the first one (--node).
// Cancelled if a SIGTERM or SIGINT comes while it waits for the node to
// join through.
absl::StatusOr<ClusterMap> StartingMap(const DaemonConfig& c, Logger& log) {
  absl::StatusOr<ClusterMap> stored = ClusterMap::Load(c.data_dir);
  if (stored.ok()) {
    log.Info(absl::StrCat("cluster map from ", c.data_dir, ": ring epoch ",
                          stored->ring.epoch(),
                          " (--node and --join are not used)"));
  } else if (!absl::IsNotFound(stored.status())) {
    return stored.status();
  } else if (c.join.has_value()) {
    for (int attempt = 0;; ++attempt) {
      if (StopPending()) return absl::CancelledError("stopped while joining");
      stored = ClusterMembership::Fetch(*c.join, c.requirepass);
      if (stored.ok()) break;
      if (StopPending()) return absl::CancelledError("stopped while joining");
      if (attempt == 30) return stored.status();
      log.Warn(absl::StrCat("--join ", FormatAddress(*c.join), ": ",
                            stored.status().ToString(), "; retrying"));
      for (int tick = 0; tick < 10; ++tick) {
        if (StopPending()) {
          return absl::CancelledError("stopped while joining");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    log.Info(absl::StrCat("cluster map from ", FormatAddress(*c.join),
                          ": ring epoch ", stored->ring.epoch()));
  } else {
    absl::StatusOr<Ring> ring = FirstRing(c);
    if (!ring.ok()) return ring.status();
    stored = ClusterMap{*ring, c.nodes};
  }
  // This node's peer address is the one the others have: the map's, if it
  // has one. Another one given on purpose is refused (moving a node to
  // another address is a REPLACE); one that only comes from a --node list
  // the map replaced is ignored.
  auto own = stored->nodes.find(c.id);
  if (own != stored->nodes.end()) {
    if (c.peer_listen_given && !(own->second.peer == c.peer_listen)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--peer-listen ", FormatAddress(c.peer_listen),
          " but the cluster knows node ", c.id, " at ",
          FormatAddress(own->second.peer),
          " (to move a node, start a new one and BIGSET.CLUSTER REPLACE)"));
    }
    if (own->second.client.has_value() && !(*own->second.client == c.listen)) {
      log.Warn(absl::StrCat("clients now at ", FormatAddress(c.listen),
                            ", the cluster map said ",
                            FormatAddress(*own->second.client),
                            ": other nodes learn it at the next change"));
    }
    own->second.client = c.listen;
  } else {
    stored->nodes[c.id] = NodeAddresses{c.peer_listen, c.listen};
  }
  return stored;
}

int Run(const DaemonConfig& c) {
  const sigset_t stop_signals = StopSignals();
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // A peer or client that goes away must not kill the process.
  signal(SIGPIPE, SIG_IGN);
  Logger log(c.log_level, c.log_file);
  if (absl::Status s = log.Open(); !s.ok()) {
    std::cerr << "bigsetd: " << s.message() << std::endl;
    return 2;
  }
  {
    // The data directory and its missing parents, as `mkdir -p` would.
    std::error_code ec;
    std::filesystem::create_directories(c.data_dir, ec);
    if (ec) {
      log.Error(absl::StrCat("cannot create the data directory ", c.data_dir,
                             ": ", ec.message()));
      return 1;
    }
  }
  absl::StatusOr<ClusterMap> map = StartingMap(c, log);
  if (absl::IsCancelled(map.status())) {
    log.Info(absl::StrCat("SIGTERM or SIGINT: ", map.status().message()));
    return 0;
  }
  if (!map.ok()) {
    // Before anything is written: a setting or the stored map is wrong.
    std::cerr << "bigsetd: cluster map: " << map.status().message()
              << std::endl;
    if (!c.log_file.empty()) {
      log.Error(absl::StrCat("cluster map: ", map.status().ToString()));
    }
    return 2;
  }
  // Never more clients than descriptors (each holds one; the node's
  // peers and its store need some too).
  DaemonConfig adjusted = c;
  rlimit files = {};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 &&
      files.rlim_cur != RLIM_INFINITY && files.rlim_cur > 128 &&
      adjusted.max_clients > files.rlim_cur - 128) {
    adjusted.max_clients = files.rlim_cur - 128;
    log.Warn(absl::StrCat("--max-clients lowered to ", adjusted.max_clients,
                          ": the descriptor limit is ", files.rlim_cur));
  }
  auto book = std::make_shared<AddressBook>();
  for (const auto& [id, a] : map->nodes) book->Set(id, a.peer);
  std::unique_ptr<MembershipAuthority> authority;
  if (c.membership_etcd) {
    EtcdAuthorityOptions eo;
    eo.endpoints = c.etcd_endpoints;
    eo.prefix = c.etcd_prefix;
    eo.tls_ca_file = c.etcd_tls_ca_file;
    eo.tls_cert_file = c.etcd_tls_cert_file;
    eo.tls_key_file = c.etcd_tls_key_file;
    eo.log = [&log](bool warning, std::string_view line) {
      if (warning) {
        log.Warn(absl::StrCat("cluster: ", AV(line)));
      } else {
        log.Info(absl::StrCat("cluster: ", AV(line)));
      }
    };
    absl::StatusOr<std::unique_ptr<EtcdMembershipAuthority>> etcd =
        EtcdMembershipAuthority::Create(std::move(eo));
    if (!etcd.ok()) {
      std::cerr << "bigsetd: " << etcd.status().message() << std::endl;
      return 2;
    }
    authority = std::move(*etcd);
    log.Info(absl::StrCat("membership decided in etcd at ",
                          absl::StrJoin(c.etcd_endpoints, ","), " under ",
                          c.etcd_prefix));
  }
  ClusterMembership membership(*map, c.id, c.data_dir, c.requirepass,
                               book.get(), &log, std::move(authority));

  NodeRunnerOptions o;
  o.id = c.id;
  o.data_dir = c.data_dir;
  o.ring = map->ring;
  o.addresses = book;
  o.node.replica.sync_writes = c.sync_writes;
  o.node.replica.clock_cache_bytes = c.clock_cache_bytes;
  o.node.replica.presence_filter_bytes = c.presence_filter_bytes;
  o.store.block_cache_bytes = c.block_cache_bytes;
  o.store.write_buffer_bytes = c.write_buffer_bytes;
  o.store.snappy_compression = c.snappy_compression;
  // Bigset finds elements by seeks, which LevelDB's Bloom filters do not
  // serve; they would only cost 10 bits per key of memory.
  o.store.bloom_bits_per_key = 0;
  // Table files read with pread: resident memory stays what the caches
  // hold instead of growing with the data on disk.
  o.store.mmap_reads = false;
  o.node.anti_entropy.interval_micros = c.anti_entropy_interval_micros;
  o.node.handoff.on_stale_ring = [&membership](uint64_t epoch, NodeId from) {
    membership.OnStaleRing(epoch, from);
  };
  o.transport.cluster_name = c.cluster_name;
  const PeerAddress peer = map->nodes.at(c.id).peer;
  o.transport.listen_host = peer.host;
  o.transport.listen_port = peer.port;
  o.transport.plaintext = c.plaintext_peers;
  o.transport.unsent_bytes = c.peer_unsent_kib << 10;
  o.transport.tls_ca_file = c.tls_ca_file;
  o.transport.tls_cert_file = c.tls_cert_file;
  o.transport.tls_key_file = c.tls_key_file;
  o.transport.log = [&log](std::string_view line) {
    log.Info(absl::StrCat("peer: ", AV(line)));
  };
  // TLS failures, refused handshakes, protocol violations: an operator
  // must see them (a misconfigured or hostile peer).
  o.transport.warn = [&log](std::string_view line) {
    log.Warn(absl::StrCat("peer: ", AV(line)));
  };
  if (StopPending()) {
    log.Info("SIGTERM or SIGINT: stopped before opening the store");
    return 0;
  }
  absl::StatusOr<std::unique_ptr<NodeRunner>> runner =
      NodeRunner::Start(std::move(o));
  if (!runner.ok()) {
    log.Error(
        absl::StrCat("cannot start the node: ", runner.status().ToString()));
    return 1;
  }

  // Saves the map through the membership, never beside it: a peer may
  // already have reported a newer ring, whose fetched map is saved there.
  if (absl::Status s = membership.Attach(runner->get()); !s.ok()) {
    log.Error(absl::StrCat("cluster map: ", s.ToString()));
    (void)(*runner)->Close();
    return 1;
  }
  // Detached before the runner goes, on every path: the membership's
  // fetcher may be installing a ring on it.
  absl::Cleanup detach = [&membership]() { membership.Detach(); };

  asio::io_context io;
  int exit_code = 0;
  {
    // Moves that make no progress are warnings in the log.
    MoveWatch move_watch(runner->get(), &log, absl::Seconds(c.move_stuck_secs),
                         absl::Seconds(std::min(5, c.move_stuck_secs)));
    Server server(&io, runner->get(), &membership, &adjusted, &log);
    if (absl::Status s = server.Start(); !s.ok()) {
      log.Error(s.ToString());
      std::move(detach).Invoke();
      (void)(*runner)->Close();
      return 1;
    }
    asio::signal_set signals(io, SIGTERM, SIGINT, SIGHUP);
    std::function<void(const asio::error_code&, int)> on_signal =
        [&](const asio::error_code& ec, int sig) {
          if (ec) return;
          if (sig == SIGHUP) {
            absl::Status s = log.Reopen();
            log.Info(s.ok() ? "SIGHUP: log reopened"
                            : absl::StrCat("SIGHUP: ", s.message()));
            signals.async_wait(on_signal);
            return;
          }
          log.Info(absl::StrCat(sig == SIGTERM ? "SIGTERM" : "SIGINT",
                                ": shutting down"));
          server.Stop();
          io.stop();
        };
    signals.async_wait(on_signal);
    // Handled from here on (a signal that came while the node started is
    // delivered now, to this thread alone: the others keep it blocked).
    pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
    log.Info(absl::StrCat("ready node=", c.id, " client_port=", server.port(),
                          " peer_port=", (*runner)->port(),
                          " nodes=", c.nodes.size(), " n=", c.n, " w=", c.w,
                          " r=", c.r, c.requirepass.empty() ? "" : " auth=on",
                          c.sync_writes ? " sync_writes=on" : ""));
    io.run();
    // Blocked again: once `signals` goes, another SIGTERM would kill the
    // process by its default action while the node closes.
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    server.Stop();
    // The membership lets go of the node first: a change still running
    // (a JOIN on a worker, a fetch) then fails here, instead of taking the
    // closed node's refusal for "installed" and pushing the change on.
    std::move(detach).Invoke();
    // Close the node (its replicas keep their actor epochs). Requests the
    // node still coordinates are answered Unavailable within Close; those
    // answers, and callbacks already posted into `io`, are drained below
    // before the sessions go.
    if (absl::Status s = (*runner)->Close(); !s.ok()) {
      log.Error(absl::StrCat("close: ", s.ToString()));
      exit_code = 1;
    }
    io.restart();
    io.poll();
  }
  runner->reset();
  log.Info("stopped");
  return exit_code;
}

}  // namespace
}  // namespace bigset::server

int main(int argc, char** argv) {
  bigset::server::ParsedConfig parsed = bigset::server::ParseConfig(argc, argv);
  if (!parsed.config.has_value()) return parsed.exit_code;
  return bigset::server::Run(*parsed.config);
}
