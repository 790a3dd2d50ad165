#include "bigset/network/node_runner.h"

#include <asio.hpp>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bigset/network/asio_scheduler.h"
#include "core/status_macros.h"

namespace bigset {
namespace {

absl::Status Closed() {
  return absl::FailedPreconditionError("the node runner is closed");
}

absl::Status OwnThread() {
  return absl::FailedPreconditionError(
      "a blocking call from the runner's own thread would never end");
}

// Forwards a read to the client's handler, with a `next` that may be called
// from any thread (it posts to the runner's thread). Deletes itself when
// the read is done.
class PostingHandler final : public ReadHandler {
 public:
  PostingHandler(asio::io_context* io, ReadHandler* client)
      : io_(io), client_(client) {}
  void OnClock(const Clock& clock) override { client_->OnClock(clock); }
  void OnChunk(std::vector<ElementDots>* elements,
               std::function<void()> next) override {
    client_->OnChunk(elements, [io = io_, next = std::move(next)]() mutable {
      asio::post(*io, std::move(next));
    });
  }
  void OnDone(absl::Status status) override {
    client_->OnDone(std::move(status));
    delete this;
  }

 private:
  asio::io_context* const io_;
  ReadHandler* const client_;
};

// Collects a whole read (ReadAndWait).
class CollectingHandler final : public ReadHandler {
 public:
  void OnClock(const Clock& clock) override { result_.clock = clock; }
  void OnChunk(std::vector<ElementDots>* elements,
               std::function<void()> next) override {
    for (ElementDots& e : *elements) result_.elements.push_back(std::move(e));
    next();
  }
  void OnDone(absl::Status status) override {
    if (status.ok()) {
      done_.set_value(std::move(result_));
    } else {
      done_.set_value(std::move(status));
    }
  }
  std::future<absl::StatusOr<NodeRunner::ReadResult>> future() {
    return done_.get_future();
  }

 private:
  NodeRunner::ReadResult result_;
  std::promise<absl::StatusOr<NodeRunner::ReadResult>> done_;
};

}  // namespace

class NodeRunner::Impl {
 public:
  explicit Impl(NodeRunnerOptions options)
      : options_(std::move(options)), work_(asio::make_work_guard(io_)) {}
  ~Impl() {
    if (OnRunnerThread()) {
      // Close cannot join the thread it runs on; destroying the runner
      // from its own callback is a caller's error.
      std::fprintf(
          stderr, "NodeRunner destroyed on its own thread (from a callback)\n");
      std::abort();
    }
    (void)Close();
  }

  absl::Status Start();
  absl::Status Close();

  // Runs fn(node) on the runner's thread; `closed` instead if the runner is
  // closed (on the caller's thread).
  void Post(std::function<void(Node&)> fn, std::function<void()> closed) {
    {
      // Checked and posted under the lock Close sets closed_ with: a
      // handler posted here is queued before Close's own and runs; one
      // posted after Close stopped the thread would never run (and a
      // caller waiting for it, never return).
      absl::MutexLock lock(&post_mu_);
      if (!closed_.load()) {
        asio::post(io_,
                   [this, fn = std::move(fn), closed = std::move(closed)]() {
                     if (node_ == nullptr) {
                       closed();
                     } else {
                       fn(*node_);
                     }
                   });
        return;
      }
    }
    closed();
  }
  // Runs fn(node, done) on the runner's thread, or done(Closed()) if the
  // runner is closed; `done` is called once either way.
  template <typename Done, typename F>
  void PostDone(Done done, F fn) {
    auto shared = std::make_shared<Done>(std::move(done));
    Post(
        [shared, fn = std::move(fn)](Node& node) mutable { fn(node, *shared); },
        [shared]() { (*shared)(Closed()); });
  }
  // Runs fn(node) on the runner's thread and waits for its result.
  template <typename T>
  absl::StatusOr<T> Call(std::function<absl::StatusOr<T>(Node&)> fn) {
    if (OnRunnerThread()) return OwnThread();
    auto promise = std::make_shared<std::promise<absl::StatusOr<T>>>();
    std::future<absl::StatusOr<T>> future = promise->get_future();
    Post([promise,
          fn = std::move(fn)](Node& node) { promise->set_value(fn(node)); },
         [promise]() { promise->set_value(Closed()); });
    return future.get();
  }

  // Whether the caller runs on the runner's thread (a callback), where a
  // call that waits for that thread would wait forever.
  bool OnRunnerThread() const {
    return std::this_thread::get_id() == thread_id_.load();
  }

  absl::Status CompactPartition(uint32_t partition) {
    // A close running on another thread holds close_mu_ while it waits for
    // this thread.
    if (OnRunnerThread()) return OwnThread();
    // Under the close lock: Close frees the store.
    absl::MutexLock lock(&close_mu_);
    if (closed_.load()) return Closed();
    return store_->CompactRange(KeyspaceRange(partition));
  }

  asio::io_context& io() { return io_; }
  TcpTransport& transport() { return *transport_; }
  const NodeRunnerOptions& options() const { return options_; }

 private:
  NodeRunnerOptions options_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::unique_ptr<LevelDbStore> store_;
  std::unique_ptr<AsioScheduler> scheduler_;
  std::unique_ptr<TcpTransport> transport_;
  std::unique_ptr<Node> node_;  // Touched on the runner's thread only.
  std::thread thread_;
  // thread_'s id, for Call (which may race Close's join of thread_).
  std::atomic<std::thread::id> thread_id_;
  std::atomic<bool> closed_{false};
  absl::Mutex close_mu_;
  // Orders Post's check of closed_ and its post against Close setting it.
  absl::Mutex post_mu_;
};

absl::Status NodeRunner::Impl::Start() {
  if (options_.id == 0 || options_.data_dir.empty() ||
      !options_.ring.has_value() || options_.addresses == nullptr) {
    return absl::InvalidArgumentError(
        "a node runner needs an id, a data directory, a ring and an address "
        "book");
  }
  absl::StatusOr<std::unique_ptr<LevelDbStore>> store =
      LevelDbStore::Open(options_.data_dir, options_.store);
  if (!store.ok()) return store.status();
  store_ = std::move(*store);
  scheduler_ = std::make_unique<AsioScheduler>(&io_);
  transport_ = std::make_unique<TcpTransport>(
      &io_, options_.id, options_.addresses, options_.transport);
  thread_ = std::thread([this]() {
    thread_id_.store(std::this_thread::get_id());
    io_.run();
  });
  std::promise<absl::Status> opened;
  asio::post(io_, [this, &opened]() {
    absl::Status s = transport_->Start([this](NodeId from, std::string_view b) {
      if (node_ != nullptr) node_->Receive(from, b);
    });
    if (s.ok()) {
      absl::StatusOr<std::unique_ptr<Node>> node =
          Node::Open(options_.id, *options_.ring, store_.get(),
                     transport_.get(), scheduler_.get(), options_.node);
      if (node.ok()) {
        node_ = std::move(*node);
        transport_->SetRingEpoch(node_->ring().epoch());
        // Announce this node: each peer that gave up on it while it was
        // down (its connection waiting out a back-off of up to seconds)
        // connects back at once when this one's handshake arrives.
        for (const auto& [peer, address] : options_.addresses->All()) {
          if (peer != options_.id) transport_->Dial(peer);
        }
      } else {
        s = node.status();
      }
    }
    opened.set_value(s);
  });
  absl::Status s = opened.get_future().get();
  if (!s.ok()) (void)Close();
  return s;
}

absl::Status NodeRunner::Impl::Close() {
  // It waits for the runner's thread (and joins it).
  if (OnRunnerThread()) return OwnThread();
  absl::MutexLock lock(&close_mu_);
  {
    absl::MutexLock posts(&post_mu_);
    if (closed_.exchange(true)) return absl::OkStatus();
  }
  absl::Status result = absl::OkStatus();
  if (thread_.joinable()) {
    std::promise<absl::Status> done;
    asio::post(io_, [this, &done]() {
      absl::Status s = absl::OkStatus();
      if (node_ != nullptr) {
        s = node_->Close();
        node_.reset();
      }
      if (transport_ != nullptr) transport_->Stop();
      if (scheduler_ != nullptr) scheduler_->CancelAll();
      done.set_value(s);
    });
    result = done.get_future().get();
    work_.reset();
    io_.stop();
    thread_.join();
    // Ids are reused: a later thread must not pass for the runner's.
    thread_id_.store(std::thread::id());
  }
  // The store's lock goes with it (another process may open it now); the
  // transport stays, stopped, for its statistics.
  store_.reset();
  return result;
}

absl::StatusOr<std::unique_ptr<NodeRunner>> NodeRunner::Start(
    NodeRunnerOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  BIGSET_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<NodeRunner>(new NodeRunner(std::move(impl)));
}

NodeRunner::NodeRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NodeRunner::~NodeRunner() = default;

NodeId NodeRunner::id() const { return impl_->options().id; }

uint16_t NodeRunner::port() const { return impl_->transport().port(); }

absl::Status NodeRunner::Close() { return impl_->Close(); }

void NodeRunner::Update(std::string set, std::vector<UpdateOp> ops,
                        const ClusterWriteOptions& options,
                        std::function<void(absl::StatusOr<Delta>)> done) {
  impl_->PostDone(std::move(done), [set = std::move(set), ops = std::move(ops),
                                    options](Node& node, auto& done) mutable {
    node.Update(set, std::move(ops), options, std::move(done));
  });
}

void NodeRunner::Clear(std::string set, Clock context,
                       const ClusterWriteOptions& options,
                       std::function<void(absl::StatusOr<Delta>)> done) {
  impl_->PostDone(
      std::move(done),
      [set = std::move(set), context = std::move(context), options](
          Node& node, auto& done) { node.Clear(set, context, options, done); });
}

void NodeRunner::Read(std::string set, const ClusterReadOptions& options,
                      ReadHandler* handler,
                      std::optional<ElementBounds> bounds) {
  asio::io_context* io = &impl_->io();
  impl_->Post(
      [set = std::move(set), options, handler, io,
       bounds = std::move(bounds)](Node& node) {
        node.Read(set, options, new PostingHandler(io, handler),
                  bounds.has_value() ? &*bounds : nullptr);
      },
      [handler]() { handler->OnDone(Closed()); });
}

void NodeRunner::ContainsAll(
    std::string set, std::vector<std::string> elements,
    const ClusterReadOptions& options,
    std::function<void(absl::StatusOr<Membership>)> done) {
  impl_->PostDone(std::move(done),
                  [set = std::move(set), elements = std::move(elements),
                   options](Node& node, auto& done) mutable {
                    node.ContainsAll(set, std::move(elements), options, done);
                  });
}

void NodeRunner::Range(std::string set, RangeQuery query,
                       const ClusterReadOptions& options,
                       std::function<void(absl::StatusOr<RangeResult>)> done) {
  impl_->PostDone(
      std::move(done),
      [set = std::move(set), query = std::move(query), options](
          Node& node, auto& done) { node.Range(set, query, options, done); });
}

void NodeRunner::Count(std::string set, const ClusterReadOptions& options,
                       std::function<void(absl::StatusOr<uint64_t>)> done) {
  impl_->PostDone(std::move(done),
                  [set = std::move(set), options](Node& node, auto& done) {
                    node.Count(set, options, done);
                  });
}

absl::StatusOr<Delta> NodeRunner::UpdateAndWait(
    std::string set, std::vector<UpdateOp> ops,
    const ClusterWriteOptions& options) {
  if (impl_->OnRunnerThread()) return OwnThread();
  auto promise = std::make_shared<std::promise<absl::StatusOr<Delta>>>();
  std::future<absl::StatusOr<Delta>> future = promise->get_future();
  Update(
      std::move(set), std::move(ops), options,
      [promise](absl::StatusOr<Delta> d) { promise->set_value(std::move(d)); });
  return future.get();
}

absl::StatusOr<Membership> NodeRunner::ContainsAllAndWait(
    std::string set, std::vector<std::string> elements,
    const ClusterReadOptions& options) {
  if (impl_->OnRunnerThread()) return OwnThread();
  auto promise = std::make_shared<std::promise<absl::StatusOr<Membership>>>();
  std::future<absl::StatusOr<Membership>> future = promise->get_future();
  ContainsAll(std::move(set), std::move(elements), options,
              [promise](absl::StatusOr<Membership> m) {
                promise->set_value(std::move(m));
              });
  return future.get();
}

absl::StatusOr<NodeRunner::ReadResult> NodeRunner::ReadAndWait(
    std::string set, const ClusterReadOptions& options) {
  if (impl_->OnRunnerThread()) return OwnThread();
  auto handler = std::make_shared<CollectingHandler>();
  std::future<absl::StatusOr<ReadResult>> future = handler->future();
  // The handler lives until its OnDone, which the future waits for.
  Read(std::move(set), options, handler.get());
  return future.get();
}

absl::Status NodeRunner::InstallRing(const Ring& ring) {
  absl::StatusOr<bool> done =
      impl_->Call<bool>([this, &ring](Node& node) -> absl::StatusOr<bool> {
        BIGSET_RETURN_IF_ERROR(node.InstallRing(ring));
        impl_->transport().SetRingEpoch(ring.epoch());
        return true;
      });
  return done.status();
}

absl::StatusOr<NodeStats> NodeRunner::Stats() {
  return impl_->Call<NodeStats>(
      [](Node& node) -> absl::StatusOr<NodeStats> { return node.stats(); });
}

absl::StatusOr<std::vector<PartitionMove>> NodeRunner::Moving() {
  return impl_->Call<std::vector<PartitionMove>>(
      [](Node& node) -> absl::StatusOr<std::vector<PartitionMove>> {
        return node.Moving();
      });
}

TransportStats NodeRunner::TransportStatistics() const {
  return impl_->transport().Stats();
}

absl::Status NodeRunner::DialPeer(NodeId peer) {
  return impl_
      ->Call<bool>([this, peer](Node&) -> absl::StatusOr<bool> {
        impl_->transport().Dial(peer);
        return true;
      })
      .status();
}

absl::Status NodeRunner::CompactPartition(uint32_t partition) {
  return impl_->CompactPartition(partition);
}

absl::Status NodeRunner::RunOnNode(const std::function<void(Node&)>& fn) {
  return impl_
      ->Call<bool>([&fn](Node& node) -> absl::StatusOr<bool> {
        fn(node);
        return true;
      })
      .status();
}

}  // namespace bigset
