// Replica::Open: the actor id and epoch a replica opens with (DESIGN.md,
// "Clocks": a store that may have lost writes it acknowledged takes a new
// actor), the marker of an open replica, and the checks before any of it.

#include <memory>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "bigset/replica/replica.h"
#include "core/coding.h"
#include "core/status_macros.h"
#include "replica/replica_impl.h"
#include "replica/replica_internal.h"

namespace bigset {

using replica_internal::ActorValue;
using replica_internal::kActorFormatVersion;
using replica_internal::kActorMetadata;
using replica_internal::kClosedCleanly;
using replica_internal::kOpenSynced;
using replica_internal::kOpenUnsynced;
using replica_internal::kShutdownFormatVersion;
using replica_internal::kShutdownMetadata;
using replica_internal::NewActorId;
using replica_internal::ShutdownValue;

namespace replica_internal {

absl::StatusOr<bool> HoldsKeyFormatV1(Store* store, KeyspaceId keyspace) {
  auto old =
      store->NewIterator(ReadOptions(), KeyspaceRangeOfVersion(keyspace, 0x01));
  old->SeekToFirst();
  BIGSET_RETURN_IF_ERROR(old->status());
  return old->Valid();
}

ActorId NewActorId(const ReplicaOptions& options) {
  if (options.actor_id_source) return options.actor_id_source();
  std::random_device rd;
  ActorId a = 0;
  while (a == 0) {
    a = (static_cast<uint64_t>(rd()) << 32) ^ static_cast<uint64_t>(rd());
  }
  return a;
}

std::string ShutdownValue(ShutdownState state) {
  return std::string{static_cast<char>(kShutdownFormatVersion),
                     static_cast<char>(state)};
}

std::string ActorValue(ActorId actor) {
  return coding::VersionedFixed64(kActorFormatVersion, actor);
}

}  // namespace replica_internal

Replica::~Replica() = default;

absl::StatusOr<std::unique_ptr<Replica>> Replica::Open(
    Store* store, const ReplicaOptions& options) {
  if (store == nullptr) return absl::InvalidArgumentError("store is null");
  if (options.lock_stripes < 1) {
    return absl::InvalidArgumentError("lock_stripes must be >= 1");
  }
  if (options.digest_buckets < 1) {
    return absl::InvalidArgumentError("digest_buckets must be >= 1");
  }
  // Data of the previous key format (one key per set-clock) would be
  // misread: refuse it rather than guess.
  BIGSET_ASSIGN_OR_RETURN(const bool v1, replica_internal::HoldsKeyFormatV1(
                                             store, options.keyspace));
  if (v1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "keyspace ", options.keyspace,
        " holds data in bigset key format version 1; this version reads "
        "key format version ",
        kKeyFormatVersion, " only"));
  }
  const std::string actor_key = MetadataKey(options.keyspace, kActorMetadata);
  const std::string shutdown_key =
      MetadataKey(options.keyspace, kShutdownMetadata);
  std::string value;
  absl::Status s = store->Get(ReadOptions(), actor_key, &value);
  ActorId actor = 0;
  bool new_epoch = false;
  if (options.read_only) {
    // Inspect whatever is there; Verify reports a missing or bad actor id.
    if (!s.ok() && !absl::IsNotFound(s)) return s;
    if (s.ok() &&
        !coding::DecodeVersionedFixed64(value, kActorFormatVersion, &actor)) {
      actor = 0;
    }
    return std::unique_ptr<Replica>(
        new ReplicaImpl(store, options, actor, false));
  }
  if (s.ok()) {
    if (!coding::DecodeVersionedFixed64(value, kActorFormatVersion, &actor)) {
      return absl::DataLossError(absl::StrCat("keyspace ", options.keyspace,
                                              ": undecodable actor id"));
    }
    // Keep the actor only if the last run provably lost nothing it wrote:
    // it was closed cleanly, or it synced every write. Otherwise its
    // unsynced tail may be gone (power loss) while its peers saw it, and its
    // next counters would name events they already know: start a new epoch.
    s = store->Get(ReadOptions(), shutdown_key, &value);
    if (!s.ok() && !absl::IsNotFound(s)) return s;
    const bool lossless =
        s.ok() && value.size() == 2 &&
        static_cast<uint8_t>(value[0]) == kShutdownFormatVersion &&
        (value[1] == kClosedCleanly || value[1] == kOpenSynced);
    new_epoch = !lossless;
  } else if (absl::IsNotFound(s)) {
    // A keyspace that holds sets but no actor id lost its identity; starting
    // a new actor over its clocks could not be told apart from the old one
    // reusing counters, so refuse.
    auto it = store->NewIterator(ReadOptions(), AllSetsRange(options.keyspace));
    it->SeekToFirst();
    BIGSET_RETURN_IF_ERROR(it->status());
    if (it->Valid()) {
      return absl::DataLossError(absl::StrCat(
          "keyspace ", options.keyspace, " holds set data but no actor id"));
    }
    new_epoch = true;
  } else {
    return s;
  }
  WriteBatch batch;
  if (new_epoch) {
    const ActorId previous = actor;
    actor = NewActorId(options);
    if (actor == 0) return absl::InvalidArgumentError("actor id 0 is invalid");
    if (actor == previous) {
      // The epoch exists to stop the old actor's counters being issued
      // again: a source that repeats it (a fixed id) would defeat it.
      return absl::FailedPreconditionError(absl::StrCat(
          "keyspace ", options.keyspace,
          ": actor_id_source returned the actor of the epoch it replaces"));
    }
    batch.Put(actor_key, ActorValue(actor));
  }
  // From now until Close, the replica is open; synced, so that the marker
  // is on disk before any write it describes.
  batch.Put(shutdown_key,
            ShutdownValue(options.sync_writes ? kOpenSynced : kOpenUnsynced));
  WriteOptions sync;
  sync.sync = true;
  BIGSET_RETURN_IF_ERROR(store->Write(sync, batch));
  auto replica =
      std::make_unique<ReplicaImpl>(store, options, actor, new_epoch);
  if (options.keep_digests) {
    BIGSET_RETURN_IF_ERROR(replica->BuildDigests());
  }
  return replica;
}

}  // namespace bigset
