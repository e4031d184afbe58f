#include "engines/sweep_check.h"

#include <capnp/message.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "engines/launch_plan.h"

namespace servesweep::engines {
namespace {

// The front end's port in checked command lines (any free port would do: nothing listens).
constexpr uint16_t kCheckedFrontEndPort = 8000;

}  // namespace

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
    if (v.outcome == CheckVerdict::Outcome::kNotChecked) continue;
    if (refused_only && v.outcome == CheckVerdict::Outcome::kUnavailable) continue;
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

Status CheckSweep(schema::Matrix::Reader matrix, const std::vector<std::string>& model_configs,
                  const EngineCheckOptions& options, SweepCheck* out) {
  std::map<std::string, std::string> configs;
  if (Status s = ParseModelConfigs(model_configs, &configs); !s.ok()) return s;
  std::vector<CheckedProcess> processes;
  std::vector<ProcessVerdict> described;
  struct RunStart {
    size_t first;
    std::string unchecked, run_id;
  };
  std::vector<RunStart> runs;
  for (auto original : matrix.getRuns()) {
    capnp::MallocMessageBuilder message;
    message.setRoot(original);
    auto spec = message.getRoot<schema::RunSpec>();
    SubstituteModelConfigs(configs, spec);
    const uint32_t nodes = std::max<uint32_t>(1, spec.getNodesNeeded());
    std::vector<std::string> addresses;
    for (uint32_t r = 0; r < nodes; ++r) addresses.push_back(fmt::format("10.0.0.{}", r + 1));
    RunStart start{processes.size(), "", original.getRunId().cStr()};
    for (const auto& rank :
         PlanRunLaunches(spec.asReader(), addresses, kCheckedFrontEndPort, "servesweep")) {
      if (!rank.launch.unchecked.empty()) start.unchecked = rank.launch.unchecked;
      for (auto& process : ProcessesOf(rank.launch, spec.asReader())) {
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
  std::vector<CheckVerdict> verdicts;
  if (Status s = CheckProcesses(processes, options, &verdicts); !s.ok()) return s;
  *out = SweepCheck{};
  for (size_t i = 0; i < verdicts.size(); ++i) {
    described[i].verdict = verdicts[i];
    switch (verdicts[i].outcome) {
      case CheckVerdict::Outcome::kAccepted:
        ++out->accepted;
        break;
      case CheckVerdict::Outcome::kRejected:
      case CheckVerdict::Outcome::kMissingPackages:
        ++out->refused;
        break;
      case CheckVerdict::Outcome::kNotChecked:
        ++out->not_checked;
        break;
      case CheckVerdict::Outcome::kUnavailable:
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

}  // namespace servesweep::engines
