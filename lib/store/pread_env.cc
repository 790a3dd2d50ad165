#include "store/pread_env.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace bigset {
namespace {

using leveldb::Slice;
using leveldb::Status;

Status ErrnoStatus(const std::string& context, int error) {
  if (error == ENOENT) return Status::NotFound(context, std::strerror(error));
  return Status::IOError(context, std::strerror(error));
}

// One open file read at offsets; the descriptor stays open while the table
// does (LevelDB's table cache bounds how many are).
class PreadFile final : public leveldb::RandomAccessFile {
 public:
  PreadFile(std::string name, int fd) : name_(std::move(name)), fd_(fd) {}
  ~PreadFile() override { ::close(fd_); }

  Status Read(uint64_t offset, size_t n, Slice* result,
              char* scratch) const override {
    size_t done = 0;
    while (done < n) {
      const ssize_t r = ::pread(fd_, scratch + done, n - done,
                                static_cast<off_t>(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        *result = Slice(scratch, 0);
        return ErrnoStatus(name_, errno);
      }
      if (r == 0) break;  // End of file: a short read, as LevelDB expects.
      done += static_cast<size_t>(r);
    }
    *result = Slice(scratch, done);
    return Status::OK();
  }

 private:
  const std::string name_;
  const int fd_;
};

class PreadEnv final : public leveldb::EnvWrapper {
 public:
  explicit PreadEnv(leveldb::Env* base) : leveldb::EnvWrapper(base) {}

  Status NewRandomAccessFile(const std::string& name,
                             leveldb::RandomAccessFile** result) override {
    *result = nullptr;
    const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(name, errno);
    *result = new PreadFile(name, fd);
    return Status::OK();
  }
};

}  // namespace

std::unique_ptr<leveldb::Env> NewPreadEnv(leveldb::Env* base) {
  return std::make_unique<PreadEnv>(base);
}

}  // namespace bigset
