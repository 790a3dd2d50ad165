#include "log.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace bigset::server {

bool ParseLogLevel(std::string_view text, LogLevel* level) {
  if (text == "debug") {
    *level = LogLevel::kDebug;
  } else if (text == "info") {
    *level = LogLevel::kInfo;
  } else if (text == "warn") {
    *level = LogLevel::kWarn;
  } else if (text == "error") {
    *level = LogLevel::kError;
  } else {
    return false;
  }
  return true;
}

Logger::Logger(LogLevel level, std::string path)
    : level_(level), path_(std::move(path)) {}

Logger::~Logger() {
  absl::MutexLock lock(&mu_);
  if (file_ != nullptr && file_ != stderr) fclose(file_);
}

absl::Status Logger::Open() {
  absl::MutexLock lock(&mu_);
  if (path_.empty()) {
    file_ = stderr;
    return absl::OkStatus();
  }
  FILE* f = fopen(path_.c_str(), "a");
  if (f == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot open log file ", path_, ": ", strerror(errno)));
  }
  if (file_ != nullptr && file_ != stderr) fclose(file_);
  file_ = f;
  return absl::OkStatus();
}

absl::Status Logger::Reopen() { return Open(); }

void Logger::Log(LogLevel level, std::string_view line) {
  if (!Enabled(level)) return;
  static constexpr char kLetters[] = {'D', 'I', 'W', 'E'};
  std::string text =
      absl::StrCat(absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(),
                                    absl::UTCTimeZone()),
                   " ", std::string(1, kLetters[static_cast<int>(level)]), " ",
                   absl::string_view(line.data(), line.size()), "\n");
  absl::MutexLock lock(&mu_);
  FILE* f = file_ != nullptr ? file_ : stderr;
  fwrite(text.data(), 1, text.size(), f);
  fflush(f);
}

}  // namespace bigset::server
