#include "bigset/keys/comparator.h"

#include <string>

#include "bigset/keys/keys.h"
#include "leveldb/slice.h"

namespace bigset {
namespace {

inline bool IsBigset(const leveldb::Slice& s) {
  return !s.empty() && static_cast<uint8_t>(s[0]) == kKeyMagic;
}

// Shortens *key to the shortest key >= *key that still starts with the magic
// byte: increments the first byte after the magic byte that is not 0xFF.
void BigsetShortSuccessor(std::string* key) {
  for (size_t i = 1; i < key->size(); ++i) {
    uint8_t byte = static_cast<uint8_t>((*key)[i]);
    if (byte != 0xFF) {
      (*key)[i] = static_cast<char>(byte + 1);
      key->resize(i + 1);
      return;
    }
  }
  // All 0xFF after the magic byte: leave it unchanged.
}

class BigsetComparatorImpl final : public leveldb::Comparator {
 public:
  explicit BigsetComparatorImpl(const leveldb::Comparator* wrapped)
      : wrapped_(wrapped),
        name_(wrapped == leveldb::BytewiseComparator()
                  ? std::string("bigset.v1")
                  : std::string("bigset.v1+") + wrapped->Name()) {}

  const char* Name() const override { return name_.c_str(); }

  int Compare(const leveldb::Slice& a, const leveldb::Slice& b) const override {
    bool ab = IsBigset(a);
    bool bb = IsBigset(b);
    if (ab && bb) return a.compare(b);
    if (ab != bb) return ab ? -1 : 1;
    return wrapped_->Compare(a, b);
  }

  void FindShortestSeparator(std::string* start,
                             const leveldb::Slice& limit) const override {
    leveldb::Slice s(*start);
    if (IsBigset(s)) {
      if (IsBigset(limit)) {
        // Bytewise: find the first differing byte; bump it if that keeps the
        // result below limit. The magic byte is shared, so the result stays
        // in the bigset namespace.
        size_t n = std::min(start->size(), limit.size());
        size_t diff = 0;
        while (diff < n && (*start)[diff] == limit[diff]) ++diff;
        if (diff >= n) return;  // One is a prefix of the other.
        uint8_t byte = static_cast<uint8_t>((*start)[diff]);
        if (byte < 0xFF && byte + 1 < static_cast<uint8_t>(limit[diff])) {
          (*start)[diff] = static_cast<char>(byte + 1);
          start->resize(diff + 1);
        }
      } else {
        // Every bigset key is below limit: any bigset successor will do.
        BigsetShortSuccessor(start);
      }
      return;
    }
    // start is not a bigset key, so neither is limit (limit > start).
    std::string tmp = *start;
    wrapped_->FindShortestSeparator(&tmp, limit);
    // A wrapped result that lands in our namespace would sort before start.
    if (!IsBigset(tmp)) start->swap(tmp);
  }

  void FindShortSuccessor(std::string* key) const override {
    if (IsBigset(*key)) {
      BigsetShortSuccessor(key);
      return;
    }
    std::string tmp = *key;
    wrapped_->FindShortSuccessor(&tmp);
    if (!IsBigset(tmp)) key->swap(tmp);
  }

 private:
  const leveldb::Comparator* wrapped_;
  std::string name_;
};

}  // namespace

const leveldb::Comparator* BigsetComparator() {
  // Immutable after construction; intentionally never destroyed (LevelDB's
  // own BytewiseComparator() does the same).
  static const BigsetComparatorImpl* const kComparator =
      new BigsetComparatorImpl(leveldb::BytewiseComparator());
  return kComparator;
}

std::unique_ptr<leveldb::Comparator> NewBigsetComparator(
    const leveldb::Comparator* wrapped) {
  return std::make_unique<BigsetComparatorImpl>(wrapped);
}

}  // namespace bigset
