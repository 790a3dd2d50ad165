// WriteBatch, built as a LevelDB batch (lib/store/write_batch_rep.h).

#include "leveldb/write_batch.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "bigset/store/store.h"
#include "core/coding.h"
#include "leveldb/slice.h"
#include "leveldb/status.h"
#include "store/write_batch_rep.h"

namespace bigset {

namespace {

leveldb::Slice ToSlice(std::string_view s) {
  return leveldb::Slice(s.data(), s.size());
}

std::string_view ToView(const leveldb::Slice& s) {
  return std::string_view(s.data(), s.size());
}

// Bytes one operation takes in the representation: a tag byte, then each
// string with its varint length.
size_t OpBytes(size_t key_size, size_t value_size, bool is_put) {
  size_t bytes = 1 + coding::VarintLength(key_size) + key_size;
  if (is_put) bytes += coding::VarintLength(value_size) + value_size;
  return bytes;
}

// Forwards LevelDB's iteration of a batch to a bigset Handler.
class HandlerAdapter : public leveldb::WriteBatch::Handler {
 public:
  explicit HandlerAdapter(WriteBatch::Handler* handler) : handler_(handler) {}
  void Put(const leveldb::Slice& key, const leveldb::Slice& value) override {
    handler_->Put(ToView(key), ToView(value));
  }
  void Delete(const leveldb::Slice& key) override {
    handler_->Delete(ToView(key));
  }

 private:
  WriteBatch::Handler* const handler_;
};

// Collects a batch's operations for a Reader.
class OpCollector : public WriteBatch::Handler {
 public:
  explicit OpCollector(std::vector<WriteBatch::Op>* ops) : ops_(ops) {}
  void Put(std::string_view key, std::string_view value) override {
    ops_->push_back({true, key, value});
  }
  void Delete(std::string_view key) override {
    ops_->push_back({false, key, {}});
  }

 private:
  std::vector<WriteBatch::Op>* const ops_;
};

}  // namespace

WriteBatch::WriteBatch() = default;
WriteBatch::~WriteBatch() = default;

WriteBatch::WriteBatch(WriteBatch&& other) noexcept
    : rep_(std::move(other.rep_)),
      count_(std::exchange(other.count_, 0)),
      size_(std::exchange(other.size_, 0)),
      held_(std::exchange(other.held_, 0)) {}

WriteBatch& WriteBatch::operator=(WriteBatch&& other) noexcept {
  if (this != &other) {
    rep_ = std::move(other.rep_);
    count_ = std::exchange(other.count_, 0);
    size_ = std::exchange(other.size_, 0);
    held_ = std::exchange(other.held_, 0);
  }
  return *this;
}

WriteBatch::Rep& WriteBatch::rep() {
  if (rep_ == nullptr) rep_ = std::make_unique<Rep>();
  return *rep_;
}

void WriteBatch::Put(std::string_view key, std::string_view value) {
  rep().native.Put(ToSlice(key), ToSlice(value));
  ++count_;
  size_ += OpBytes(key.size(), value.size(), true);
}

void WriteBatch::Delete(std::string_view key) {
  rep().native.Delete(ToSlice(key));
  ++count_;
  size_ += OpBytes(key.size(), 0, false);
}

void WriteBatch::Reserve(size_t bytes) {
  // The buffer holds at least what it held.
  const size_t pad_op = OpBytes(0, bytes, true);
  if (count_ != 0 || held_ >= pad_op) return;
  // LevelDB's batch has no reserve; one put of `bytes` grows its buffer in
  // one step, and Clear keeps the capacity. Small pads come from the stack.
  constexpr size_t kStackPad = 4096;
  leveldb::WriteBatch& native = rep().native;
  if (bytes <= kStackPad) {
    char pad[kStackPad];
    std::memset(pad, 0, bytes);
    native.Put(leveldb::Slice(), leveldb::Slice(pad, bytes));
  } else {
    const std::string pad(bytes, '\0');
    native.Put(leveldb::Slice(), ToSlice(pad));
  }
  held_ = pad_op;
  native.Clear();
}

void WriteBatch::Clear() {
  if (count_ == 0) return;  // Empty already (a write lent a cleared batch).
  held_ = std::max(held_, size_);
  rep_->native.Clear();
  count_ = 0;
  size_ = 0;
}

WriteBatch::Reader::Reader(const WriteBatch& batch) {
  ops_.reserve(batch.Count());
  OpCollector collector(&ops_);
  batch.Iterate(&collector);
}

bool WriteBatch::Reader::Next(Op* op) {
  if (next_ == ops_.size()) return false;
  *op = ops_[next_++];
  return true;
}

void WriteBatch::Iterate(Handler* handler) const {
  if (rep_ == nullptr) return;
  HandlerAdapter adapter(handler);
  // Built only by Put and Delete above, so it always decodes.
  const leveldb::Status s = rep_->native.Iterate(&adapter);
  (void)s;
}

}  // namespace bigset
