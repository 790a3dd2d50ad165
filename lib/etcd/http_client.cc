#include "etcd/http_client.h"

#include <algorithm>
#include <asio.hpp>
#include <asio/ssl.hpp>
#include <chrono>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace bigset::etcd {
namespace {

constexpr size_t kMaxHead = 64 << 10;
constexpr size_t kMaxBody = 16 << 20;
constexpr size_t kReadSize = 16 << 10;

bool IsHex(char c, uint64_t* v) {
  if (c >= '0' && c <= '9') {
    *v = static_cast<uint64_t>(c - '0');
  } else if (c >= 'a' && c <= 'f') {
    *v = static_cast<uint64_t>(c - 'a' + 10);
  } else if (c >= 'A' && c <= 'F') {
    *v = static_cast<uint64_t>(c - 'A' + 10);
  } else {
    return false;
  }
  return true;
}

}  // namespace

absl::Status ChunkedDecoder::Feed(absl::string_view in, std::string* out) {
  auto bad = [](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("bad chunked body: ", why));
  };
  size_t i = 0;
  while (i < in.size()) {
    const char c = in[i];
    switch (state_) {
      case State::kSize: {
        uint64_t v = 0;
        if (!extension_ && IsHex(c, &v)) {
          if (++digits_ > 15) return bad("chunk size too long");
          size_ = size_ * 16 + v;
          ++i;
        } else if (c == '\r') {
          if (digits_ == 0) return bad("no chunk size");
          state_ = State::kSizeLineEnd;
          ++i;
        } else if (c == ';' || extension_) {
          // A chunk extension: ignored up to the line's end.
          if (digits_ == 0) return bad("no chunk size");
          extension_ = true;
          ++i;
        } else {
          return bad("chunk size");
        }
        break;
      }
      case State::kSizeLineEnd:
        if (c != '\n') return bad("chunk size line");
        ++i;
        if (size_ > kMaxChunk) return bad("chunk too large");
        digits_ = 0;
        extension_ = false;
        if (size_ == 0) {
          state_ = State::kTrailer;
          line_.clear();
        } else {
          state_ = State::kData;
        }
        break;
      case State::kData: {
        const size_t take =
            static_cast<size_t>(std::min<uint64_t>(size_, in.size() - i));
        absl::StrAppend(out, in.substr(i, take));
        i += take;
        size_ -= take;
        if (size_ == 0) {
          state_ = State::kDataEnd;
          data_end_seen_ = 0;
        }
        break;
      }
      case State::kDataEnd:
        if (c != (data_end_seen_ == 0 ? '\r' : '\n')) {
          return bad("chunk not followed by CRLF");
        }
        ++i;
        if (++data_end_seen_ == 2) state_ = State::kSize;
        break;
      case State::kTrailer:
        // Trailer fields, each a line, then an empty line.
        ++i;
        if (c == '\n') {
          if (line_ == "\r") {
            state_ = State::kDone;
          } else if (line_.empty() || line_.back() != '\r') {
            return bad("trailer line");
          }
          line_.clear();
        } else {
          if (line_.size() >= kMaxHead) return bad("trailer too long");
          line_.push_back(c);
        }
        break;
      case State::kDone:
        return bad("bytes after the last chunk");
    }
  }
  return absl::OkStatus();
}

// One connection: its own io_context, driven by the calling thread for as
// long as each operation takes (or until its deadline).
class HttpClient::Connection {
 public:
  explicit Connection(const HttpEndpoint& endpoint)
      : endpoint_(endpoint), socket_(io_) {}

  ~Connection() {
    asio::error_code ignored;
    socket().close(ignored);
  }

  absl::Status Open(absl::Time deadline) {
    asio::ip::tcp::resolver resolver(io_);
    asio::ip::tcp::resolver::results_type results;
    asio::error_code ec = Run(
        [&](auto done) {
          resolver.async_resolve(
              endpoint_.host, std::to_string(endpoint_.port),
              [&results, done](const asio::error_code& e,
                               asio::ip::tcp::resolver::results_type r) {
                results = std::move(r);
                done(e, 0);
              });
        },
        deadline, nullptr);
    if (ec) return Failed("resolving", ec);
    if (!endpoint_.ca_file.empty()) {
      if (absl::Status s = SetUpTls(); !s.ok()) return s;
    }
    ec = Run(
        [&](auto done) {
          asio::async_connect(
              socket(), results,
              [done](const asio::error_code& e,
                     const asio::ip::tcp::endpoint&) { done(e, 0); });
        },
        deadline, nullptr);
    if (ec) return Failed("connecting to", ec);
    asio::error_code ignored;
    socket().set_option(asio::ip::tcp::no_delay(true), ignored);
    // A watch waits for hours for its next event: keep-alive probes notice
    // a server machine that went away without closing the connection.
    socket().set_option(asio::socket_base::keep_alive(true), ignored);
    if (tls_ != nullptr) {
      ec = Run(
          [&](auto done) {
            tls_->async_handshake(
                asio::ssl::stream_base::client,
                [done](const asio::error_code& e) { done(e, 0); });
          },
          deadline, nullptr);
      if (ec) return Failed("TLS handshake with", ec);
    }
    return absl::OkStatus();
  }

  absl::Status WriteAll(absl::string_view data, absl::Time deadline) {
    asio::error_code ec = Run(
        [&](auto done) {
          if (tls_ != nullptr) {
            asio::async_write(*tls_, asio::buffer(data.data(), data.size()),
                              done);
          } else {
            asio::async_write(socket_, asio::buffer(data.data(), data.size()),
                              done);
          }
        },
        deadline, nullptr);
    if (ec) return Failed("writing to", ec);
    return absl::OkStatus();
  }

  // Appends what arrives to *buf. Unavailable at the end of the stream.
  absl::Status ReadSome(std::string* buf, absl::Time deadline) {
    char chunk[kReadSize];
    size_t n = 0;
    asio::error_code ec = Run(
        [&](auto done) {
          if (tls_ != nullptr) {
            tls_->async_read_some(asio::buffer(chunk), done);
          } else {
            socket_.async_read_some(asio::buffer(chunk), done);
          }
        },
        deadline, &n);
    buf->append(chunk, n);
    if (ec) {
      if (ec == asio::error::eof || ec == asio::ssl::error::stream_truncated) {
        return absl::UnavailableError(
            absl::StrCat(Name(), " closed the connection"));
      }
      return Failed("reading from", ec);
    }
    return absl::OkStatus();
  }

  // Thread-safe: the operation in progress (or the next) ends.
  void Cancel() {
    cancelled_.store(true);
    asio::post(io_, [this]() {
      asio::error_code ignored;
      socket().close(ignored);
    });
  }

 private:
  asio::ip::tcp::socket& socket() {
    return tls_ != nullptr ? tls_->next_layer() : socket_;
  }

  std::string Name() const {
    return absl::StrCat("etcd at ", endpoint_.host, ":", endpoint_.port);
  }

  absl::Status Failed(absl::string_view what, const asio::error_code& ec) {
    if (cancelled_.load()) return absl::CancelledError("cancelled");
    if (ec == asio::error::timed_out) {
      return absl::DeadlineExceededError(
          absl::StrCat(what, " ", Name(), ": timed out"));
    }
    return absl::UnavailableError(
        absl::StrCat(what, " ", Name(), ": ", ec.message()));
  }

  absl::Status SetUpTls() {
    ssl_ = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
    asio::error_code ec;
    ssl_->set_options(
        asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
            asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
            asio::ssl::context::no_tlsv1_1,
        ec);
    ssl_->load_verify_file(endpoint_.ca_file, ec);
    if (ec) {
      return absl::InvalidArgumentError(absl::StrCat(
          "etcd TLS: CA file ", endpoint_.ca_file, ": ", ec.message()));
    }
    if (!endpoint_.cert_file.empty()) {
      ssl_->use_certificate_chain_file(endpoint_.cert_file, ec);
      if (ec) {
        return absl::InvalidArgumentError(absl::StrCat(
            "etcd TLS: certificate ", endpoint_.cert_file, ": ", ec.message()));
      }
      ssl_->use_private_key_file(endpoint_.key_file, asio::ssl::context::pem,
                                 ec);
      if (ec) {
        return absl::InvalidArgumentError(absl::StrCat(
            "etcd TLS: key ", endpoint_.key_file, ": ", ec.message()));
      }
    }
    ssl_->set_verify_mode(asio::ssl::verify_peer);
    ssl_->set_verify_callback(
        asio::ssl::host_name_verification(endpoint_.host));
    tls_ = std::make_unique<asio::ssl::stream<asio::ip::tcp::socket>>(
        std::move(socket_), *ssl_);
    SSL_set_tlsext_host_name(tls_->native_handle(), endpoint_.host.c_str());
    return absl::OkStatus();
  }

  // Starts an operation and drives the io_context until it completes or
  // `deadline` passes (then closes the socket and reports timed_out).
  template <typename Start>
  asio::error_code Run(Start start, absl::Time deadline, size_t* n) {
    if (cancelled_.load()) return asio::error::operation_aborted;
    asio::error_code result;
    bool done = false;
    start([&](const asio::error_code& ec, size_t bytes) {
      result = ec;
      if (n != nullptr) *n = bytes;
      done = true;
    });
    io_.restart();
    if (deadline == absl::InfiniteFuture()) {
      while (!done && io_.run_one() > 0) {
      }
    } else {
      while (!done) {
        const absl::Duration left = deadline - absl::Now();
        if (left <= absl::ZeroDuration()) break;
        io_.restart();
        if (io_.run_one_for(absl::ToChronoMicroseconds(left)) == 0 &&
            io_.stopped() && !done) {
          io_.restart();
        }
      }
    }
    if (!done) {
      asio::error_code ignored;
      socket().close(ignored);
      io_.restart();
      while (!done && io_.run_one() > 0) {
      }
      return asio::error::timed_out;
    }
    return result;
  }

  const HttpEndpoint endpoint_;
  std::atomic<bool> cancelled_{false};
  asio::io_context io_;
  asio::ip::tcp::socket socket_;
  std::unique_ptr<asio::ssl::context> ssl_;
  std::unique_ptr<asio::ssl::stream<asio::ip::tcp::socket>> tls_;
};

namespace {

struct Head {
  int status = 0;
  bool chunked = false;
  std::optional<uint64_t> length;
};

absl::StatusOr<Head> ParseHead(absl::string_view head) {
  auto bad = [](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("bad HTTP answer: ", why));
  };
  std::vector<absl::string_view> lines = absl::StrSplit(head, "\r\n");
  if (lines.empty()) return bad("empty");
  std::vector<absl::string_view> first =
      absl::StrSplit(lines[0], absl::MaxSplits(' ', 2));
  Head h;
  if (first.size() < 2 || !absl::StartsWith(first[0], "HTTP/1.") ||
      !absl::SimpleAtoi(first[1], &h.status) || h.status < 100 ||
      h.status > 999) {
    return bad("status line");
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    absl::string_view line = lines[i];
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    const std::string name = absl::AsciiStrToLower(line.substr(0, colon));
    absl::string_view value =
        absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (name == "transfer-encoding") {
      h.chunked = absl::StrContains(absl::AsciiStrToLower(value), "chunked");
    } else if (name == "content-length") {
      uint64_t v = 0;
      if (!absl::SimpleAtoi(value, &v)) return bad("content-length");
      h.length = v;
    }
  }
  return h;
}

std::string Request(const HttpEndpoint& e, absl::string_view path,
                    absl::string_view body) {
  return absl::StrCat("POST ", path, " HTTP/1.1\r\nHost: ", e.host, ":", e.port,
                      "\r\nContent-Type: application/json\r\n"
                      "Connection: close\r\nContent-Length: ",
                      body.size(), "\r\n\r\n", body);
}

}  // namespace

HttpClient::HttpClient(HttpEndpoint endpoint)
    : endpoint_(std::move(endpoint)) {}

HttpClient::~HttpClient() = default;

void HttpClient::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  if (active_ != nullptr) active_->Cancel();
}

absl::Status HttpClient::Exchange(absl::string_view path,
                                  absl::string_view body,
                                  absl::Time head_deadline,
                                  absl::Time body_deadline, int* status,
                                  const BodyCallback& on_body) {
  Connection conn(endpoint_);
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_) return absl::CancelledError("cancelled");
    active_ = &conn;
  }
  struct Unregister {
    HttpClient* client;
    ~Unregister() {
      absl::MutexLock lock(&client->mu_);
      client->active_ = nullptr;
    }
  } unregister{this};

  if (absl::Status s = conn.Open(head_deadline); !s.ok()) return s;
  if (absl::Status s =
          conn.WriteAll(Request(endpoint_, path, body), head_deadline);
      !s.ok()) {
    return s;
  }
  std::string buf;
  size_t head_end = std::string::npos;
  while ((head_end = buf.find("\r\n\r\n")) == std::string::npos) {
    if (buf.size() > kMaxHead) {
      return absl::InvalidArgumentError("HTTP answer's head too long");
    }
    if (absl::Status s = conn.ReadSome(&buf, head_deadline); !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<Head> head =
      ParseHead(absl::string_view(buf).substr(0, head_end));
  if (!head.ok()) return head.status();
  *status = head->status;
  buf.erase(0, head_end + 4);

  ChunkedDecoder chunked;
  uint64_t received = 0;
  std::string decoded;
  while (true) {
    if (!buf.empty()) {
      absl::string_view piece = buf;
      if (head->chunked) {
        decoded.clear();
        if (absl::Status s = chunked.Feed(buf, &decoded); !s.ok()) return s;
        piece = decoded;
      } else if (head->length.has_value()) {
        if (received + buf.size() > *head->length) {
          return absl::InvalidArgumentError("HTTP body longer than announced");
        }
      }
      received += buf.size();
      if (!piece.empty()) {
        if (absl::Status s = on_body(piece); !s.ok()) return s;
      }
      buf.clear();
    }
    if ((head->chunked && chunked.done()) ||
        (!head->chunked && head->length.has_value() &&
         received == *head->length)) {
      return absl::OkStatus();
    }
    absl::Status s = conn.ReadSome(&buf, body_deadline);
    if (!s.ok()) {
      // Neither chunked nor sized: the body ends with the connection.
      if (absl::IsUnavailable(s) && buf.empty() && !head->chunked &&
          !head->length.has_value()) {
        return absl::OkStatus();
      }
      if (buf.empty()) {
        return absl::IsUnavailable(s)
                   ? absl::UnavailableError(absl::StrCat(
                         "the answer was cut short: ", s.message()))
                   : s;
      }
    }
  }
}

absl::StatusOr<HttpClient::Response> HttpClient::Post(absl::string_view path,
                                                      absl::string_view body,
                                                      absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  Response response;
  absl::Status s =
      Exchange(path, body, deadline, deadline, &response.status,
               [&](absl::string_view piece) -> absl::Status {
                 if (response.body.size() + piece.size() > kMaxBody) {
                   return absl::InvalidArgumentError("HTTP answer too large");
                 }
                 absl::StrAppend(&response.body, piece);
                 return absl::OkStatus();
               });
  if (!s.ok()) return s;
  return response;
}

absl::Status HttpClient::PostStream(absl::string_view path,
                                    absl::string_view body,
                                    absl::Duration timeout,
                                    const LineCallback& on_line) {
  int status = 0;
  std::string line;
  std::string error_body;
  absl::Status s = Exchange(
      path, body, absl::Now() + timeout, absl::InfiniteFuture(), &status,
      [&](absl::string_view piece) -> absl::Status {
        if (status != 200) {
          absl::StrAppend(
              &error_body,
              piece.substr(0,
                           kMaxHead - std::min(kMaxHead, error_body.size())));
          return absl::OkStatus();
        }
        while (!piece.empty()) {
          const size_t nl = piece.find('\n');
          const absl::string_view part = piece.substr(0, nl);
          if (line.size() + part.size() > kMaxBody) {
            return absl::InvalidArgumentError("streamed line too long");
          }
          absl::StrAppend(&line, part);
          if (nl == absl::string_view::npos) break;
          if (!line.empty()) {
            if (absl::Status r = on_line(line); !r.ok()) return r;
          }
          line.clear();
          piece.remove_prefix(nl + 1);
        }
        return absl::OkStatus();
      });
  if (!s.ok()) return s;
  if (status != 200) {
    return absl::UnavailableError(
        absl::StrCat("HTTP ", status, " from etcd: ", error_body));
  }
  return absl::UnavailableError("etcd ended the stream");
}

}  // namespace bigset::etcd
