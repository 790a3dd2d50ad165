// Query commands: sets, members, contains, range, prefix, count, clock.
// Each opens the store read-only.

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "commands.h"
#include "progress.h"

namespace bigset::tool {
namespace {

// One element as a line of text or JSON.
std::string ElementLine(const Context& ctx, const ElementDots& e,
                        bool with_dots) {
  const BytesFormat b = ctx.bytes();
  if (ctx.json) {
    std::string line = absl::StrCat("{\"element\":", b.Json(e.element));
    if (with_dots) absl::StrAppend(&line, ",\"dots\":", DotsJson(e.dots));
    line.push_back('}');
    return line;
  }
  if (!with_dots) return b.Text(e.element);
  return absl::StrCat(b.Text(e.element), "\t", DotsText(e.dots));
}

// Streams the elements of `set` within `bounds`, at most `limit` (0: all).
absl::StatusOr<int> StreamElements(Context& ctx, const std::string& set,
                                   ElementBounds bounds, uint64_t limit,
                                   bool with_dots) {
  TOOL_ASSIGN_OR_RETURN(OpenStore open, ctx.OpenForRead());
  TOOL_RETURN_IF_ERROR(CheckSetExists(ctx, *open.replica, set));
  SetReadOptions options;
  options.bounds = std::move(bounds);
  TOOL_ASSIGN_OR_RETURN(std::unique_ptr<SetReader> reader,
                        open.replica->Read(set, options));
  Progress progress(ctx.progress(), "elements");
  std::vector<ElementDots> chunk;
  uint64_t printed = 0;
  std::string last;
  bool next_exists = false;  // An element past the limit exists.
  bool more = true;
  while (more && !next_exists) {
    TOOL_ASSIGN_OR_RETURN(more, reader->Next(&chunk));
    for (const ElementDots& e : chunk) {
      if (limit != 0 && printed == limit) {
        next_exists = true;
        break;
      }
      ctx.out.Line(ElementLine(ctx, e, with_dots));
      ++printed;
      last = e.element;
    }
    progress.Add(chunk.size());
  }
  progress.Finish();
  if (next_exists) {
    TOOL_RETURN_IF_ERROR(ctx.out.Flush());
    std::fprintf(stderr, "more elements follow; next page: --after %s\n",
                 ctx.bytes().Text(last).c_str());
  }
  return kExitOk;
}

// The smallest string greater than every string starting with `prefix`, or
// nullopt if there is none (the prefix is all 0xff).
std::optional<std::string> PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    unsigned char last = static_cast<unsigned char>(prefix.back());
    if (last != 0xFF) {
      prefix.back() = static_cast<char>(last + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::nullopt;
}

struct SetsArgs {
  std::string after;
  bool has_after = false;
  uint64_t limit = 0;
};

struct ElementsArgs {
  std::string set;
  std::optional<std::string> from, to, after;
  std::string prefix;
  uint64_t limit = 0;
  bool dots = false;
};

struct ContainsArgs {
  std::string set;
  std::vector<std::string> elements;
};

}  // namespace

void AddQueryCommands(CLI::App& app, Context& ctx) {
  {
    auto args = std::make_shared<SetsArgs>();
    CLI::App* sub = app.add_subcommand(
        "sets", "List the sets of the keyspace, ascending, page by page.");
    sub->add_option("--after", args->after,
                    "Start after this set name (the last of a previous page)");
    sub->add_option("--limit", args->limit, "At most N sets (0: all)")
        ->default_val(0);
    sub->footer("Example:\n  bigset --db /var/lib/app/sets sets --limit 100");
    sub->callback([&ctx, args, sub] {
      args->has_after = sub->count("--after") > 0;
      ctx.run = [&ctx, args]() -> absl::StatusOr<int> {
        TOOL_ASSIGN_OR_RETURN(OpenStore open, ctx.OpenForRead());
        std::optional<std::string> after;
        if (args->has_after) {
          TOOL_ASSIGN_OR_RETURN(after, ctx.bytes().Parse(args->after));
        }
        uint64_t listed = 0;
        while (args->limit == 0 || listed < args->limit) {
          size_t page = 1000;
          if (args->limit != 0)
            page = std::min<uint64_t>(page, args->limit - listed);
          TOOL_ASSIGN_OR_RETURN(std::vector<std::string> names,
                                open.replica->ListSets(after, page));
          for (const std::string& name : names) {
            ctx.out.Line(
                ctx.json
                    ? absl::StrCat("{\"set\":", ctx.bytes().Json(name), "}")
                    : ctx.bytes().Text(name));
          }
          listed += names.size();
          if (names.size() < page) break;
          after = names.back();
        }
        return kExitOk;
      };
    });
  }
  {
    auto args = std::make_shared<ElementsArgs>();
    CLI::App* sub = app.add_subcommand(
        "members",
        "Stream the elements of SET in element order (never loads the set "
        "in memory).");
    sub->add_option("SET", args->set, "The set")->required();
    sub->add_flag("--dots", args->dots, "Also print each element's dots");
    sub->footer("Example:\n  bigset --db ./data members fruits | head");
    sub->callback([&ctx, args] {
      ctx.run = [&ctx, args]() -> absl::StatusOr<int> {
        TOOL_ASSIGN_OR_RETURN(std::string set, ctx.bytes().Parse(args->set));
        return StreamElements(ctx, set, ElementBounds(), 0, args->dots);
      };
    });
  }
  {
    auto args = std::make_shared<ContainsArgs>();
    CLI::App* sub = app.add_subcommand(
        "contains",
        "Check that every ELEMENT is in SET: exit status 0 if all are, 1 if "
        "not. Prints each element with yes or no.");
    sub->add_option("SET", args->set, "The set")->required();
    sub->add_option("ELEMENT", args->elements, "Elements to look up")
        ->required();
    sub->footer("Example:\n  bigset --db ./data contains fruits apple pear");
    sub->callback([&ctx, args] {
      ctx.run = [&ctx, args]() -> absl::StatusOr<int> {
        const BytesFormat b = ctx.bytes();
        TOOL_ASSIGN_OR_RETURN(std::string set, b.Parse(args->set));
        std::vector<std::string> elements;
        for (const std::string& arg : args->elements) {
          TOOL_ASSIGN_OR_RETURN(std::string e, b.Parse(arg));
          elements.push_back(std::move(e));
        }
        TOOL_ASSIGN_OR_RETURN(OpenStore open, ctx.OpenForRead());
        TOOL_ASSIGN_OR_RETURN(Membership m,
                              open.replica->ContainsAll(set, elements));
        for (size_t i = 0; i < elements.size(); ++i) {
          const ElementDots& e = m.elements[i];
          const bool present = !e.dots.empty();
          if (ctx.json) {
            ctx.out.Line(
                absl::StrCat("{\"element\":", b.Json(elements[i]),
                             ",\"present\":", present ? "true" : "false",
                             ",\"dots\":", DotsJson(e.dots), "}"));
          } else {
            ctx.out.Line(absl::StrCat(b.Text(elements[i]), "\t",
                                      present ? "yes" : "no"));
          }
        }
        return m.all_present ? kExitOk : kExitNo;
      };
    });
  }
  {
    auto args = std::make_shared<ElementsArgs>();
    CLI::App* sub = app.add_subcommand(
        "range",
        "Stream the elements of SET from X (inclusive) to Y (exclusive).");
    sub->add_option("SET", args->set, "The set")->required();
    sub->add_option("--from", args->from, "First element (inclusive)");
    sub->add_option("--to", args->to, "End element (exclusive)");
    sub->add_option("--after", args->after,
                    "Start after this element (exclusive; to page on)");
    sub->add_option("--limit", args->limit, "At most N elements (0: all)")
        ->default_val(0);
    sub->add_flag("--dots", args->dots, "Also print each element's dots");
    sub->footer(
        "Example:\n  bigset --db ./data range fruits --from b --to d "
        "--limit 10");
    sub->callback([&ctx, args] {
      ctx.run = [&ctx, args]() -> absl::StatusOr<int> {
        const BytesFormat b = ctx.bytes();
        TOOL_ASSIGN_OR_RETURN(std::string set, b.Parse(args->set));
        if (args->from.has_value() && args->after.has_value()) {
          return absl::InvalidArgumentError("give --from or --after, not both");
        }
        ElementBounds bounds;
        if (args->from.has_value()) {
          TOOL_ASSIGN_OR_RETURN(bounds.start, b.Parse(*args->from));
        }
        if (args->after.has_value()) {
          TOOL_ASSIGN_OR_RETURN(bounds.start, b.Parse(*args->after));
          bounds.start_inclusive = false;
        }
        if (args->to.has_value()) {
          TOOL_ASSIGN_OR_RETURN(bounds.end, b.Parse(*args->to));
        }
        return StreamElements(ctx, set, std::move(bounds), args->limit,
                              args->dots);
      };
    });
  }
  {
    auto args = std::make_shared<ElementsArgs>();
    CLI::App* sub = app.add_subcommand(
        "prefix", "Stream the elements of SET that start with P.");
    sub->add_option("SET", args->set, "The set")->required();
    sub->add_option("P", args->prefix, "The prefix")->required();
    sub->add_option("--after", args->after,
                    "Start after this element (exclusive; to page on)");
    sub->add_option("--limit", args->limit, "At most N elements (0: all)")
        ->default_val(0);
    sub->add_flag("--dots", args->dots, "Also print each element's dots");
    sub->footer("Example:\n  bigset --db ./data prefix users 'user:17'");
    sub->callback([&ctx, args] {
      ctx.run = [&ctx, args]() -> absl::StatusOr<int> {
        const BytesFormat b = ctx.bytes();
        TOOL_ASSIGN_OR_RETURN(std::string set, b.Parse(args->set));
        TOOL_ASSIGN_OR_RETURN(std::string prefix, b.Parse(args->prefix));
        ElementBounds bounds;
        bounds.start = prefix;
        bounds.end = PrefixEnd(prefix);
        if (args->after.has_value()) {
          TOOL_ASSIGN_OR_RETURN(std::string after, b.Parse(*args->after));
          if (after >= prefix) {
            bounds.start = std::move(after);
            bounds.start_inclusive = false;
          }
        }
        return StreamElements(ctx, set, std::move(bounds), args->limit,
                              args->dots);
      };
    });
  }
  {
    auto args = std::make_shared<ElementsArgs>();
    CLI::App* sub = app.add_subcommand(
        "count",
        "Print the number of elements of SET (the count kept with the set; "
        "a scan only if it is not known).");
    sub->add_option("SET", args->set, "The set")->required();
    sub->footer("Example:\n  bigset --db ./data count fruits");
    sub->callback([&ctx, args] {
      ctx.run = [&ctx, args]() -> absl::StatusOr<int> {
        TOOL_ASSIGN_OR_RETURN(std::string set, ctx.bytes().Parse(args->set));
        TOOL_ASSIGN_OR_RETURN(OpenStore open, ctx.OpenForRead());
        TOOL_RETURN_IF_ERROR(CheckSetExists(ctx, *open.replica, set));
        TOOL_ASSIGN_OR_RETURN(uint64_t n, open.replica->Count(set));
        ctx.out.Line(ctx.json ? absl::StrCat("{\"count\":", n, "}")
                              : absl::StrCat(n));
        return kExitOk;
      };
    });
  }
  {
    auto args = std::make_shared<ElementsArgs>();
    CLI::App* sub = app.add_subcommand(
        "clock",
        "Print the set-clock and set-tombstone of SET, decoded, with their "
        "sizes.");
    sub->add_option("SET", args->set, "The set")->required();
    sub->footer("Example:\n  bigset --db ./data clock fruits");
    sub->callback([&ctx, args] {
      ctx.run = [&ctx, args]() -> absl::StatusOr<int> {
        TOOL_ASSIGN_OR_RETURN(std::string set, ctx.bytes().Parse(args->set));
        TOOL_ASSIGN_OR_RETURN(OpenStore open, ctx.OpenForRead());
        TOOL_RETURN_IF_ERROR(CheckSetExists(ctx, *open.replica, set));
        TOOL_ASSIGN_OR_RETURN(Clock clock, open.replica->GetClock(set));
        TOOL_ASSIGN_OR_RETURN(Clock tombstone, open.replica->GetTombstone(set));
        TOOL_ASSIGN_OR_RETURN(SetStats stats, open.replica->GetSetStats(set));
        if (ctx.json) {
          ctx.out.Line(absl::StrCat(
              "{\"clock\":", JsonString(clock.DebugString()),
              ",\"tombstone\":", JsonString(tombstone.DebugString()),
              ",\"clock_bytes\":", stats.clock_bytes, ",\"tombstone_bytes\":",
              stats.tombstone_bytes, ",\"clock_dots\":", stats.clock_dots,
              ",\"tombstone_dots\":", stats.tombstone_dots, "}"));
        } else {
          ctx.out.Line(absl::StrCat("clock:      ", clock.DebugString()));
          ctx.out.Line(absl::StrCat("tombstone:  ", tombstone.DebugString()));
          ctx.out.Line(absl::StrCat("clock:      ", stats.clock_dots, " dots, ",
                                    stats.clock_bytes, " bytes"));
          ctx.out.Line(absl::StrCat("tombstone:  ", stats.tombstone_dots,
                                    " dots, ", stats.tombstone_bytes,
                                    " bytes"));
        }
        return kExitOk;
      };
    });
  }
}

}  // namespace bigset::tool
