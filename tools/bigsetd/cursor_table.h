// CursorTable: the integer cursors SSCAN hands out, each naming where a
// scan of one set resumes (after an element).
//
// Redis's cursor is an integer, and client libraries parse it as one, but
// a scan in element order resumes after an arbitrary byte string: the
// table maps one to the other. It is bounded (entries and bytes); the
// oldest cursors go first, and a cursor that was dropped, or never given,
// is unknown (the client gets an error and starts again). Cursors stay
// valid after use, so a client may retry a page. Ids are random, never 0
// (which starts and ends a scan) and below 2^63 (signed 64-bit clients).
//
// Thread-safety: not thread-safe; used on the server's thread.

#ifndef BIGSET_TOOLS_BIGSETD_CURSOR_TABLE_H_
#define BIGSET_TOOLS_BIGSETD_CURSOR_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"

namespace bigset::server {

class CursorTable {
 public:
  struct Position {
    std::string set;
    std::string after;  // Resume after this element.
  };

  CursorTable(size_t max_entries, size_t max_bytes, uint64_t seed);

  uint64_t Put(std::string set, std::string after);
  // The position of `cursor` in `set`; nullopt if unknown or of another set.
  std::optional<std::string> Find(uint64_t cursor, std::string_view set) const;

  size_t size() const { return entries_.size(); }
  size_t bytes() const { return bytes_; }

 private:
  void Evict();

  size_t max_entries_;
  size_t max_bytes_;
  std::mt19937_64 rng_;
  absl::flat_hash_map<uint64_t, Position> entries_;
  std::deque<uint64_t> order_;  // Oldest first.
  size_t bytes_ = 0;
};

}  // namespace bigset::server

#endif  // BIGSET_TOOLS_BIGSETD_CURSOR_TABLE_H_
