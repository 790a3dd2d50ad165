#include "cluster_map.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl_compat.h"

namespace bigset::server {
namespace {

constexpr char kMagic[] = "bigsetd-cluster-map 1";
constexpr char kFileName[] = "CLUSTER";

absl::Status Errno(std::string_view what, const std::string& path) {
  return absl::InternalError(
      absl::StrCat(AV(what), " ", path, ": ", strerror(errno)));
}

absl::Status WriteAll(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("write", path);
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

}  // namespace

std::string FormatAddress(const PeerAddress& a) {
  if (a.host.find(':') != std::string::npos) {
    return absl::StrCat("[", a.host, "]:", a.port);
  }
  return absl::StrCat(a.host, ":", a.port);
}

std::string ClusterMap::Encode() const {
  std::string body = absl::StrCat(kMagic, "\n", "ring ",
                                  absl::BytesToHexString(ring.Encode()), "\n");
  for (const auto& [id, a] : nodes) {
    absl::StrAppend(&body, "node ", id, " ", FormatAddress(a.peer), " ",
                    a.client.has_value() ? FormatAddress(*a.client) : "-",
                    "\n");
  }
  absl::StrAppend(&body, "sum ", absl::StrFormat("%016x", StableHash(body)),
                  "\n");
  return body;
}

absl::StatusOr<ClusterMap> ClusterMap::Decode(std::string_view text) {
  auto bad = [](std::string_view why) {
    return absl::DataLossError(absl::StrCat("bad cluster map: ", AV(why)));
  };
  const size_t sum_at = text.rfind("sum ");
  if (sum_at == std::string_view::npos || text.empty() || text.back() != '\n') {
    return bad("no checksum");
  }
  uint64_t sum = 0;
  std::string_view sum_text = text.substr(sum_at + 4);
  sum_text.remove_suffix(1);
  if (sum_text.size() != 16 || !absl::SimpleHexAtoi(AV(sum_text), &sum) ||
      sum != StableHash(text.substr(0, sum_at))) {
    return bad("checksum mismatch");
  }
  std::vector<absl::string_view> lines =
      absl::StrSplit(AV(text.substr(0, sum_at)), '\n', absl::SkipEmpty());
  if (lines.size() < 2 || lines[0] != kMagic) return bad("unknown version");
  if (!absl::StartsWith(lines[1], "ring ")) return bad("no ring");
  const absl::string_view hex = lines[1].substr(5);
  if (hex.size() % 2 != 0 || !std::all_of(hex.begin(), hex.end(), [](char ch) {
        return absl::ascii_isxdigit(ch);
      })) {
    return bad("ring is not hex");
  }
  const std::string ring_bytes = absl::HexStringToBytes(hex);
  absl::StatusOr<Ring> ring = Ring::Decode(ring_bytes);
  if (!ring.ok()) return bad(SV(ring.status().message()));
  ClusterMap map{*ring, {}};
  for (size_t i = 2; i < lines.size(); ++i) {
    std::vector<absl::string_view> w = absl::StrSplit(lines[i], ' ');
    NodeId id = 0;
    if (w.size() != 4 || w[0] != "node" || !absl::SimpleAtoi(w[1], &id) ||
        id == 0) {
      return bad("bad node line");
    }
    absl::StatusOr<PeerAddress> peer = ParsePeerAddress(SV(w[2]));
    if (!peer.ok()) return bad("bad peer address");
    NodeAddresses a{*peer, std::nullopt};
    if (w[3] != "-") {
      absl::StatusOr<PeerAddress> client = ParsePeerAddress(SV(w[3]));
      if (!client.ok()) return bad("bad client address");
      a.client = *client;
    }
    if (!map.nodes.emplace(id, a).second) return bad("node listed twice");
  }
  for (NodeId id : map.ring.nodes()) {
    if (!map.nodes.contains(id)) return bad("a ring node has no address");
  }
  return map;
}

absl::StatusOr<ClusterMap> ClusterMap::Load(const std::string& dir) {
  const std::string path = dir + "/" + kFileName;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (access(path.c_str(), F_OK) != 0) {
      return absl::NotFoundError(absl::StrCat("no ", path));
    }
    return Errno("open", path);
  }
  std::stringstream text;
  text << in.rdbuf();
  return Decode(text.str());
}

absl::Status ClusterMap::Save(const std::string& dir) const {
  const std::string path = dir + "/" + kFileName;
  const std::string tmp = path + ".tmp";
  const int fd =
      open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("open", tmp);
  absl::Status s = WriteAll(fd, Encode(), tmp);
  if (s.ok() && fsync(fd) != 0) s = Errno("fsync", tmp);
  if (close(fd) != 0 && s.ok()) s = Errno("close", tmp);
  if (!s.ok()) return s;
  if (rename(tmp.c_str(), path.c_str()) != 0) return Errno("rename", tmp);
  const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return Errno("open", dir);
  const bool synced = fsync(dfd) == 0;
  close(dfd);
  if (!synced) return Errno("fsync", dir);
  return absl::OkStatus();
}

}  // namespace bigset::server
