// bigset: a command-line tool to inspect, load, verify and repair a bigset
// store. `bigset --help` lists the commands; README.md has a session.

#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "commands.h"
#include "tool.h"

int main(int argc, char** argv) {
  using bigset::tool::Context;
  Context ctx;
  CLI::App app(
      "bigset: inspect, load, verify and repair a bigset store (a LevelDB "
      "directory).\n\nRead commands open the store read-only and change "
      "nothing on disk. Elements and set names are bytes: --hex takes and "
      "prints them as hex; text output escapes non-printable bytes. Exit "
      "status: 0 ok, 1 not found / not all present / verify failed, 2 usage "
      "or operational error.",
      "bigset");
  app.add_option("--db", ctx.db, "Path of the store")->required();
  app.add_option("--keyspace", ctx.keyspace,
                 "The replica's keyspace in the store")
      ->default_val(0);
  app.add_flag("--json", ctx.json,
               "JSON output: one object per line for listings, one object "
               "for the others");
  app.add_flag("--hex", ctx.hex,
               "Read set names and elements as hex, print them as hex");
  app.add_flag("--create", ctx.create,
               "Create the store if there is none (write commands)");
  app.add_flag("--no-progress", ctx.no_progress,
               "Never draw a progress line on standard error");
  app.require_subcommand(1, 1);
  app.fallthrough();
  app.footer(
      "Examples:\n"
      "  bigset --db ./data --create add fruits apple pear quince\n"
      "  bigset --db ./data members fruits\n"
      "  bigset --db ./data contains fruits pear && echo present\n"
      "  seq 1000000 | bigset --db ./data add numbers -\n"
      "  bigset --db ./data verify\n"
      "Elements that start with '-' go after --: bigset --db d add s -- -1");
  bigset::tool::AddQueryCommands(app, ctx);
  bigset::tool::AddWriteCommands(app, ctx);
  bigset::tool::AddMaintenanceCommands(app, ctx);
  bigset::tool::AddRepairCommand(app, ctx);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? bigset::tool::kExitOk : bigset::tool::kExitError;
  }
  absl::StatusOr<int> result = ctx.run();
  absl::Status flushed = ctx.out.Flush();
  if (result.ok() && !flushed.ok()) result = flushed;
  if (!result.ok()) {
    const absl::Status& s = result.status();
    std::string message(s.message());
    if (absl::IsDataLoss(s) && message.find("repair") == std::string::npos) {
      message += " (the store is damaged: `bigset --db " + ctx.db +
                 " repair` salvages what is readable)";
    }
    std::fprintf(stderr, "bigset: %s: %s\n",
                 absl::StatusCodeToString(s.code()).c_str(), message.c_str());
    // "Not found" about the data asked for is an answer; a missing store
    // or input file is an operational error.
    return absl::IsNotFound(s) && ctx.answer_not_found
               ? bigset::tool::kExitNo
               : bigset::tool::kExitError;
  }
  return *result;
}
