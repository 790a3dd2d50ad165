// Stream: a byte stream over TCP, plain or TLS, so that the transport's
// connections have one code path for both. Internal to lib/network.
//
// Thread-safety: as Asio's sockets: one strand (here, the io_context's one
// thread) at a time.

#ifndef BIGSET_LIB_NETWORK_STREAM_H_
#define BIGSET_LIB_NETWORK_STREAM_H_

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <functional>
#include <string_view>
#include <utility>
#include <vector>

#include "bigset/net/transport.h"

namespace bigset {
namespace tcp_internal {

using ErrorHandler = std::function<void(const asio::error_code&)>;
using IoHandler = std::function<void(const asio::error_code&, size_t)>;

// The node id a certificate's common name ("node-<id>") names, or 0.
NodeId CertNode(X509* cert);

// A byte stream over TCP, plain or TLS, so that connections have one code
// path for both.
class Stream {
 public:
  virtual ~Stream() = default;
  virtual asio::ip::tcp::socket& socket() = 0;
  // TLS handshake (client or server side); plain streams complete at once.
  virtual void Handshake(bool client, ErrorHandler done) = 0;
  virtual void ReadSome(asio::mutable_buffer buffer, IoHandler done) = 0;
  virtual void Write(std::vector<asio::const_buffer> buffers,
                     IoHandler done) = 0;
  // The node id the peer's certificate names (TLS), 0 if none; plain
  // streams: 0.
  virtual NodeId PeerCertNode() = 0;
  void Close() {
    asio::error_code ignored;
    socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    socket().close(ignored);
  }
};

class PlainStream final : public Stream {
 public:
  explicit PlainStream(asio::io_context& io) : socket_(io) {}
  asio::ip::tcp::socket& socket() override { return socket_; }
  void Handshake(bool, ErrorHandler done) override {
    asio::post(socket_.get_executor(),
               [done = std::move(done)]() { done(asio::error_code()); });
  }
  void ReadSome(asio::mutable_buffer buffer, IoHandler done) override {
    socket_.async_read_some(buffer, std::move(done));
  }
  void Write(std::vector<asio::const_buffer> buffers, IoHandler done) override {
    asio::async_write(socket_, buffers, std::move(done));
  }
  NodeId PeerCertNode() override { return 0; }

 private:
  asio::ip::tcp::socket socket_;
};

class TlsStream final : public Stream {
 public:
  TlsStream(asio::io_context& io, asio::ssl::context& ctx) : stream_(io, ctx) {}
  asio::ip::tcp::socket& socket() override { return stream_.next_layer(); }
  void Handshake(bool client, ErrorHandler done) override {
    stream_.async_handshake(client ? asio::ssl::stream_base::client
                                   : asio::ssl::stream_base::server,
                            std::move(done));
  }
  void ReadSome(asio::mutable_buffer buffer, IoHandler done) override {
    stream_.async_read_some(buffer, std::move(done));
  }
  void Write(std::vector<asio::const_buffer> buffers, IoHandler done) override {
    asio::async_write(stream_, buffers, std::move(done));
  }
  NodeId PeerCertNode() override {
    X509* cert = SSL_get1_peer_certificate(stream_.native_handle());
    const NodeId node = CertNode(cert);
    X509_free(cert);
    return node;
  }

 private:
  asio::ssl::stream<asio::ip::tcp::socket> stream_;
};

}  // namespace tcp_internal
}  // namespace bigset

#endif  // BIGSET_LIB_NETWORK_STREAM_H_
