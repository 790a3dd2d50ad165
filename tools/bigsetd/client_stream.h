// ClientStream: a client connection, plain TCP or TLS (--client-tls-cert),
// behind one interface so that Session does not care which.
//
// Thread-safety: not thread-safe; used on the server's thread.

#ifndef BIGSET_TOOLS_BIGSETD_CLIENT_STREAM_H_
#define BIGSET_TOOLS_BIGSETD_CLIENT_STREAM_H_

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <optional>
#include <utility>

namespace bigset::server {

class ClientStream {
 public:
  // `tls` null: plain TCP. REQUIRES: `tls` outlives the stream.
  ClientStream(asio::ip::tcp::socket socket, asio::ssl::context* tls) {
    if (tls != nullptr) {
      tls_.emplace(std::move(socket), *tls);
    } else {
      plain_.emplace(std::move(socket));
    }
  }

  bool tls() const { return tls_.has_value(); }
  asio::ip::tcp::socket& socket() {
    return tls_ ? tls_->next_layer() : *plain_;
  }

  // Completes at once for plain TCP.
  template <typename Handler>
  void AsyncHandshake(Handler&& handler) {
    if (tls_) {
      tls_->async_handshake(asio::ssl::stream_base::server,
                            std::forward<Handler>(handler));
    } else {
      asio::post(socket().get_executor(),
                 [h = std::forward<Handler>(handler)]() mutable {
                   h(asio::error_code());
                 });
    }
  }

  template <typename Buffer, typename Handler>
  void AsyncReadSome(const Buffer& buffer, Handler&& handler) {
    if (tls_) {
      tls_->async_read_some(buffer, std::forward<Handler>(handler));
    } else {
      plain_->async_read_some(buffer, std::forward<Handler>(handler));
    }
  }

  template <typename Buffer, typename Handler>
  void AsyncWrite(const Buffer& buffer, Handler&& handler) {
    if (tls_) {
      asio::async_write(*tls_, buffer, std::forward<Handler>(handler));
    } else {
      asio::async_write(*plain_, buffer, std::forward<Handler>(handler));
    }
  }

  // Closes the socket (no TLS close_notify: the peer is gone or misbehaved,
  // or the server stops).
  void Close() {
    asio::error_code ignored;
    socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    socket().close(ignored);
  }

 private:
  std::optional<asio::ssl::stream<asio::ip::tcp::socket>> tls_;
  std::optional<asio::ip::tcp::socket> plain_;
};

}  // namespace bigset::server

#endif  // BIGSET_TOOLS_BIGSETD_CLIENT_STREAM_H_
