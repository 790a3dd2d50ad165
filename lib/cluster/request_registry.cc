#include "cluster/request_registry.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace bigset {
namespace {

// Files `op` under `id` in `map`; returns it.
template <typename Map, typename Op>
Op* Insert(Map& map, uint64_t id, std::unique_ptr<Op> op) {
  Op* raw = op.get();
  map[id] = std::move(op);
  return raw;
}

}  // namespace

std::unique_ptr<WriteCoordinator> RequestRegistry::TakeIdleWrite() {
  if (idle_writes_.empty()) return nullptr;
  std::unique_ptr<WriteCoordinator> op = std::move(idle_writes_.back());
  idle_writes_.pop_back();
  return op;
}

WriteCoordinator* RequestRegistry::AddWrite(
    uint64_t id, std::unique_ptr<WriteCoordinator> op) {
  return Insert(writes_, id, std::move(op));
}

ReadCoordinator* RequestRegistry::AddRead(uint64_t id,
                                          std::unique_ptr<ReadCoordinator> op) {
  return Insert(reads_, id, std::move(op));
}

QueryCoordinator* RequestRegistry::AddQuery(
    uint64_t id, std::unique_ptr<QueryCoordinator> op) {
  return Insert(queries_, id, std::move(op));
}

CountCoordinator* RequestRegistry::AddCount(
    uint64_t id, std::unique_ptr<CountCoordinator> op) {
  return Insert(counts_, id, std::move(op));
}

void RequestRegistry::FinishWrite(uint64_t id) {
  auto it = writes_.find(id);
  if (it == writes_.end()) return;
  std::unique_ptr<WriteCoordinator> op = std::move(it->second);
  writes_.erase(it);
  // A few idle coordinators cover a steady stream of writes.
  constexpr size_t kMaxIdleWrites = 16;
  if (idle_writes_.size() < kMaxIdleWrites) {
    op->Release();
    idle_writes_.push_back(std::move(op));
  }
}

WriteCoordinator* RequestRegistry::Write(uint64_t id) {
  auto it = writes_.find(id);
  return it == writes_.end() ? nullptr : it->second.get();
}

WriteCoordinator* RequestRegistry::WriteFor(uint64_t id) {
  if (WriteCoordinator* own = Write(id)) return own;
  auto route = write_routes_.find(id);
  return route == write_routes_.end() ? nullptr : Write(route->second);
}

ReadCoordinator* RequestRegistry::ReadForFold(uint64_t fold_id) {
  auto route = fold_routes_.find(fold_id);
  if (route == fold_routes_.end()) return nullptr;
  auto it = reads_.find(route->second);
  return it == reads_.end() ? nullptr : it->second.get();
}

QueryCoordinator* RequestRegistry::Query(uint64_t id) {
  auto it = queries_.find(id);
  return it == queries_.end() ? nullptr : it->second.get();
}

CountCoordinator* RequestRegistry::Count(uint64_t id) {
  auto it = counts_.find(id);
  return it == counts_.end() ? nullptr : it->second.get();
}

std::vector<uint64_t> RequestRegistry::WriteIds() const {
  std::vector<uint64_t> ids;
  ids.reserve(writes_.size());
  for (const auto& [id, op] : writes_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

void RequestRegistry::AbortAll(const absl::Status& status) {
  absl::flat_hash_map<uint64_t, std::unique_ptr<WriteCoordinator>> writes =
      std::move(writes_);
  std::map<uint64_t, std::unique_ptr<ReadCoordinator>> reads =
      std::move(reads_);
  std::map<uint64_t, std::unique_ptr<QueryCoordinator>> queries =
      std::move(queries_);
  std::map<uint64_t, std::unique_ptr<CountCoordinator>> counts =
      std::move(counts_);
  Clear();
  std::vector<std::pair<uint64_t, Coordinator*>> all;
  all.reserve(writes.size() + reads.size() + queries.size() + counts.size());
  for (const auto& [id, op] : writes) all.emplace_back(id, op.get());
  for (const auto& [id, op] : reads) all.emplace_back(id, op.get());
  for (const auto& [id, op] : queries) all.emplace_back(id, op.get());
  for (const auto& [id, op] : counts) all.emplace_back(id, op.get());
  std::sort(all.begin(), all.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [id, op] : all) op->Abort(status);
  // A callback may have started requests: they are refused while closing,
  // so none is left to drop but the idle writes they may have recycled.
  Clear();
}

void RequestRegistry::Clear() {
  writes_.clear();
  idle_writes_.clear();
  reads_.clear();
  queries_.clear();
  counts_.clear();
  fold_routes_.clear();
  write_routes_.clear();
}

}  // namespace bigset
