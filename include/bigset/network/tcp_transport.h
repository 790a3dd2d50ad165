// TcpTransport: the production Transport, TCP on standalone Asio with
// mutual TLS between nodes (docs/ARCHITECTURE.md, "Network").
//
// Each node listens on one port for its peers and keeps one outbound
// connection per peer, made on first use (address from an AddressBook) and
// remade after a failure with exponential back-off and jitter. A connection
// carries frames one way, from the node that made it: a frame is a 32-bit
// big-endian length, a kind byte (message, handshake, keep-alive) and the
// payload; a message frame carries one encoded message (which has its own
// CRC32C). Both sides first exchange a handshake frame (framing version,
// cluster name, node id, ring epoch): the accepting side refuses another
// cluster name, another framing version, or a node id that is not the one
// its TLS certificate names; the connecting side refuses an answer from
// another node than the one it meant to reach. Only then does the
// accepting side hand messages to its node.
//
// Security: by default every connection is mutual TLS (TLS 1.2 or later):
// each node presents a certificate signed by the cluster's CA whose subject
// common name is "node-<id>", and accepts only peers with such a
// certificate. Plain TCP only with TcpTransportOptions::plaintext (logged
// as a warning when the transport starts).
//
// Limits: a frame larger than max_frame_bytes, a handshake that does not
// arrive within handshake_timeout_micros, bad handshake bytes or a TLS
// failure close the connection and are counted; the node never sees those
// bytes. Each peer's send queue holds at most peer_queue_bytes: past it new
// messages to that peer are dropped and counted (the protocols tolerate
// loss), so a slow or dead peer never blocks the others or grows memory
// without bound. Answers (IsAnswerMessage) are sent ahead of requests (at
// most half of each write while requests wait), and
// requests may fill only peer_request_queue_bytes of it (the rest is kept
// for answers): a peer that falls behind on requests (frozen, restarted,
// short of CPU or disk) is shed requests, not answers, so it keeps hearing
// the answers to its own and keeps coordinating; what it missed comes back
// through hints and anti-entropy. (A smaller bound sheds sooner, and also
// the bulk requests of a peer that is merely busy: retransmissions then
// cost more than the queue did.) unsent_bytes bounds what the sender's
// kernel holds unsent (and socket_buffer_bytes, off by default, what both
// ends' kernels hold), so that backlogs stay in these queues, where answers
// can overtake them. A connection whose write does not finish
// within idle_timeout_micros (a hung peer whose socket is open and silent) is
// closed and made again; an inbound connection that carries nothing, not
// even a keep-alive, for as long is closed too.
//
// Thread-safety: Start, Send and the receiver run on the thread that runs
// the io_context given at construction; REQUIRES that exactly one thread
// runs it. Stats may be called from any thread.

#ifndef BIGSET_NETWORK_TCP_TRANSPORT_H_
#define BIGSET_NETWORK_TCP_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "bigset/export.h"
#include "bigset/net/transport.h"
#include "bigset/network/address_book.h"

namespace asio {
class io_context;
}  // namespace asio

namespace bigset {

struct TcpTransportOptions {
  // Peers with another cluster name are refused.
  std::string cluster_name = "bigset";
  // Where this node listens for its peers. Port 0 takes a free port
  // (TcpTransport::port tells which).
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = 0;
  // Mutual TLS: PEM files of the cluster's CA certificate, this node's
  // certificate (common name "node-<id>", signed by the CA) and its key.
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  // Plain TCP, no TLS: only for tests and trusted networks.
  bool plaintext = false;
  size_t max_frame_bytes = 64 << 20;
  uint64_t handshake_timeout_micros = 5'000'000;
  // Inbound connections still in their handshakes (TLS or ours) at once:
  // past it a new connection is closed at once and counted, so a flood of
  // connections that never identify themselves costs bounded memory.
  // Connections of identified peers do not count.
  size_t max_pending_handshakes = 64;
  size_t peer_queue_bytes = 64 << 20;
  size_t peer_request_queue_bytes = 48 << 20;
  // SO_SNDBUF of outbound and SO_RCVBUF of inbound connections; 0 leaves
  // the kernel's (autotuned to several MiB). Small buffers (256 KiB) keep a
  // lagging peer's backlog in the queues above, where answers overtake it
  // (a node frozen 10 s under synced writes coordinated 0.4-1.0 s after
  // waking instead of 1.6-3.5 s), but slow large messages to a busy peer.
  size_t socket_buffer_bytes = 0;
  // TCP_NOTSENT_LOWAT of outbound connections, and about the most one
  // write hands the kernel: bytes the kernel holds unsent towards a peer
  // that does not read (frozen, busy) stay at most about this, so that
  // when it reads again the answers it waits for (which overtake requests
  // in this transport's queue, never in the kernel's) are this close to
  // the front. 0: no bound (the kernel may hold megabytes, and a woken
  // peer reads them all before its answers). Bytes in flight on the wire
  // are not bounded by it, so bulk transfers keep their speed.
  size_t unsent_bytes = 64 << 10;
  // A connection idle this long sends a keep-alive frame.
  uint64_t keepalive_micros = 2'000'000;
  // See the header comment; keep it well above keepalive_micros.
  uint64_t idle_timeout_micros = 15'000'000;
  // How often a connection is checked for a stall the kernel will not end
  // soon: lost segments whose retransmission timer has backed off (a peer
  // frozen with a full receive buffer, then awake). If the peer was heard
  // from meanwhile, the connection is made again (counted: stall_resets).
  uint64_t stall_check_micros = 250'000;
  // Reconnect back-off: from min, doubled at each failure up to max, with
  // jitter (uniform in [half, whole] of it).
  uint64_t reconnect_min_micros = 50'000;
  uint64_t reconnect_max_micros = 5'000'000;
  // One line per event (connections made and lost, refusals, drops);
  // nullptr: no log.
  std::function<void(std::string_view line)> log;
  // The events an operator must see (a peer that may be misconfigured or
  // hostile: TLS failures, refused handshakes, frames that break the
  // protocol; plain TCP between nodes): nullptr sends them to `log`,
  // prefixed "WARNING ".
  std::function<void(std::string_view line)> warn;
};

// Counters of one peer (its outbound connection from this node, and the
// inbound connections from it).
struct PeerStats {
  NodeId node = 0;
  bool connected = false;  // Outbound, handshake done.
  uint64_t connects = 0;
  uint64_t disconnects = 0;
  uint64_t frames_out = 0;
  uint64_t bytes_out = 0;
  uint64_t frames_in = 0;
  uint64_t bytes_in = 0;
  // Messages dropped because the peer's send queue was full, or because
  // the peer has no address.
  uint64_t dropped_queue_full = 0;
  uint64_t dropped_no_address = 0;
  // Requests not queued because an identical copy (a retransmission's
  // earlier send) still waited in the queue, unsent: see Send.
  uint64_t dropped_duplicates = 0;
  uint64_t queued_bytes = 0;  // Now.
  // Connections made again because their retransmissions backed off while
  // the peer was alive (TcpTransportOptions::stall_check_micros).
  uint64_t stall_resets = 0;
  // Why the last outbound connection failed or was lost (empty once one
  // succeeds): "connect: Connection refused", "TLS: certificate verify
  // failed", "the peer's handshake does not match", ...
  std::string last_error;
};

struct TransportStats {
  std::vector<PeerStats> peers;  // By node id.
  // Inbound connections closed before they delivered anything: a frame
  // over max_frame_bytes or of an unknown kind, a bad or refused handshake,
  // a TLS failure, no handshake in time.
  uint64_t frames_too_large = 0;
  uint64_t bad_frames = 0;
  uint64_t handshakes_refused = 0;
  uint64_t tls_failures = 0;
  uint64_t handshake_timeouts = 0;
  uint64_t connections_accepted = 0;
  // Closed at once: max_pending_handshakes were pending.
  uint64_t connections_refused = 0;
};

class BIGSET_EXPORT TcpTransport final : public Transport {
 public:
  // Called with every message a peer sends, on the io_context's thread.
  using Receiver = std::function<void(NodeId from, std::string_view bytes)>;

  // REQUIRES: `io` and `addresses` outlive the transport.
  TcpTransport(asio::io_context* io, NodeId self,
               std::shared_ptr<const AddressBook> addresses,
               TcpTransportOptions options);
  ~TcpTransport() override;
  TcpTransport(const TcpTransport&) = delete;
  TcpTransport& operator=(const TcpTransport&) = delete;

  // Loads the TLS files and starts listening. InvalidArgument for missing
  // TLS files (unless plaintext), Unavailable if the port cannot be bound.
  absl::Status Start(Receiver receiver);
  // Closes every connection and the listener; later sends are dropped.
  void Stop();
  // The port this node listens on (after Start).
  uint16_t port() const;
  // The ring epoch this node tells its peers in handshakes.
  void SetRingEpoch(uint64_t epoch);

  // Transport. Called on the io_context's thread. While more than one
  // write's worth of requests waits for `to` (it does not keep up), a
  // request identical to one still waiting is not queued again (counted:
  // dropped_duplicates): a retransmission would only follow its own
  // earlier copy, which the peer has not yet been sent.
  void Send(NodeId from, NodeId to, std::string bytes) override;
  // Connects to `peer` now (its address from the address book), unless it
  // is connected or connecting: a connection that waits out a back-off
  // tries at once. Stats() then shows whether the handshake completed
  // (PeerStats::connected) or why not (last_error). For a check that a
  // node can reach another before it is given work (a join). Called on
  // the io_context's thread.
  void Dial(NodeId peer);

  TransportStats Stats() const;

 private:
  class Impl;
  // Shared with the pending Asio handlers, which keep it alive until they
  // run (or the io_context is destroyed).
  std::shared_ptr<Impl> impl_;
};

}  // namespace bigset

#endif  // BIGSET_NETWORK_TCP_TRANSPORT_H_
