// SetBatcher against a sequential model: commands submitted in any
// interleaving, while batches run, answer as if each ran alone in
// submission order; failures fail exactly the commands that depend on them.

#include "set_batcher.h"

#include <catch2/catch.hpp>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"

namespace bigset::server {
namespace {

using bigset::testing::Rng;
using bigset::testing::Seeds;
using bigset::testing::Uniform;

// One replica's worth of a set per batch key, in memory. Calls are queued
// until the test completes them (so that batches form behind them); a
// queued call can be made to fail. Adds replace their context's dots;
// removes take out exactly theirs (observed-remove), as Replica does. A
// read answers what the writes applied before it was made left (a replica
// takes a node's messages in order), or, with `late_reads` (an Rng),
// sometimes what they left when it completes (a replica a hedged read asks
// late, after writes made since reached it). A write is applied when it
// completes, or, with `early_writes` (an Rng), sometimes as soon as it is
// made (reads made meanwhile see it, as reads behind a real write may).
class FakeBackend final : public BatchBackend {
 public:
  struct Call {
    bool is_read = false;
    std::string set;
    int quorum = 0;
    uint64_t hedge_micros = 0;  // A read's.
    std::vector<std::string> elements;
    std::vector<UpdateOp> ops;
    std::optional<Delta> applied;  // A write applied before it completes.
    Membership answer;             // A read's, as of when it was made.
    std::function<void(absl::StatusOr<Membership>)> read_done;
    std::function<void(absl::StatusOr<Delta>)> write_done;
  };

  void ContainsAll(
      std::string set, std::vector<std::string> elements, int r,
      uint64_t timeout_micros, uint64_t hedge_micros,
      std::function<void(absl::StatusOr<Membership>)> done) override {
    timeouts.push_back(timeout_micros);
    Call c;
    c.is_read = true;
    c.hedge_micros = hedge_micros;
    c.set = std::move(set);
    c.quorum = r;
    c.elements = std::move(elements);
    c.read_done = std::move(done);
    // A replica takes a node's messages in order: the read sees what the
    // writes made before it left, never one made after it (whenever it
    // completes), unless it is answered late (Complete).
    c.answer = Held(c.set, c.elements);
    calls.push_back(std::move(c));
  }
  void Update(std::string set, std::vector<UpdateOp> ops, int w,
              uint64_t timeout_micros,
              std::function<void(absl::StatusOr<Delta>)> done) override {
    timeouts.push_back(timeout_micros);
    Call c;
    c.set = std::move(set);
    c.quorum = w;
    c.ops = std::move(ops);
    c.write_done = std::move(done);
    if (early_writes != nullptr && Uniform(*early_writes, 0, 1) == 0) {
      c.applied = Apply(c);
    }
    calls.push_back(std::move(c));
  }

  // Completes the call at `i`: with `error` (a write then applied anyway
  // if `apply`, or if it was applied early), or normally. Returns whether a
  // failed write was applied.
  bool Complete(size_t i, absl::Status error = absl::OkStatus(),
                bool apply = false) {
    Call c = std::move(calls[i]);
    calls.erase(calls.begin() + static_cast<long>(i));
    if (c.is_read) {
      if (!error.ok()) {
        c.read_done(error);
      } else if (late_reads != nullptr && Uniform(*late_reads, 0, 1) == 0) {
        c.read_done(Held(c.set, c.elements));
      } else {
        c.read_done(std::move(c.answer));
      }
      return false;
    }
    if (!c.applied.has_value() && (error.ok() || apply)) c.applied = Apply(c);
    const bool applied = c.applied.has_value();
    if (!error.ok()) {
      c.write_done(error);
    } else {
      c.write_done(std::move(*c.applied));
    }
    return applied;
  }

  std::deque<Call> calls;
  std::vector<uint64_t> timeouts;  // Of every call, in order.
  std::map<std::string, std::map<std::string, std::vector<Dot>>> sets;
  uint64_t counter = 0;
  Rng* early_writes = nullptr;
  Rng* late_reads = nullptr;

 private:
  // What the set holds of `elements` now.
  Membership Held(const std::string& set,
                  const std::vector<std::string>& elements) {
    Membership m;
    auto& held = sets[set];
    for (const std::string& e : elements) {
      ElementDots& ed = m.elements.emplace_back();
      ed.element = e;
      auto it = held.find(e);
      if (it != held.end()) ed.dots = it->second;
    }
    return m;
  }

  Delta Apply(const Call& c) {
    auto& set = sets[c.set];
    Delta delta;
    delta.set = c.set;
    for (const UpdateOp& op : c.ops) {
      std::vector<Dot>& dots = set[op.element];
      DeltaOp& d = delta.ops.emplace_back();
      d.element = op.element;
      d.context = op.context;
      if (op.context_from_replica) {
        d.context.insert(d.context.end(), dots.begin(), dots.end());
        std::sort(d.context.begin(), d.context.end());
        d.context.erase(std::unique(d.context.begin(), d.context.end()),
                        d.context.end());
      }
      std::erase_if(dots, [&](const Dot& x) {
        return std::find(d.context.begin(), d.context.end(), x) !=
               d.context.end();
      });
      if (op.kind == UpdateOp::Kind::kAdd) {
        d.add = Dot{1, ++counter};
        dots.push_back(*d.add);
      }
      if (dots.empty()) set.erase(op.element);
    }
    return delta;
  }
};

// The sequential model: what each command answers run alone, in order.
struct Model {
  std::map<std::string, std::set<std::string>> sets;
  SetCommandResult Run(const std::string& set, const SetCommand& c) {
    SetCommandResult r;
    std::set<std::string>& s = sets[set];
    for (const std::string& m : c.members) {
      switch (c.kind) {
        case SetCommand::Kind::kAdd:
          r.count += s.insert(m).second;
          break;
        case SetCommand::Kind::kRemove:
          r.count += s.erase(m);
          break;
        case SetCommand::Kind::kIsMember:
          r.present.push_back(s.count(m) > 0);
          break;
      }
    }
    return r;
  }
};

SetCommand Command(Rng& rng, const std::vector<std::string>& pool) {
  SetCommand c;
  const uint64_t kind = Uniform(rng, 0, 2);
  c.kind = kind == 0   ? SetCommand::Kind::kAdd
           : kind == 1 ? SetCommand::Kind::kRemove
                       : SetCommand::Kind::kIsMember;
  const size_t n = Uniform(rng, 1, 4);
  std::set<std::string> seen;
  for (size_t i = 0; i < n; ++i) {
    const std::string& m = pool[Uniform(rng, 0, pool.size() - 1)];
    // SADD and SREM name each member once (the session dedups them);
    // SMISMEMBER may repeat one.
    if (c.kind != SetCommand::Kind::kIsMember && !seen.insert(m).second) {
      continue;
    }
    c.members.push_back(m);
  }
  return c;
}

// One batch at a time: the shape of each batch is what a test looks at.
SetBatcherOptions OneAtATime() {
  SetBatcherOptions o;
  o.max_batches = 1;
  return o;
}

struct Submitted {
  std::string set;
  SetCommand command;
  std::optional<SetCommandResult> got;
  // For a command that failed with its write: whether that write applied.
  bool applied = false;
};

// Submits random commands while completing the backend's calls in random
// order, some with failures, then checks every answer against the
// sequential model in submission order: a command that failed with its
// write counts as run if the write was applied, as not run if not. Which
// it was is one choice per seed (every failed write applied, or none), as
// a batch's answers may come after later calls completed.
TEST_CASE("set batcher: any interleaving answers as submission order") {
  for (uint64_t seed : Seeds(60)) {
    CAPTURE(seed);
    Rng rng(seed);
    FakeBackend backend;
    SetBatcherOptions options;
    options.read_before_add = Uniform(rng, 0, 3) != 0;
    options.max_batch_members = Uniform(rng, 1, 12);
    options.max_batches = Uniform(rng, 1, 5);
    const bool failures = Uniform(rng, 0, 1) == 0;
    const bool failed_writes_apply = Uniform(rng, 0, 1) == 0;
    // A write applied when it is made and then failing was applied.
    if (!failures || failed_writes_apply) backend.early_writes = &rng;
    // Some reads answered as of when they complete, as a hedged read's
    // replicas asked late answer: bigsetd then reads before it adds
    // (read_with_write off), since such a replica may have applied the
    // adds sent with the read, and its clock covers the dots they replaced.
    const bool late_reads = Uniform(rng, 0, 1) == 0;
    if (late_reads) {
      backend.late_reads = &rng;
      options.read_with_write = false;
    }
    CAPTURE(options.read_before_add, options.max_batch_members,
            options.max_batches, failures, failed_writes_apply, late_reads);
    SetBatcher batcher(&backend, options);
    const std::vector<std::string> pool = {"a", "b", "c",
                                           "d", "",  std::string("e\0f", 3)};
    const std::vector<std::string> sets = {"s", "t"};
    std::vector<Submitted> submitted;
    submitted.reserve(2000);
    const int steps = 400;
    for (int step = 0; step < steps || !backend.calls.empty(); ++step) {
      if (step < steps && (backend.calls.empty() || Uniform(rng, 0, 2) != 0)) {
        const std::string& set = sets[Uniform(rng, 0, sets.size() - 1)];
        SetCommand c = Command(rng, pool);
        const size_t index = submitted.size();
        submitted.push_back(Submitted{set, c, std::nullopt, false});
        batcher.Submit(
            set, 2, 2, std::move(c),
            [&submitted, failed_writes_apply, index](SetCommandResult r) {
              REQUIRE(!submitted[index].got.has_value());
              // Only a failed write can have been applied (a
              // read that failed with it changes nothing).
              submitted[index].applied = r.write_failed && failed_writes_apply;
              submitted[index].got = std::move(r);
            });
        continue;
      }
      const size_t call = Uniform(rng, 0, backend.calls.size() - 1);
      if (!failures || Uniform(rng, 0, 5) != 0) {
        backend.Complete(call);
        continue;
      }
      const bool is_read = backend.calls[call].is_read;
      backend.Complete(call,
                       is_read ? absl::DeadlineExceededError("read")
                               : absl::UnavailableError("write"),
                       !is_read && failed_writes_apply);
    }
    Model model;
    size_t failed = 0;
    for (size_t i = 0; i < submitted.size(); ++i) {
      CAPTURE(i);
      const Submitted& s = submitted[i];
      REQUIRE(s.got.has_value());
      if (!s.got->status.ok()) {
        ++failed;
        if (s.applied) model.Run(s.set, s.command);
        continue;
      }
      const SetCommandResult want = model.Run(s.set, s.command);
      REQUIRE(s.got->count == want.count);
      REQUIRE(s.got->present == want.present);
    }
    if (!failures) REQUIRE(failed == 0);
    // What the replica holds is what the model holds: every member once.
    for (const std::string& set : sets) {
      std::set<std::string> held;
      for (const auto& [e, dots] : backend.sets[set]) {
        REQUIRE(dots.size() == 1);  // No dot piles up.
        held.insert(e);
      }
      REQUIRE(held == model.sets[set]);
    }
    const SetBatcherStats stats = batcher.stats();
    REQUIRE(stats.commands == submitted.size());
    REQUIRE(stats.waiting == 0);
    REQUIRE(stats.batches <= stats.commands);
  }
}

// A fixture: a batcher (made by Start) over a FakeBackend, and `keep`,
// which keeps the batcher's answers in `got`, in order.
class Batching {
 protected:
  SetBatcher& Start(SetBatcherOptions options) {
    return batcher_.emplace(&backend, std::move(options));
  }

  FakeBackend backend;
  std::vector<SetCommandResult> got;
  const std::function<void(SetCommandResult)> keep =
      [this](SetCommandResult r) { got.push_back(std::move(r)); };

 private:
  std::optional<SetBatcher> batcher_;  // Last: goes first.
};

TEST_CASE_METHOD(
    Batching, "set batcher: commands that wait share one read and one write") {
  SetBatcher& batcher = Start(OneAtATime());
  backend.sets["s"]["x"] = {Dot{7, 1}};
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kIsMember, {"x"}}, keep);
  REQUIRE(backend.calls.size() == 1);  // The first runs at once.
  // These wait for it, then run as one batch.
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kAdd, {"x", "y"}}, keep);
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kIsMember, {"y", "z"}}, keep);
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kRemove, {"x"}}, keep);
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kAdd, {"z"}}, keep);
  REQUIRE(batcher.stats().waiting == 4);
  backend.Complete(0);  // The first's read.
  REQUIRE(got.size() == 1);
  REQUIRE(got[0].present == std::vector<bool>{true});
  // The batch of four reads first: its SREM's write needs the read.
  REQUIRE(backend.calls.size() == 1);
  REQUIRE(backend.calls[0].is_read);
  REQUIRE(backend.calls[0].elements == std::vector<std::string>{"x", "y", "z"});
  backend.Complete(0);
  // One write: x removed (it was there), y and z added.
  REQUIRE(backend.calls.size() == 1);
  const std::vector<UpdateOp>& ops = backend.calls[0].ops;
  REQUIRE(ops.size() == 3);
  REQUIRE(ops[0].element == "x");
  REQUIRE(ops[0].kind == UpdateOp::Kind::kRemove);
  REQUIRE(ops[0].context.size() == 1);
  REQUIRE(ops[1].element == "y");
  REQUIRE(ops[1].kind == UpdateOp::Kind::kAdd);
  REQUIRE(ops[1].context_from_replica);
  REQUIRE(ops[2].element == "z");
  REQUIRE(ops[2].kind == UpdateOp::Kind::kAdd);
  REQUIRE(got.size() == 1);  // Nothing answers before the write.
  backend.Complete(0);
  REQUIRE(got.size() == 5);
  REQUIRE(got[1].count == 1);  // y
  REQUIRE(got[2].present == std::vector<bool>{true, false});
  REQUIRE(got[3].count == 1);
  REQUIRE(got[4].count == 1);
  const SetBatcherStats stats = batcher.stats();
  REQUIRE(stats.batches == 2);
  REQUIRE(stats.reads == 2);
  REQUIRE(stats.writes == 1);
  REQUIRE(stats.reads_with_write == 0);
  REQUIRE(stats.largest_batch == 4);
}

TEST_CASE_METHOD(
    Batching,
    "set batcher: only a large batch that only asks hedges its read") {
  SetBatcherOptions o = OneAtATime();
  o.bulk_read_hedge_micros = 7'000;
  o.bulk_read_members = 3;
  SetBatcher& batcher = Start(o);
  backend.sets["s"]["b"] = {Dot{7, 1}};
  // Alone and small: every replica is asked at once.
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kIsMember, {"a"}}, keep);
  REQUIRE(backend.calls.size() == 1);
  REQUIRE(backend.calls[0].hedge_micros == 0);
  // Three members, asks only (one repeated member counts once): hedged.
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kIsMember, {"a", "b"}}, keep);
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kIsMember, {"c", "a"}}, keep);
  backend.Complete(0);
  REQUIRE(backend.calls.size() == 1);
  REQUIRE(backend.calls[0].elements == std::vector<std::string>{"a", "b", "c"});
  REQUIRE(backend.calls[0].hedge_micros == 7'000);
  // Three members again, but with an SADD: its write depends on the read,
  // which asks every replica.
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kIsMember, {"x", "y"}}, keep);
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kAdd, {"z"}}, keep);
  backend.Complete(0);
  REQUIRE(got.size() == 3);
  REQUIRE(got[1].present == std::vector<bool>{false, true});
  REQUIRE(got[2].present == std::vector<bool>{false, false});
  REQUIRE(backend.calls.size() >= 1);
  REQUIRE(backend.calls[0].is_read);
  REQUIRE(backend.calls[0].hedge_micros == 0);
  while (!backend.calls.empty()) backend.Complete(0);
  REQUIRE(got.size() == 5);
  REQUIRE(got[4].count == 1);
  // Two members asking only: under the bound, not hedged.
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kIsMember, {"z", "q"}}, keep);
  REQUIRE(backend.calls.size() == 1);
  REQUIRE(backend.calls[0].hedge_micros == 0);
  backend.Complete(0);
  REQUIRE(got.back().present == std::vector<bool>{true, false});
  REQUIRE(batcher.stats().bulk_reads == 1);
  REQUIRE(batcher.stats().reads == 4);
}

TEST_CASE("set batcher: with no bulk hedge every read asks all") {
  SetBatcherOptions o = OneAtATime();
  o.bulk_read_members = 1;  // bulk_read_hedge_micros stays 0.
  FakeBackend backend;
  SetBatcher batcher(&backend, o);
  int answered = 0;
  auto count = [&answered](SetCommandResult) { ++answered; };
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kIsMember, {"a", "b"}}, count);
  REQUIRE(backend.calls.size() == 1);
  REQUIRE(backend.calls[0].hedge_micros == 0);
  backend.Complete(0);
  REQUIRE(answered == 1);
  REQUIRE(batcher.stats().bulk_reads == 0);
}

TEST_CASE("set batcher: other quorums or sets are other batches") {
  FakeBackend backend;
  SetBatcher batcher(&backend, {});
  int answered = 0;
  auto count = [&answered](SetCommandResult) { ++answered; };
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kIsMember, {"x"}}, count);
  batcher.Submit("s", 3, 2, {SetCommand::Kind::kIsMember, {"x"}}, count);
  batcher.Submit("s", 2, 1, {SetCommand::Kind::kIsMember, {"x"}}, count);
  batcher.Submit("t", 2, 2, {SetCommand::Kind::kIsMember, {"x"}}, count);
  REQUIRE(backend.calls.size() == 4);
  REQUIRE(backend.calls[1].quorum == 3);
  REQUIRE(backend.calls[3].set == "t");
  while (!backend.calls.empty()) backend.Complete(0);
  REQUIRE(answered == 4);
}

TEST_CASE_METHOD(
    Batching, "set batcher: a failed read fails its batch and writes nothing") {
  SetBatcher& batcher = Start(OneAtATime());
  backend.sets["s"]["x"] = {Dot{7, 1}};
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kRemove, {"x"}}, keep);
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kRemove, {"x"}}, keep);
  REQUIRE(backend.calls.size() == 1);  // An SREM's write waits for its read.
  backend.Complete(0, absl::DeadlineExceededError("read"));
  REQUIRE(got.size() == 1);
  REQUIRE(absl::IsDeadlineExceeded(got[0].status));
  REQUIRE_FALSE(got[0].write_failed);
  // The next batch runs.
  REQUIRE(backend.calls.size() == 1);
  REQUIRE(backend.calls[0].is_read);
  backend.Complete(0);
  backend.Complete(0);
  REQUIRE(got.size() == 2);
  REQUIRE(got[1].status.ok());
  REQUIRE(got[1].count == 1);
  REQUIRE(backend.sets["s"].count("x") == 0);
}

TEST_CASE_METHOD(Batching,
                 "set batcher: an SADD's read and write go together") {
  SetBatcher& batcher = Start(OneAtATime());
  backend.sets["s"]["x"] = {Dot{7, 1}};
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kAdd, {"x", "y"}}, keep);
  // Both at once: the read first (a replica takes them in that order).
  REQUIRE(backend.calls.size() == 2);
  REQUIRE(backend.calls[0].is_read);
  REQUIRE_FALSE(backend.calls[1].is_read);
  REQUIRE(backend.calls[1].ops.size() == 2);
  REQUIRE(backend.calls[1].ops[0].context_from_replica);
  REQUIRE(batcher.stats().reads_with_write == 1);
  backend.Complete(1);  // The write first: the answer waits for the read.
  REQUIRE(got.empty());
  backend.Complete(0);
  REQUIRE(got.size() == 1);
  REQUIRE(got[0].status.ok());
  REQUIRE(got[0].count == 1);  // y: x was there before.
  // The read fails, the write succeeds: the coordinating replica's dots
  // (the delta's contexts) count, and an SISMEMBER of a member the batch
  // does not write fails with the read.
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kAdd, {"y", "z"}}, keep);
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kIsMember, {"q"}}, keep);
  backend.Complete(0, absl::DeadlineExceededError("read"));
  REQUIRE(got.size() == 1);
  backend.Complete(0);
  REQUIRE(got.size() == 2);
  REQUIRE(got[1].status.ok());
  REQUIRE(got[1].count == 1);  // z
  // The SISMEMBER ran in the next batch (one at a time here).
  backend.Complete(0);
  REQUIRE(got.size() == 3);
  REQUIRE(got[2].present == std::vector<bool>{false});
  // Read and write both fail: the SADD fails with the write (it may have
  // been applied).
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kAdd, {"w"}}, keep);
  backend.Complete(0, absl::DeadlineExceededError("read"));
  backend.Complete(0, absl::UnavailableError("write"));
  REQUIRE(got.size() == 4);
  REQUIRE(absl::IsUnavailable(got[3].status));
  REQUIRE(got[3].write_failed);
}

TEST_CASE_METHOD(Batching,
                 "set batcher: a failed write fails only what depends on it") {
  SetBatcher& batcher = Start(OneAtATime());
  backend.sets["s"]["p"] = {Dot{7, 1}};
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kIsMember, {"q"}}, keep);
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kAdd, {"x"}}, keep);
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kIsMember, {"x", "p"}}, keep);
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kIsMember, {"p"}}, keep);
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kRemove, {"q"}}, keep);
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kAdd, {"y"}}, keep);
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kRemove, {"y"}}, keep);
  backend.Complete(0);  // The first batch: SISMEMBER q alone.
  REQUIRE(got.size() == 1);
  backend.Complete(0);  // The second's read.
  REQUIRE(backend.calls.size() == 1);
  REQUIRE(backend.calls[0].ops.size() == 1);  // Only x: y came and went.
  backend.Complete(0, absl::UnavailableError("write"));
  REQUIRE(got.size() == 7);
  // SADD x: its write failed.
  REQUIRE(absl::IsUnavailable(got[1].status));
  REQUIRE(got[1].write_failed);
  // SMISMEMBER x p saw the failed add of x.
  REQUIRE(absl::IsUnavailable(got[2].status));
  REQUIRE_FALSE(got[2].write_failed);
  // SISMEMBER p, SREM q, SADD y / SREM y depend on no write.
  REQUIRE(got[3].status.ok());
  REQUIRE(got[3].present == std::vector<bool>{true});
  REQUIRE(got[4].status.ok());
  REQUIRE(got[4].count == 0);
  REQUIRE(got[5].status.ok());
  REQUIRE(got[5].count == 1);
  REQUIRE(got[6].status.ok());
  REQUIRE(got[6].count == 1);
}

TEST_CASE_METHOD(Batching,
                 "set batcher: without the read, the replica's dots count") {
  SetBatcherOptions options = OneAtATime();
  options.read_before_add = false;
  SetBatcher& batcher = Start(options);
  backend.sets["s"]["x"] = {Dot{7, 1}};
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kAdd, {"x", "y"}}, keep);
  REQUIRE(backend.calls.size() == 1);
  REQUIRE_FALSE(backend.calls[0].is_read);
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kAdd, {"y", "z"}}, keep);
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kRemove, {"z"}}, keep);
  backend.Complete(0);
  REQUIRE(got.size() == 1);
  REQUIRE(got[0].count == 1);  // y
  // A batch with a remove reads first.
  REQUIRE(backend.calls[0].is_read);
  backend.Complete(0);
  backend.Complete(0);
  REQUIRE(got.size() == 3);
  REQUIRE(got[1].count == 1);  // z
  REQUIRE(got[2].count == 1);
  REQUIRE(backend.sets["s"].count("z") == 0);
  REQUIRE(backend.sets["s"]["x"].size() == 1);
}

// Submits an SMISMEMBER of each of `asks` under `options` (one batch at a
// time): the first runs alone; completing each batch, the next asks for
// `sizes` members, in order; then every command has answered.
void CheckBatchSizes(const SetBatcherOptions& options,
                     const std::vector<std::vector<std::string>>& asks,
                     const std::vector<size_t>& sizes) {
  FakeBackend backend;
  SetBatcher batcher(&backend, options);
  size_t answered = 0;
  auto count = [&answered](SetCommandResult) { ++answered; };
  for (const std::vector<std::string>& members : asks) {
    batcher.Submit("s", 2, 2, {SetCommand::Kind::kIsMember, members}, count);
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    CAPTURE(i);
    backend.Complete(0);
    REQUIRE(backend.calls[0].elements.size() == sizes[i]);
  }
  backend.Complete(0);
  REQUIRE(answered == asks.size());
}

TEST_CASE("set batcher: a command larger than the bound runs alone") {
  SetBatcherOptions options = OneAtATime();
  options.max_batch_members = 3;
  // a, b; then a, b, c, d alone; then e.
  CheckBatchSizes(options, {{"a"}, {"a", "b"}, {"a", "b", "c", "d"}, {"e"}},
                  {2, 4, 1});
}

TEST_CASE("set batcher: an answer may submit more; a dead batcher is inert") {
  FakeBackend backend;
  std::vector<int64_t> counts;
  {
    SetBatcher batcher(&backend, OneAtATime());
    std::function<void(SetCommandResult)> again = [&](SetCommandResult r) {
      counts.push_back(r.count);
      if (counts.size() < 3) {
        batcher.Submit("s", 2, 2, {SetCommand::Kind::kAdd, {"x"}}, again);
      }
    };
    batcher.Submit("s", 2, 2, {SetCommand::Kind::kAdd, {"x"}}, again);
    backend.Complete(0);  // The read.
    backend.Complete(0);  // The write, whose answer submits the next.
    REQUIRE(counts == std::vector<int64_t>{1});
    REQUIRE(backend.calls.size() == 2);  // The second's read and write.
  }
  // The batcher is gone: completing its calls calls nothing.
  while (!backend.calls.empty()) backend.Complete(0);
  REQUIRE(counts.size() == 1);
}

TEST_CASE_METHOD(
    Batching,
    "set batcher: a read ahead of a write sees that write laid over") {
  SetBatcherOptions options;
  options.max_batches = 3;
  SetBatcher& batcher = Start(options);
  backend.sets["s"]["y"] = {Dot{7, 1}};
  // A first batch runs: what comes meanwhile gathers for the next.
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kIsMember, {"q"}}, keep);
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kAdd, {"x"}}, keep);
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kRemove, {"y"}}, keep);
  REQUIRE(backend.calls.size() == 1);
  REQUIRE(batcher.stats().waiting == 2);
  backend.Complete(0);
  REQUIRE(got.size() == 1);
  // The second (it has an SREM) reads before it writes; what comes while
  // it reads gathers for the third.
  REQUIRE(backend.calls.size() == 1);
  REQUIRE(backend.calls[0].is_read);
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kIsMember, {"x", "y"}}, keep);
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kRemove, {"x"}}, keep);
  REQUIRE(backend.calls.size() == 1);
  backend.Complete(0);  // Its read: it writes...
  REQUIRE(backend.calls.size() == 2);
  REQUIRE_FALSE(backend.calls[0].is_read);
  REQUIRE(backend.calls[0].ops.size() == 2);
  // ... and the third reads ahead of that write, and sees none of it.
  REQUIRE(backend.calls[1].is_read);
  backend.Complete(1);
  REQUIRE(got.size() == 1);
  backend.Complete(0);  // The second's write.
  REQUIRE(got.size() == 3);
  REQUIRE(got[1].count == 1);
  REQUIRE(got[2].count == 1);
  // The third, with that write laid over its read, sees x (added) and not
  // y (removed), and its SREM x removes the dot the second batch made.
  REQUIRE(backend.calls.size() == 1);
  REQUIRE(backend.calls[0].ops.size() == 1);
  REQUIRE(backend.calls[0].ops[0].element == "x");
  REQUIRE(backend.calls[0].ops[0].kind == UpdateOp::Kind::kRemove);
  REQUIRE(backend.calls[0].ops[0].context == backend.sets["s"]["x"]);
  backend.Complete(0);
  REQUIRE(got.size() == 5);
  REQUIRE(got[3].present == std::vector<bool>{true, false});
  REQUIRE(got[4].count == 1);
  REQUIRE(backend.sets["s"].empty());
  REQUIRE(batcher.stats().reads_repeated == 0);
}

TEST_CASE_METHOD(Batching,
                 "set batcher: a read ahead of a failed write is made again") {
  SetBatcher& batcher = Start({});
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kAdd, {"x"}}, keep);
  backend.Complete(0);  // Its read; its write is made.
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kAdd, {"x"}}, keep);
  backend.Complete(1);  // The second batch's read: x absent.
  // The write fails, applied after all: the second batch must not count
  // x as added on the strength of a read that could not see it.
  REQUIRE(backend.Complete(0, absl::UnavailableError("write"), true));
  REQUIRE(got.size() == 1);
  REQUIRE(got[0].write_failed);
  REQUIRE(batcher.stats().reads_repeated == 1);
  REQUIRE(backend.calls.size() == 1);
  REQUIRE(backend.calls[0].is_read);
  backend.Complete(0);
  backend.Complete(0);
  REQUIRE(got.size() == 2);
  REQUIRE(got[1].status.ok());
  REQUIRE(got[1].count == 0);
  REQUIRE(backend.sets["s"]["x"].size() == 1);
}

TEST_CASE_METHOD(
    Batching,
    "set batcher: a batch that waited past its deadline fails unwritten") {
  uint64_t now = 1000;
  SetBatcherOptions options;
  options.timeout_micros = 100;
  options.now = [&now]() { return now; };
  SetBatcher& batcher = Start(options);
  backend.sets["s"]["x"] = {Dot{7, 1}};
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kRemove, {"x"}}, keep);
  backend.Complete(0);  // Its read: its write goes, with what time is left.
  REQUIRE(backend.calls.size() == 1);
  REQUIRE(backend.timeouts.back() == 100);
  // The next arrives; its read is back at once, its write waits.
  now = 1050;
  batcher.Submit("s", 2, 2, {SetCommand::Kind::kRemove, {"x"}}, keep);
  REQUIRE(backend.calls.size() == 2);
  REQUIRE(backend.timeouts.back() == 100);  // Its read.
  backend.Complete(1);
  // The first write fails at its timeout; the second is then 100 us past
  // arriving with 100 us left of its two timeouts.
  now = 1150;
  backend.Complete(0, absl::DeadlineExceededError("write"));
  REQUIRE(got.size() == 1);
  // It read again (the write before it failed), with what time is left.
  REQUIRE(backend.calls.size() == 1);
  REQUIRE(backend.calls[0].is_read);
  REQUIRE(backend.timeouts.back() == 100);
  now = 1251;  // Past its deadline (1050 + 2 x 100) when the read is back.
  backend.Complete(0);
  REQUIRE(got.size() == 2);
  REQUIRE(absl::IsDeadlineExceeded(got[1].status));
  REQUIRE_FALSE(got[1].write_failed);
  REQUIRE(backend.calls.empty());  // Nothing written.
  REQUIRE(batcher.stats().expired == 1);
  REQUIRE(backend.sets["s"].count("x") == 1);
}

TEST_CASE("set batcher: batches are bounded in bytes") {
  SetBatcherOptions options = OneAtATime();
  options.max_batch_bytes = 10;
  // 10 bytes; then 30 bytes alone; then b.
  CheckBatchSizes(options,
                  {{"a"}, {"12345"}, {"67890"}, {std::string(30, 'x')}, {"b"}},
                  {2, 1, 1});
}

TEST_CASE("set batcher: adds go with the read only when allowed and small") {
  for (bool allowed : {true, false}) {
    CAPTURE(allowed);
    FakeBackend backend;
    SetBatcherOptions options = OneAtATime();
    options.read_with_write = allowed;
    options.read_with_write_max_bytes = 8;
    SetBatcher batcher(&backend, options);
    std::vector<SetCommandResult> got;
    auto keep = [&got](SetCommandResult r) { got.push_back(std::move(r)); };
    batcher.Submit("s", 2, 2, {SetCommand::Kind::kAdd, {"small"}}, keep);
    REQUIRE(backend.calls.size() == (allowed ? 2u : 1u));
    while (!backend.calls.empty()) backend.Complete(0);
    // Over the bytes allowed: read first.
    batcher.Submit("s", 2, 2, {SetCommand::Kind::kAdd, {"larger than 8"}},
                   keep);
    REQUIRE(backend.calls.size() == 1);
    REQUIRE(backend.calls[0].is_read);
    while (!backend.calls.empty()) backend.Complete(0);
    REQUIRE(got.size() == 2);
    REQUIRE(got[0].count == 1);
    REQUIRE(got[1].count == 1);
  }
}

}  // namespace
}  // namespace bigset::server
