#include "bigset/keys/keys.h"

#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/coding.h"
#include "core/string_view_compat.h"
#include "keys/keys_internal.h"

namespace bigset {
namespace {

constexpr char kSectionMetadata = 0x01;
constexpr char kSectionSet = 0x02;

constexpr char kKindClock = 0x01;
constexpr char kKindTombstone = 0x02;
constexpr char kKindElement = 0x03;
constexpr char kKindEnd = 0x04;

// Escaped strings: 0x00 -> 0x00 0xFF, terminated by 0x00 0x01. 0x01 < 0xFF
// makes a string sort before its own extensions; nothing else changes order.
constexpr char kEscape = 0x00;
constexpr char kEscapedNul = static_cast<char>(0xFF);
constexpr char kTerminator = 0x01;
// Sorts after the terminator of a string and before any escaped NUL or any
// continuation of it: the exclusive end of "this exact string, then more".
constexpr char kAfterTerminator = 0x02;

void AppendPrefix(std::string* dst, KeyspaceId keyspace, char section) {
  dst->push_back(static_cast<char>(kKeyMagic));
  dst->push_back(static_cast<char>(kKeyFormatVersion));
  coding::PutFixed32BE(dst, keyspace);
  dst->push_back(section);
}

// Appends `s` escaped, without its terminator.
void AppendEscapedBody(std::string* dst, std::string_view s) {
  size_t start = 0;
  while (true) {
    const void* nul = std::memchr(s.data() + start, 0, s.size() - start);
    if (nul == nullptr) {
      dst->append(s.data() + start, s.size() - start);
      return;
    }
    size_t pos = static_cast<const char*>(nul) - s.data();
    dst->append(s.data() + start, pos - start);
    dst->push_back(kEscape);
    dst->push_back(kEscapedNul);
    start = pos + 1;
  }
}

void AppendEscaped(std::string* dst, std::string_view s) {
  AppendEscapedBody(dst, s);
  dst->push_back(kEscape);
  dst->push_back(kTerminator);
}

void AppendSetPrefix(std::string* dst, KeyspaceId keyspace,
                     std::string_view set) {
  dst->reserve(dst->size() + 7 + set.size() + 2 + 1 + 16);
  AppendPrefix(dst, keyspace, kSectionSet);
  AppendEscaped(dst, set);
}

// Reads an escaped string. Sets *out to a view of the input when it holds no
// escapes, otherwise unescapes into *storage and points *out there.
bool GetEscaped(coding::Reader* in, std::string_view* out,
                std::string* storage) {
  const char* begin = in->position();
  size_t n = in->remaining();
  const void* first = std::memchr(begin, 0, n);
  if (first == nullptr) return false;
  size_t pos = static_cast<const char*>(first) - begin;
  if (pos + 1 >= n) return false;
  std::string_view skip;
  if (begin[pos + 1] == kTerminator) {
    *out = std::string_view(begin, pos);
    in->GetBytes(pos + 2, &skip);
    return true;
  }
  // Slow path: the string contains NUL bytes.
  storage->clear();
  size_t i = 0;
  while (true) {
    const void* nul = std::memchr(begin + i, 0, n - i);
    if (nul == nullptr) return false;
    size_t p = static_cast<const char*>(nul) - begin;
    if (p + 1 >= n) return false;
    storage->append(begin + i, p - i);
    if (begin[p + 1] == kTerminator) {
      *out = *storage;
      in->GetBytes(p + 2, &skip);
      return true;
    }
    if (begin[p + 1] != kEscapedNul) return false;
    storage->push_back('\0');
    i = p + 2;
  }
}

// The smallest key greater than every key that starts with `prefix`, within
// the bigset namespace. REQUIRES: prefix starts with the magic byte and has a
// byte other than 0xFF after it (true of every prefix built here).
std::string PrefixSuccessor(std::string prefix) {
  while (prefix.size() > 1) {
    uint8_t last = static_cast<uint8_t>(prefix.back());
    if (last != 0xFF) {
      prefix.back() = static_cast<char>(last + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  // Unreachable for the prefixes built here; the end of the namespace.
  return std::string(1, static_cast<char>(kKeyMagic + 1));
}

absl::Status Malformed(std::string_view key, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("malformed bigset key (", ToAbsl(why),
                   "): ", absl::CHexEscape(ToAbsl(key))));
}

}  // namespace

namespace {
constexpr char kStateHeader = 0x00;
constexpr char kStateSegment = 0x01;
char StateKindByte(StateKind kind) {
  return kind == StateKind::kClock ? kKindClock : kKindTombstone;
}
}  // namespace

void AppendSetStateKey(std::string* dst, KeyspaceId keyspace,
                       std::string_view set, StateKind kind) {
  AppendSetPrefix(dst, keyspace, set);
  dst->push_back(StateKindByte(kind));
  dst->push_back(kStateHeader);
}

void AppendSetStateSegmentKey(std::string* dst, KeyspaceId keyspace,
                              std::string_view set, StateKind kind,
                              ActorId actor, uint64_t window) {
  AppendSetPrefix(dst, keyspace, set);
  dst->push_back(StateKindByte(kind));
  dst->push_back(kStateSegment);
  coding::PutFixed64BE(dst, actor);
  coding::PutFixed64BE(dst, window);
}

void AppendElementKey(std::string* dst, KeyspaceId keyspace,
                      std::string_view set, std::string_view element, Dot dot) {
  // The key of every insert: written in one pass into a buffer sized once
  // when neither name holds a NUL (the common case), else built piece by
  // piece.
  if (std::memchr(set.data(), 0, set.size()) != nullptr ||
      std::memchr(element.data(), 0, element.size()) != nullptr) {
    dst->reserve(dst->size() + 7 + set.size() + 2 + 1 + element.size() + 2 +
                 16);
    AppendSetPrefix(dst, keyspace, set);
    dst->push_back(kKindElement);
    AppendEscaped(dst, element);
    coding::PutFixed64BE(dst, dot.actor);
    coding::PutFixed64BE(dst, dot.counter);
    return;
  }
  const size_t start = dst->size();
  dst->resize(start + 7 + set.size() + 2 + 1 + element.size() + 2 + 16);
  char* p = dst->data() + start;
  *p++ = static_cast<char>(kKeyMagic);
  *p++ = static_cast<char>(kKeyFormatVersion);
  coding::EncodeFixed32BE(p, keyspace);
  p += 4;
  *p++ = kSectionSet;
  std::memcpy(p, set.data(), set.size());
  p += set.size();
  *p++ = kEscape;
  *p++ = kTerminator;
  *p++ = kKindElement;
  std::memcpy(p, element.data(), element.size());
  p += element.size();
  *p++ = kEscape;
  *p++ = kTerminator;
  coding::EncodeFixed64BE(p, dot.actor);
  coding::EncodeFixed64BE(p + 8, dot.counter);
}

void AppendEndOfSetKey(std::string* dst, KeyspaceId keyspace,
                       std::string_view set) {
  AppendSetPrefix(dst, keyspace, set);
  dst->push_back(kKindEnd);
}

void AppendMetadataKey(std::string* dst, KeyspaceId keyspace,
                       std::string_view name) {
  AppendPrefix(dst, keyspace, kSectionMetadata);
  dst->append(name.data(), name.size());
}

std::string SetStateKey(KeyspaceId keyspace, std::string_view set,
                        StateKind kind) {
  std::string k;
  AppendSetStateKey(&k, keyspace, set, kind);
  return k;
}

std::string SetStateSegmentKey(KeyspaceId keyspace, std::string_view set,
                               StateKind kind, ActorId actor, uint64_t window) {
  std::string k;
  AppendSetStateSegmentKey(&k, keyspace, set, kind, actor, window);
  return k;
}

std::string ElementKey(KeyspaceId keyspace, std::string_view set,
                       std::string_view element, Dot dot) {
  std::string k;
  AppendElementKey(&k, keyspace, set, element, dot);
  return k;
}

std::string EndOfSetKey(KeyspaceId keyspace, std::string_view set) {
  std::string k;
  AppendEndOfSetKey(&k, keyspace, set);
  return k;
}

std::string MetadataKey(KeyspaceId keyspace, std::string_view name) {
  std::string k;
  AppendMetadataKey(&k, keyspace, name);
  return k;
}

KeyRange KeyspaceRange(KeyspaceId keyspace) {
  return KeyspaceRangeOfVersion(keyspace, kKeyFormatVersion);
}

KeyRange MetadataRange(KeyspaceId keyspace) {
  std::string start;
  AppendPrefix(&start, keyspace, kSectionMetadata);
  std::string limit;
  AppendPrefix(&limit, keyspace, kSectionSet);
  return {std::move(start), std::move(limit)};
}

KeyRange AllSetsRange(KeyspaceId keyspace) {
  std::string start;
  AppendPrefix(&start, keyspace, kSectionSet);
  std::string limit = PrefixSuccessor(start);
  return {std::move(start), std::move(limit)};
}

KeyRange SetRange(KeyspaceId keyspace, std::string_view set) {
  std::string start;
  AppendSetPrefix(&start, keyspace, set);
  std::string limit;
  limit.reserve(start.size() + 1);
  limit.assign(start);
  // Past the end-of-set key (kind 0x04, no payload) and before any other set.
  limit.push_back(kKindEnd + 1);
  return {std::move(start), std::move(limit)};
}

namespace {
KeyRange KindRange(KeyspaceId keyspace, std::string_view set, char kind) {
  std::string start;
  AppendSetPrefix(&start, keyspace, set);
  std::string limit;
  limit.reserve(start.size() + 1);
  limit.assign(start);
  start.push_back(kind);
  limit.push_back(static_cast<char>(kind + 1));
  return {std::move(start), std::move(limit)};
}
}  // namespace

KeyRange SetStateRange(KeyspaceId keyspace, std::string_view set,
                       StateKind kind) {
  return KindRange(keyspace, set, StateKindByte(kind));
}

KeyRange KeyspaceRangeOfVersion(KeyspaceId keyspace, uint8_t version) {
  std::string start;
  start.push_back(static_cast<char>(kKeyMagic));
  start.push_back(static_cast<char>(version));
  coding::PutFixed32BE(&start, keyspace);
  std::string limit = PrefixSuccessor(start);
  return {std::move(start), std::move(limit)};
}

KeyRange SetClocksRange(KeyspaceId keyspace, std::string_view set) {
  return KindRange(keyspace, set, kKindClock);
}

KeyRange SetTombstonesRange(KeyspaceId keyspace, std::string_view set) {
  return KindRange(keyspace, set, kKindTombstone);
}

KeyRange ElementsRange(KeyspaceId keyspace, std::string_view set) {
  return KindRange(keyspace, set, kKindElement);
}

std::string ElementSeekKey(KeyspaceId keyspace, std::string_view set,
                           std::string_view element) {
  std::string k;
  AppendSetPrefix(&k, keyspace, set);
  k.push_back(kKindElement);
  AppendEscaped(&k, element);
  return k;
}

KeyRange ElementRange(KeyspaceId keyspace, std::string_view set,
                      std::string_view element) {
  std::string start;
  // The prefix's fixed bytes, the set's and the element's terminators and a
  // little escaping: one allocation for the key of a point lookup.
  start.reserve(set.size() + element.size() + 24);
  AppendSetPrefix(&start, keyspace, set);
  start.push_back(kKindElement);
  AppendEscapedBody(&start, element);
  // Sized for its two last bytes: a plain copy would grow when they come.
  std::string limit;
  limit.reserve(start.size() + 2);
  limit.assign(start);
  start.push_back(kEscape);
  start.push_back(kTerminator);
  limit.push_back(kEscape);
  limit.push_back(kAfterTerminator);
  return {std::move(start), std::move(limit)};
}

absl::Status DecodeKey(std::string_view key, ParsedKey* out) {
  coding::Reader in(key);
  uint8_t magic = 0, version = 0, section = 0, kind = 0;
  if (!in.GetByte(&magic) || magic != kKeyMagic) {
    return Malformed(key, "not a bigset key");
  }
  if (!in.GetByte(&version)) return Malformed(key, "truncated");
  if (version != kKeyFormatVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported bigset key format version ", version));
  }
  if (!in.GetFixed32BE(&out->keyspace) || !in.GetByte(&section)) {
    return Malformed(key, "truncated prefix");
  }
  out->set = {};
  out->element = {};
  out->metadata_name = {};
  out->dot = Dot{0, 0};
  out->segment = false;
  if (section == kSectionMetadata) {
    out->kind = KeyKind::kMetadata;
    in.GetBytes(in.remaining(), &out->metadata_name);
    return absl::OkStatus();
  }
  if (section != kSectionSet) return Malformed(key, "unknown section");
  if (!GetEscaped(&in, &out->set, &out->set_storage)) {
    return Malformed(key, "bad set name");
  }
  if (!in.GetByte(&kind)) return Malformed(key, "missing kind");
  switch (kind) {
    case kKindClock:
    case kKindTombstone: {
      out->kind =
          kind == kKindClock ? KeyKind::kSetClock : KeyKind::kSetTombstone;
      uint8_t part = 0;
      if (!in.GetByte(&part) ||
          (part != kStateHeader && part != kStateSegment)) {
        return Malformed(key, "bad clock part");
      }
      out->segment = part == kStateSegment;
      if (out->segment && (!in.GetFixed64BE(&out->dot.actor) ||
                           !in.GetFixed64BE(&out->dot.counter))) {
        return Malformed(key, "bad segment");
      }
      break;
    }
    case kKindElement:
      out->kind = KeyKind::kElement;
      if (!GetEscaped(&in, &out->element, &out->element_storage)) {
        return Malformed(key, "bad element");
      }
      if (!in.GetFixed64BE(&out->dot.actor) ||
          !in.GetFixed64BE(&out->dot.counter)) {
        return Malformed(key, "bad dot");
      }
      break;
    case kKindEnd:
      out->kind = KeyKind::kEndOfSet;
      break;
    default:
      return Malformed(key, "unknown kind");
  }
  if (!in.empty()) return Malformed(key, "trailing bytes");
  return absl::OkStatus();
}

namespace internal {

size_t ElementKeyPrefixLength(std::string_view set) {
  // magic, version, keyspace, section, escaped set + terminator, kind.
  size_t nuls = 0;
  for (char c : set) nuls += c == '\0';
  return 1 + 1 + 4 + 1 + set.size() + nuls + 2 + 1;
}

void AppendElementKeyAfterPrefix(std::string* dst, std::string_view element,
                                 Dot dot) {
  AppendEscaped(dst, element);
  coding::PutFixed64BE(dst, dot.actor);
  coding::PutFixed64BE(dst, dot.counter);
}

bool DecodeElementKeyAfterPrefix(std::string_view key, size_t prefix_len,
                                 std::string_view* element,
                                 std::string* storage, Dot* dot) {
  if (key.size() < prefix_len + 2 + 16) return false;
  // Fast path: no NUL in the element, so its terminator is right before
  // the 16 bytes of the dot.
  const size_t end = key.size() - 18;
  if (key[end] == kEscape && key[end + 1] == kTerminator &&
      std::memchr(key.data() + prefix_len, 0, end - prefix_len) == nullptr) {
    *element = key.substr(prefix_len, end - prefix_len);
    dot->actor = coding::DecodeFixed64BE(key.data() + end + 2);
    dot->counter = coding::DecodeFixed64BE(key.data() + end + 10);
    return true;
  }
  coding::Reader in(key.substr(prefix_len));
  return GetEscaped(&in, element, storage) && in.GetFixed64BE(&dot->actor) &&
         in.GetFixed64BE(&dot->counter) && in.empty();
}

}  // namespace internal

std::string KeyDebugString(std::string_view key) {
  auto hex = [](std::string_view s) { return absl::CHexEscape(ToAbsl(s)); };
  ParsedKey k;
  if (!DecodeKey(key, &k).ok()) return absl::StrCat("raw:\"", hex(key), "\"");
  switch (k.kind) {
    case KeyKind::kMetadata:
      return absl::StrCat("ks", k.keyspace, "/meta:\"", hex(k.metadata_name),
                          "\"");
    case KeyKind::kSetClock:
    case KeyKind::kSetTombstone: {
      const char* what = k.kind == KeyKind::kSetClock ? "clock" : "tombstone";
      if (!k.segment) {
        return absl::StrCat("ks", k.keyspace, "/set:\"", hex(k.set), "\"/",
                            what);
      }
      return absl::StrCat("ks", k.keyspace, "/set:\"", hex(k.set), "\"/", what,
                          ":", absl::Hex(k.dot.actor), "@", k.dot.counter);
    }
    case KeyKind::kElement:
      return absl::StrCat("ks", k.keyspace, "/set:\"", hex(k.set), "\"/elem:\"",
                          hex(k.element), "\"/dot:", absl::Hex(k.dot.actor),
                          ".", k.dot.counter);
    case KeyKind::kEndOfSet:
      return absl::StrCat("ks", k.keyspace, "/set:\"", hex(k.set), "\"/end");
  }
  return "?";
}

}  // namespace bigset
