#include "store/read_only_env.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace bigset {
namespace {

using leveldb::Slice;
using leveldb::Status;

// The bytes of one file kept in memory. Appended by one writer; readers
// copy out under the lock.
struct MemFile {
  absl::Mutex mu;
  std::string data ABSL_GUARDED_BY(mu);

  size_t Size() {
    absl::MutexLock l(&mu);
    return data.size();
  }
  // Copies up to n bytes at `offset` into scratch.
  size_t ReadAt(uint64_t offset, size_t n, char* scratch) {
    absl::MutexLock l(&mu);
    if (offset >= data.size()) return 0;
    n = std::min<size_t>(n, data.size() - offset);
    std::memcpy(scratch, data.data() + offset, n);
    return n;
  }
};

class MemSequentialFile final : public leveldb::SequentialFile {
 public:
  explicit MemSequentialFile(std::shared_ptr<MemFile> file)
      : file_(std::move(file)) {}
  Status Read(size_t n, Slice* result, char* scratch) override {
    size_t got = file_->ReadAt(pos_, n, scratch);
    pos_ += got;
    *result = Slice(scratch, got);
    return Status::OK();
  }
  Status Skip(uint64_t n) override {
    pos_ = std::min<uint64_t>(pos_ + n, file_->Size());
    return Status::OK();
  }

 private:
  std::shared_ptr<MemFile> file_;
  uint64_t pos_ = 0;
};

class MemRandomAccessFile final : public leveldb::RandomAccessFile {
 public:
  explicit MemRandomAccessFile(std::shared_ptr<MemFile> file)
      : file_(std::move(file)) {}
  Status Read(uint64_t offset, size_t n, Slice* result,
              char* scratch) const override {
    *result = Slice(scratch, file_->ReadAt(offset, n, scratch));
    return Status::OK();
  }

 private:
  std::shared_ptr<MemFile> file_;
};

class MemWritableFile final : public leveldb::WritableFile {
 public:
  explicit MemWritableFile(std::shared_ptr<MemFile> file)
      : file_(std::move(file)) {}
  Status Append(const Slice& data) override {
    absl::MutexLock l(&file_->mu);
    file_->data.append(data.data(), data.size());
    return Status::OK();
  }
  Status Close() override { return Status::OK(); }
  Status Flush() override { return Status::OK(); }
  Status Sync() override { return Status::OK(); }

 private:
  std::shared_ptr<MemFile> file_;
};

class NullLogger final : public leveldb::Logger {
 public:
  void Logv(const char*, std::va_list) override {}
};

// The shared locks this process holds on lock files. fcntl locks belong to
// the process, and closing any descriptor of a file releases all of them:
// so every read-only open of one database in this process shares one
// descriptor (and its lock), closed with the last of them.
struct LockRegistry {
  struct Entry {
    std::vector<int> fds;  // fds[0] holds the lock; the rest are spares.
    int refs = 0;
  };
  using Key = std::pair<dev_t, ino_t>;
  absl::Mutex mu;
  std::map<Key, Entry> entries ABSL_GUARDED_BY(mu);
};

LockRegistry& Locks() {
  static LockRegistry* registry = new LockRegistry;
  return *registry;
}

// A shared lock on the real lock file (or none if it does not exist).
class SharedLock final : public leveldb::FileLock {
 public:
  SharedLock() = default;
  explicit SharedLock(LockRegistry::Key key) : key_(key), held_(true) {}
  ~SharedLock() override {
    if (!held_) return;
    LockRegistry& r = Locks();
    absl::MutexLock l(&r.mu);
    auto it = r.entries.find(key_);
    if (it == r.entries.end() || --it->second.refs > 0) return;
    // Closing the last descriptor releases the lock.
    for (int fd : it->second.fds) ::close(fd);
    r.entries.erase(it);
  }

 private:
  LockRegistry::Key key_{};
  bool held_ = false;
};

std::string ParentOf(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

class ReadOnlyEnv final : public leveldb::EnvWrapper {
 public:
  explicit ReadOnlyEnv(leveldb::Env* base) : EnvWrapper(base) {}

  Status NewSequentialFile(const std::string& f,
                           leveldb::SequentialFile** r) override {
    std::shared_ptr<MemFile> mem;
    if (Shadowed(f, &mem)) {
      if (mem == nullptr) return NotFound(f);
      *r = new MemSequentialFile(std::move(mem));
      return Status::OK();
    }
    return target()->NewSequentialFile(f, r);
  }

  Status NewRandomAccessFile(const std::string& f,
                             leveldb::RandomAccessFile** r) override {
    std::shared_ptr<MemFile> mem;
    if (Shadowed(f, &mem)) {
      if (mem == nullptr) return NotFound(f);
      *r = new MemRandomAccessFile(std::move(mem));
      return Status::OK();
    }
    return target()->NewRandomAccessFile(f, r);
  }

  Status NewWritableFile(const std::string& f,
                         leveldb::WritableFile** r) override {
    auto file = std::make_shared<MemFile>();
    {
      absl::MutexLock l(&mu_);
      files_[f] = file;
      deleted_.erase(f);
    }
    *r = new MemWritableFile(std::move(file));
    return Status::OK();
  }

  Status NewAppendableFile(const std::string& f,
                           leveldb::WritableFile** r) override {
    // Copy-on-write: the file's bytes on disk become the memory file's start.
    std::shared_ptr<MemFile> mem;
    if (!Shadowed(f, &mem) || mem == nullptr) {
      mem = std::make_shared<MemFile>();
      std::string bytes;
      if (target()->FileExists(f)) {
        Status s = leveldb::ReadFileToString(target(), f, &bytes);
        if (!s.ok()) return s;
      }
      {
        absl::MutexLock fl(&mem->mu);
        mem->data = std::move(bytes);
      }
      absl::MutexLock l(&mu_);
      files_[f] = mem;
      deleted_.erase(f);
    }
    *r = new MemWritableFile(std::move(mem));
    return Status::OK();
  }

  bool FileExists(const std::string& f) override {
    std::shared_ptr<MemFile> mem;
    if (Shadowed(f, &mem)) return mem != nullptr;
    return target()->FileExists(f);
  }

  Status GetChildren(const std::string& dir,
                     std::vector<std::string>* result) override {
    result->clear();
    std::vector<std::string> on_disk;
    Status s = target()->GetChildren(dir, &on_disk);
    absl::MutexLock l(&mu_);
    std::set<std::string> names;
    for (std::string& name : on_disk) {
      const std::string path = dir + "/" + name;
      if (!deleted_.count(path)) names.insert(std::move(name));
    }
    for (const auto& [path, file] : files_) {
      if (ParentOf(path) == dir) names.insert(path.substr(dir.size() + 1));
    }
    if (!s.ok() && names.empty()) return s;
    result->assign(names.begin(), names.end());
    return Status::OK();
  }

  Status RemoveFile(const std::string& f) override {
    if (!FileExists(f)) return NotFound(f);
    absl::MutexLock l(&mu_);
    files_.erase(f);
    deleted_.insert(f);
    return Status::OK();
  }
  Status DeleteFile(const std::string& f) override { return RemoveFile(f); }

  // Directories are left as they are on disk.
  Status CreateDir(const std::string&) override { return Status::OK(); }
  Status RemoveDir(const std::string&) override { return Status::OK(); }
  Status DeleteDir(const std::string&) override { return Status::OK(); }

  Status GetFileSize(const std::string& f, uint64_t* size) override {
    std::shared_ptr<MemFile> mem;
    if (Shadowed(f, &mem)) {
      if (mem == nullptr) return NotFound(f);
      *size = mem->Size();
      return Status::OK();
    }
    return target()->GetFileSize(f, size);
  }

  Status RenameFile(const std::string& src,
                    const std::string& target_name) override {
    std::shared_ptr<MemFile> mem;
    if (Shadowed(src, &mem)) {
      if (mem == nullptr) return NotFound(src);
    } else {
      mem = std::make_shared<MemFile>();
      std::string bytes;
      Status s = leveldb::ReadFileToString(target(), src, &bytes);
      if (!s.ok()) return s;
      absl::MutexLock fl(&mem->mu);
      mem->data = std::move(bytes);
    }
    absl::MutexLock l(&mu_);
    files_.erase(src);
    deleted_.insert(src);
    files_[target_name] = std::move(mem);
    deleted_.erase(target_name);
    return Status::OK();
  }

  Status LockFile(const std::string& f, leveldb::FileLock** lock) override {
    LockRegistry& r = Locks();
    absl::MutexLock l(&r.mu);
    // Look for a lock this process holds before opening the file: opening
    // and closing another descriptor of it would release that lock.
    struct stat st;
    if (::stat(f.c_str(), &st) != 0) {
      if (errno != ENOENT) return Status::IOError("lock " + f, strerror(errno));
      *lock = new SharedLock();
      return Status::OK();
    }
    LockRegistry::Key key{st.st_dev, st.st_ino};
    if (auto it = r.entries.find(key); it != r.entries.end()) {
      ++it->second.refs;
      *lock = new SharedLock(key);
      return Status::OK();
    }
    int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno != ENOENT) return Status::IOError("lock " + f, strerror(errno));
      *lock = new SharedLock();
      return Status::OK();
    }
    if (::fstat(fd, &st) == 0) key = {st.st_dev, st.st_ino};
    if (auto it = r.entries.find(key); it != r.entries.end()) {
      // The file was replaced by one this process holds: keep the
      // descriptor (closing it would release the lock).
      it->second.fds.push_back(fd);
      ++it->second.refs;
      *lock = new SharedLock(key);
      return Status::OK();
    }
    struct flock fl;
    std::memset(&fl, 0, sizeof(fl));
    fl.l_type = F_RDLCK;
    fl.l_whence = SEEK_SET;
    if (::fcntl(fd, F_SETLK, &fl) == -1) {
      const int err = errno;
      ::close(fd);
      return Status::IOError("lock " + f, strerror(err));
    }
    LockRegistry::Entry& e = r.entries[key];
    e.fds.push_back(fd);
    e.refs = 1;
    *lock = new SharedLock(key);
    return Status::OK();
  }

  Status UnlockFile(leveldb::FileLock* lock) override {
    delete lock;
    return Status::OK();
  }

  Status NewLogger(const std::string&, leveldb::Logger** result) override {
    *result = new NullLogger();
    return Status::OK();
  }

 private:
  static Status NotFound(const std::string& f) {
    return Status::NotFound(f, "no such file");
  }
  // True if the overlay decides what `f` is: *mem is its bytes, or null if
  // it was deleted.
  bool Shadowed(const std::string& f, std::shared_ptr<MemFile>* mem) {
    absl::MutexLock l(&mu_);
    auto it = files_.find(f);
    if (it != files_.end()) {
      *mem = it->second;
      return true;
    }
    *mem = nullptr;
    return deleted_.count(f) > 0;
  }

  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<MemFile>> files_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> deleted_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<leveldb::Env> NewReadOnlyEnv(leveldb::Env* base) {
  return std::make_unique<ReadOnlyEnv>(base);
}

}  // namespace bigset
