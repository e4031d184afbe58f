// Engine profiles (perfmodel/engine_profile.h): the shipped ones load, versions choose them, a
// bad file is refused with its position, and named coefficients read and write through.
#include "perfmodel/engine_profile.h"

#include <gtest/gtest.h>

namespace servesweep::perfmodel {
namespace {

TEST(EngineProfile, EveryShippedProfileLoads) {
  const std::vector<std::string> names = ShippedEngineProfiles();
  ASSERT_FALSE(names.empty());
  bool has_default = false;
  for (const auto& name : names) {
    EngineProfile p;
    const Status s = LoadEngineProfile(name, &p);
    ASSERT_TRUE(s.ok()) << name << ": " << s.message();
    EXPECT_EQ(p.name, name);
    has_default = has_default || name == "default";
  }
  EXPECT_TRUE(has_default);
}

TEST(EngineProfile, VersionsCompareNumerically) {
  int order = 0;
  ASSERT_TRUE(CompareVersions("0.10.1", "0.9", &order));
  EXPECT_EQ(order, 1);
  ASSERT_TRUE(CompareVersions("v0.6.0", "0.6", &order));
  EXPECT_EQ(order, 0);
  ASSERT_TRUE(CompareVersions("0.5.3.post3", "0.5.4", &order));
  EXPECT_EQ(order, -1);
  EXPECT_FALSE(CompareVersions("nightly", "0.6", &order));
  EXPECT_TRUE(InVersionRange({"0.6.0", "0.8.0"}, "0.6.3"));
  EXPECT_FALSE(InVersionRange({"0.6.0", "0.8.0"}, "0.8.0"));
  EXPECT_FALSE(InVersionRange({"0.6.0", ""}, "nightly"));
  EXPECT_TRUE(InVersionRange({"", ""}, "nightly"));
}

// The run's engine and version pick the profile; outside every range, the nearest, said why;
// an engine with no profile gets the uncalibrated fallback.
TEST(EngineProfile, SelectedByEngineAndVersion) {
  EngineProfile p;
  std::string why;
  ASSERT_TRUE(SelectEngineProfile("vllm", "0.6.0", "dense", &p, &why).ok());
  EXPECT_EQ(p.name, "vllm-0.6");
  EXPECT_EQ(why, "");
  ASSERT_TRUE(SelectEngineProfile("vllm", "0.11.0", "dense", &p, &why).ok());
  EXPECT_EQ(p.name, "vllm-0.8");
  ASSERT_TRUE(SelectEngineProfile("vllm", "0.21.0", "dense", &p, &why).ok());
  EXPECT_EQ(p.name, "vllm-0.12");
  EXPECT_EQ(why, "");
  ASSERT_TRUE(SelectEngineProfile("vllm", "0.4.2", "dense", &p, &why).ok());
  EXPECT_EQ(p.name, "vllm-0.6");
  EXPECT_NE(why.find("outside every profile's versions"), std::string::npos) << why;
  ASSERT_TRUE(SelectEngineProfile("sglang", "0.5.19", "dense", &p, &why).ok());
  EXPECT_EQ(p.name, "sglang-0.4");
  ASSERT_TRUE(SelectEngineProfile("sglang", "0.5.20", "dense", &p, &why).ok());
  EXPECT_EQ(p.name, "sglang-0.5.20");
  ASSERT_TRUE(SelectEngineProfile("sglang", "0.5.23", "moe", &p, &why).ok());
  EXPECT_EQ(p.name, "sglang-0.5.20");
  EXPECT_EQ(why, "");
  ASSERT_TRUE(SelectEngineProfile("sglang", "0.5.23", "dense", &p, &why).ok());
  EXPECT_EQ(p.name, "sglang-0.5.20");
  EXPECT_EQ(why, "no dense profile for sglang 0.5.23: sglang-0.5.20, fitted on moe models");
  ASSERT_TRUE(SelectEngineProfile("sglang", "", "dense", &p, &why).ok());
  EXPECT_EQ(p.name, "sglang-0.5.20");
  EXPECT_NE(why.find("no sglang version given"), std::string::npos) << why;
  ASSERT_TRUE(SelectEngineProfile("sim", "", "dense", &p, &why).ok());
  EXPECT_EQ(p.name, "default");
  EXPECT_FALSE(p.calibration.fitted);
  EXPECT_GT(p.calibration.typical_error_pct, 0);
}

// A model's kind picks among the profiles of its engine's version: a MoE model the MoE profile,
// a dense one the dense; a kind without its own profile takes one for every kind, else the other
// kind's, said why (a prediction across kinds); out of range, the nearest for the kind.
TEST(EngineProfile, SelectedByTheModelsKind) {
  EngineProfile p;
  std::string why;
  ASSERT_TRUE(SelectEngineProfile("vllm", "0.7.4", "moe", &p, &why).ok());
  EXPECT_EQ(p.name, "vllm-0.6-moe");
  EXPECT_EQ(why, "");
  ASSERT_TRUE(SelectEngineProfile("vllm", "0.7.4", "dense", &p, &why).ok());
  EXPECT_EQ(p.name, "vllm-0.6");
  ASSERT_TRUE(SelectEngineProfile("vllm", "0.7.4", "", &p, &why).ok());
  EXPECT_EQ(p.name, "vllm-0.6");
  ASSERT_TRUE(SelectEngineProfile("sglang", "0.5.5", "moe", &p, &why).ok());
  EXPECT_EQ(p.name, "sglang-0.4-moe");
  ASSERT_TRUE(SelectEngineProfile("vllm", "0.4.3", "moe", &p, &why).ok());
  EXPECT_EQ(p.name, "vllm-0.6-moe");
  EXPECT_NE(why.find("outside every profile's versions"), std::string::npos) << why;
  // For every kind: SGLang 0.3 has one profile, whichever the model.
  ASSERT_TRUE(SelectEngineProfile("sglang", "0.3.6", "moe", &p, &why).ok());
  EXPECT_EQ(p.name, "sglang-0.3");
  EXPECT_EQ(why, "");
  EXPECT_TRUE(ProfileCoversArchitecture(p, "moe"));
  EXPECT_TRUE(ProfileCoversArchitecture(p, "dense"));
  ASSERT_TRUE(LoadEngineProfile("vllm-0.8-moe", &p).ok());
  EXPECT_TRUE(ProfileCoversArchitecture(p, "moe"));
  EXPECT_FALSE(ProfileCoversArchitecture(p, "dense"));
  EXPECT_FALSE(ProfileCoversArchitecture(p, ""));
}

// Only the other kind's profile in range (vLLM 0.12+'s is fitted on a dense model alone): it is
// taken, and said; an unknown kind is refused where it is written.
TEST(EngineProfile, AnotherKindsProfileIsSaid) {
  EngineProfile p;
  std::string why;
  ASSERT_TRUE(SelectEngineProfile("vllm", "0.21.0", "moe", &p, &why).ok());
  EXPECT_EQ(p.name, "vllm-0.12");
  EXPECT_EQ(why, "no moe profile for vllm 0.21.0: vllm-0.12, fitted on dense models");
  ASSERT_TRUE(SelectEngineProfile("vllm", "", "moe", &p, &why).ok());
  EXPECT_EQ(p.name, "vllm-0.12");
  EXPECT_EQ(why,
            "no vllm version given: the newest profile, vllm-0.12; no moe profile for vllm: "
            "vllm-0.12, fitted on dense models");
  const Status s =
      ParseEngineProfile("name: x\nengine: vllm\narchitecture: mixture\n", "e.yaml", &p);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("e.yaml:3:15: expected 'architecture' any, dense or moe, found "
                             "'mixture'"),
            std::string::npos)
      << s.message();
}

TEST(EngineProfile, BadFilesAreRefusedWithTheirPosition) {
  EngineProfile p;
  Status s = ParseEngineProfile("name: x\nengine: vllm\ncpu: {step_uss: 3}\n", "e.yaml", &p);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("e.yaml:3:7: unknown key 'step_uss'"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("did you mean 'step_us'"), std::string::npos) << s.message();
  s = ParseEngineProfile("name: x\nengine: vllm\nkernels: {gemm_efficiency: 1.5}\n", "e.yaml", &p);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("e.yaml:3:28: expected 'kernels.gemm_efficiency' at most 1"),
            std::string::npos)
      << s.message();
  s = ParseEngineProfile("name: x\nengine: vllm\ndefaults: {sliding_kv_ratio: 1.5}\n", "e.yaml",
                         &p);
  EXPECT_NE(s.message().find("e.yaml:3:30: expected 'sliding_kv_ratio' in [0, 1], found 1.5"),
            std::string::npos)
      << s.message();
  s = ParseEngineProfile("name: x\nengine: vllm\nstartup: {graph_capture_s: 5000}\n", "e.yaml",
                         &p);
  EXPECT_NE(s.message().find("e.yaml:3:28: expected 'startup.graph_capture_s' at most 3600"),
            std::string::npos)
      << s.message();
  s = ParseEngineProfile("name: x\nengine: vllm\nversions: {from: latest}\n", "e.yaml", &p);
  EXPECT_NE(s.message().find("expected a version such as 0.6.0, found 'latest'"), std::string::npos)
      << s.message();
}

// What calibrate writes reads back as the same profile.
TEST(EngineProfile, WrittenYamlReadsBackTheSame) {
  EngineProfile p;
  ASSERT_TRUE(LoadEngineProfile("sglang-0.3", &p).ok());
  ASSERT_TRUE(SetCoefficient(&p, "cpu.step_us", 1234.5).ok());
  ASSERT_TRUE(SetCoefficient(&p, "kernels.attention_efficiency.mla", 0.25).ok());
  ASSERT_TRUE(SetCoefficient(&p, "startup.init_s", 42.5).ok());
  p.defaults.sliding_kv_ratio = 0.8;
  p.calibration.fitted = true;
  p.calibration.points = 3;
  p.calibration.fit_error_pct = 7.5;
  p.calibration.range.models = {"llama-3.1-70b"};
  p.calibration.range.load_max = 40;
  EngineProfile q;
  const std::string yaml = EngineProfileYaml(p, "fitted by a test");
  const Status s = ParseEngineProfile(yaml, "written.yaml", &q);
  ASSERT_TRUE(s.ok()) << s.message() << "\n" << yaml;
  for (const auto& name : CoefficientNames(p)) {
    double a = 0, b = 0;
    ASSERT_TRUE(GetCoefficient(p, name, &a).ok());
    ASSERT_TRUE(GetCoefficient(q, name, &b).ok());
    EXPECT_DOUBLE_EQ(a, b) << name;
  }
  EXPECT_EQ(q.versions.from, p.versions.from);
  EXPECT_EQ(q.defaults.decode_steps, p.defaults.decode_steps);
  EXPECT_DOUBLE_EQ(q.defaults.sliding_kv_ratio, 0.8);
  EXPECT_EQ(q.calibration.range.models, p.calibration.range.models);
  EXPECT_EQ(q.calibration.range.load_max, 40);
  double unused = 0;
  const Status unknown = GetCoefficient(p, "cpu.step_ms", &unused);
  EXPECT_NE(unknown.message().find("found 'cpu.step_ms'"), std::string::npos);
}

}  // namespace
}  // namespace servesweep::perfmodel
