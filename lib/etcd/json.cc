#include "etcd/json.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace bigset::etcd {

class JsonParser {
 public:
  explicit JsonParser(absl::string_view in) : in_(in) {}

  absl::StatusOr<Json> Document() {
    Json v;
    if (!Value(&v, 0)) return Error();
    SkipSpace();
    if (pos_ != in_.size()) {
      why_ = "trailing bytes";
      return Error();
    }
    return v;
  }

 private:
  static constexpr int kMaxDepth = 64;

  absl::Status Error() const {
    return absl::InvalidArgumentError(
        absl::StrCat("bad JSON at byte ", pos_, ": ", why_));
  }

  bool Fail(const char* why) {
    why_ = why;
    return false;
  }

  void SkipSpace() {
    while (pos_ < in_.size() && (in_[pos_] == ' ' || in_[pos_] == '\t' ||
                                 in_[pos_] == '\n' || in_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Literal(absl::string_view word) {
    if (in_.substr(pos_, word.size()) != word) return Fail("bad literal");
    pos_ += word.size();
    return true;
  }

  bool Value(Json* v, int depth) {
    if (depth > kMaxDepth) return Fail("nested too deep");
    SkipSpace();
    if (pos_ >= in_.size()) return Fail("unexpected end");
    const char c = in_[pos_];
    switch (c) {
      case '{':
        return Object(v, depth);
      case '[':
        return Array(v, depth);
      case '"':
        v->type_ = Json::Type::kString;
        return String(&v->text_);
      case 't':
        v->type_ = Json::Type::kBool;
        v->text_ = "true";
        return Literal("true");
      case 'f':
        v->type_ = Json::Type::kBool;
        v->text_ = "false";
        return Literal("false");
      case 'n':
        v->type_ = Json::Type::kNull;
        return Literal("null");
      default:
        v->type_ = Json::Type::kNumber;
        return Number(&v->text_);
    }
  }

  bool Object(Json* v, int depth) {
    v->type_ = Json::Type::kObject;
    ++pos_;  // '{'
    SkipSpace();
    if (pos_ < in_.size() && in_[pos_] == '}') {
      ++pos_;
      return true;
    }
    while (true) {
      SkipSpace();
      if (pos_ >= in_.size() || in_[pos_] != '"') return Fail("expected key");
      std::string key;
      if (!String(&key)) return false;
      SkipSpace();
      if (pos_ >= in_.size() || in_[pos_] != ':') return Fail("expected ':'");
      ++pos_;
      Json member;
      if (!Value(&member, depth + 1)) return false;
      v->keys_.push_back(std::move(key));
      v->items_.push_back(std::move(member));
      SkipSpace();
      if (pos_ >= in_.size()) return Fail("unexpected end");
      if (in_[pos_] == '}') {
        ++pos_;
        return true;
      }
      if (in_[pos_] != ',') return Fail("expected ',' or '}'");
      ++pos_;
    }
  }

  bool Array(Json* v, int depth) {
    v->type_ = Json::Type::kArray;
    ++pos_;  // '['
    SkipSpace();
    if (pos_ < in_.size() && in_[pos_] == ']') {
      ++pos_;
      return true;
    }
    while (true) {
      Json item;
      if (!Value(&item, depth + 1)) return false;
      v->items_.push_back(std::move(item));
      SkipSpace();
      if (pos_ >= in_.size()) return Fail("unexpected end");
      if (in_[pos_] == ']') {
        ++pos_;
        return true;
      }
      if (in_[pos_] != ',') return Fail("expected ',' or ']'");
      ++pos_;
    }
  }

  bool Hex4(uint32_t* out) {
    if (in_.size() - pos_ < 4) return Fail("short \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = in_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return Fail("bad \\u escape");
      }
    }
    *out = v;
    return true;
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  bool String(std::string* out) {
    ++pos_;  // '"'
    while (true) {
      if (pos_ >= in_.size()) return Fail("unterminated string");
      const char c = in_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) {
        return Fail("control byte in string");
      }
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= in_.size()) return Fail("unterminated escape");
      const char e = in_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out->push_back(e);
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          uint32_t cp = 0;
          if (!Hex4(&cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00) {
            // A high surrogate: its low half must follow.
            uint32_t low = 0;
            if (in_.substr(pos_, 2) != "\\u") return Fail("lone surrogate");
            pos_ += 2;
            if (!Hex4(&low)) return false;
            if (low < 0xDC00 || low >= 0xE000) return Fail("bad surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            return Fail("lone surrogate");
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          return Fail("bad escape");
      }
    }
  }

  bool Digits() {
    const size_t start = pos_;
    while (pos_ < in_.size() && in_[pos_] >= '0' && in_[pos_] <= '9') ++pos_;
    return pos_ > start;
  }

  bool Number(std::string* out) {
    const size_t start = pos_;
    if (in_[pos_] == '-') ++pos_;
    if (pos_ < in_.size() && in_[pos_] == '0') {
      ++pos_;
    } else if (!Digits()) {
      return Fail("bad value");
    }
    if (pos_ < in_.size() && in_[pos_] == '.') {
      ++pos_;
      if (!Digits()) return Fail("bad fraction");
    }
    if (pos_ < in_.size() && (in_[pos_] == 'e' || in_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < in_.size() && (in_[pos_] == '+' || in_[pos_] == '-')) ++pos_;
      if (!Digits()) return Fail("bad exponent");
    }
    *out = std::string(in_.substr(start, pos_ - start));
    return true;
  }

  absl::string_view in_;
  size_t pos_ = 0;
  const char* why_ = "";
};

absl::StatusOr<Json> Json::Parse(absl::string_view text) {
  return JsonParser(text).Document();
}

const Json* Json::Find(absl::string_view key) const {
  if (type_ != Type::kObject) return nullptr;
  for (size_t i = keys_.size(); i-- > 0;) {
    if (keys_[i] == key) return &items_[i];
  }
  return nullptr;
}

std::optional<int64_t> Json::AsInt() const {
  if (type_ != Type::kNumber && type_ != Type::kString) return std::nullopt;
  int64_t v = 0;
  if (!absl::SimpleAtoi(text_, &v)) return std::nullopt;
  return v;
}

std::string JsonQuote(absl::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (u < 0x20) {
      out += "\\u00";
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 0xF]);
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace bigset::etcd
