// RequestRegistry (lib/cluster/request_registry.h): one map of running
// coordinators by id, looked up by kind; routes of sub-requests; idle
// writes kept for reuse; the order in which a closing node aborts them.

#include "cluster/request_registry.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "cluster/count_coordinator.h"
#include "cluster/query_coordinator.h"
#include "cluster/write_coordinator.h"

namespace bigset::testing {
namespace {

QuorumReadSetup ThreeReplicas() {
  return QuorumReadSetup{.partition = 0,
                         .serving = {1, 2, 3},
                         .places = {0, 1, 2},
                         .self = 1,
                         .now = 0};
}

// Each callback records "<id>:<status code>".
std::string Logged(uint64_t id, const absl::Status& status) {
  return std::to_string(id) + ":" +
         std::string(absl::StatusCodeToString(status.code()));
}

// A count whose callback records what it was told.
std::unique_ptr<CountCoordinator> NewCount(uint64_t id,
                                           std::vector<std::string>* log) {
  ClusterReadOptions options;
  options.r = 2;
  return std::make_unique<CountCoordinator>(
      id, "s", ThreeReplicas(), options,
      [log, id](absl::StatusOr<std::optional<uint64_t>> r) {
        log->push_back(Logged(id, r.status()));
      });
}

std::unique_ptr<QueryCoordinator> NewQuery(uint64_t id,
                                           std::vector<std::string>* log) {
  ClusterReadOptions options;
  options.r = 2;
  return std::make_unique<QueryCoordinator>(
      id, "s", ThreeReplicas(), std::vector<std::string>{"a"}, options,
      [log, id](absl::StatusOr<Membership> r) {
        log->push_back(Logged(id, r.status()));
      });
}

std::unique_ptr<WriteCoordinator> NewWrite(uint64_t id,
                                           std::vector<std::string>* log) {
  auto write = std::make_unique<WriteCoordinator>();
  ClusterWriteOptions options;
  const std::vector<NodeId> serving = {1, 2, 3};
  const std::vector<uint32_t> places = {0, 1, 2};
  write->Reset(
      id, "s",
      WriteCoordinator::Where{
          .partition = 0, .serving = serving, .places = places, .self = 1},
      {UpdateOp::Add("e")}, std::nullopt, options,
      [log, id](absl::StatusOr<Delta> r) {
        log->push_back(Logged(id, r.status()));
      });
  return write;
}

TEST_CASE("request registry: a reply finds only a coordinator of its kind") {
  std::vector<std::string> log;
  RequestRegistry registry;
  CountCoordinator* count = registry.Add(NewCount(7, &log));
  QueryCoordinator* query = registry.Add(NewQuery(8, &log));
  CHECK(registry.Find<CountCoordinator>(7) == count);
  CHECK(registry.Find<QueryCoordinator>(8) == query);
  // The same ids under another kind: nothing (a query reply that names a
  // count's id must not reach it).
  CHECK(registry.Find<QueryCoordinator>(7) == nullptr);
  CHECK(registry.Find<CountCoordinator>(8) == nullptr);
  CHECK(registry.Find<WriteCoordinator>(7) == nullptr);
  CHECK(registry.Find<CountCoordinator>(9) == nullptr);
  CHECK(registry.running(RequestKind::kCount) == 1);
  CHECK(registry.running(RequestKind::kQuery) == 1);
  CHECK(registry.running(RequestKind::kWrite) == 0);
  registry.Finish(7);
  CHECK(registry.Find<CountCoordinator>(7) == nullptr);
  CHECK(registry.running(RequestKind::kCount) == 0);
  registry.Finish(7);  // Twice: nothing.
  CHECK(registry.running(RequestKind::kQuery) == 1);
  CHECK(log.empty());  // Finishing answers nobody: the coordinator did.
}

TEST_CASE(
    "request registry: a sub-request's id reaches the request it is routed "
    "to, and only while routed") {
  std::vector<std::string> log;
  RequestRegistry registry;
  WriteCoordinator* write = registry.Add(NewWrite(10, &log));
  registry.Route(11, 10);
  CHECK(registry.FindOwnOrRouted<WriteCoordinator>(10) == write);
  CHECK(registry.FindOwnOrRouted<WriteCoordinator>(11) == write);
  CHECK(registry.Find<WriteCoordinator>(11) == nullptr);
  CHECK(registry.FindByRoute<WriteCoordinator>(10) == nullptr);
  CHECK(registry.FindByRoute<CountCoordinator>(11) == nullptr);
  CHECK(registry.routes(RequestKind::kWrite) == 1);
  CHECK(registry.routes(RequestKind::kRead) == 0);
  registry.Unroute(11);
  CHECK(registry.FindOwnOrRouted<WriteCoordinator>(11) == nullptr);
  CHECK(registry.routes(RequestKind::kWrite) == 0);
  // A route left behind by a finished request leads nowhere.
  registry.Route(12, 10);
  registry.Finish(10);
  CHECK(registry.FindOwnOrRouted<WriteCoordinator>(12) == nullptr);
  CHECK(registry.stale_routes() == 1);
}

TEST_CASE("request registry: finished writes are kept idle, at most 16") {
  std::vector<std::string> log;
  RequestRegistry registry;
  std::vector<WriteCoordinator*> made;
  for (uint64_t id = 1; id <= 20; ++id) {
    made.push_back(registry.Add(NewWrite(id, &log)));
  }
  CHECK(registry.running(RequestKind::kWrite) == 20);
  CHECK(registry.Ids(RequestKind::kWrite).size() == 20);
  for (uint64_t id = 1; id <= 20; ++id) registry.Finish(id);
  CHECK(registry.running(RequestKind::kWrite) == 0);
  CHECK(registry.idle_writes() == 16);
  // Reused, most recently finished first.
  std::unique_ptr<WriteCoordinator> reused = registry.TakeIdleWrite();
  REQUIRE(reused != nullptr);
  CHECK(std::find(made.begin(), made.end(), reused.get()) != made.end());
  CHECK(registry.idle_writes() == 15);
  // A finished count is not kept.
  registry.Add(NewCount(30, &log));
  registry.Finish(30);
  CHECK(registry.idle_writes() == 15);
}

TEST_CASE(
    "request registry: a closing node aborts every kind in the order the "
    "requests started, then holds nothing") {
  std::vector<std::string> log;
  RequestRegistry registry;
  registry.Add(NewQuery(40, &log));
  registry.Add(NewWrite(3, &log));
  registry.Add(NewCount(25, &log));
  registry.Add(NewWrite(17, &log));
  registry.Route(41, 40);
  registry.Finish(17);  // Idle now: not aborted.
  registry.AbortAll(absl::UnavailableError("closing"));
  CHECK(log == std::vector<std::string>{"3:UNAVAILABLE", "25:UNAVAILABLE",
                                        "40:UNAVAILABLE"});
  for (RequestKind kind : {RequestKind::kWrite, RequestKind::kRead,
                           RequestKind::kQuery, RequestKind::kCount}) {
    CHECK(registry.running(kind) == 0);
    CHECK(registry.Ids(kind).empty());
  }
  CHECK(registry.idle_writes() == 0);
  CHECK(registry.stale_routes() == 0);
  CHECK(registry.FindByRoute<QueryCoordinator>(41) == nullptr);
}

}  // namespace
}  // namespace bigset::testing
