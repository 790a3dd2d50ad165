#include "resp_parser.h"

#include <cctype>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl_compat.h"

namespace bigset::server {
namespace {

absl::Status ProtocolError(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("Protocol error: ", AV(what)));
}

bool ParseLength(std::string_view text, int64_t* out) {
  // As Redis's string2ll: an optional '-' then digits, no leading zero
  // (but "0" itself), no space, no '+', no "-0"; at most 18 digits.
  bool negative = false;
  if (!text.empty() && text.front() == '-') {
    negative = true;
    text.remove_prefix(1);
  }
  if (text.empty() || text.size() > 18) return false;
  if (text.size() > 1 && text.front() == '0') return false;
  if (negative && text == "0") return false;
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = negative ? -v : v;
  return true;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

void RespParser::Feed(std::string_view bytes) {
  Compact();
  buf_.append(bytes);
}

void RespParser::Compact() {
  // Drop what was consumed once it is most of the buffer, so that a long
  // pipeline does not move its tail at every command.
  if (pos_ > 0 &&
      (pos_ == buf_.size() || pos_ >= (64 << 10) || pos_ * 2 >= buf_.size())) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
}

absl::StatusOr<bool> RespParser::Line(std::string_view* line,
                                      std::string_view what, bool crlf) {
  const size_t nl = buf_.find('\n', pos_);
  if (nl == std::string::npos) {
    if (buf_.size() - pos_ > limits_.max_inline_bytes) {
      return ProtocolError(absl::StrCat("too big ", AV(what)));
    }
    return false;
  }
  if (nl - pos_ > limits_.max_inline_bytes) {
    return ProtocolError(absl::StrCat("too big ", AV(what)));
  }
  size_t end = nl;
  if (end > pos_ && buf_[end - 1] == '\r') {
    --end;
  } else if (crlf) {
    // A multibulk header ends in CRLF, as Redis requires.
    return ProtocolError(absl::StrCat("expected CRLF after ", AV(what)));
  }
  *line = std::string_view(buf_).substr(pos_, end - pos_);
  pos_ = nl + 1;
  return true;
}

absl::StatusOr<bool> RespParser::Next(std::vector<std::string>* args) {
  while (true) {
    if (expected_ < 0) {
      if (pos_ >= buf_.size()) return false;
      if (buf_[pos_] != '*') {
        absl::StatusOr<bool> got = NextInline(args);
        if (!got.ok() || !*got) return got;
        if (args->empty()) continue;  // An empty line.
        return true;
      }
    }
    absl::StatusOr<bool> got = NextMultibulk(args);
    if (!got.ok() || !*got) return got;
    if (args->empty()) continue;  // "*0" or "*-1".
    return true;
  }
}

absl::StatusOr<bool> RespParser::NextInline(std::vector<std::string>* args) {
  std::string_view line;
  absl::StatusOr<bool> whole = Line(&line, "inline request", false);
  if (!whole.ok() || !*whole) return whole;
  absl::StatusOr<std::vector<std::string>> words = SplitInline(line);
  if (!words.ok()) return words.status();
  if (words->size() > limits_.max_args) {
    return ProtocolError("invalid multibulk length");
  }
  *args = std::move(*words);
  return true;
}

absl::StatusOr<bool> RespParser::NextMultibulk(std::vector<std::string>* args) {
  if (expected_ < 0) {
    const size_t start = pos_;
    std::string_view line;
    absl::StatusOr<bool> whole = Line(&line, "mbulk count string", true);
    if (!whole.ok() || !*whole) return whole;
    int64_t n = 0;
    if (!ParseLength(line.substr(1), &n) ||
        n > static_cast<int64_t>(limits_.max_args)) {
      return ProtocolError("invalid multibulk length");
    }
    (void)start;
    if (n <= 0) {
      args->clear();
      return true;
    }
    expected_ = n;
    partial_.clear();
    // Reserve what is plausible, not what the header claims.
    partial_.reserve(static_cast<size_t>(std::min<int64_t>(n, 1024)));
    bulk_len_ = -1;
  }
  while (static_cast<int64_t>(partial_.size()) < expected_) {
    if (bulk_len_ < 0) {
      if (pos_ >= buf_.size()) return false;
      if (buf_[pos_] != '$') {
        return ProtocolError(absl::StrCat(
            "expected '$', got '",
            std::string(1, std::isprint(static_cast<unsigned char>(buf_[pos_]))
                               ? buf_[pos_]
                               : '?'),
            "'"));
      }
      std::string_view line;
      absl::StatusOr<bool> whole = Line(&line, "bulk count string", true);
      if (!whole.ok() || !*whole) return whole;
      int64_t len = 0;
      if (!ParseLength(line.substr(1), &len) || len < 0 ||
          static_cast<uint64_t>(len) > limits_.max_bulk_bytes) {
        return ProtocolError("invalid bulk length");
      }
      bulk_len_ = len;
    }
    const size_t need = static_cast<size_t>(bulk_len_) + 2;
    if (buf_.size() - pos_ < need) return false;
    if (buf_[pos_ + bulk_len_] != '\r' || buf_[pos_ + bulk_len_ + 1] != '\n') {
      return ProtocolError("expected CRLF after bulk");
    }
    partial_.emplace_back(buf_, pos_, static_cast<size_t>(bulk_len_));
    // What the argument costs in memory, not only its bytes: a command of
    // a million empty arguments holds tens of megabytes.
    partial_bytes_ += static_cast<size_t>(bulk_len_) + sizeof(std::string);
    pos_ += need;
    bulk_len_ = -1;
  }
  *args = std::move(partial_);
  partial_ = {};
  partial_bytes_ = 0;
  expected_ = -1;
  return true;
}

absl::StatusOr<std::vector<std::string>> SplitInline(std::string_view line) {
  std::vector<std::string> words;
  size_t i = 0;
  const size_t n = line.size();
  while (true) {
    while (i < n && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i >= n) return words;
    std::string word;
    bool in_double = false, in_single = false, done = false;
    while (!done) {
      if (in_double) {
        if (i >= n) return ProtocolError("unbalanced quotes in request");
        if (line[i] == '\\' && i + 3 < n && line[i + 1] == 'x' &&
            HexValue(line[i + 2]) >= 0 && HexValue(line[i + 3]) >= 0) {
          word.push_back(static_cast<char>(HexValue(line[i + 2]) * 16 +
                                           HexValue(line[i + 3])));
          i += 4;
        } else if (line[i] == '\\' && i + 1 < n) {
          const char c = line[i + 1];
          word.push_back(c == 'n'   ? '\n'
                         : c == 'r' ? '\r'
                         : c == 't' ? '\t'
                         : c == 'b' ? '\b'
                         : c == 'a' ? '\a'
                                    : c);
          i += 2;
        } else if (line[i] == '"') {
          // A closing quote must be followed by a space or the end.
          if (i + 1 < n &&
              !std::isspace(static_cast<unsigned char>(line[i + 1]))) {
            return ProtocolError("unbalanced quotes in request");
          }
          ++i;
          done = true;
        } else {
          word.push_back(line[i++]);
        }
      } else if (in_single) {
        if (i >= n) return ProtocolError("unbalanced quotes in request");
        if (line[i] == '\\' && i + 1 < n && line[i + 1] == '\'') {
          word.push_back('\'');
          i += 2;
        } else if (line[i] == '\'') {
          if (i + 1 < n &&
              !std::isspace(static_cast<unsigned char>(line[i + 1]))) {
            return ProtocolError("unbalanced quotes in request");
          }
          ++i;
          done = true;
        } else {
          word.push_back(line[i++]);
        }
      } else if (i >= n || std::isspace(static_cast<unsigned char>(line[i]))) {
        done = true;
      } else if (line[i] == '"') {
        in_double = true;
        ++i;
      } else if (line[i] == '\'') {
        in_single = true;
        ++i;
      } else {
        word.push_back(line[i++]);
      }
    }
    words.push_back(std::move(word));
  }
}

}  // namespace bigset::server
