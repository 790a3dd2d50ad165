// The commands over every key: DBSIZE, SCAN, KEYS, RANDOMKEY, FLUSHDB,
// FLUSHALL, and BIGSET.LOCALSETS (what they ask each node). They walk the
// keyspace (Keyspace) on the worker thread, since each step waits on the
// cluster.

#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "glob.h"
#include "keyspace.h"
#include "membership.h"
#include "session.h"

namespace bigset::server {
namespace {

// Cursors of SCAN are kept under this name in the cursor table (a set of
// that name has its own SSCAN cursors; a cursor of one is refused by the
// other only by chance of the name, which is why it starts with NUL).
constexpr std::string_view kScanKey{"\0keyspace", 9};

}  // namespace

std::shared_ptr<Keyspace> Session::MakeKeyspace() {
  std::map<NodeId, NodeAddresses> nodes;
  if (ctx_->membership != nullptr) nodes = ctx_->membership->Current().nodes;
  return std::make_shared<Keyspace>(
      ctx_->runner, std::move(nodes), ctx_->runner->id(),
      ctx_->config->requirepass, ReadOptions(), WriteOptions());
}

void Session::OnWorker(std::function<std::function<void()>()> work,
                       Worker* worker) {
  std::shared_ptr<Session> self = shared_from_this();
  if (worker == nullptr) worker = ctx_->keyspace_worker.get();
  worker->Run([self, work = std::move(work)]() {
    std::function<void()> reply = work();
    asio::post(*self->ctx_->io, std::move(reply));
  });
}

void Session::CmdDbsize(Args&) {
  std::shared_ptr<Keyspace> keys = MakeKeyspace();
  std::shared_ptr<Session> self = shared_from_this();
  OnWorker([self, keys]() -> std::function<void()> {
    int64_t n = 0;
    absl::Status s = keys->ForEach([&n](const std::string&) {
      ++n;
      return absl::OkStatus();
    });
    return [self, s, n]() {
      if (!s.ok()) {
        self->ReplyStatus(s, false);
      } else {
        self->Out().Integer(n);
      }
      self->Done();
    };
  });
}

void Session::CmdKeys(Args& a) {
  std::shared_ptr<Keyspace> keys = MakeKeyspace();
  std::shared_ptr<Session> self = shared_from_this();
  const size_t max = ctx_->config->smembers_max;
  std::string pattern = a[1];
  OnWorker([self, keys, pattern, max]() -> std::function<void()> {
    std::vector<std::string> names;
    absl::Status s =
        keys->ForEach([&names, &pattern, max](const std::string& n) {
          if (!GlobMatch(pattern, n)) return absl::OkStatus();
          if (names.size() >= max) {
            return absl::ResourceExhaustedError("too many");
          }
          names.push_back(n);
          return absl::OkStatus();
        });
    return [self, s, names = std::move(names), max]() {
      if (absl::IsResourceExhausted(s)) {
        self->ReplyError(absl::StrCat("ERR more than ", max,
                                      " keys (--smembers-max): use SCAN"));
      } else if (!s.ok()) {
        self->ReplyStatus(s, false);
      } else {
        RespWriter w = self->Out();
        w.Array(names.size());
        for (const std::string& n : names) w.Bulk(n);
      }
      self->Done();
    };
  });
}

void Session::CmdRandomkey(Args&) {
  std::shared_ptr<Keyspace> keys = MakeKeyspace();
  std::shared_ptr<Session> self = shared_from_this();
  const uint64_t seed = ctx_->rng();
  OnWorker([self, keys, seed]() -> std::function<void()> {
    // One pass, one name kept (reservoir sampling): each key equally
    // likely, at the cost of a walk of the keyspace.
    std::mt19937_64 rng(seed);
    std::optional<std::string> pick;
    uint64_t seen = 0;
    absl::Status s = keys->ForEach([&](const std::string& n) {
      ++seen;
      if (std::uniform_int_distribution<uint64_t>(0, seen - 1)(rng) == 0) {
        pick = n;
      }
      return absl::OkStatus();
    });
    return [self, s, pick]() {
      if (!s.ok()) {
        self->ReplyStatus(s, false);
      } else if (!pick.has_value()) {
        self->Out().Null();
      } else {
        self->Out().Bulk(*pick);
      }
      self->Done();
    };
  });
}

void Session::CmdFlushall(Args& a) {
  // ASYNC and SYNC do the same: a clear is a constant-time write per set;
  // the sweeper reclaims the space in the background either way.
  if (a.size() > 2 || (a.size() == 2 && absl::AsciiStrToLower(a[1]) != "sync" &&
                       absl::AsciiStrToLower(a[1]) != "async")) {
    ReplyError("ERR syntax error");
    Done();
    return;
  }
  std::shared_ptr<Keyspace> keys = MakeKeyspace();
  std::shared_ptr<Session> self = shared_from_this();
  OnWorker([self, keys]() -> std::function<void()> {
    absl::Status s = keys->ForEach(
        [&keys](const std::string& n) { return keys->Clear(n).status(); });
    return [self, s]() {
      if (!s.ok()) {
        self->ReplyStatus(s, true);
      } else {
        self->Out().Simple("OK");
      }
      self->Done();
    };
  });
}

void Session::CmdScan(Args& a) {
  uint64_t cursor = 0;
  if (!absl::SimpleAtoi(a[1], &cursor) || a[1].empty() || a[1][0] == '+' ||
      a[1][0] == ' ') {
    ReplyError("ERR invalid cursor");
    Done();
    return;
  }
  size_t count = 10;
  std::string match, type;
  for (size_t i = 2; i < a.size(); i += 2) {
    const std::string opt = absl::AsciiStrToLower(a[i]);
    if (i + 1 >= a.size()) {
      ReplyError("ERR syntax error");
      Done();
      return;
    }
    if (opt == "count") {
      int64_t c = 0;
      if (!absl::SimpleAtoi(a[i + 1], &c)) {
        ReplyError("ERR value is not an integer or out of range");
        Done();
        return;
      }
      if (c < 1) {
        ReplyError("ERR syntax error");
        Done();
        return;
      }
      count = static_cast<size_t>(std::min<int64_t>(c, 100'000));
    } else if (opt == "match") {
      match = a[i + 1];
    } else if (opt == "type") {
      type = absl::AsciiStrToLower(a[i + 1]);
    } else {
      ReplyError("ERR syntax error");
      Done();
      return;
    }
  }
  std::optional<std::string> after;
  if (cursor != 0) {
    after = ctx_->cursors->Find(cursor, kScanKey);
    if (!after.has_value()) {
      // As SSCAN's: a cursor this node did not hand out, or has forgotten,
      // is an error rather than a silent restart or end.
      ctx_->stats.cursors_unknown.fetch_add(1, std::memory_order_relaxed);
      ReplyError(
          "ERR invalid cursor (unknown, expired or of another node: start "
          "the scan again from 0)");
      Done();
      return;
    }
  }
  std::shared_ptr<Keyspace> keys = MakeKeyspace();
  std::shared_ptr<Session> self = shared_from_this();
  OnWorker([self, keys, after, count, match, type]() -> std::function<void()> {
    absl::StatusOr<Keyspace::Page> page = keys->Next(after, count);
    return [self, page, match, type]() {
      if (!page.ok()) {
        self->ReplyStatus(page.status(), false);
        self->Done();
        return;
      }
      uint64_t next = 0;
      if (page->more) {
        next = self->ctx_->cursors->Put(std::string(kScanKey), page->last);
      }
      std::vector<const std::string*> out;
      // Every key is a set: TYPE of anything else matches none.
      if (type.empty() || type == "set") {
        for (const std::string& n : page->names) {
          if (match.empty() || GlobMatch(match, n)) out.push_back(&n);
        }
      }
      RespWriter w = self->Out();
      w.Array(2);
      w.Bulk(absl::StrCat(next));
      w.Array(out.size());
      for (const std::string* n : out) w.Bulk(*n);
      self->Done();
    };
  });
}

void Session::CmdLocalSets(Args& a) {
  // BIGSET.LOCALSETS limit [after]: what Keyspace asks each node.
  uint64_t limit = 0;
  if (!absl::SimpleAtoi(a[1], &limit) || limit == 0 || limit > 100'000 ||
      a.size() > 3) {
    ReplyError("ERR usage: BIGSET.LOCALSETS limit [after]");
    Done();
    return;
  }
  std::optional<std::string> after;
  if (a.size() == 3) after = a[2];
  NodeRunner* runner = ctx_->runner;
  std::shared_ptr<Session> self = shared_from_this();
  OnWorker(
      [self, runner, after, limit]() -> std::function<void()> {
        absl::StatusOr<std::vector<std::string>> names =
            LocalSetNames(runner, after, limit);
        return [self, names]() {
          if (!names.ok()) {
            self->ReplyStatus(names.status(), false);
          } else {
            self->Out().Bulk(EncodeSetNames(*names));
          }
          self->Done();
        };
      },
      ctx_->local_sets_worker.get());
}

}  // namespace bigset::server
