#include "bytes_format.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace bigset::tool {

std::string ToHex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 0xF]);
  }
  return out;
}

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Length of the valid UTF-8 sequence at the start of `s`, or 0.
size_t Utf8SequenceLength(std::string_view s) {
  const auto b = [&s](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t c = b(0);
  if (c < 0x80) return 1;
  size_t n = 0;
  uint32_t cp = 0;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (s.size() < n) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((b(i) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i) & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    return 0;
  }
  return n;
}

bool IsControl(uint8_t c) { return c < 0x20 || c == 0x7F; }

}  // namespace

absl::StatusOr<std::string> FromHex(std::string_view hex) {
  if (hex.size() % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("hex string of odd length ", hex.size()));
  }
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = HexValue(hex[i]);
    const int lo = HexValue(hex[i + 1]);
    if (hi < 0 || lo < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("not a hex string (character ", i + (hi < 0 ? 0 : 1),
                       " is not a hex digit)"));
    }
    out.push_back(static_cast<char>(hi << 4 | lo));
  }
  return out;
}

bool IsValidUtf8(std::string_view bytes) {
  while (!bytes.empty()) {
    const size_t n = Utf8SequenceLength(bytes);
    if (n == 0) return false;
    bytes.remove_prefix(n);
  }
  return true;
}

std::string Printable(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  while (!bytes.empty()) {
    const size_t n = Utf8SequenceLength(bytes);
    const uint8_t c = static_cast<uint8_t>(bytes[0]);
    if (n > 1) {
      out.append(bytes.substr(0, n));
      bytes.remove_prefix(n);
      continue;
    }
    bytes.remove_prefix(1);
    if (n == 1 && !IsControl(c) && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else if (c == '\\') {
      out.append("\\\\");
    } else if (c == '\n') {
      out.append("\\n");
    } else if (c == '\t') {
      out.append("\\t");
    } else if (c == '\r') {
      out.append("\\r");
    } else {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    }
  }
  return out;
}

std::string JsonString(std::string_view text) {
  std::string out = "\"";
  for (char ch : text) {
    const uint8_t c = static_cast<uint8_t>(ch);
    switch (c) {
      case '"':
        out.append("\\\"");
        break;
      case '\\':
        out.append("\\\\");
        break;
      case '\n':
        out.append("\\n");
        break;
      case '\t':
        out.append("\\t");
        break;
      case '\r':
        out.append("\\r");
        break;
      default:
        if (IsControl(c)) {
          absl::StrAppendFormat(&out, "\\u%04x", c);
        } else {
          out.push_back(ch);
        }
    }
  }
  out.push_back('"');
  return out;
}

absl::StatusOr<std::string> BytesFormat::Parse(std::string_view arg) const {
  if (!hex) return std::string(arg);
  absl::StatusOr<std::string> bytes = FromHex(arg);
  if (!bytes.ok()) {
    constexpr size_t kShown = 40;
    return absl::InvalidArgumentError(absl::StrCat(
        "--hex: \"", Printable(arg.substr(0, kShown)),
        arg.size() > kShown ? "..." : "", "\": ", bytes.status().message()));
  }
  return bytes;
}

std::string BytesFormat::Json(std::string_view bytes) const {
  if (hex) return JsonString(ToHex(bytes));
  if (IsValidUtf8(bytes)) return JsonString(bytes);
  return absl::StrCat("{\"hex\":", JsonString(ToHex(bytes)), "}");
}

}  // namespace bigset::tool
