// Kubernetes manifests validated offline: every overlay of k8s/ and a rendered matrix, built
// with `kubectl kustomize` and checked by `kubernetes-validate --strict` against Kubernetes
// 1.37 (both installed by scripts/install-deps.sh).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/harness.h"
#include "transport/curve_keys.h"

namespace servesweep::testing {
namespace {

constexpr const char* kKubernetesVersion = "1.37.0";

int Validate(const std::string& path, std::string* output) {
  return RunShell(
      fmt::format("kubernetes-validate --strict --quiet -k {} {}", kKubernetesVersion, path),
      output);
}

class Overlays : public ::testing::TestWithParam<std::string> {};

TEST_P(Overlays, KustomizeBuildValidatesStrictly) {
  Harness h("k8s-overlay");
  std::string output;
  const std::string manifests = h.Path("manifests.yaml");
  ASSERT_EQ(RunShell(fmt::format("kubectl kustomize {}/k8s/overlays/{} > {}", SERVESWEEP_SOURCE_DIR,
                                 GetParam(), manifests),
                     &output),
            0)
      << output;
  EXPECT_EQ(Validate(manifests, &output), 0) << output;
  // CurveZMQ, never plain TCP: both Jobs read their keys from Secrets.
  const std::string text = ReadTextFile(manifests);
  EXPECT_EQ(text.find("--insecure"), std::string::npos);
  EXPECT_NE(text.find("secretName: servesweep-coordinator-keys"), std::string::npos) << text;
  EXPECT_NE(text.find("secretName: servesweep-agent-keys"), std::string::npos) << text;
}

TEST_P(Overlays, RenderedMatrixValidatesStrictlyAndCarriesTheSweep) {
  Harness h("k8s-submit");
  const std::string matrix = h.WriteFile("m.yaml", R"(name: k8s
engine: sim
model: test-model
workload: {input_len: 16, output_len: 16, num_requests: 4, concurrency: 1}
axes:
  layout: [{tp: 2}, {tp: 4}]
)");
  const bool emulated = GetParam() == "emulator";
  const size_t submit =
      h.Start("submit", {"submit", "k8s", matrix, "--overlay", GetParam(), "--nodes", "3",
                         emulated ? "--emulate-gpus" : "--gpus-per-node", "4", "--image",
                         "registry.example.com/servesweep:0.1", "--namespace", "bench", "--dir",
                         h.Path("kustomization"), "--dry-run"});
  const auto status = h.process(submit).Wait(std::chrono::seconds(60));
  ASSERT_TRUE(status && *status == 0) << h.Log("submit");
  const std::string manifests = h.Log("submit");
  std::string output;
  EXPECT_EQ(Validate(h.Path("submit.log"), &output), 0) << output;
  for (const char* expected :
       {"completions: 3", "parallelism: 3", "namespace: bench",
        "image: registry.example.com/servesweep:0.1", "layout: [{tp: 2}, {tp: 4}]",
        "automountServiceAccountToken: false", "topologyKey: kubernetes.io/hostname"}) {
    EXPECT_NE(manifests.find(expected), std::string::npos) << expected;
  }
  EXPECT_NE(manifests.find(emulated ? "- --emulate-gpus\n        - \"4\"" : "nvidia.com/gpu: 4"),
            std::string::npos)
      << manifests;
  EXPECT_EQ(manifests.find("kind: Role"), std::string::npos);  // no RBAC
  // Keys made for the sweep, private where secret, in Secrets each pod mounts 0400; the Jobs
  // point at the generated (hash-suffixed) names; no plain TCP anywhere.
  for (const char* name : {"coordinator", "agents"}) {
    const std::string secret = h.Path(fmt::format("kustomization/keys/{}.secret", name));
    CurveKeypair keypair;
    EXPECT_TRUE(ReadCurveSecretKey(secret, &keypair).ok()) << secret;  // refuses a readable one
    std::string public_z85;
    EXPECT_TRUE(
        ReadCurvePublicKey(h.Path(fmt::format("kustomization/keys/{}.pub", name)), &public_z85)
            .ok());
    EXPECT_EQ(keypair.public_z85, public_z85);
  }
  EXPECT_EQ(manifests.find("--insecure"), std::string::npos);
  for (const char* expected :
       {"kind: Secret", "name: servesweep-coordinator-keys-", "name: servesweep-agent-keys-",
        "secretName: servesweep-coordinator-keys-", "secretName: servesweep-agent-keys-",
        "defaultMode: 256", "- /etc/servesweep-keys/coordinator.secret",
        "- /etc/servesweep-keys/agents.secret"}) {
    EXPECT_NE(manifests.find(expected), std::string::npos) << expected;
  }
  // Each pod gets only its own secret: the agents' Secret holds no coordinator secret.
  const size_t agent_secret = manifests.find("name: servesweep-agent-keys-");
  const size_t agent_secret_start = manifests.rfind("---", agent_secret);
  const std::string agent_secret_doc = manifests.substr(
      agent_secret_start == std::string::npos ? 0 : agent_secret_start,
      agent_secret - (agent_secret_start == std::string::npos ? 0 : agent_secret_start));
  EXPECT_EQ(agent_secret_doc.find("coordinator.secret"), std::string::npos) << agent_secret_doc;
  EXPECT_NE(agent_secret_doc.find("agents.secret"), std::string::npos) << agent_secret_doc;
  EXPECT_EQ(manifests.find("hostNetwork: true") != std::string::npos,
            GetParam() == "gpu-hostnetwork");
}

INSTANTIATE_TEST_SUITE_P(K8s, Overlays, ::testing::Values("gpu", "gpu-hostnetwork", "emulator"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string name = param.param;
                           std::erase(name, '-');
                           return name;
                         });

// `submit k8s --search`: the coordinator's pod runs `servesweep search` over the agents, the
// manifests still validate strictly, and a matrix without a search: section is refused.
TEST(K8sValidation, ASearchRunsInTheCoordinatorsPod) {
  Harness h("k8s-search");
  const std::string base = R"(name: k8ssearch
engine: sim
model: meta-llama/Llama-3.1-8B-Instruct
workload: {input_len: 16, output_len: 16, num_requests: 4, concurrency: 1}
axes:
  engine_config: [{max_num_seqs: 4}, {max_num_seqs: 64}]
)";
  const std::string matrix = h.WriteFile(
      "m.yaml", base +
                    "search: {objective: max_output_tok_per_s_per_gpu, constraints: "
                    "{ttft_p90_ms: {max: 500}}, load: {knob: concurrency, min: 1, max: 64}}\n");
  const size_t submit = h.Start(
      "submit", {"submit", "k8s", matrix, "--overlay", "emulator", "--nodes", "2", "--search",
                 "--search-arg=--learn", "--dir", h.Path("kustomization"), "--dry-run"});
  const auto status = h.process(submit).Wait(std::chrono::seconds(60));
  ASSERT_TRUE(status && *status == 0) << h.Log("submit");
  std::string output;
  EXPECT_EQ(Validate(h.Path("submit.log"), &output), 0) << output;
  const std::string manifests = h.Log("submit");
  EXPECT_NE(manifests.find("- search\n        - /etc/servesweep/matrix.yaml\n        - --bind"),
            std::string::npos)
      << manifests;
  EXPECT_NE(manifests.find("- --agents\n        - \"2\"\n        - --gpus-per-agent\n        - "
                           "\"1\"\n        - --learn"),
            std::string::npos)
      << manifests;

  const std::string plain = h.WriteFile("plain.yaml", base);
  const size_t refused = h.Start("refused", {"submit", "k8s", plain, "--overlay", "emulator",
                                             "--search", "--dir", h.Path("k2"), "--dry-run"});
  const auto refused_status = h.process(refused).Wait(std::chrono::seconds(60));
  ASSERT_TRUE(refused_status);
  EXPECT_NE(*refused_status, 0);
  EXPECT_NE(h.Log("refused").find("search"), std::string::npos) << h.Log("refused");
  EXPECT_FALSE(std::filesystem::exists(h.Path("k2")));
}

TEST(K8sValidation, StrictValidatorRejectsAnUnknownField) {
  Harness h("k8s-bad");
  const std::string bad = h.WriteFile("bad.yaml",
                                      "apiVersion: v1\nkind: Service\nmetadata:\n  "
                                      "name: x\nspec:\n  portz: []\n");
  std::string output;
  EXPECT_NE(Validate(bad, &output), 0) << output;
  EXPECT_NE(output.find("'portz' was unexpected"), std::string::npos) << output;
}

}  // namespace
}  // namespace servesweep::testing
