// ForwardingStore: a Store that passes every call to another store, the
// base of the tests' stores that fail, crash or spy on some calls (each
// overrides what it changes).

#ifndef BIGSET_TESTS_SUPPORT_FORWARDING_STORE_H_
#define BIGSET_TESTS_SUPPORT_FORWARDING_STORE_H_

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "bigset/store/store.h"

namespace bigset::testing {

class ForwardingStore : public Store {
 public:
  // REQUIRES: `base` outlives this (it may be set later, before any call).
  explicit ForwardingStore(Store* base = nullptr) : base_(base) {}

  absl::Status Write(const WriteOptions& o, const WriteBatch& b) override {
    return base_->Write(o, b);
  }
  absl::Status Get(const ReadOptions& o, std::string_view k,
                   std::string* v) override {
    return base_->Get(o, k, v);
  }
  std::unique_ptr<Iterator> NewIterator(const ReadOptions& o,
                                        KeyRange r) override {
    return base_->NewIterator(o, std::move(r));
  }
  std::unique_ptr<const Snapshot> GetSnapshot() override {
    return base_->GetSnapshot();
  }
  absl::Status CompactRange(const KeyRange& r) override {
    return base_->CompactRange(r);
  }
  absl::StatusOr<uint64_t> ApproximateSize(const KeyRange& r) override {
    return base_->ApproximateSize(r);
  }

  Store* base() const { return base_; }
  void set_base(Store* base) { base_ = base; }

 private:
  Store* base_;
};

}  // namespace bigset::testing

#endif  // BIGSET_TESTS_SUPPORT_FORWARDING_STORE_H_
