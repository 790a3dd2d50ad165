// Session's connection handling: reads, the command loop, writes.

#include "session.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace bigset::server {

Session::Session(ServerContext* ctx, asio::ip::tcp::socket socket, uint64_t id,
                 asio::ssl::context* tls)
    : ctx_(ctx),
      stream_(std::move(socket), tls),
      handshake_timer_(*ctx->io),
      id_(id),
      parser_(ctx->config->limits),
      authenticated_(ctx->config->requirepass.empty()),
      w_(ctx->config->w),
      r_(ctx->config->r) {
  asio::error_code ec;
  const asio::ip::tcp::endpoint remote = stream_.socket().remote_endpoint(ec);
  if (!ec)
    peer_ = absl::StrCat(remote.address().to_string(), ":", remote.port());
}

Session::~Session() = default;

void Session::Start() {
  asio::error_code ignored;
  stream_.socket().set_option(asio::ip::tcp::no_delay(true), ignored);
  ctx_->log->Debug(absl::StrCat("client ", id_, " connected from ", peer_));
  Handshake();
}

void Session::Handshake() {
  if (!stream_.tls()) {
    MaybeRead();
    return;
  }
  // A client that never finishes its TLS handshake holds a slot: bounded.
  handshake_timer_.expires_after(std::chrono::seconds(10));
  handshake_timer_.async_wait(
      [self = shared_from_this()](const asio::error_code& ec) {
        if (!ec && !self->handshake_done_) self->CloseNow();
      });
  stream_.AsyncHandshake([self =
                              shared_from_this()](const asio::error_code& ec) {
    self->handshake_done_ = true;
    self->handshake_timer_.cancel();
    if (self->closed_) return;
    if (ec) {
      self->ctx_->stats.tls_failures.fetch_add(1, std::memory_order_relaxed);
      self->ctx_->log->Info(absl::StrCat(
          "client ", self->id_, " (", self->peer_, "): TLS: ", ec.message()));
      self->CloseNow();
      return;
    }
    self->MaybeRead();
  });
}

void Session::Refuse() {
  // Over TLS the error could not be read before a handshake: just close.
  if (stream_.tls()) {
    CloseNow();
    return;
  }
  Out().Error("ERR max number of clients reached");
  closing_ = true;
  Flush();
}

void Session::Close() { CloseNow(); }

void Session::CloseNow() {
  if (closed_) return;
  closed_ = true;
  handshake_timer_.cancel();
  stream_.Close();
  ctx_->sessions.erase(id_);
  ctx_->log->Debug(absl::StrCat("client ", id_, " closed"));
}

void Session::MaybeRead() {
  if (reading_ || closed_ || closing_ || input_ended_) return;
  // Back-pressure: no more input while a command runs with more queued,
  // or while the client leaves its replies unread.
  if (out_.size() + writing_.size() >= ctx_->config->output_pause_bytes) return;
  // While a command runs, input queues in the parser: pause early enough
  // that one more read cannot pass the query buffer's limit (a client that
  // pipelines and reads its replies is never cut off).
  const size_t limit = ctx_->config->max_query_buffer_bytes;
  const size_t pause_at = std::min<size_t>(
      64 << 10, limit > read_buf_.size() ? limit - read_buf_.size() : 0);
  if ((busy_ || held_.has_value()) && parser_.buffered() >= pause_at) return;
  reading_ = true;
  stream_.AsyncReadSome(
      asio::buffer(read_buf_),
      [self = shared_from_this()](const asio::error_code& ec, size_t n) {
        self->OnRead(ec, n);
      });
}

void Session::OnRead(const asio::error_code& ec, size_t n) {
  reading_ = false;
  if (closed_) return;
  if (ec) {
    // The client hung up (or the connection broke): what it sent before is
    // still run, in order, as Redis runs every command it has read; a
    // trailing partial command is dropped. Process closes once none is left.
    input_ended_ = true;
    Process();
    return;
  }
  ctx_->stats.net_input_bytes.fetch_add(n, std::memory_order_relaxed);
  parser_.Feed(std::string_view(read_buf_.data(), n));
  if (parser_.buffered() > ctx_->config->max_query_buffer_bytes) {
    ctx_->stats.query_buffer_overflows.fetch_add(1, std::memory_order_relaxed);
    ctx_->log->Warn(absl::StrCat(
        "client ", id_, " (", peer_, ") closed: query buffer over ",
        ctx_->config->max_query_buffer_bytes, " bytes"));
    CloseNow();
    return;
  }
  Process();
}

void Session::Process() {
  if (processing_ || closed_) return;
  processing_ = true;
  while (!closing_ && !closed_) {
    if (output_failed_) out_.clear();  // Nobody can read it.
    if (out_.size() + writing_.size() >= ctx_->config->output_pause_bytes) {
      break;
    }
    if (!held_.has_value() && !parse_error_.has_value()) {
      Args args;
      absl::StatusOr<bool> got = parser_.Next(&args);
      if (!got.ok()) {
        parse_error_ = got.status();
      } else if (!*got) {
        // Nothing more will come: close once every command answered and
        // the replies are written.
        if (input_ended_ && !busy_ && inflight_.empty()) closing_ = true;
        break;
      } else {
        held_ = std::move(args);
      }
    }
    // What comes next waits for the running command, and for the batched
    // ones unless it joins them.
    if (busy_) break;
    if (parse_error_.has_value()) {
      if (!inflight_.empty()) break;
      ctx_->stats.protocol_errors.fetch_add(1, std::memory_order_relaxed);
      ctx_->log->Info(absl::StrCat("client ", id_, " (", peer_,
                                   "): ", parse_error_->message(), "; closed"));
      ReplyError(absl::StrCat("ERR ", parse_error_->message()));
      closing_ = true;
      break;
    }
    if (!inflight_.empty() && !JoinsInflight(*held_)) break;
    Args args = std::move(*held_);
    held_.reset();
    busy_ = true;
    ctx_->stats.commands_processed.fetch_add(1, std::memory_order_relaxed);
    Execute(std::move(args));
  }
  processing_ = false;
  Flush();
  MaybeRead();
}

void Session::Done() {
  CountCommand();
  busy_ = false;
  if (!processing_) Process();
}

void Session::Flush() {
  if (closed_ || write_active_) return;
  if (output_failed_) out_.clear();  // Nobody can read it.
  if (out_.empty()) {
    if (closing_) CloseNow();
    return;
  }
  writing_.swap(out_);
  out_.clear();
  write_active_ = true;
  stream_.AsyncWrite(asio::buffer(writing_), [self = shared_from_this()](
                                                 const asio::error_code& ec,
                                                 size_t n) {
    self->write_active_ = false;
    self->ctx_->stats.net_output_bytes.fetch_add(n, std::memory_order_relaxed);
    self->writing_.clear();
    // A large reply's buffer is not kept by an idle connection.
    if (self->writing_.capacity() > (1 << 20))
      std::string().swap(self->writing_);
    if (self->closed_) return;
    if (ec) {
      // The client is gone, but what it sent before may still be unread in
      // the socket (Linux keeps bytes queued before a reset readable): reads
      // go on until they fail, and every command runs (see OnRead), its
      // reply discarded.
      self->output_failed_ = true;
    }
    // Releasing the output may let paused commands and reads go on.
    self->Process();
  });
}

}  // namespace bigset::server
