// TcpTransport::Impl: the transport's connections and their state
// machines, shared by tcp_transport.cc (start, stop, the outbound side)
// and tcp_transport_inbound.cc (accepting, reading and parsing frames).
// Internal to lib/network.
//
// Thread-safety: everything but Stats() runs on the io_context's thread.

#ifndef BIGSET_LIB_NETWORK_TCP_TRANSPORT_IMPL_H_
#define BIGSET_LIB_NETWORK_TCP_TRANSPORT_IMPL_H_

#include <netinet/tcp.h>

#include <algorithm>
#include <asio.hpp>
#include <asio/ssl.hpp>
#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "bigset/core/mutex.h"
#include "bigset/network/tcp_transport.h"
#include "core/string_view_compat.h"
#include "network/framing.h"
#include "network/stream.h"

namespace bigset {
namespace tcp_internal {

// A write gathers at most this many queued frames (and about this many
// bytes): many small messages cross in one system call.
inline constexpr size_t kMaxFramesPerWrite = 256;
// (Less with TcpTransportOptions::unsent_bytes, see MaxBytesPerWrite.)
inline constexpr size_t kMaxBytesPerWrite = 1 << 20;
// The least a write may gather with unsent_bytes set: a TLS record.
inline constexpr size_t kMinBytesPerWrite = 16 << 10;
inline constexpr size_t kReadChunk = 64 << 10;
inline constexpr size_t kMaxHandshakeBytes = framing::kMaxHandshakeBytes;
// See Outbound::woken.
inline constexpr uint64_t kWakeEveryMicros = 1'000'000;

inline uint64_t NowMicros() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace tcp_internal

class TcpTransport::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(asio::io_context* io, NodeId self,
       std::shared_ptr<const AddressBook> addresses,
       TcpTransportOptions options)
      : io_(*io),
        self_(self),
        addresses_(std::move(addresses)),
        options_(std::move(options)),
        acceptor_(io_),
        rng_(std::random_device()()) {}

  absl::Status Start(Receiver receiver);
  void Stop();
  uint16_t port() const { return port_; }
  void SetRingEpoch(uint64_t epoch) { epoch_ = epoch; }
  void Send(NodeId to, std::string bytes);
  void Dial(NodeId to);
  TransportStats Stats() const;

 private:
  // A request's frame and, if it was queued while the peer lagged, the
  // fingerprint of its message (else 0): an identical message is not
  // queued again while this one waits.
  struct QueuedRequest {
    std::string frame;
    uint64_t fingerprint = 0;
  };
  // One peer's outbound connection and send queue.
  struct Outbound {
    explicit Outbound(asio::io_context& io) : timer(io), watchdog(io) {}
    enum class State {
      kIdle,
      kConnecting,
      kReady,
      kBackoff
    } state = State::kIdle;
    NodeId peer = 0;
    std::unique_ptr<tcp_internal::Stream> stream;
    // Incremented at every reset: handlers of an older connection stop.
    uint64_t generation = 0;
    // Whole frames: answers (IsAnswerMessage) go out ahead of the rest.
    std::deque<std::string> answers;
    std::deque<QueuedRequest> queue;
    // The fingerprints of the queue's tracked requests (see Send).
    absl::flat_hash_set<uint64_t> waiting;
    size_t queued_bytes = 0;   // Of both.
    size_t request_bytes = 0;  // Of `queue`.
    // Frames of each queue's front being written (writing = their sum).
    size_t writing = 0;
    size_t writing_answers = 0;
    size_t writing_request_bytes = 0;  // Of the requests among them.
    // A write of what is queued is posted: the frames the node sends in
    // the same turn go with it, in one system call.
    bool flush_posted = false;
    uint64_t write_started = 0;
    uint64_t last_sent = 0;
    uint64_t backoff = 0;
    // An inbound handshake from the peer ended a back-off early (at
    // woken_at): not again until a connection succeeds or kWakeEveryMicros
    // passed. (Address books that lead each node to another than it means
    // would else connect in a ring without pause: each refused
    // connection's handshake wakes the next. And a woken connection that
    // failed, the peer killed during its handshake, must not keep the
    // peer's next start from waking it.)
    bool woken = false;
    uint64_t woken_at = 0;
    std::string handshake_in;  // The peer's answer, as it arrives.
    std::string write_buffer;  // The frames being written, gathered.
    std::vector<char> read_buffer;
    asio::steady_timer timer;     // Back-off, handshake deadline.
    asio::steady_timer watchdog;  // Keep-alives and hung writes.
  };
  // One inbound connection from a peer.
  struct Inbound {
    explicit Inbound(asio::io_context& io) : timer(io) {}
    std::unique_ptr<tcp_internal::Stream> stream;
    bool closed = false;
    bool handshake_done = false;
    NodeId peer = 0;
    std::string buffer;  // Bytes read, not yet parsed.
    std::vector<char> read_buffer;
    uint64_t last_activity = 0;
    std::string reply;  // Our handshake frame, while it is written.
    asio::steady_timer timer;
  };

  std::unique_ptr<tcp_internal::Stream> NewStream();
  void Log(std::string_view line) {
    if (options_.log) options_.log(line);
  }
  void Warn(std::string_view line) {
    if (options_.warn) {
      options_.warn(line);
    } else if (options_.log) {
      // A log-only embedder still sees it flagged.
      options_.log(absl::StrCat("WARNING ", ToAbsl(line)));
    }
  }
  // Whether a connection closed for `why` is a warning (see
  // TcpTransportOptions::warn), not an everyday event.
  static bool IsWarning(std::string_view why);
  PeerStats& StatsOf(NodeId peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(stats_mu_) {
    PeerStats& s = peers_[peer];
    s.node = peer;
    return s;
  }

  // Outbound.
  // The peer's outbound state, made idle if it has none yet.
  std::shared_ptr<Outbound> OutboundTo(NodeId to);
  void Connect(const std::shared_ptr<Outbound>& out);
  void OnConnected(const std::shared_ptr<Outbound>& out);
  void ReadHandshakeReply(const std::shared_ptr<Outbound>& out,
                          uint64_t generation);
  void WatchOutbound(const std::shared_ptr<Outbound>& out, uint64_t generation);
  void WriteSome(const std::shared_ptr<Outbound>& out);
  // Takes the queue's front request out (it was written, or is dropped).
  static void PopRequest(Outbound& out);
  static const std::string& FrameOf(const std::string& f) { return f; }
  static const std::string& FrameOf(const QueuedRequest& r) { return r.frame; }
  void Reset(const std::shared_ptr<Outbound>& out, std::string_view why);

  // Inbound.
  void Accept();
  void ReadInbound(const std::shared_ptr<Inbound>& in);
  // Parses the frames in in->buffer; false if the connection was closed.
  bool ParseInbound(const std::shared_ptr<Inbound>& in);
  void CloseInbound(const std::shared_ptr<Inbound>& in, std::string_view why);
  void WatchInbound(const std::shared_ptr<Inbound>& in);

  // Whether the kernel has backed off retransmitting what `out` sent (lost
  // segments, no acknowledgement for several timeouts in a row).
  static bool RetransmitBackedOff(const std::shared_ptr<Outbound>& out);
  // The most one write gathers (options_.unsent_bytes, bounded).
  size_t MaxBytesPerWrite() const {
    if (options_.unsent_bytes == 0) return tcp_internal::kMaxBytesPerWrite;
    return std::clamp(options_.unsent_bytes, tcp_internal::kMinBytesPerWrite,
                      tcp_internal::kMaxBytesPerWrite);
  }

  asio::io_context& io_;
  const NodeId self_;
  // When each peer's inbound connection last delivered bytes: a peer heard
  // from is alive, whatever its connection from this node looks like.
  std::map<NodeId, uint64_t> last_heard_;
  const std::shared_ptr<const AddressBook> addresses_;
  const TcpTransportOptions options_;
  std::unique_ptr<asio::ssl::context> tls_;
  asio::ip::tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  Receiver receiver_;
  bool stopped_ = true;
  std::atomic<uint64_t> epoch_{0};
  std::mt19937_64 rng_;
  std::map<NodeId, std::shared_ptr<Outbound>> outbound_;
  std::vector<std::weak_ptr<Inbound>> inbound_;

  mutable Mutex stats_mu_;
  std::map<NodeId, PeerStats> peers_ ABSL_GUARDED_BY(stats_mu_);
  TransportStats totals_ ABSL_GUARDED_BY(stats_mu_);
};

}  // namespace bigset

#endif  // BIGSET_LIB_NETWORK_TCP_TRANSPORT_IMPL_H_
