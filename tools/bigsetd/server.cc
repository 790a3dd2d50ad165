#include "server.h"

#include <sys/resource.h>

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "runner_batch_backend.h"
#include "session.h"

namespace bigset::server {

Server::Server(asio::io_context* io, NodeRunner* runner,
               ClusterMembership* membership, const DaemonConfig* config,
               Logger* log)
    : acceptor_(*io) {
  ctx_.io = io;
  ctx_.runner = runner;
  ctx_.membership = membership;
  ctx_.config = config;
  ctx_.log = log;
  ctx_.cursors = std::make_unique<CursorTable>(
      config->max_cursors, config->max_cursor_bytes, std::random_device{}());
  ctx_.batch_backend = std::make_unique<RunnerBatchBackend>(
      io, runner, config->timeout_micros, config->query_hedge_micros);
  SetBatcherOptions batching;
  batching.read_before_add = config->sadd_reply_from_quorum;
  batching.max_batch_members = config->batch_members;
  batching.max_batches = config->batch_depth;
  batching.timeout_micros = config->timeout_micros;
  // A hedged read reaches some replicas after adds sent with it.
  batching.read_with_write = config->query_hedge_micros == 0;
  batching.bulk_read_hedge_micros = config->bulk_read_hedge_micros;
  ctx_.batcher =
      std::make_unique<SetBatcher>(ctx_.batch_backend.get(), batching);
  ctx_.worker = std::make_unique<Worker>();
  ctx_.membership_worker = std::make_unique<Worker>();
  ctx_.forward_worker = std::make_unique<Worker>();
  ctx_.keyspace_worker = std::make_unique<Worker>();
  ctx_.local_sets_worker = std::make_unique<Worker>();
  ctx_.started = std::chrono::steady_clock::now();
}

Server::~Server() {
  Stop();
  // The workers finish their tasks (they only post results) before the
  // context goes.
  ctx_.local_sets_worker.reset();
  ctx_.keyspace_worker.reset();
  ctx_.forward_worker.reset();
  ctx_.membership_worker.reset();
  ctx_.worker.reset();
}

absl::Status Server::Start() {
  asio::error_code ec;
  const DaemonConfig& c = *ctx_.config;
  if (!c.client_tls_cert_file.empty()) {
    tls_ = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
    tls_->set_options(
        asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
        asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
        asio::ssl::context::no_tlsv1_1);
    tls_->use_certificate_chain_file(c.client_tls_cert_file, ec);
    if (!ec) {
      tls_->use_private_key_file(c.client_tls_key_file, asio::ssl::context::pem,
                                 ec);
    }
    if (!ec && !c.client_tls_ca_file.empty()) {
      // Clients must present a certificate signed by this CA.
      tls_->load_verify_file(c.client_tls_ca_file, ec);
      if (!ec) {
        tls_->set_verify_mode(asio::ssl::verify_peer |
                              asio::ssl::verify_fail_if_no_peer_cert);
      }
    }
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrCat("client TLS: ", ec.message()));
    }
  }
  const asio::ip::address address =
      asio::ip::make_address(ctx_.config->listen.host, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad client address ", ctx_.config->listen.host));
  }
  const asio::ip::tcp::endpoint endpoint(address, ctx_.config->listen.port);
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec)
    acceptor_.set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", ctx_.config->listen.host, ":",
                     ctx_.config->listen.port, ": ", ec.message()));
  }
  ctx_.port = acceptor_.local_endpoint().port();
  Accept();
  return absl::OkStatus();
}

uint16_t Server::port() const { return ctx_.port; }

void Server::Accept() {
  acceptor_.async_accept([this](const asio::error_code& ec,
                                asio::ip::tcp::socket socket) {
    if (stopped_) return;
    if (ec) {
      // Out of descriptors, say: log, and keep accepting (after a pause so
      // that a persistent error does not spin).
      ctx_.log->Warn(absl::StrCat("accept: ", ec.message()));
      auto timer = std::make_shared<asio::steady_timer>(*ctx_.io);
      timer->expires_after(std::chrono::milliseconds(100));
      timer->async_wait([this, timer](const asio::error_code&) {
        if (!stopped_) Accept();
      });
      return;
    }
    ctx_.stats.connections_received.fetch_add(1, std::memory_order_relaxed);
    const uint64_t id = ctx_.next_client_id++;
    auto session =
        std::make_shared<Session>(&ctx_, std::move(socket), id, tls_.get());
    if (ctx_.sessions.size() >= MaxClients()) {
      ctx_.stats.connections_rejected.fetch_add(1, std::memory_order_relaxed);
      session->Refuse();
    } else {
      ctx_.sessions.emplace(id, session);
      session->Start();
    }
    Accept();
  });
}

size_t Server::MaxClients() const {
  // The descriptor limit may change while the daemon runs (prlimit): never
  // take more clients than leave descriptors for the store, the peers and
  // the log, so that accept itself never fails for want of one.
  constexpr rlim_t kReserved = 128;
  rlimit files = {};
  size_t max = ctx_.config->max_clients;
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 &&
      files.rlim_cur != RLIM_INFINITY) {
    const rlim_t room =
        files.rlim_cur > kReserved ? files.rlim_cur - kReserved : 1;
    max = std::min<size_t>(max, static_cast<size_t>(room));
  }
  return max;
}

void Server::Stop() {
  if (stopped_) return;
  stopped_ = true;
  asio::error_code ignored;
  acceptor_.close(ignored);
  std::vector<std::shared_ptr<Session>> open;
  for (const auto& [id, weak] : ctx_.sessions) {
    if (std::shared_ptr<Session> s = weak.lock()) open.push_back(std::move(s));
  }
  for (const std::shared_ptr<Session>& s : open) s->Close();
  ctx_.sessions.clear();
}

}  // namespace bigset::server
