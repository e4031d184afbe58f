#include "workload/lora_choice.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/sampling.h"

namespace servesweep::workload {

Status AdapterCumulativeWeights(const std::string& choice, double zipf_skew, size_t count,
                                std::vector<double>* out) {
  out->clear();
  if (count == 0) {
    return Status::InvalidArgument(
        "expected at least one adapter in engine_config.lora.adapters to choose from, found none");
  }
  if (choice != "uniform" && choice != "zipf") {
    return Status::InvalidArgument(fmt::format(
        "expected the adapter choice to be uniform, zipf or trace, found '{}'", choice));
  }
  if (choice == "zipf" && !(zipf_skew > 0)) {
    return Status::InvalidArgument(
        fmt::format("expected the Zipf skew to be > 0, found {}", zipf_skew));
  }
  std::vector<double> weights(count, 1.0);
  if (choice == "zipf") {
    for (size_t k = 0; k < count; ++k)
      weights[k] = 1.0 / std::pow(static_cast<double>(k + 1), zipf_skew);
  }
  double total = 0;
  for (double w : weights) total += w;
  double running = 0;
  for (double w : weights) {
    running += w / total;
    out->push_back(running);
  }
  out->back() = 1.0;  // no rounding gap above the last adapter
  return Status::Ok();
}

int32_t PickAdapter(uint64_t seed, uint64_t request_index, const std::vector<double>& cumulative) {
  if (cumulative.empty()) return -1;
  // 53 random bits: a uniform double in [0, 1).
  const double u =
      static_cast<double>(SplitMix64(seed * 0x100000001b3ull ^ SplitMix64(request_index)) >> 11) *
      (1.0 / 9007199254740992.0);
  const auto it = std::upper_bound(cumulative.begin(), cumulative.end(), u);
  return static_cast<int32_t>(std::min<size_t>(it - cumulative.begin(), cumulative.size() - 1));
}

std::vector<AdapterRequest> AdapterRequestsFor(schema::RunSpec::Reader spec) {
  std::vector<AdapterRequest> out;
  const std::string engine = spec.getEngine().cStr();
  const std::string base = spec.getModel().cStr();
  int32_t id = 0;
  for (auto adapter : spec.getEngineConfig().getLoraAdapters()) {
    AdapterRequest request;
    request.name = adapter.getName().cStr();
    if (engine == "sglang") {
      request.model = base + ":" + request.name;
    } else if (engine == "llamacpp") {
      request.model = base;
      request.lora_id = id;
    } else {
      request.model = request.name;
    }
    ++id;
    out.push_back(std::move(request));
  }
  return out;
}

}  // namespace servesweep::workload
