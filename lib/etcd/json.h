// Json: the JSON values etcd's HTTP gateway answers with, parsed; and the
// quoting of strings for the requests sent to it. Internal to lib/etcd.
//
// Parse accepts RFC 8259 JSON (objects, arrays, strings with every escape,
// numbers, true/false/null) nested at most 64 deep, and refuses anything
// else with InvalidArgument; it never crashes on any bytes. Numbers keep
// their text (etcd sends 64-bit integers as strings anyway).
//
// Thread-safety: value type.

#ifndef BIGSET_LIB_ETCD_JSON_H_
#define BIGSET_LIB_ETCD_JSON_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace bigset::etcd {

class Json {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

  static absl::StatusOr<Json> Parse(absl::string_view text);

  Type type() const { return type_; }
  // A string's bytes (escapes decoded), a number's text; empty otherwise.
  const std::string& text() const { return text_; }
  bool boolean() const { return type_ == Type::kBool && text_ == "true"; }
  // An array's elements; empty for other types.
  const std::vector<Json>& items() const { return items_; }
  // An object's member `key` (the last one if repeated), or nullptr (also
  // when this is not an object).
  const Json* Find(absl::string_view key) const;
  // An integer given as a number or as a string of digits (etcd's int64s),
  // or nullopt.
  std::optional<int64_t> AsInt() const;

 private:
  friend class JsonParser;
  Type type_ = Type::kNull;
  std::string text_;
  std::vector<Json> items_;        // Array elements, or object values.
  std::vector<std::string> keys_;  // Object keys, parallel to items_.
};

// `s` as a JSON string literal, quotes included.
std::string JsonQuote(absl::string_view s);

}  // namespace bigset::etcd

#endif  // BIGSET_LIB_ETCD_JSON_H_
