#include "cli/engine_checks.h"

#include <capnp/message.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <map>

#include "cli/commands.h"
#include "engines/launch_plan.h"

namespace servesweep::cli {
namespace {

// The front end's port in checked command lines (any free port would do: nothing listens).
constexpr uint16_t kCheckedFrontEndPort = 8000;

Status ParseModelConfigs(const std::vector<std::string>& items,
                         std::map<std::string, std::string>* out) {
  for (const auto& item : items) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      return Status::InvalidArgument(fmt::format(
          "--model-config: expected NAME=DIR (a model name or path of the matrix, and a folder "
          "holding its config.json), found '{}'",
          item));
    }
    out->emplace(item.substr(0, eq), item.substr(eq + 1));
  }
  return Status::Ok();
}

}  // namespace

void AddEngineCheckFlags(CLI::App& cmd, EngineCheckFlags& flags, bool skippable) {
  cmd.add_option("--engine-env", flags.engine_envs,
                 "Python environment (virtualenv or bin folder) holding an engine, looked in "
                 "before PATH; repeatable: the one holding each run's engine_version is used");
  cmd.add_option("--model-config", flags.model_configs,
                 "NAME=DIR: check runs of model NAME (or model_path / draft model NAME) against "
                 "the config.json in DIR, when the weights are not here; repeatable");
  cmd.add_option("--check-gpu", flags.gpu,
                 "GPU the engines are told of where nvidia-smi does not answer: h100, h200, "
                 "b200, a100, l4 (default h100)");
  if (skippable) {
    cmd.add_flag("--skip-engine-check", flags.skip,
                 "Start the sweep without handing its engine command lines to the engines' own "
                 "argument handling first (here and on every agent)");
  }
}

std::string SweepCheck::Summary() const {
  const size_t checked = accepted + refused;
  std::string out = fmt::format("engine check: {} of {} command line(s) accepted", accepted,
                                checked + unavailable);
  std::vector<std::string> parts;
  if (refused) parts.push_back(fmt::format("{} rejected", refused));
  if (unavailable) parts.push_back(fmt::format("{} could not be checked here", unavailable));
  if (not_checked) parts.push_back(fmt::format("{} without an engine check", not_checked));
  if (!unproven.empty()) parts.push_back(fmt::format("{} run(s) unchecked", unproven.size()));
  if (!parts.empty()) out += " (" + fmt::format("{}", fmt::join(parts, ", ")) + ")";
  return out;
}

std::string SweepCheck::Render(bool refused_only) const {
  std::string out;
  for (const auto& p : processes) {
    const auto& v = p.verdict;
    if (v.outcome == engines::CheckVerdict::Outcome::kNotChecked) continue;
    if (refused_only && v.outcome == engines::CheckVerdict::Outcome::kUnavailable) continue;
    if (!v.ok()) {
      out += fmt::format("  {} [{}] {}: {}\n", p.run_id, p.label, p.process, v.Describe());
      continue;
    }
    for (const auto& w : v.warnings) {
      out += fmt::format("  {} [{}] {}: warning from {}: {}\n", p.run_id, p.label, p.process,
                         v.checker, w);
    }
    for (const auto& n : v.spellings) {
      out += fmt::format("  {} [{}] {}: note: {}\n", p.run_id, p.label, p.process, n);
    }
  }
  if (!refused_only) {
    for (const auto& u : unproven) out += "  " + u + "\n";
  }
  return out;
}

Status CheckSweepEngines(matrix::LoadedMatrix& matrix, const EngineCheckFlags& flags,
                         SweepCheck* out) {
  std::map<std::string, std::string> configs;
  if (Status s = ParseModelConfigs(flags.model_configs, &configs); !s.ok()) return s;
  engines::EngineCheckOptions options;
  options.engine_envs = flags.engine_envs;
  options.gpu_preset = flags.gpu;
  options.timeout_s = flags.timeout_s;
  std::vector<engines::CheckedProcess> processes;
  std::vector<ProcessVerdict> described;
  struct RunStart {
    size_t first;
    std::string unchecked, run_id;
  };
  std::vector<RunStart> runs;
  for (auto original : matrix.matrix().getRuns()) {
    capnp::MallocMessageBuilder message;
    message.setRoot(original);
    auto spec = message.getRoot<schema::RunSpec>();
    engines::SubstituteModelConfigs(configs, spec);
    const uint32_t nodes = std::max<uint32_t>(1, spec.getNodesNeeded());
    std::vector<std::string> addresses;
    for (uint32_t r = 0; r < nodes; ++r) addresses.push_back(fmt::format("10.0.0.{}", r + 1));
    RunStart start{processes.size(), "", original.getRunId().cStr()};
    for (const auto& rank :
         engines::PlanRunLaunches(spec.asReader(), addresses, kCheckedFrontEndPort, "servesweep")) {
      if (!rank.launch.unchecked.empty()) start.unchecked = rank.launch.unchecked;
      for (auto& process : engines::ProcessesOf(rank.launch, spec.asReader())) {
        described.push_back({original.getRunId().cStr(),
                             original.getLabel().cStr(),
                             fmt::format("{} rank {} [{}]", rank.rank == 0 ? "head" : "worker",
                                         rank.rank, process.process.name),
                             {}});
        processes.push_back(std::move(process));
      }
    }
    runs.push_back(std::move(start));
  }
  std::vector<engines::CheckVerdict> verdicts;
  if (Status s = engines::CheckProcesses(processes, options, &verdicts); !s.ok()) return s;
  *out = SweepCheck{};
  for (size_t i = 0; i < verdicts.size(); ++i) {
    described[i].verdict = verdicts[i];
    switch (verdicts[i].outcome) {
      case engines::CheckVerdict::Outcome::kAccepted:
        ++out->accepted;
        break;
      case engines::CheckVerdict::Outcome::kRejected:
      case engines::CheckVerdict::Outcome::kMissingPackages:
        ++out->refused;
        break;
      case engines::CheckVerdict::Outcome::kNotChecked:
        ++out->not_checked;
        break;
      case engines::CheckVerdict::Outcome::kUnavailable:
        ++out->unavailable;
        break;
    }
  }
  // A launch outside its table's checked versions stands only where every process is proven.
  for (size_t r = 0; r < runs.size(); ++r) {
    if (runs[r].unchecked.empty()) continue;
    const size_t end = r + 1 < runs.size() ? runs[r + 1].first : verdicts.size();
    bool proven = end > runs[r].first;
    for (size_t i = runs[r].first; i < end; ++i) proven = proven && verdicts[i].ok();
    if (!proven) out->unproven.push_back(runs[r].run_id + ": " + runs[r].unchecked);
  }
  out->processes = std::move(described);
  return Status::Ok();
}

int RefuseRejectedSweep(matrix::LoadedMatrix& matrix, const EngineCheckFlags& flags) {
  if (flags.skip) {
    spdlog::warn(
        "engine check skipped (--skip-engine-check): command lines go to the engines "
        "unchecked");
    return -1;
  }
  SweepCheck check;
  if (Status s = CheckSweepEngines(matrix, flags, &check); !s.ok()) {
    spdlog::error("{}", s.message());
    return kExitError;
  }
  if (check.accepted + check.refused + check.unavailable == 0) return -1;  // nothing to check
  fmt::print("{}{}{}\n", check.Render(true), check.Summary(),
             check.unavailable > 0 ? "; the agents check the others before each run" : "");
  if (check.refused == 0) return -1;
  spdlog::error(
      "{}: the engines refused command lines of this sweep (above); nothing was started. Fix "
      "the matrix, or start it anyway with --skip-engine-check",
      matrix.matrix().getSourcePath().cStr());
  return kExitError;
}

}  // namespace servesweep::cli
