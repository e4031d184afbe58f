#include "results/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace servesweep::results {

Price PriceOf(schema::EngineConfig::Reader config) {
  Price p;
  p.gpu_hour = config.getPriceGpuHour();
  p.input_per_mtok = config.getPriceInputPerMTok();
  p.output_per_mtok = config.getPriceOutputPerMTok();
  p.cached_input_per_mtok = config.getPriceCachedInputPerMTok();
  p.currency = config.getCurrency();
  return p;
}

Cost CostOf(const Price& price, const CostInputs& in) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  Cost cost;
  if (!price.priced()) return cost;
  std::string basis;
  double total = 0;
  if (price.gpu_hour > 0) {
    if (!(in.gpu_count > 0) || !std::isfinite(in.duration_s)) return cost;
    total += price.gpu_hour * in.gpu_count * in.duration_s / 3600;
    basis = fmt::format("{:g} GPU(s) x {:.1f} s x {:g}/GPU-hour", in.gpu_count, in.duration_s,
                        price.gpu_hour);
  }
  if (price.input_per_mtok > 0 || price.output_per_mtok > 0 || price.cached_input_per_mtok > 0) {
    if (!std::isfinite(in.input_tok) || !std::isfinite(in.output_tok)) return cost;
    double cached = 0;
    std::string cached_text;
    if (price.cached_input_per_mtok > 0) {
      if (std::isfinite(in.cached_input_tok)) {
        cached = std::clamp(in.cached_input_tok, 0.0, in.input_tok);
        cached_text =
            fmt::format(" ({:.0f} cached at {:g}/Mtok)", cached, price.cached_input_per_mtok);
      } else {
        cached_text = " (cached input tokens not known: all charged at the input price)";
      }
    }
    total += ((in.input_tok - cached) * price.input_per_mtok +
              cached * price.cached_input_per_mtok + in.output_tok * price.output_per_mtok) /
             1e6;
    basis += fmt::format("{}input {:.0f} tok at {:g}/Mtok{}, output {:.0f} tok at {:g}/Mtok",
                         basis.empty() ? "" : " + ", in.input_tok, price.input_per_mtok,
                         cached_text, in.output_tok, price.output_per_mtok);
  }
  cost.priced = true;
  cost.total = total;
  cost.per_mtok_output = in.output_tok > 0 ? total / in.output_tok * 1e6 : kNaN;
  cost.per_request = in.completed > 0 ? total / in.completed : kNaN;
  cost.basis = basis;
  return cost;
}

}  // namespace servesweep::results
