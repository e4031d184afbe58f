// `servesweep submit slurm`: golden renders of the sbatch script, and refusals before submitting.
#include "submit/slurm_submit.h"

#include <gtest/gtest.h>

#include "submit/golden_test_matrix.h"
#include "submit/template_renderer.h"

namespace servesweep::submit {
namespace {

SlurmOptions GpuOptions() {
  SlurmOptions o;
  o.matrix_path = "golden.yaml";
  o.out_dir = "/shared/sweeps/golden";
  o.nodes = 2;
  o.gpus_per_node = 8;
  o.partition = "gpu";
  o.time = "02:00:00";
  o.account = "llm";
  o.servesweep_binary = "/opt/servesweep/bin/servesweep";
  return o;
}

TEST(SlurmSubmit, RendersTheGpuScript) {
  matrix::LoadedMatrix matrix;
  ASSERT_TRUE(matrix::ExpandMatrix("golden.yaml", kGoldenMatrix, &matrix).ok());
  std::string script;
  Status s = RenderSbatch(matrix, GpuOptions(), "/shared/sweeps/golden/matrix.yaml", &script);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(script, ReadSourceFile("tests/golden/slurm_gpu.sbatch")) << script;
}

TEST(SlurmSubmit, RendersTheContainerScriptWithPyxisFlags) {
  matrix::LoadedMatrix matrix;
  ASSERT_TRUE(matrix::ExpandMatrix("golden.yaml", kGoldenMatrix, &matrix).ok());
  SlurmOptions o = GpuOptions();
  o.container_image = "nvcr.io#nvidia/servesweep:0.1";
  o.resume = true;
  std::string script;
  ASSERT_TRUE(RenderSbatch(matrix, o, "/shared/sweeps/golden/matrix.yaml", &script).ok());
  EXPECT_EQ(script, ReadSourceFile("tests/golden/slurm_container.sbatch")) << script;
}

TEST(SlurmSubmit, RendersTheHeterogeneousPrefillDecodeScript) {
  matrix::LoadedMatrix matrix;
  ASSERT_TRUE(matrix::ExpandMatrix("golden.yaml", kGoldenMatrix, &matrix).ok());
  SlurmOptions o = GpuOptions();
  o.prefill_nodes = 1;
  o.decode_nodes = 2;
  o.time.clear();
  o.account.clear();
  ASSERT_TRUE(CheckAllocation(matrix, o).ok());
  std::string script;
  ASSERT_TRUE(RenderSbatch(matrix, o, "/shared/sweeps/golden/matrix.yaml", &script).ok());
  EXPECT_EQ(script, ReadSourceFile("tests/golden/slurm_pd.sbatch")) << script;
  o.decode_nodes = 0;
  EXPECT_NE(
      CheckAllocation(matrix, o).message().find("expected both --prefill-nodes and --decode-nodes"),
      std::string::npos);
}

// A search: the head node runs `servesweep search` on the job's agents (one configuration per
// agent), with what it is given, quoted for the shell.
TEST(SlurmSubmit, ASearchRunsOnTheHeadNodeInsteadOfTheCoordinator) {
  matrix::LoadedMatrix matrix;
  ASSERT_TRUE(matrix::ExpandMatrix("golden.yaml", kGoldenMatrix, &matrix).ok());
  SlurmOptions o = GpuOptions();
  o.search = true;
  o.search_args = {"--learn", "--engine-profile", "it's.yaml"};
  std::string script;
  ASSERT_TRUE(RenderSbatch(matrix, o, "/shared/sweeps/golden/matrix.yaml", &script).ok());
  EXPECT_NE(
      script.find("\"$SERVESWEEP\" search \"$MATRIX\" --bind \"tcp://*:$PORT\" --out \"$OUT\""),
      std::string::npos)
      << script;
  EXPECT_NE(
      script.find("--agents 2 --gpus-per-agent 8 '--learn' '--engine-profile' 'it'\\''s.yaml'"),
      std::string::npos)
      << script;
  EXPECT_EQ(script.find("\"$SERVESWEEP\" coordinator"), std::string::npos);
  o.prefill_nodes = 1;
  o.decode_nodes = 2;
  ASSERT_TRUE(RenderSbatch(matrix, o, "/shared/sweeps/golden/matrix.yaml", &script).ok());
  EXPECT_NE(script.find("--agents 3 --gpus-per-agent 8"), std::string::npos) << script;
}

TEST(SlurmSubmit, RefusesAMatrixLargerThanTheAllocationBeforeSubmitting) {
  matrix::LoadedMatrix matrix;
  ASSERT_TRUE(matrix::ExpandMatrix("golden.yaml", kGoldenMatrix, &matrix).ok());
  SlurmOptions o = GpuOptions();
  o.nodes = 1;
  Status s = CheckAllocation(matrix, o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("needs 16 GPU(s); expected it to fit the allocation of 1 node(s) x 8"),
            std::string::npos)
      << s.message();
  o.gpus_per_node = 0;
  EXPECT_NE(CheckAllocation(matrix, o).message().find("expected --gpus-per-node G"),
            std::string::npos);
}

TEST(TemplateRenderer, NamesMissingPlaceholdersAndQuotesForTheShell) {
  std::string out;
  Status s = RenderTemplate("t.in", "a\n{{x}} {{y}}\n", {{"x", "1"}}, &out);
  EXPECT_EQ(s.message(), "t.in:2: no value for placeholder {{y}}");
  ASSERT_TRUE(RenderTemplate("t.in", "{{x}}-{{x}}", {{"x", "v"}}, &out).ok());
  EXPECT_EQ(out, "v-v");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_FALSE(EmbeddedTemplate("slurm/sweep.sbatch.in").empty());
}

}  // namespace
}  // namespace servesweep::submit
