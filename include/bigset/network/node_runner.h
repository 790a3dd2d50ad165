// NodeRunner: one node of a cluster in this process, on its own thread,
// connected to its peers by TcpTransport (docs/ARCHITECTURE.md, "Network").
//
// The runner owns the node's store (a LevelDbStore in a directory), an
// Asio io_context and the one thread that runs it, an AsioScheduler, a
// TcpTransport and the Node. Every call into the node is posted to that
// thread, so the client API below may be called from any thread; the
// completion callbacks (and a ReadHandler's methods) run on the runner's
// thread: they must not block it (post long work elsewhere). Close shuts
// the node down cleanly (Node::Close: the next open keeps its replicas'
// actor epochs).
//
// Thread-safety: thread-safe, except that the object must not be destroyed
// while another thread calls into it.

#ifndef BIGSET_NETWORK_NODE_RUNNER_H_
#define BIGSET_NETWORK_NODE_RUNNER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bigset/cluster/node.h"
#include "bigset/cluster/ring.h"
#include "bigset/export.h"
#include "bigset/network/address_book.h"
#include "bigset/network/tcp_transport.h"
#include "bigset/store/leveldb_store.h"

namespace bigset {

struct NodeRunnerOptions {
  NodeId id = 0;
  // The node's LevelDB directory (created if missing).
  std::string data_dir;
  LevelDbStoreOptions store;
  // The latest ring the embedder has for the node (see Node::Open).
  std::optional<Ring> ring;
  NodeOptions node;
  TcpTransportOptions transport;
  // Where the peers listen; REQUIRED.
  std::shared_ptr<const AddressBook> addresses;
};

class BIGSET_EXPORT NodeRunner {
 public:
  // Opens the store and the node, starts listening and the thread.
  // InvalidArgument for missing options, and whatever the store, the node
  // or the transport refuse.
  static absl::StatusOr<std::unique_ptr<NodeRunner>> Start(
      NodeRunnerOptions options);
  // Closes the node if Close was not called. REQUIRES: not on the runner's
  // thread (not from a callback): the process aborts.
  ~NodeRunner();
  NodeRunner(const NodeRunner&) = delete;
  NodeRunner& operator=(const NodeRunner&) = delete;

  NodeId id() const;
  // The port this node listens on for its peers.
  uint16_t port() const;

  // A clean shutdown: the node closes its replicas, the transport its
  // connections, the thread ends. Requests still running are answered as
  // Node::Close answers them, on the runner's thread before Close returns;
  // later calls fail with FailedPrecondition (callbacks get it).
  // Idempotent. From the runner's thread (a callback) it fails with
  // FailedPrecondition: it waits for that thread.
  absl::Status Close();

  // ---- Client API: Node's, from any thread; callbacks on the runner's
  // thread.
  void Update(std::string set, std::vector<UpdateOp> ops,
              const ClusterWriteOptions& options,
              std::function<void(absl::StatusOr<Delta>)> done);
  void Clear(std::string set, Clock context, const ClusterWriteOptions& options,
             std::function<void(absl::StatusOr<Delta>)> done);
  // `handler` must live until its OnDone; its `next` may be called from
  // any thread while the runner is open. A handler that holds a chunk on
  // another thread must be done with it (and with `next`) before the
  // runner is closed or destroyed: Close answers OnDone and frees the
  // chunk. With `bounds`, only the elements within them (see Node::Read);
  // bounds that hold nothing read only the clock.
  void Read(std::string set, const ClusterReadOptions& options,
            ReadHandler* handler,
            std::optional<ElementBounds> bounds = std::nullopt);
  void ContainsAll(std::string set, std::vector<std::string> elements,
                   const ClusterReadOptions& options,
                   std::function<void(absl::StatusOr<Membership>)> done);
  void Range(std::string set, RangeQuery query,
             const ClusterReadOptions& options,
             std::function<void(absl::StatusOr<RangeResult>)> done);
  void Count(std::string set, const ClusterReadOptions& options,
             std::function<void(absl::StatusOr<uint64_t>)> done);

  // Blocking conveniences (they wait for the runner's thread; from it, a
  // callback, they fail with FailedPrecondition).
  absl::StatusOr<Delta> UpdateAndWait(std::string set,
                                      std::vector<UpdateOp> ops,
                                      const ClusterWriteOptions& options);
  absl::StatusOr<Membership> ContainsAllAndWait(
      std::string set, std::vector<std::string> elements,
      const ClusterReadOptions& options);
  // The whole set, merged (its size is not bounded: for tests and tools).
  struct ReadResult {
    Clock clock;
    std::vector<ElementDots> elements;
  };
  absl::StatusOr<ReadResult> ReadAndWait(std::string set,
                                         const ClusterReadOptions& options);
  absl::Status InstallRing(const Ring& ring);
  absl::StatusOr<NodeStats> Stats();
  absl::StatusOr<std::vector<PartitionMove>> Moving();
  TransportStats TransportStatistics() const;
  // TcpTransport::Dial on the runner's thread: connects to `peer` now.
  // FailedPrecondition once closed, and from the runner's thread.
  absl::Status DialPeer(NodeId peer);
  // Compacts the store's keys of `partition` (after a bulk load, say), on
  // the caller's thread: the node keeps serving meanwhile, and Close waits
  // for it. FailedPrecondition once closed, and from the runner's thread.
  absl::Status CompactPartition(uint32_t partition);
  // Runs `fn` with the node on the runner's thread and waits for it.
  absl::Status RunOnNode(const std::function<void(Node&)>& fn);

 private:
  class Impl;
  explicit NodeRunner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace bigset

#endif  // BIGSET_NETWORK_NODE_RUNNER_H_
