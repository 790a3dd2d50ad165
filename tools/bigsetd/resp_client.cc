#include "resp_client.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl_compat.h"

namespace bigset::server {
namespace {

#define BIGSET_SERVER_RETURN(expr) \
  do {                             \
    absl::Status _s = (expr);      \
    if (!_s.ok()) return _s;       \
  } while (0)

using Clock = std::chrono::steady_clock;

class Connection {
 public:
  Connection(int timeout_ms)
      : deadline_(Clock::now() + std::chrono::milliseconds(timeout_ms)) {}
  ~Connection() {
    if (fd_ >= 0) close(fd_);
  }

  absl::Status Connect(const PeerAddress& a) {
    addrinfo hints = {};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const std::string port = absl::StrCat(a.port);
    if (getaddrinfo(a.host.c_str(), port.c_str(), &hints, &found) != 0 ||
        found == nullptr) {
      return absl::UnavailableError(absl::StrCat("cannot resolve ", a.host));
    }
    fd_ =
        socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd_ < 0) {
      freeaddrinfo(found);
      return Failed("socket");
    }
    const int rc = connect(fd_, found->ai_addr, found->ai_addrlen);
    freeaddrinfo(found);
    if (rc != 0 && errno != EINPROGRESS) return Failed("connect");
    if (rc != 0) {
      if (!Wait(POLLOUT)) return absl::UnavailableError("connect timed out");
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        errno = err;
        return Failed("connect");
      }
    }
    return absl::OkStatus();
  }

  absl::Status Send(const std::vector<std::string>& args) {
    std::string out = absl::StrCat("*", args.size(), "\r\n");
    for (const std::string& a : args) {
      absl::StrAppend(&out, "$", a.size(), "\r\n", a, "\r\n");
    }
    size_t at = 0;
    while (at < out.size()) {
      const ssize_t n =
          send(fd_, out.data() + at, out.size() - at, MSG_NOSIGNAL);
      if (n > 0) {
        at += static_cast<size_t>(n);
      } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        if (!Wait(POLLOUT)) return absl::UnavailableError("send timed out");
      } else {
        return Failed("send");
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> Reply(size_t max_bytes) {
    std::string line;
    BIGSET_SERVER_RETURN(ReadLine(&line));
    if (line.empty()) return absl::DataLossError("empty reply");
    const char type = line[0];
    const std::string rest = line.substr(1);
    if (type == '+' || type == ':') return rest;
    if (type == '-') return absl::FailedPreconditionError(rest);
    if (type != '$') return absl::DataLossError("unexpected reply type");
    int64_t len = 0;
    if (!absl::SimpleAtoi(rest, &len) || len < -1 ||
        len > static_cast<int64_t>(max_bytes)) {
      return absl::DataLossError("bad bulk length");
    }
    if (len == -1) return absl::NotFoundError("null reply");
    while (buf_.size() < static_cast<size_t>(len) + 2) {
      BIGSET_SERVER_RETURN(Fill());
    }
    std::string bulk = buf_.substr(0, static_cast<size_t>(len));
    buf_.erase(0, static_cast<size_t>(len) + 2);
    return bulk;
  }

 private:
  absl::Status ReadLine(std::string* line) {
    while (true) {
      const size_t end = buf_.find("\r\n");
      if (end != std::string::npos) {
        *line = buf_.substr(0, end);
        buf_.erase(0, end + 2);
        return absl::OkStatus();
      }
      if (buf_.size() > (64 << 10)) return absl::DataLossError("line too long");
      BIGSET_SERVER_RETURN(Fill());
    }
  }

  absl::Status Fill() {
    char chunk[16 << 10];
    while (true) {
      const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
      if (n > 0) {
        buf_.append(chunk, static_cast<size_t>(n));
        return absl::OkStatus();
      }
      if (n == 0) return absl::UnavailableError("connection closed");
      if (errno != EAGAIN && errno != EINTR) return Failed("recv");
      if (!Wait(POLLIN)) return absl::UnavailableError("reply timed out");
    }
  }

  bool Wait(short events) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline_ - Clock::now())
                          .count();
    if (left <= 0) return false;
    pollfd p = {fd_, events, 0};
    return poll(&p, 1, static_cast<int>(left)) > 0;
  }

  absl::Status Failed(const char* what) {
    return absl::UnavailableError(absl::StrCat(what, ": ", strerror(errno)));
  }

  const Clock::time_point deadline_;
  int fd_ = -1;
  std::string buf_;
};

#undef BIGSET_SERVER_RETURN

}  // namespace

absl::StatusOr<std::string> RespCall(const PeerAddress& address,
                                     const std::string& password,
                                     const std::vector<std::string>& args,
                                     int timeout_ms, size_t max_reply_bytes) {
  Connection c(timeout_ms);
  if (absl::Status s = c.Connect(address); !s.ok()) return s;
  if (!password.empty()) {
    if (absl::Status s = c.Send({"AUTH", password}); !s.ok()) return s;
    absl::StatusOr<std::string> auth = c.Reply(1 << 10);
    if (!auth.ok()) return auth.status();
  }
  if (absl::Status s = c.Send(args); !s.ok()) return s;
  return c.Reply(max_reply_bytes);
}

}  // namespace bigset::server
