// Coordinator: the base of the state machines of a node's client requests
// (write, read, query, count): their request id and kind, and how the
// node aborts them when it closes. Internal header.
//
// The machines do no I/O: their driver carries out the outputs they return
// (request_output.h). The request registry files them by id and kind.
//
// Thread-safety: a machine runs on the one thread that drives its node.

#ifndef BIGSET_LIB_CLUSTER_COORDINATOR_H_
#define BIGSET_LIB_CLUSTER_COORDINATOR_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace bigset {

// What a coordinator coordinates: the registry files every request under
// its id in one map and hands a reply only to a coordinator of the kind
// the reply is for.
enum class RequestKind : uint8_t { kWrite, kRead, kQuery, kCount };
inline constexpr size_t kRequestKinds = 4;

class Coordinator {
 public:
  explicit Coordinator(uint64_t id) : id_(id) {}
  virtual ~Coordinator() = default;
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  uint64_t id() const { return id_; }
  virtual RequestKind kind() const = 0;

  // The node is closing: answers the client with `status` unless it was
  // answered already. Returns no output and leaves the registry alone: the
  // node has taken the coordinator out and destroys it after the call. The
  // client's callback may call into the node (which refuses new requests
  // once closing).
  virtual void Abort(const absl::Status& status) = 0;

 protected:
  uint64_t id_;  // A recycled machine (a write's) takes a new one.
};

// A coordinator of kind K: RequestRegistry::Find<T> files and finds it
// under T::kKind.
template <RequestKind K>
class CoordinatorOf : public Coordinator {
 public:
  static constexpr RequestKind kKind = K;
  RequestKind kind() const final { return K; }

 protected:
  using Coordinator::Coordinator;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_COORDINATOR_H_
