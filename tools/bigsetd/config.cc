#include "config.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace bigset::server {
namespace {

// One line on standard error; exit code 2.
ParsedConfig Fail(std::string_view what) {
  std::cerr << "bigsetd: " << what << std::endl;
  return ParsedConfig{std::nullopt, 2};
}

bool Readable(const std::string& path) {
  return access(path.c_str(), R_OK) == 0;
}

}  // namespace

ParsedConfig ParseConfig(int argc, char** argv) {
  CLI::App app{
      "bigsetd: one node of a Bigset cluster, serving replicated sets over "
      "the Redis protocol (RESP2 and RESP3).\nEvery option may also be set "
      "in the --config file (TOML or INI, keys = long option names)."};
  app.set_config("--config", "", "configuration file (TOML or INI)");
  // A key nobody reads is a mistake (a typo, a setting of another version).
  app.allow_config_extras(false);
  app.set_version_flag("--version", "bigsetd 0.2.0");

  DaemonConfig c;
  std::string listen = "127.0.0.1:6379", peer_listen, tls_dir, join,
              log_level = "info", sadd_reply = "quorum", compression = "none",
              membership = "builtin", etcd_endpoints, etcd_prefix, etcd_tls_dir;
  std::vector<std::string> nodes;
  uint64_t timeout_ms = 2000, clock_cache_mib = 64, ae_interval_ms = 10'000;
  uint64_t block_cache_mib = 32, write_buffer_mib = 4, filter_mib = 16;
  uint64_t query_hedge_ms = 0;
  uint64_t bulk_read_hedge_ms = 20;

  app.add_option("--id", c.id, "this node's id (> 0, one of --node)")
      ->group("Node");
  app.add_option("--data", c.data_dir,
                 "data directory (LevelDB; created if missing)")
      ->group("Node");
  app.add_option("--listen", listen,
                 "HOST:PORT for Redis clients (default 127.0.0.1:6379)")
      ->group("Node");
  app.add_option("--peer-listen", peer_listen,
                 "HOST:PORT for the other nodes (default: this node's --node "
                 "address)")
      ->group("Node");
  app.add_option("--node", nodes,
                 "ID=PEER_HOST:PORT[/CLIENT_HOST:PORT], once per node of the "
                 "cluster (this one too); the first ring holds them all. The "
                 "client address lets nodes spread membership changes. Read "
                 "only at the first start: then the data directory's cluster "
                 "map is the truth")
      ->group("Cluster");
  app.add_option("--join", join,
                 "CLIENT_HOST:PORT of a node of a running cluster: a new node "
                 "fetches the cluster map from it (instead of --node), then "
                 "waits for BIGSET.CLUSTER JOIN")
      ->group("Cluster");
  app.add_option("--cluster-name", c.cluster_name,
                 "peers with another name are refused")
      ->group("Cluster");
  app.add_option("--ring-size", c.ring_size, "partitions (default 64)")
      ->group("Cluster");
  app.add_option("--n", c.n, "replicas per set (default 3)")->group("Cluster");
  app.add_option("--w", c.w,
                 "default write quorum: acknowledgements before a write "
                 "succeeds (default 2)")
      ->group("Cluster");
  app.add_option("--r", c.r, "default read quorum (default 2)")
      ->group("Cluster");
  app.add_option("--timeout-ms", timeout_ms,
                 "a request's deadline in the cluster (default 2000)")
      ->group("Cluster");
  app.add_option("--ae-interval-ms", ae_interval_ms,
                 "anti-entropy interval (default 10000; 0: off)")
      ->group("Cluster");
  app.add_option("--membership", membership,
                 "who decides ring changes: builtin (the node that receives "
                 "BIGSET.CLUSTER JOIN/LEAVE/REPLACE; one operator at a time) "
                 "or etcd (a compare-and-swap in etcd; any number)")
      ->group("Cluster");
  app.add_option("--etcd-endpoints", etcd_endpoints,
                 "--membership etcd: HOST:PORT[,HOST:PORT...] of etcd's "
                 "client URLs")
      ->group("Cluster");
  app.add_option("--etcd-prefix", etcd_prefix,
                 "--membership etcd: the cluster's keys in etcd (default "
                 "/bigset/<cluster name>)")
      ->group("Cluster");
  app.add_option("--etcd-tls-dir", etcd_tls_dir,
                 "--membership etcd: TLS to etcd, a directory with ca.pem "
                 "(and client.pem, client.key for etcd's client "
                 "certificate authentication)")
      ->group("Cluster");
  app.add_option("--tls-dir", tls_dir,
                 "peer TLS: a directory with ca.pem, node-<id>.pem and "
                 "node-<id>.key")
      ->group("Peer TLS");
  app.add_option("--tls-ca", c.tls_ca_file, "peer TLS: the cluster's CA (PEM)")
      ->group("Peer TLS");
  app.add_option("--tls-cert", c.tls_cert_file,
                 "peer TLS: this node's certificate, common name node-<id>")
      ->group("Peer TLS");
  app.add_option("--tls-key", c.tls_key_file, "peer TLS: its key")
      ->group("Peer TLS");
  app.add_flag("--plaintext-peers", c.plaintext_peers,
               "plain TCP between nodes (trusted networks and tests only)")
      ->group("Peer TLS");
  app.add_option("--peer-unsent-kib", c.peer_unsent_kib,
                 "the most a peer connection leaves unsent in the kernel, "
                 "so answers overtake a backlog (default 64; 0: no bound)")
      ->group("Cluster");
  app.add_flag("--sync-writes", c.sync_writes,
               "fsync every replica write before acknowledging it")
      ->group("Storage");
  app.add_option("--clock-cache-mib", clock_cache_mib,
                 "memory for cached set clocks (default 64)")
      ->group("Storage");
  app.add_option("--block-cache-mib", block_cache_mib,
                 "memory for LevelDB's cache of table blocks (default 32)")
      ->group("Storage");
  app.add_option("--write-buffer-mib", write_buffer_mib,
                 "LevelDB's memtable; two at most are held (default 4)")
      ->group("Storage");
  app.add_option("--compression", compression,
                 "how table blocks are stored: none (default: a block read "
                 "from disk is not decompressed, so a seek costs about a "
                 "tenth less) or snappy (about 0.6 of the disk)")
      ->group("Storage");
  app.add_option("--presence-filter-mib", filter_mib,
                 "memory for the sets' presence filters, 3 to 10 bytes per "
                 "element; a set whose filter does not fit costs a seek per "
                 "add and per query of a member it lacks (default 16)")
      ->group("Storage");
  app.add_option("--client-tls-cert", c.client_tls_cert_file,
                 "TLS for clients: the server's certificate (PEM)")
      ->group("Clients");
  app.add_option("--client-tls-key", c.client_tls_key_file,
                 "TLS for clients: its key")
      ->group("Clients");
  app.add_option("--client-tls-ca", c.client_tls_ca_file,
                 "TLS for clients: require client certificates signed by "
                 "this CA")
      ->group("Clients");
  app.add_option("--requirepass", c.requirepass,
                 "clients must AUTH with this password")
      ->group("Clients");
  app.add_option("--max-clients", c.max_clients,
                 "connections at once (default 10000)")
      ->group("Clients");
  app.add_option("--max-bulk-bytes", c.limits.max_bulk_bytes,
                 "largest argument (default 64 MiB)")
      ->group("Clients");
  app.add_option("--max-args", c.limits.max_args,
                 "most arguments of one command (default 1048576)")
      ->group("Clients");
  app.add_option("--max-query-buffer-bytes", c.max_query_buffer_bytes,
                 "unparsed bytes a client may send ahead (default 256 MiB)")
      ->group("Clients");
  app.add_option("--smembers-max", c.smembers_max,
                 "SMEMBERS of a larger set is refused: use SSCAN (default "
                 "1000000)")
      ->group("Clients");
  app.add_option("--max-cursors", c.max_cursors,
                 "SSCAN cursors kept; the oldest are forgotten (default "
                 "100000)")
      ->group("Clients");
  app.add_option("--sadd-reply", sadd_reply,
                 "what SADD counts as added: quorum (the members a read "
                 "quorum lacks: exact, one read round trip more) or "
                 "coordinator (those the coordinating replica lacks: "
                 "faster, wrong when it missed a write; default quorum)")
      ->group("Clients");
  app.add_option("--query-hedge-ms", query_hedge_ms,
                 "membership reads ask R replicas, the others after this "
                 "long (a replica found slow is asked last for a second): N "
                 "- R fewer replicas work, but a read waits for the replicas "
                 "it asked rather than the fastest; 0 asks all N at once "
                 "(default 0)")
      ->group("Clients");
  app.add_option("--batch-members", c.batch_members,
                 "members one batch of set commands names at most (default "
                 "4096)")
      ->group("Clients");
  app.add_option("--bulk-read-hedge-ms", bulk_read_hedge_ms,
                 "a batch of SISMEMBER/SMISMEMBER naming 32 members or more "
                 "asks R replicas, the others after this long (a replica "
                 "found slow is asked last for a second): under load N - R "
                 "fewer replicas work for it; 0 asks all N at once "
                 "(default 20)")
      ->group("Clients");
  app.add_option("--batch-depth", c.batch_depth,
                 "batches of one set running at once, reading ahead of the "
                 "write before them (default 2)")
      ->group("Clients");
  app.add_option("--move-stuck-secs", c.move_stuck_secs,
                 "a partition's move that makes no progress this long is "
                 "logged as a warning, with the reason (default 60)")
      ->group("Logging");
  app.add_option("--log-level", log_level, "debug, info, warn or error")
      ->group("Logging");
  app.add_option("--log-file", c.log_file,
                 "log here instead of standard error (SIGHUP reopens it)")
      ->group("Logging");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return ParsedConfig{std::nullopt, app.exit(e)};
  } catch (const CLI::CallForVersion& e) {
    return ParsedConfig{std::nullopt, app.exit(e)};
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    for (char& ch : what) {
      if (ch == '\n') ch = ' ';
    }
    return Fail(what);
  }

  if (c.id == 0) return Fail("--id is required (a node id > 0)");
  if (c.batch_members < 1 || c.batch_members > (1u << 20)) {
    return Fail("--batch-members must be from 1 to 1048576");
  }
  if (c.batch_depth < 1 || c.batch_depth > 64) {
    return Fail("--batch-depth must be from 1 to 64");
  }
  if (c.move_stuck_secs < 1 || c.move_stuck_secs > 86400) {
    return Fail("--move-stuck-secs must be from 1 to 86400");
  }
  if (c.data_dir.empty()) return Fail("--data is required");
  if (!join.empty()) {
    absl::StatusOr<PeerAddress> seed = ParsePeerAddress(join);
    if (!seed.ok()) return Fail(absl::StrCat("bad --join '", join, "'"));
    c.join = *seed;
    if (peer_listen.empty()) return Fail("--join needs --peer-listen");
  } else if (nodes.empty()) {
    return Fail(
        "--node is required (every node: "
        "ID=PEER_HOST:PORT[/CLIENT_HOST:PORT])");
  }
  for (const std::string& entry : nodes) {
    std::pair<std::string, std::string> kv =
        absl::StrSplit(entry, absl::MaxSplits('=', 1));
    std::pair<std::string, std::string> addresses =
        absl::StrSplit(kv.second, absl::MaxSplits('/', 1));
    NodeId node = 0;
    absl::StatusOr<PeerAddress> peer = ParsePeerAddress(addresses.first);
    absl::StatusOr<PeerAddress> client_address =
        addresses.second.empty() ? absl::StatusOr<PeerAddress>(PeerAddress{})
                                 : ParsePeerAddress(addresses.second);
    if (!absl::SimpleAtoi(kv.first, &node) || node == 0 || !peer.ok() ||
        !client_address.ok()) {
      return Fail(absl::StrCat(
          "bad --node '", entry,
          "': expected ID=PEER_HOST:PORT[/CLIENT_HOST:PORT] with ID > 0"));
    }
    NodeAddresses a{*peer, std::nullopt};
    if (!addresses.second.empty()) a.client = *client_address;
    if (!c.nodes.emplace(node, a).second) {
      return Fail(absl::StrCat("--node ", node, " given twice"));
    }
  }
  if (!c.join.has_value() && !c.nodes.contains(c.id)) {
    return Fail(
        absl::StrCat("--id ", c.id, " is not one of the --node entries"));
  }
  absl::StatusOr<PeerAddress> client = ParsePeerAddress(listen);
  if (!client.ok()) return Fail(absl::StrCat("bad --listen '", listen, "'"));
  c.listen = *client;
  if (peer_listen.empty()) {
    c.peer_listen = c.nodes[c.id].peer;
  } else {
    absl::StatusOr<PeerAddress> peer = ParsePeerAddress(peer_listen);
    if (!peer.ok()) {
      return Fail(absl::StrCat("bad --peer-listen '", peer_listen, "'"));
    }
    c.peer_listen = *peer;
    c.peer_listen_given = true;
  }
  if (!c.join.has_value() &&
      (c.n < 1 || static_cast<size_t>(c.n) > c.nodes.size())) {
    return Fail(absl::StrCat("--n must be between 1 and the number of nodes (",
                             c.nodes.size(), ")"));
  }
  if (c.w < 1 || c.w > c.n) return Fail("--w must be between 1 and --n");
  if (c.r < 1 || c.r > c.n) return Fail("--r must be between 1 and --n");
  if (c.ring_size < 1 || c.ring_size > (1u << 16)) {
    return Fail("--ring-size must be between 1 and 65536");
  }
  if (timeout_ms == 0) return Fail("--timeout-ms must be > 0");
  if (c.peer_unsent_kib > (1 << 20)) {
    return Fail("--peer-unsent-kib must be at most 1048576");
  }
  c.timeout_micros = timeout_ms * 1000;
  if (query_hedge_ms > 60'000) {
    return Fail("--query-hedge-ms must be at most 60000");
  }
  c.query_hedge_micros = query_hedge_ms * 1000;
  if (bulk_read_hedge_ms > 60'000) {
    return Fail("--bulk-read-hedge-ms must be at most 60000");
  }
  c.bulk_read_hedge_micros = bulk_read_hedge_ms * 1000;
  c.anti_entropy_interval_micros = ae_interval_ms * 1000;
  if (clock_cache_mib == 0) return Fail("--clock-cache-mib must be > 0");
  c.clock_cache_bytes = clock_cache_mib << 20;
  if (block_cache_mib == 0 || block_cache_mib > (1 << 20) ||
      write_buffer_mib == 0 || write_buffer_mib > 1024 ||
      filter_mib > (1 << 20) || clock_cache_mib > (1 << 20)) {
    return Fail(
        "--block-cache-mib and --write-buffer-mib must be > 0; the "
        "memory sizes at most 1048576 MiB (--write-buffer-mib 1024)");
  }
  c.block_cache_bytes = block_cache_mib << 20;
  c.write_buffer_bytes = write_buffer_mib << 20;
  if (compression != "none" && compression != "snappy") {
    return Fail(
        absl::StrCat("bad --compression '", compression, "': none or snappy"));
  }
  c.snappy_compression = compression == "snappy";
  c.presence_filter_bytes = filter_mib << 20;
  if (c.max_clients == 0) return Fail("--max-clients must be > 0");
  if (c.limits.max_args == 0 || c.limits.max_bulk_bytes == 0) {
    return Fail("--max-args and --max-bulk-bytes must be > 0");
  }
  if (c.max_query_buffer_bytes < (64 << 10)) {
    return Fail("--max-query-buffer-bytes must be at least 65536");
  }
  if (sadd_reply == "quorum" || sadd_reply == "coordinator") {
    c.sadd_reply_from_quorum = sadd_reply == "quorum";
  } else {
    return Fail(absl::StrCat("bad --sadd-reply '", sadd_reply,
                             "': quorum or coordinator"));
  }
  if (!ParseLogLevel(log_level, &c.log_level)) {
    return Fail(absl::StrCat("bad --log-level '", log_level,
                             "': debug, info, warn or error"));
  }

  if (membership == "etcd") {
    c.membership_etcd = true;
    for (absl::string_view e : absl::StrSplit(etcd_endpoints, ',')) {
      e = absl::StripAsciiWhitespace(e);
      if (e.empty()) continue;
      if (!ParsePeerAddress(std::string(e)).ok()) {
        return Fail(
            absl::StrCat("bad --etcd-endpoints entry '", e, "': HOST:PORT"));
      }
      c.etcd_endpoints.emplace_back(e);
    }
    if (c.etcd_endpoints.empty()) {
      return Fail("--membership etcd needs --etcd-endpoints HOST:PORT[,...]");
    }
    c.etcd_prefix =
        etcd_prefix.empty() ? "/bigset/" + c.cluster_name : etcd_prefix;
    if (c.etcd_prefix[0] != '/' || c.etcd_prefix.back() == '/') {
      return Fail("--etcd-prefix must start with '/' and not end with one");
    }
    if (!etcd_tls_dir.empty()) {
      c.etcd_tls_ca_file = etcd_tls_dir + "/ca.pem";
      if (!Readable(c.etcd_tls_ca_file)) {
        return Fail(absl::StrCat("cannot read ", c.etcd_tls_ca_file));
      }
      const std::string cert = etcd_tls_dir + "/client.pem";
      const std::string key = etcd_tls_dir + "/client.key";
      if (Readable(cert) != Readable(key)) {
        return Fail(absl::StrCat("--etcd-tls-dir ", etcd_tls_dir,
                                 ": client.pem and client.key go together"));
      }
      if (Readable(cert)) {
        c.etcd_tls_cert_file = cert;
        c.etcd_tls_key_file = key;
      }
    }
  } else if (membership != "builtin") {
    return Fail(
        absl::StrCat("bad --membership '", membership, "': builtin or etcd"));
  } else if (!etcd_endpoints.empty() || !etcd_prefix.empty() ||
             !etcd_tls_dir.empty()) {
    return Fail("the --etcd-* options need --membership etcd");
  }

  if (!tls_dir.empty()) {
    if (c.tls_ca_file.empty()) c.tls_ca_file = tls_dir + "/ca.pem";
    if (c.tls_cert_file.empty()) {
      c.tls_cert_file = absl::StrCat(tls_dir, "/node-", c.id, ".pem");
    }
    if (c.tls_key_file.empty()) {
      c.tls_key_file = absl::StrCat(tls_dir, "/node-", c.id, ".key");
    }
  }
  const bool any_tls = !c.tls_ca_file.empty() || !c.tls_cert_file.empty() ||
                       !c.tls_key_file.empty();
  if (c.plaintext_peers && any_tls) {
    return Fail("--plaintext-peers and peer TLS files exclude each other");
  }
  if (!c.plaintext_peers) {
    if (!any_tls) {
      return Fail(
          "peer TLS is required: --tls-dir (or --tls-ca, --tls-cert, "
          "--tls-key), or --plaintext-peers on a trusted network");
    }
    for (const std::string* f :
         {&c.tls_ca_file, &c.tls_cert_file, &c.tls_key_file}) {
      if (f->empty())
        return Fail("--tls-ca, --tls-cert and --tls-key go together");
      if (!Readable(*f)) return Fail(absl::StrCat("cannot read ", *f));
    }
  }
  if (c.client_tls_cert_file.empty() != c.client_tls_key_file.empty()) {
    return Fail("--client-tls-cert and --client-tls-key go together");
  }
  if (!c.client_tls_ca_file.empty() && c.client_tls_cert_file.empty()) {
    return Fail("--client-tls-ca needs --client-tls-cert and --client-tls-key");
  }
  for (const std::string* f : {&c.client_tls_cert_file, &c.client_tls_key_file,
                               &c.client_tls_ca_file}) {
    if (!f->empty() && !Readable(*f)) {
      return Fail(absl::StrCat("cannot read ", *f));
    }
  }
  return ParsedConfig{std::move(c), 0};
}

}  // namespace bigset::server
