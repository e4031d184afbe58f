#include "report/baseline_comparison.h"

#include <fmt/format.h>

#include <algorithm>

namespace servesweep::report {
namespace {

std::vector<std::string> LoadPoints(const std::vector<ComparedRun>& runs) {
  std::vector<std::string> out;
  for (const auto& run : runs) {
    if (std::find(out.begin(), out.end(), run.load_point) == out.end()) {
      out.push_back(run.load_point);
    }
  }
  return out;
}

std::string Join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

}  // namespace

std::string NewBaselineReason(const std::vector<FieldChange>& changes) {
  std::vector<std::string> groups, details;
  for (const auto& c : changes) {
    const std::string group = c.name.substr(0, c.name.find('.'));
    if (std::find(groups.begin(), groups.end(), group) == groups.end()) groups.push_back(group);
    details.push_back(fmt::format("{}: {} -> {}", c.name, c.a, c.b));
  }
  std::string subject;
  for (size_t i = 0; i < groups.size(); ++i) {
    subject += i == 0 ? "" : i + 1 == groups.size() ? " and " : ", ";
    subject += groups[i];
  }
  return fmt::format("{} {} ({})", subject, groups.size() == 1 ? "differs" : "differ",
                     Join(details, "; "));
}

Status CheckAgainstBaseline(const std::vector<ComparedRun>& baseline,
                            const std::vector<ComparedRun>& sweep, BaselineCheck* out,
                            const RunSelection& selection) {
  *out = BaselineCheck{};
  const auto points_a = LoadPoints(baseline), points_b = LoadPoints(sweep);
  const bool share_a_point = std::any_of(points_b.begin(), points_b.end(), [&](const auto& p) {
    return std::find(points_a.begin(), points_a.end(), p) != points_a.end();
  });
  if (!share_a_point) {
    out->changes.push_back({"load.points", Join(points_a, ", "), Join(points_b, ", ")});
  } else {
    if (Status s = CompareRuns(baseline, sweep, &out->comparison, selection); !s.ok()) return s;
    for (const auto& pair : out->comparison.pairs) {
      for (const auto& change : pair.condition_changes) {
        const bool seen = std::any_of(out->changes.begin(), out->changes.end(), [&](const auto& c) {
          return c.name == change.name && c.a == change.a && c.b == change.b;
        });
        if (!seen) out->changes.push_back(change);
      }
    }
  }
  out->new_baseline = !out->changes.empty();
  if (out->new_baseline) out->reason = NewBaselineReason(out->changes);
  return Status::Ok();
}

}  // namespace servesweep::report
