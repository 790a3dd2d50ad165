// libbigset_etcd's decoders and its HTTP client against hostile input: the
// JSON parser and the chunked-body decoder on random, truncated and
// targeted bytes; MembershipRecord's decoder likewise; the HTTP client and
// the etcd authority against a scripted server on loopback that answers
// with garbage, cuts answers short, or never answers.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bigset/cluster/membership_authority.h"
#include "bigset/etcd/etcd_authority.h"
#include "etcd/http_client.h"
#include "etcd/json.h"

namespace bigset::etcd {
namespace {

constexpr uint32_t kSeed = 20261129;

std::string RandomBytes(std::mt19937& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xFF);
  return s;
}

TEST_CASE("json: etcd's answers parse", "[etcd][json]") {
  const std::string text =
      R"({"header":{"cluster_id":"324952591200643719","revision":"2"},)"
      R"("kvs":[{"key":"L2JpZ3NldC94","create_revision":"2","value":"MQ=="}],)"
      R"("count":"1","more":false,"succeeded":true,"n":-1.5e3,"z":null})";
  absl::StatusOr<Json> j = Json::Parse(text);
  REQUIRE(j.ok());
  REQUIRE(j->Find("header") != nullptr);
  CHECK(j->Find("header")->Find("revision")->AsInt() == 2);
  CHECK(j->Find("count")->AsInt() == 1);
  CHECK(j->Find("succeeded")->boolean());
  CHECK_FALSE(j->Find("more")->boolean());
  CHECK(j->Find("n")->type() == Json::Type::kNumber);
  CHECK(j->Find("n")->text() == "-1.5e3");
  CHECK(j->Find("z")->type() == Json::Type::kNull);
  CHECK(j->Find("missing") == nullptr);
  const Json* kvs = j->Find("kvs");
  REQUIRE(kvs->items().size() == 1);
  CHECK(kvs->items()[0].Find("value")->text() == "MQ==");
}

TEST_CASE("json: escapes, surrogates and quoting round trip", "[etcd][json]") {
  absl::StatusOr<Json> j =
      Json::Parse(R"(["a\"b\\c\/d\b\f\n\r\t", "\u00e9\u20ac\ud83d\ude00"])");
  REQUIRE(j.ok());
  CHECK(j->items()[0].text() == "a\"b\\c/d\b\f\n\r\t");
  CHECK(j->items()[1].text() == "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  std::mt19937 rng(kSeed);
  for (int i = 0; i < 2000; ++i) {
    // Quoting any ASCII (controls included) parses back to the same bytes.
    std::string s(rng() % 40, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 128);
    absl::StatusOr<Json> back = Json::Parse(JsonQuote(s));
    INFO("seed " << kSeed << " case " << i);
    REQUIRE(back.ok());
    CHECK(back->text() == s);
  }
}

TEST_CASE("json: malformed documents are refused", "[etcd][json]") {
  for (const char* bad : {"",
                          "{",
                          "}",
                          "[1,]",
                          "{\"a\" 1}",
                          "{\"a\":}",
                          "{a:1}",
                          "\"abc",
                          "\"\\x\"",
                          "\"\\u12\"",
                          "\"\\ud800\"",
                          "\"\\udc00\"",
                          "\"\\ud800\\u0041\"",
                          "01",
                          "1.",
                          "1e",
                          "-",
                          "tru",
                          "nul",
                          "[1 2]",
                          "{} {}",
                          "\"a\nb\"",
                          "[\"\\u00zz\"]"}) {
    INFO(bad);
    CHECK_FALSE(Json::Parse(bad).ok());
  }
  // Nesting is bounded: no stack overflow on a deep document.
  CHECK_FALSE(Json::Parse(std::string(100000, '[')).ok());
  CHECK(Json::Parse(std::string(60, '[') + std::string(60, ']')).ok());
}

TEST_CASE("json: random and truncated bytes never crash", "[etcd][json]") {
  std::mt19937 rng(kSeed);
  const std::string valid =
      R"({"result":{"header":{"revision":"7"},"events":[{"kv":)"
      R"({"key":"a2V5","value":"dmFsdWU=","mod_revision":"7"}}]}})";
  REQUIRE(Json::Parse(valid).ok());
  for (size_t cut = 0; cut < valid.size(); ++cut) {
    INFO("cut at " << cut);
    CHECK_FALSE(Json::Parse(valid.substr(0, cut)).ok());
  }
  for (int i = 0; i < 20000; ++i) {
    std::string s = valid;
    // Flip a few bytes, or take random bytes.
    if (i % 2 == 0) {
      for (int k = 0; k < 3; ++k)
        s[rng() % s.size()] = static_cast<char>(rng());
    } else {
      s = RandomBytes(rng, rng() % 64);
    }
    (void)Json::Parse(s);  // Must not crash (ASan/UBSan in CI).
  }
}

TEST_CASE("chunked: any split decodes the same body", "[etcd][http]") {
  const std::string stream =
      "5\r\nhello\r\n1;ext=1\r\n \r\n10\r\n0123456789abcdef\r\n0\r\n"
      "Trailer: x\r\n\r\n";
  std::mt19937 rng(kSeed);
  for (int i = 0; i < 2000; ++i) {
    ChunkedDecoder d;
    std::string out;
    size_t pos = 0;
    while (pos < stream.size()) {
      const size_t n = std::min<size_t>(1 + rng() % 7, stream.size() - pos);
      REQUIRE(d.Feed(absl::string_view(stream).substr(pos, n), &out).ok());
      pos += n;
    }
    INFO("seed " << kSeed << " case " << i);
    CHECK(d.done());
    CHECK(out == "hello 0123456789abcdef");
  }
}

TEST_CASE("chunked: malformed streams are refused", "[etcd][http]") {
  for (const char* bad :
       {"x\r\n", "\r\n", "5\r\nhelloXX", "5\nhello", "fffffffffffffffff\r\n",
        "0\r\n\r\nmore", "4000001\r\n", "0\r\nbad trailer\n"}) {
    ChunkedDecoder d;
    std::string out;
    INFO(bad);
    CHECK_FALSE(d.Feed(bad, &out).ok());
  }
  std::mt19937 rng(kSeed);
  for (int i = 0; i < 20000; ++i) {
    ChunkedDecoder d;
    std::string out;
    (void)d.Feed(RandomBytes(rng, rng() % 64), &out);
    CHECK(out.size() < 64);
  }
}

TEST_CASE("membership record: round trip; damage is DataLoss",
          "[etcd][record]") {
  MembershipRecord r{42, std::string("map\0bytes", 9), "JOIN 4 through node 1"};
  const std::string bytes = r.Encode();
  absl::StatusOr<MembershipRecord> back = MembershipRecord::Decode(bytes);
  REQUIRE(back.ok());
  CHECK(*back == r);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    CHECK(absl::IsDataLoss(
        MembershipRecord::Decode(bytes.substr(0, cut)).status()));
  }
  std::mt19937 rng(kSeed);
  for (size_t i = 0; i < bytes.size() * 8; ++i) {
    std::string flipped = bytes;
    flipped[i / 8] = static_cast<char>(flipped[i / 8] ^ (1 << (i % 8)));
    CHECK_FALSE(MembershipRecord::Decode(flipped).ok());
  }
  for (int i = 0; i < 20000; ++i) {
    CHECK_FALSE(MembershipRecord::Decode(RandomBytes(rng, rng() % 40)).ok());
  }
  CHECK_FALSE(MembershipRecord::Decode(MembershipRecord{0, "m", "c"}.Encode())
                  .ok());  // Epoch 0 names no ring.
}

// A loopback server that answers each connection with the next canned
// reply (bytes, then close; or hold the connection open without a word).
class ScriptedServer {
 public:
  explicit ScriptedServer(std::vector<std::string> replies)
      : replies_(std::move(replies)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    socklen_t len = sizeof(a);
    REQUIRE(getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port_ = ntohs(a.sin_port);
    REQUIRE(listen(fd_, 16) == 0);
    thread_ = std::thread([this]() { Serve(); });
  }
  ~ScriptedServer() {
    stop_.store(true);
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
    for (int c : held_) close(c);
  }
  uint16_t port() const { return port_; }
  int connections() const { return connections_.load(); }

  static constexpr const char* kHang = "<hang>";

 private:
  void Serve() {
    size_t next = 0;
    while (!stop_.load()) {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      ++connections_;
      // Read the request's head (and whatever body came with it).
      char buf[4096];
      (void)recv(c, buf, sizeof(buf), 0);
      const std::string& reply = replies_[std::min(next, replies_.size() - 1)];
      ++next;
      if (reply == kHang) {
        held_.push_back(c);
        continue;
      }
      size_t sent = 0;
      while (sent < reply.size()) {
        const ssize_t n =
            send(c, reply.data() + sent, reply.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) break;
        sent += static_cast<size_t>(n);
      }
      close(c);
    }
  }

  std::vector<std::string> replies_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::vector<int> held_;
  std::thread thread_;
};

HttpEndpoint Endpoint(uint16_t port) {
  HttpEndpoint e;
  e.host = "127.0.0.1";
  e.port = port;
  return e;
}

std::string Ok(const std::string& body) {
  return absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", body.size(),
                      "\r\n\r\n", body);
}

TEST_CASE("http: answers sized, chunked, or ended by the close",
          "[etcd][http]") {
  ScriptedServer server(
      {Ok("{\"a\":1}"),
       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n"
       "4\r\n\":2}\r\n0\r\n\r\n",
       "HTTP/1.1 200 OK\r\n\r\n{\"a\":3}"});
  HttpClient client(Endpoint(server.port()));
  for (const char* want : {"{\"a\":1}", "{\"a\":2}", "{\"a\":3}"}) {
    absl::StatusOr<HttpClient::Response> r =
        client.Post("/v3/kv/range", "{}", absl::Seconds(5));
    REQUIRE(r.ok());
    CHECK(r->status == 200);
    CHECK(r->body == want);
  }
}

TEST_CASE("http: garbage and cut answers are errors, never crashes",
          "[etcd][http]") {
  const std::vector<std::string> bad = {
      "",                                                 // closed at once
      "garbage\r\n\r\n",                                  // no status line
      "HTTP/1.1 abc OK\r\n\r\n",                          // bad status
      "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n12",  // cut short
      "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",     // bad length
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
      "HTTP/1.1 200 OK\r\n" + std::string(100000, 'h'),  // endless head
  };
  ScriptedServer server(bad);
  HttpClient client(Endpoint(server.port()));
  for (size_t i = 0; i < bad.size(); ++i) {
    INFO("reply " << i);
    absl::StatusOr<HttpClient::Response> r =
        client.Post("/v3/kv/range", "{}", absl::Seconds(5));
    CHECK_FALSE(r.ok());
  }
  std::mt19937 rng(kSeed);
  std::vector<std::string> random;
  for (int i = 0; i < 200; ++i) {
    std::string head = i % 2 == 0 ? "HTTP/1.1 200 OK\r\n" : "";
    random.push_back(head + RandomBytes(rng, rng() % 300));
  }
  ScriptedServer noise(random);
  HttpClient noisy(Endpoint(noise.port()));
  for (size_t i = 0; i < random.size(); ++i) {
    (void)noisy.Post("/v3/kv/range", "{}", absl::Seconds(5));
  }
  CHECK(noise.connections() == static_cast<int>(random.size()));
}

TEST_CASE(
    "http: a server that never answers meets the deadline; Cancel "
    "ends a stream",
    "[etcd][http]") {
  ScriptedServer server({ScriptedServer::kHang});
  HttpClient client(Endpoint(server.port()));
  const absl::Time start = absl::Now();
  absl::StatusOr<HttpClient::Response> r =
      client.Post("/v3/kv/range", "{}", absl::Milliseconds(300));
  CHECK(absl::IsDeadlineExceeded(r.status()));
  CHECK(absl::Now() - start < absl::Seconds(3));

  ScriptedServer streaming(
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
       "6\r\nline1\n\r\n",
       ScriptedServer::kHang});
  HttpClient watcher(Endpoint(streaming.port()));
  std::vector<std::string> lines;
  absl::Status s = watcher.PostStream("/v3/watch", "{}", absl::Seconds(5),
                                      [&](absl::string_view line) {
                                        lines.emplace_back(line);
                                        return absl::OkStatus();
                                      });
  // The server closed without the last chunk.
  CHECK(absl::IsUnavailable(s));
  CHECK(lines == std::vector<std::string>{"line1"});
  // Now one that holds the stream open: Cancel from another thread.
  std::thread canceller([&]() {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    watcher.Cancel();
  });
  s = watcher.PostStream("/v3/watch", "{}", absl::Seconds(5),
                         [](absl::string_view) { return absl::OkStatus(); });
  canceller.join();
  CHECK(absl::IsCancelled(s));
}

TEST_CASE("etcd authority: options are checked", "[etcd][authority]") {
  auto create = [](EtcdAuthorityOptions o) {
    return EtcdMembershipAuthority::Create(std::move(o)).status();
  };
  EtcdAuthorityOptions o;
  o.endpoints = {"127.0.0.1:2379"};
  o.prefix = "/bigset/x";
  CHECK(create(o).ok());
  EtcdAuthorityOptions bad = o;
  bad.endpoints.clear();
  CHECK(absl::IsInvalidArgument(create(bad)));
  for (const char* prefix : {"", "bigset", "/bigset/"}) {
    bad = o;
    bad.prefix = prefix;
    CHECK(absl::IsInvalidArgument(create(bad)));
  }
  for (const char* e : {"nohost", "host:", "host:0", "host:70000", "[::1]"}) {
    bad = o;
    bad.endpoints = {e};
    INFO(e);
    CHECK(absl::IsInvalidArgument(create(bad)));
  }
  bad = o;
  bad.tls_cert_file = "c.pem";
  CHECK(absl::IsInvalidArgument(create(bad)));
  bad.tls_ca_file = "ca.pem";
  CHECK(absl::IsInvalidArgument(create(bad)));  // Certificate without key.
}

TEST_CASE(
    "etcd authority: garbage from etcd is an error; the watch keeps "
    "retrying and stops when told",
    "[etcd][authority]") {
  std::mt19937 rng(kSeed);
  std::vector<std::string> replies = {
      Ok("not json"),
      Ok("{\"header\":{}}"),  // No revision.
      Ok("{\"header\":{\"revision\":\"3\"},\"kvs\":[{\"value\":\"!!\"}]}"),
      Ok("{\"header\":{\"revision\":\"3\"},\"kvs\":[{\"value\":\"AAAA\"}]}"),
      "HTTP/1.1 500 Oops\r\nContent-Length: 27\r\n\r\n"
      "{\"message\":\"etcd broken\"}  ",
  };
  for (int i = 0; i < 20; ++i) replies.push_back(Ok(RandomBytes(rng, 50)));
  ScriptedServer server(replies);
  EtcdAuthorityOptions o;
  o.endpoints = {absl::StrCat("127.0.0.1:", server.port())};
  o.prefix = "/bigset/x";
  o.request_timeout_ms = 1000;
  absl::Mutex mu;
  std::vector<std::string> logged;
  o.log = [&](bool, std::string_view line) {
    absl::MutexLock lock(&mu);
    logged.emplace_back(line);
  };
  absl::StatusOr<std::unique_ptr<EtcdMembershipAuthority>> a =
      EtcdMembershipAuthority::Create(o);
  REQUIRE(a.ok());
  for (int i = 0; i < 5; ++i) {
    INFO("reply " << i);
    CHECK_FALSE((*a)->Latest().ok());
  }
  std::atomic<int> shown{0};
  REQUIRE((*a)->Watch([&](const std::optional<MembershipRecord>&) { ++shown; })
              .ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  (*a)->Close();
  CHECK(shown.load() == 0);  // Nothing valid was ever shown.
  absl::MutexLock lock(&mu);
  CHECK_FALSE(logged.empty());
}

}  // namespace
}  // namespace bigset::etcd
