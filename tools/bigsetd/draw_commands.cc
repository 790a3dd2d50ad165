// The Redis set commands that draw at random: SPOP (and BIGSET.SPOP, an
// SPOP another node passed on to the set's owner) and SRANDMEMBER.
//
// A draw is uniform: from one streaming read of a small set (reservoir
// sampling), through the set's skeleton for a large one (sampler.h). A
// set's SPOPs run on its owner node, in batches (one draw and one remove
// for all the pops waiting), one batch of a set at a time.

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "keyspace.h"
#include "membership.h"
#include "read_handlers.h"
#include "redis_int.h"
#include "resp_client.h"
#include "sampler.h"
#include "session.h"

namespace bigset::server {
namespace {

// Removes per write of a pop.
constexpr size_t kRemoveBatch = 1000;

}  // namespace

// SPOP and SRANDMEMBER draw from the whole set, read in one streaming
// quorum read: each member is equally likely (a uniform sample without
// replacement for a positive count, independent uniform draws for a
// negative one). Memory: the sample (reservoir sampling), except for
// SRANDMEMBER with a negative count, which holds the set (up to
// --smembers-max).
struct Session::Draw {
  std::string set;
  bool pop = false;
  bool with_count = false;
  int64_t count = 1;  // < 0: with repeats (SRANDMEMBER).
  // BIGSET.SPOP: another node passed the pop on; the reply is the drawn
  // members as one bulk (EncodeSetNames).
  bool passed_on = false;
};

namespace {

// Reservoir sampling (Algorithm R) of `k` elements with their dots, or all
// of them (k < 0).
class SampleHandler final : public ReadHandler {
 public:
  using Done = std::function<void(absl::StatusOr<std::vector<ElementDots>>)>;
  SampleHandler(int64_t k, size_t max_all, uint64_t seed, Done done)
      : k_(k), max_all_(max_all), rng_(seed), done_(std::move(done)) {}
  void OnClock(const Clock&) override {}
  void OnChunk(std::vector<ElementDots>* elements,
               std::function<void()> next) override {
    for (ElementDots& e : *elements) {
      ++seen_;
      if (k_ < 0) {
        if (sample_.size() >= max_all_) {
          too_many_ = true;
          break;
        }
        sample_.push_back(std::move(e));
      } else if (sample_.size() < static_cast<uint64_t>(k_)) {
        sample_.push_back(std::move(e));
      } else {
        std::uniform_int_distribution<uint64_t> pick(0, seen_ - 1);
        const uint64_t j = pick(rng_);
        if (j < sample_.size()) sample_[j] = std::move(e);
      }
    }
    next();
  }
  void OnDone(absl::Status status) override {
    Done done = std::move(done_);
    if (!status.ok()) {
      done(status);
    } else if (too_many_) {
      done(absl::ResourceExhaustedError("too many"));
    } else {
      std::shuffle(sample_.begin(), sample_.end(), rng_);
      done(std::move(sample_));
    }
    delete this;
  }

 private:
  const int64_t k_;
  const size_t max_all_;
  std::mt19937_64 rng_;
  Done done_;
  uint64_t seen_ = 0;
  bool too_many_ = false;
  std::vector<ElementDots> sample_;
};

// Builds a skeleton from one streaming read of the set.
class SkeletonHandler final : public ReadHandler {
 public:
  using Done = std::function<void(absl::StatusOr<std::shared_ptr<Skeleton>>)>;
  SkeletonHandler(uint64_t count, Done done)
      : skeleton_(std::make_shared<Skeleton>()), done_(std::move(done)) {
    skeleton_->stride = SkeletonStride(count);
  }
  void OnClock(const Clock&) override {}
  void OnChunk(std::vector<ElementDots>* elements,
               std::function<void()> next) override {
    for (const ElementDots& e : *elements) skeleton_->Add(e.element, index_++);
    next();
  }
  void OnDone(absl::Status status) override {
    Done done = std::move(done_);
    if (!status.ok()) {
      done(status);
    } else {
      skeleton_->built_count = index_;
      done(std::move(skeleton_));
    }
    delete this;
  }

 private:
  std::shared_ptr<Skeleton> skeleton_;
  Done done_;
  uint64_t index_ = 0;
};

// Sets up to this many members are sampled from one full read (exact, and
// as cheap as the skeleton's reads); larger ones through a skeleton,
// unless the draw wants more than a quarter of the set.
constexpr uint64_t kSampleByReadMax = 4096;
// The skeletons' memory, for all sets together.
constexpr size_t kSkeletonBudget = 16 << 20;

// `done`, posted to the server's thread.
template <typename T>
std::function<void(T)> OnServer(asio::io_context* io,
                                std::function<void(T)> done) {
  return [io, done = std::move(done)](T value) mutable {
    asio::post(*io,
               [done = std::move(done), value = std::move(value)]() mutable {
                 done(std::move(value));
               });
  };
}

}  // namespace

void Session::DrawMembers(ServerContext* ctx, const std::string& set, size_t k,
                          const ClusterReadOptions& ro, DrawDone done) {
  // Its count first (constant time while the replicas agree) decides how.
  asio::io_context* io = ctx->io;
  ctx->runner->Count(
      set, ro,
      OnServer<absl::StatusOr<uint64_t>>(io, [ctx, set, k, ro, done](
                                                 absl::StatusOr<uint64_t> n) {
        if (!n.ok()) {
          done(n.status());
          return;
        }
        const size_t max = ctx->config->smembers_max;
        if (std::min<uint64_t>(k, *n) > max) {
          done(absl::ResourceExhaustedError(
              absl::StrCat("ERR would draw more than ", max,
                           " members (--smembers-max): ask for fewer")));
          return;
        }
        if (*n <= kSampleByReadMax || k > *n / 4) {
          ctx->stats.draws_by_full_read.fetch_add(1, std::memory_order_relaxed);
          ctx->runner->Read(
              set, ro,
              new SampleHandler(
                  static_cast<int64_t>(k), ctx->config->smembers_max,
                  ctx->rng(),
                  OnServer<absl::StatusOr<std::vector<ElementDots>>>(ctx->io,
                                                                     done)));
          return;
        }
        ctx->stats.draws_by_skeleton.fetch_add(1, std::memory_order_relaxed);
        auto draw = [ctx, set, k, ro, done](std::shared_ptr<Skeleton> sk) {
          Sampler::Draw(
              std::move(sk), k, ctx->rng(),
              [ctx, set, ro](
                  RangeQuery q,
                  std::function<void(absl::StatusOr<RangeResult>)> cb) {
                ctx->runner->Range(set, std::move(q), ro,
                                   OnServer<absl::StatusOr<RangeResult>>(
                                       ctx->io, std::move(cb)));
              },
              done);
        };
        auto it = ctx->skeletons.find(set);
        if (it != ctx->skeletons.end()) {
          const Skeleton& sk = *it->second;
          const uint64_t built = sk.built_count;
          const bool moved = *n > built + built / 4 || *n < built - built / 4;
          if (!sk.stale && !moved) {
            draw(it->second);
            return;
          }
          ctx->skeleton_bytes -= sk.bytes();
          ctx->skeletons.erase(it);
        }
        ctx->stats.skeleton_builds.fetch_add(1, std::memory_order_relaxed);
        ctx->runner->Read(
            set, ro,
            new SkeletonHandler(
                *n,
                OnServer<absl::StatusOr<std::shared_ptr<Skeleton>>>(
                    ctx->io, [ctx, set, draw, done](
                                 absl::StatusOr<std::shared_ptr<Skeleton>> sk) {
                      if (!sk.ok()) {
                        done(sk.status());
                        return;
                      }
                      // Kept within the budget (others are dropped
                      // first).
                      const size_t bytes = (*sk)->bytes();
                      auto old = ctx->skeletons.find(set);
                      if (old != ctx->skeletons.end()) {
                        ctx->skeleton_bytes -= old->second->bytes();
                        ctx->skeletons.erase(old);
                      }
                      while (!ctx->skeletons.empty() &&
                             ctx->skeleton_bytes + bytes > kSkeletonBudget) {
                        auto victim = ctx->skeletons.begin();
                        ctx->skeleton_bytes -= victim->second->bytes();
                        ctx->skeletons.erase(victim);
                      }
                      if (bytes <= kSkeletonBudget) {
                        ctx->skeletons.emplace(set, *sk);
                        ctx->skeleton_bytes += bytes;
                      }
                      draw(*sk);
                    })));
      }));
}

void Session::CmdSpop(Args& a) {
  auto draw = std::make_shared<Draw>();
  draw->set = a[1];
  draw->pop = true;
  if (a.size() > 3) {
    ReplyError("ERR syntax error");
    Done();
    return;
  }
  if (a.size() == 3) {
    draw->with_count = true;
    if (!RedisInt(a[2], &draw->count) || draw->count < 0) {
      ReplyError("ERR value is out of range, must be positive");
      Done();
      return;
    }
  }
  // One SPOP of a set at a time, on one node: the next reads after this
  // one's remove was acknowledged, so they never pop the same member. The
  // node is the set's owner: the first of its preference list this node is
  // connected to (itself first if it is on the list before them).
  const NodeId owner = SpopOwner(draw->set);
  if (owner != 0) {
    PassSpopOn(owner, std::move(draw));
    return;
  }
  RunPop(std::move(draw));
}

void Session::CmdBigsetSpop(Args& a) {
  // BIGSET.SPOP key [count]: an SPOP another node passed on; always run
  // here (the nodes' views of the owner may differ for a moment).
  auto draw = std::make_shared<Draw>();
  draw->set = a[1];
  draw->pop = true;
  draw->passed_on = true;
  if (a.size() > 3 ||
      (a.size() == 3 && (!RedisInt(a[2], &draw->count) || draw->count < 0))) {
    ReplyError("ERR usage: BIGSET.SPOP key [count]");
    Done();
    return;
  }
  draw->with_count = a.size() == 3;
  RunPop(std::move(draw));
}

void Session::RunPop(std::shared_ptr<Draw> draw) {
  const size_t max = ctx_->config->smembers_max;
  if (draw->with_count && draw->count == 0) {
    ReplyPopped(*draw, {});
    Done();
    return;
  }
  std::shared_ptr<Session> self = shared_from_this();
  PendingPop pop;
  // More than the bound cannot be answered (unless the set is smaller):
  // clamped so that sums stay small.
  pop.want = std::min<int64_t>(draw->count, static_cast<int64_t>(max) + 1);
  pop.r = r_;
  pop.w = w_;
  pop.done = [self, draw](absl::Status status, bool write_failed,
                          std::vector<std::string> members) {
    if (absl::IsResourceExhausted(status)) {
      self->ReplyError(std::string(status.message()));
    } else if (!status.ok()) {
      self->ReplyStatus(status, write_failed);
    } else {
      self->ReplyPopped(*draw, members);
    }
    self->Done();
  };
  QueuePop(ctx_, draw->set, std::move(pop));
}

void Session::ReplyPopped(const Draw& draw,
                          const std::vector<std::string>& members) {
  RespWriter w = Out();
  if (draw.passed_on) {
    w.Bulk(EncodeSetNames(members));
  } else if (!draw.with_count) {
    if (members.empty()) {
      w.Null();
    } else {
      w.Bulk(members[0]);
    }
  } else {
    w.Set(members.size());
    for (const std::string& m : members) w.Bulk(m);
  }
}

void Session::QueuePop(ServerContext* ctx, const std::string& set,
                       PendingPop pop) {
  auto [it, fresh] = ctx->pops_waiting.try_emplace(set);
  it->second.push_back(std::move(pop));
  // The first to wait asks for the set's lock; the batch that gets it
  // takes every pop waiting then.
  if (fresh) {
    ctx->set_locks.Acquire(set, [ctx, set]() { RunPops(ctx, set); });
  }
}

void Session::RunPops(ServerContext* ctx, const std::string& set) {
  // The batch: the pops waiting, in arrival order, with the first one's
  // quorums, up to --smembers-max members in all; the rest wait for the
  // next batch.
  auto it = ctx->pops_waiting.find(set);
  std::deque<PendingPop>& waiting = it->second;
  auto batch = std::make_shared<std::vector<PendingPop>>();
  const int r = waiting.front().r, w = waiting.front().w;
  int64_t total = 0;
  const int64_t max = static_cast<int64_t>(ctx->config->smembers_max);
  while (!waiting.empty() && waiting.front().r == r && waiting.front().w == w &&
         (batch->empty() || total + waiting.front().want <= max)) {
    total += waiting.front().want;
    batch->push_back(std::move(waiting.front()));
    waiting.pop_front();
  }
  if (waiting.empty()) {
    ctx->pops_waiting.erase(it);
  } else {
    ctx->set_locks.Acquire(set, [ctx, set]() { RunPops(ctx, set); });
  }

  // Ends the batch: each pop gets its share, in arrival order (as if run
  // one after the other), then the lock goes to the next.
  auto finish = [ctx, set, batch](absl::Status status, bool write_failed,
                                  std::vector<ElementDots> drawn) {
    size_t next = 0;
    for (PendingPop& pop : *batch) {
      std::vector<std::string> mine;
      while (status.ok() && next < drawn.size() &&
             static_cast<int64_t>(mine.size()) < pop.want) {
        mine.push_back(std::move(drawn[next++].element));
      }
      pop.done(status, write_failed, std::move(mine));
    }
    ctx->set_locks.Release(set);
  };
  ClusterReadOptions ro;
  ro.r = r;
  ro.timeout_micros = ctx->config->timeout_micros;
  ro.query_hedge_micros = ctx->config->query_hedge_micros;
  ClusterWriteOptions wo;
  wo.w = w;
  wo.timeout_micros = ctx->config->timeout_micros;
  DrawMembers(
      ctx, set, static_cast<size_t>(total), ro,
      [ctx, set, wo, finish](absl::StatusOr<std::vector<ElementDots>> sample) {
        if (!sample.ok()) {
          finish(sample.status(), false, {});
          return;
        }
        if (sample->empty()) {
          finish(absl::OkStatus(), false, {});
          return;
        }
        // Observed-remove of exactly the dots read: an add of the same
        // member made meanwhile survives (add wins).
        std::vector<UpdateOp> ops;
        for (const ElementDots& e : *sample) {
          ops.push_back(UpdateOp::Remove(e.element, e.dots));
        }
        auto drawn =
            std::make_shared<std::vector<ElementDots>>(std::move(*sample));
        RemoveDrawn(ctx, set, wo, std::move(ops), 0,
                    [finish, drawn](absl::Status s) {
                      finish(s, !s.ok(), std::move(*drawn));
                    });
      });
}

void Session::RemoveDrawn(ServerContext* ctx, const std::string& set,
                          const ClusterWriteOptions& wo,
                          std::vector<UpdateOp> ops, size_t from,
                          std::function<void(absl::Status)> done) {
  // A write of at most kRemoveBatch removes at a time, each with its own
  // timeout: a pop of many members is not one write too large for it.
  const size_t end = std::min(ops.size(), from + kRemoveBatch);
  std::vector<UpdateOp> batch(
      std::make_move_iterator(ops.begin() + static_cast<long>(from)),
      std::make_move_iterator(ops.begin() + static_cast<long>(end)));
  auto rest = std::make_shared<std::vector<UpdateOp>>(std::move(ops));
  asio::io_context* io = ctx->io;
  ctx->runner->Update(
      set, std::move(batch), wo,
      [ctx, io, set, wo, rest, end, done](absl::StatusOr<Delta> d) {
        asio::post(*io, [ctx, set, wo, rest, end, done, d]() {
          if (!d.ok() || end >= rest->size()) {
            done(d.status());
            return;
          }
          RemoveDrawn(ctx, set, wo, std::move(*rest), end, done);
        });
      });
}

NodeId Session::SpopOwner(const std::string& set) {
  if (ctx_->membership == nullptr) return 0;
  const ClusterMap map = ctx_->membership->Current();
  const NodeId self = ctx_->runner->id();
  const TransportStats transport = ctx_->runner->TransportStatistics();
  auto connected = [&transport](NodeId id) {
    for (const PeerStats& p : transport.peers) {
      if (p.node == id) return p.connected;
    }
    return false;
  };
  for (NodeId id : map.ring.PreferenceList(map.ring.PartitionOf(set))) {
    if (id == self) return 0;
    auto it = map.nodes.find(id);
    if (connected(id) && it != map.nodes.end() &&
        it->second.client.has_value()) {
      return id;
    }
  }
  return 0;  // None reachable: pop here.
}

void Session::PassSpopOn(NodeId owner, std::shared_ptr<Draw> draw) {
  const ClusterMap map = ctx_->membership->Current();
  const PeerAddress address = *map.nodes.at(owner).client;
  std::vector<std::string> args = {"BIGSET.SPOP", draw->set};
  if (draw->with_count) args.push_back(absl::StrCat(draw->count));
  const std::string password = ctx_->config->requirepass;
  const uint64_t timeout_micros = ctx_->config->timeout_micros;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::microseconds(2 * timeout_micros);
  std::shared_ptr<Session> self = shared_from_this();
  ctx_->forward_worker->Run([self, owner, address, args, password,
                             timeout_micros, deadline, draw]() {
    absl::StatusOr<std::string> reply;
    if (std::chrono::steady_clock::now() > deadline) {
      // Waited its whole time behind other passed-on pops: it ends.
      reply = absl::DeadlineExceededError("waited too long to be passed on");
    } else {
      // The owner writes a pop's removes 1,000 at a time, each within a
      // timeout: the wait grows with the count.
      const uint64_t writes =
          draw->with_count ? static_cast<uint64_t>(draw->count) / 1000 : 0;
      reply = RespCall(address, password, args,
                       static_cast<int>(std::min<uint64_t>(
                           (2 + writes) * (timeout_micros / 1000), 3'600'000)),
                       size_t{1} << 30);
    }
    asio::post(*self->ctx_->io, [self, owner, draw, reply]() {
      if (absl::IsFailedPrecondition(reply.status())) {
        // The owner's own error reply ("NOREPLICAS ...", "TRYAGAIN ...").
        self->ReplyError(std::string(reply.status().message()));
      } else if (!reply.ok()) {
        self->ReplyError(
            absl::StrCat("TRYAGAIN SPOP's owner, node ", owner,
                         ", did not answer (the pop may have run there): ",
                         reply.status().message()));
      } else {
        absl::StatusOr<std::vector<std::string>> members =
            DecodeSetNames(*reply);
        if (!members.ok()) {
          self->ReplyError(absl::StrCat("ERR SPOP's owner, node ", owner,
                                        ", answered garbage"));
        } else {
          RespWriter w = self->Out();
          if (!draw->with_count) {
            if (members->empty()) {
              w.Null();
            } else {
              w.Bulk((*members)[0]);
            }
          } else {
            w.Set(members->size());
            for (const std::string& m : *members) w.Bulk(m);
          }
        }
      }
      self->Done();
    });
  });
}

void Session::CmdSrandmember(Args& a) {
  auto draw = std::make_shared<Draw>();
  draw->set = a[1];
  if (a.size() > 3) {
    ReplyError("ERR syntax error");
    Done();
    return;
  }
  if (a.size() == 3) {
    draw->with_count = true;
    int64_t c = 0;
    if (!RedisInt(a[2], &c)) {
      ReplyError("ERR value is not an integer or out of range");
      Done();
      return;
    }
    if (c == INT64_MIN) {
      ReplyError(
          "ERR value is out of range, value must between "
          "-9223372036854775807 and 9223372036854775807");
      Done();
      return;
    }
    draw->count = c;
  }
  RunDraw(draw);
}

void Session::RunDraw(std::shared_ptr<Draw> draw) {
  // SRANDMEMBER (SPOP: RunPop).
  const size_t max = ctx_->config->smembers_max;
  if (draw->with_count && draw->count == 0) {
    Out().Array(0);
    Done();
    return;
  }
  if (draw->count < 0 && -draw->count > static_cast<int64_t>(max)) {
    ReplyError(absl::StrCat("ERR count over --smembers-max (", max, ")"));
    Done();
    return;
  }
  auto reply = Continue<absl::StatusOr<std::vector<ElementDots>>>(
      [this, draw](absl::StatusOr<std::vector<ElementDots>> sample) {
        if (absl::IsResourceExhausted(sample.status()) && draw->count < 0) {
          ReplyError(
              absl::StrCat("ERR set has more than ", ctx_->config->smembers_max,
                           " elements (--smembers-max): use a positive count"));
        } else if (absl::IsResourceExhausted(sample.status())) {
          ReplyError(std::string(sample.status().message()));
        } else if (!sample.ok()) {
          ReplyStatus(sample.status(), false);
        } else if (draw->count < 0) {
          // Independent draws, repeats allowed.
          RespWriter w = Out();
          if (sample->empty()) {
            w.Array(0);
          } else {
            std::uniform_int_distribution<size_t> pick(0, sample->size() - 1);
            const int64_t n = -draw->count;
            w.Array(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i) {
              w.Bulk((*sample)[pick(ctx_->rng)].element);
            }
          }
        } else if (!draw->with_count) {
          RespWriter w = Out();
          if (sample->empty()) {
            w.Null();
          } else {
            w.Bulk((*sample)[0].element);
          }
        } else {
          RespWriter w = Out();
          w.Array(sample->size());
          for (const ElementDots& e : *sample) w.Bulk(e.element);
        }
        Done();
      });
  if (draw->count < 0) {
    // Independent draws: from the whole set, held (up to --smembers-max).
    ctx_->runner->Read(draw->set, ReadOptions(),
                       new SampleHandler(-1, max, ctx_->rng(), reply));
    return;
  }
  DrawMembers(ctx_, draw->set, static_cast<size_t>(draw->count), ReadOptions(),
              reply);
}

}  // namespace bigset::server
