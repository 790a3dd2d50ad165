// libFuzzer target: DecodeKey on arbitrary bytes; a decoded key is the
// canonical encoding of its fields.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "bigset/keys/keys.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  bigset::ParsedKey k;
  if (!bigset::DecodeKey(in, &k).ok()) return 0;
  std::string re;
  switch (k.kind) {
    case bigset::KeyKind::kMetadata:
      re = bigset::MetadataKey(k.keyspace, k.metadata_name);
      break;
    case bigset::KeyKind::kSetClock:
    case bigset::KeyKind::kSetTombstone: {
      const bigset::StateKind sk = k.kind == bigset::KeyKind::kSetClock
                                       ? bigset::StateKind::kClock
                                       : bigset::StateKind::kTombstone;
      re = k.segment ? bigset::SetStateSegmentKey(k.keyspace, k.set, sk,
                                                  k.dot.actor, k.dot.counter)
                     : bigset::SetStateKey(k.keyspace, k.set, sk);
      break;
    }
    case bigset::KeyKind::kElement:
      re = bigset::ElementKey(k.keyspace, k.set, k.element, k.dot);
      break;
    case bigset::KeyKind::kEndOfSet:
      re = bigset::EndOfSetKey(k.keyspace, k.set);
      break;
  }
  if (re != in) std::abort();
  return 0;
}
