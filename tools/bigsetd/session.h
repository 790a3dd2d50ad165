// Session: one client connection: reads its bytes, parses commands (RESP
// or inline), runs them in arrival order (a pipeline's replies come back in
// order, and a command sees every earlier command of its connection
// applied), and writes the replies.
//
// The set commands that SetBatcher groups (SADD, SREM, SISMEMBER,
// SMISMEMBER, BIGSET.ADD without a context) do not wait for each other: a
// pipeline of them on one set is handed to the batcher as it is parsed (up
// to kMaxInflight commands and kMaxInflightBytes of arguments at a time),
// and their replies are written in order as they come. Every other command, and
// a batched command on another set, waits until the commands before it have
// answered, and then runs alone.
//
// A client that hangs up (end of stream, or a reset) has every complete
// command it sent run, in order, as Redis does with what it has read;
// replies that can no longer be written are discarded, and a trailing
// partial command is dropped.
//
// Memory per connection is bounded: unparsed input by
// DaemonConfig::max_query_buffer_bytes (past it the connection is closed),
// queued replies by output_pause_bytes (past it no further command runs
// until the client has read them), and a reply's size by the command
// (SMEMBERS refuses sets over smembers_max; SSCAN pages).
//
// Thread-safety: not thread-safe; lives on the server's thread. Owned by
// shared pointers: the socket's handlers and the node's pending callbacks
// keep it alive.

#ifndef BIGSET_TOOLS_BIGSETD_SESSION_H_
#define BIGSET_TOOLS_BIGSETD_SESSION_H_

#include <array>
#include <asio.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client_stream.h"
#include "keyspace.h"
#include "resp_parser.h"
#include "resp_writer.h"
#include "server_context.h"
#include "set_batcher.h"
#include "set_merge.h"

namespace bigset::server {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(ServerContext* ctx, asio::ip::tcp::socket socket, uint64_t id,
          asio::ssl::context* tls);
  ~Session();

  void Start();
  // Closes the connection now (server shutdown).
  void Close();

  uint64_t id() const { return id_; }
  const std::string& name() const { return name_; }
  const std::string& peer() const { return peer_; }

  // Sends "-ERR max number of clients reached" and closes.
  void Refuse();

  // One command and its arguments; `args[0]` is the command name.
  using Args = std::vector<std::string>;

  // Batched commands one connection may have running at once, and the
  // bytes of their arguments (a command over it runs alone; while these
  // are reached the connection reads no further than its parser's pause).
  static constexpr size_t kMaxInflight = 1024;
  static constexpr size_t kMaxInflightBytes = 64 << 20;

 private:
  struct Command;
  static std::span<const Command> Commands();
  static const Command* FindCommand(std::string_view lower_name);

  // I/O (session.cc).
  void Handshake();
  void MaybeRead();
  void OnRead(const asio::error_code& ec, size_t n);
  void Process();
  void Flush();
  void CloseNow();

  // Commands (commands.cc, keys_commands.cc, bigset_commands.cc).
  void Execute(Args args);
  // Whether `args` is a batched command that can run now, beside the
  // batched commands this connection has running (same set, a valid
  // command: its replies then cannot come out of order).
  bool JoinsInflight(const Args& args) const;
  // How a batched command's result is written.
  enum class BatchReply { kCount, kFlag, kFlags };
  // Hands a command to the batcher; its reply takes the next place among
  // the connection's pending replies. Ends the command (Done): the next one
  // may run.
  void RunBatched(SetCommand::Kind kind, std::string set,
                  std::vector<std::string> members, BatchReply shape);
  // The bytes of a command's arguments.
  static size_t ArgBytes(const Args& args);
  // A batched command's result came: writes it in its place, and every
  // reply now complete at the head of the queue to the output.
  void CompleteBatched(uint64_t seq, BatchReply shape,
                       const SetCommandResult& result);
  // Ends the running command (its reply written): the next one may run.
  void Done();
  // Adds the running command to INFO commandstats (Done).
  void CountCommand();
  RespWriter Out() { return RespWriter(&out_, protocol_); }
  void ReplyError(std::string_view text);
  void ReplyStatus(const absl::Status& status, bool write);
  // The same, into `w` (a batched command's place).
  void WriteError(RespWriter& w, std::string_view text);
  void WriteStatus(RespWriter& w, const absl::Status& status, bool write);
  // Wraps a node callback so that it runs on the server's thread, and not
  // at all once the session is closed (the command is then dropped). A
  // client's hang-up does not close it before its commands ran; the server
  // closing it (shutdown, a query buffer overflow) does.
  template <typename T>
  std::function<void(T)> Later(std::function<void(T)> fn);
  // The same, but it runs even after the session closed: for the steps of
  // a write command that has begun (a read that decides its write), so that
  // a session closed meanwhile does not drop the write. Replies written
  // then are discarded.
  template <typename T>
  std::function<void(T)> Continue(std::function<void(T)> fn);
  // What both share: `fn` posted to the server's thread, with the session
  // kept alive until it ran.
  template <typename T>
  std::function<void(T)> Post(std::function<void(T)> fn, bool even_if_closed);
  ClusterWriteOptions WriteOptions() const;
  ClusterReadOptions ReadOptions() const;

  void CmdPing(Args& a);
  void CmdEcho(Args& a);
  void CmdQuit(Args& a);
  void CmdSelect(Args& a);
  void CmdAuth(Args& a);
  void CmdHello(Args& a);
  void CmdClient(Args& a);
  void CmdCommand(Args& a);
  void CmdConfig(Args& a);
  void CmdInfo(Args& a);
  void CmdSadd(Args& a);
  void CmdSrem(Args& a);
  void CmdSismember(Args& a);
  void CmdSmismember(Args& a);
  void CmdScard(Args& a);
  void CmdSmembers(Args& a);
  void CmdSscan(Args& a);
  void CmdSinter(Args& a);
  void CmdSunion(Args& a);
  void CmdSdiff(Args& a);
  void CmdSintercard(Args& a);
  void CmdSinterstore(Args& a);
  void CmdSunionstore(Args& a);
  void CmdSdiffstore(Args& a);
  void CmdSmove(Args& a);
  void CmdSpop(Args& a);
  void CmdSrandmember(Args& a);
  void CmdBigsetSpop(Args& a);
  void CmdDel(Args& a);
  void CmdDbsize(Args& a);
  void CmdKeys(Args& a);
  void CmdScan(Args& a);
  void CmdRandomkey(Args& a);
  void CmdFlushall(Args& a);
  void CmdFunction(Args& a);
  void CmdLocalSets(Args& a);
  void CmdExists(Args& a);
  void CmdType(Args& a);
  void CmdObject(Args& a);
  void CmdRange(Args& a);
  void CmdPrefix(Args& a);
  void CmdContext(Args& a);
  void CmdBigsetAdd(Args& a);
  void CmdBigsetRemove(Args& a);
  void CmdQuorum(Args& a);
  void CmdStats(Args& a);
  void CmdVerify(Args& a);
  void CmdCluster(Args& a);

  // A page of elements within `bounds` after where `cursor` (0: the
  // start) left off, filtered by `match` (if any), answered as
  // [cursor, [elements]]; an unknown cursor is an error.
  void ScanPage(std::string set, ElementBounds bounds, uint64_t cursor,
                size_t count, std::string match);
  // Set algebra (algebra_commands.cc). Range reads for a SetMerge, on
  // this session's thread.
  SetMerge::Fetch MergeFetch();
  // Replies the merge's result as a set (bounded by --smembers-max).
  void ReplyMerged(SetOp op, std::vector<std::string> sets);
  // Replaces `dest` with the merge's result; replies its size.
  struct Store;
  void StoreMerged(SetOp op, std::string dest, Args sources);
  void StoreRun(std::shared_ptr<Store> store);
  // Clears the destination before its first adds (once), then adds.
  void StoreWrite(std::shared_ptr<Store> store, std::vector<std::string> adds,
                  std::function<void(absl::Status)> done);
  // Writes a buffered result from `from` on, a batch at a time.
  void StoreHeld(std::shared_ptr<Store> store, size_t from,
                 std::function<void(absl::Status)> done);
  // SPOP, SRANDMEMBER.
  struct Draw;
  void RunDraw(std::shared_ptr<Draw> draw);
  // Draws `k` distinct members of `set` uniformly with their dots (fewer
  // if it has fewer), on the server's thread: from one full read for a
  // small set or a large share of one, else through the set's skeleton
  // (Sampler), built or rebuilt as needed.
  using DrawDone =
      std::function<void(absl::StatusOr<std::vector<ElementDots>>)>;
  static void DrawMembers(ServerContext* ctx, const std::string& set, size_t k,
                          const ClusterReadOptions& ro, DrawDone done);
  // An SPOP on this node: waits for its set's next batch of pops.
  void RunPop(std::shared_ptr<Draw> draw);
  void ReplyPopped(const Draw& draw, const std::vector<std::string>& members);
  // The batches of SPOPs of one set: one read (a sample of all they want)
  // and one write (the remove of exactly the dots drawn) per batch, one
  // batch of a set at a time (SetLocks, shared with SMOVE).
  static void QueuePop(ServerContext* ctx, const std::string& set,
                       PendingPop pop);
  static void RunPops(ServerContext* ctx, const std::string& set);
  // Writes `ops` from `from` on, 1,000 at a time, one after the other.
  static void RemoveDrawn(ServerContext* ctx, const std::string& set,
                          const ClusterWriteOptions& wo,
                          std::vector<UpdateOp> ops, size_t from,
                          std::function<void(absl::Status)> done);
  // The node SPOPs of `set` run on, if not this one (0: this one).
  NodeId SpopOwner(const std::string& set);
  // Runs an SPOP on `owner` (BIGSET.SPOP) and replies what it popped.
  void PassSpopOn(NodeId owner, std::shared_ptr<Draw> draw);
  // ReplyStatus, then Done.
  void WriteStatusReply(const absl::Status& status, bool write);
  // The keyspace as this session reads and writes it (its quorums).
  std::shared_ptr<Keyspace> MakeKeyspace();
  // Runs `work` on `worker` (the keyspace's if null); what it returns runs
  // on the server's thread (the reply), even if the session closed
  // meanwhile.
  void OnWorker(std::function<std::function<void()>()> work,
                Worker* worker = nullptr);
  // Walks keys one request at a time (DEL, EXISTS, TYPE).
  struct KeysWalk;
  void CountNext(std::shared_ptr<KeysWalk> walk);
  void DelNext(std::shared_ptr<KeysWalk> walk);
  // Counts each of `keys` in turn; `done` gets the counts.
  void CountKeys(
      std::vector<std::string> keys,
      std::function<void(absl::StatusOr<std::vector<uint64_t>>)> done);
  // Clears `set` as a read quorum sees it: true if it held elements.
  void ClearSet(std::string set,
                std::function<void(absl::StatusOr<bool>)> done);
  bool Authenticate(std::string_view user, std::string_view password);
  // The dots of `given` a read quorum holds for `element` now, and whether
  // it holds the element at all (BIGSET.ADD / BIGSET.REMOVE with a context).
  struct HeldDots {
    bool present = false;
    std::vector<Dot> dots;
  };
  void HeldContext(std::string set, std::string element, std::vector<Dot> given,
                   std::function<void(absl::StatusOr<HeldDots>)> done);

  ServerContext* ctx_;
  ClientStream stream_;
  asio::steady_timer handshake_timer_;
  const uint64_t id_;
  std::string peer_;
  std::array<char, 16 << 10> read_buf_;
  RespParser parser_;
  std::string out_;
  std::string writing_;
  bool reading_ = false;
  bool write_active_ = false;
  bool busy_ = false;            // A command runs.
  bool processing_ = false;      // Inside Process's loop.
  bool process_posted_ = false;  // A Process is posted (CompleteBatched).
  bool closing_ = false;         // Close once the output is written.
  bool closed_ = false;
  // The client sent its last byte (end of stream or a broken connection):
  // the complete commands already received still run, then the session
  // closes.
  bool input_ended_ = false;
  bool output_failed_ = false;  // Writes fail: replies are discarded.
  bool handshake_done_ = false;
  // A parsed command that waits for the commands before it.
  std::optional<Args> held_;
  // The input was not RESP: answered (and the connection closed) once the
  // commands before it have answered.
  std::optional<absl::Status> parse_error_;
  // Batched commands running, oldest first: their replies, in order, once
  // written. `inflight_base_` numbers the first; all are on `inflight_set_`.
  struct Pending {
    std::string reply;
    bool done = false;
    size_t bytes = 0;          // Of the command's arguments.
    std::string_view command;  // Its name (commandstats).
  };
  std::deque<Pending> inflight_;
  size_t inflight_bytes_ = 0;
  uint64_t inflight_base_ = 0;
  std::string inflight_set_;
  // The command running: its name (static), start, and the server's
  // error replies then (INFO commandstats).
  std::string_view running_;
  std::chrono::steady_clock::time_point running_since_;
  uint64_t running_errors_ = 0;
  // Connection state a client sets.
  int protocol_ = 2;
  bool authenticated_ = false;
  std::string name_;
  int w_;
  int r_;
};

template <typename T>
std::function<void(T)> Session::Post(std::function<void(T)> fn,
                                     bool even_if_closed) {
  std::shared_ptr<Session> self = shared_from_this();
  return [self, fn = std::move(fn), even_if_closed](T value) mutable {
    asio::post(*self->ctx_->io, [self, fn = std::move(fn), even_if_closed,
                                 value = std::move(value)]() mutable {
      if (self->closed_ && !even_if_closed) return;
      fn(std::move(value));
    });
  };
}

template <typename T>
std::function<void(T)> Session::Later(std::function<void(T)> fn) {
  return Post(std::move(fn), false);
}

template <typename T>
std::function<void(T)> Session::Continue(std::function<void(T)> fn) {
  return Post(std::move(fn), true);
}

}  // namespace bigset::server

#endif  // BIGSET_TOOLS_BIGSETD_SESSION_H_
