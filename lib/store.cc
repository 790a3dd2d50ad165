#include "bigset/store.h"

#include "absl/strings/str_cat.h"
#include "leveldb/write_batch.h"

namespace bigset {

Snapshot::~Snapshot() = default;
Iterator::~Iterator() = default;
Store::~Store() = default;
WriteBatch::Handler::~Handler() = default;

WriteBatch::WriteBatch() : rep_(std::make_unique<leveldb::WriteBatch>()) {}
WriteBatch::~WriteBatch() = default;
WriteBatch::WriteBatch(WriteBatch&&) noexcept = default;
WriteBatch& WriteBatch::operator=(WriteBatch&&) noexcept = default;

void WriteBatch::Put(std::string_view key, std::string_view value) {
  rep_->Put(leveldb::Slice(key.data(), key.size()),
            leveldb::Slice(value.data(), value.size()));
  ++count_;
}

void WriteBatch::Delete(std::string_view key) {
  rep_->Delete(leveldb::Slice(key.data(), key.size()));
  ++count_;
}

void WriteBatch::Clear() {
  rep_->Clear();
  count_ = 0;
}

size_t WriteBatch::ApproximateSize() const { return rep_->ApproximateSize(); }

namespace {

class ForwardingHandler final : public leveldb::WriteBatch::Handler {
 public:
  explicit ForwardingHandler(WriteBatch::Handler* h) : h_(h) {}
  void Put(const leveldb::Slice& k, const leveldb::Slice& v) override {
    h_->Put(std::string_view(k.data(), k.size()),
            std::string_view(v.data(), v.size()));
  }
  void Delete(const leveldb::Slice& k) override {
    h_->Delete(std::string_view(k.data(), k.size()));
  }

 private:
  WriteBatch::Handler* h_;
};

}  // namespace

absl::Status WriteBatch::Iterate(Handler* handler) const {
  ForwardingHandler forward(handler);
  leveldb::Status s = rep_->Iterate(&forward);
  if (!s.ok()) {
    return absl::DataLossError(absl::StrCat("write batch: ", s.ToString()));
  }
  return absl::OkStatus();
}

}  // namespace bigset
