#include "bigset/network/tcp_transport.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <utility>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "core/string_view_compat.h"
#include "network/tcp_transport_impl.h"

namespace bigset {

using asio::ip::tcp;
using tcp_internal::CertNode;
using tcp_internal::kMaxFramesPerWrite;
using tcp_internal::kMaxHandshakeBytes;
using tcp_internal::NowMicros;
using tcp_internal::PlainStream;
using tcp_internal::Stream;
using tcp_internal::TlsStream;

absl::Status TcpTransport::Impl::Start(Receiver receiver) {
  if (!options_.plaintext) {
    if (options_.tls_ca_file.empty() || options_.tls_cert_file.empty() ||
        options_.tls_key_file.empty()) {
      return absl::InvalidArgumentError(
          "TLS needs a CA file, a certificate and a key (or plaintext)");
    }
    tls_ = std::make_unique<asio::ssl::context>(asio::ssl::context::tls);
    tls_->set_options(
        asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
        asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
        asio::ssl::context::no_tlsv1_1);
    asio::error_code ec;
    tls_->load_verify_file(options_.tls_ca_file, ec);
    if (!ec) tls_->use_certificate_chain_file(options_.tls_cert_file, ec);
    if (!ec) {
      tls_->use_private_key_file(options_.tls_key_file, asio::ssl::context::pem,
                                 ec);
    }
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrCat("TLS files: ", ec.message()));
    }
    if (SSL_CTX_check_private_key(tls_->native_handle()) != 1) {
      return absl::InvalidArgumentError(
          "the TLS key does not match the certificate");
    }
    const NodeId named =
        CertNode(SSL_CTX_get0_certificate(tls_->native_handle()));
    if (named != self_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "this node's certificate names node ", named, ", not node-", self_,
          " (its subject common name must be \"node-", self_, "\")"));
    }
    tls_->set_verify_mode(asio::ssl::verify_peer |
                          asio::ssl::verify_fail_if_no_peer_cert);
  } else {
    Warn(absl::StrCat("node ", self_,
                      ": plaintext transport, peers are not authenticated"));
  }
  asio::error_code ec;
  const asio::ip::address host =
      asio::ip::make_address(options_.listen_host, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen host '", options_.listen_host,
                     "' is not an IP address: ", ec.message()));
  }
  const tcp::endpoint endpoint(host, options_.listen_port);
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec && options_.socket_buffer_bytes > 0) {
    // Inherited by every accepted connection (and sized before its
    // handshake, which settles the TCP window's scale).
    acceptor_.set_option(asio::socket_base::receive_buffer_size(
                             static_cast<int>(options_.socket_buffer_bytes)),
                         ec);
  }
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options_.listen_host, ":",
                     options_.listen_port, ": ", ec.message()));
  }
  port_ = acceptor_.local_endpoint().port();
  receiver_ = std::move(receiver);
  stopped_ = false;
  Accept();
  Log(absl::StrCat("node ", self_, " listens on ", options_.listen_host, ":",
                   port_, options_.plaintext ? " (plaintext)" : " (TLS)"));
  return absl::OkStatus();
}

void TcpTransport::Impl::Stop() {
  if (stopped_) return;
  stopped_ = true;
  asio::error_code ignored;
  acceptor_.close(ignored);
  for (auto& [peer, out] : outbound_) {
    ++out->generation;
    out->timer.cancel();
    out->watchdog.cancel();
    if (out->stream) out->stream->Close();
  }
  outbound_.clear();
  for (auto& weak : inbound_) {
    if (auto in = weak.lock()) {
      in->closed = true;
      in->timer.cancel();
      in->stream->Close();
    }
  }
  inbound_.clear();
  receiver_ = nullptr;
}

std::unique_ptr<Stream> TcpTransport::Impl::NewStream() {
  if (tls_ != nullptr) return std::make_unique<TlsStream>(io_, *tls_);
  return std::make_unique<PlainStream>(io_);
}

TransportStats TcpTransport::Impl::Stats() const {
  MutexLock lock(&stats_mu_);
  TransportStats out = totals_;
  out.peers.clear();
  for (const auto& [peer, s] : peers_) out.peers.push_back(s);
  return out;
}

// ---- Outbound.

void TcpTransport::Impl::Send(NodeId to, std::string bytes) {
  if (stopped_) return;
  if (to == self_) {
    // Never into the node before Send returns.
    asio::post(io_, [self = shared_from_this(), bytes = std::move(bytes)]() {
      if (!self->stopped_ && self->receiver_) {
        self->receiver_(self->self_, bytes);
      }
    });
    return;
  }
  const std::shared_ptr<Outbound> out = OutboundTo(to);
  const size_t frame = bytes.size() + framing::kHeaderBytes;
  if (out->state == Outbound::State::kIdle && !addresses_->Lookup(to)) {
    MutexLock lock(&stats_mu_);
    ++StatsOf(to).dropped_no_address;
    return;
  }
  // Requests are shed first when the peer falls behind: a lagging peer
  // must still get the answers to its own requests promptly.
  const bool answer = IsAnswerMessage(bytes);
  // One request always fits (whatever its size, up to peer_queue_bytes):
  // the bound sheds a backlog, not large messages.
  if (out->queued_bytes + frame > options_.peer_queue_bytes ||
      (!answer && out->request_bytes > 0 &&
       out->request_bytes + frame > options_.peer_request_queue_bytes)) {
    MutexLock lock(&stats_mu_);
    ++StatsOf(to).dropped_queue_full;
    return;
  }
  // Only while requests back up (the peer does not keep up, or is not
  // connected): else there is nothing to fingerprint against, and the
  // hot path pays no hash.
  uint64_t fingerprint = 0;
  if (!answer &&
      out->request_bytes - out->writing_request_bytes >= MaxBytesPerWrite()) {
    fingerprint = absl::HashOf(bytes) | 1;  // 0 means untracked.
    if (!out->waiting.insert(fingerprint).second) {
      MutexLock lock(&stats_mu_);
      ++StatsOf(to).dropped_duplicates;
      return;
    }
  }
  std::string f;
  f.reserve(frame);
  framing::AppendFrame(framing::Kind::kMessage, bytes, &f);
  out->queued_bytes += f.size();
  if (answer) {
    out->answers.push_back(std::move(f));
  } else {
    out->request_bytes += f.size();
    out->queue.push_back(QueuedRequest{std::move(f), fingerprint});
  }
  {
    MutexLock lock(&stats_mu_);
    StatsOf(to).queued_bytes = out->queued_bytes;
  }
  if (out->state == Outbound::State::kIdle) {
    Connect(out);
  } else if (out->state == Outbound::State::kReady && out->writing == 0 &&
             !out->flush_posted) {
    // Written once the node's current turn is over: what it sends to this
    // peer meanwhile (a query and a write, replies to several requests)
    // goes in the same system call and, with TLS, the same record.
    out->flush_posted = true;
    asio::post(io_, [self = shared_from_this(), out]() {
      out->flush_posted = false;
      if (self->stopped_ || out->state != Outbound::State::kReady) return;
      self->WriteSome(out);
    });
  }
}

std::shared_ptr<TcpTransport::Impl::Outbound> TcpTransport::Impl::OutboundTo(
    NodeId to) {
  std::shared_ptr<Outbound>& slot = outbound_[to];
  if (slot == nullptr) {
    slot = std::make_shared<Outbound>(io_);
    slot->peer = to;
  }
  return slot;
}

void TcpTransport::Impl::Dial(NodeId to) {
  if (stopped_ || to == self_) return;
  const std::shared_ptr<Outbound> out = OutboundTo(to);
  if (out->state == Outbound::State::kIdle ||
      out->state == Outbound::State::kBackoff) {
    Connect(out);  // A back-off's timer is for an older generation.
  }
}

void TcpTransport::Impl::Connect(const std::shared_ptr<Outbound>& out) {
  if (stopped_) return;
  const std::optional<PeerAddress> address = addresses_->Lookup(out->peer);
  out->state = Outbound::State::kConnecting;
  const uint64_t generation = ++out->generation;
  if (!address.has_value()) {
    Reset(out, "no address");
    return;
  }
  out->stream = NewStream();
  out->handshake_in.clear();
  auto resolver = std::make_shared<tcp::resolver>(io_);
  resolver->async_resolve(
      address->host, std::to_string(address->port),
      [self = shared_from_this(), out, generation, resolver](
          const asio::error_code& ec, tcp::resolver::results_type results) {
        if (self->stopped_ || out->generation != generation) return;
        if (ec) {
          self->Reset(out, absl::StrCat("resolve: ", ec.message()));
          return;
        }
        asio::async_connect(
            out->stream->socket(), results,
            [self, out, generation](const asio::error_code& ec,
                                    const tcp::endpoint&) {
              if (self->stopped_ || out->generation != generation) return;
              if (ec) {
                self->Reset(out, absl::StrCat("connect: ", ec.message()));
                return;
              }
              asio::error_code ignored;
              out->stream->socket().set_option(tcp::no_delay(true), ignored);
              out->stream->socket().set_option(
                  asio::socket_base::keep_alive(true), ignored);
              if (self->options_.socket_buffer_bytes > 0) {
                out->stream->socket().set_option(
                    asio::socket_base::send_buffer_size(
                        static_cast<int>(self->options_.socket_buffer_bytes)),
                    ignored);
              }
              if (self->options_.unsent_bytes > 0) {
                // Not an asio option; failure only costs latency.
                const int lowat = static_cast<int>(
                    std::min<size_t>(self->options_.unsent_bytes, 1 << 30));
                setsockopt(out->stream->socket().native_handle(), IPPROTO_TCP,
                           TCP_NOTSENT_LOWAT, &lowat, sizeof(lowat));
              }
              self->OnConnected(out);
            });
      });
  // The whole connection, handshakes included, within the deadline.
  out->timer.expires_after(
      std::chrono::microseconds(options_.handshake_timeout_micros));
  out->timer.async_wait(
      [self = shared_from_this(), out, generation](const asio::error_code& ec) {
        if (ec || self->stopped_ || out->generation != generation) return;
        if (out->state == Outbound::State::kConnecting) {
          self->Reset(out, "handshake timed out");
        }
      });
}

void TcpTransport::Impl::OnConnected(const std::shared_ptr<Outbound>& out) {
  const uint64_t generation = out->generation;
  out->stream->Handshake(
      /*client=*/true,
      [self = shared_from_this(), out, generation](const asio::error_code& ec) {
        if (self->stopped_ || out->generation != generation) return;
        if (ec) {
          {
            MutexLock lock(&self->stats_mu_);
            ++self->totals_.tls_failures;
          }
          self->Reset(out, absl::StrCat("TLS: ", ec.message()));
          return;
        }
        if (self->tls_ != nullptr && out->stream->PeerCertNode() != out->peer) {
          // The address book sent us to another node than we meant.
          {
            MutexLock lock(&self->stats_mu_);
            ++self->totals_.handshakes_refused;
          }
          self->Reset(out, "the peer's certificate names another node");
          return;
        }
        framing::Handshake h;
        h.cluster = self->options_.cluster_name;
        h.node = self->self_;
        h.epoch = self->epoch_.load();
        // Our handshake goes first, ahead of every queued message.
        std::string frame;
        framing::AppendFrame(framing::Kind::kHandshake,
                             framing::EncodeHandshake(h), &frame);
        auto bytes = std::make_shared<std::string>(std::move(frame));
        out->stream->Write(
            {asio::buffer(*bytes)},
            [self, out, generation, bytes](const asio::error_code& ec, size_t) {
              if (self->stopped_ || out->generation != generation) return;
              if (ec) {
                self->Reset(out, absl::StrCat("handshake: ", ec.message()));
                return;
              }
              self->ReadHandshakeReply(out, generation);
            });
      });
}

void TcpTransport::Impl::ReadHandshakeReply(
    const std::shared_ptr<Outbound>& out, uint64_t generation) {
  out->read_buffer.resize(4096);
  out->stream->ReadSome(
      asio::buffer(out->read_buffer),
      [self = shared_from_this(), out, generation](const asio::error_code& ec,
                                                   size_t n) {
        if (self->stopped_ || out->generation != generation) return;
        if (ec) {
          self->Reset(out, out->state == Outbound::State::kReady
                               ? absl::StrCat("closed: ", ec.message())
                               : absl::StrCat("handshake: ", ec.message()));
          return;
        }
        if (out->state == Outbound::State::kReady) {
          // Nothing follows the answer on this connection: a read that
          // completes is the peer closing it, or garbage.
          self->Reset(out, "unexpected bytes from the peer");
          return;
        }
        out->handshake_in.append(out->read_buffer.data(), n);
        if (out->handshake_in.size() < framing::kHeaderBytes) {
          self->ReadHandshakeReply(out, generation);
          return;
        }
        const framing::Header header = framing::ParseHeader(out->handshake_in);
        if (header.kind != static_cast<uint8_t>(framing::Kind::kHandshake) ||
            header.length > kMaxHandshakeBytes) {
          self->Reset(out, "bad handshake answer");
          return;
        }
        if (out->handshake_in.size() < framing::kHeaderBytes + header.length) {
          self->ReadHandshakeReply(out, generation);
          return;
        }
        absl::StatusOr<framing::Handshake> h = framing::DecodeHandshake(
            std::string_view(out->handshake_in)
                .substr(framing::kHeaderBytes, header.length));
        if (!h.ok() || h->version != framing::kVersion ||
            h->cluster != self->options_.cluster_name || h->node != out->peer) {
          {
            MutexLock lock(&self->stats_mu_);
            ++self->totals_.handshakes_refused;
          }
          self->Reset(out, "the peer's handshake does not match");
          return;
        }
        out->timer.cancel();
        out->state = Outbound::State::kReady;
        out->backoff = 0;
        out->woken = false;
        out->last_sent = NowMicros();
        {
          MutexLock lock(&self->stats_mu_);
          PeerStats& s = self->StatsOf(out->peer);
          s.connected = true;
          s.last_error.clear();
          ++s.connects;
        }
        self->Log(absl::StrCat("node ", self->self_, " connected to node ",
                               out->peer));
        self->WatchOutbound(out, generation);
        // Keep reading: the peer closing the connection shows up there.
        self->ReadHandshakeReply(out, generation);
        self->WriteSome(out);
      });
}

void TcpTransport::Impl::WriteSome(const std::shared_ptr<Outbound>& out) {
  if ((out->answers.empty() && out->queue.empty()) || out->writing > 0) {
    return;
  }
  // Gathered into one buffer: a TLS stream writes one record per buffer it
  // is given, so many small frames in one buffer are one record and one
  // system call, not one each. Answers first.
  out->write_buffer.clear();
  size_t frames = 0;
  size_t answers = 0;
  const size_t max_bytes = MaxBytesPerWrite();
  auto gather = [&](const auto& q, size_t* taken, size_t most) {
    for (const auto& entry : q) {
      const std::string& f = FrameOf(entry);
      if (frames == kMaxFramesPerWrite || *taken == most ||
          (frames > 0 && out->write_buffer.size() + f.size() > max_bytes)) {
        return;
      }
      out->write_buffer.append(f);
      ++frames;
      ++*taken;
    }
  };
  size_t requests = 0;
  // Answers go first but take at most half of a write while requests
  // wait: a node busy answering a backlog still gets its own requests
  // through (they are what it coordinates).
  const size_t answer_share =
      out->queue.empty() ? kMaxFramesPerWrite : kMaxFramesPerWrite / 2;
  gather(out->answers, &answers, answer_share);
  gather(out->queue, &requests, kMaxFramesPerWrite);
  out->writing = frames;
  out->writing_answers = answers;
  // Handed to the kernel from now on: a copy sent again must be queued
  // (if this connection fails, the peer may not get these).
  out->writing_request_bytes = 0;
  for (size_t i = 0; i < requests; ++i) {
    QueuedRequest& r = out->queue[i];
    out->writing_request_bytes += r.frame.size();
    if (r.fingerprint != 0) {
      out->waiting.erase(r.fingerprint);
      r.fingerprint = 0;
    }
  }
  out->write_started = NowMicros();
  const uint64_t generation = out->generation;
  out->stream->Write(
      {asio::buffer(out->write_buffer)},
      [self = shared_from_this(), out, generation](const asio::error_code& ec,
                                                   size_t written) {
        if (self->stopped_ || out->generation != generation) return;
        const size_t answers = out->writing_answers;
        const size_t requests = out->writing - answers;
        out->writing = 0;
        out->writing_answers = 0;
        out->writing_request_bytes = 0;
        if (ec) {
          self->Reset(out, absl::StrCat("write: ", ec.message()));
          return;
        }
        size_t messages = answers;
        for (size_t i = 0; i < answers; ++i) {
          out->queued_bytes -= out->answers.front().size();
          out->answers.pop_front();
        }
        for (size_t i = 0; i < requests; ++i) {
          const std::string& f = out->queue.front().frame;
          messages += f[4] == static_cast<char>(framing::Kind::kMessage);
          PopRequest(*out);
        }
        // A backlog's fingerprints leave their table's capacity behind.
        if (out->queue.empty() && out->waiting.capacity() > 1024) {
          out->waiting = {};
        }
        out->last_sent = NowMicros();
        {
          MutexLock lock(&self->stats_mu_);
          PeerStats& s = self->StatsOf(out->peer);
          s.frames_out += messages;
          s.bytes_out += written;
          s.queued_bytes = out->queued_bytes;
        }
        self->WriteSome(out);
      });
}

void TcpTransport::Impl::PopRequest(Outbound& out) {
  const QueuedRequest& r = out.queue.front();
  out.queued_bytes -= r.frame.size();
  out.request_bytes -= r.frame.size();
  if (r.fingerprint != 0) out.waiting.erase(r.fingerprint);
  out.queue.pop_front();
}

bool TcpTransport::Impl::RetransmitBackedOff(
    const std::shared_ptr<Outbound>& out) {
  tcp_info info{};
  socklen_t len = sizeof(info);
  if (getsockopt(out->stream->socket().native_handle(), IPPROTO_TCP, TCP_INFO,
                 &info, &len) != 0) {
    return false;
  }
  // TCP_CA_Loss (4): retransmission timeouts; backoff >= 2: the timeout
  // doubled at least twice, so the next try may be seconds (up to two
  // minutes) away even if the peer reads again now.
  return info.tcpi_ca_state == 4 && info.tcpi_backoff >= 2;
}

void TcpTransport::Impl::WatchOutbound(const std::shared_ptr<Outbound>& out,
                                       uint64_t generation) {
  // Often enough to catch a stalled connection within the stall bound.
  out->watchdog.expires_after(std::chrono::microseconds(
      std::min(options_.keepalive_micros, options_.stall_check_micros)));
  out->watchdog.async_wait([self = shared_from_this(), out,
                            generation](const asio::error_code& ec) {
    if (ec || self->stopped_ || out->generation != generation) return;
    const uint64_t now = NowMicros();
    if (out->writing > 0 &&
        now - out->write_started >= self->options_.idle_timeout_micros) {
      // A hung peer: its socket is open and takes nothing.
      self->Reset(out, "write stalled");
      return;
    }
    // A peer that was frozen or starved while its receive buffer was
    // full: segments were dropped and the kernel's retransmission
    // timer backed off. Once the peer is heard from again (it is
    // alive), a new connection carries the queue at once instead of
    // waiting for the next timeout. What the kernel still held is lost
    // (the protocols retransmit).
    auto heard = self->last_heard_.find(out->peer);
    if (out->state == Outbound::State::kReady &&
        heard != self->last_heard_.end() &&
        now - heard->second < self->options_.stall_check_micros * 4 &&
        RetransmitBackedOff(out)) {
      {
        MutexLock lock(&self->stats_mu_);
        ++self->StatsOf(out->peer).stall_resets;
      }
      self->Reset(out, "retransmissions backed off while the peer is alive");
      return;
    }
    if (out->writing == 0 && out->queue.empty() && out->answers.empty() &&
        now - out->last_sent >= self->options_.keepalive_micros) {
      std::string f;
      framing::AppendFrame(framing::Kind::kKeepAlive, {}, &f);
      out->queued_bytes += f.size();
      out->request_bytes += f.size();
      out->queue.push_back(QueuedRequest{std::move(f), 0});
      self->WriteSome(out);
    }
    self->WatchOutbound(out, generation);
  });
}

void TcpTransport::Impl::Reset(const std::shared_ptr<Outbound>& out,
                               std::string_view why) {
  const bool was_ready = out->state == Outbound::State::kReady;
  ++out->generation;
  out->timer.cancel();
  out->watchdog.cancel();
  if (out->stream != nullptr) out->stream->Close();
  out->writing = 0;  // Frames half-written are sent again (duplicates are
                     // tolerated by the protocols).
  out->writing_answers = 0;
  out->writing_request_bytes = 0;
  // Keep-alives are not worth a reconnect.
  std::erase_if(out->queue, [&](const QueuedRequest& r) {
    const std::string& f = r.frame;
    if (f[4] != static_cast<char>(framing::Kind::kKeepAlive)) return false;
    out->queued_bytes -= f.size();
    out->request_bytes -= f.size();
    return true;
  });
  {
    MutexLock lock(&stats_mu_);
    PeerStats& s = StatsOf(out->peer);
    if (was_ready) ++s.disconnects;
    s.connected = false;
    s.last_error.assign(why);
    s.queued_bytes = out->queued_bytes;
  }
  if (was_ready || out->backoff == 0) {
    const std::string line = absl::StrCat("node ", self_, " lost node ",
                                          out->peer, ": ", ToAbsl(why));
    if (IsWarning(why)) {
      Warn(line);
    } else {
      Log(line);
    }
  }
  if (stopped_) return;
  out->backoff = out->backoff == 0 ? options_.reconnect_min_micros
                                   : std::min(2 * out->backoff,
                                              options_.reconnect_max_micros);
  const uint64_t wait = std::uniform_int_distribution<uint64_t>(
      out->backoff / 2, out->backoff)(rng_);
  out->state = Outbound::State::kBackoff;
  const uint64_t generation = out->generation;
  out->timer.expires_after(std::chrono::microseconds(wait));
  out->timer.async_wait(
      [self = shared_from_this(), out, generation](const asio::error_code& ec) {
        if (ec || self->stopped_ || out->generation != generation) return;
        if (out->queue.empty() && out->answers.empty()) {
          out->state = Outbound::State::kIdle;  // Connect on the next send.
        } else {
          self->Connect(out);
        }
      });
}

TcpTransport::TcpTransport(asio::io_context* io, NodeId self,
                           std::shared_ptr<const AddressBook> addresses,
                           TcpTransportOptions options)
    : impl_(std::make_shared<Impl>(io, self, std::move(addresses),
                                   std::move(options))) {}

TcpTransport::~TcpTransport() { impl_->Stop(); }

absl::Status TcpTransport::Start(Receiver receiver) {
  return impl_->Start(std::move(receiver));
}

void TcpTransport::Stop() { impl_->Stop(); }

uint16_t TcpTransport::port() const { return impl_->port(); }

void TcpTransport::SetRingEpoch(uint64_t epoch) { impl_->SetRingEpoch(epoch); }

void TcpTransport::Send(NodeId from, NodeId to, std::string bytes) {
  (void)from;
  impl_->Send(to, std::move(bytes));
}

void TcpTransport::Dial(NodeId peer) { impl_->Dial(peer); }

TransportStats TcpTransport::Stats() const { return impl_->Stats(); }

}  // namespace bigset
