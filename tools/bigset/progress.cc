#include "progress.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace bigset::tool {

Progress::Progress(bool enabled, std::string what, uint64_t total,
                   std::FILE* out)
    : enabled_(enabled),
      what_(std::move(what)),
      total_(total),
      out_(out),
      start_(absl::Now()),
      last_draw_(start_) {}

Progress::~Progress() { Finish(); }

std::string Progress::Human(double n) {
  static constexpr const char* kSuffix[] = {"", "k", "M", "G", "T"};
  int i = 0;
  while (n >= 999.5 && i < 4) {
    n /= 1000;
    ++i;
  }
  if (i == 0) return absl::StrFormat("%.0f", n);
  // Two calls: a format chosen at run time is not checked (clang refuses it).
  if (n < 9.95) return absl::StrFormat("%.1f%s", n, kSuffix[i]);
  return absl::StrFormat("%.0f%s", n, kSuffix[i]);
}

std::string Progress::Duration(absl::Duration d) {
  const int64_t s = absl::ToInt64Seconds(d);
  if (s < 60) return absl::StrFormat("%ds", s);
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%dh%02dm", s / 3600, s % 3600 / 60);
}

void Progress::MaybeDraw() {
  const absl::Time now = absl::Now();
  if (now - last_draw_ < absl::Milliseconds(200)) return;
  last_draw_ = now;
  const double secs = absl::ToDoubleSeconds(now - start_);
  const double rate = secs > 0 ? static_cast<double>(done_) / secs : 0;
  std::string line =
      absl::StrFormat("%s %s (%s/s)", Human(done_), what_, Human(rate));
  if (total_ > 0) {
    const double frac =
        std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_));
    absl::StrAppendFormat(&line, " %.0f%%", frac * 100);
    if (rate > 0 && done_ < total_) {
      absl::StrAppend(
          &line, " ETA ",
          Duration(absl::Seconds(static_cast<double>(total_ - done_) / rate)));
    }
  }
  // \r to the line start, \x1b[K erases what a longer line left.
  absl::FPrintF(out_, "\r%s\x1b[K", line);
  std::fflush(out_);
  drawn_ = true;
}

void Progress::Finish() {
  if (!drawn_) return;
  absl::FPrintF(out_, "\r\x1b[K");
  std::fflush(out_);
  drawn_ = false;
}

}  // namespace bigset::tool
