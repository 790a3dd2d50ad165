// How the bigset tool reads and prints byte strings (set names, elements).
//
// Elements and set names are arbitrary bytes. On the command line they are
// taken as given, or as hex with --hex. In text output a string is printed
// as is when it is printable UTF-8, and otherwise escaped C-style (\n, \\,
// \xNN for each byte that is a control character or not valid UTF-8), so a
// line never breaks inside an element; with --hex it is printed as hex. In
// JSON, valid UTF-8 is a JSON string (control characters as \uNNNN), other
// bytes an object {"hex": "..."}; with --hex always a hex string.
//
// Thread-safety: stateless functions.

#ifndef BIGSET_TOOLS_BIGSET_BYTES_FORMAT_H_
#define BIGSET_TOOLS_BIGSET_BYTES_FORMAT_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace bigset::tool {

// Lower-case hex of `bytes`.
std::string ToHex(std::string_view bytes);
// The bytes of a hex string (either case). InvalidArgument for an odd
// length or a non-hex character.
absl::StatusOr<std::string> FromHex(std::string_view hex);

// True if `bytes` is valid UTF-8 (no overlong forms, no surrogates).
bool IsValidUtf8(std::string_view bytes);

// `bytes` for a line of text: as is if printable UTF-8, else escaped.
std::string Printable(std::string_view bytes);

// A JSON string literal (with quotes) of valid UTF-8 `text`.
std::string JsonString(std::string_view text);

// How byte strings are shown: text or hex.
struct BytesFormat {
  bool hex = false;

  // Parses a command-line argument (or an input line).
  absl::StatusOr<std::string> Parse(std::string_view arg) const;
  std::string Text(std::string_view bytes) const {
    return hex ? ToHex(bytes) : Printable(bytes);
  }
  // A JSON value: a string, or {"hex": ...} for bytes that are not UTF-8.
  std::string Json(std::string_view bytes) const;
};

}  // namespace bigset::tool

#endif  // BIGSET_TOOLS_BIGSET_BYTES_FORMAT_H_
