#include "cluster/request_registry.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "cluster/write_coordinator.h"

namespace bigset {

RequestRegistry::RequestRegistry() = default;
RequestRegistry::~RequestRegistry() = default;

std::unique_ptr<WriteCoordinator> RequestRegistry::TakeIdleWrite() {
  if (idle_writes_.empty()) return nullptr;
  std::unique_ptr<WriteCoordinator> op = std::move(idle_writes_.back());
  idle_writes_.pop_back();
  return op;
}

void RequestRegistry::Insert(std::unique_ptr<Coordinator> op) {
  const uint64_t id = op->id();
  ++running_by_kind_[static_cast<size_t>(op->kind())];
  running_[id] = std::move(op);
}

Coordinator* RequestRegistry::FindKind(uint64_t id, RequestKind kind) const {
  auto it = running_.find(id);
  if (it == running_.end() || it->second->kind() != kind) return nullptr;
  return it->second.get();
}

void RequestRegistry::Finish(uint64_t id) {
  auto it = running_.find(id);
  if (it == running_.end()) return;
  std::unique_ptr<Coordinator> op = std::move(it->second);
  running_.erase(it);
  --running_by_kind_[static_cast<size_t>(op->kind())];
  // A few idle coordinators cover a steady stream of writes.
  constexpr size_t kMaxIdleWrites = 16;
  if (op->kind() == RequestKind::kWrite &&
      idle_writes_.size() < kMaxIdleWrites) {
    auto* write = static_cast<WriteCoordinator*>(op.release());
    write->Release();
    idle_writes_.emplace_back(write);
  }
}

size_t RequestRegistry::routes(RequestKind kind) const {
  return static_cast<size_t>(
      std::count_if(routes_.begin(), routes_.end(), [&](const auto& route) {
        return FindKind(route.second, kind) != nullptr;
      }));
}

size_t RequestRegistry::stale_routes() const {
  return static_cast<size_t>(std::count_if(
      routes_.begin(), routes_.end(),
      [&](const auto& route) { return !running_.contains(route.second); }));
}

std::vector<uint64_t> RequestRegistry::Ids(RequestKind kind) const {
  std::vector<uint64_t> ids;
  ids.reserve(running(kind));
  for (const auto& [id, op] : running_) {
    if (op->kind() == kind) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

void RequestRegistry::AbortAll(const absl::Status& status,
                               const std::function<void(uint64_t)>& before) {
  absl::flat_hash_map<uint64_t, std::unique_ptr<Coordinator>> all =
      std::move(running_);
  Clear();
  std::vector<std::pair<uint64_t, Coordinator*>> in_order;
  in_order.reserve(all.size());
  for (const auto& [id, op] : all) in_order.emplace_back(id, op.get());
  std::sort(in_order.begin(), in_order.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [id, op] : in_order) {
    if (before) before(id);
    op->Abort(status);
  }
  if (before) before(UINT64_MAX);
  // A callback may have started requests: they are refused while closing,
  // so none is left to drop but the idle writes they may have recycled.
  Clear();
}

void RequestRegistry::Clear() {
  running_.clear();
  running_by_kind_.fill(0);
  idle_writes_.clear();
  routes_.clear();
}

}  // namespace bigset
