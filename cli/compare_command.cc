// `servesweep compare DIR_A DIR_B`: a matched comparison of two sweeps from their results
// databases. Refuses when a condition differs, unless --allow-mismatch, and then says so.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <memory>

#include "cli/commands.h"
#include "coordinator/comparison.h"

namespace servesweep::cli {

void AddCompareCommand(CLI::App& app, int* exit_code) {
  struct Options {
    std::string dir_a, dir_b;
    bool allow_mismatch = false;
    bool json = false;
  };
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "compare", "Compare two sweeps' results, load point by load point, under matched conditions");
  cmd->add_option("dir_a", options->dir_a, "Output folder of sweep A (holds results.db)")
      ->required();
  cmd->add_option("dir_b", options->dir_b, "Output folder of sweep B (holds results.db)")
      ->required();
  cmd->add_flag(
      "--allow-mismatch", options->allow_mismatch,
      "Compare even when conditions differ (the output says the comparison is unmatched)");
  cmd->add_flag("--json", options->json, "Print the comparison as JSON");
  cmd->callback([options, exit_code] {
    std::vector<coordinator::ComparedRun> a, b;
    coordinator::Comparison comparison;
    Status s = coordinator::LoadComparedRuns(options->dir_a, &a);
    if (s.ok()) s = coordinator::LoadComparedRuns(options->dir_b, &b);
    if (s.ok()) s = coordinator::CompareRuns(a, b, &comparison);
    if (!s.ok()) {
      spdlog::error("{}", s.message());
      *exit_code = kExitError;
      return;
    }
    if (!comparison.matched() && !options->allow_mismatch) {
      std::string differences;
      for (const auto& pair : comparison.pairs) {
        for (const auto& m : pair.mismatches) {
          differences += fmt::format("\n  {}: {}", pair.load_point, m);
        }
      }
      spdlog::error(
          "refusing an unmatched comparison: expected the same conditions on both sides, found "
          "these differences:{}\npass --allow-mismatch to compare anyway",
          differences);
      *exit_code = kExitError;
      return;
    }
    if (options->json) {
      fmt::print("{}\n",
                 coordinator::RenderComparisonJson(comparison, options->dir_a, options->dir_b));
    } else {
      if (!comparison.matched()) {
        fmt::print("UNMATCHED comparison (--allow-mismatch): conditions differ, see below\n");
      }
      fmt::print("{}",
                 coordinator::RenderComparisonText(comparison, options->dir_a, options->dir_b));
    }
    *exit_code = kExitOk;
  });
}

}  // namespace servesweep::cli
