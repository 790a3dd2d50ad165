// The Redis set commands, on the cluster: SADD, SREM, SISMEMBER,
// SMISMEMBER, SCARD, SMEMBERS, SSCAN, DEL/UNLINK, EXISTS, TYPE.

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "glob.h"
#include "read_handlers.h"
#include "session.h"

namespace bigset::server {
namespace {

// The arguments from `first` on, each once, in their first order (Redis
// counts a member named twice once).
std::vector<std::string> Distinct(Session::Args& a, size_t first) {
  std::vector<std::string> out;
  absl::flat_hash_set<std::string_view> seen;
  for (size_t i = first; i < a.size(); ++i) {
    if (seen.insert(a[i]).second) out.push_back(a[i]);
  }
  return out;
}

}  // namespace

void Session::CmdSadd(Args& a) {
  // What is added is what a read quorum does not hold (the coordinating
  // replica alone may have missed a remove that a write quorum
  // acknowledged: R + W > N makes the read see it), unless --sadd-reply
  // coordinator skips the read (SetBatcher).
  RunBatched(SetCommand::Kind::kAdd, a[1], Distinct(a, 2), BatchReply::kCount);
}

void Session::CmdSrem(Args& a) {
  // The remove's context is what a read quorum holds, so that it covers
  // every add a write quorum acknowledged (R + W > N).
  RunBatched(SetCommand::Kind::kRemove, a[1], Distinct(a, 2),
             BatchReply::kCount);
}

void Session::CmdSismember(Args& a) {
  RunBatched(SetCommand::Kind::kIsMember, a[1], {a[2]}, BatchReply::kFlag);
}

void Session::CmdSmismember(Args& a) {
  RunBatched(SetCommand::Kind::kIsMember, a[1],
             std::vector<std::string>(a.begin() + 2, a.end()),
             BatchReply::kFlags);
}

void Session::CmdScard(Args& a) {
  ctx_->runner->Count(
      a[1], ReadOptions(),
      Later<absl::StatusOr<uint64_t>>([this](absl::StatusOr<uint64_t> n) {
        if (!n.ok()) {
          ReplyStatus(n.status(), false);
        } else {
          Out().Integer(static_cast<int64_t>(*n));
        }
        Done();
      }));
}

void Session::CmdSmembers(Args& a) {
  std::string set = a[1];
  const size_t max = ctx_->config->smembers_max;
  auto refuse = [this, max]() {
    ctx_->stats.smembers_refused.fetch_add(1, std::memory_order_relaxed);
    ReplyError(absl::StrCat("ERR set has more than ", max,
                            " elements (--smembers-max): use SSCAN"));
  };
  // The count first (constant time when the replicas agree), so that a
  // huge set is refused without being read.
  ctx_->runner->Count(
      set, ReadOptions(),
      Later<absl::StatusOr<uint64_t>>([this, set, max,
                                       refuse](absl::StatusOr<uint64_t> n) {
        if (!n.ok()) {
          ReplyStatus(n.status(), false);
          Done();
          return;
        }
        if (*n > max) {
          refuse();
          Done();
          return;
        }
        ctx_->runner->Read(
            set, ReadOptions(),
            new CollectingHandler(
                max, /*keep_dots=*/false,
                Later<absl::StatusOr<std::vector<ElementDots>>>(
                    [this, refuse](absl::StatusOr<std::vector<ElementDots>> r) {
                      if (absl::IsResourceExhausted(r.status())) {
                        refuse();
                      } else if (!r.ok()) {
                        ReplyStatus(r.status(), false);
                      } else {
                        RespWriter w = Out();
                        w.Set(r->size());
                        for (const ElementDots& e : *r) w.Bulk(e.element);
                      }
                      Done();
                    })));
      }));
}

void Session::ScanPage(std::string set, ElementBounds bounds, uint64_t cursor,
                       size_t count, std::string match) {
  std::optional<std::string> after;
  if (cursor != 0) {
    after = ctx_->cursors->Find(cursor, set);
    if (!after.has_value()) {
      ctx_->stats.cursors_unknown.fetch_add(1, std::memory_order_relaxed);
      ReplyError(
          "ERR invalid cursor (unknown, expired or of another key: start the "
          "scan again from 0)");
      Done();
      return;
    }
  }
  RangeQuery q;
  static_cast<ElementBounds&>(q) = bounds;
  if (after.has_value() && (!q.start.has_value() || *after >= *q.start)) {
    q.start = *after;
    q.start_inclusive = false;
  }
  q.limit = count;
  ctx_->runner->Range(
      set, std::move(q), ReadOptions(),
      Later<absl::StatusOr<RangeResult>>(
          [this, set, match](absl::StatusOr<RangeResult> r) mutable {
            if (!r.ok()) {
              ReplyStatus(r.status(), false);
              Done();
              return;
            }
            uint64_t cursor = 0;
            if (!r->continuation.empty() && !r->elements.empty()) {
              cursor = ctx_->cursors->Put(std::move(set),
                                          r->elements.back().element);
            }
            std::vector<const std::string*> page;
            for (const ElementDots& e : r->elements) {
              if (match.empty() || GlobMatch(match, e.element)) {
                page.push_back(&e.element);
              }
            }
            RespWriter w = Out();
            w.Array(2);
            w.Bulk(absl::StrCat(cursor));
            w.Array(page.size());
            for (const std::string* e : page) w.Bulk(*e);
            Done();
          }));
}

void Session::CmdSscan(Args& a) {
  // Any integer is a cursor to Redis (a negative one wraps around).
  uint64_t cursor = 0;
  int64_t signed_cursor = 0;
  const bool spaced = !a[2].empty() && (a[2][0] == ' ' || a[2][0] == '+');
  if (spaced || (!absl::SimpleAtoi(a[2], &cursor) &&
                 !absl::SimpleAtoi(a[2], &signed_cursor))) {
    ReplyError("ERR invalid cursor");
    Done();
    return;
  }
  if (signed_cursor < 0) cursor = static_cast<uint64_t>(signed_cursor);
  size_t count = 10;
  std::string match;
  std::string bad;  // The options' first error.
  for (size_t i = 3; i < a.size() && bad.empty(); i += 2) {
    const std::string opt = absl::AsciiStrToLower(a[i]);
    if (i + 1 >= a.size()) {
      bad = "ERR syntax error";
    } else if (opt == "count") {
      int64_t c = 0;
      if (!absl::SimpleAtoi(a[i + 1], &c)) {
        bad = "ERR value is not an integer or out of range";
      } else if (c < 1) {
        bad = "ERR syntax error";
      } else {
        count = static_cast<size_t>(std::min<int64_t>(c, 100'000));
      }
    } else if (opt == "match") {
      match = a[i + 1];
    } else {
      bad = "ERR syntax error";
    }
  }
  if (!bad.empty()) {
    // Redis answers a missing key with an empty scan before it looks at
    // the options.
    ctx_->runner->Count(a[1], ReadOptions(),
                        Later<absl::StatusOr<uint64_t>>(
                            [this, bad](absl::StatusOr<uint64_t> n) {
                              if (!n.ok()) {
                                ReplyStatus(n.status(), false);
                              } else if (*n == 0) {
                                RespWriter w = Out();
                                w.Array(2);
                                w.Bulk("0");
                                w.Array(0);
                              } else {
                                ReplyError(bad);
                              }
                              Done();
                            }));
    return;
  }
  // MATCH "abc*" reads only the elements that start with "abc".
  ElementBounds bounds =
      PrefixBounds(match == "*" ? "" : GlobLiteralPrefix(match));
  if (match == "*") match.clear();
  ScanPage(a[1], bounds, cursor, count, std::move(match));
}

struct Session::KeysWalk {
  std::vector<std::string> keys;
  size_t next = 0;
  std::vector<uint64_t> counts;
  std::function<void(absl::StatusOr<std::vector<uint64_t>>)> done;
};

void Session::CountKeys(
    std::vector<std::string> keys,
    std::function<void(absl::StatusOr<std::vector<uint64_t>>)> done) {
  auto walk = std::make_shared<KeysWalk>();
  walk->keys = std::move(keys);
  walk->done = std::move(done);
  CountNext(std::move(walk));
}

void Session::CountNext(std::shared_ptr<KeysWalk> walk) {
  // One count at a time, in order.
  if (walk->next == walk->keys.size()) {
    walk->done(std::move(walk->counts));
    return;
  }
  std::string key = walk->keys[walk->next++];
  ctx_->runner->Count(
      std::move(key), ReadOptions(),
      Later<absl::StatusOr<uint64_t>>([this, walk](absl::StatusOr<uint64_t> n) {
        if (!n.ok()) {
          walk->done(n.status());
          return;
        }
        walk->counts.push_back(*n);
        CountNext(walk);
      }));
}

void Session::DelNext(std::shared_ptr<KeysWalk> walk) {
  // One clear at a time, in order; counts[0] counts the sets cleared.
  if (walk->next == walk->keys.size()) {
    Out().Integer(static_cast<int64_t>(walk->counts[0]));
    Done();
    return;
  }
  std::string key = walk->keys[walk->next++];
  ClearSet(std::move(key), [this, walk](absl::StatusOr<bool> cleared) {
    if (!cleared.ok()) {
      ReplyStatus(cleared.status(), true);
      Done();
      return;
    }
    walk->counts[0] += *cleared ? 1 : 0;
    DelNext(walk);
  });
}

void Session::ClearSet(std::string set,
                       std::function<void(absl::StatusOr<bool>)> done) {
  ctx_->runner->Count(
      set, ReadOptions(),
      Continue<absl::StatusOr<uint64_t>>([this, set,
                                          done](absl::StatusOr<uint64_t> n) {
        if (!n.ok() || *n == 0) {
          done(n.ok() ? absl::StatusOr<bool>(false) : n.status());
          return;
        }
        // The context of the clear is the clock a read quorum returns: what
        // they hold is removed, an add none of them had seen survives.
        ctx_->runner->Read(set, ReadOptions(),
                           new ClockHandler(Continue<absl::StatusOr<Clock>>(
                               [this, set, done](absl::StatusOr<Clock> clock) {
                                 if (!clock.ok()) {
                                   done(clock.status());
                                   return;
                                 }
                                 ctx_->runner->Clear(
                                     set, std::move(*clock), WriteOptions(),
                                     Continue<absl::StatusOr<Delta>>(
                                         [done](absl::StatusOr<Delta> d) {
                                           done(d.ok()
                                                    ? absl::StatusOr<bool>(true)
                                                    : d.status());
                                         }));
                               })),
                           Nothing());
      }));
}

void Session::CmdDel(Args& a) {
  auto walk = std::make_shared<KeysWalk>();
  walk->keys = Distinct(a, 1);
  walk->counts = {0};
  DelNext(std::move(walk));
}

void Session::CmdExists(Args& a) {
  CountKeys(std::vector<std::string>(a.begin() + 1, a.end()),
            [this](absl::StatusOr<std::vector<uint64_t>> counts) {
              if (!counts.ok()) {
                ReplyStatus(counts.status(), false);
              } else {
                int64_t n = 0;
                for (uint64_t c : *counts) n += c > 0 ? 1 : 0;
                Out().Integer(n);
              }
              Done();
            });
}

void Session::CmdObject(Args& a) {
  const std::string sub = absl::AsciiStrToLower(a[1]);
  if (sub == "help") {
    RespWriter w = Out();
    w.Array(3);
    w.Simple("OBJECT <subcommand> [<arg> ...]. Subcommands are:");
    w.Simple("ENCODING <key>");
    w.Simple(
        "    Return the kind of internal representation: always "
        "\"bigset\" (one LevelDB key per element) for an existing key.");
    Done();
    return;
  }
  if (sub != "encoding" || a.size() != 3) {
    ReplyError(
        absl::StrCat("ERR unknown subcommand or wrong number of "
                     "arguments for '",
                     a[1].substr(0, 64), "'. Try OBJECT HELP."));
    Done();
    return;
  }
  // One encoding for every set, whatever its size or members: an ORSWOT
  // over LevelDB, a key per element.
  CountKeys({a[2]}, [this](absl::StatusOr<std::vector<uint64_t>> counts) {
    if (!counts.ok()) {
      ReplyStatus(counts.status(), false);
    } else if ((*counts)[0] == 0) {
      Out().Null();
    } else {
      Out().Bulk("bigset");
    }
    Done();
  });
}

void Session::CmdType(Args& a) {
  CountKeys({a[1]}, [this](absl::StatusOr<std::vector<uint64_t>> counts) {
    if (!counts.ok()) {
      ReplyStatus(counts.status(), false);
    } else {
      Out().Simple((*counts)[0] > 0 ? "set" : "none");
    }
    Done();
  });
}

}  // namespace bigset::server
