// The bigset tool's shared state: global options, opening the store, exit
// statuses and output.
//
// Read commands open the store read-only (LevelDbStoreOptions::read_only and
// ReplicaOptions::read_only): nothing on disk changes, and a store another
// process holds open fails with a clear error. Write commands open it for
// writing and close the replica cleanly at the end.
//
// Thread-safety: single-threaded, like the tool.

#ifndef BIGSET_TOOLS_BIGSET_TOOL_H_
#define BIGSET_TOOLS_BIGSET_TOOL_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bigset/replica/replica.h"
#include "bigset/store/leveldb_store.h"
#include "bytes_format.h"

// Returns the status of `expr` if it is not OK.
#define TOOL_RETURN_IF_ERROR(expr)               \
  do {                                           \
    absl::Status tool_status_ = (expr);          \
    if (!tool_status_.ok()) return tool_status_; \
  } while (0)

#define TOOL_CONCAT_INNER(a, b) a##b
#define TOOL_CONCAT(a, b) TOOL_CONCAT_INNER(a, b)
// `lhs = value of expr`, or returns its error status.
#define TOOL_ASSIGN_OR_RETURN(lhs, expr) \
  TOOL_ASSIGN_OR_RETURN_IMPL(TOOL_CONCAT(tool_or_, __LINE__), lhs, expr)
#define TOOL_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(*tmp)

namespace bigset::tool {

// Exit statuses.
inline constexpr int kExitOk = 0;
// A negative answer: not found, not all present, verify found problems.
inline constexpr int kExitNo = 1;
// A usage or operational error.
inline constexpr int kExitError = 2;

// A store and its replica, open. The replica is closed (cleanly, if opened
// for writing) before the store.
struct OpenStore {
  std::unique_ptr<LevelDbStore> store;
  std::unique_ptr<Replica> replica;

  OpenStore() = default;
  OpenStore(OpenStore&&) = default;
  OpenStore& operator=(OpenStore&&) = default;
  ~OpenStore();
  // Closes the replica; the error of a failed clean shutdown.
  absl::Status Close();
};

// Buffered standard output.
class Output {
 public:
  void Write(std::string_view text) {
    data_.append(text);
    if (data_.size() >= (1 << 16)) Drain();
  }
  // `text` and a newline.
  void Line(std::string_view text) {
    data_.append(text);
    data_.push_back('\n');
    if (data_.size() >= (1 << 16)) Drain();
  }
  // Writes what is buffered; Unavailable if writing failed (e.g. a closed
  // pipe).
  absl::Status Flush();

 private:
  void Drain();
  std::string data_;
  bool failed_ = false;
};

struct Context {
  // Global options.
  std::string db;
  uint32_t keyspace = 0;
  bool json = false;
  bool hex = false;
  bool create = false;
  bool no_progress = false;

  Output out;
  // Set when a command's NotFound is its answer (the set asked about does
  // not exist: exit status 1); any other error is operational (2).
  mutable bool answer_not_found = false;
  // The chosen subcommand's work; returns the exit status.
  std::function<absl::StatusOr<int>()> run;

  BytesFormat bytes() const { return BytesFormat{hex}; }
  // True when a progress line should be drawn (stderr is a terminal).
  bool progress() const;

  absl::StatusOr<OpenStore> OpenForRead() const;
  absl::StatusOr<OpenStore> OpenForWrite() const;
};

// Dots as text ("a1b2:3,a1b2:7") and as JSON ([[actor,counter],...]).
std::string DotsText(const std::vector<Dot>& dots);
std::string DotsJson(const std::vector<Dot>& dots);

// NotFound unless `set` has state (a set-clock) in the replica's keyspace;
// then marks the answer as "not found" in `ctx`.
absl::Status CheckSetExists(const Context& ctx, Replica& replica,
                            std::string_view set);

// Reads the lines of `in` (without their '\n', a final line without one
// included) and calls `fn` for each batch of at most `batch` lines.
absl::Status ForEachLineBatch(
    std::FILE* in, size_t batch,
    const std::function<absl::Status(std::vector<std::string>&)>& fn);

}  // namespace bigset::tool

#endif  // BIGSET_TOOLS_BIGSET_TOOL_H_
