// The LevelDB comparator "bigset.v1".
//
// Bigset keys (those starting with kKeyMagic, see keys.h) sort before every
// other key and among themselves in their logical order, which their
// order-preserving encoding makes equal to byte order. Every other key is
// ordered by a wrapped comparator (LevelDB's bytewise comparator by default),
// so an embedder can keep its own data in the same database.
//
// Two keys compare equal only if their bytes are equal (given a wrapped
// comparator with that property, as the bytewise one has), which is what
// LevelDB's built-in bloom filter policy requires.
//
// Thread-safety: comparators are immutable and safe for concurrent use.

#ifndef BIGSET_KEYS_COMPARATOR_H_
#define BIGSET_KEYS_COMPARATOR_H_

#include <memory>

#include "bigset/export.h"
#include "leveldb/comparator.h"

namespace bigset {

// The comparator wrapping leveldb::BytewiseComparator(). Its Name() is
// "bigset.v1". The result has static storage duration; never delete it.
BIGSET_EXPORT const leveldb::Comparator* BigsetComparator();

// A comparator wrapping `wrapped` for non-bigset keys. Its Name() is
// "bigset.v1" for the bytewise comparator and "bigset.v1+<wrapped name>"
// otherwise, so that LevelDB refuses to open a database with a different
// embedder order. REQUIRES: `wrapped` outlives the result.
BIGSET_EXPORT std::unique_ptr<leveldb::Comparator> NewBigsetComparator(
    const leveldb::Comparator* wrapped);

}  // namespace bigset

#endif  // BIGSET_KEYS_COMPARATOR_H_
