// Write commands: add, remove, load, clear. Each opens the store for
// writing and closes the replica cleanly at the end.

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bulk_add.h"
#include "commands.h"
#include "progress.h"

namespace bigset::tool {
namespace {

struct UpdateArgs {
  std::string set;
  std::vector<std::string> elements;
  std::string file;
  size_t batch = 1000;
};

// Adds or removes `elements` (already parsed) in one update; counts into
// *changed the elements a remove found present (every add counts). Like
// LocalSets: an add replaces the element's dots (one key per element), a
// remove removes what the replica holds.
absl::Status ApplyBatch(Replica& replica, const std::string& set,
                        UpdateOp::Kind kind, std::vector<std::string>& elements,
                        uint64_t* changed) {
  std::vector<UpdateOp> ops;
  ops.reserve(elements.size());
  for (std::string& e : elements) {
    UpdateOp op;
    op.kind = kind;
    op.element = std::move(e);
    op.context_from_replica = true;
    ops.push_back(std::move(op));
  }
  absl::StatusOr<Delta> delta = replica.Update(set, ops);
  if (!delta.ok()) return delta.status();
  for (const DeltaOp& op : delta->ops) {
    if (kind == UpdateOp::Kind::kAdd || !op.context.empty()) ++*changed;
  }
  return absl::OkStatus();
}

// Reads elements one per line from `in` and applies them in batches.
absl::Status ApplyLines(Context& ctx, OpenStore& open, const std::string& set,
                        UpdateOp::Kind kind, std::FILE* in, size_t batch,
                        uint64_t* total, uint64_t* changed) {
  const BytesFormat b = ctx.bytes();
  // Adds go through BulkAdd, which reads the set into a filter only once
  // the input is large against the set (estimated without reading it).
  std::unique_ptr<BulkAdd> adds;
  std::unique_ptr<Progress> scan;
  if (kind == UpdateOp::Kind::kAdd) {
    TOOL_ASSIGN_OR_RETURN(
        uint64_t set_bytes,
        open.store->ApproximateSize(ElementsRange(ctx.keyspace, set)));
    adds = std::make_unique<BulkAdd>(
        *open.replica, set, set_bytes, [&ctx, &scan](uint64_t n) {
          if (scan == nullptr) {
            scan = std::make_unique<Progress>(ctx.progress(), "elements read");
          }
          scan->Add(n);
        });
  }
  Progress progress(ctx.progress(), "elements");
  return ForEachLineBatch(
      in, batch, [&](std::vector<std::string>& lines) -> absl::Status {
        if (b.hex) {
          for (size_t i = 0; i < lines.size(); ++i) {
            absl::StatusOr<std::string> e = b.Parse(lines[i]);
            if (!e.ok()) {
              return absl::InvalidArgumentError(absl::StrCat(
                  "input line ", *total + i + 1, ": ", e.status().message()));
            }
            lines[i] = std::move(*e);
          }
        }
        *total += lines.size();
        progress.Add(lines.size());
        if (adds != nullptr) {
          absl::Status s = adds->Add(lines, changed);
          if (scan != nullptr) scan->Finish();  // The read is over.
          return s;
        }
        return ApplyBatch(*open.replica, set, kind, lines, changed);
      });
}

absl::StatusOr<int> RunUpdate(Context& ctx, const UpdateArgs& args,
                              UpdateOp::Kind kind, bool from_file) {
  if (args.batch == 0) {
    return absl::InvalidArgumentError("--batch must be at least 1");
  }
  const BytesFormat b = ctx.bytes();
  TOOL_ASSIGN_OR_RETURN(std::string set, b.Parse(args.set));
  std::FILE* in = nullptr;
  std::string input;
  if (from_file) {
    input = args.file;
  } else if (args.elements.size() == 1 && args.elements[0] == "-") {
    input = "-";
  }
  std::vector<std::string> elements;
  if (input.empty()) {
    for (const std::string& arg : args.elements) {
      TOOL_ASSIGN_OR_RETURN(std::string e, b.Parse(arg));
      elements.push_back(std::move(e));
    }
  } else if (input == "-") {
    in = stdin;
  } else {
    in = std::fopen(input.c_str(), "r");
    if (in == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("cannot open ", input, ": ", std::strerror(errno)));
    }
  }
  absl::StatusOr<OpenStore> open = ctx.OpenForWrite();
  if (!open.ok()) {
    if (in != nullptr && in != stdin) std::fclose(in);
    return open.status();
  }
  uint64_t total = 0, changed = 0;
  absl::Status s;
  if (in == nullptr) {
    total = elements.size();
    for (size_t i = 0; i < elements.size() && s.ok(); i += args.batch) {
      std::vector<std::string> part(
          elements.begin() + static_cast<ptrdiff_t>(i),
          elements.begin() + static_cast<ptrdiff_t>(
                                 std::min(elements.size(), i + args.batch)));
      s = ApplyBatch(*open->replica, set, kind, part, &changed);
    }
  } else {
    s = ApplyLines(ctx, *open, set, kind, in, args.batch, &total, &changed);
    if (in != stdin) std::fclose(in);
  }
  // Close cleanly even after an error: what was applied stays applied.
  absl::Status closed = open->Close();
  if (!s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat(s.message(), " (", changed,
                                     " elements were applied before it)"));
  }
  TOOL_RETURN_IF_ERROR(closed);
  const char* verb = kind == UpdateOp::Kind::kAdd ? "added" : "removed";
  if (ctx.json) {
    ctx.out.Line(absl::StrCat("{\"", verb, "\":", changed,
                              ",\"elements\":", total, "}"));
  } else if (kind == UpdateOp::Kind::kAdd) {
    ctx.out.Line(absl::StrCat("added ", changed, " elements to ", b.Text(set)));
  } else {
    ctx.out.Line(absl::StrCat("removed ", changed, " of ", total,
                              " elements from ", b.Text(set)));
  }
  return kExitOk;
}

void AddUpdateCommand(CLI::App& app, Context& ctx, const char* name,
                      const char* help, const char* example,
                      UpdateOp::Kind kind) {
  auto args = std::make_shared<UpdateArgs>();
  CLI::App* sub = app.add_subcommand(name, help);
  sub->add_option("SET", args->set, "The set")->required();
  sub->add_option("ELEMENT", args->elements,
                  "Elements, or - to read one per line from standard input")
      ->required();
  sub->add_option("--batch", args->batch,
                  "Elements per atomic write when reading lines")
      ->default_val(1000);
  sub->footer(example);
  sub->callback([&ctx, args, kind] {
    ctx.run = [&ctx, args, kind]() -> absl::StatusOr<int> {
      return RunUpdate(ctx, *args, kind, false);
    };
  });
}

}  // namespace

void AddWriteCommands(CLI::App& app, Context& ctx) {
  AddUpdateCommand(
      app, ctx, "add",
      "Add ELEMENTs to SET (each add replaces the element's earlier dots). "
      "With -, read one element per line from standard input, in batches.",
      "Examples:\n  bigset --db ./data --create add fruits apple pear\n"
      "  seq 1000000 | bigset --db ./data add numbers -",
      UpdateOp::Kind::kAdd);
  AddUpdateCommand(
      app, ctx, "remove",
      "Remove ELEMENTs from SET (absent ones are skipped). With -, read "
      "one element per line from standard input.",
      "Example:\n  bigset --db ./data remove fruits pear",
      UpdateOp::Kind::kRemove);
  {
    auto args = std::make_shared<UpdateArgs>();
    CLI::App* sub = app.add_subcommand(
        "load",
        "Add every line of FILE to SET, in batches (a bulk load; FILE may "
        "be - for standard input).");
    sub->add_option("SET", args->set, "The set")->required();
    sub->add_option("FILE", args->file, "One element per line")->required();
    sub->add_option("--batch", args->batch, "Elements per atomic write")
        ->default_val(1000);
    sub->footer("Example:\n  bigset --db ./data --create load words words.txt");
    sub->callback([&ctx, args] {
      ctx.run = [&ctx, args]() -> absl::StatusOr<int> {
        return RunUpdate(ctx, *args, UpdateOp::Kind::kAdd, true);
      };
    });
  }
  {
    auto args = std::make_shared<UpdateArgs>();
    CLI::App* sub = app.add_subcommand(
        "clear",
        "Remove every element SET holds now. Writes only the set's "
        "tombstone; `bigset sweep` (or a running sweeper) deletes the keys.");
    sub->add_option("SET", args->set, "The set")->required();
    sub->footer(
        "Example:\n  bigset --db ./data clear fruits && bigset --db "
        "./data sweep");
    sub->callback([&ctx, args] {
      ctx.run = [&ctx, args]() -> absl::StatusOr<int> {
        const BytesFormat b = ctx.bytes();
        TOOL_ASSIGN_OR_RETURN(std::string set, b.Parse(args->set));
        TOOL_ASSIGN_OR_RETURN(OpenStore open, ctx.OpenForWrite());
        TOOL_RETURN_IF_ERROR(CheckSetExists(ctx, *open.replica, set));
        TOOL_ASSIGN_OR_RETURN(Clock clock, open.replica->GetClock(set));
        TOOL_RETURN_IF_ERROR(open.replica->Clear(set, clock).status());
        TOOL_RETURN_IF_ERROR(open.Close());
        if (ctx.json) {
          ctx.out.Line(absl::StrCat("{\"cleared\":", b.Json(set),
                                    ",\"dots\":", clock.DotCount(), "}"));
        } else {
          ctx.out.Line(
              absl::StrCat("cleared ", b.Text(set), " (", clock.DotCount(),
                           " events); run `bigset sweep` to delete its keys"));
        }
        return kExitOk;
      };
    });
  }
}

}  // namespace bigset::tool
