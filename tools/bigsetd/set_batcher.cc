#include "set_batcher.h"

#include <algorithm>
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

  // Whether the batch reads (else its write tells what was there).
  bool reads = true;
  bool read_done = false;
  absl::Status read_status;
  // Per member: the dots the read found, then (Plan) those the batches
  // laid over it left.
  std::vector<std::vector<Dot>> dots;
  // The batches that had not finished when the read began: their writes
  // are laid over it.
  std::vector<std::shared_ptr<Batch>> ahead;

  bool planned = false;
  bool writing = false;
  bool done = false;
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
  queue.waiting.push_back(Pending{std::move(command), std::move(done)});
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
    auto batch = std::make_shared<Batch>();
    batch->key = key;
    size_t named = 0;
    bool only_adds = true;
    while (!queue.waiting.empty() &&
           (batch->commands.empty() ||
            named + queue.waiting.front().command.members.size() <=
                options_.max_batch_members)) {
      named += queue.waiting.front().command.members.size();
      only_adds &=
          queue.waiting.front().command.kind == SetCommand::Kind::kAdd;
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
        if (inserted) batch->members.push_back(m);
      }
    }
    batch->sorted.resize(batch->members.size());
    for (uint32_t i = 0; i < batch->sorted.size(); ++i) batch->sorted[i] = i;
    std::sort(batch->sorted.begin(), batch->sorted.end(),
              [&m = batch->members](uint32_t a, uint32_t b) {
                return m[a] < m[b];
              });
    batch->dots.resize(batch->members.size());
    batch->op_of.assign(batch->members.size(), -1);
    batch->results.resize(batch->commands.size());
    batch->depends.resize(batch->commands.size());
    // Without a read, the write itself tells what the replica held: it
    // needs no batch laid over it, and none made later may read ahead of
    // it (its ops are known only once it ran).
    batch->reads = !(only_adds && !options_.read_before_add);
    if (batch->reads) {
      batch->ahead.assign(queue.batches.begin(), queue.batches.end());
    }
    queue.batches.push_back(batch);
    if (batch->reads) {
      Read(batch);
    } else {
      batch->read_done = true;
      Advance(key);
    }
  }
}

void SetBatcher::Read(const std::shared_ptr<Batch>& batch) {
  std::vector<std::string> elements(batch->members.begin(),
                                    batch->members.end());
  ++stats_.reads;
  std::weak_ptr<bool> alive = alive_;
  backend_->ContainsAll(
      batch->key.set, std::move(elements), batch->key.r,
      [this, alive, batch](absl::StatusOr<Membership> read) {
        if (alive.expired()) return;
        if (read.ok() && read->elements.size() != batch->members.size()) {
          read = absl::InternalError("the read does not match the query");
        }
        batch->read_done = true;
        if (!read.ok()) {
          batch->read_status = read.status();
        } else {
          for (size_t i = 0; i < batch->members.size(); ++i) {
            batch->dots[i] = std::move(read->elements[i].dots);
          }
        }
        Advance(batch->key);
      });
}

void SetBatcher::Advance(const Key& key) {
  while (true) {
    auto it = queues_.find(key);
    if (it == queues_.end() || it->second.batches.empty()) return;
    std::shared_ptr<Batch> batch = it->second.batches.front();
    if (batch->writing || !batch->read_done) return;
    if (!batch->planned) {
      if (!Plan(*batch)) {
        // A batch laid over the read failed its write: read again, now
        // that nothing runs before this batch.
        ++stats_.reads_repeated;
        batch->planned = false;
        batch->read_done = false;
        batch->ahead.clear();
        Read(batch);
        return;
      }
    }
    if (batch->ops.empty() || !batch->read_status.ok()) {
      Finish(batch);
      continue;
    }
    // The write: for a batch that read, its planned ops; without a read,
    // an add of every member with the replica's own dots as context.
    batch->writing = true;
    ++stats_.writes;
    std::weak_ptr<bool> alive = alive_;
    backend_->Update(
        key.set, std::move(batch->ops), key.w,
        [this, alive, batch](absl::StatusOr<Delta> delta) {
          if (alive.expired()) return;
          if (delta.ok() && delta->ops.size() != batch->op_count) {
            delta = absl::InternalError("the delta does not match the update");
          }
          if (!delta.ok()) {
            batch->write_status = delta.status();
          } else {
            batch->delta = std::move(*delta);
          }
          if (!batch->reads && batch->write_status.ok()) {
            // The replica's dots before the add tell what was there.
            for (size_t i = 0; i < batch->members.size(); ++i) {
              batch->dots[i] =
                  batch->delta.ops[static_cast<size_t>(batch->op_of[i])]
                      .context;
            }
            batch->reads = true;  // Plan from these dots now.
            batch->planned = false;
            const bool planned = Plan(*batch);
            (void)planned;  // Nothing was laid over a batch without a read.
          }
          Finish(batch);
          Advance(batch->key);
        });
    return;
  }
}

bool SetBatcher::Plan(Batch& batch) {
  batch.planned = true;
  if (!batch.read_status.ok()) {
    for (SetCommandResult& r : batch.results) r.status = batch.read_status;
    return true;
  }
  const size_t n = batch.members.size();
  if (!batch.reads) {
    // Written before it is planned (see Advance): one add per member.
    batch.ops.reserve(n);
    for (uint32_t i : batch.sorted) {
      UpdateOp op = UpdateOp::Add(std::string(batch.members[i]));
      op.context_from_replica = true;
      batch.op_of[i] = static_cast<int32_t>(batch.ops.size());
      batch.ops.push_back(std::move(op));
    }
    batch.op_count = n;
    for (size_t c = 0; c < batch.commands.size(); ++c) batch.depends[c] = true;
    return true;
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

  std::vector<bool> present(n), wrote(n);
  std::vector<SetCommand::Kind> last(n, SetCommand::Kind::kAdd);
  for (size_t i = 0; i < n; ++i) present[i] = !batch.dots[i].empty();
  // Each command against the state the commands before it left. A read
  // that sees a member an earlier command of the batch wrote depends on
  // that write (if the batch writes it at all: see below).
  std::vector<std::vector<uint32_t>> read_after_write(batch.commands.size());
  for (size_t c = 0; c < batch.commands.size(); ++c) {
    const SetCommand& cmd = batch.commands[c].command;
    SetCommandResult& result = batch.results[c];
    result = SetCommandResult{};
    for (const std::string& m : cmd.members) {
      const uint32_t i = batch.index.at(m);
      switch (cmd.kind) {
        case SetCommand::Kind::kAdd:
          if (!present[i]) ++result.count;
          present[i] = true;
          wrote[i] = true;
          last[i] = cmd.kind;
          break;
        case SetCommand::Kind::kRemove:
          if (present[i]) ++result.count;
          present[i] = false;
          wrote[i] = true;
          last[i] = cmd.kind;
          break;
        case SetCommand::Kind::kIsMember:
          result.present.push_back(present[i]);
          if (wrote[i]) read_after_write[c].push_back(i);
          break;
      }
    }
  }
  if (batch.writing) {
    // A batch without a read: its write is done and was these adds.
    return true;
  }
  // One op per member the batch changed; the last command to touch it
  // decides which. An add replaces the dots the read found (and the
  // coordinating replica's own); a remove takes out exactly those, and a
  // member the read did not find needs none (the batch's own adds of it
  // were taken out again before they were written).
  batch.ops.clear();
  for (uint32_t i : batch.sorted) {
    if (!wrote[i]) continue;
    if (last[i] == SetCommand::Kind::kAdd) {
      UpdateOp op = UpdateOp::Add(std::string(batch.members[i]), batch.dots[i]);
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
  for (size_t c = 0; c < batch.commands.size(); ++c) {
    const SetCommand& cmd = batch.commands[c].command;
    if (cmd.kind == SetCommand::Kind::kIsMember) {
      for (uint32_t i : read_after_write[c]) {
        if (batch.op_of[i] >= 0) batch.depends[c] = true;
      }
    } else {
      for (const std::string& m : cmd.members) {
        if (batch.op_of[batch.index.at(m)] >= 0) batch.depends[c] = true;
      }
    }
  }
  return true;
}

void SetBatcher::Finish(const std::shared_ptr<Batch>& batch) {
  batch->done = true;
  batch->writing = false;
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
