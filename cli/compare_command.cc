// `servesweep compare DIR_A DIR_B`: a matched comparison of two sweeps from their results
// databases. Refuses when a condition differs, unless --allow-mismatch, and then says so.
// `servesweep compare --baseline NAME DIR`: DIR against a frozen baseline (`servesweep baseline
// freeze`); a changed condition starts a new baseline instead (frozen with --freeze-new).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "report/baseline_comparison.h"
#include "report/baseline_store.h"
#include "report/comparison.h"

namespace servesweep::cli {
namespace {

struct CompareOptions {
  std::string dir_a, dir_b;
  bool allow_mismatch = false;
  bool include_invalid = false;  // invalid and client-bound runs are compared too
  bool json = false;
  std::string baseline;  // a frozen baseline's name: compare dir_a against it
  std::string store;
  bool freeze_new = false;
};

void PrintRefusal(const report::Comparison& comparison) {
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
}

// A figure of a rejected or client-bound run is no evidence: refused, with the reason.
void PrintUncertifiedRefusal(const report::Comparison& comparison) {
  std::string refused;
  for (const auto& pair : comparison.pairs) {
    if (!pair.refused.empty()) refused += fmt::format("\n  {}: {}", pair.load_point, pair.refused);
  }
  spdlog::error(
      "refusing to compare runs that are not certified (invalid, or client-bound: their "
      "figures may be the client's):{}\npass --include-invalid to compare them anyway",
      refused);
}

int CompareDirs(const CompareOptions& o) {
  if (o.dir_b.empty()) {
    spdlog::error("compare: expected two sweep folders (DIR_A DIR_B), or --baseline NAME DIR");
    return kExitError;
  }
  std::vector<report::ComparedRun> a, b;
  report::Comparison comparison;
  Status s = report::LoadComparedRuns(o.dir_a, &a);
  if (s.ok()) s = report::LoadComparedRuns(o.dir_b, &b);
  report::RunSelection selection;
  selection.include_uncertified = o.include_invalid;
  if (s.ok()) s = report::CompareRuns(a, b, &comparison, selection);
  if (!s.ok()) {
    spdlog::error("{}", s.message());
    return kExitError;
  }
  if (comparison.any_refused()) {
    PrintUncertifiedRefusal(comparison);
    return kExitError;
  }
  if (!comparison.matched() && !o.allow_mismatch) {
    PrintRefusal(comparison);
    return kExitError;
  }
  if (o.json) {
    fmt::print("{}\n", report::RenderComparisonJson(comparison, o.dir_a, o.dir_b));
  } else {
    if (!comparison.matched()) {
      fmt::print("UNMATCHED comparison (--allow-mismatch): conditions differ, see below\n");
    }
    fmt::print("{}", report::RenderComparisonText(comparison, o.dir_a, o.dir_b));
  }
  return kExitOk;
}

int CompareWithBaseline(const CompareOptions& o) {
  if (!o.dir_b.empty()) {
    spdlog::error("compare --baseline {}: expected one sweep folder, found two ('{}' and '{}')",
                  o.baseline, o.dir_a, o.dir_b);
    return kExitError;
  }
  const report::BaselineStore store(o.store);
  report::BaselineInfo info;
  std::vector<report::ComparedRun> frozen, sweep;
  report::BaselineCheck check;
  Status s = store.Current(o.baseline, &info);
  if (s.ok()) s = report::LoadComparedRuns(info.dir, &frozen);
  if (s.ok()) s = report::LoadComparedRuns(o.dir_a, &sweep);
  report::RunSelection selection;
  selection.include_uncertified = o.include_invalid;
  if (s.ok()) s = report::CheckAgainstBaseline(frozen, sweep, &check, selection);
  if (!s.ok()) {
    spdlog::error("{}", s.message());
    return kExitError;
  }
  if (!check.new_baseline && check.comparison.any_refused()) {
    PrintUncertifiedRefusal(check.comparison);
    return kExitError;
  }
  const std::string name_a = fmt::format("baseline '{}' generation {}", info.name, info.generation);
  const std::string about = fmt::format("{} (frozen {} from {})", name_a,
                                        UtcTimeText(info.frozen_unix_ms), info.source_dir);
  std::string new_line;
  report::BaselineInfo frozen_info;
  if (check.new_baseline) {
    new_line = "new baseline: " + check.reason;
    if (o.freeze_new) {
      if (Status f = store.Freeze(o.dir_a, o.baseline, new_line, &frozen_info); !f.ok()) {
        spdlog::error("{}", f.message());
        return kExitError;
      }
    }
  }
  const bool compare = !check.new_baseline || (o.allow_mismatch && !check.comparison.pairs.empty());
  if (o.json) {
    nlohmann::json j;
    j["baseline"] = {{"name", info.name},
                     {"generation", info.generation},
                     {"frozen_unix_ms", info.frozen_unix_ms},
                     {"source_dir", info.source_dir}};
    j["sweep"] = o.dir_a;
    j["new_baseline"] = check.new_baseline;
    j["new_baseline_reason"] = check.reason;
    j["changes"] = nlohmann::json::array();
    for (const auto& c : check.changes) {
      j["changes"].push_back({{"field", c.name}, {"baseline", c.a}, {"sweep", c.b}});
    }
    j["frozen_generation"] = frozen_info.generation > 0 ? nlohmann::json(frozen_info.generation)
                                                        : nlohmann::json(nullptr);
    j["comparison"] =
        compare
            ? nlohmann::json::parse(report::RenderComparisonJson(check.comparison, name_a, o.dir_a))
            : nlohmann::json(nullptr);
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("against {}\n", about);
    if (check.new_baseline) {
      fmt::print(
          "{}\nthe sweep's conditions are not the baseline's: its figures start a new baseline "
          "and are not attributed to the system under test\n",
          new_line);
      if (frozen_info.generation > 0) {
        fmt::print("froze {} as baseline '{}' generation {} (now current; generation {} kept)\n",
                   frozen_info.source_dir, frozen_info.name, frozen_info.generation,
                   info.generation);
      } else {
        fmt::print("freeze it with --freeze-new (or `servesweep baseline freeze {} --name {}`)\n",
                   o.dir_a, o.baseline);
      }
    }
    if (compare) {
      if (check.new_baseline) {
        fmt::print("UNMATCHED comparison (--allow-mismatch): conditions differ, see below\n");
      }
      fmt::print("{}", report::RenderComparisonText(check.comparison, name_a, o.dir_a));
    }
  }
  if (check.new_baseline && frozen_info.generation == 0) return kExitNewBaseline;
  return kExitOk;
}

}  // namespace

void AddCompareCommand(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<CompareOptions>();
  auto* cmd = app.add_subcommand(
      "compare",
      "Compare two sweeps' results, or a sweep against a frozen baseline, load point by load "
      "point, under matched conditions");
  cmd->add_option("dir_a", options->dir_a,
                  "Output folder of sweep A (holds results.db); with --baseline, the sweep")
      ->required();
  cmd->add_option("dir_b", options->dir_b, "Output folder of sweep B (holds results.db)");
  cmd->add_flag(
      "--allow-mismatch", options->allow_mismatch,
      "Compare even when conditions differ (the output says the comparison is unmatched)");
  cmd->add_flag("--include-invalid", options->include_invalid,
                "Compare invalid and client-bound runs too (left out by default: their figures "
                "may not be the engine's)");
  cmd->add_flag("--json", options->json, "Print the comparison as JSON");
  cmd->add_option("--baseline", options->baseline,
                  "Compare the sweep against this frozen baseline (servesweep baseline freeze)");
  AddBaselineStoreOption(*cmd, options->store);
  cmd->add_flag("--freeze-new", options->freeze_new,
                "With --baseline: when the conditions differ, freeze the sweep as the "
                "baseline's next generation");
  cmd->callback([options, exit_code] {
    if (options->freeze_new && options->baseline.empty()) {
      spdlog::error("--freeze-new: expected --baseline NAME with it");
      *exit_code = kExitError;
      return;
    }
    *exit_code = options->baseline.empty() ? CompareDirs(*options) : CompareWithBaseline(*options);
  });
}

}  // namespace servesweep::cli
