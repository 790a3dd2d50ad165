#include "set_batcher.h"

#include <algorithm>
#include <string_view>
#include <utility>

namespace bigset::server {

// One batch: its commands, their distinct members, and what the read and
// the commands before each made of every member.
struct SetBatcher::Batch {
  Key key;
  std::vector<Pending> commands;
  // Distinct members, in first-named order; `index` maps each (a view into
  // `commands`, which does not change once the batch is made) to its place.
  std::vector<std::string_view> members;
  absl::flat_hash_map<std::string_view, uint32_t> index;
  bool read = false;
  // Per member: the dots the read found (what a write's context is), and
  // whether the batch writes an op for it.
  std::vector<std::vector<Dot>> dots;
  std::vector<bool> has_op;
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
  auto it = queues_.find(key);
  if (it == queues_.end() || it->second.running) return;
  Queue& queue = it->second;
  if (queue.waiting.empty()) {
    queues_.erase(it);
    return;
  }
  auto batch = std::make_shared<Batch>();
  batch->key = key;
  size_t named = 0;
  while (!queue.waiting.empty() &&
         (batch->commands.empty() ||
          named + queue.waiting.front().command.members.size() <=
              options_.max_batch_members)) {
    named += queue.waiting.front().command.members.size();
    batch->commands.push_back(std::move(queue.waiting.front()));
    queue.waiting.pop_front();
    --stats_.waiting;
  }
  queue.running = true;
  ++stats_.batches;
  stats_.commands += batch->commands.size();
  stats_.largest_batch =
      std::max<uint64_t>(stats_.largest_batch, batch->commands.size());

  bool only_adds = true;
  for (const Pending& p : batch->commands) {
    only_adds &= p.command.kind == SetCommand::Kind::kAdd;
    for (const std::string& m : p.command.members) {
      auto [slot, inserted] = batch->index.try_emplace(
          m, static_cast<uint32_t>(batch->members.size()));
      if (inserted) batch->members.push_back(m);
    }
  }
  batch->dots.resize(batch->members.size());
  batch->has_op.resize(batch->members.size());
  batch->results.resize(batch->commands.size());
  batch->depends.resize(batch->commands.size());

  std::weak_ptr<bool> alive = alive_;
  if (only_adds && !options_.read_before_add) {
    // No read: each member is added with the coordinating replica's dots
    // as its context, and those dots tell whether it was there.
    std::vector<UpdateOp> ops;
    ops.reserve(batch->members.size());
    for (std::string_view m : batch->members) {
      UpdateOp op = UpdateOp::Add(std::string(m));
      op.context_from_replica = true;
      ops.push_back(std::move(op));
    }
    ++stats_.writes;
    backend_->Update(
        key.set, std::move(ops), key.w,
        [this, alive, batch](absl::StatusOr<Delta> delta) {
          if (alive.expired()) return;
          if (delta.ok() && delta->ops.size() != batch->members.size()) {
            delta = absl::InternalError("the delta does not match the update");
          }
          if (!delta.ok()) {
            for (size_t c = 0; c < batch->commands.size(); ++c) {
              batch->depends[c] = true;
            }
            Finish(batch, delta.status());
            return;
          }
          Membership held;
          held.elements.resize(batch->members.size());
          for (size_t i = 0; i < batch->members.size(); ++i) {
            held.elements[i].dots = std::move(delta->ops[i].context);
          }
          batch->read = false;
          OnRead(batch, std::move(held));
        });
    return;
  }
  std::vector<std::string> elements(batch->members.begin(),
                                    batch->members.end());
  batch->read = true;
  ++stats_.reads;
  backend_->ContainsAll(key.set, std::move(elements), key.r,
                        [this, alive, batch](absl::StatusOr<Membership> read) {
                          if (alive.expired()) return;
                          OnRead(batch, std::move(read));
                        });
}

void SetBatcher::OnRead(std::shared_ptr<Batch> batch,
                        absl::StatusOr<Membership> read) {
  if (read.ok() && read->elements.size() != batch->members.size()) {
    read = absl::InternalError("the read does not match the query");
  }
  if (!read.ok()) {
    for (size_t c = 0; c < batch->commands.size(); ++c) {
      batch->results[c].status = read.status();
    }
    Finish(batch, absl::OkStatus());
    return;
  }
  const size_t n = batch->members.size();
  std::vector<bool> present(n), wrote(n);
  std::vector<SetCommand::Kind> last(n, SetCommand::Kind::kAdd);
  for (size_t i = 0; i < n; ++i) {
    batch->dots[i] = std::move(read->elements[i].dots);
    present[i] = !batch->dots[i].empty();
  }
  // Each command against the state the commands before it left. A read
  // that sees a member an earlier command of the batch wrote depends on
  // that write (if the batch writes it at all: see below).
  std::vector<std::vector<uint32_t>> read_after_write(batch->commands.size());
  for (size_t c = 0; c < batch->commands.size(); ++c) {
    const SetCommand& cmd = batch->commands[c].command;
    SetCommandResult& result = batch->results[c];
    for (const std::string& m : cmd.members) {
      const uint32_t i = batch->index.at(m);
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
  // One op per member the batch changed; the last command to touch it
  // decides which. An add replaces the dots the read found (and the
  // coordinating replica's own); a remove takes out exactly those, and a
  // member the read did not find needs none (the batch's own adds of it
  // were taken out again before they were written).
  std::vector<UpdateOp> ops;
  for (size_t i = 0; i < n; ++i) {
    if (!wrote[i]) continue;
    if (last[i] == SetCommand::Kind::kAdd) {
      UpdateOp op = UpdateOp::Add(std::string(batch->members[i]),
                                  batch->read ? batch->dots[i]
                                              : std::vector<Dot>{});
      op.context_from_replica = true;
      ops.push_back(std::move(op));
      batch->has_op[i] = true;
    } else if (!batch->dots[i].empty()) {
      ops.push_back(
          UpdateOp::Remove(std::string(batch->members[i]), batch->dots[i]));
      batch->has_op[i] = true;
    }
  }
  for (size_t c = 0; c < batch->commands.size(); ++c) {
    const SetCommand& cmd = batch->commands[c].command;
    if (cmd.kind == SetCommand::Kind::kIsMember) {
      for (uint32_t i : read_after_write[c]) {
        if (batch->has_op[i]) batch->depends[c] = true;
      }
    } else {
      for (const std::string& m : cmd.members) {
        if (batch->has_op[batch->index.at(m)]) batch->depends[c] = true;
      }
    }
  }
  if (!batch->read) {
    // The write happened already (it was the read): answer now.
    Finish(batch, absl::OkStatus());
    return;
  }
  if (ops.empty()) {
    Finish(batch, absl::OkStatus());
    return;
  }
  ++stats_.writes;
  std::weak_ptr<bool> alive = alive_;
  backend_->Update(batch->key.set, std::move(ops), batch->key.w,
                   [this, alive, batch](absl::StatusOr<Delta> delta) {
                     if (alive.expired()) return;
                     Finish(batch, delta.status());
                   });
}

void SetBatcher::Finish(std::shared_ptr<Batch> batch,
                        const absl::Status& write_status) {
  // Answers go out with the batch still running, so that commands their
  // callbacks submit wait for the next batch (which then takes them all)
  // rather than each starting one of their own.
  for (size_t c = 0; c < batch->commands.size(); ++c) {
    SetCommandResult& result = batch->results[c];
    if (!write_status.ok() && batch->depends[c]) {
      result = SetCommandResult{};
      result.status = write_status;
      result.write_failed =
          batch->commands[c].command.kind != SetCommand::Kind::kIsMember;
    }
    Done done = std::move(batch->commands[c].done);
    done(std::move(result));
  }
  auto it = queues_.find(batch->key);
  if (it != queues_.end()) it->second.running = false;
  MaybeStart(batch->key);
}

}  // namespace bigset::server
