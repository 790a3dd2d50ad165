// HttpClient: HTTP/1.1 POSTs to one server, plain or over TLS, each on a
// connection of its own, with a deadline; and a POST whose answer streams
// (etcd's watch), handed over line by line. Just what etcd's JSON gateway
// needs: no redirects, no proxies, no cookies. Internal to lib/etcd.
//
// Thread-safety: one request at a time per object; Cancel may be called
// from any thread.

#ifndef BIGSET_LIB_ETCD_HTTP_CLIENT_H_
#define BIGSET_LIB_ETCD_HTTP_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace bigset::etcd {

struct HttpEndpoint {
  std::string host;
  uint16_t port = 0;
  // TLS when ca_file is set: the server's certificate must chain to it and
  // name `host`; cert_file and key_file (if set) are this client's.
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};

// Decodes a chunked body (RFC 9112 7.1) fed in pieces of any size.
class ChunkedDecoder {
 public:
  // Appends the body bytes in `in` to *out. InvalidArgument on a malformed
  // stream or a chunk over `max_chunk` bytes.
  absl::Status Feed(absl::string_view in, std::string* out);
  // The last (empty) chunk and its trailer were read.
  bool done() const { return state_ == State::kDone; }

 private:
  enum class State { kSize, kSizeLineEnd, kData, kDataEnd, kTrailer, kDone };
  static constexpr uint64_t kMaxChunk = uint64_t{64} << 20;
  State state_ = State::kSize;
  uint64_t size_ = 0;
  int digits_ = 0;
  bool extension_ = false;
  std::string line_;  // Trailer line being read.
  int data_end_seen_ = 0;
};

class HttpClient {
 public:
  explicit HttpClient(HttpEndpoint endpoint);
  ~HttpClient();

  struct Response {
    int status = 0;
    std::string body;
  };
  // POSTs `body` (JSON) to `path`; the whole answer within `timeout`.
  // Unavailable if the server cannot be reached or hangs up before
  // answering, DeadlineExceeded past the timeout (the server may have
  // acted on the request), InvalidArgument on a malformed answer.
  absl::StatusOr<Response> Post(absl::string_view path, absl::string_view body,
                                absl::Duration timeout);

  // POSTs `body` to `path` and hands each line of the answer's body to
  // `on_line` as it arrives (connecting and the answer's head within
  // `timeout`; the body without a deadline), until `on_line` returns an
  // error (returned), the server ends the answer or the connection
  // (Unavailable), or Cancel (Cancelled).
  using LineCallback = std::function<absl::Status(absl::string_view line)>;
  absl::Status PostStream(absl::string_view path, absl::string_view body,
                          absl::Duration timeout, const LineCallback& on_line);

  // Ends the request in progress, and every later one, with Cancelled.
  void Cancel();

 private:
  class Connection;
  using BodyCallback = std::function<absl::Status(absl::string_view piece)>;
  // One request on a new connection: the answer's status in *status, its
  // body (de-chunked) to `on_body` piece by piece; OK once the body ended.
  absl::Status Exchange(absl::string_view path, absl::string_view body,
                        absl::Time head_deadline, absl::Time body_deadline,
                        int* status, const BodyCallback& on_body);
  const HttpEndpoint endpoint_;
  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  Connection* active_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace bigset::etcd

#endif  // BIGSET_LIB_ETCD_HTTP_CLIENT_H_
