#include "search/prediction_bounds.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace servesweep::search {
namespace {

enum class Sense { kHigherIsBetter, kLowerIsBetter, kUnbounded };

Sense SenseOf(const std::string& column) {
  if (column.starts_with("cost_") || column.ends_with("_ms")) return Sense::kLowerIsBetter;
  if (column.find("throughput") != std::string::npos || column.starts_with("goodput") ||
      column.ends_with("_tok_per_s")) {
    return Sense::kHigherIsBetter;
  }
  return Sense::kUnbounded;
}

}  // namespace

bool IsUpperBoundOnly(std::string_view column) { return column.starts_with("energy_per_"); }

Figures WithinBand(const Figures& predicted, const perfmodel::KindBand& band, Side side) {
  Figures out = predicted;
  if (!band.known() || std::isnan(band.low_pct) || std::isnan(band.high_pct)) return out;
  // measured = predicted / (1 + e), e in [low, high]: the smallest measured figure at e = high.
  const double smallest = 1 / (1 + band.high_pct / 100), largest = 1 / (1 + band.low_pct / 100);
  for (auto& [column, value] : out) {
    // An upper bound: the pessimistic end is a throughput's error above it, nothing below.
    if (IsUpperBoundOnly(column)) {
      value = side == Side::kOptimistic ? 0 : value / smallest;
      continue;
    }
    const Sense sense = SenseOf(column);
    if (sense == Sense::kUnbounded) continue;
    // A cost is a price over a throughput: its error runs the other way round.
    const bool cost = column.starts_with("cost_");
    const double low = cost ? 1 / largest : smallest, high = cost ? 1 / smallest : largest;
    const bool want_high = (sense == Sense::kHigherIsBetter) == (side == Side::kOptimistic);
    value *= want_high ? high : low;
  }
  return out;
}

perfmodel::KindBand ObservedBand(const std::vector<double>& errors_pct, size_t cases) {
  perfmodel::KindBand band;
  band.cases = cases;
  band.figures = errors_pct.size();
  band.low_pct = band.high_pct = std::numeric_limits<double>::quiet_NaN();
  if (errors_pct.empty()) {
    band.cases = 0;  // nothing measured: unknown however many configurations ran
    return band;
  }
  // The interval that held 80% of them, as the shipped bands are defined (error_bands.h).
  std::vector<double> sorted = errors_pct;
  std::sort(sorted.begin(), sorted.end());
  const double last = static_cast<double>(sorted.size() - 1);
  band.low_pct = sorted[static_cast<size_t>(std::lround(0.1 * last))];
  band.high_pct = sorted[static_cast<size_t>(std::lround(0.9 * last))];
  return band;
}

bool CanPrune(Objective objective, bool band_known, double optimistic, double leader) {
  if (!band_known || std::isnan(optimistic) || std::isnan(leader)) return false;
  return !Better(objective, optimistic, leader);
}

}  // namespace servesweep::search
