// bigsetd's decoders and helpers against hostile input: the RESP parser
// (random, truncated and split bytes, against a reference encoding), the
// glob matcher (against a brute-force reference), the cursor table's
// bounds, and the causal-context codec.

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "context_codec.h"
#include "cursor_table.h"
#include "glob.h"
#include "resp_parser.h"
#include "resp_writer.h"

namespace bigset::server {
namespace {

std::string Encode(const std::vector<std::string>& args) {
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (const std::string& a : args) {
    out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  }
  return out;
}

std::vector<std::vector<std::string>> ParseAll(RespParser* p,
                                               absl::Status* error) {
  std::vector<std::vector<std::string>> out;
  while (true) {
    std::vector<std::string> args;
    absl::StatusOr<bool> got = p->Next(&args);
    if (!got.ok()) {
      *error = got.status();
      return out;
    }
    if (!*got) return out;
    out.push_back(std::move(args));
  }
}

std::string RandomBytes(std::mt19937_64& rng, size_t max_len) {
  std::string s(rng() % (max_len + 1), '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

}  // namespace

TEST_CASE("resp parser: pipelines split at every byte give the same commands") {
  const uint64_t seed = 20261125;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::vector<std::string>> commands;
    std::string wire;
    const int n = 1 + static_cast<int>(rng() % 5);
    for (int i = 0; i < n; ++i) {
      std::vector<std::string> args;
      const int argc = 1 + static_cast<int>(rng() % 4);
      for (int j = 0; j < argc; ++j) args.push_back(RandomBytes(rng, 20));
      wire += Encode(args);
      commands.push_back(std::move(args));
    }
    // Fed in random pieces.
    RespParser p(RespLimits{});
    std::vector<std::vector<std::string>> got;
    size_t at = 0;
    absl::Status error;
    while (at < wire.size()) {
      const size_t piece = 1 + rng() % 7;
      p.Feed(std::string_view(wire).substr(at, piece));
      at += piece;
      for (auto& c : ParseAll(&p, &error)) got.push_back(std::move(c));
      REQUIRE(error.ok());
    }
    REQUIRE(got == commands);
    REQUIRE(p.buffered() == 0);
  }
}

TEST_CASE("resp parser: truncated input asks for more, never a command") {
  const std::string wire = Encode({"SADD", "key", "member"});
  for (size_t cut = 0; cut < wire.size(); ++cut) {
    RespParser p(RespLimits{});
    p.Feed(std::string_view(wire).substr(0, cut));
    std::vector<std::string> args;
    absl::StatusOr<bool> got = p.Next(&args);
    REQUIRE(got.ok());
    REQUIRE_FALSE(*got);
  }
}

TEST_CASE("resp parser: random bytes give commands or a protocol error") {
  const uint64_t seed = 7;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  RespLimits limits;
  limits.max_bulk_bytes = 1 << 10;
  limits.max_args = 64;
  limits.max_inline_bytes = 256;
  for (int round = 0; round < 20000; ++round) {
    RespParser p(limits);
    std::string bytes = RandomBytes(rng, 64);
    // Often start like a real frame, so the parser goes deep.
    if (round % 3 == 0)
      bytes = "*" + std::to_string(rng() % 5) + "\r\n" + bytes;
    if (round % 5 == 0)
      bytes = "*2\r\n$" + std::to_string(rng() % 10) + "\r\n" + bytes;
    p.Feed(bytes);
    absl::Status error;
    std::vector<std::vector<std::string>> got = ParseAll(&p, &error);
    for (const auto& c : got) REQUIRE_FALSE(c.empty());
    if (!error.ok()) {
      REQUIRE(std::string(error.message()).rfind("Protocol error", 0) == 0);
    }
  }
}

TEST_CASE("resp parser: limits and malformed frames are protocol errors") {
  RespLimits limits;
  limits.max_bulk_bytes = 100;
  limits.max_args = 10;
  limits.max_inline_bytes = 64;
  auto error_of = [&](const std::string& bytes) {
    RespParser p(limits);
    p.Feed(bytes);
    absl::Status error;
    ParseAll(&p, &error);
    return std::string(error.message());
  };
  CHECK(error_of("*abc\r\n") == "Protocol error: invalid multibulk length");
  CHECK(error_of("*11\r\n") == "Protocol error: invalid multibulk length");
  CHECK(error_of("*1\r\n$101\r\n") == "Protocol error: invalid bulk length");
  CHECK(error_of("*1\r\n$-5\r\n") == "Protocol error: invalid bulk length");
  CHECK(error_of("*1\r\n:5\r\n") == "Protocol error: expected '$', got ':'");
  CHECK(error_of("*1\r\n$3\r\nabcde") ==
        "Protocol error: expected CRLF after bulk");
  CHECK(error_of(std::string(65, 'a')) ==
        "Protocol error: too big inline request");
  CHECK(error_of("*1\r\n$" + std::string(70, '1')) ==
        "Protocol error: too big bulk count string");
  CHECK(error_of("PING \"unbalanced\r\n") ==
        "Protocol error: unbalanced quotes in request");
  // Lengths as Redis reads them: digits only, CRLF.
  for (const char* bad : {"*1\r\n$4 \r\nPING\r\n", "*1\r\n$\t4\r\nPING\r\n",
                          "*1\r\n$04\r\nPING\r\n", "*1\r\n$-0\r\n",
                          "*1\r\n$+4\r\nPING\r\n", "*1\r\n$4\r\r\nPING\r\n"}) {
    INFO(bad);
    CHECK(error_of(bad) == "Protocol error: invalid bulk length");
  }
  CHECK(error_of("*1 \r\n$4\r\nPING\r\n") ==
        "Protocol error: invalid multibulk length");
  CHECK(error_of("*1\n$4\r\nPING\r\n") ==
        "Protocol error: expected CRLF after mbulk count string");
  CHECK(error_of(Encode({"a", "b"})).empty());
}

TEST_CASE("resp parser: buffered() counts what parsed arguments hold") {
  RespParser p(RespLimits{});
  std::string wire = "*100000\r\n";
  for (int i = 0; i < 50000; ++i) wire += "$0\r\n\r\n";
  p.Feed(wire);
  std::vector<std::string> args;
  absl::StatusOr<bool> got = p.Next(&args);
  REQUIRE(got.ok());
  REQUIRE_FALSE(*got);
  // 50,000 empty strings cost far more than their 0 bytes.
  CHECK(p.buffered() >= 50000 * sizeof(std::string));
}

TEST_CASE("resp parser: a huge declared count reserves nothing up front") {
  RespParser p(RespLimits{});
  p.Feed("*1048576\r\n$1\r\na\r\n");
  std::vector<std::string> args;
  absl::StatusOr<bool> got = p.Next(&args);
  REQUIRE(got.ok());
  REQUIRE_FALSE(*got);
}

TEST_CASE("resp parser: inline commands as Redis splits them") {
  RespParser p(RespLimits{});
  p.Feed("PING\r\n\r\nsadd \"a b\" 'c\\'d' \"\\x41\\n\"\nECHO x\r\n*0\r\n");
  absl::Status error;
  auto got = ParseAll(&p, &error);
  REQUIRE(error.ok());
  REQUIRE(got.size() == 3);
  CHECK(got[0] == std::vector<std::string>{"PING"});
  CHECK(got[1] == std::vector<std::string>{"sadd", "a b", "c'd", "A\n"});
  CHECK(got[2] == std::vector<std::string>{"ECHO", "x"});
}

TEST_CASE("resp writer: RESP3 types and their RESP2 forms") {
  std::string out2, out3;
  RespWriter w2(&out2, 2), w3(&out3, 3);
  for (RespWriter* w : {&w2, &w3}) {
    w->Map(1);
    w->Bulk("k");
    w->Set(1);
    w->Null();
    w->Bool(true);
    w->Error("ERR a\r\nb");
  }
  CHECK(out2 == "*2\r\n$1\r\nk\r\n*1\r\n$-1\r\n:1\r\n-ERR a  b\r\n");
  CHECK(out3 == "%1\r\n$1\r\nk\r\n~1\r\n_\r\n#t\r\n-ERR a  b\r\n");
}

namespace {
// A brute-force glob (exponential, for short inputs): the reference.
bool GlobReference(std::string_view p, std::string_view t) {
  if (p.empty()) return t.empty();
  if (p[0] == '*') {
    for (size_t i = 0; i <= t.size(); ++i) {
      if (GlobReference(p.substr(1), t.substr(i))) return true;
    }
    return false;
  }
  if (t.empty()) return false;
  if (p[0] == '?') return GlobReference(p.substr(1), t.substr(1));
  if (p[0] == '[') {
    const size_t close = p.find(']', 1);
    std::string_view cls =
        close == std::string_view::npos ? p.substr(1) : p.substr(1, close - 1);
    const std::string_view rest = close == std::string_view::npos
                                      ? std::string_view()
                                      : p.substr(close + 1);
    bool negate = !cls.empty() && cls[0] == '^';
    if (negate) cls.remove_prefix(1);
    bool found = false;
    for (size_t i = 0; i < cls.size(); ++i) {
      if (i + 2 < cls.size() && cls[i + 1] == '-') {
        char lo = cls[i], hi = cls[i + 2];
        if (lo > hi) std::swap(lo, hi);
        if (t[0] >= lo && t[0] <= hi) found = true;
        i += 2;
      } else if (cls[i] == t[0]) {
        found = true;
      }
    }
    return found != negate && GlobReference(rest, t.substr(1));
  }
  return p[0] == t[0] && GlobReference(p.substr(1), t.substr(1));
}
}  // namespace

TEST_CASE("glob: matches as the brute-force reference (randomized)") {
  const uint64_t seed = 99;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  const std::string pattern_chars = "ab*?[]^-";
  const std::string text_chars = "abc";
  for (int round = 0; round < 50000; ++round) {
    std::string p, t;
    for (size_t i = rng() % 7; i > 0; --i) {
      p.push_back(pattern_chars[rng() % pattern_chars.size()]);
    }
    for (size_t i = rng() % 7; i > 0; --i) {
      t.push_back(text_chars[rng() % text_chars.size()]);
    }
    INFO("pattern '" << p << "' text '" << t << "'");
    REQUIRE(GlobMatch(p, t) == GlobReference(p, t));
  }
  CHECK(GlobMatch("user:\\*", "user:*"));
  CHECK_FALSE(GlobMatch("user:\\*", "user:x"));
  CHECK(GlobLiteralPrefix("user:1*") == "user:1");
  CHECK(GlobLiteralPrefix("a\\*b?") == "a*b");
  CHECK(GlobLiteralPrefix("*x").empty());
  // Many stars do not make it slow.
  CHECK_FALSE(GlobMatch("*a*a*a*a*a*a*a*a*a*b", std::string(5000, 'a')));
}

TEST_CASE("cursor table: bounded, ids never 0, of their own set") {
  CursorTable t(/*max_entries=*/100, /*max_bytes=*/1 << 20, /*seed=*/1);
  std::vector<uint64_t> ids;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t id = t.Put("set", "e" + std::to_string(i));
    REQUIRE(id != 0);
    REQUIRE(id < (uint64_t{1} << 63));
    ids.push_back(id);
  }
  REQUIRE(t.size() == 100);
  CHECK_FALSE(t.Find(ids[0], "set").has_value());
  CHECK(t.Find(ids[999], "set") == "e999");
  CHECK_FALSE(t.Find(ids[999], "other").has_value());
  CursorTable small(1000, 1000, 2);
  for (int i = 0; i < 100; ++i) small.Put("s", std::string(100, 'x'));
  CHECK(small.bytes() <= 1000);
}

TEST_CASE("context codec: round trip; malformed text refused") {
  std::vector<Dot> dots = {{1, 2}, {0xffffffffffffffffull, 7}};
  const std::string text = EncodeContext("s", "e", dots);
  absl::StatusOr<std::vector<Dot>> back = DecodeContext("s", "e", text);
  REQUIRE(back.ok());
  CHECK(*back == dots);
  CHECK(DecodeContext("s", "e", "")->empty());
  CHECK(EncodeContext("s", "e", {}).empty());
  // Another element's context, and one with a dot changed, are refused.
  CHECK_FALSE(DecodeContext("s", "f", text).ok());
  CHECK_FALSE(DecodeContext("t", "e", text).ok());
  CHECK_FALSE(DecodeContext("se", "", text).ok());
  std::string changed = text;
  changed.back() = '8';
  CHECK_FALSE(DecodeContext("s", "e", changed).ok());
  // A well-formed check over malformed dots.
  for (const char* bad : {"x", "0000000000000001.0", "1.1", "0000000000000001.",
                          "000000000000000g.1", "0000000000000001.1,",
                          "0000000000000001.-1", "0000000000000001.1 "}) {
    INFO(bad);
    CHECK_FALSE(DecodeContext("s", "e", bad).ok());
    const std::string checked =
        EncodeContext("s", "e", {{1, 1}}).substr(0, 17) + bad;
    CHECK_FALSE(DecodeContext("s", "e", checked).ok());
  }
  const uint64_t seed = 3;
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 10000; ++i) {
    std::string s = RandomBytes(rng, 40);
    (void)DecodeContext("s", "e", s);  // Never crashes.
  }
}

}  // namespace bigset::server
