// DaemonConfig: every setting of bigsetd, from its command line and an
// optional configuration file (CLI11 reads both: the file's keys are the
// long option names; the command line wins).
//
// ParseConfig validates everything it can before anything is created on
// disk: a bad or missing setting is one line on standard error and exit
// code 2.

#ifndef BIGSET_TOOLS_BIGSETD_CONFIG_H_
#define BIGSET_TOOLS_BIGSETD_CONFIG_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bigset/net/transport.h"
#include "bigset/network/address_book.h"
#include "cluster_map.h"
#include "log.h"
#include "resp_parser.h"

namespace bigset::server {

struct DaemonConfig {
  NodeId id = 0;
  std::string data_dir;
  // Where clients connect (RESP), and where peers connect.
  PeerAddress listen{"127.0.0.1", 6379};
  PeerAddress peer_listen;
  // Whether --peer-listen was given (else it comes from this node's --node).
  bool peer_listen_given = false;
  // Every node of the cluster and its addresses (this one included); the
  // first ring is these nodes, at epoch 1. Used only when the data
  // directory has no cluster map yet (after that, the map is the truth).
  std::map<NodeId, NodeAddresses> nodes;
  // A new node: fetch the cluster map from this node's client address
  // instead (then an operator adds this node: BIGSET.CLUSTER JOIN).
  std::optional<PeerAddress> join;
  std::string cluster_name = "bigset";
  uint32_t ring_size = 64;
  int n = 3;
  int w = 2;
  int r = 2;
  uint64_t timeout_micros = 2'000'000;
  // Membership reads ask R replicas first (ClusterReadOptions::
  // query_hedge_micros); 0 asks all N at once.
  uint64_t query_hedge_micros = 0;
  // Peer TLS: the CA, this node's certificate and key (or a directory with
  // ca.pem, node-<id>.pem, node-<id>.key); or plain TCP.
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  bool plaintext_peers = false;
  // TcpTransportOptions::unsent_bytes, in KiB.
  uint64_t peer_unsent_kib = 64;
  bool sync_writes = false;
  size_t clock_cache_bytes = 64 << 20;
  // What else the node's memory holds (README, "Memory"): LevelDB's block
  // cache and memtable, and the presence filters of the node's sets.
  size_t block_cache_bytes = 32 << 20;
  size_t write_buffer_bytes = 4 << 20;
  // Snappy for table blocks (--compression). Off by default: a member's
  // seek reads a block of every sorted run, and decompressing the ones the
  // block cache lacks costs more than the disk it saves (docs/BENCHMARKS.md).
  bool snappy_compression = false;
  size_t presence_filter_bytes = 16 << 20;
  uint64_t anti_entropy_interval_micros = 10'000'000;

  // Clients. TLS if a certificate is given; with a CA, clients must
  // present a certificate it signed.
  std::string client_tls_cert_file;
  std::string client_tls_key_file;
  std::string client_tls_ca_file;
  std::string requirepass;
  size_t max_clients = 10'000;
  RespLimits limits;
  // Bytes a client may have sent that are not yet commands (a partial
  // command, or a pipeline ahead of the replies): past it, it is closed.
  size_t max_query_buffer_bytes = 256 << 20;
  // Replies are queued while the client does not read them; past this many
  // bytes the connection stops reading commands until the client catches up.
  size_t output_pause_bytes = 1 << 20;
  // SMEMBERS of a larger set is refused (use SSCAN).
  size_t smembers_max = 1'000'000;
  // SADD counts the members a read quorum lacks (read before the write);
  // false: those the coordinating replica lacks (no read; wrong when that
  // replica missed a write another node coordinated).
  bool sadd_reply_from_quorum = true;
  // Set commands that arrive together run as batches (SetBatcher): at
  // most this many members named per batch, and this many batches of one
  // set at once (each reads ahead of the write before it).
  size_t batch_members = 4096;
  size_t batch_depth = 2;
  // The read of a batch of SISMEMBER/SMISMEMBER naming many members asks
  // R replicas, the others after this long (SetBatcherOptions::
  // bulk_read_hedge_micros); 0 asks all N at once.
  uint64_t bulk_read_hedge_micros = 20'000;
  // A partition's move whose state stays the same this long is a warning
  // in the log (MoveWatch).
  int move_stuck_secs = 60;
  // SSCAN cursors kept (see CursorTable).
  size_t max_cursors = 100'000;
  size_t max_cursor_bytes = 64 << 20;

  // Where ring changes are decided: false, by the node that receives
  // BIGSET.CLUSTER JOIN/LEAVE/REPLACE (pushed to the others); true, by a
  // compare-and-swap in etcd, which every node watches.
  bool membership_etcd = false;
  std::vector<std::string> etcd_endpoints;     // HOST:PORT
  std::string etcd_prefix = "/bigset/bigset";  // /bigset/<cluster name>
  // TLS to etcd (a directory with ca.pem, and for etcd's client-cert-auth
  // client.pem and client.key).
  std::string etcd_tls_ca_file;
  std::string etcd_tls_cert_file;
  std::string etcd_tls_key_file;

  LogLevel log_level = LogLevel::kInfo;
  std::string log_file;
};

// Parses argv. Returns the configuration, or the exit code to exit with
// (0 after --help or --version, 2 after an error, already reported on
// standard error).
struct ParsedConfig {
  std::optional<DaemonConfig> config;
  int exit_code = 0;
};
ParsedConfig ParseConfig(int argc, char** argv);

}  // namespace bigset::server

#endif  // BIGSET_TOOLS_BIGSETD_CONFIG_H_
