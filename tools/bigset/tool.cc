#include "tool.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace bigset::tool {

OpenStore::~OpenStore() {
  if (replica != nullptr) replica->Close().IgnoreError();
  replica.reset();
  store.reset();
}

absl::Status OpenStore::Close() {
  absl::Status s = replica != nullptr ? replica->Close() : absl::OkStatus();
  replica.reset();
  store.reset();
  return s;
}

bool Context::progress() const { return !no_progress && ::isatty(2) == 1; }

namespace {

absl::StatusOr<OpenStore> Open(const Context& ctx, bool read_only) {
  if (ctx.db.empty()) return absl::InvalidArgumentError("--db is required");
  LevelDbStoreOptions so;
  so.read_only = read_only;
  so.create_if_missing = !read_only && ctx.create;
  // A tool reads each block once: a small cache does.
  so.block_cache_bytes = 8 << 20;
  OpenStore open;
  absl::StatusOr<std::unique_ptr<LevelDbStore>> store =
      LevelDbStore::Open(ctx.db, so);
  if (!store.ok()) {
    absl::Status s = store.status();
    if (absl::IsNotFound(s)) {
      return absl::NotFoundError(
          absl::StrCat("no bigset store at ", ctx.db,
                       read_only ? "" : " (give --create to create one)"));
    }
    if (absl::IsDataLoss(s)) {
      return absl::DataLossError(
          absl::StrCat(s.message(), " (run `bigset --db ", ctx.db,
                       " repair` to salvage what is readable)"));
    }
    return s;
  }
  open.store = std::move(*store);
  ReplicaOptions ro;
  ro.keyspace = ctx.keyspace;
  ro.read_only = read_only;
  ro.clock_cache_bytes = 16 << 20;
  absl::StatusOr<std::unique_ptr<Replica>> replica =
      Replica::Open(open.store.get(), ro);
  if (!replica.ok()) return replica.status();
  open.replica = std::move(*replica);
  return open;
}

}  // namespace

absl::StatusOr<OpenStore> Context::OpenForRead() const {
  return Open(*this, true);
}

absl::StatusOr<OpenStore> Context::OpenForWrite() const {
  return Open(*this, false);
}

void Output::Drain() {
  if (!failed_ && !data_.empty() &&
      std::fwrite(data_.data(), 1, data_.size(), stdout) != data_.size()) {
    failed_ = true;
  }
  data_.clear();
}

absl::Status Output::Flush() {
  Drain();
  if (!failed_ && std::fflush(stdout) != 0) failed_ = true;
  if (failed_) {
    return absl::UnavailableError(
        absl::StrCat("writing standard output: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

std::string DotsText(const std::vector<Dot>& dots) {
  std::string out;
  for (Dot d : dots) {
    if (!out.empty()) out.push_back(',');
    out.append(DotToString(d));
  }
  return out;
}

std::string DotsJson(const std::vector<Dot>& dots) {
  std::string out = "[";
  for (Dot d : dots) {
    if (out.size() > 1) out.push_back(',');
    absl::StrAppend(&out, "[", d.actor, ",", d.counter, "]");
  }
  out.push_back(']');
  return out;
}

absl::Status CheckSetExists(const Context& ctx, Replica& replica,
                            std::string_view set) {
  const BytesFormat bytes = ctx.bytes();
  absl::StatusOr<Clock> clock = replica.GetClock(set);
  if (!clock.ok()) return clock.status();
  if (clock->empty()) {
    ctx.answer_not_found = true;
    return absl::NotFoundError(absl::StrCat(
        "no set ", bytes.Text(set), " in keyspace ", replica.keyspace()));
  }
  return absl::OkStatus();
}

absl::Status ForEachLineBatch(
    std::FILE* in, size_t batch,
    const std::function<absl::Status(std::vector<std::string>&)>& fn) {
  std::vector<std::string> lines;
  lines.reserve(batch);
  char* buf = nullptr;
  size_t cap = 0;
  absl::Status s = absl::OkStatus();
  while (true) {
    ssize_t n = ::getline(&buf, &cap, in);
    if (n < 0) break;
    size_t len = static_cast<size_t>(n);
    if (len > 0 && buf[len - 1] == '\n') --len;
    lines.emplace_back(buf, len);
    if (lines.size() == batch) {
      s = fn(lines);
      lines.clear();
      if (!s.ok()) break;
    }
  }
  std::free(buf);
  if (s.ok() && std::ferror(in)) {
    s = absl::UnavailableError(
        absl::StrCat("reading input: ", std::strerror(errno)));
  }
  if (s.ok() && !lines.empty()) s = fn(lines);
  return s;
}

}  // namespace bigset::tool
