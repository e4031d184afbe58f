// The performance model's figures as reality may turn out, within the model's cross-validated
// error band (perfmodel/error_bands.h: predicted / measured - 1 lies in [low_pct, high_pct] for
// 80% of the figures held out of the fit). The search prunes with these bounds: a configuration
// whose optimistic bound cannot beat what the leader is known to reach is not run
// (docs/search.md#model-first).
//
// Thread-safety: pure functions.
#pragma once

#include <string_view>
#include <vector>

#include "perfmodel/error_bands.h"
#include "search/level_verdict.h"

namespace servesweep::search {

enum class Side { kOptimistic, kPessimistic };

// A figure the model gives only an upper bound of: energy per token or request (energy_per_*),
// its GPUs at maximum power, as it has no power model. Never a prediction to measure the
// model's error by or to fit it to.
bool IsUpperBoundOnly(std::string_view column);

// Every figure of `predicted` moved to the end of the band that is best (optimistic) or worst
// (pessimistic) for the search: latencies (*_ms) down or up, throughputs and speeds
// (*throughput*, goodput, *_tok_per_s) up or down, costs (cost_*) down or up; the rest (success
// rate, GPU count) as predicted. Energy per token (energy_per_*), which the model prices at
// maximum power (an upper bound), goes to 0 (optimistic: no configuration is pruned on energy
// alone) or up as a cost does (pessimistic). An unknown band leaves nothing to bound: see
// CanPrune.
Figures WithinBand(const Figures& predicted, const perfmodel::KindBand& band, Side side);

// The model's error band as this search's own runs measured it: the interval that held 80% of
// `errors_pct` (predicted / measured - 1, in %, of the objective and the constrained figures of
// every counted run; its 10th and 90th percentiles) from `cases` configurations. The model is not
// re-fitted on them, so every error is one it did not see; the band is known from
// perfmodel::kMinBandCases configurations, as a shipped one.
perfmodel::KindBand ObservedBand(const std::vector<double>& errors_pct, size_t cases);

// Whether a configuration whose best plausible objective is `optimistic` can be left unrun
// next to a leader known to reach `leader` (measured at its limit). Never with an unknown
// band (`band_known` false) or a NaN bound: the model's word alone is not enough.
bool CanPrune(Objective objective, bool band_known, double optimistic, double leader);

}  // namespace servesweep::search
