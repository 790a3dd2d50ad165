// Progress: a one-line progress display on standard error for long work
// (load, dump, verify, repair, sweep, members of a large set).
//
// Shows the count done, the rate and, when the total is known, the percent
// and the time left, redrawn in place at most five times a second. Does
// nothing unless enabled (the tool enables it when standard error is a
// terminal and --no-progress is not given), so scripts and pipes see no
// progress output at all. The line is erased when the work finishes.
//
// Thread-safety: not thread-safe; one thread updates it.

#ifndef BIGSET_TOOLS_BIGSET_PROGRESS_H_
#define BIGSET_TOOLS_BIGSET_PROGRESS_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/time/time.h"

namespace bigset::tool {

class Progress {
 public:
  // `what` names the unit ("keys", "elements"); `total` is 0 if unknown.
  // REQUIRES: `out` outlives the display.
  Progress(bool enabled, std::string what, uint64_t total = 0,
           std::FILE* out = stderr);
  ~Progress();  // Finish()
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Counts `n` more units done; redraws if it is time.
  void Add(uint64_t n) {
    done_ += n;
    if (enabled_ && (n >= 256 || ++calls_ % 256 == 0)) MaybeDraw();
  }
  void set_total(uint64_t total) { total_ = total; }
  uint64_t done() const { return done_; }
  // Erases the line. Idempotent.
  void Finish();

  // "1.2M", "950k", "12": a count in three significant digits.
  static std::string Human(double n);
  // "3s", "4m05s", "2h10m".
  static std::string Duration(absl::Duration d);

 private:
  void MaybeDraw();

  const bool enabled_;
  const std::string what_;
  uint64_t total_;
  std::FILE* const out_;
  uint64_t done_ = 0;
  uint64_t calls_ = 0;
  const absl::Time start_;
  absl::Time last_draw_;
  bool drawn_ = false;
};

}  // namespace bigset::tool

#endif  // BIGSET_TOOLS_BIGSET_PROGRESS_H_
