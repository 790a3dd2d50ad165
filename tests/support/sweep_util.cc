#include "sweep_util.h"

#include <catch2/catch.hpp>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bigset/keys/keys.h"
#include "replica/replica_internal.h"

namespace bigset::testing {

std::unique_ptr<Replica> OpenSweepReplica(Store* store, bool sync,
                                          KeyspaceId ks,
                                          std::function<ActorId()> actor_ids) {
  ReplicaOptions o;
  o.keyspace = ks;
  o.actor_id_source = std::move(actor_ids);
  o.sync_writes = sync;
  auto r = Replica::Open(store, o);
  REQUIRE(r.ok());
  return std::move(*r);
}

uint64_t ElementKeys(Store& store, std::string_view set) {
  auto it = store.NewIterator(ReadOptions(), ElementsRange(kSweepKs, set));
  uint64_t n = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
  REQUIRE(it->status().ok());
  return n;
}

void AddRange(Replica& r, std::string_view set, int from, int to) {
  std::vector<UpdateOp> ops;
  for (int i = from; i < to; ++i) {
    ops.push_back(UpdateOp::Add(absl::StrCat("e", 100000 + i)));
    if (ops.size() == 100 || i + 1 == to) {
      REQUIRE(r.Update(set, ops).ok());
      ops.clear();
    }
  }
}

void ClearAll(Replica& r, std::string_view set) {
  auto clock = r.GetClock(set);
  REQUIRE(clock.ok());
  REQUIRE(r.Clear(set, *clock).ok());
}

void RequireVerified(Replica& r) {
  auto report = r.Verify();
  REQUIRE(report.ok());
  INFO((report->problems.empty() ? std::string() : report->problems[0]));
  REQUIRE(report->ok());
}

SweepProgress SweepAll(Replica& r) {
  SweepProgress total;
  for (int i = 0; i < 1000; ++i) {
    auto p = r.SweepSome(UINT64_MAX);
    REQUIRE(p.ok());
    total.keys_read += p->keys_read;
    total.keys_deleted += p->keys_deleted;
    total.entries_done += p->entries_done;
    if (p->idle) {
      total.idle = true;
      return total;
    }
  }
  FAIL("the sweep queue never emptied");
  return total;
}

std::string SnapshotKey(std::string_view set) {
  return MetadataKey(kSweepKs, std::string(replica_internal::kSweepSnapshot) +
                                   std::string(set));
}

std::string CursorKey(std::string_view set) {
  return MetadataKey(
      kSweepKs, std::string(replica_internal::kSweepCursor) + std::string(set));
}

std::string QueueKeyWithShard(uint8_t shard, std::string_view set) {
  std::string name(replica_internal::kSweepQueue);
  name.push_back(static_cast<char>(shard));
  name.append(set);
  return MetadataKey(kSweepKs, name);
}

std::string SweepValue(std::string_view payload) {
  return replica_internal::EncodeSweepValue(payload);
}

std::vector<uint64_t> KeysOnReplicas(Simulator& sim, const std::string& set) {
  const uint32_t p = sim.ring().PartitionOf(set);
  std::vector<uint64_t> keys;
  for (NodeId n : sim.ring().PreferenceList(p)) {
    Replica* r = sim.node(n)->LocalReplica(p);
    REQUIRE(r != nullptr);
    RequireVerified(*r);
    keys.push_back(r->Verify()->element_keys);
  }
  return keys;
}

void Put(Store& store, const std::string& key, std::string_view value) {
  WriteBatch b;
  b.Put(key, value);
  REQUIRE(store.Write(WriteOptions(), b).ok());
}

}  // namespace bigset::testing
