// The repair command: LevelDB's repair of a damaged store, then the bigset
// repair of the keyspace (a new actor epoch, consistent sets), then a
// verify, reporting what was lost at each step.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "commands.h"
#include "progress.h"

namespace bigset::tool {
namespace {

struct RepairArgs {
  bool verbose = false;
};

std::string JsonList(const std::vector<std::string>& items) {
  std::string out = "[";
  for (const std::string& item : items) {
    if (out.size() > 1) out.push_back(',');
    out.append(JsonString(Printable(item)));
  }
  out.push_back(']');
  return out;
}

absl::StatusOr<int> RunRepair(Context& ctx, const RepairArgs& args) {
  if (ctx.db.empty()) return absl::InvalidArgumentError("--db is required");
  Output& out = ctx.out;
  // 1. LevelDB: salvage every readable entry, archive damaged files.
  LevelDbStoreOptions so;
  so.create_if_missing = false;
  TOOL_ASSIGN_OR_RETURN(StoreRepairReport store_report,
                        LevelDbStore::Repair(ctx.db, so));
  // 2. Bigset: a new actor epoch, consistent clocks, a clean sweep queue.
  TOOL_ASSIGN_OR_RETURN(std::unique_ptr<LevelDbStore> store,
                        LevelDbStore::Open(ctx.db, so));
  ReplicaOptions ro;
  ro.keyspace = ctx.keyspace;
  RepairReport report;
  {
    Progress progress(ctx.progress(), "keys");
    TOOL_ASSIGN_OR_RETURN(
        report, Replica::Repair(store.get(), ro, [&progress](uint64_t keys) {
          progress.Add(keys - progress.done());
        }));
  }
  // 3. Verify what is left, through a normally opened replica.
  TOOL_ASSIGN_OR_RETURN(std::unique_ptr<Replica> replica,
                        Replica::Open(store.get(), ro));
  TOOL_ASSIGN_OR_RETURN(VerifyReport verify, replica->Verify());
  TOOL_RETURN_IF_ERROR(replica->Close());
  replica.reset();
  store.reset();

  if (ctx.json) {
    out.Line(absl::StrCat(
        "{\"store\":{\"logs\":", store_report.logs,
        ",\"log_ops\":", store_report.log_ops, ",\"log_bytes_dropped\":",
        store_report.log_bytes_dropped, ",\"tables\":", store_report.tables,
        ",\"entries\":", store_report.entries,
        ",\"damaged_tables\":", store_report.damaged_tables,
        ",\"dropped_tables\":", store_report.dropped_tables,
        ",\"unparsable_entries\":", store_report.unparsable_entries,
        ",\"archived\":", JsonList(store_report.archived),
        ",\"log\":", JsonList(store_report.log), "},\"keyspace\":{",
        "\"keyspace\":", ctx.keyspace, ",\"old_actor\":", report.old_actor,
        ",\"new_actor\":", report.new_actor, ",\"sets\":", report.sets,
        ",\"element_keys\":", report.element_keys, ",\"clocks_rebuilt\":",
        report.clocks_rebuilt, ",\"clocks_extended\":", report.clocks_extended,
        ",\"dots_added\":", report.dots_added, ",\"tombstones_dropped\":",
        report.tombstones_dropped, ",\"sweep_fixes\":", report.sweep_fixes,
        ",\"keys_deleted\":", report.keys_deleted, ",\"loss_count\":",
        report.loss_count, ",\"losses\":", JsonList(report.losses),
        "},\"verify\":{\"ok\":", verify.ok() ? "true" : "false",
        ",\"problem_count\":", verify.problem_count,
        ",\"problems\":", JsonList(verify.problems), "}}"));
    return verify.ok() ? kExitOk : kExitNo;
  }
  out.Line(absl::StrCat("store ", ctx.db, ":"));
  out.Line(absl::StrCat("  ", store_report.tables, " tables scanned, ",
                        store_report.entries, " entries kept; ",
                        store_report.logs, " logs replayed (",
                        store_report.log_ops, " operations)"));
  if (store_report.damaged_tables > 0) {
    out.Line(absl::StrCat("  LOST: ", store_report.damaged_tables,
                          " tables had unreadable blocks; the entries of "
                          "those blocks are gone"));
  }
  if (store_report.dropped_tables > 0) {
    out.Line(absl::StrCat("  LOST: ", store_report.dropped_tables,
                          " tables could not be read at all"));
  }
  if (store_report.log_bytes_dropped > 0) {
    out.Line(absl::StrCat("  LOST: ", store_report.log_bytes_dropped,
                          " bytes of damaged log records"));
  }
  if (store_report.log_records_dropped > 0) {
    out.Line(absl::StrCat("  LOST: ", store_report.log_records_dropped,
                          " log records LevelDB could not apply"));
  }
  if (store_report.unparsable_entries > 0) {
    out.Line(absl::StrCat("  LOST: ", store_report.unparsable_entries,
                          " entries with malformed keys"));
  }
  for (const std::string& f : store_report.archived) {
    out.Line(absl::StrCat("  moved aside: ", f));
  }
  if (args.verbose) {
    for (const std::string& l : store_report.log) {
      out.Line(absl::StrCat("  leveldb: ", Printable(l)));
    }
  }
  out.Line(absl::StrCat("keyspace ", ctx.keyspace, ":"));
  out.Line(absl::StrCat("  ", report.sets, " sets, ", report.element_keys,
                        " element keys"));
  out.Line(absl::StrCat("  actor retired: ",
                        report.old_actor != 0
                            ? absl::StrCat(absl::Hex(report.old_actor))
                            : std::string("(lost)"),
                        " -> ", absl::Hex(report.new_actor),
                        " (new writes cannot reuse a counter)"));
  for (const std::string& l : report.losses) {
    out.Line(absl::StrCat("  LOST: ", Printable(l)));
  }
  if (report.loss_count > report.losses.size()) {
    out.Line(absl::StrCat("  ... and ",
                          report.loss_count - report.losses.size(), " more"));
  }
  if (report.sweep_fixes > 0) {
    out.Line(
        absl::StrCat("  ", report.sweep_fixes, " sweep-queue records fixed"));
  }
  for (const std::string& p : verify.problems) {
    out.Line(absl::StrCat("  problem: ", Printable(p)));
  }
  const bool lost = store_report.lost_data() || report.loss_count > 0;
  out.Line(absl::StrCat(
      verify.ok() ? "verify: ok" : "verify: FAILED",
      lost ? "; data was lost (see LOST above)" : "; nothing was lost"));
  return verify.ok() ? kExitOk : kExitNo;
}

}  // namespace

void AddRepairCommand(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<RepairArgs>();
  CLI::App* sub = app.add_subcommand(
      "repair",
      "Repair a damaged store (one that fails to open with DATA_LOSS): "
      "salvage every readable entry (damaged files are moved to PATH/lost/), "
      "make the keyspace consistent, retire the replica's actor id, verify, "
      "and report what was lost. Stop every process using the store first; "
      "back it up if you can.");
  sub->add_flag("--verbose", args->verbose, "Also print LevelDB's repair log");
  sub->footer(
      "Example:\n  cp -a ./data ./data.bak && bigset --db ./data repair");
  sub->callback([&ctx, args] {
    ctx.run = [&ctx, args]() { return RunRepair(ctx, *args); };
  });
}

}  // namespace bigset::tool
