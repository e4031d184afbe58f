// `servesweep baseline freeze DIR --name NAME [--store PATH]` and `servesweep baseline list`:
// frozen baselines (report/baseline_store.h) that later sweeps are compared against with
// `servesweep compare --baseline NAME DIR`.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <ctime>
#include <memory>

#include "cli/commands.h"
#include "report/baseline_store.h"

namespace servesweep::cli {

std::string UtcTimeText(int64_t unix_ms) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm utc{};
  ::gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S UTC", &utc);
  return text;
}

void AddBaselineStoreOption(CLI::App& cmd, std::string& store) {
  store = report::BaselineStore::DefaultRoot();
  cmd.add_option("--store", store,
                 "Baseline store folder (default: $SERVESWEEP_BASELINES, else "
                 "~/.local/share/servesweep/baselines)")
      ->capture_default_str();
}

void AddBaselineCommand(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("baseline", "Freeze a sweep as a named baseline; list baselines");
  cmd->require_subcommand(1);

  struct FreezeOptions {
    std::string dir, name, store;
  };
  auto freeze = std::make_shared<FreezeOptions>();
  auto* freeze_cmd = cmd->add_subcommand(
      "freeze", "Copy a finished sweep's results and conditions into the baseline store");
  freeze_cmd->add_option("dir", freeze->dir, "Output folder of the sweep (holds results.db)")
      ->required();
  freeze_cmd->add_option("--name", freeze->name, "Baseline name, e.g. llama8b-h100")->required();
  AddBaselineStoreOption(*freeze_cmd, freeze->store);
  freeze_cmd->callback([freeze, exit_code] {
    report::BaselineStore store(freeze->store);
    report::BaselineInfo info;
    if (Status s = store.Freeze(freeze->dir, freeze->name, "frozen by hand", &info); !s.ok()) {
      spdlog::error("{}", s.message());
      *exit_code = kExitError;
      return;
    }
    fmt::print("froze {} as baseline '{}' generation {} ({} runs, {} ok) in {}\n", info.source_dir,
               info.name, info.generation, info.runs, info.ok_runs, info.dir);
    if (info.generation > 1) {
      fmt::print("generation {} is now the current baseline '{}' (earlier ones are kept)\n",
                 info.generation, info.name);
    }
    *exit_code = kExitOk;
  });

  auto list_store = std::make_shared<std::string>();
  auto* list_cmd = cmd->add_subcommand("list", "List the baselines of the store, every generation");
  AddBaselineStoreOption(*list_cmd, *list_store);
  list_cmd->callback([list_store, exit_code] {
    report::BaselineStore store(*list_store);
    std::vector<report::BaselineInfo> all;
    if (Status s = store.List(&all); !s.ok()) {
      spdlog::error("{}", s.message());
      *exit_code = kExitError;
      return;
    }
    if (all.empty()) {
      fmt::print("no baselines in {}\n", store.root());
      *exit_code = kExitOk;
      return;
    }
    fmt::print("{:<24} {:>4} {:<8} {:<24} {:>9}  {}\n", "name", "gen", "", "frozen", "ok/runs",
               "from; why");
    for (size_t i = 0; i < all.size(); ++i) {
      const auto& info = all[i];
      const bool current = i + 1 == all.size() || all[i + 1].name != info.name;
      fmt::print("{:<24} {:>4} {:<8} {:<24} {:>9}  {}; {}\n", info.name, info.generation,
                 current ? "current" : "", UtcTimeText(info.frozen_unix_ms),
                 fmt::format("{}/{}", info.ok_runs, info.runs), info.source_dir, info.reason);
    }
    *exit_code = kExitOk;
  });
}

}  // namespace servesweep::cli
