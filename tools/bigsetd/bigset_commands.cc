// Bigset's own commands, for what Redis has no word for: range and prefix
// pages, causal contexts, quorums, statistics, verification.

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "context_codec.h"
#include "glob.h"
#include "session.h"

namespace bigset::server {
namespace {

// A ZRANGEBYLEX bound: "-", "+", "[x" (inclusive) or "(x" (exclusive).
// Sets one side of *bounds; false if malformed. *empty is set if the bound
// excludes everything ("+" as a start, "-" as an end).
bool ParseLexBound(const std::string& text, bool is_start,
                   ElementBounds* bounds, bool* empty) {
  if (text == "-" || text == "+") {
    if ((text == "+") == is_start) *empty = true;
    return true;
  }
  if (text.empty() || (text[0] != '[' && text[0] != '(')) return false;
  const bool inclusive = text[0] == '[';
  if (is_start) {
    bounds->start = text.substr(1);
    bounds->start_inclusive = inclusive;
  } else {
    bounds->end = text.substr(1);
    bounds->end_inclusive = inclusive;
  }
  return true;
}

// LIMIT n and CURSOR c from args[first..]; false (and *error) if malformed.
bool ParsePageOptions(const Session::Args& a, size_t first, size_t* limit,
                      uint64_t* cursor, std::string* error) {
  for (size_t i = first; i < a.size(); i += 2) {
    const std::string opt = absl::AsciiStrToLower(a[i]);
    int64_t v = 0;
    if (i + 1 >= a.size() || (opt != "limit" && opt != "cursor")) {
      *error = "ERR syntax error";
      return false;
    }
    if (opt == "limit") {
      if (!absl::SimpleAtoi(a[i + 1], &v) || v < 1) {
        *error = "ERR LIMIT must be a positive integer";
        return false;
      }
      *limit = static_cast<size_t>(std::min<int64_t>(v, 100'000));
    } else if (!absl::SimpleAtoi(a[i + 1], cursor)) {
      *error = "ERR invalid cursor";
      return false;
    }
  }
  return true;
}

}  // namespace

void Session::CmdRange(Args& a) {
  ElementBounds bounds;
  bool empty = false;
  if (!ParseLexBound(a[2], true, &bounds, &empty) ||
      !ParseLexBound(a[3], false, &bounds, &empty)) {
    ReplyError("ERR min or max not valid string range item");
    Done();
    return;
  }
  size_t limit = 1000;
  uint64_t cursor = 0;
  std::string error;
  if (!ParsePageOptions(a, 4, &limit, &cursor, &error)) {
    ReplyError(error);
    Done();
    return;
  }
  if (empty) {
    RespWriter w = Out();
    w.Array(2);
    w.Bulk("0");
    w.Array(0);
    Done();
    return;
  }
  ScanPage(a[1], std::move(bounds), cursor, limit, "");
}

void Session::CmdPrefix(Args& a) {
  size_t limit = 1000;
  uint64_t cursor = 0;
  std::string error;
  if (!ParsePageOptions(a, 3, &limit, &cursor, &error)) {
    ReplyError(error);
    Done();
    return;
  }
  ElementBounds bounds = PrefixBounds(a[2]);
  ScanPage(a[1], std::move(bounds), cursor, limit, "");
}

void Session::CmdContext(Args& a) {
  std::string set = a[1], element = a[2];
  ctx_->runner->ContainsAll(
      a[1], {a[2]}, ReadOptions(),
      Later<absl::StatusOr<Membership>>([this, set, element](
                                            absl::StatusOr<Membership> m) {
        if (!m.ok()) {
          ReplyStatus(m.status(), false);
        } else {
          Out().Bulk(m->elements.empty()
                         ? ""
                         : EncodeContext(set, element, m->elements[0].dots));
        }
        Done();
      }));
}

void Session::HeldContext(std::string set, std::string element,
                          std::vector<Dot> given,
                          std::function<void(absl::StatusOr<HeldDots>)> done) {
  // A context may name only its own element's dots: a dot a replica has
  // not seen yet is remembered as removed, and would drop the add that
  // brings it, whatever its element. So keep only the given dots that a
  // read quorum attaches to this element now; the others were removed
  // already, or are not this element's (a mistake, or a forgery).
  std::vector<std::string> elements = {element};
  ctx_->runner->ContainsAll(
      std::move(set), std::move(elements), ReadOptions(),
      Continue<absl::StatusOr<Membership>>(
          [given = std::move(given), done](absl::StatusOr<Membership> m) {
            if (!m.ok()) {
              done(m.status());
              return;
            }
            HeldDots held;
            if (!m->elements.empty()) {
              held.present = !m->elements[0].dots.empty();
              for (const Dot& d : given) {
                const std::vector<Dot>& now = m->elements[0].dots;
                if (std::find(now.begin(), now.end(), d) != now.end()) {
                  held.dots.push_back(d);
                }
              }
            }
            done(std::move(held));
          }));
}

void Session::CmdBigsetAdd(Args& a) {
  if (a.size() == 3) {
    // Without a context, as SADD of one member: 1 if a read quorum did not
    // hold it. The add replaces what the quorum and the coordinating
    // replica hold, or, when it goes out with the read (SetBatcher), what
    // that replica holds: a dot it has not received yet stays beside the
    // new one (add-wins either way). A client that must replace given
    // dots passes their CONTEXT.
    CmdSadd(a);
    return;
  }
  if (a.size() != 5 || absl::AsciiStrToLower(a[3]) != "context") {
    ReplyError("ERR syntax error");
    Done();
    return;
  }
  absl::StatusOr<std::vector<Dot>> context = DecodeContext(a[1], a[2], a[4]);
  if (!context.ok()) {
    ReplyError(absl::StrCat("ERR bad context: ", context.status().message()));
    Done();
    return;
  }
  std::string set = a[1], element = a[2];
  HeldContext(set, element, std::move(*context),
              [this, set, element](absl::StatusOr<HeldDots> held) {
                if (!held.ok()) {
                  ReplyStatus(held.status(), false);
                  Done();
                  return;
                }
                const bool was_present = held->present;
                ctx_->runner->Update(
                    set, {UpdateOp::Add(element, std::move(held->dots))},
                    WriteOptions(),
                    Later<absl::StatusOr<Delta>>(
                        [this, was_present](absl::StatusOr<Delta> d) {
                          if (!d.ok()) {
                            ReplyStatus(d.status(), true);
                          } else {
                            // As SADD: 1 if a read quorum did not hold it.
                            Out().Integer(was_present ? 0 : 1);
                          }
                          Done();
                        }));
              });
}

void Session::CmdBigsetRemove(Args& a) {
  if (absl::AsciiStrToLower(a[3]) != "context") {
    ReplyError("ERR syntax error");
    Done();
    return;
  }
  absl::StatusOr<std::vector<Dot>> context = DecodeContext(a[1], a[2], a[4]);
  if (!context.ok()) {
    ReplyError(absl::StrCat("ERR bad context: ", context.status().message()));
    Done();
    return;
  }
  if (context->empty()) {
    Out().Integer(0);
    Done();
    return;
  }
  std::string set = a[1], element = a[2];
  HeldContext(
      set, element, std::move(*context),
      [this, set, element](absl::StatusOr<HeldDots> held) {
        if (!held.ok()) {
          ReplyStatus(held.status(), false);
          Done();
          return;
        }
        if (held->dots.empty()) {
          Out().Integer(0);  // Nothing it names is held: no write.
          Done();
          return;
        }
        ctx_->runner->Update(
            set, {UpdateOp::Remove(element, std::move(held->dots))},
            WriteOptions(),
            Later<absl::StatusOr<Delta>>([this](absl::StatusOr<Delta> d) {
              if (!d.ok()) {
                ReplyStatus(d.status(), true);
              } else {
                Out().Integer(1);
              }
              Done();
            }));
      });
}

void Session::CmdQuorum(Args& a) {
  const int n = ctx_->config->n;
  if (a.size() == 1) {
    RespWriter w = Out();
    w.Array(3);
    w.Integer(n);
    w.Integer(w_);
    w.Integer(r_);
  } else if (a.size() == 3) {
    int w = 0, r = 0;
    if (!absl::SimpleAtoi(a[1], &w) || !absl::SimpleAtoi(a[2], &r) || w < 1 ||
        w > n || r < 1 || r > n) {
      ReplyError(absl::StrCat("ERR W and R must be integers between 1 and N (",
                              n, ")"));
    } else {
      w_ = w;
      r_ = r;
      Out().Simple("OK");
    }
  } else {
    ReplyError("ERR wrong number of arguments for 'bigset.quorum' command");
  }
  Done();
}

void Session::CmdVerify(Args&) {
  std::shared_ptr<Session> self = shared_from_this();
  NodeRunner* runner = ctx_->runner;
  auto reply = Later<std::string>([this](std::string problem) {
    if (problem.empty()) {
      Out().Simple("OK");
    } else {
      ReplyError(absl::StrCat("ERR verify: ", problem));
    }
    Done();
  });
  // A full check of every local replica: on the worker, not on this thread.
  ctx_->worker->Run([runner, reply]() {
    std::string problem;
    absl::Status s = runner->RunOnNode([&problem](Node& node) {
      for (uint32_t p = 0; p < node.ring().ring_size(); ++p) {
        Replica* replica = node.LocalReplica(p);
        if (replica == nullptr) continue;
        absl::StatusOr<VerifyReport> report = replica->Verify();
        if (!report.ok()) {
          problem =
              absl::StrCat("partition ", p, ": ", report.status().ToString());
          return;
        }
        if (!report->ok()) {
          problem =
              absl::StrCat("partition ", p, ": ", report->problem_count,
                           " problems, first: ",
                           report->problems.empty() ? "" : report->problems[0]);
          return;
        }
      }
    });
    if (!s.ok()) problem = s.ToString();
    reply(std::move(problem));
  });
}

}  // namespace bigset::server
