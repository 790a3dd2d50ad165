#include "bigset/store/store.h"

#include "core/coding.h"

namespace bigset {

Snapshot::~Snapshot() = default;
Iterator::~Iterator() = default;
Store::~Store() = default;
WriteBatch::Handler::~Handler() = default;

namespace {
constexpr char kTagDelete = 0;
constexpr char kTagPut = 1;
}  // namespace

void WriteBatch::Put(std::string_view key, std::string_view value) {
  rep_.push_back(kTagPut);
  coding::PutLengthPrefixed(&rep_, key);
  coding::PutLengthPrefixed(&rep_, value);
  ++count_;
}

void WriteBatch::Delete(std::string_view key) {
  rep_.push_back(kTagDelete);
  coding::PutLengthPrefixed(&rep_, key);
  ++count_;
}

bool WriteBatch::Reader::Next(Op* op) {
  if (rest_.empty()) return false;
  coding::Reader in(rest_);
  uint8_t tag = 0;
  in.GetByte(&tag);
  op->is_put = tag == kTagPut;
  op->value = {};
  // The representation is written only by Put and Delete above.
  in.GetLengthPrefixed(&op->key);
  if (op->is_put) in.GetLengthPrefixed(&op->value);
  rest_.remove_prefix(in.position() - rest_.data());
  return true;
}

void WriteBatch::Iterate(Handler* handler) const {
  Reader reader(*this);
  Op op;
  while (reader.Next(&op)) {
    if (op.is_put) {
      handler->Put(op.key, op.value);
    } else {
      handler->Delete(op.key);
    }
  }
}

}  // namespace bigset
