// The command table, dispatch, and the connection commands (PING, AUTH,
// HELLO, CLIENT, COMMAND, CONFIG, SELECT, QUIT).

#include <algorithm>
#include <cctype>
#include <span>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "glob.h"
#include "session.h"

namespace bigset::server {

struct Session::Command {
  std::string_view name;
  // Redis's convention: n > 0 exactly n arguments (the name included),
  // n < 0 at least -n.
  int arity;
  // Allowed before AUTH.
  bool no_auth;
  void (Session::*run)(Args&);
  std::string_view flags;  // For COMMAND: "write", "readonly", "fast"...
  int first_key;
  int last_key;
};

namespace {

using C = Session;

}  // namespace

std::span<const Session::Command> Session::Commands() {
  static const Command kCommands[] = {
      {"ping", -1, false, &C::CmdPing, "fast", 0, 0},
      {"echo", 2, false, &C::CmdEcho, "fast", 0, 0},
      {"quit", -1, true, &C::CmdQuit, "fast", 0, 0},
      {"select", 2, false, &C::CmdSelect, "fast", 0, 0},
      {"auth", -2, true, &C::CmdAuth, "fast", 0, 0},
      {"hello", -1, true, &C::CmdHello, "fast", 0, 0},
      {"client", -2, false, &C::CmdClient, "admin", 0, 0},
      {"command", -1, false, &C::CmdCommand, "loading", 0, 0},
      {"config", -2, false, &C::CmdConfig, "admin", 0, 0},
      {"info", -1, false, &C::CmdInfo, "loading", 0, 0},
      {"sadd", -3, false, &C::CmdSadd, "write", 1, 1},
      {"srem", -3, false, &C::CmdSrem, "write", 1, 1},
      {"sismember", 3, false, &C::CmdSismember, "readonly", 1, 1},
      {"smismember", -3, false, &C::CmdSmismember, "readonly", 1, 1},
      {"scard", 2, false, &C::CmdScard, "readonly", 1, 1},
      {"smembers", 2, false, &C::CmdSmembers, "readonly", 1, 1},
      {"sscan", -3, false, &C::CmdSscan, "readonly", 1, 1},
      {"sinter", -2, false, &C::CmdSinter, "readonly", 1, -1},
      {"sunion", -2, false, &C::CmdSunion, "readonly", 1, -1},
      {"sdiff", -2, false, &C::CmdSdiff, "readonly", 1, -1},
      {"sintercard", -3, false, &C::CmdSintercard, "readonly", 2, 2},
      {"sinterstore", -3, false, &C::CmdSinterstore, "write", 1, -1},
      {"sunionstore", -3, false, &C::CmdSunionstore, "write", 1, -1},
      {"sdiffstore", -3, false, &C::CmdSdiffstore, "write", 1, -1},
      {"smove", 4, false, &C::CmdSmove, "write", 1, 2},
      {"spop", -2, false, &C::CmdSpop, "write", 1, 1},
      {"srandmember", -2, false, &C::CmdSrandmember, "readonly", 1, 1},
      {"del", -2, false, &C::CmdDel, "write", 1, -1},
      {"dbsize", 1, false, &C::CmdDbsize, "readonly", 0, 0},
      {"keys", 2, false, &C::CmdKeys, "readonly", 0, 0},
      {"scan", -2, false, &C::CmdScan, "readonly", 0, 0},
      {"randomkey", 1, false, &C::CmdRandomkey, "readonly", 0, 0},
      {"flushdb", -1, false, &C::CmdFlushall, "write", 0, 0},
      {"flushall", -1, false, &C::CmdFlushall, "write", 0, 0},
      {"function", -2, false, &C::CmdFunction, "admin", 0, 0},
      {"bigset.localsets", -2, false, &C::CmdLocalSets, "admin", 0, 0},
      {"bigset.spop", -2, false, &C::CmdBigsetSpop, "write", 1, 1},
      {"unlink", -2, false, &C::CmdDel, "write", 1, -1},
      {"exists", -2, false, &C::CmdExists, "readonly", 1, -1},
      {"type", 2, false, &C::CmdType, "readonly", 1, 1},
      {"object", -2, false, &C::CmdObject, "readonly", 2, 2},
      {"bigset.range", -4, false, &C::CmdRange, "readonly", 1, 1},
      {"bigset.prefix", -3, false, &C::CmdPrefix, "readonly", 1, 1},
      {"bigset.context", 3, false, &C::CmdContext, "readonly", 1, 1},
      {"bigset.add", -3, false, &C::CmdBigsetAdd, "write", 1, 1},
      {"bigset.remove", 5, false, &C::CmdBigsetRemove, "write", 1, 1},
      {"bigset.quorum", -1, false, &C::CmdQuorum, "fast", 0, 0},
      {"bigset.stats", 1, false, &C::CmdStats, "admin", 0, 0},
      {"bigset.verify", 1, false, &C::CmdVerify, "admin", 0, 0},
      {"bigset.cluster", -2, false, &C::CmdCluster, "admin", 0, 0},
  };
  return kCommands;
}

const Session::Command* Session::FindCommand(std::string_view name) {
  for (const Command& c : Commands()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// "'a' 'b' " for "unknown command" errors, as Redis writes it (bounded).
std::string ArgsPreview(const Session::Args& args) {
  std::string out;
  for (size_t i = 1; i < args.size() && out.size() < 128; ++i) {
    absl::StrAppend(&out, "'", args[i].substr(0, 64), "' ");
  }
  return out;
}

// Redis's rule for client names: printable, no spaces.
bool ValidClientName(std::string_view name) {
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return c >= '!' && c <= '~'; });
}

// The time does not depend on where the first difference is.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]);
  }
  return diff == 0;
}

}  // namespace

void Session::ReplyError(std::string_view text) {
  RespWriter w = Out();
  WriteError(w, text);
}

void Session::ReplyStatus(const absl::Status& status, bool write) {
  RespWriter w = Out();
  WriteStatus(w, status, write);
}

void Session::WriteError(RespWriter& w, std::string_view text) {
  ctx_->stats.error_replies.fetch_add(1, std::memory_order_relaxed);
  w.Error(text);
}

void Session::WriteStatus(RespWriter& w, const absl::Status& status,
                          bool write) {
  ctx_->stats.cluster_errors.fetch_add(1, std::memory_order_relaxed);
  std::string what(status.message());
  if (absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status)) {
    WriteError(
        w, absl::StrCat(write ? "NOREPLICAS Not enough good replicas to write: "
                              : "TRYAGAIN Not enough replicas answered: ",
                        absl::StatusCodeToString(status.code()), ": ", what));
  } else {
    WriteError(w, absl::StrCat("ERR ", absl::StatusCodeToString(status.code()),
                               ": ", what));
  }
}

size_t Session::ArgBytes(const Args& args) {
  size_t bytes = 0;
  for (const std::string& a : args) bytes += a.size() + sizeof(std::string);
  return bytes;
}

bool Session::JoinsInflight(const Args& args) const {
  if (inflight_.size() >= kMaxInflight || !authenticated_ || args.size() < 3 ||
      args[1] != inflight_set_ ||
      inflight_bytes_ + ArgBytes(args) > kMaxInflightBytes) {
    return false;
  }
  const std::string& name = args[0];
  if (absl::EqualsIgnoreCase(name, "sadd") ||
      absl::EqualsIgnoreCase(name, "srem") ||
      absl::EqualsIgnoreCase(name, "smismember")) {
    return true;
  }
  return args.size() == 3 && (absl::EqualsIgnoreCase(name, "sismember") ||
                              absl::EqualsIgnoreCase(name, "bigset.add"));
}

void Session::RunBatched(SetCommand::Kind kind, std::string set,
                         std::vector<std::string> members, BatchReply shape) {
  const uint64_t seq = inflight_base_ + inflight_.size();
  Pending& pending = inflight_.emplace_back();
  pending.command = running_;
  pending.bytes = set.size() + sizeof(std::string);
  for (const std::string& m : members) {
    pending.bytes += m.size() + sizeof(std::string);
  }
  inflight_bytes_ += pending.bytes;
  inflight_set_ = set;
  std::shared_ptr<Session> self = shared_from_this();
  // The batch runs whatever becomes of the connection (a write that has
  // begun is never dropped); a closed connection only drops the reply.
  ctx_->batcher->Submit(std::move(set), r_, w_,
                        SetCommand{kind, std::move(members)},
                        [self, seq, shape](SetCommandResult result) {
                          if (self->closed_) return;
                          self->CompleteBatched(seq, shape, result);
                        });
  Done();
}

void Session::CompleteBatched(uint64_t seq, BatchReply shape,
                              const SetCommandResult& result) {
  Pending& pending = inflight_[seq - inflight_base_];
  RespWriter w(&pending.reply, protocol_);
  if (!result.status.ok()) {
    if (!pending.command.empty()) {
      ++ctx_->command_stats[std::string(pending.command)].failed_calls;
    }
    WriteStatus(w, result.status, result.write_failed);
  } else if (shape == BatchReply::kCount) {
    w.Integer(result.count);
  } else if (shape == BatchReply::kFlag) {
    w.Integer(!result.present.empty() && result.present[0]);
  } else {
    w.Array(result.present.size());
    for (bool p : result.present) w.Integer(p);
  }
  pending.done = true;
  while (!inflight_.empty() && inflight_.front().done) {
    out_.append(inflight_.front().reply);
    inflight_bytes_ -= inflight_.front().bytes;
    inflight_.pop_front();
    ++inflight_base_;
  }
  // A batch answers many commands at once, several of them this
  // connection's: the replies go out together once the batch's answers are
  // all in (one write, not one per reply).
  if (processing_ || process_posted_) return;
  process_posted_ = true;
  asio::post(*ctx_->io, [self = shared_from_this()]() {
    self->process_posted_ = false;
    if (!self->closed_) self->Process();
  });
}

ClusterWriteOptions Session::WriteOptions() const {
  ClusterWriteOptions o;
  o.w = w_;
  o.timeout_micros = ctx_->config->timeout_micros;
  return o;
}

ClusterReadOptions Session::ReadOptions() const {
  ClusterReadOptions o;
  o.r = r_;
  o.timeout_micros = ctx_->config->timeout_micros;
  o.query_hedge_micros = ctx_->config->query_hedge_micros;
  return o;
}

bool Session::Authenticate(std::string_view user, std::string_view password) {
  const bool ok = user == "default" &&
                  ConstantTimeEquals(password, ctx_->config->requirepass);
  if (!ok) {
    ctx_->stats.auth_failures.fetch_add(1, std::memory_order_relaxed);
    ctx_->log->Info(
        absl::StrCat("client ", id_, " (", peer_, "): AUTH failed"));
  }
  return ok;
}

void Session::Execute(Args args) {
  const std::string name = Lower(args[0]);
  const Command* cmd = FindCommand(name);
  if (cmd == nullptr || name.empty()) {
    ctx_->stats.unknown_commands.fetch_add(1, std::memory_order_relaxed);
    ReplyError(
        absl::StrCat("ERR unknown command '", args[0].substr(0, 128),
                     "', with args beginning with: ", ArgsPreview(args)));
    Done();
    return;
  }
  if (!authenticated_ && !cmd->no_auth) {
    ++ctx_->command_stats[std::string(cmd->name)].rejected_calls;
    ctx_->stats.noauth_refusals.fetch_add(1, std::memory_order_relaxed);
    ReplyError("NOAUTH Authentication required.");
    Done();
    return;
  }
  const int n = static_cast<int>(std::min<size_t>(args.size(), 1 << 30));
  if ((cmd->arity > 0 && n != cmd->arity) ||
      (cmd->arity < 0 && n < -cmd->arity)) {
    ++ctx_->command_stats[std::string(cmd->name)].rejected_calls;
    ctx_->stats.wrong_arity.fetch_add(1, std::memory_order_relaxed);
    ReplyError(
        absl::StrCat("ERR wrong number of arguments for '", name, "' command"));
    Done();
    return;
  }
  running_ = cmd->name;
  running_since_ = std::chrono::steady_clock::now();
  running_errors_ = ctx_->stats.error_replies.load(std::memory_order_relaxed);
  (this->*(cmd->run))(args);
}

void Session::CountCommand() {
  if (running_.empty()) return;
  CommandStats& st = ctx_->command_stats[std::string(running_)];
  ++st.calls;
  st.usec += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::steady_clock::now() - running_since_)
          .count());
  if (ctx_->stats.error_replies.load(std::memory_order_relaxed) !=
      running_errors_) {
    ++st.failed_calls;
  }
  running_ = {};
}

void Session::CmdPing(Args& a) {
  if (a.size() > 2) {
    ReplyError("ERR wrong number of arguments for 'ping' command");
  } else if (a.size() == 2) {
    Out().Bulk(a[1]);
  } else {
    Out().Simple("PONG");
  }
  Done();
}

void Session::CmdEcho(Args& a) {
  Out().Bulk(a[1]);
  Done();
}

void Session::CmdQuit(Args&) {
  Out().Simple("OK");
  closing_ = true;
  Done();
}

void Session::CmdSelect(Args& a) {
  int64_t db = 0;
  if (!absl::SimpleAtoi(a[1], &db)) {
    ReplyError("ERR value is not an integer or out of range");
  } else if (db != 0) {
    ReplyError("ERR DB index is out of range");
  } else {
    Out().Simple("OK");
  }
  Done();
}

void Session::CmdAuth(Args& a) {
  if (a.size() > 3) {
    ReplyError("ERR syntax error");
  } else if (ctx_->config->requirepass.empty()) {
    ReplyError(
        "ERR AUTH <password> called without any password configured for the "
        "default user. Are you sure your configuration is correct?");
  } else if (Authenticate(a.size() == 3 ? a[1] : "default", a.back())) {
    authenticated_ = true;
    Out().Simple("OK");
  } else {
    ReplyError("WRONGPASS invalid username-password pair or user is disabled.");
  }
  Done();
}

void Session::CmdHello(Args& a) {
  int version = protocol_;
  size_t i = 1;
  if (a.size() > 1) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(a[1], &v)) {
      ReplyError("ERR Protocol version is not an integer or out of range");
      Done();
      return;
    }
    if (v != 2 && v != 3) {
      ReplyError("NOPROTO unsupported protocol version");
      Done();
      return;
    }
    version = static_cast<int>(v);
    i = 2;
  }
  std::string new_name;
  bool set_name = false;
  for (; i < a.size(); ++i) {
    const std::string opt = Lower(a[i]);
    if (opt == "auth" && i + 2 < a.size()) {
      if (ctx_->config->requirepass.empty() ||
          !Authenticate(a[i + 1], a[i + 2])) {
        ReplyError(
            "WRONGPASS invalid username-password pair or user is disabled.");
        Done();
        return;
      }
      authenticated_ = true;
      i += 2;
    } else if (opt == "setname" && i + 1 < a.size()) {
      new_name = a[++i];
      set_name = true;
      if (!ValidClientName(new_name)) {
        ReplyError(
            "ERR Client names cannot contain spaces, newlines or special "
            "characters.");
        Done();
        return;
      }
    } else {
      ReplyError(absl::StrCat("ERR Syntax error in HELLO option '",
                              a[i].substr(0, 64), "'"));
      Done();
      return;
    }
  }
  if (!authenticated_) {
    ctx_->stats.noauth_refusals.fetch_add(1, std::memory_order_relaxed);
    ReplyError(
        "NOAUTH HELLO must be called with the client already authenticated, "
        "otherwise the HELLO <proto> AUTH <user> <pass> option can be used to "
        "authenticate the client and select the RESP protocol version at the "
        "same time");
    Done();
    return;
  }
  if (set_name) name_ = new_name;
  protocol_ = version;
  RespWriter w = Out();
  w.Map(7);
  w.Bulk("server");
  w.Bulk("redis");
  w.Bulk("version");
  w.Bulk("7.0.0");
  w.Bulk("proto");
  w.Integer(protocol_);
  w.Bulk("id");
  w.Integer(static_cast<int64_t>(id_));
  w.Bulk("mode");
  w.Bulk("standalone");
  w.Bulk("role");
  w.Bulk("master");
  w.Bulk("modules");
  w.Array(0);
  Done();
}

void Session::CmdClient(Args& a) {
  const std::string sub = Lower(a[1]);
  RespWriter w = Out();
  if (sub == "setname" && a.size() == 3) {
    if (!ValidClientName(a[2])) {
      ReplyError(
          "ERR Client names cannot contain spaces, newlines or special "
          "characters.");
    } else {
      name_ = a[2];
      w.Simple("OK");
    }
  } else if (sub == "getname" && a.size() == 2) {
    if (name_.empty()) {
      w.Null();
    } else {
      w.Bulk(name_);
    }
  } else if (sub == "id" && a.size() == 2) {
    w.Integer(static_cast<int64_t>(id_));
  } else if ((sub == "info" && a.size() == 2) ||
             (sub == "list" && a.size() == 2)) {
    std::string text;
    auto line = [&](const Session& s) {
      absl::StrAppend(&text, "id=", s.id(), " addr=", s.peer(),
                      " name=", s.name(), " db=0 resp=", s.protocol_, "\n");
    };
    if (sub == "info") {
      line(*this);
    } else {
      for (const auto& [sid, weak] : ctx_->sessions) {
        if (std::shared_ptr<Session> s = weak.lock()) line(*s);
      }
    }
    w.Bulk(text);
  } else if ((sub == "setinfo" && a.size() == 4) ||
             (sub == "no-evict" && a.size() == 3) ||
             (sub == "no-touch" && a.size() == 3) ||
             (sub == "reply" && a.size() == 3 && Lower(a[2]) == "on")) {
    w.Simple("OK");
  } else {
    ReplyError(absl::StrCat(
        "ERR unknown subcommand or wrong number of arguments for '",
        a[1].substr(0, 64), "'. Try CLIENT HELP."));
  }
  Done();
}

void Session::CmdCommand(Args& a) {
  const std::span<const Command> all = Commands();
  RespWriter w = Out();
  auto info = [&](const Command& c) {
    // Redis 7's ten fields: name, arity, flags, first key, last key, step,
    // ACL categories, tips, key specs, subcommands.
    w.Array(10);
    w.Bulk(c.name);
    w.Integer(c.arity);
    w.Set(1);
    w.Simple(c.flags);
    w.Integer(c.first_key);
    w.Integer(c.last_key);
    w.Integer(c.first_key == 0 ? 0 : 1);
    w.Set(0);
    w.Set(0);
    w.Array(0);
    w.Array(0);
  };
  const std::string sub = a.size() > 1 ? Lower(a[1]) : "";
  if (a.size() == 1) {
    w.Array(all.size());
    for (const Command& c : all) info(c);
  } else if (sub == "count" && a.size() == 2) {
    w.Integer(static_cast<int64_t>(all.size()));
  } else if (sub == "info") {
    w.Array(a.size() - 2);
    for (size_t i = 2; i < a.size(); ++i) {
      const Command* c = FindCommand(Lower(a[i]));
      if (c == nullptr || a[i].empty()) {
        w.Null();
      } else {
        info(*c);
      }
    }
  } else if (sub == "docs") {
    // No documentation: clients (redis-cli) fall back to their own hints.
    w.Map(0);
  } else if (sub == "list" && a.size() == 2) {
    w.Array(all.size());
    for (const Command& c : all) w.Bulk(c.name);
  } else {
    ReplyError(absl::StrCat("ERR unknown subcommand '", a[1].substr(0, 64),
                            "'. Try COMMAND HELP."));
  }
  Done();
}

void Session::CmdFunction(Args& a) {
  // No functions: FUNCTION FLUSH has nothing to do (test harnesses send
  // it), FUNCTION LIST lists nothing.
  const std::string sub = Lower(a[1]);
  if (sub == "flush" && a.size() <= 3) {
    Out().Simple("OK");
  } else if (sub == "list") {
    Out().Array(0);
  } else {
    ReplyError("ERR FUNCTION is not supported: bigsetd has no scripting");
  }
  Done();
}

void Session::CmdConfig(Args& a) {
  const std::string sub = Lower(a[1]);
  if (sub == "set" && a.size() >= 4 && a.size() % 2 == 0) {
    // Redis's encoding thresholds and snapshot schedule are accepted and
    // shown by CONFIG GET, and change nothing: bigset has one encoding,
    // and every write is durable in LevelDB. Clients and test harnesses
    // set them; anything else is configured at start.
    for (size_t i = 2; i < a.size(); i += 2) {
      if (!ctx_->noop_config.contains(Lower(a[i]))) {
        ReplyError(absl::StrCat("ERR CONFIG SET ", a[i].substr(0, 64),
                                " is not supported: bigsetd is configured "
                                "at start"));
        Done();
        return;
      }
    }
    for (size_t i = 2; i < a.size(); i += 2) {
      ctx_->noop_config[Lower(a[i])] = a[i + 1];
    }
    Out().Simple("OK");
    Done();
    return;
  }
  if (sub == "resetstat" && a.size() == 2) {
    Out().Simple("OK");
    Done();
    return;
  }
  if (sub != "get" || a.size() < 3) {
    ReplyError(
        absl::StrCat("ERR CONFIG ", a[1].substr(0, 64),
                     " is not supported: bigsetd is configured at start"));
    Done();
    return;
  }
  const DaemonConfig& c = *ctx_->config;
  const std::pair<std::string, std::string> known[] = {
      {"appendonly", "no"},
      {"maxclients", absl::StrCat(c.max_clients)},
      {"port", absl::StrCat(ctx_->port)},
      {"bind", c.listen.host},
      {"databases", "1"},
      {"proto-max-bulk-len", absl::StrCat(c.limits.max_bulk_bytes)},
      {"client-query-buffer-limit", absl::StrCat(c.max_query_buffer_bytes)},
  };
  std::vector<std::pair<std::string, std::string>> all(std::begin(known),
                                                       std::end(known));
  for (const auto& kv : ctx_->noop_config) all.push_back(kv);
  std::vector<const std::pair<std::string, std::string>*> found;
  for (const auto& kv : all) {
    for (size_t i = 2; i < a.size(); ++i) {
      if (GlobMatch(Lower(a[i]), kv.first)) {
        found.push_back(&kv);
        break;
      }
    }
  }
  RespWriter w = Out();
  w.Map(found.size());
  for (const auto* kv : found) {
    w.Bulk(kv->first);
    w.Bulk(kv->second);
  }
  Done();
}

}  // namespace bigset::server
