// Logger: one line per event on standard error, or in a file that SIGHUP
// makes the daemon reopen (for logrotate).
//
// Lines look like "2026-11-25T06:40:01.123Z I client 7 connected from ...":
// a UTC timestamp, a level letter (D, I, W, E) and the event. No library: a
// mutex and a FILE* are all a daemon that logs a few lines a second needs,
// and they keep the package list short.
//
// Thread-safety: thread-safe.

#ifndef BIGSET_TOOLS_BIGSETD_LOG_H_
#define BIGSET_TOOLS_BIGSETD_LOG_H_

#include <cstdio>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace bigset::server {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// "debug", "info", "warn" or "error".
bool ParseLogLevel(std::string_view text, LogLevel* level);

class Logger {
 public:
  // An empty `path` logs to standard error.
  Logger(LogLevel level, std::string path);
  ~Logger();
  Logger(const Logger&) = delete;
  Logger& operator=(const Logger&) = delete;

  // Opens the file (a no-op for standard error).
  absl::Status Open();
  // Closes and opens the file again (after it was rotated).
  absl::Status Reopen();

  bool Enabled(LogLevel level) const { return level >= level_; }
  void Log(LogLevel level, std::string_view line);
  void Debug(std::string_view line) { Log(LogLevel::kDebug, line); }
  void Info(std::string_view line) { Log(LogLevel::kInfo, line); }
  void Warn(std::string_view line) { Log(LogLevel::kWarn, line); }
  void Error(std::string_view line) { Log(LogLevel::kError, line); }

 private:
  const LogLevel level_;
  const std::string path_;
  absl::Mutex mu_;
  FILE* file_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace bigset::server

#endif  // BIGSET_TOOLS_BIGSETD_LOG_H_
