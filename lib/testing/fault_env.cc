#include "bigset/testing/fault_env.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace bigset {

// Forwards to the wrapped file and reports appends and syncs to the Env.
class FaultEnv::File final : public leveldb::WritableFile {
 public:
  File(FaultEnv* env, std::string fname, std::shared_ptr<State> state,
       leveldb::WritableFile* base)
      : env_(env),
        fname_(std::move(fname)),
        state_(std::move(state)),
        base_(base) {}
  ~File() override = default;

  leveldb::Status Append(const leveldb::Slice& data) override {
    const uint64_t room = env_->Room(fname_, data.size());
    leveldb::Status s = base_->Append(leveldb::Slice(data.data(), room));
    if (s.ok()) env_->Appended(state_.get(), room);
    if (s.ok() && room < data.size()) {
      return leveldb::Status::IOError(fname_, "No space left on device");
    }
    return s;
  }
  leveldb::Status Close() override { return base_->Close(); }
  leveldb::Status Flush() override { return base_->Flush(); }
  leveldb::Status Sync() override {
    leveldb::Status s = base_->Sync();
    if (s.ok()) env_->Synced(state_.get());
    // A write log's sync is a synced write (sync_writes); table and
    // manifest syncs come from compactions and version edits.
    if (s.ok() && fname_.size() > 4 &&
        fname_.compare(fname_.size() - 4, 4, ".log") == 0) {
      env_->log_syncs_.fetch_add(1, std::memory_order_relaxed);
    }
    return s;
  }

 private:
  FaultEnv* const env_;
  const std::string fname_;
  const std::shared_ptr<State> state_;
  std::unique_ptr<leveldb::WritableFile> base_;
};

FaultEnv::FaultEnv(leveldb::Env* base) : EnvWrapper(base) {}
FaultEnv::~FaultEnv() = default;

leveldb::Status FaultEnv::NewWritableFile(const std::string& fname,
                                          leveldb::WritableFile** result) {
  leveldb::WritableFile* base = nullptr;
  leveldb::Status s = target()->NewWritableFile(fname, &base);
  if (!s.ok()) return s;
  // New and empty: nothing of it is durable.
  auto state = std::make_shared<State>();
  {
    MutexLock lock(&mu_);
    files_[fname] = state;
  }
  *result = new File(this, fname, std::move(state), base);
  return s;
}

leveldb::Status FaultEnv::NewAppendableFile(const std::string& fname,
                                            leveldb::WritableFile** result) {
  uint64_t size = 0;
  const bool existed =
      target()->FileExists(fname) && target()->GetFileSize(fname, &size).ok();
  leveldb::WritableFile* base = nullptr;
  leveldb::Status s = target()->NewAppendableFile(fname, &base);
  if (!s.ok()) return s;
  std::shared_ptr<State> state;
  {
    MutexLock lock(&mu_);
    std::shared_ptr<State>& tracked = files_[fname];
    if (tracked == nullptr) {
      // What was there before is durable.
      tracked = std::make_shared<State>(State{size, size, existed});
    }
    state = tracked;
  }
  *result = new File(this, fname, std::move(state), base);
  return s;
}

leveldb::Status FaultEnv::RemoveFile(const std::string& fname) {
  leveldb::Status s = target()->RemoveFile(fname);
  if (s.ok()) {
    MutexLock lock(&mu_);
    files_.erase(fname);
  }
  return s;
}

leveldb::Status FaultEnv::RenameFile(const std::string& src,
                                     const std::string& target_name) {
  leveldb::Status s = target()->RenameFile(src, target_name);
  if (s.ok()) {
    MutexLock lock(&mu_);
    auto it = files_.find(src);
    if (it != files_.end()) {
      std::shared_ptr<State> state = std::move(it->second);
      files_.erase(it);
      files_[target_name] = std::move(state);
    } else {
      files_.erase(target_name);
    }
  }
  return s;
}

void FaultEnv::FillDiskAfter(const std::string& prefix, uint64_t bytes) {
  MutexLock lock(&mu_);
  room_[prefix] = bytes;
}

void FaultEnv::FreeSpace(const std::string& prefix) {
  MutexLock lock(&mu_);
  room_.erase(prefix);
}

uint64_t FaultEnv::Room(const std::string& fname, uint64_t want) {
  MutexLock lock(&mu_);
  for (auto& [prefix, room] : room_) {
    if (fname.compare(0, prefix.size(), prefix) != 0) continue;
    const uint64_t got = std::min(want, room);
    room -= got;
    return got;
  }
  return want;
}

void FaultEnv::Appended(State* state, uint64_t bytes) {
  MutexLock lock(&mu_);
  state->size += bytes;
}

void FaultEnv::Synced(State* state) {
  MutexLock lock(&mu_);
  state->synced = state->size;
  state->ever_synced = true;
}

void FaultEnv::WriteBack() {
  MutexLock lock(&mu_);
  for (auto& [fname, state] : files_) {
    state->synced = state->size;
    state->ever_synced = true;
  }
}

absl::StatusOr<uint64_t> FaultEnv::DropUnsynced(const std::string& prefix) {
  std::vector<std::pair<std::string, State>> victims;
  {
    MutexLock lock(&mu_);
    for (auto it = files_.lower_bound(prefix);
         it != files_.end() && it->first.compare(0, prefix.size(), prefix) == 0;
         ++it) {
      const State& state = *it->second;
      if (state.synced < state.size || !state.ever_synced) {
        victims.emplace_back(it->first, state);
      }
    }
  }
  uint64_t dropped = 0;
  for (const auto& [fname, state] : victims) {
    if (!state.ever_synced) {
      // Never synced: the file itself may not survive.
      leveldb::Status s = target()->RemoveFile(fname);
      if (!s.ok() && target()->FileExists(fname)) {
        return absl::InternalError(
            absl::StrCat("dropping ", fname, ": ", s.ToString()));
      }
      dropped += state.size;
      MutexLock lock(&mu_);
      files_.erase(fname);
      continue;
    }
    // Keep the synced prefix: read it, then write it back alone.
    std::string kept;
    {
      leveldb::SequentialFile* in = nullptr;
      leveldb::Status s = target()->NewSequentialFile(fname, &in);
      if (!s.ok()) {
        return absl::InternalError(
            absl::StrCat("reading ", fname, ": ", s.ToString()));
      }
      std::unique_ptr<leveldb::SequentialFile> owned(in);
      std::string scratch(state.synced, '\0');
      leveldb::Slice got;
      s = in->Read(state.synced, &got, scratch.data());
      if (!s.ok()) {
        return absl::InternalError(
            absl::StrCat("reading ", fname, ": ", s.ToString()));
      }
      kept.assign(got.data(), got.size());
    }
    leveldb::WritableFile* out = nullptr;
    leveldb::Status s = target()->NewWritableFile(fname, &out);
    if (!s.ok()) {
      return absl::InternalError(
          absl::StrCat("truncating ", fname, ": ", s.ToString()));
    }
    std::unique_ptr<leveldb::WritableFile> owned(out);
    s = out->Append(kept);
    if (s.ok()) s = out->Close();
    if (!s.ok()) {
      return absl::InternalError(
          absl::StrCat("truncating ", fname, ": ", s.ToString()));
    }
    dropped += state.size - state.synced;
    MutexLock lock(&mu_);
    files_[fname] =
        std::make_shared<State>(State{kept.size(), kept.size(), true});
  }
  return dropped;
}

}  // namespace bigset
