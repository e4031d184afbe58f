// `servesweep submit k8s`: golden renders of the generated kustomization, and refusals.
#include "submit/k8s_submit.h"

#include <gtest/gtest.h>

#include "submit/golden_test_matrix.h"

namespace servesweep::submit {
namespace {

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
  matrix::LoadedMatrix matrix;
  ASSERT_TRUE(matrix::ExpandMatrix("golden.yaml", kGoldenMatrix, &matrix).ok());
  std::string kustomization, patch, coordinator_patch;
  Status s = RenderK8sKustomization(matrix, Options(), &kustomization, &patch, &coordinator_patch);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(kustomization, ReadSourceFile("tests/golden/k8s_gpu_kustomization.yaml"))
      << kustomization;
  EXPECT_EQ(patch, ReadSourceFile("tests/golden/k8s_gpu_agents_patch.yaml")) << patch;
}

TEST(K8sSubmit, RendersTheEmulatorPatchAndUntaggedImages) {
  matrix::LoadedMatrix matrix;
  ASSERT_TRUE(matrix::ExpandMatrix("golden.yaml", kGoldenMatrix, &matrix).ok());
  K8sOptions o = Options();
  o.overlay = "emulator";
  o.emulate_gpus = 16;
  o.image = "servesweep";
  o.namespace_name.clear();
  std::string kustomization, patch, coordinator_patch;
  ASSERT_TRUE(RenderK8sKustomization(matrix, o, &kustomization, &patch, &coordinator_patch).ok());
  EXPECT_EQ(patch, ReadSourceFile("tests/golden/k8s_emulator_agents_patch.yaml")) << patch;
  EXPECT_NE(kustomization.find("newName: servesweep\n    newTag: \"latest\""), std::string::npos)
      << kustomization;
  EXPECT_EQ(kustomization.find("namespace:"), std::string::npos);
}

TEST(K8sSubmit, RefusesAMatrixLargerThanTheAgentsAndUnknownOverlays) {
  matrix::LoadedMatrix matrix;
  ASSERT_TRUE(matrix::ExpandMatrix("golden.yaml", kGoldenMatrix, &matrix).ok());
  K8sOptions o = Options();
  o.nodes = 1;
  std::string kustomization, patch, coordinator_patch;
  Status s = RenderK8sKustomization(matrix, o, &kustomization, &patch, &coordinator_patch);
  EXPECT_NE(s.message().find("needs 16 GPU(s); expected it to fit 1 agent(s) x 8 GPU(s)"),
            std::string::npos)
      << s.message();
  o = Options();
  o.overlay = "tpu";
  EXPECT_NE(RenderK8sKustomization(matrix, o, &kustomization, &patch, &coordinator_patch)
                .message()
                .find("expected --overlay gpu, gpu-hostnetwork or emulator, found 'tpu'"),
            std::string::npos);
}

// A search: the coordinator's pod runs `servesweep search` on the agents, with what it is
// given, and the kustomization applies the patch; a sweep has none.
TEST(K8sSubmit, ASearchPatchesTheCoordinatorsCommand) {
  matrix::LoadedMatrix matrix;
  ASSERT_TRUE(matrix::ExpandMatrix("golden.yaml", kGoldenMatrix, &matrix).ok());
  K8sOptions o = Options();
  std::string kustomization, patch, coordinator_patch;
  ASSERT_TRUE(RenderK8sKustomization(matrix, o, &kustomization, &patch, &coordinator_patch).ok());
  EXPECT_TRUE(coordinator_patch.empty());
  EXPECT_EQ(kustomization.find("coordinator-patch.yaml"), std::string::npos);
  o.search = true;
  o.search_args = {"--learn", "--engine-profile", "it's.yaml"};
  ASSERT_TRUE(RenderK8sKustomization(matrix, o, &kustomization, &patch, &coordinator_patch).ok());
  EXPECT_NE(kustomization.find("name: servesweep-coordinator}\n    path: coordinator-patch.yaml"),
            std::string::npos)
      << kustomization;
  EXPECT_NE(
      coordinator_patch.find("path: /spec/template/spec/containers/0/args/0\n  value: search"),
      std::string::npos)
      << coordinator_patch;
  std::string values;
  for (size_t at = 0; (at = coordinator_patch.find("  value: '", at)) != std::string::npos;) {
    at += 9;
    values += coordinator_patch.substr(at, coordinator_patch.find('\n', at) - at) + " ";
  }
  EXPECT_EQ(values,
            "'--agents' '2' '--gpus-per-agent' '8' '--learn' '--engine-profile' 'it''s.yaml' ");
}

}  // namespace
}  // namespace servesweep::submit
