// The bigset tool's subcommands, registered on its CLI11 app. Each
// subcommand's callback stores its work in Context::run.

#ifndef BIGSET_TOOLS_BIGSET_COMMANDS_H_
#define BIGSET_TOOLS_BIGSET_COMMANDS_H_

#include "CLI/CLI.hpp"
#include "tool.h"

namespace bigset::tool {

// sets, members, contains, range, prefix, count, clock.
void AddQueryCommands(CLI::App& app, Context& ctx);
// add, remove, load, clear.
void AddWriteCommands(CLI::App& app, Context& ctx);
// dump, stats, verify, compact, sweep.
void AddMaintenanceCommands(CLI::App& app, Context& ctx);
// repair.
void AddRepairCommand(CLI::App& app, Context& ctx);

}  // namespace bigset::tool

#endif  // BIGSET_TOOLS_BIGSET_COMMANDS_H_
