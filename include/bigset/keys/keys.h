// The on-disk key format of bigset data (docs/FORMATS.md, "Keys").
//
// Every bigset key is
//
//   magic (0x05) | format version (0x02) | keyspace id (u32, big-endian) |
//   section byte | section payload
//
// and the sections are
//
//   0x01 metadata   | name bytes (to the end of the key)
//   0x02 set        | escaped set name | kind | kind payload
//
// with the set kinds, in their sort order within one set,
//
//   0x01 set-clock      | 0x00                         (header)
//                       | 0x01 | actor (u64 BE) | window (u64 BE)  (segment)
//   0x02 set-tombstone  | the same
//   0x03 element        | escaped element | actor (u64 BE) | counter (u64 BE)
//   0x04 end-of-set     (no payload; sorts after every other key of the set)
//
// A set-clock (and a set-tombstone) is stored as one header key and one
// segment key per actor and window of its dot cloud (lib/core/
// clock_storage.h), so that a write rewrites only the parts it changed.
//
// Byte strings are escaped so that arbitrary bytes (NUL, 0xFF, empty) keep
// their lexicographic order: 0x00 becomes 0x00 0xFF and the string ends with
// 0x00 0x01. Integers are big-endian. The encoding is therefore
// order-preserving: comparing two bigset keys bytewise gives the same result
// as comparing their decoded tuples field by field. The comparator
// (comparator.h) relies on this and only has to separate bigset keys from an
// embedder's own keys.
//
// Each keyspace (one replica, or "vnode") is one contiguous key range, and
// each set one contiguous range within it. The magic byte is below 0x10 so
// that bigset data sorts below Riak-style sext-encoded keys even under a
// plain bytewise order. Format version 1 (one key per set-clock) is not
// read: a replica refuses a keyspace that holds it (FailedPrecondition).
//
// Thread-safety: all functions are stateless and thread-safe.

#ifndef BIGSET_KEYS_KEYS_H_
#define BIGSET_KEYS_KEYS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "bigset/core/dot.h"
#include "bigset/export.h"
#include "bigset/keys/key_range.h"

namespace bigset {

inline constexpr uint8_t kKeyMagic = 0x05;
inline constexpr uint8_t kKeyFormatVersion = 0x02;

// Identifies one replica's data inside a shared LevelDB.
using KeyspaceId = uint32_t;

enum class KeyKind : uint8_t {
  kMetadata,
  kSetClock,
  kSetTombstone,
  kElement,
  kEndOfSet,
};

// True if `key` lies in the bigset namespace (starts with the magic byte).
// Keys of an embedder must not start with kKeyMagic.
inline bool IsBigsetKey(std::string_view key) {
  return !key.empty() && static_cast<uint8_t>(key[0]) == kKeyMagic;
}

// ---- Encoding. Each Append* appends to *dst; the others return a new key.

// Which of a set's two clocks a state key belongs to.
enum class StateKind : uint8_t { kClock, kTombstone };

// The header key of a set's clock or tombstone.
BIGSET_EXPORT void AppendSetStateKey(std::string* dst, KeyspaceId keyspace,
                                     std::string_view set, StateKind kind);
// The segment key of window `window` of `actor`'s dot cloud.
BIGSET_EXPORT void AppendSetStateSegmentKey(std::string* dst,
                                            KeyspaceId keyspace,
                                            std::string_view set,
                                            StateKind kind, ActorId actor,
                                            uint64_t window);
BIGSET_EXPORT void AppendElementKey(std::string* dst, KeyspaceId keyspace,
                                    std::string_view set,
                                    std::string_view element, Dot dot);
BIGSET_EXPORT void AppendEndOfSetKey(std::string* dst, KeyspaceId keyspace,
                                     std::string_view set);
BIGSET_EXPORT void AppendMetadataKey(std::string* dst, KeyspaceId keyspace,
                                     std::string_view name);

BIGSET_EXPORT std::string SetStateKey(KeyspaceId keyspace, std::string_view set,
                                      StateKind kind);
BIGSET_EXPORT std::string SetStateSegmentKey(KeyspaceId keyspace,
                                             std::string_view set,
                                             StateKind kind, ActorId actor,
                                             uint64_t window);
// The header keys of the set-clock and of the set-tombstone.
inline std::string SetClockKey(KeyspaceId keyspace, std::string_view set) {
  return SetStateKey(keyspace, set, StateKind::kClock);
}
inline std::string SetTombstoneKey(KeyspaceId keyspace, std::string_view set) {
  return SetStateKey(keyspace, set, StateKind::kTombstone);
}
BIGSET_EXPORT std::string ElementKey(KeyspaceId keyspace, std::string_view set,
                                     std::string_view element, Dot dot);
BIGSET_EXPORT std::string EndOfSetKey(KeyspaceId keyspace,
                                      std::string_view set);
BIGSET_EXPORT std::string MetadataKey(KeyspaceId keyspace,
                                      std::string_view name);

// ---- Ranges (half-open, under the bigset comparator).

// Every key of one replica (metadata and all sets). Hand-off iterates this.
BIGSET_EXPORT KeyRange KeyspaceRange(KeyspaceId keyspace);
// The metadata keys of one replica.
BIGSET_EXPORT KeyRange MetadataRange(KeyspaceId keyspace);
// Every set of one replica (no metadata).
BIGSET_EXPORT KeyRange AllSetsRange(KeyspaceId keyspace);
// Every key of one set: clocks, tombstones, elements and its end-of-set key.
BIGSET_EXPORT KeyRange SetRange(KeyspaceId keyspace, std::string_view set);
// The keys of a set's clock or tombstone: header and segments.
BIGSET_EXPORT KeyRange SetStateRange(KeyspaceId keyspace, std::string_view set,
                                     StateKind kind);
// The set-clock keys of one set (header and segments).
BIGSET_EXPORT KeyRange SetClocksRange(KeyspaceId keyspace,
                                      std::string_view set);
// The set-tombstone keys of one set (header and segments).
BIGSET_EXPORT KeyRange SetTombstonesRange(KeyspaceId keyspace,
                                          std::string_view set);
// Every key of a keyspace in key format version `version` (to find data
// this version does not read).
BIGSET_EXPORT KeyRange KeyspaceRangeOfVersion(KeyspaceId keyspace,
                                              uint8_t version);
// The element keys of one set.
BIGSET_EXPORT KeyRange ElementsRange(KeyspaceId keyspace, std::string_view set);
// The keys of one element of one set (all its dots).
BIGSET_EXPORT KeyRange ElementRange(KeyspaceId keyspace, std::string_view set,
                                    std::string_view element);
// The first possible key of `element` in `set`: seek here to find its dots,
// or to start a range scan at `element`.
BIGSET_EXPORT std::string ElementSeekKey(KeyspaceId keyspace,
                                         std::string_view set,
                                         std::string_view element);

// ---- Decoding.

// A decoded key. `set`, `element` and `metadata_name` point into the key
// that was decoded when it holds no escaped bytes (the common case), and into
// this object's own storage otherwise; they stay valid while both the key
// bytes and this object are unchanged. Not copyable (the views may point into
// itself); decode again instead.
struct BIGSET_EXPORT ParsedKey {
  ParsedKey() = default;
  ParsedKey(const ParsedKey&) = delete;
  ParsedKey& operator=(const ParsedKey&) = delete;

  KeyKind kind = KeyKind::kMetadata;
  KeyspaceId keyspace = 0;
  std::string_view set;            // every kind but kMetadata
  std::string_view element;        // kElement
  Dot dot{0, 0};                   // kElement: actor and counter;
                                   // a state segment: actor and window
  bool segment = false;            // kSetClock/kSetTombstone: a segment
                                   // key (else the header)
  std::string_view metadata_name;  // kMetadata

  // Scratch space for unescaped fields.
  std::string set_storage;
  std::string element_storage;
};

// Decodes `key` into *out. Returns InvalidArgument if `key` is not a bigset
// key, uses an unknown format version, or is malformed in any way (including
// trailing bytes). Never reads outside `key`.
BIGSET_EXPORT absl::Status DecodeKey(std::string_view key, ParsedKey* out);

// Human-readable rendering of any key (bigset or not) for logs and tests.
BIGSET_EXPORT std::string KeyDebugString(std::string_view key);

}  // namespace bigset

#endif  // BIGSET_KEYS_KEYS_H_
