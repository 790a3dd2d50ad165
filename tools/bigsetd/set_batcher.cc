#include "set_batcher.h"

#include <algorithm>
#include <chrono>
#include <string_view>
#include <utility>

namespace bigset::server {

// One batch: its commands, their distinct members, what its read found and
// what it wrote.
struct SetBatcher::Batch {
  Key key;
  std::vector<Pending> commands;
  // Distinct members, in first-named order; `index` maps each (a view into
  // `commands`, which does not change once the batch is made) to its place.
  std::vector<std::string_view> members;
  absl::flat_hash_map<std::string_view, uint32_t> index;
  // The places of `members` in element order: the order of the write's
  // ops, so that each replica inserts its keys in order (the memtable's
  // search paths then stay in cache).
  std::vector<uint32_t> sorted;
  // Bytes of `members`; the time by which it must have written (its oldest
  // command's arrival plus two timeouts).
  size_t member_bytes = 0;
  uint64_t deadline = UINT64_MAX;

  // How the batch learns what was there:
  //   kRead       a quorum read, then the write it plans from it;
  //   kAddsFirst  no read (SADDs only, --sadd-reply coordinator): the
  //               write's delta (the coordinating replica's dots);
  //   kTogether   the read and the write at once (see Advance).
  enum class Mode { kRead, kAddsFirst, kTogether };
  Mode mode = Mode::kRead;
  // SADDs and no SREM: the write does not depend on the read (its ops are
  // adds of the members SADD names), so both may go at once.
  bool adds_only_write = true;
  // Only SISMEMBERs and SMISMEMBERs: the batch writes nothing.
  bool asks_only = true;
  bool read_done = false;
  absl::Status read_status;
  // Per member: the dots the read found, then (Plan) those the batches
  // laid over it left.
  std::vector<std::vector<Dot>> dots;
  // The batches that had not finished when the read began: their writes
  // are laid over it.
  std::vector<std::shared_ptr<Batch>> ahead;

  bool planned = false;
  bool write_issued = false;
  bool write_done = false;
  // Per member: the index of its op in the update (and in the delta), or
  // -1 if the batch writes none.
  std::vector<int32_t> op_of;
  std::vector<UpdateOp> ops;
  size_t op_count = 0;
  // The write's outcome (OK if it wrote nothing) and delta.
  absl::Status write_status;
  Delta delta;
  // Per command: its result, and whether its answer depends on the write.
  std::vector<SetCommandResult> results;
  std::vector<bool> depends;
};

SetBatcher::SetBatcher(BatchBackend* backend, const SetBatcherOptions& options)
    : backend_(backend),
      options_(options),
      alive_(std::make_shared<bool>(true)) {}

SetBatcher::~SetBatcher() = default;

SetBatcherStats SetBatcher::stats() const { return stats_; }

void SetBatcher::Submit(std::string set, int r, int w, SetCommand command,
                        Done done) {
  Key key{std::move(set), r, w};
  Queue& queue = queues_[key];
  queue.waiting.push_back(Pending{std::move(command), std::move(done), Now()});
  ++stats_.waiting;
  MaybeStart(key);
}

void SetBatcher::MaybeStart(const Key& key) {
  while (true) {
    auto it = queues_.find(key);
    if (it == queues_.end()) return;
    Queue& queue = it->second;
    if (queue.waiting.empty() && queue.batches.empty()) {
      queues_.erase(it);
      return;
    }
    if (queue.waiting.empty() ||
        queue.batches.size() >= std::max<size_t>(1, options_.max_batches)) {
      return;
    }
    // One batch gathers at a time: the next is made once the last one
    // read (or, without a read, wrote), taking all that came meanwhile. A
    // batch made at once would hold the one command that came first.
    if (!queue.batches.empty()) {
      const Batch& last = *queue.batches.back();
      const bool gathered = last.mode == Batch::Mode::kAddsFirst
                                ? last.write_issued
                                : last.read_done;
      if (!gathered) return;
    }
    auto batch = std::make_shared<Batch>();
    batch->key = key;
    size_t named = 0;
    size_t bytes = 0;
    bool only_adds = true;
    bool no_removes = true;
    bool no_writes = true;
    bool some_add = false;
    while (!queue.waiting.empty()) {
      const SetCommand& next = queue.waiting.front().command;
      size_t next_bytes = 0;
      for (const std::string& m : next.members) next_bytes += m.size();
      if (!batch->commands.empty() &&
          (named + next.members.size() > options_.max_batch_members ||
           bytes + next_bytes > options_.max_batch_bytes)) {
        break;
      }
      named += next.members.size();
      bytes += next_bytes;
      if (options_.timeout_micros > 0) {
        batch->deadline =
            std::min(batch->deadline, queue.waiting.front().arrived +
                                          2 * options_.timeout_micros);
      }
      const SetCommand::Kind kind = next.kind;
      only_adds &= kind == SetCommand::Kind::kAdd;
      no_removes &= kind != SetCommand::Kind::kRemove;
      some_add |= kind == SetCommand::Kind::kAdd;
      no_writes &= kind == SetCommand::Kind::kIsMember;
      batch->commands.push_back(std::move(queue.waiting.front()));
      queue.waiting.pop_front();
      --stats_.waiting;
    }
    ++stats_.batches;
    stats_.commands += batch->commands.size();
    stats_.largest_batch =
        std::max<uint64_t>(stats_.largest_batch, batch->commands.size());
    for (const Pending& p : batch->commands) {
      for (const std::string& m : p.command.members) {
        auto [slot, inserted] = batch->index.try_emplace(
            m, static_cast<uint32_t>(batch->members.size()));
        if (inserted) {
          batch->members.push_back(m);
          batch->member_bytes += m.size();
        }
      }
    }
    batch->sorted.resize(batch->members.size());
    for (uint32_t i = 0; i < batch->sorted.size(); ++i) batch->sorted[i] = i;
    std::sort(
        batch->sorted.begin(), batch->sorted.end(),
        [&m = batch->members](uint32_t a, uint32_t b) { return m[a] < m[b]; });
    batch->dots.resize(batch->members.size());
    batch->op_of.assign(batch->members.size(), -1);
    batch->results.resize(batch->commands.size());
    batch->depends.resize(batch->commands.size());
    batch->adds_only_write = no_removes && some_add;
    batch->asks_only = no_writes;
    if (only_adds && !options_.read_before_add) {
      // No read: the write tells what the coordinating replica held. It is
      // planned and written once every batch before it is done.
      batch->mode = Batch::Mode::kAddsFirst;
      queue.batches.push_back(batch);
      Advance(key);
      continue;
    }
    // The read goes now, ahead of the writes of the batches before it,
    // which are laid over it when this batch plans.
    batch->ahead.assign(queue.batches.begin(), queue.batches.end());
    queue.batches.push_back(batch);
    Read(batch);
    Advance(key);  // A batch first in line may write at once.
  }
}

void SetBatcher::Read(const std::shared_ptr<Batch>& batch) {
  // In element order: each replica then seeks forward only.
  std::vector<std::string> elements;
  elements.reserve(batch->members.size());
  for (uint32_t i : batch->sorted) elements.emplace_back(batch->members[i]);
  ++stats_.reads;
  uint64_t hedge = 0;
  if (batch->asks_only && batch->members.size() >= options_.bulk_read_members) {
    hedge = options_.bulk_read_hedge_micros;
    if (hedge > 0) ++stats_.bulk_reads;
  }
  std::weak_ptr<bool> alive = alive_;
  backend_->ContainsAll(
      batch->key.set, std::move(elements), batch->key.r,
      std::max<uint64_t>(1, TimeLeft(*batch)), hedge,
      [this, alive, batch](absl::StatusOr<Membership> read) {
        if (alive.expired()) return;
        if (read.ok() && read->elements.size() != batch->members.size()) {
          read = absl::InternalError("the read does not match the query");
        }
        batch->read_done = true;
        if (!read.ok()) {
          batch->read_status = read.status();
        } else {
          for (size_t k = 0; k < batch->sorted.size(); ++k) {
            batch->dots[batch->sorted[k]] = std::move(read->elements[k].dots);
          }
        }
        const Key key = batch->key;
        Advance(key);
        MaybeStart(key);  // The next batch may gather now.
      });
}

void SetBatcher::Advance(const Key& key) {
  while (true) {
    auto it = queues_.find(key);
    if (it == queues_.end() || it->second.batches.empty()) return;
    // Every batch before the first is done: it may write.
    std::shared_ptr<Batch> batch = it->second.batches.front();
    if (batch->write_issued && !batch->write_done) return;
    if (!batch->write_issued && TimeLeft(*batch) == 0) {
      // It waited for the writes before it past its deadline: it fails
      // rather than write now (nothing of it was written).
      Expire(batch);
      continue;
    }
    if (batch->mode == Batch::Mode::kAddsFirst) {
      if (!batch->write_issued) {
        AddEveryNamedMember(*batch);
        Write(batch);
        return;
      }
      if (batch->write_status.ok()) {
        // The replica's dots before the add tell what was there.
        for (size_t i = 0; i < batch->members.size(); ++i) {
          batch->dots[i] =
              batch->delta.ops[static_cast<size_t>(batch->op_of[i])].context;
        }
        Plan(*batch);
      } else {
        DependOnWrite(*batch);  // Every SADD fails with the write.
      }
      Finish(batch);
      continue;
    }
    if (!batch->read_done) {
      // A read still on its way: a batch whose write does not depend on it
      // writes now (the single client's SADD then waits for one round
      // trip, not two). The read went first to every replica, and each
      // takes a node's messages in order, so it sees them as they were
      // before the write. Only when the batches laid over the read all
      // wrote: one that failed calls for a read made after it.
      if (batch->mode == Batch::Mode::kRead && batch->adds_only_write &&
          options_.read_with_write &&
          batch->member_bytes <= options_.read_with_write_max_bytes &&
          !batch->write_issued &&
          std::all_of(batch->ahead.begin(), batch->ahead.end(),
                      [](const std::shared_ptr<Batch>& b) {
                        return b->write_status.ok();
                      })) {
        batch->mode = Batch::Mode::kTogether;
        ++stats_.reads_with_write;
        AddEveryNamedMember(*batch);
        Write(batch);
      }
      return;
    }
    // Reads and writes that went together are planned once both are back
    // (if the read failed, the write's delta answers for it).
    if (batch->mode == Batch::Mode::kTogether && !batch->write_done) return;
    if (!batch->planned && !Plan(*batch)) {
      // A batch laid over the read failed its write: read again, now that
      // nothing runs before this batch.
      ++stats_.reads_repeated;
      batch->read_done = false;
      batch->ahead.clear();
      Read(batch);
      return;
    }
    if (batch->mode == Batch::Mode::kRead && batch->read_status.ok() &&
        !batch->ops.empty() && !batch->write_issued) {
      Write(batch);
      return;
    }
    Finish(batch);
  }
}

void SetBatcher::AddEveryNamedMember(Batch& batch) {
  // The members SADD names, each with the coordinating replica's dots as
  // its context: no read is needed to make the ops.
  std::vector<bool> added(batch.members.size());
  for (const Pending& p : batch.commands) {
    if (p.command.kind != SetCommand::Kind::kAdd) continue;
    for (const std::string& m : p.command.members)
      added[batch.index.at(m)] = true;
  }
  batch.ops.clear();
  for (uint32_t i : batch.sorted) {
    if (!added[i]) continue;
    UpdateOp op = UpdateOp::Add(std::string(batch.members[i]));
    op.context_from_replica = true;
    batch.op_of[i] = static_cast<int32_t>(batch.ops.size());
    batch.ops.push_back(std::move(op));
  }
  batch.op_count = batch.ops.size();
}

void SetBatcher::Write(const std::shared_ptr<Batch>& batch) {
  batch->write_issued = true;
  ++stats_.writes;
  std::weak_ptr<bool> alive = alive_;
  backend_->Update(
      batch->key.set, std::move(batch->ops), batch->key.w,
      std::max<uint64_t>(1, TimeLeft(*batch)),
      [this, alive, batch](absl::StatusOr<Delta> delta) {
        if (alive.expired()) return;
        if (delta.ok() && delta->ops.size() != batch->op_count) {
          delta = absl::InternalError("the delta does not match the update");
        }
        batch->write_done = true;
        if (!delta.ok()) {
          batch->write_status = delta.status();
        } else {
          batch->delta = std::move(*delta);
        }
        Advance(batch->key);
      });
}

uint64_t SetBatcher::Now() const {
  if (options_.now) return options_.now();
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

uint64_t SetBatcher::TimeLeft(const Batch& batch) const {
  if (options_.timeout_micros == 0) return UINT64_MAX;
  const uint64_t now = Now();
  if (now >= batch.deadline) return 0;
  return std::min(options_.timeout_micros, batch.deadline - now);
}

void SetBatcher::Expire(const std::shared_ptr<Batch>& batch) {
  ++stats_.expired;
  const absl::Status late = absl::DeadlineExceededError(
      "waited past its deadline behind the writes before it; nothing of it "
      "was written");
  for (SetCommandResult& r : batch->results) {
    r = SetCommandResult{};
    r.status = late;
  }
  batch->planned = true;
  Finish(batch);
}

bool SetBatcher::Plan(Batch& batch) {
  const size_t n = batch.members.size();
  // Members whose dots are known: all, unless the read failed.
  std::vector<bool> known(n, batch.read_status.ok());
  if (!batch.read_status.ok()) {
    if (batch.mode != Batch::Mode::kTogether || !batch.write_status.ok()) {
      for (SetCommandResult& r : batch.results) r.status = batch.read_status;
      DependOnWrite(batch);
      batch.planned = true;
      return true;
    }
    // The read failed but the adds went with it and were acknowledged: the
    // coordinating replica's dots (the contexts of its delta) tell what
    // was there, as with --sadd-reply coordinator. Commands that name
    // other members fail with the read's error.
    for (size_t i = 0; i < n; ++i) {
      if (batch.op_of[i] < 0) continue;
      batch.dots[i] =
          batch.delta.ops[static_cast<size_t>(batch.op_of[i])].context;
      known[i] = true;
    }
    batch.ahead.clear();
  }
  // The writes of the batches that ran while the read did, in order.
  for (const std::shared_ptr<Batch>& before : batch.ahead) {
    if (!before->write_status.ok()) return false;
    if (before->delta.ops.empty()) continue;
    for (size_t i = 0; i < n; ++i) {
      auto at = before->index.find(batch.members[i]);
      if (at == before->index.end()) continue;
      const int32_t op = before->op_of[at->second];
      if (op < 0) continue;
      const DeltaOp& d = before->delta.ops[static_cast<size_t>(op)];
      std::vector<Dot>& dots = batch.dots[i];
      std::erase_if(dots, [&](const Dot& x) {
        return std::find(d.context.begin(), d.context.end(), x) !=
               d.context.end();
      });
      if (d.add.has_value() &&
          std::find(dots.begin(), dots.end(), *d.add) == dots.end()) {
        dots.push_back(*d.add);
      }
    }
  }
  batch.ahead.clear();
  batch.planned = true;

  std::vector<bool> present(n), wrote(n);
  std::vector<SetCommand::Kind> last(n, SetCommand::Kind::kAdd);
  for (size_t i = 0; i < n; ++i) present[i] = !batch.dots[i].empty();
  // Each command against the state the commands before it left.
  for (size_t c = 0; c < batch.commands.size(); ++c) {
    const SetCommand& cmd = batch.commands[c].command;
    SetCommandResult& result = batch.results[c];
    result = SetCommandResult{};
    if (!std::all_of(
            cmd.members.begin(), cmd.members.end(),
            [&](const std::string& m) { return known[batch.index.at(m)]; })) {
      result.status = batch.read_status;
      continue;
    }
    for (const std::string& m : cmd.members) {
      const uint32_t i = batch.index.at(m);
      switch (cmd.kind) {
        case SetCommand::Kind::kAdd:
          if (!present[i]) ++result.count;
          present[i] = true;
          break;
        case SetCommand::Kind::kRemove:
          if (present[i]) ++result.count;
          present[i] = false;
          break;
        case SetCommand::Kind::kIsMember:
          result.present.push_back(present[i]);
          continue;
      }
      wrote[i] = true;
      last[i] = cmd.kind;
    }
  }
  if (batch.mode == Batch::Mode::kRead) {
    // One op per member the batch changed; the last command to touch it
    // decides which. An add replaces the dots the read found (and the
    // coordinating replica's own); a remove takes out exactly those, and a
    // member the read did not find needs none (the batch's own adds of it
    // were taken out again before they were written). The other modes
    // wrote every member SADD names already.
    batch.ops.clear();
    for (uint32_t i : batch.sorted) {
      if (!wrote[i]) continue;
      if (last[i] == SetCommand::Kind::kAdd) {
        UpdateOp op =
            UpdateOp::Add(std::string(batch.members[i]), batch.dots[i]);
        op.context_from_replica = true;
        batch.op_of[i] = static_cast<int32_t>(batch.ops.size());
        batch.ops.push_back(std::move(op));
      } else if (!batch.dots[i].empty()) {
        batch.op_of[i] = static_cast<int32_t>(batch.ops.size());
        batch.ops.push_back(
            UpdateOp::Remove(std::string(batch.members[i]), batch.dots[i]));
      }
    }
    batch.op_count = batch.ops.size();
  }
  DependOnWrite(batch);
  return true;
}

void SetBatcher::DependOnWrite(Batch& batch) {
  // If the write fails, it may not have been applied: the commands that
  // fail with it must be the ones that, skipped, leave the others'
  // answers and the set as they are. So commands that touch a member some
  // command of the batch writes stand or fall together (those of one
  // member, and through it those of others), and a group fails with the
  // write if it writes a member the write carries. An SADD of a member an
  // SREM of the batch then removed, say, is carried by no op of that
  // member, yet fails with the SREM's other members: it took effect only
  // if the SREM did.
  const size_t k = batch.commands.size();
  std::vector<uint32_t> group(k);
  for (uint32_t c = 0; c < k; ++c) group[c] = c;
  auto find = [&group](uint32_t c) {
    while (group[c] != c) c = group[c] = group[group[c]];
    return c;
  };
  std::vector<bool> written(batch.members.size());
  for (const Pending& p : batch.commands) {
    if (p.command.kind == SetCommand::Kind::kIsMember) continue;
    for (const std::string& m : p.command.members) {
      written[batch.index.at(m)] = true;
    }
  }
  // The first command to touch each written member; the others join it.
  std::vector<int32_t> first(batch.members.size(), -1);
  for (uint32_t c = 0; c < k; ++c) {
    for (const std::string& m : batch.commands[c].command.members) {
      const uint32_t i = batch.index.at(m);
      if (!written[i]) continue;
      if (first[i] < 0) {
        first[i] = static_cast<int32_t>(c);
      } else {
        group[find(c)] = find(static_cast<uint32_t>(first[i]));
      }
    }
  }
  std::vector<bool> carried(k);
  for (uint32_t c = 0; c < k; ++c) {
    const SetCommand& cmd = batch.commands[c].command;
    if (cmd.kind == SetCommand::Kind::kIsMember) continue;
    for (const std::string& m : cmd.members) {
      if (batch.op_of[batch.index.at(m)] >= 0) carried[find(c)] = true;
    }
  }
  for (uint32_t c = 0; c < k; ++c) batch.depends[c] = carried[find(c)];
}

void SetBatcher::Finish(const std::shared_ptr<Batch>& batch) {
  auto it = queues_.find(batch->key);
  if (it != queues_.end() && !it->second.batches.empty() &&
      it->second.batches.front() == batch) {
    it->second.batches.pop_front();
  }
  // The answers; commands their callbacks submit wait for the next batch
  // (which then takes them all).
  for (size_t c = 0; c < batch->commands.size(); ++c) {
    SetCommandResult& result = batch->results[c];
    if (!batch->write_status.ok() && batch->depends[c]) {
      result = SetCommandResult{};
      result.status = batch->write_status;
      result.write_failed =
          batch->commands[c].command.kind != SetCommand::Kind::kIsMember;
    }
    Done done = std::move(batch->commands[c].done);
    done(std::move(result));
  }
  // The commands stay: later batches find the members of this one's delta
  // through `index`, which points into them.
  batch->results.clear();
  MaybeStart(batch->key);
}

}  // namespace bigset::server
