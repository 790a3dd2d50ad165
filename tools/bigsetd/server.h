// Server: bigsetd's client side. Accepts Redis clients on one port and
// runs their commands against the node (a NodeRunner) of this process.
//
// Everything here runs on one thread, the one that runs `io`: the
// acceptor, every connection (Session) and the completions of the node's
// requests, which the node's thread posts back. Calls that would wait for
// the node's thread (statistics, verification) run on a worker thread, so
// that a slow one never stalls the clients.
//
// Thread-safety: not thread-safe; call Start and Stop on `io`'s thread (or
// before it runs).

#ifndef BIGSET_TOOLS_BIGSETD_SERVER_H_
#define BIGSET_TOOLS_BIGSETD_SERVER_H_

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <cstdint>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "bigset/network/node_runner.h"
#include "config.h"
#include "server_context.h"

namespace bigset::server {

class Session;

class Server {
 public:
  // REQUIRES: every argument outlives the server.
  Server(asio::io_context* io, NodeRunner* runner,
         ClusterMembership* membership, const DaemonConfig* config,
         Logger* log);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the client port and starts accepting.
  absl::Status Start();
  uint16_t port() const;
  // Stops accepting and closes every connection (replies in flight are
  // dropped). Idempotent.
  void Stop();

 private:
  void Accept();
  // --max-clients, or fewer if the descriptor limit leaves less room.
  size_t MaxClients() const;

  ServerContext ctx_;
  asio::ip::tcp::acceptor acceptor_;
  std::unique_ptr<asio::ssl::context> tls_;  // Client TLS, if configured.
  bool stopped_ = false;
};

}  // namespace bigset::server

#endif  // BIGSET_TOOLS_BIGSETD_SERVER_H_
