#include "matrix/load_ladder.h"

#include <fmt/format.h>

#include "matrix/spec_digest.h"

namespace servesweep::matrix {

std::string LoadLadderOf(schema::RunSpec::Reader spec) {
  return "ladder-" + SpecDigestWithout(spec, [](schema::RunSpec::Builder copy) {
           copy.setRunId("");
           copy.setIndex(0);
           copy.setRepeat(0);
           copy.setLabel("");
           copy.setBaseline(false);
           copy.setCompareGroup("");  // holds the level when the level is not a compared axis
           auto w = copy.getWorkload();
           w.setConcurrency(0);
           w.setRequestRatePerS(0);
           w.setMaxInFlight(0);
           w.setSeed(0);
           // A ladder's length is often scaled with its level (a zip of concurrency and
           // num_requests).
           w.setNumRequests(0);
           w.setWarmupRequests(0);
         });
}

LoadLevel LoadLevelOf(schema::RunSpec::Reader spec) {
  const auto w = spec.getWorkload();
  return {w.getConcurrency(), w.getRequestRatePerS(), w.getMaxInFlight()};
}

bool IsAbove(const LoadLevel& a, const LoadLevel& b) {
  // A cap of 0 means none: the largest cap of all.
  auto cap_rank = [](uint32_t cap) { return cap == 0 ? UINT64_MAX : uint64_t{cap}; };
  const bool no_less = a.concurrency >= b.concurrency &&
                       a.request_rate_per_s >= b.request_rate_per_s &&
                       cap_rank(a.max_in_flight) >= cap_rank(b.max_in_flight);
  const bool more = a.concurrency > b.concurrency || a.request_rate_per_s > b.request_rate_per_s ||
                    cap_rank(a.max_in_flight) > cap_rank(b.max_in_flight);
  return no_less && more;
}

std::string DescribeLoadLevel(const LoadLevel& level) {
  std::string out;
  if (level.concurrency > 0) out = fmt::format("concurrency {}", level.concurrency);
  if (level.request_rate_per_s > 0) {
    out += fmt::format("{}request_rate {:g}/s", out.empty() ? "" : " ", level.request_rate_per_s);
  }
  if (level.max_in_flight > 0) {
    out += fmt::format("{}max_in_flight {}", out.empty() ? "" : " ", level.max_in_flight);
  }
  return out.empty() ? "no load level" : out;
}

std::string SkippedBecause(const LoadLevel& saturated, const std::string& saturated_run_id,
                           const std::string& evidence) {
  return fmt::format("skipped: {} ({}) of its load ladder was over-saturated: {}",
                     DescribeLoadLevel(saturated), saturated_run_id, evidence);
}

void SaturatedLevels::Add(schema::RunSpec::Reader spec, const std::string& evidence) {
  by_ladder_[LoadLadderOf(spec)].push_back(
      {LoadLevelOf(spec), std::string(spec.getRunId()), evidence});
}

std::string SaturatedLevels::SkipReason(schema::RunSpec::Reader spec) const {
  const auto of = by_ladder_.find(LoadLadderOf(spec));
  if (of == by_ladder_.end()) return "";
  const LoadLevel level = LoadLevelOf(spec);
  for (const Saturated& s : of->second) {
    if (IsAbove(level, s.level)) return SkippedBecause(s.level, s.run_id, s.evidence);
  }
  return "";
}

}  // namespace servesweep::matrix
