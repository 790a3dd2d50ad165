// TcpTransport's inbound side: accepting connections, the handshake's
// server half, reading and parsing frames, idle connections.

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/string_view_compat.h"
#include "network/tcp_transport_impl.h"

namespace bigset {

using asio::ip::tcp;
using tcp_internal::kMaxHandshakeBytes;
using tcp_internal::kReadChunk;
using tcp_internal::NowMicros;

// ---- Inbound.

void TcpTransport::Impl::Accept() {
  auto in = std::make_shared<Inbound>(io_);
  in->stream = NewStream();
  acceptor_.async_accept(in->stream->socket(), [self = shared_from_this(), in](
                                                   const asio::error_code& ec) {
    if (self->stopped_) return;
    if (!ec) {
      std::erase_if(self->inbound_, [](const std::weak_ptr<Inbound>& w) {
        return w.expired();
      });
      size_t pending = 0;
      for (const std::weak_ptr<Inbound>& w : self->inbound_) {
        std::shared_ptr<Inbound> other = w.lock();
        pending += other != nullptr && !other->closed && !other->handshake_done;
      }
      if (pending >= self->options_.max_pending_handshakes) {
        {
          MutexLock lock(&self->stats_mu_);
          ++self->totals_.connections_refused;
        }
        asio::error_code ignored;
        in->stream->socket().close(ignored);
        self->Accept();
        return;
      }
      {
        MutexLock lock(&self->stats_mu_);
        ++self->totals_.connections_accepted;
      }
      asio::error_code ignored;
      in->stream->socket().set_option(tcp::no_delay(true), ignored);
      self->inbound_.push_back(in);
      in->last_activity = NowMicros();
      // Everything up to our answer within the handshake deadline.
      in->timer.expires_after(
          std::chrono::microseconds(self->options_.handshake_timeout_micros));
      in->timer.async_wait([self, in](const asio::error_code& ec) {
        if (ec || in->closed || in->handshake_done) return;
        {
          MutexLock lock(&self->stats_mu_);
          ++self->totals_.handshake_timeouts;
        }
        self->CloseInbound(in, "no handshake in time");
      });
      in->stream->Handshake(
          /*client=*/false, [self, in](const asio::error_code& ec) {
            if (in->closed || self->stopped_) return;
            if (ec) {
              {
                MutexLock lock(&self->stats_mu_);
                ++self->totals_.tls_failures;
              }
              self->CloseInbound(in, absl::StrCat("TLS: ", ec.message()));
              return;
            }
            self->ReadInbound(in);
          });
    }
    self->Accept();
  });
}

void TcpTransport::Impl::ReadInbound(const std::shared_ptr<Inbound>& in) {
  in->read_buffer.resize(kReadChunk);
  in->stream->ReadSome(
      asio::buffer(in->read_buffer),
      [self = shared_from_this(), in](const asio::error_code& ec, size_t n) {
        if (in->closed || self->stopped_) return;
        if (ec) {
          self->CloseInbound(in, ec == asio::error::eof
                                     ? std::string("closed by the peer")
                                     : ec.message());
          return;
        }
        in->last_activity = NowMicros();
        if (in->handshake_done) self->last_heard_[in->peer] = in->last_activity;
        in->buffer.append(in->read_buffer.data(), n);
        if (self->ParseInbound(in)) self->ReadInbound(in);
      });
}

bool TcpTransport::Impl::ParseInbound(const std::shared_ptr<Inbound>& in) {
  size_t pos = 0;
  std::string_view data = in->buffer;
  while (data.size() - pos >= framing::kHeaderBytes) {
    const framing::Header header = framing::ParseHeader(data.substr(pos));
    // Before a peer has identified itself, only a handshake, which is
    // small: a long frame from an unknown peer would hold its bytes.
    if (!in->handshake_done && header.length > kMaxHandshakeBytes) {
      {
        MutexLock lock(&stats_mu_);
        ++totals_.frames_too_large;
      }
      CloseInbound(in, absl::StrCat("a first frame of ", header.length,
                                    " bytes: not a handshake"));
      return false;
    }
    if (header.length > options_.max_frame_bytes) {
      {
        MutexLock lock(&stats_mu_);
        ++totals_.frames_too_large;
      }
      CloseInbound(in, absl::StrCat("frame of ", header.length,
                                    " bytes over the bound"));
      return false;
    }
    if (!framing::KnownKind(header.kind) ||
        (!in->handshake_done &&
         header.kind != static_cast<uint8_t>(framing::Kind::kHandshake)) ||
        (in->handshake_done &&
         header.kind == static_cast<uint8_t>(framing::Kind::kHandshake))) {
      {
        MutexLock lock(&stats_mu_);
        ++(in->handshake_done ? totals_.bad_frames
                              : totals_.handshakes_refused);
      }
      CloseInbound(in, "unexpected frame");
      return false;
    }
    if (data.size() - pos - framing::kHeaderBytes < header.length) break;
    const std::string_view payload =
        data.substr(pos + framing::kHeaderBytes, header.length);
    pos += framing::kHeaderBytes + header.length;
    switch (static_cast<framing::Kind>(header.kind)) {
      case framing::Kind::kHandshake: {
        absl::StatusOr<framing::Handshake> h =
            framing::DecodeHandshake(payload);
        std::string why;
        if (!h.ok()) {
          why = "malformed handshake";
        } else if (h->version != framing::kVersion) {
          why = absl::StrCat("framing version ", h->version);
        } else if (h->cluster != options_.cluster_name) {
          why = absl::StrCat("cluster '", h->cluster, "'");
        } else if (tls_ != nullptr && in->stream->PeerCertNode() != h->node) {
          why = absl::StrCat("node ", h->node,
                             " whose certificate names another node");
        } else if (h->node == self_) {
          why = "this node's own id";
        }
        if (!why.empty()) {
          {
            MutexLock lock(&stats_mu_);
            ++totals_.handshakes_refused;
          }
          CloseInbound(in, absl::StrCat("refused: ", why));
          return false;
        }
        in->handshake_done = true;
        in->peer = h->node;
        in->timer.cancel();
        Log(absl::StrCat("node ", self_, " accepted node ", in->peer,
                         " (ring epoch ", h->epoch, ")"));
        framing::Handshake mine;
        mine.cluster = options_.cluster_name;
        mine.node = self_;
        mine.epoch = epoch_.load();
        in->reply.clear();
        framing::AppendFrame(framing::Kind::kHandshake,
                             framing::EncodeHandshake(mine), &in->reply);
        in->stream->Write({asio::buffer(in->reply)},
                          [self = shared_from_this(), in](
                              const asio::error_code& ec, size_t) {
                            if (ec && !in->closed) {
                              self->CloseInbound(in, "handshake answer");
                            }
                          });
        WatchInbound(in);
        // The peer is up (again): a connection to it that waits out a
        // back-off (the peer was down) connects now, so that the peer
        // hears this node's requests at once, not seconds later.
        if (auto out = outbound_.find(in->peer);
            out != outbound_.end() &&
            out->second->state == Outbound::State::kBackoff &&
            (!out->second->woken || NowMicros() - out->second->woken_at >=
                                        tcp_internal::kWakeEveryMicros)) {
          out->second->woken = true;
          out->second->woken_at = NowMicros();
          out->second->backoff = 0;
          Connect(out->second);
        }
        break;
      }
      case framing::Kind::kKeepAlive:
        break;
      case framing::Kind::kMessage: {
        {
          MutexLock lock(&stats_mu_);
          PeerStats& s = StatsOf(in->peer);
          ++s.frames_in;
          s.bytes_in += payload.size() + framing::kHeaderBytes;
        }
        if (receiver_) receiver_(in->peer, payload);
        if (in->closed || stopped_) return false;
        break;
      }
    }
  }
  in->buffer.erase(0, pos);
  return true;
}

void TcpTransport::Impl::WatchInbound(const std::shared_ptr<Inbound>& in) {
  in->timer.expires_after(
      std::chrono::microseconds(options_.idle_timeout_micros));
  in->timer.async_wait([self = shared_from_this(),
                        in](const asio::error_code& ec) {
    if (ec || in->closed || self->stopped_) return;
    if (NowMicros() - in->last_activity >= self->options_.idle_timeout_micros) {
      self->CloseInbound(in, "idle");
      return;
    }
    self->WatchInbound(in);
  });
}

bool TcpTransport::Impl::IsWarning(std::string_view why) {
  for (std::string_view prefix :
       {"TLS:", "refused:", "the peer's", "bad handshake", "a first frame",
        "frame of", "unexpected", "no handshake in time", "handshake timed out",
        "handshake:"}) {
    if (why.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

void TcpTransport::Impl::CloseInbound(const std::shared_ptr<Inbound>& in,
                                      std::string_view why) {
  if (in->closed) return;
  in->closed = true;
  in->timer.cancel();
  in->stream->Close();
  const std::string line =
      absl::StrCat("node ", self_, " closed a connection",
                   in->peer != 0 ? absl::StrCat(" from node ", in->peer) : "",
                   ": ", ToAbsl(why));
  if (IsWarning(why)) {
    Warn(line);
  } else {
    Log(line);
  }
}

}  // namespace bigset
