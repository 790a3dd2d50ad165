#include "bigset/store/store.h"

namespace bigset {

Snapshot::~Snapshot() = default;
Iterator::~Iterator() = default;
Store::~Store() = default;
WriteBatch::Handler::~Handler() = default;

}  // namespace bigset
