// The Redis set commands over several sets: SINTER, SUNION, SDIFF,
// SINTERCARD, SINTERSTORE, SUNIONSTORE, SDIFFSTORE, SMOVE (the draws,
// SPOP and SRANDMEMBER, are in draw_commands.cc).
//
// Set algebra is a streaming merge of the sets' range reads (SetMerge): its
// memory is bounded by a page per set, whatever their sizes. SINTERCARD and
// the *STORE forms stream; SINTER, SUNION and SDIFF must hold their reply,
// and refuse one over --smembers-max elements, as SMEMBERS does.

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "read_handlers.h"
#include "redis_int.h"
#include "session.h"
#include "set_merge.h"

namespace bigset::server {
namespace {

// Pages and chunks of the merges: a page per set in memory at a time.
constexpr size_t kMergePage = 1000;
// Adds per write of a *STORE.
constexpr size_t kStoreBatch = 1000;

}  // namespace

SetMerge::Fetch Session::MergeFetch() {
  std::shared_ptr<Session> self = shared_from_this();
  return [self](const std::string& set, RangeQuery q,
                std::function<void(absl::StatusOr<RangeResult>)> done) {
    self->ctx_->runner->Range(
        set, std::move(q), self->ReadOptions(),
        self->Continue<absl::StatusOr<RangeResult>>(std::move(done)));
  };
}

void Session::ReplyMerged(SetOp op, std::vector<std::string> sets) {
  const size_t max = ctx_->config->smembers_max;
  auto result = std::make_shared<std::vector<std::string>>();
  SetMerge::Options o{kMergePage, kMergePage};
  SetMerge::Start(
      op, std::move(sets), o, MergeFetch(),
      [this, result, max](SetMerge& merge, std::vector<std::string> chunk) {
        if (result->size() + chunk.size() > max) {
          merge.Stop();
          ctx_->stats.smembers_refused.fetch_add(1, std::memory_order_relaxed);
          ReplyError(absl::StrCat("ERR result has more than ", max,
                                  " elements (--smembers-max): use the "
                                  "*STORE form, SINTERCARD or SSCAN"));
          Done();
          return;
        }
        for (std::string& e : chunk) result->push_back(std::move(e));
        merge.Resume();
      },
      [this, result](absl::Status status) {
        if (!status.ok()) {
          ReplyStatus(status, false);
        } else {
          RespWriter w = Out();
          w.Set(result->size());
          for (const std::string& e : *result) w.Bulk(e);
        }
        Done();
      });
}

void Session::CmdSinter(Args& a) {
  ReplyMerged(SetOp::kIntersection, Args(a.begin() + 1, a.end()));
}

void Session::CmdSunion(Args& a) {
  ReplyMerged(SetOp::kUnion, Args(a.begin() + 1, a.end()));
}

void Session::CmdSdiff(Args& a) {
  ReplyMerged(SetOp::kDifference, Args(a.begin() + 1, a.end()));
}

void Session::CmdSintercard(Args& a) {
  int64_t numkeys = 0;
  if (!RedisInt(a[1], &numkeys) || numkeys <= 0) {
    ReplyError("ERR numkeys should be greater than 0");
    Done();
    return;
  }
  if (static_cast<uint64_t>(numkeys) > a.size() - 2) {
    ReplyError("ERR Number of keys can't be greater than number of args");
    Done();
    return;
  }
  int64_t limit = 0;
  for (size_t i = 2 + static_cast<size_t>(numkeys); i < a.size(); i += 2) {
    if (absl::AsciiStrToLower(a[i]) != "limit" || i + 1 >= a.size()) {
      ReplyError("ERR syntax error");
      Done();
      return;
    }
    if (!RedisInt(a[i + 1], &limit) || limit < 0) {
      ReplyError("ERR LIMIT can't be negative");
      Done();
      return;
    }
  }
  auto count = std::make_shared<int64_t>(0);
  SetMerge::Options o{kMergePage, kMergePage};
  SetMerge::Start(
      SetOp::kIntersection,
      Args(a.begin() + 2, a.begin() + 2 + static_cast<long>(numkeys)), o,
      MergeFetch(),
      [this, count, limit](SetMerge& merge, std::vector<std::string> chunk) {
        *count += static_cast<int64_t>(chunk.size());
        if (limit > 0 && *count >= limit) {
          // Enough: the rest is not read.
          merge.Stop();
          Out().Integer(limit);
          Done();
          return;
        }
        merge.Resume();
      },
      [this, count](absl::Status status) {
        if (!status.ok()) {
          ReplyStatus(status, false);
        } else {
          Out().Integer(*count);
        }
        Done();
      });
}

// A *STORE: the destination's clock first (the clear's context: what it
// holds now), then, unless the destination is among the sources, the
// clear and the result's adds in batches as the merge makes them. A
// destination that is also a source is merged whole into memory first
// (bounded by --smembers-max), so that the clear cannot hide from the
// merge what it reads. Not atomic: a reader may see the destination
// cleared and partly filled, and a failed write leaves it so (the reply
// is then NOREPLICAS: the store may have partly applied).
struct Session::Store {
  std::string dest;
  SetOp op;
  std::vector<std::string> sources;
  bool buffered = false;
  Clock context;
  bool cleared = false;
  int64_t count = 0;
  std::vector<std::string> held;  // Buffered mode: the whole result.
};

void Session::StoreMerged(SetOp op, std::string dest, Args sources) {
  auto store = std::make_shared<Store>();
  store->dest = std::move(dest);
  store->op = op;
  store->sources = std::move(sources);
  store->buffered = std::find(store->sources.begin(), store->sources.end(),
                              store->dest) != store->sources.end();
  ctx_->runner->Read(store->dest, ReadOptions(),
                     new ClockHandler(Continue<absl::StatusOr<Clock>>(
                         [this, store](absl::StatusOr<Clock> clock) {
                           if (!clock.ok()) {
                             ReplyStatus(clock.status(), false);
                             Done();
                             return;
                           }
                           store->context = std::move(*clock);
                           StoreRun(store);
                         })),
                     Nothing());
}

void Session::StoreRun(std::shared_ptr<Store> store) {
  const size_t max = ctx_->config->smembers_max;
  SetMerge::Options o{kMergePage, kStoreBatch};
  SetMerge::Start(
      store->op, store->sources, o, MergeFetch(),
      [this, store, max](SetMerge& merge, std::vector<std::string> chunk) {
        store->count += static_cast<int64_t>(chunk.size());
        if (store->buffered) {
          if (store->held.size() + chunk.size() > max) {
            merge.Stop();
            ReplyError(absl::StrCat(
                "ERR result has more than ", max,
                " elements (--smembers-max) and its destination is one of "
                "its sources: store it elsewhere first"));
            Done();
            return;
          }
          for (std::string& e : chunk) store->held.push_back(std::move(e));
          merge.Resume();
          return;
        }
        std::shared_ptr<SetMerge> keep = merge.shared_from_this();
        StoreWrite(store, std::move(chunk), [this, keep](absl::Status s) {
          if (!s.ok()) {
            keep->Stop();
            ReplyStatus(s, true);
            Done();
            return;
          }
          keep->Resume();
        });
      },
      [this, store](absl::Status status) {
        if (!status.ok()) {
          ReplyStatus(status, false);
          Done();
          return;
        }
        auto finish = [this, store](absl::Status s) {
          if (!s.ok()) {
            ReplyStatus(s, true);
          } else {
            Out().Integer(store->count);
          }
          Done();
        };
        if (!store->buffered) {
          // The clear, if the result was empty (it ran before the first
          // adds otherwise).
          StoreWrite(store, {}, finish);
          return;
        }
        StoreHeld(store, 0, finish);
      });
}

void Session::StoreHeld(std::shared_ptr<Store> store, size_t from,
                        std::function<void(absl::Status)> done) {
  const size_t end = std::min(store->held.size(), from + kStoreBatch);
  std::vector<std::string> batch(
      std::make_move_iterator(store->held.begin() + static_cast<long>(from)),
      std::make_move_iterator(store->held.begin() + static_cast<long>(end)));
  StoreWrite(store, std::move(batch), [this, store, end, done](absl::Status s) {
    if (!s.ok() || end >= store->held.size()) {
      done(s);
      return;
    }
    StoreHeld(store, end, done);
  });
}

void Session::StoreWrite(std::shared_ptr<Store> store,
                         std::vector<std::string> adds,
                         std::function<void(absl::Status)> done) {
  if (!store->cleared) {
    store->cleared = true;
    if (!store->context.empty()) {
      ctx_->runner->Clear(store->dest, store->context, WriteOptions(),
                          Continue<absl::StatusOr<Delta>>(
                              [this, store, adds = std::move(adds),
                               done](absl::StatusOr<Delta> d) mutable {
                                if (!d.ok()) {
                                  done(d.status());
                                  return;
                                }
                                StoreWrite(store, std::move(adds),
                                           std::move(done));
                              }));
      return;
    }
  }
  if (adds.empty()) {
    done(absl::OkStatus());
    return;
  }
  std::vector<UpdateOp> ops;
  ops.reserve(adds.size());
  for (std::string& e : adds) ops.push_back(UpdateOp::Add(std::move(e)));
  ctx_->runner->Update(
      store->dest, std::move(ops), WriteOptions(),
      Continue<absl::StatusOr<Delta>>([done](absl::StatusOr<Delta> d) {
        done(d.ok() ? absl::OkStatus() : d.status());
      }));
}

void Session::CmdSinterstore(Args& a) {
  StoreMerged(SetOp::kIntersection, a[1], Args(a.begin() + 2, a.end()));
}

void Session::CmdSunionstore(Args& a) {
  StoreMerged(SetOp::kUnion, a[1], Args(a.begin() + 2, a.end()));
}

void Session::CmdSdiffstore(Args& a) {
  StoreMerged(SetOp::kDifference, a[1], Args(a.begin() + 2, a.end()));
}

void Session::CmdSmove(Args& a) {
  std::string src = a[1], dst = a[2], member = a[3];
  if (src == dst) {
    // Redis: 1 if the member is there, and nothing changes.
    RunBatched(SetCommand::Kind::kIsMember, src, {member}, BatchReply::kFlag);
    return;
  }
  // The remove's context is the member's dots a read quorum holds; then
  // the add. Not atomic across the two sets: a reader between the two
  // writes sees the member in neither, and if the add fails (NOREPLICAS)
  // the member may be in neither until the client retries.
  ctx_->set_locks.Acquire(src, [this, src, dst, member]() {
    std::shared_ptr<Session> self = shared_from_this();
    auto release = [self, src]() { self->ctx_->set_locks.Release(src); };
    ctx_->batcher->Submit(
        src, r_, w_, SetCommand{SetCommand::Kind::kRemove, {member}},
        [self, dst, member, release](SetCommandResult removed) {
          release();
          if (!removed.status.ok()) {
            self->WriteStatusReply(removed.status, removed.write_failed);
            return;
          }
          if (removed.count == 0) {
            self->Out().Integer(0);
            self->Done();
            return;
          }
          self->ctx_->batcher->Submit(
              dst, self->r_, self->w_,
              SetCommand{SetCommand::Kind::kAdd, {member}},
              [self](SetCommandResult added) {
                if (!added.status.ok()) {
                  self->WriteStatusReply(added.status, true);
                  return;
                }
                self->Out().Integer(1);
                self->Done();
              });
        });
  });
}

void Session::WriteStatusReply(const absl::Status& status, bool write) {
  ReplyStatus(status, write);
  Done();
}

}  // namespace bigset::server
