// `servesweep submit k8s`: golden renders of the generated kustomization, and refusals.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "submit/k8s_submit.h"

namespace servesweep::submit {
namespace {

const char* kMatrix = R"(name: golden
engine: sim
model: m
workload: {input_len: 16, output_len: 16, num_requests: 4, concurrency: 1}
axes:
  layout: [{tp: 8}, {tp: 16}]
)";

std::string Golden(const std::string& name) {
  std::ifstream in(std::string(SERVESWEEP_SOURCE_DIR) + "/tests/golden/" + name);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

K8sOptions Options() {
  K8sOptions o;
  o.matrix_path = "golden.yaml";
  o.nodes = 2;
  o.gpus_per_node = 8;
  o.image = "registry.example.com:5000/team/servesweep:0.1";
  o.namespace_name = "bench";
  o.dir = "/work/sweeps/golden-k8s";
  return o;
}

TEST(K8sSubmit, RendersTheGpuKustomization) {
  coordinator::LoadedMatrix matrix;
  ASSERT_TRUE(coordinator::ExpandMatrix("golden.yaml", kMatrix, &matrix).ok());
  std::string kustomization, patch;
  Status s = RenderK8sKustomization(matrix, Options(), &kustomization, &patch);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(kustomization, Golden("k8s_gpu_kustomization.yaml")) << kustomization;
  EXPECT_EQ(patch, Golden("k8s_gpu_agents_patch.yaml")) << patch;
}

TEST(K8sSubmit, RendersTheEmulatorPatchAndUntaggedImages) {
  coordinator::LoadedMatrix matrix;
  ASSERT_TRUE(coordinator::ExpandMatrix("golden.yaml", kMatrix, &matrix).ok());
  K8sOptions o = Options();
  o.overlay = "emulator";
  o.emulate_gpus = 16;
  o.image = "servesweep";
  o.namespace_name.clear();
  std::string kustomization, patch;
  ASSERT_TRUE(RenderK8sKustomization(matrix, o, &kustomization, &patch).ok());
  EXPECT_EQ(patch, Golden("k8s_emulator_agents_patch.yaml")) << patch;
  EXPECT_NE(kustomization.find("newName: servesweep\n    newTag: \"latest\""), std::string::npos)
      << kustomization;
  EXPECT_EQ(kustomization.find("namespace:"), std::string::npos);
}

TEST(K8sSubmit, RefusesAMatrixLargerThanTheAgentsAndUnknownOverlays) {
  coordinator::LoadedMatrix matrix;
  ASSERT_TRUE(coordinator::ExpandMatrix("golden.yaml", kMatrix, &matrix).ok());
  K8sOptions o = Options();
  o.nodes = 1;
  std::string kustomization, patch;
  Status s = RenderK8sKustomization(matrix, o, &kustomization, &patch);
  EXPECT_NE(s.message().find("needs 16 GPU(s); expected it to fit 1 agent(s) x 8 GPU(s)"),
            std::string::npos)
      << s.message();
  o = Options();
  o.overlay = "tpu";
  EXPECT_NE(RenderK8sKustomization(matrix, o, &kustomization, &patch)
                .message()
                .find("expected --overlay gpu, gpu-hostnetwork or emulator, found 'tpu'"),
            std::string::npos);
}

}  // namespace
}  // namespace servesweep::submit
