#include "perfmodel/profiles.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace servesweep::perfmodel {
namespace {

HardwareProfile Hw(const std::string& name) {
  HardwareProfile hw;
  Status s = LoadHardwareProfile(name, &hw);
  EXPECT_TRUE(s.ok()) << s.message();
  return hw;
}

ModelProfile Model(const std::string& name) {
  ModelProfile m;
  Status s = LoadModelProfile(name, &m);
  EXPECT_TRUE(s.ok()) << s.message();
  return m;
}

double Kv(const ModelProfile& m, const std::string& dtype) {
  double bytes = 0;
  Status s = KvBytesPerToken(m, dtype, &bytes);
  EXPECT_TRUE(s.ok()) << s.message();
  return bytes;
}

TEST(ProfilesTest, EveryShippedProfileLoadsByName) {
  EXPECT_EQ(ShippedHardwareProfiles(),
            (std::vector<std::string>{"a100", "b200", "cpu", "cpu-2core", "gb200", "gb300", "h100",
                                      "h200", "h200-measured", "mi300x"}));
  EXPECT_EQ(ShippedModelProfiles(),
            (std::vector<std::string>{"deepseek-v3", "deepseek-v4.1-flash", "gpt-oss-120b",
                                      "gpt-oss-20b", "llama-2-70b", "llama-3.1-405b",
                                      "llama-3.1-70b", "llama-3.1-8b", "qwen3-14b",
                                      "qwen3-235b-a22b", "qwen3-30b-a3b", "qwen3-8b",
                                      "smollm2-135m"}));
  for (const auto& name : ShippedHardwareProfiles()) EXPECT_EQ(Hw(name).name, name);
  for (const auto& name : ShippedModelProfiles()) EXPECT_EQ(Model(name).name, name);
}

TEST(ProfilesTest, HardwareFiguresAreInSiUnits) {
  const HardwareProfile h200 = Hw("h200");
  EXPECT_DOUBLE_EQ(h200.memory_bytes, 141e9);
  EXPECT_DOUBLE_EQ(h200.hbm_bytes_per_s, 4.8e12);
  EXPECT_DOUBLE_EQ(h200.peak_bf16_flops, 989e12);
  EXPECT_DOUBLE_EQ(h200.peak_fp8_flops, 1979e12);
  EXPECT_DOUBLE_EQ(h200.intra_node.busbw_bytes_per_s, 450e9);
  EXPECT_EQ(h200.intra_node.latency_ns, 5000);
  EXPECT_EQ(h200.gpus_per_node, 8);
  EXPECT_DOUBLE_EQ(h200.hbm_efficiency, 0.85);
  EXPECT_EQ(Hw("gb300").gpus_per_node, 72);
  EXPECT_DOUBLE_EQ(Hw("b200").peak_fp4_flops, 9000e12);
  EXPECT_NE(Hw("h200").source.find("profiles/hardware/h200.yaml (embedded)"), std::string::npos);
}

// Hand-computed: 2 (K and V) x layers x kv heads x head dim x bytes; MLA: layers x (512 + 64).
TEST(ProfilesTest, KvBytesPerTokenOfEveryShippedModel) {
  EXPECT_DOUBLE_EQ(Kv(Model("llama-3.1-8b"), "bf16"), 2.0 * 32 * 8 * 128 * 2);  // 131072
  EXPECT_DOUBLE_EQ(Kv(Model("llama-3.1-8b"), "auto"), 131072);
  EXPECT_DOUBLE_EQ(Kv(Model("llama-3.1-8b"), "fp8"), 65536);
  EXPECT_DOUBLE_EQ(Kv(Model("llama-3.1-70b"), "bf16"), 2.0 * 80 * 8 * 128 * 2);  // 327680
  EXPECT_DOUBLE_EQ(Kv(Model("qwen3-30b-a3b"), "bf16"), 2.0 * 48 * 4 * 128 * 2);  // 98304
  EXPECT_DOUBLE_EQ(Kv(Model("deepseek-v3"), "bf16"), 61.0 * (512 + 64) * 2);     // 70272
  EXPECT_DOUBLE_EQ(Kv(Model("deepseek-v3"), "fp8"), 35136);
  EXPECT_DOUBLE_EQ(Kv(Model("deepseek-v4.1-flash"), "auto"), 890);
  EXPECT_DOUBLE_EQ(Kv(Model("deepseek-v4.1-flash"), "fp4"), 890);
  EXPECT_DOUBLE_EQ(Model("deepseek-v4.1-flash").prefill_overhead, 0.05);

  double bytes = 0;
  Status s = KvBytesPerToken(Model("deepseek-v4.1-flash"), "fp8", &bytes);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("fp4 only"), std::string::npos) << s.message();
  s = KvBytesPerToken(Model("llama-3.1-8b"), "int3", &bytes);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("found 'int3'"), std::string::npos) << s.message();
}

TEST(ProfilesTest, ParameterCountsMatchTheArchitecture) {
  // Llama 3.1 8B: 32 x (attention 41,943,040 + MLP 176,160,768) + 2 x 128256 x 4096.
  const ModelParams llama = ComputeParams(Model("llama-3.1-8b"));
  EXPECT_DOUBLE_EQ(llama.total, 8'029'995'008.0);
  EXPECT_DOUBLE_EQ(llama.active, llama.total);
  EXPECT_DOUBLE_EQ(llama.routed_total, 0);

  // Qwen3-30B-A3B: 48 x (attention 18,874,368 + router 262,144 + 128 or 8 experts of 4,718,592)
  // + 2 x 151936 x 2048.
  const ModelParams qwen = ComputeParams(Model("qwen3-30b-a3b"));
  EXPECT_DOUBLE_EQ(qwen.total, 30'531'911'680.0);
  EXPECT_DOUBLE_EQ(qwen.active, 3'352'821'760.0);
  EXPECT_DOUBLE_EQ(qwen.expert_each, 4'718'592.0);
  EXPECT_DOUBLE_EQ(qwen.routed_total, 48.0 * 128 * 4'718'592);

  // DeepSeek-V3: the published 671B total and 37B active, within 1%.
  const ModelParams v3 = ComputeParams(Model("deepseek-v3"));
  EXPECT_NEAR(v3.total / 1e9, 671, 6.7);
  EXPECT_NEAR(v3.active / 1e9, 37, 0.8);
  EXPECT_EQ(v3.moe_layers, 58);

  const ModelParams flash = ComputeParams(Model("deepseek-v4.1-flash"));
  EXPECT_DOUBLE_EQ(flash.total, 552e9);
  EXPECT_DOUBLE_EQ(flash.active, 16e9);
  EXPECT_DOUBLE_EQ(flash.routed_total, 40.0 * 384 * 3 * 5120 * 2304);
  const ModelProfile flash_model = Model("deepseek-v4.1-flash");
  EXPECT_EQ(flash_model.sliding_layers, 2);
  EXPECT_EQ(flash_model.sliding_window_tok, 128);
  EXPECT_EQ(flash_model.sparse_layers, 38);
  EXPECT_EQ(flash_model.sparse_top_k, 512);

  double bytes = 0;
  ASSERT_TRUE(WeightBytesPerParam(Model("deepseek-v3"), "native", &bytes).ok());
  EXPECT_DOUBLE_EQ(bytes, 1.0);
  ASSERT_TRUE(WeightBytesPerParam(Model("deepseek-v4.1-flash"), "", &bytes).ok());
  EXPECT_DOUBLE_EQ(bytes, 0.523);
  EXPECT_FALSE(WeightBytesPerParam(Model("llama-3.1-8b"), "int2", &bytes).ok());
}

constexpr char kGoodHardware[] = R"(name: test-gpu
gpus_per_node: 4
memory_gb: 10
hbm_gb_per_s: 1000
peak_bf16_tflops: 100
intra_node: {busbw_gb_per_s: 100, latency_us: 2}
inter_node: {busbw_gb_per_s: 10, latency_us: 20}
)";

TEST(ProfilesTest, ParsesAUserHardwareProfileWithDefaults) {
  HardwareProfile hw;
  Status s = ParseHardwareProfile(kGoodHardware, "gpu.yaml", &hw);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(hw.name, "test-gpu");
  EXPECT_DOUBLE_EQ(hw.peak_fp8_flops, 100e12);  // no fp8 figure: the bf16 rate
  EXPECT_DOUBLE_EQ(hw.flops_efficiency, 0.6);
  EXPECT_EQ(hw.inter_node.latency_ns, 20000);
}

std::string HardwareError(const std::string& yaml) {
  HardwareProfile hw;
  Status s = ParseHardwareProfile(yaml, "gpu.yaml", &hw);
  EXPECT_FALSE(s.ok());
  return s.message();
}

TEST(ProfilesTest, ErrorsSayFileLineColumnExpectedAndFound) {
  std::string text = kGoodHardware;
  EXPECT_EQ(HardwareError(text + "memroy_gb: 3\n"),
            "gpu.yaml:8:1: unknown key 'memroy_gb' in the hardware profile (did you mean "
            "'memory_gb'?); expected one of: name, gpus_per_node, memory_gb, hbm_gb_per_s, "
            "peak_bf16_tflops, peak_fp8_tflops, peak_fp4_tflops, host_link_gb_per_s, max_power_w, "
            "intra_node, inter_node, efficiency");

  std::string bad_number = text;
  bad_number.replace(bad_number.find("1000"), 4, "fast");
  EXPECT_EQ(HardwareError(bad_number),
            "gpu.yaml:4:15: expected 'hbm_gb_per_s' to be a number >= 0.001, found 'fast'");

  std::string nested = text;
  nested.replace(nested.find("latency_us: 20"), 14, "latncy_us: 20");
  EXPECT_EQ(HardwareError(nested),
            "gpu.yaml:7:34: unknown key 'latncy_us' in the hardware profile.inter_node (did you "
            "mean 'latency_us'?); expected one of: busbw_gb_per_s, latency_us");

  std::string missing = text;
  missing.erase(missing.find("memory_gb: 10\n"), 14);
  EXPECT_EQ(HardwareError(missing),
            "gpu.yaml:1:1: expected 'memory_gb' in the hardware profile, found none");

  EXPECT_EQ(HardwareError(text + "efficiency: {hbm: 1.5}\n"),
            "gpu.yaml:8:19: expected 'hbm' to be a fraction in (0, 1], found '1.5'");

  const std::string syntax = HardwareError("name: [a, b\n");
  EXPECT_EQ(syntax.substr(0, 9), "gpu.yaml:") << syntax;
  EXPECT_NE(syntax.find(":2:"), std::string::npos) << syntax;  // the line where it broke
}

TEST(ProfilesTest, ModelErrorsNameTheKey) {
  ModelProfile m;
  Status s = ParseModelProfile(
      "name: m\nlayers: 2\nhidden_size: 8\nintermediate_size: 16\nvocab_size: 10\n"
      "attention: {kind: mha, heads: 2}\n",
      "m.yaml", &m);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "m.yaml:6:19: expected attention kind 'gqa' or 'mla', found 'mha'");

  s = ParseModelProfile(
      "name: m\nlayers: 2\nhidden_size: 8\nintermediate_size: 16\nvocab_size: 10\n"
      "attention: {kind: gqa, heads: 2, kv_heads: 1, head_dim: 4}\n"
      "moe: {experts: 4, active_experts: 8, expert_intermediate_size: 4}\n",
      "m.yaml", &m);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "m.yaml:7:35: expected active_experts <= experts (4), found 8");

  s = ParseModelProfile(
      "name: m\nlayers: -2\nhidden_size: 8\nintermediate_size: 16\nvocab_size: 10\n"
      "attention: {kind: gqa, heads: 2, kv_heads: 1, head_dim: 4}\n",
      "m.yaml", &m);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "m.yaml:2:9: expected 'layers' to be an integer >= 1, found '-2'");
}

TEST(ProfilesTest, LoadsAPathAndRefusesAnUnknownName) {
  char dir[] = "/tmp/perfmodel_profiles_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/my-gpu.yaml";
  std::ofstream(path) << kGoodHardware;
  HardwareProfile hw;
  Status s = LoadHardwareProfile(path, &hw);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(hw.source, path);
  std::remove(path.c_str());
  rmdir(dir);

  s = LoadHardwareProfile("h300", &hw);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "unknown hardware profile 'h300': expected a shipped name (a100, b200, cpu, cpu-2core, "
            "gb200, gb300, h100, h200, h200-measured, mi300x) or a path to a .yaml file");
  ModelProfile model;
  s = LoadModelProfile("/nonexistent/model.yaml", &model);
  EXPECT_EQ(s.message(), "/nonexistent/model.yaml: cannot open the profile for reading");
}

// The shipped h200-measured profile is what HardwareFromProbes makes of the probe figures.
TEST(ProfilesTest, HardwareFromProbesMatchesTheShippedMeasuredProfile) {
  const HardwareProfile base = Hw("h200");
  ProbeFigures probes;
  probes.hbm_bytes_per_s = 3.96e12;
  probes.bf16_flops = 792e12;
  probes.fp8_flops = 1477e12;
  probes.host_link_bytes_per_s = 55e9;
  const HardwareProfile built = HardwareFromProbes(base, probes);
  const HardwareProfile shipped = Hw("h200-measured");
  EXPECT_EQ(built.name, shipped.name);
  EXPECT_DOUBLE_EQ(built.hbm_bytes_per_s * built.hbm_efficiency,
                   shipped.hbm_bytes_per_s * shipped.hbm_efficiency);
  EXPECT_DOUBLE_EQ(built.peak_bf16_flops * built.flops_efficiency,
                   shipped.peak_bf16_flops * shipped.flops_efficiency);
  EXPECT_DOUBLE_EQ(built.peak_fp8_flops * built.flops_efficiency,
                   shipped.peak_fp8_flops * shipped.flops_efficiency);
  EXPECT_DOUBLE_EQ(built.host_link_bytes_per_s, shipped.host_link_bytes_per_s);
  EXPECT_DOUBLE_EQ(built.memory_bytes, shipped.memory_bytes);
  // Unmeasured links keep the base's achievable bandwidth.
  EXPECT_DOUBLE_EQ(built.intra_node.busbw_bytes_per_s * built.intra_node_efficiency,
                   shipped.intra_node.busbw_bytes_per_s * shipped.intra_node_efficiency);
  EXPECT_DOUBLE_EQ(built.hbm_efficiency, 1.0);
  EXPECT_DOUBLE_EQ(built.intra_node_efficiency, 0.8);  // not measured: the base's factor

  probes = {};
  probes.nccl_busbw_bytes_per_s = 300e9;
  const HardwareProfile nccl = HardwareFromProbes(base, probes);
  EXPECT_DOUBLE_EQ(nccl.intra_node.busbw_bytes_per_s, 300e9);
  EXPECT_DOUBLE_EQ(nccl.intra_node_efficiency, 1.0);
  EXPECT_DOUBLE_EQ(nccl.hbm_bytes_per_s, base.hbm_bytes_per_s);
  EXPECT_DOUBLE_EQ(nccl.hbm_efficiency, base.hbm_efficiency);
}

// mi300x keeps the NVIDIA profiles' share of what microbenchmarks reach (its file cites each
// figure): its serving efficiency is h100's scaled by MI300X's measured fraction of peak over
// the NVIDIA GPUs' measured fraction. Published figures, TFLOP/s or TB/s against the datasheets.
TEST(ProfilesTest, Mi300xEfficienciesScaleNvidiasByPublishedMicrobenchmarks) {
  const HardwareProfile mi300x = Hw("mi300x");
  const HardwareProfile h100 = Hw("h100");
  const double mi300x_gemm = (708.0 / 1307 + 1248.0 / 2615) / 2;  // AMD MAF BF16, FP8 (1224-1273)
  const double nvidia_gemm = (798.0 / 989 + 792.0 / 989 + 1477.0 / 1979) / 3;  // H100, H200 probe
  // 0.39, rounded to 0.4 in the file.
  EXPECT_NEAR(mi300x.flops_efficiency, h100.flops_efficiency * mi300x_gemm / nvidia_gemm, 0.015);
  const double mi300x_hbm = (4.15 + 4.10) / 2 / 5.3;           // BabelStream copy, triad
  const double nvidia_hbm = (2.97 / 3.35 + 3.96 / 4.8) / 2;    // H100 triad, H200 probe copy
  EXPECT_NEAR(mi300x.hbm_efficiency, h100.hbm_efficiency * mi300x_hbm / nvidia_hbm, 0.01);
  // rccl-tests all-reduce busbw at 1-16 GB: 315-319 GB/s.
  EXPECT_NEAR(mi300x.intra_node.busbw_bytes_per_s * mi300x.intra_node_efficiency, 317e9, 5e9);
}

}  // namespace
}  // namespace servesweep::perfmodel
