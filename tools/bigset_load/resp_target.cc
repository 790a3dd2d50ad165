// A RESP server (bigsetd or redis-server), one blocking connection per
// worker, one request at a time (latency is per request).

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "target.h"

namespace bigset::load {
namespace {

// One reply, as far as the load needs it.
struct Reply {
  char type = 0;     // '+', '-', ':', '$', '*', or '_' (null).
  std::string text;  // Simple, error, bulk; integer digits.
  int64_t integer = 0;
  std::vector<Reply> items;
};

class Connection {
 public:
  ~Connection() {
    if (fd_ >= 0) close(fd_);
  }

  absl::Status Connect(const std::string& host, const std::string& port) {
    addrinfo hints = {};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) {
      return absl::UnavailableError("cannot resolve " + host);
    }
    fd_ = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int rc =
        fd_ < 0 ? -1 : connect(fd_, found->ai_addr, found->ai_addrlen);
    freeaddrinfo(found);
    if (rc != 0) {
      return absl::UnavailableError(absl::StrCat("connect: ", strerror(errno)));
    }
    timeval tv = {30, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return absl::OkStatus();
  }

  absl::StatusOr<Reply> Call(const std::vector<std::string_view>& args) {
    out_.clear();
    absl::StrAppend(&out_, "*", args.size(), "\r\n");
    for (std::string_view a : args) {
      absl::StrAppend(&out_, "$", a.size(), "\r\n");
      out_.append(a.data(), a.size());
      out_.append("\r\n");
    }
    size_t at = 0;
    while (at < out_.size()) {
      const ssize_t n =
          send(fd_, out_.data() + at, out_.size() - at, MSG_NOSIGNAL);
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        return absl::UnavailableError(absl::StrCat("send: ", strerror(errno)));
      }
      at += static_cast<size_t>(n);
    }
    Reply r;
    if (absl::Status s = Read(&r); !s.ok()) return s;
    if (r.type == '-') return absl::InternalError(r.text);
    return r;
  }

 private:
  absl::Status Fill() {
    if (pos_ > 0 && pos_ == in_.size()) {
      in_.clear();
      pos_ = 0;
    }
    char chunk[64 << 10];
    while (true) {
      const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
      if (n > 0) {
        in_.append(chunk, static_cast<size_t>(n));
        return absl::OkStatus();
      }
      if (n < 0 && errno == EINTR) continue;
      return absl::UnavailableError(
          n == 0 ? "connection closed"
                 : absl::StrCat("recv: ", strerror(errno)));
    }
  }

  absl::Status Line(std::string* line) {
    while (true) {
      const size_t end = in_.find("\r\n", pos_);
      if (end != std::string::npos) {
        line->assign(in_, pos_, end - pos_);
        pos_ = end + 2;
        return absl::OkStatus();
      }
      if (absl::Status s = Fill(); !s.ok()) return s;
    }
  }

  absl::Status Read(Reply* r) {
    std::string line;
    if (absl::Status s = Line(&line); !s.ok()) return s;
    if (line.empty()) return absl::DataLossError("empty reply line");
    r->type = line[0];
    r->text = line.substr(1);
    switch (r->type) {
      case '+':
      case '-':
        return absl::OkStatus();
      case ':':
        (void)absl::SimpleAtoi(r->text, &r->integer);
        return absl::OkStatus();
      case '_':
        return absl::OkStatus();
      case '$': {
        int64_t len = 0;
        if (!absl::SimpleAtoi(r->text, &len))
          return absl::DataLossError("bulk");
        if (len < 0) {
          r->type = '_';
          return absl::OkStatus();
        }
        while (in_.size() - pos_ < static_cast<size_t>(len) + 2) {
          if (absl::Status s = Fill(); !s.ok()) return s;
        }
        r->text.assign(in_, pos_, static_cast<size_t>(len));
        pos_ += static_cast<size_t>(len) + 2;
        return absl::OkStatus();
      }
      case '*':
      case '~':
      case '%': {
        int64_t n = 0;
        if (!absl::SimpleAtoi(r->text, &n)) return absl::DataLossError("array");
        if (r->type == '%') n *= 2;
        r->type = '*';
        for (int64_t i = 0; i < n; ++i) {
          Reply item;
          if (absl::Status s = Read(&item); !s.ok()) return s;
          r->items.push_back(std::move(item));
        }
        return absl::OkStatus();
      }
      default:
        return absl::DataLossError(
            absl::StrCat("reply type ", line.substr(0, 1)));
    }
  }

  int fd_ = -1;
  std::string out_;
  std::string in_;
  size_t pos_ = 0;
};

class RespSession final : public TargetSession {
 public:
  RespSession(std::unique_ptr<Connection> c, bool bigsetd)
      : c_(std::move(c)), bigsetd_(bigsetd) {}
  ~RespSession() override {
    if (preload_retries_ > 0) {
      std::fprintf(stderr, "bigset-load: %llu preload SADDs sent again\n",
                   static_cast<unsigned long long>(preload_retries_));
    }
  }

  absl::Status Add(std::string_view set, std::string_view element) override {
    return c_->Call({"SADD", set, element}).status();
  }
  absl::Status Remove(std::string_view set, std::string_view element) override {
    return c_->Call({"SREM", set, element}).status();
  }
  absl::StatusOr<bool> Contains(std::string_view set,
                                std::string_view element) override {
    absl::StatusOr<Reply> r = c_->Call({"SISMEMBER", set, element});
    if (!r.ok()) return r.status();
    return r->integer == 1;
  }
  absl::StatusOr<uint64_t> Range(std::string_view set, std::string_view start,
                                 uint64_t limit) override {
    const std::string n = absl::StrCat(limit);
    absl::StatusOr<Reply> r;
    if (bigsetd_) {
      // Built by appends: GCC 12's -O3 warns (-Wrestrict, falsely) on
      // "[" + std::string.
      std::string from(1, '[');
      from.append(start.data(), start.size());
      r = c_->Call({"BIGSET.RANGE", set, from, "+", "LIMIT", n});
    } else {
      // Redis sets have no order: a page of SSCAN is the nearest query.
      r = c_->Call({"SSCAN", set, "0", "COUNT", n});
    }
    if (!r.ok()) return r.status();
    if (r->items.size() != 2) return absl::DataLossError("page reply");
    return r->items[1].items.size();
  }
  absl::StatusOr<uint64_t> FullRead(std::string_view set) override {
    absl::StatusOr<Reply> r = c_->Call({"SMEMBERS", set});
    if (!r.ok()) return r.status();
    return r->items.size();
  }
  absl::Status Preload(std::string_view set,
                       const std::vector<std::string>& elements) override {
    // SADDs of up to 1,000 members. A bulk load can outrun the replicas'
    // stores (a LevelDB write stall during a compaction): bigsetd then
    // answers NOREPLICAS when the write quorum does not acknowledge in
    // time. An add is idempotent, so the SADD is sent again, after a pause
    // that doubles, as any client would.
    for (size_t i = 0; i < elements.size(); i += 1000) {
      std::vector<std::string_view> args = {"SADD", set};
      for (size_t j = i; j < std::min(elements.size(), i + 1000); ++j) {
        args.push_back(elements[j]);
      }
      int pause_ms = 50;
      for (int attempt = 1;; ++attempt) {
        absl::StatusOr<Reply> r = c_->Call(args);
        if (r.ok()) break;
        if (!absl::StartsWith(r.status().message(), "NOREPLICAS") ||
            attempt == kPreloadAttempts) {
          return r.status();
        }
        ++preload_retries_;
        std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
        pause_ms = std::min(2 * pause_ms, 2000);
      }
    }
    return absl::OkStatus();
  }
  absl::StatusOr<uint64_t> Count(std::string_view set) override {
    absl::StatusOr<Reply> r = c_->Call({"SCARD", set});
    if (!r.ok()) return r.status();
    return static_cast<uint64_t>(r->integer);
  }

 private:
  static constexpr int kPreloadAttempts = 20;
  std::unique_ptr<Connection> c_;
  bool bigsetd_;
  uint64_t preload_retries_ = 0;
};

class RespTarget final : public Target {
 public:
  RespTarget(std::string host, std::string port, std::string password, int pid)
      : host_(std::move(host)),
        port_(std::move(port)),
        password_(std::move(password)),
        pid_(pid) {}

  absl::StatusOr<std::unique_ptr<TargetSession>> Connect() override {
    auto c = std::make_unique<Connection>();
    if (absl::Status s = c->Connect(host_, port_); !s.ok()) return s;
    if (!password_.empty()) {
      if (absl::StatusOr<Reply> r = c->Call({"AUTH", password_}); !r.ok()) {
        return r.status();
      }
    }
    absl::StatusOr<Reply> info = c->Call({"INFO", "server"});
    if (!info.ok()) return info.status();
    const bool bigsetd = info->text.find("bigset_version") != std::string::npos;
    return std::make_unique<RespSession>(std::move(c), bigsetd);
  }

  uint64_t ServerRssBytes() override {
    if (pid_ <= 0) return 0;
    std::ifstream statm(absl::StrCat("/proc/", pid_, "/statm"));
    uint64_t size = 0, resident = 0;
    statm >> size >> resident;
    return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  }

 private:
  const std::string host_;
  const std::string port_;
  const std::string password_;
  const int pid_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Target>> NewRespTarget(
    const std::string& address, const std::string& password, int server_pid) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError("--address is HOST:PORT");
  }
  return std::make_unique<RespTarget>(address.substr(0, colon),
                                      address.substr(colon + 1), password,
                                      server_pid);
}

}  // namespace bigset::load
