#include "app/cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "app/commands.h"
#include "app/common.h"
#include "metrics/build_info.h"

namespace ef {
namespace {

// Edits (insert, delete, replace, swap of neighbours) from a to b.
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// A word where `parent` expects a command name: nullopt if it is one (or an
// option, left to CLI11), else the one-line error with the nearest name.
std::optional<std::string> UnknownCommand(const CLI::App& parent, const std::string& word,
                                          const std::string& path) {
  if (word.empty() || word[0] == '-') return std::nullopt;
  const auto subs = parent.get_subcommands([](const CLI::App*) { return true; });
  std::vector<std::string> names;
  for (const CLI::App* sub : subs) names.push_back(sub->get_name());
  if (std::find(names.begin(), names.end(), word) != names.end()) return std::nullopt;
  std::string best;
  size_t best_distance = 3;  // at most 2 edits, and fewer than half the word
  for (const auto& name : names) {
    const size_t dist = EditDistance(word, name);
    if (dist < best_distance && dist * 2 < std::max(word.size(), name.size())) {
      best = name;
      best_distance = dist;
    }
  }
  std::string msg = "unknown command '" + path + word + "'";
  if (!best.empty()) return msg + "; did you mean '" + path + best + "'?";
  std::string all;
  for (const auto& name : names) all += (all.empty() ? "" : ", ") + name;
  return msg + " (commands: " + all + ")";
}

// Checks the command words of argv (the first word, and the one after a command
// that has subcommands, e.g. `layout show`) before CLI11 parses.
std::optional<std::string> CheckCommandWords(const CLI::App& app, int argc, char** argv) {
  const CLI::App* parent = &app;
  std::string path;
  for (int i = 1; i < argc && parent != nullptr; ++i) {
    const auto subs = parent->get_subcommands([](const CLI::App*) { return true; });
    if (subs.empty()) break;
    const std::string word = argv[i];
    if (auto error = UnknownCommand(*parent, word, path)) return error;
    if (word.empty() || word[0] == '-') break;
    const CLI::App* next = nullptr;
    for (const CLI::App* sub : subs)
      if (sub->get_name() == word) next = sub;
    path += word + " ";
    parent = next;
  }
  return std::nullopt;
}

constexpr char kHint[] = "Run with --help for more information.";

}  // namespace

int RunCli(int argc, char** argv) {
  CLI::App app{
      "exposure-filter: per-user Bloom filters of seen items in Redis, fed from Kafka.\n"
      "Docs: README.md, docs/CLI.md (conventions, exit codes), docs/CONFIG.md, docs/FORMAT.md"};
  app.set_version_flag("--version", BuildDescription());
  // At most one; "none" is reported after parsing so that an unknown word is
  // named as such rather than as a missing subcommand.
  app.require_subcommand(0, 1);
  app.footer(
      "Exit codes: 0 ok, 1 runtime failure, 2 usage, 3 permission denied, 4 config invalid,\n"
      "5 layout mismatch, 6 Redis or Kafka unreachable, 7 data not OK (lag --check),\n"
      "130 interrupted. docs/CLI.md.");
  const std::vector<std::pair<const char*, app::Action>> actions = {
      {"run", app::AddRunCommand(app)},
      {"check", app::AddCheckCommand(app)},
      {"size", app::AddSizeCommand(app)},
      {"config", app::AddConfigCommand(app)},
      {"dev-kafka", app::AddDevKafkaCommand(app)},
      {"loadgen", app::AddLoadgenCommand(app)},
      {"lag", app::AddLagCommand(app)},
      {"replay", app::AddReplayCommand(app)},
      {"bench-redis", app::AddBenchRedisCommand(app)},
      {"layout", app::AddLayoutCommand(app)},
      {"serve", app::AddServeCommand(app)},
      {"content", app::AddContentCommand(app)},
  };
  if (auto error = CheckCommandWords(app, argc, argv)) {
    std::fprintf(stderr, "exposure-filter: %s\n%s\n", error->c_str(), kHint);
    return app::kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11's own message, on one line with our prefix; every parse error is usage.
    std::string what = e.what();
    std::replace(what.begin(), what.end(), '\n', ' ');
    std::fprintf(stderr, "exposure-filter: %s\n%s\n", what.c_str(), kHint);
    return app::kExitUsage;
  }
  if (app.get_subcommands().empty()) {
    std::fprintf(stderr,
                 "exposure-filter: a command is required (run, check, serve, lag, replay, size, "
                 "layout, content, config, dev-kafka, loadgen, bench-redis)\n%s\n",
                 kHint);
    return app::kExitUsage;
  }
  for (const auto& [name, action] : actions) {
    if (app.got_subcommand(name)) {
      try {
        return action();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "exposure-filter %s: %s\n", name, e.what());
        return app::kExitFailure;
      }
    }
  }
  return app::kExitUsage;
}

}  // namespace ef
