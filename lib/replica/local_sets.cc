#include "bigset/replica/local_sets.h"

#include <utility>

namespace bigset {

LocalSets::LocalSets(std::unique_ptr<LevelDbStore> store,
                     std::unique_ptr<Replica> replica)
    : store_(std::move(store)), replica_(std::move(replica)) {}

LocalSets::~LocalSets() { (void)replica_->Close(); }

absl::Status LocalSets::Close() { return replica_->Close(); }

absl::StatusOr<std::unique_ptr<LocalSets>> LocalSets::Open(
    std::string_view path, const LocalSetsOptions& options) {
  absl::StatusOr<std::unique_ptr<LevelDbStore>> store =
      LevelDbStore::Open(path, options.store);
  if (!store.ok()) return store.status();
  absl::StatusOr<std::unique_ptr<Replica>> replica =
      Replica::Open(store->get(), options.replica);
  if (!replica.ok()) return replica.status();
  return std::unique_ptr<LocalSets>(
      new LocalSets(std::move(*store), std::move(*replica)));
}

absl::Status LocalSets::Add(std::string_view set, std::string_view element) {
  UpdateOp op = UpdateOp::Add(std::string(element));
  op.context_from_replica = true;
  return replica_->Update(set, std::span(&op, 1)).status();
}

absl::Status LocalSets::Remove(std::string_view set, std::string_view element) {
  UpdateOp op = UpdateOp::Remove(std::string(element), {});
  op.context_from_replica = true;
  return replica_->Update(set, std::span(&op, 1)).status();
}

absl::Status LocalSets::Clear(std::string_view set) {
  absl::StatusOr<Clock> clock = replica_->GetClock(set);
  if (!clock.ok()) return clock.status();
  return replica_->Clear(set, *clock).status();
}

absl::StatusOr<bool> LocalSets::Contains(std::string_view set,
                                         std::string_view element) {
  absl::StatusOr<std::vector<Dot>> dots = replica_->Contains(set, element);
  if (!dots.ok()) return dots.status();
  return !dots->empty();
}

absl::StatusOr<std::vector<std::string>> LocalSets::Members(
    std::string_view set) {
  absl::StatusOr<std::unique_ptr<SetReader>> reader = replica_->Read(set);
  if (!reader.ok()) return reader.status();
  std::vector<std::string> members;
  std::vector<ElementDots> chunk;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&chunk);
    if (!more.ok()) return more.status();
    if (!*more) break;
    for (ElementDots& e : chunk) members.push_back(std::move(e.element));
  }
  return members;
}

absl::StatusOr<uint64_t> LocalSets::Count(std::string_view set) {
  return replica_->Count(set);
}

}  // namespace bigset
