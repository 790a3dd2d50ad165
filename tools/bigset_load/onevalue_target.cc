// The paper's baselines: a whole ORSWOT per set in one LevelDB value, on
// `replicas` stores (one LevelDB each, in this process). An update reads,
// decodes, changes, encodes and writes the whole set on the coordinating
// replica, then on every other replica: the whole state merged in (Riak
// sets), or only the delta (Riak sets with deltas), which each replica
// still applies by reading, decoding and rewriting its whole set. What the
// baseline shows is that cost, O(set) per insert; the network is not
// modelled. One mutex per target: Riak serialised a key's updates in its
// vnode.

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>

#include "absl/strings/str_cat.h"
#include "bigset/core/clock.h"
#include "leveldb/db.h"
#include "leveldb/write_batch.h"
#include "onevalue_orswot.h"
#include "target.h"

namespace bigset::load {
namespace {

using bench::OneValueOrswot;

// The ORSWOT join: an element's dot survives if both sides hold it, or one
// side holds it and the other's clock has not seen it.
OneValueOrswot Merge(const OneValueOrswot& a, const OneValueOrswot& b) {
  OneValueOrswot out;
  out.clock = a.clock;
  out.clock.Merge(b.clock);
  size_t i = 0, j = 0;
  auto keep = [](const std::vector<Dot>& mine, const std::vector<Dot>& theirs,
                 const Clock& their_clock, std::vector<Dot>* dots) {
    for (const Dot& d : mine) {
      if (std::find(theirs.begin(), theirs.end(), d) != theirs.end() ||
          !their_clock.Seen(d)) {
        if (std::find(dots->begin(), dots->end(), d) == dots->end()) {
          dots->push_back(d);
        }
      }
    }
  };
  static const std::vector<Dot> kNone;
  while (i < a.entries.size() || j < b.entries.size()) {
    const bool take_a =
        j >= b.entries.size() ||
        (i < a.entries.size() && a.entries[i].first <= b.entries[j].first);
    const bool take_b =
        i >= a.entries.size() ||
        (j < b.entries.size() && b.entries[j].first <= a.entries[i].first);
    const std::string& element =
        take_a ? a.entries[i].first : b.entries[j].first;
    const std::vector<Dot>& da = take_a ? a.entries[i].second : kNone;
    const std::vector<Dot>& db = take_b ? b.entries[j].second : kNone;
    std::vector<Dot> dots;
    keep(da, db, b.clock, &dots);
    keep(db, da, a.clock, &dots);
    if (!dots.empty()) out.entries.push_back({element, std::move(dots)});
    if (take_a) ++i;
    if (take_b) ++j;
  }
  return out;
}

class OneValueTarget final : public Target {
 public:
  OneValueTarget(std::vector<std::unique_ptr<leveldb::DB>> dbs, bool deltas)
      : dbs_(std::move(dbs)), deltas_(deltas) {}

  absl::StatusOr<std::unique_ptr<TargetSession>> Connect() override;
  uint64_t ServerRssBytes() override {
    std::ifstream statm("/proc/self/statm");
    uint64_t size = 0, resident = 0;
    statm >> size >> resident;
    return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  }

  absl::StatusOr<OneValueOrswot> Load(size_t replica, std::string_view set) {
    std::string value;
    leveldb::Status s = dbs_[replica]->Get(
        leveldb::ReadOptions(), leveldb::Slice(set.data(), set.size()), &value);
    if (s.IsNotFound()) return OneValueOrswot();
    if (!s.ok()) return absl::InternalError(s.ToString());
    return OneValueOrswot::Decode(value);
  }

  absl::Status Store(size_t replica, std::string_view set,
                     const OneValueOrswot& o) {
    leveldb::Status s =
        dbs_[replica]->Put(leveldb::WriteOptions(),
                           leveldb::Slice(set.data(), set.size()), o.Encode());
    return s.ok() ? absl::OkStatus() : absl::InternalError(s.ToString());
  }

  // Applies `change` to the coordinator's set (replica 0), then replicates.
  absl::Status Update(
      std::string_view set,
      const std::function<absl::Status(OneValueOrswot*)>& change) {
    std::lock_guard<std::mutex> lock(mu_);
    absl::StatusOr<OneValueOrswot> o = Load(0, set);
    if (!o.ok()) return o.status();
    OneValueOrswot before = *o;
    if (absl::Status s = change(&*o); !s.ok()) return s;
    if (absl::Status s = Store(0, set, *o); !s.ok()) return s;
    for (size_t r = 1; r < dbs_.size(); ++r) {
      absl::StatusOr<OneValueOrswot> theirs = Load(r, set);
      if (!theirs.ok()) return theirs.status();
      if (deltas_) {
        // Only the change travels; the replica applies it to its whole set.
        if (absl::Status s = change(&*theirs); !s.ok()) return s;
        theirs->clock.Merge(o->clock);
        if (absl::Status s = Store(r, set, *theirs); !s.ok()) return s;
      } else {
        // The whole state travels (encoded and decoded, as on a wire).
        absl::StatusOr<OneValueOrswot> shipped =
            OneValueOrswot::Decode(o->Encode());
        if (!shipped.ok()) return shipped.status();
        if (absl::Status s = Store(r, set, Merge(*theirs, *shipped)); !s.ok()) {
          return s;
        }
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<OneValueOrswot> Read(std::string_view set) {
    std::lock_guard<std::mutex> lock(mu_);
    return Load(0, set);
  }

 private:
  std::vector<std::unique_ptr<leveldb::DB>> dbs_;
  const bool deltas_;
  std::mutex mu_;
  ActorId actor_ = 0x0e;
  friend class OneValueSession;
};

class OneValueSession final : public TargetSession {
 public:
  explicit OneValueSession(OneValueTarget* t) : t_(t) {}

  absl::Status Add(std::string_view set, std::string_view element) override {
    // One dot per add, as the coordinator's actor; a delta replica applies
    // the same entry (the dot is decided once, at the coordinator).
    std::optional<Dot> dot;
    return t_->Update(set, [&](OneValueOrswot* o) -> absl::Status {
      if (!dot.has_value()) {
        absl::StatusOr<Dot> d = o->clock.Increment(t_->actor_);
        if (!d.ok()) return d.status();
        dot = *d;
      }
      auto it = std::lower_bound(
          o->entries.begin(), o->entries.end(), element,
          [](const auto& e, std::string_view x) { return e.first < x; });
      if (it != o->entries.end() && it->first == element) {
        it->second = {*dot};  // The add replaces the dots it observed.
      } else {
        o->entries.insert(it, {std::string(element), {*dot}});
      }
      return absl::OkStatus();
    });
  }
  absl::Status Remove(std::string_view set, std::string_view element) override {
    return t_->Update(set, [&](OneValueOrswot* o) -> absl::Status {
      auto it = std::lower_bound(
          o->entries.begin(), o->entries.end(), element,
          [](const auto& e, std::string_view x) { return e.first < x; });
      if (it != o->entries.end() && it->first == element) o->entries.erase(it);
      return absl::OkStatus();
    });
  }
  absl::StatusOr<bool> Contains(std::string_view set,
                                std::string_view element) override {
    absl::StatusOr<OneValueOrswot> o = t_->Read(set);
    if (!o.ok()) return o.status();
    return std::binary_search(
        o->entries.begin(), o->entries.end(),
        std::pair<std::string, std::vector<Dot>>(std::string(element), {}),
        [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  absl::StatusOr<uint64_t> Range(std::string_view set, std::string_view start,
                                 uint64_t limit) override {
    absl::StatusOr<OneValueOrswot> o = t_->Read(set);
    if (!o.ok()) return o.status();
    auto it = std::lower_bound(
        o->entries.begin(), o->entries.end(), start,
        [](const auto& e, std::string_view x) { return e.first < x; });
    return std::min<uint64_t>(limit,
                              static_cast<uint64_t>(o->entries.end() - it));
  }
  absl::StatusOr<uint64_t> FullRead(std::string_view set) override {
    absl::StatusOr<OneValueOrswot> o = t_->Read(set);
    if (!o.ok()) return o.status();
    return o->entries.size();
  }
  absl::StatusOr<uint64_t> Count(std::string_view set) override {
    return FullRead(set);
  }
  // The whole state at once on every replica (adding one element at a time
  // would cost O(n^2) before the run starts).
  absl::Status Preload(std::string_view set,
                       const std::vector<std::string>& elements) override {
    return t_->Update(set, [&](OneValueOrswot* o) -> absl::Status {
      for (const std::string& e : elements) {
        absl::StatusOr<Dot> d = o->clock.Increment(t_->actor_);
        if (!d.ok()) return d.status();
        o->entries.push_back({e, {*d}});
      }
      std::sort(o->entries.begin(), o->entries.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
      return absl::OkStatus();
    });
  }

 private:
  OneValueTarget* t_;
};

absl::StatusOr<std::unique_ptr<TargetSession>> OneValueTarget::Connect() {
  return std::make_unique<OneValueSession>(this);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Target>> NewOneValueTarget(
    const std::string& dir, int replicas, bool deltas) {
  std::vector<std::unique_ptr<leveldb::DB>> dbs;
  for (int r = 0; r < std::max(1, replicas); ++r) {
    leveldb::Options o;
    o.create_if_missing = true;
    leveldb::DB* db = nullptr;
    leveldb::Status s =
        leveldb::DB::Open(o, absl::StrCat(dir, "/replica-", r), &db);
    if (!s.ok()) return absl::InternalError(s.ToString());
    dbs.emplace_back(db);
  }
  return std::make_unique<OneValueTarget>(std::move(dbs), deltas);
}

}  // namespace bigset::load
