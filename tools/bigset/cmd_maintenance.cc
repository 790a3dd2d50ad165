// Maintenance commands: dump, stats, verify (read-only) and compact, sweep
// (writing).

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bigset/keys/keys.h"
#include "commands.h"
#include "progress.h"

namespace bigset::tool {
namespace {

const char* StateName(KeyKind kind) {
  return kind == KeyKind::kSetClock ? "clock" : "tombstone";
}

// One key of the store, decoded, as a line of text or JSON.
std::string DumpLine(const Context& ctx, std::string_view key,
                     std::string_view value) {
  const BytesFormat b = ctx.bytes();
  ParsedKey k;
  if (!DecodeKey(key, &k).ok()) {
    return ctx.json
               ? absl::StrCat("{\"kind\":\"undecodable\",\"key_hex\":\"",
                              ToHex(key), "\",\"value_hex\":\"", ToHex(value),
                              "\"}")
               : absl::StrCat("undecodable\t", ToHex(key), "\t", ToHex(value));
  }
  switch (k.kind) {
    case KeyKind::kMetadata:
      return ctx.json ? absl::StrCat("{\"kind\":\"metadata\",\"name\":",
                                     b.Json(k.metadata_name),
                                     ",\"value_hex\":\"", ToHex(value), "\"}")
                      : absl::StrCat("metadata\t", b.Text(k.metadata_name),
                                     "\t", ToHex(value));
    case KeyKind::kSetClock:
    case KeyKind::kSetTombstone: {
      if (ctx.json) {
        std::string line = absl::StrCat(
            "{\"kind\":\"", StateName(k.kind), "\",\"set\":", b.Json(k.set),
            ",\"part\":\"", k.segment ? "segment" : "header", "\"");
        if (k.segment) {
          absl::StrAppend(&line, ",\"actor\":", k.dot.actor,
                          ",\"window\":", k.dot.counter);
        }
        absl::StrAppend(&line, ",\"value_hex\":\"", ToHex(value), "\"}");
        return line;
      }
      std::string line = absl::StrCat(StateName(k.kind), "\t", b.Text(k.set),
                                      "\t", k.segment ? "segment" : "header");
      if (k.segment) {
        absl::StrAppend(&line, " ", absl::Hex(k.dot.actor), " window ",
                        k.dot.counter);
      }
      absl::StrAppend(&line, "\t", value.size(), " bytes");
      return line;
    }
    case KeyKind::kElement:
      return ctx.json
                 ? absl::StrCat("{\"kind\":\"element\",\"set\":", b.Json(k.set),
                                ",\"element\":", b.Json(k.element),
                                ",\"dot\":[", k.dot.actor, ",", k.dot.counter,
                                "]}")
                 : absl::StrCat("element\t", b.Text(k.set), "\t",
                                b.Text(k.element), "\t", DotToString(k.dot));
    case KeyKind::kEndOfSet:
      return ctx.json
                 ? absl::StrCat(
                       "{\"kind\":\"end-of-set\",\"set\":", b.Json(k.set), "}")
                 : absl::StrCat("end-of-set\t", b.Text(k.set));
  }
  return "";
}

struct DumpArgs {
  std::optional<std::string> set;
};

struct StatsArgs {
  uint64_t limit = 100;
};

absl::StatusOr<int> RunStats(Context& ctx, const StatsArgs& args) {
  const BytesFormat b = ctx.bytes();
  TOOL_ASSIGN_OR_RETURN(OpenStore open, ctx.OpenForRead());
  Replica& r = *open.replica;
  TOOL_ASSIGN_OR_RETURN(uint64_t store_bytes, open.store->ApproximateSize(
                                                  KeyspaceRange(ctx.keyspace)));
  const ReplicaStats stats = r.stats();
  // LevelDB's own account: files and sizes per level.
  std::string leveldb_stats;
  open.store->db()->GetProperty("leveldb.stats", &leveldb_stats);
  std::string files_per_level;
  for (int level = 0; level < 7; ++level) {
    std::string n;
    if (!open.store->db()->GetProperty(
            absl::StrCat("leveldb.num-files-at-level", level), &n)) {
      break;
    }
    absl::StrAppend(&files_per_level, level == 0 ? "" : ",", n);
  }
  // Per-set sizes, for the first `limit` sets; all sets are counted.
  std::vector<std::string> lines;
  uint64_t sets = 0;
  std::optional<std::string> after;
  while (true) {
    TOOL_ASSIGN_OR_RETURN(std::vector<std::string> names,
                          r.ListSets(after, 1000));
    for (const std::string& name : names) {
      ++sets;
      if (args.limit != 0 && sets > args.limit) continue;
      TOOL_ASSIGN_OR_RETURN(SetStats s, r.GetSetStats(name));
      TOOL_ASSIGN_OR_RETURN(uint64_t bytes, open.store->ApproximateSize(
                                                SetRange(ctx.keyspace, name)));
      if (ctx.json) {
        lines.push_back(absl::StrCat(
            "{\"set\":", b.Json(name), ",\"approximate_bytes\":", bytes,
            ",\"clock_dots\":", s.clock_dots, ",\"clock_bytes\":",
            s.clock_bytes, ",\"tombstone_dots\":", s.tombstone_dots,
            ",\"tombstone_bytes\":", s.tombstone_bytes, "}"));
      } else {
        lines.push_back(absl::StrCat(
            "  ", b.Text(name), "\t", bytes, " bytes on disk, clock ",
            s.clock_dots, " dots / ", s.clock_bytes, " bytes, tombstone ",
            s.tombstone_dots, " dots / ", s.tombstone_bytes, " bytes"));
      }
    }
    if (names.size() < 1000) break;
    after = names.back();
  }
  if (ctx.json) {
    std::string sets_json;
    for (const std::string& l : lines) {
      if (!sets_json.empty()) sets_json.push_back(',');
      sets_json.append(l);
    }
    ctx.out.Line(absl::StrCat(
        "{\"keyspace\":", ctx.keyspace, ",\"actor\":", r.actor(),
        ",\"store_approximate_bytes\":", store_bytes, ",\"sets\":", sets,
        ",\"sweep_queue_length\":", stats.sweep_queue_length,
        ",\"replica\":{\"clock_cache_hits\":", stats.clock_cache_hits,
        ",\"clock_cache_misses\":", stats.clock_cache_misses,
        "},\"files_per_level\":[", files_per_level, "]", ",\"set_sizes\":[",
        sets_json, "]}"));
    return kExitOk;
  }
  ctx.out.Line(absl::StrCat("keyspace:     ", ctx.keyspace));
  ctx.out.Line(absl::StrCat("actor:        ", absl::Hex(r.actor())));
  ctx.out.Line(absl::StrCat("store size:   ", store_bytes,
                            " bytes (approximate, this keyspace)"));
  ctx.out.Line(absl::StrCat("sets:         ", sets));
  ctx.out.Line(absl::StrCat("sweep queue:  ", stats.sweep_queue_length,
                            " sets to sweep"));
  ctx.out.Line(absl::StrCat("clock cache:  ", stats.clock_cache_hits, " hits, ",
                            stats.clock_cache_misses, " misses (this run)"));
  ctx.out.Line("leveldb:");
  for (absl::string_view l : absl::StrSplit(leveldb_stats, '\n')) {
    if (!l.empty()) ctx.out.Line(absl::StrCat("  ", l));
  }
  if (!lines.empty()) {
    ctx.out.Line(args.limit != 0 && sets > args.limit
                     ? absl::StrCat("first ", args.limit, " sets:")
                     : std::string("sets:"));
    for (const std::string& l : lines) ctx.out.Line(l);
  }
  return kExitOk;
}

}  // namespace

void AddMaintenanceCommands(CLI::App& app, Context& ctx) {
  {
    auto args = std::make_shared<DumpArgs>();
    CLI::App* sub = app.add_subcommand(
        "dump",
        "Print every key of the keyspace (or of SET), decoded, one per line.");
    sub->add_option("SET", args->set, "Only this set");
    sub->footer("Example:\n  bigset --db ./data --json dump fruits");
    sub->callback([&ctx, args] {
      ctx.run = [&ctx, args]() -> absl::StatusOr<int> {
        std::optional<std::string> set;
        if (args->set.has_value()) {
          TOOL_ASSIGN_OR_RETURN(set, ctx.bytes().Parse(*args->set));
        }
        TOOL_ASSIGN_OR_RETURN(OpenStore open, ctx.OpenForRead());
        if (set.has_value()) {
          TOOL_RETURN_IF_ERROR(CheckSetExists(ctx, *open.replica, *set));
        }
        ReadOptions ro;
        ro.fill_cache = false;
        std::unique_ptr<const Snapshot> snap = open.store->GetSnapshot();
        ro.snapshot = snap.get();
        auto it = open.store->NewIterator(
            ro, set.has_value() ? SetRange(ctx.keyspace, *set)
                                : KeyspaceRange(ctx.keyspace));
        Progress progress(ctx.progress(), "keys");
        for (it->SeekToFirst(); it->Valid(); it->Next()) {
          ctx.out.Line(DumpLine(ctx, it->key(), it->value()));
          progress.Add(1);
        }
        TOOL_RETURN_IF_ERROR(it->status());
        return kExitOk;
      };
    });
  }
  {
    auto args = std::make_shared<StatsArgs>();
    CLI::App* sub = app.add_subcommand(
        "stats",
        "Print the keyspace's actor, store size, sweep queue and per-set "
        "sizes.");
    sub->add_option("--limit", args->limit,
                    "Sizes of at most N sets (0: all; every set is counted)")
        ->default_val(100);
    sub->footer("Example:\n  bigset --db ./data stats");
    sub->callback([&ctx, args] {
      ctx.run = [&ctx, args]() { return RunStats(ctx, *args); };
    });
  }
  {
    CLI::App* sub = app.add_subcommand(
        "verify",
        "Check every key of the keyspace; print every problem found. Exit "
        "status 1 if there is any.");
    sub->footer("Example:\n  bigset --db ./data verify || echo damaged");
    sub->callback([&ctx] {
      ctx.run = [&ctx]() -> absl::StatusOr<int> {
        TOOL_ASSIGN_OR_RETURN(OpenStore open, ctx.OpenForRead());
        Progress progress(ctx.progress(), "keys");
        TOOL_ASSIGN_OR_RETURN(VerifyReport report,
                              open.replica->Verify([&progress](uint64_t keys) {
                                progress.Add(keys - progress.done());
                              }));
        progress.Finish();
        if (ctx.json) {
          std::string problems;
          for (const std::string& p : report.problems) {
            if (!problems.empty()) problems.push_back(',');
            problems.append(JsonString(Printable(p)));
          }
          ctx.out.Line(absl::StrCat("{\"ok\":", report.ok() ? "true" : "false",
                                    ",\"sets\":", report.sets,
                                    ",\"element_keys\":", report.element_keys,
                                    ",\"problem_count\":", report.problem_count,
                                    ",\"problems\":[", problems, "]}"));
        } else {
          for (const std::string& p : report.problems) {
            ctx.out.Line(absl::StrCat("problem: ", Printable(p)));
          }
          if (report.problem_count > report.problems.size()) {
            ctx.out.Line(absl::StrCat(
                "... and ", report.problem_count - report.problems.size(),
                " more problems"));
          }
          ctx.out.Line(
              absl::StrCat(report.ok() ? "ok: " : "FAILED: ", report.sets,
                           " sets, ", report.element_keys, " element keys, ",
                           report.problem_count, " problems"));
        }
        return report.ok() ? kExitOk : kExitNo;
      };
    });
  }
  {
    CLI::App* sub = app.add_subcommand(
        "compact",
        "Compact the keyspace's key range (reclaims the space of deleted "
        "keys).");
    sub->footer("Example:\n  bigset --db ./data compact");
    sub->callback([&ctx] {
      ctx.run = [&ctx]() -> absl::StatusOr<int> {
        TOOL_ASSIGN_OR_RETURN(OpenStore open, ctx.OpenForWrite());
        const KeyRange range = KeyspaceRange(ctx.keyspace);
        TOOL_ASSIGN_OR_RETURN(uint64_t before,
                              open.store->ApproximateSize(range));
        TOOL_RETURN_IF_ERROR(open.store->CompactRange(range));
        TOOL_ASSIGN_OR_RETURN(uint64_t after,
                              open.store->ApproximateSize(range));
        TOOL_RETURN_IF_ERROR(open.Close());
        ctx.out.Line(ctx.json ? absl::StrCat("{\"bytes_before\":", before,
                                             ",\"bytes_after\":", after, "}")
                              : absl::StrCat("compacted: ", before, " -> ",
                                             after, " bytes (approximate)"));
        return kExitOk;
      };
    });
  }
  {
    CLI::App* sub = app.add_subcommand(
        "sweep",
        "Delete the keys that clears and removes left behind (every queued "
        "set), then compact what was swept.");
    sub->footer("Example:\n  bigset --db ./data sweep");
    sub->callback([&ctx] {
      ctx.run = [&ctx]() -> absl::StatusOr<int> {
        TOOL_ASSIGN_OR_RETURN(OpenStore open, ctx.OpenForWrite());
        Progress progress(ctx.progress(), "keys read");
        SweepProgress total;
        while (true) {
          TOOL_ASSIGN_OR_RETURN(SweepProgress p,
                                open.replica->SweepSome(10'000));
          total.keys_read += p.keys_read;
          total.keys_deleted += p.keys_deleted;
          total.entries_done += p.entries_done;
          progress.Add(p.keys_read);
          if (p.idle) break;
        }
        progress.Finish();
        TOOL_RETURN_IF_ERROR(open.Close());
        ctx.out.Line(
            ctx.json
                ? absl::StrCat("{\"sets_swept\":", total.entries_done,
                               ",\"keys_read\":", total.keys_read,
                               ",\"keys_deleted\":", total.keys_deleted, "}")
                : absl::StrCat("swept ", total.entries_done, " sets: read ",
                               total.keys_read, " keys, deleted ",
                               total.keys_deleted));
        return kExitOk;
      };
    });
  }
}

}  // namespace bigset::tool
