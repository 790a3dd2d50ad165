// Target: what bigset-load drives. Each worker opens its own Session (a
// connection to a server, or a handle on an in-process store); a session
// is used by one worker thread only.

#ifndef BIGSET_TOOLS_BIGSET_LOAD_TARGET_H_
#define BIGSET_TOOLS_BIGSET_LOAD_TARGET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace bigset::load {

class TargetSession {
 public:
  virtual ~TargetSession() = default;
  virtual absl::Status Add(std::string_view set, std::string_view element) = 0;
  // Removes with the context of a read (the element's dots), as a client
  // of a CRDT set must.
  virtual absl::Status Remove(std::string_view set,
                              std::string_view element) = 0;
  virtual absl::StatusOr<bool> Contains(std::string_view set,
                                        std::string_view element) = 0;
  // A page of up to `limit` elements from `start` on; returns how many.
  virtual absl::StatusOr<uint64_t> Range(std::string_view set,
                                         std::string_view start,
                                         uint64_t limit) = 0;
  // The whole set; returns its size.
  virtual absl::StatusOr<uint64_t> FullRead(std::string_view set) = 0;
  virtual absl::StatusOr<uint64_t> Count(std::string_view set) = 0;
  // Adds `elements` (untimed, before a run), as fast as the target allows:
  // by default one Add each.
  virtual absl::Status Preload(std::string_view set,
                               const std::vector<std::string>& elements) {
    for (const std::string& e : elements) {
      if (absl::Status s = Add(set, e); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
};

class Target {
 public:
  virtual ~Target() = default;
  virtual absl::StatusOr<std::unique_ptr<TargetSession>> Connect() = 0;
  // Resident memory of what serves the sets, in bytes, if this process can
  // tell (the in-process targets: this process; a server: its pid's).
  virtual uint64_t ServerRssBytes() = 0;
};

// The library in this process: LocalSets over a LevelDB directory.
absl::StatusOr<std::unique_ptr<Target>> NewLocalTarget(const std::string& dir,
                                                       bool sync_writes);
// A RESP server (bigsetd or redis-server) at host:port; `server_pid` (0 if
// unknown) is where its memory is read.
absl::StatusOr<std::unique_ptr<Target>> NewRespTarget(
    const std::string& address, const std::string& password, int server_pid);
// The paper's baselines, in this process: a whole ORSWOT in one LevelDB
// value per set, read, changed and rewritten on every update, on
// `replicas` stores. Without deltas the coordinator ships the whole set
// and every other replica decodes, merges and rewrites it (Riak sets);
// with deltas it ships only the change, but every replica still reads,
// decodes, merges and rewrites its whole set (Riak sets with deltas).
absl::StatusOr<std::unique_ptr<Target>> NewOneValueTarget(
    const std::string& dir, int replicas, bool deltas);

}  // namespace bigset::load

#endif  // BIGSET_TOOLS_BIGSET_LOAD_TARGET_H_
