#include "workload/prefix_hit_rate.h"

#include <fmt/format.h>

#include <cmath>

namespace servesweep::workload {

Status PlanSharedPrefix(double rate, uint32_t block_tok, const std::vector<uint32_t>& input_len_tok,
                        SharedPrefixPlan* out) {
  if (!(rate >= 0 && rate < 1)) {
    return Status::InvalidArgument(
        fmt::format("expected 'prefix_hit_rate' in [0, 1) (the fraction of prompt tokens the "
                    "cache serves), found {:g}",
                    rate));
  }
  if (block_tok < 1) {
    return Status::InvalidArgument(
        fmt::format("expected a cache block of at least 1 token, found {}", block_tok));
  }
  SharedPrefixPlan plan;
  uint64_t prefix_sum = 0, input_sum = 0;
  for (uint32_t input : input_len_tok) {
    uint64_t prefix = static_cast<uint64_t>(std::round(rate * input / block_tok)) * block_tok;
    // The prompt's last token is computed whatever is cached: the whole blocks before it at most.
    if (prefix >= input) prefix = input > 0 ? (input - 1) / block_tok * block_tok : 0;
    plan.prefix_len_tok.push_back(static_cast<uint32_t>(prefix));
    prefix_sum += prefix;
    input_sum += input;
  }
  plan.rate = input_sum > 0 ? static_cast<double>(prefix_sum) / static_cast<double>(input_sum) : 0;
  if (std::abs(plan.rate - rate) > kPrefixHitRateTolerance) {
    // Rounding moves each prompt by at most half a block: prompts this long keep it within the
    // tolerance at any rate.
    const double need_tok = std::ceil(block_tok / (2 * kPrefixHitRateTolerance));
    return Status::InvalidArgument(fmt::format(
        "prefix_hit_rate {:g} cannot be set within {:g} points with {}-token cache blocks: "
        "the prompts allow {:.1f}%; expected input lengths of at least {:.0f} tokens (enough for "
        "any rate) or a rate those blocks allow",
        rate, kPrefixHitRateTolerance * 100, block_tok, plan.rate * 100, need_tok));
  }
  *out = std::move(plan);
  return Status::Ok();
}

}  // namespace servesweep::workload
