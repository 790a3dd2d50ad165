// MapStore: a second Store implementation, over an ordered map in memory.
//
// It proves that the layers above the store need nothing of LevelDB: the
// replica's model-based test runs on it as well. Writes are versioned by a
// sequence number, so snapshots and iterators see the state as of their
// creation (as LevelDB's do).
//
// Thread-safety: safe for concurrent use, like every Store.

#ifndef BIGSET_TESTS_MAP_STORE_H_
#define BIGSET_TESTS_MAP_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "bigset/store/store.h"

namespace bigset::testing {

class MapStore final : public Store {
 public:
  MapStore() = default;

  absl::Status Write(const WriteOptions& options,
                     const WriteBatch& batch) override;
  absl::Status Get(const ReadOptions& options, std::string_view key,
                   std::string* value) override;
  std::unique_ptr<Iterator> NewIterator(const ReadOptions& options,
                                        KeyRange range) override;
  std::unique_ptr<const Snapshot> GetSnapshot() override;
  absl::Status CompactRange(const KeyRange& range) override;
  absl::StatusOr<uint64_t> ApproximateSize(const KeyRange& range) override;

 private:
  class MapIterator;
  class MapSnapshot;
  struct Version {
    uint64_t seq;
    std::optional<std::string> value;  // nullopt: deleted.
  };
  // Bigset keys order bytewise among themselves and before other keys
  // (bigset.v1); that is all the tests store.
  struct KeyLess {
    using is_transparent = void;
    bool operator()(std::string_view a, std::string_view b) const;
  };
  using Map = std::map<std::string, std::vector<Version>, KeyLess>;

  uint64_t SequenceOf(const ReadOptions& options) const;
  // The value of `versions` visible at `seq`, or nullptr.
  static const std::string* Visible(const std::vector<Version>& versions,
                                    uint64_t seq);

  mutable absl::Mutex mu_;
  Map map_ ABSL_GUARDED_BY(mu_);
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace bigset::testing

#endif  // BIGSET_TESTS_MAP_STORE_H_
