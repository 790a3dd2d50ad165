// The library in this process: LocalSets.

#include <unistd.h>

#include <fstream>

#include "bigset/replica/local_sets.h"
#include "bigset/replica/set_reader.h"
#include "target.h"

namespace bigset::load {
namespace {

uint64_t SelfRss() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

class LocalSession final : public TargetSession {
 public:
  explicit LocalSession(LocalSets* sets) : sets_(sets) {}
  absl::Status Add(std::string_view set, std::string_view element) override {
    return sets_->Add(set, element);
  }
  absl::Status Remove(std::string_view set, std::string_view element) override {
    return sets_->Remove(set, element);
  }
  absl::StatusOr<bool> Contains(std::string_view set,
                                std::string_view element) override {
    return sets_->Contains(set, element);
  }
  absl::StatusOr<uint64_t> Range(std::string_view set, std::string_view start,
                                 uint64_t limit) override {
    RangeQuery q;
    q.start = std::string(start);
    q.limit = limit;
    absl::StatusOr<RangeResult> r = sets_->replica().Range(set, q);
    if (!r.ok()) return r.status();
    return r->elements.size();
  }
  absl::StatusOr<uint64_t> FullRead(std::string_view set) override {
    absl::StatusOr<std::unique_ptr<SetReader>> reader =
        sets_->replica().Read(set);
    if (!reader.ok()) return reader.status();
    uint64_t n = 0;
    std::vector<ElementDots> chunk;
    while (true) {
      absl::StatusOr<bool> more = (*reader)->Next(&chunk);
      if (!more.ok()) return more.status();
      if (!*more) return n;
      n += chunk.size();
    }
  }
  absl::StatusOr<uint64_t> Count(std::string_view set) override {
    return sets_->Count(set);
  }

 private:
  LocalSets* sets_;
};

class LocalTarget final : public Target {
 public:
  explicit LocalTarget(std::unique_ptr<LocalSets> sets)
      : sets_(std::move(sets)) {}
  ~LocalTarget() override { (void)sets_->Close(); }
  absl::StatusOr<std::unique_ptr<TargetSession>> Connect() override {
    return std::make_unique<LocalSession>(sets_.get());
  }
  uint64_t ServerRssBytes() override { return SelfRss(); }

 private:
  std::unique_ptr<LocalSets> sets_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Target>> NewLocalTarget(const std::string& dir,
                                                       bool sync_writes) {
  LocalSetsOptions o;
  o.replica.sync_writes = sync_writes;
  absl::StatusOr<std::unique_ptr<LocalSets>> sets = LocalSets::Open(dir, o);
  if (!sets.ok()) return sets.status();
  return std::make_unique<LocalTarget>(std::move(*sets));
}

}  // namespace bigset::load
