// The /metrics reader and the engine-signal mapping, on a saved vLLM-style sample.
#include "scraper/engine_signals.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "scraper/prometheus_text.h"
#include "scraper/signal_names_check.h"
#include "testing/process_helpers.h"

namespace servesweep::scraper {
namespace {

// Shaped like vLLM 0.10's /metrics (two DP ranks label the same gauge twice).
const char* kVllmSample =
    R"(# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
vllm:num_requests_waiting{engine="0",model_name="m"} 1.0
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:num_preemptions_total{engine="0",model_name="m"} 7.0
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1024.0
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 512.0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 9.0
process_cpu_seconds_total 12.5 1700000000000
odd{label="a}b"} 1
broken_line_without_value
)";

TEST(PrometheusText, ParsesSamplesLabelsAndTimestamps) {
  size_t skipped = 0;
  const auto samples = ParsePrometheusText(kVllmSample, &skipped);
  ASSERT_EQ(samples.size(), 10u);
  EXPECT_EQ(skipped, 1u);
  EXPECT_EQ(samples[0].name, "vllm:num_requests_running");
  EXPECT_EQ(samples[0].labels, "engine=\"0\",model_name=\"m\"");
  EXPECT_EQ(samples[8].name, "process_cpu_seconds_total");
  EXPECT_EQ(samples[8].value, 12.5);
  EXPECT_EQ(samples[9].labels, "label=\"a}b\"");
}

TEST(EngineSignals, MapsVllmNamesAndSumsRanks) {
  const auto signals = ExtractSignals("vllm", ParsePrometheusText(kVllmSample));
  auto value = [&](const std::string& name) {
    for (const auto& s : signals) {
      if (s.signal == name) return s.value;
    }
    return std::nan("");
  };
  EXPECT_EQ(value("running"), 5.0);
  EXPECT_EQ(value("waiting"), 1.0);
  EXPECT_EQ(value("kv_cache_usage"), 0.25);
  EXPECT_EQ(value("preemptions"), 7.0);
  EXPECT_EQ(value("prefix_cache_hits"), 512.0);
  EXPECT_TRUE(std::isnan(value("spec_decode_acceptance")));
  EXPECT_TRUE(ExtractSignals("sglang", ParsePrometheusText(kVllmSample)).empty());
}

TEST(EngineSignals, MapsLlamacppNamesFromARealScrape) {
  size_t skipped = 0;
  const auto samples =
      ParsePrometheusText(testing::ReadSourceFile("tests/data/llamacpp_metrics.txt"), &skipped);
  EXPECT_EQ(skipped, 0u);
  const auto signals = ExtractSignals("llamacpp", samples);
  auto value = [&](const std::string& name) {
    for (const auto& s : signals) {
      if (s.signal == name) return s.value;
    }
    return std::nan("");
  };
  EXPECT_EQ(value("running"), 2.0);  // 3 requests on 2 slots
  EXPECT_EQ(value("waiting"), 1.0);
  EXPECT_EQ(value("generation_tokens"), 32.0);
  // prompt_tokens_total excludes the 4 cached tokens; the prompt tokens are both together.
  EXPECT_EQ(value("prompt_tokens"), 18.0);
  EXPECT_EQ(value("prefix_cache_hits"), 4.0);
  EXPECT_EQ(value("prefix_cache_queries"), 18.0);
  EXPECT_TRUE(std::isnan(value("kv_cache_usage")));
  EXPECT_TRUE(ExtractSignals("vllm", samples).empty());
}

TEST(EngineSignals, MapsSglangNames) {
  const auto signals =
      ExtractSignals("sglang", ParsePrometheusText(R"(# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m",tp_rank="0"} 0.5
sglang:num_running_reqs{model_name="m",tp_rank="0"} 12
sglang:num_queue_reqs{model_name="m",tp_rank="0"} 3
sglang:cached_tokens_total{model_name="m"} 100
sglang:prompt_tokens_total{model_name="m"} 400
)"));
  std::map<std::string, double> by_name;
  for (const auto& s : signals) by_name[s.signal] = s.value;
  EXPECT_EQ(by_name["kv_cache_usage"], 0.5);
  EXPECT_EQ(by_name["running"], 12.0);
  EXPECT_EQ(by_name["waiting"], 3.0);
  EXPECT_EQ(by_name["prefix_cache_hits"], 100.0);
  EXPECT_EQ(by_name["prefix_cache_queries"], 400.0);
}

TEST(EngineSignals, GaugesTakeTheMaximumCountersTheIncrease) {
  EXPECT_EQ(ReduceSignal("running", {1, 7, 3}), 7.0);
  EXPECT_EQ(ReduceSignal("preemptions", {10, 12, 19}), 9.0);
  EXPECT_TRUE(std::isnan(ReduceSignal("running", {})));
}

}  // namespace
}  // namespace servesweep::scraper

namespace servesweep::scraper {
namespace {

// The names vLLM 0.33.0, vLLM 0.11.0 and SGLang 0.5.23 define (their collectors as their
// servers register them, dumped by engine_check.py --metrics; CI checks the live packages).
DefinedMetrics SavedMetrics(const std::string& name) {
  const std::string path = "tests/data/engine-facts/metrics-" + name + ".json";
  DefinedMetrics metrics;
  Status s = ParseDefinedMetrics(testing::ReadSourceFile(path), path, &metrics);
  EXPECT_TRUE(s.ok()) << s.message();
  return metrics;
}

TEST(SignalNamesCheck, EveryRowIsAMetricTheInstalledEnginesDefine) {
  const std::vector<DefinedMetrics> installed = {
      SavedMetrics("vllm-0.33.0"), SavedMetrics("vllm-0.11.0"), SavedMetrics("sglang-0.5.23")};
  EXPECT_EQ(installed[0].version, "0.33.0");
  EXPECT_EQ(CheckSignalNames(installed), std::vector<std::string>{});
}

TEST(SignalNamesCheck, ARenamedMetricFailsTheNamesCheck) {
  DefinedMetrics vllm = SavedMetrics("vllm-0.33.0");
  ASSERT_EQ(vllm.exposed.erase("vllm:num_requests_running"), 1u);
  vllm.exposed["vllm:num_requests_active"] = "gauge";  // a release that renames it
  DefinedMetrics sglang = SavedMetrics("sglang-0.5.23");
  sglang.exposed["sglang:num_queue_reqs"] = "counter";  // and one that changes a type
  EXPECT_EQ(CheckSignalNames({vllm, sglang}),
            (std::vector<std::string>{
                "vllm:num_requests_running (running): no installed vllm defines it (checked "
                "0.33.0)",
                "sglang 0.5.23: sglang:num_queue_reqs is a counter, the table reads it as a gauge "
                "(waiting)",
                "vllm 0.33.0 defines none of the metrics the table reads for 'running': it would "
                "scrape nothing"}));
}

}  // namespace
}  // namespace servesweep::scraper
