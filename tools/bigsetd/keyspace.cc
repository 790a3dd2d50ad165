#include "keyspace.h"

#include <algorithm>
#include <future>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "read_handlers.h"
#include "resp_client.h"

namespace bigset::server {
namespace {

// Starts an asynchronous call with a callback and waits for its value.
template <typename T>
T Await(const std::function<void(std::function<void(T)>)>& start) {
  auto promise = std::make_shared<std::promise<T>>();
  std::future<T> future = promise->get_future();
  start([promise](T value) { promise->set_value(std::move(value)); });
  return future.get();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> LocalSetNames(
    NodeRunner* runner, const std::optional<std::string>& after, size_t limit) {
  std::set<std::string> names;
  absl::Status status;
  absl::Status ran = runner->RunOnNode([&](Node& node) {
    const uint32_t partitions = node.ring().ring_size();
    for (uint32_t p = 0; p < partitions && status.ok(); ++p) {
      Replica* replica = node.LocalReplica(p);
      if (replica == nullptr) continue;
      absl::StatusOr<std::vector<std::string>> some =
          replica->ListSets(after, limit);
      if (!some.ok()) {
        status = some.status();
        return;
      }
      for (std::string& n : *some) {
        names.insert(std::move(n));
        if (limit != 0 && names.size() > limit) names.erase(--names.end());
      }
    }
  });
  if (!ran.ok()) return ran;
  if (!status.ok()) return status;
  return std::vector<std::string>(names.begin(), names.end());
}

std::string EncodeSetNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) absl::StrAppend(&out, n.size(), ":", n);
  return out;
}

absl::StatusOr<std::vector<std::string>> DecodeSetNames(std::string_view text) {
  std::vector<std::string> names;
  while (!text.empty()) {
    const size_t colon = text.find(':');
    uint64_t len = 0;
    if (colon == std::string_view::npos || colon == 0 || colon > 20 ||
        !absl::SimpleAtoi(std::string(text.substr(0, colon)), &len) ||
        len > text.size() - colon - 1) {
      return absl::DataLossError("malformed set names");
    }
    names.emplace_back(text.substr(colon + 1, len));
    text.remove_prefix(colon + 1 + len);
  }
  return names;
}

Keyspace::Keyspace(NodeRunner* runner, std::map<NodeId, NodeAddresses> nodes,
                   NodeId self, std::string password, ClusterReadOptions read,
                   ClusterWriteOptions write)
    : runner_(runner),
      nodes_(std::move(nodes)),
      self_(self),
      password_(std::move(password)),
      read_(read),
      write_(write) {}

absl::StatusOr<Keyspace::Page> Keyspace::Next(
    const std::optional<std::string>& after, size_t limit) {
  limit = std::max<size_t>(limit, 1);
  // Each node's next `limit` names. Past the smallest last name of a full
  // page, some node may hold names the merged page has not seen: the page
  // ends there.
  std::set<std::string> merged;
  std::optional<std::string> cut;
  std::vector<std::pair<NodeId, std::optional<PeerAddress>>> asked = {
      {self_, std::nullopt}};
  for (const auto& [id, addresses] : nodes_) {
    if (id != self_) asked.emplace_back(id, addresses.client);
  }
  for (const auto& [id, client] : asked) {
    absl::StatusOr<std::vector<std::string>> names;
    if (id == self_) {
      names = LocalSetNames(runner_, after, limit);
    } else if (client.has_value()) {
      std::vector<std::string> args = {"BIGSET.LOCALSETS", absl::StrCat(limit)};
      if (after.has_value()) args.push_back(*after);
      if (unreachable_.contains(id)) continue;
      absl::StatusOr<std::string> text = RespCall(
          *client, password_, args,
          static_cast<int>(std::max<uint64_t>(read_.timeout_micros / 1000, 1)));
      if (!text.ok()) {
        // Unreachable (see the header): not asked again in this walk.
        unreachable_.insert(id);
        continue;
      }
      names = DecodeSetNames(*text);
    } else {
      continue;
    }
    if (!names.ok()) return names.status();
    if (names->size() >= limit && !names->empty()) {
      if (!cut.has_value() || names->back() < *cut) cut = names->back();
    }
    for (std::string& n : *names) merged.insert(std::move(n));
  }
  Page page;
  page.more = cut.has_value();
  for (const std::string& n : merged) {
    if (cut.has_value() && n > *cut) break;
    page.last = n;
    absl::StatusOr<uint64_t> count = Count(n);
    if (!count.ok()) return count.status();
    if (*count > 0) page.names.push_back(n);
  }
  return page;
}

absl::Status Keyspace::ForEach(
    const std::function<absl::Status(const std::string&)>& fn) {
  std::optional<std::string> after;
  while (true) {
    absl::StatusOr<Page> page = Next(after, 1000);
    if (!page.ok()) return page.status();
    for (const std::string& n : page->names) {
      absl::Status s = fn(n);
      if (!s.ok()) return s;
    }
    if (!page->more) return absl::OkStatus();
    after = page->last;
  }
}

absl::StatusOr<uint64_t> Keyspace::Count(const std::string& set) {
  return Await<absl::StatusOr<uint64_t>>(
      [&](std::function<void(absl::StatusOr<uint64_t>)> done) {
        runner_->Count(set, read_, std::move(done));
      });
}

absl::StatusOr<bool> Keyspace::Clear(const std::string& set) {
  absl::StatusOr<uint64_t> n = Count(set);
  if (!n.ok()) return n.status();
  if (*n == 0) return false;
  // The clear's context is the clock a read quorum returns: what they hold
  // is removed, an add none of them had seen survives.
  absl::StatusOr<Clock> clock = Await<absl::StatusOr<Clock>>(
      [&](std::function<void(absl::StatusOr<Clock>)> done) {
        runner_->Read(set, read_, new ClockHandler(std::move(done)), Nothing());
      });
  if (!clock.ok()) return clock.status();
  absl::StatusOr<Delta> d = Await<absl::StatusOr<Delta>>(
      [&](std::function<void(absl::StatusOr<Delta>)> done) {
        runner_->Clear(set, std::move(*clock), write_, std::move(done));
      });
  if (!d.ok()) return d.status();
  return true;
}

}  // namespace bigset::server
