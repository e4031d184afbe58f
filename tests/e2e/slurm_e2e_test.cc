// A real Slurm cluster on this machine (munge, slurmctld, three slurmd "nodes"): a sweep
// submitted with `servesweep submit slurm --nodes 3` runs its coordinator and one agent per node
// under Slurm, and every run lands in the results database, executed by three distinct agents.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "tests/support/harness.h"

namespace servesweep::testing {
namespace {

using std::chrono::seconds;

class SlurmCluster {
 public:
  explicit SlurmCluster(const std::string& dir) : dir_(dir) {
    // Ports apart from the script's defaults, so a developer's own test cluster is left alone.
    env_ = fmt::format("SLURM_TEST_DIR={} SLURM_TEST_CTLD_PORT=16917 SLURM_TEST_NODE_PORT=17101",
                       dir_);
    started_ = RunShell(env_ + " " SERVESWEEP_SOURCE_DIR "/scripts/slurm-test-cluster.sh start 3",
                        &output_) == 0;
    ::setenv("SLURM_CONF", (dir_ + "/slurm.conf").c_str(), 1);
  }
  ~SlurmCluster() {
    std::string ignored;
    RunShell(env_ + " " SERVESWEEP_SOURCE_DIR "/scripts/slurm-test-cluster.sh stop", &ignored);
    ::unsetenv("SLURM_CONF");
  }
  bool started() const { return started_; }
  const std::string& output() const { return output_; }

 private:
  std::string dir_, env_, output_;
  bool started_ = false;
};

// Submits with `servesweep submit slurm args...` and waits until the job has left the queue;
// returns its id ("" on failure, with the reason recorded as a test failure).
std::string SubmitAndWait(Harness& h, std::vector<std::string> args) {
  args.insert(args.begin(), {"submit", "slurm"});
  const size_t submit = h.Start("submit", args);
  EXPECT_TRUE(h.process(submit).Wait(seconds(60)));
  const std::string log = h.Log("submit");
  const size_t at = log.find("submitted batch job ");
  EXPECT_NE(at, std::string::npos) << log;
  if (at == std::string::npos) return "";
  const std::string job_id = log.substr(at + 20, log.find('\n', at) - at - 20);
  std::string queue;
  EXPECT_TRUE(Harness::WaitFor(
      [&] { return RunShell("squeue -h -j " + job_id, &queue) == 0 && queue.empty(); },
      seconds(120)))
      << queue;
  return job_id;
}

TEST(SlurmEndToEnd, SubmittedSweepRunsEveryRunOnThreeAgents) {
  if (::geteuid() != 0) GTEST_SKIP() << "starting munge, slurmctld and slurmd needs root";
  Harness h("slurm");
  SlurmCluster cluster(h.Path("slurm"));
  ASSERT_TRUE(cluster.started()) << cluster.output();

  const std::string out = h.Path("out");
  const std::string matrix = h.WriteFile("m.yaml", R"(name: slurm
engine: sim
model: test-model
sim: {ttft_ms: 5, itl_ms: 2}
workload: {input_len: 16, output_len: 16, num_requests: 30, warmup_requests: 1}
axes:
  concurrency: [1, 2, 3, 4, 5, 6]
)");
  const std::string job_id =
      SubmitAndWait(h, {matrix, "--out", out, "--nodes", "3", "--emulate-gpus", "1"});
  ASSERT_FALSE(job_id.empty());

  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM runs WHERE status='done'"), 6);
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM results"), 6);
  const auto agents = h.Query(out, "SELECT DISTINCT agent_id FROM results ORDER BY agent_id");
  ASSERT_EQ(agents.rows.size(), 3u);
  EXPECT_EQ(agents.rows[0][0], "n1");
  EXPECT_EQ(agents.rows[1][0], "n2");
  EXPECT_EQ(agents.rows[2][0], "n3");
  // The job's own log ends with the coordinator's summary, and each node was probed.
  std::ifstream job_log(fmt::format("{}/slurm-{}.out", out, job_id));
  std::stringstream job_text;
  job_text << job_log.rdbuf();
  EXPECT_NE(job_text.str().find("6 runs: 6 done, 0 failed"), std::string::npos) << job_text.str();
  for (const char* node : {"n1", "n2", "n3"}) {
    EXPECT_TRUE(std::filesystem::exists(fmt::format("{}/probes/{}.txt", out, node))) << node;
  }
}

TEST(SlurmEndToEnd, DisaggregatedRunsUseSeparatePrefillAndDecodeNodePools) {
  if (::geteuid() != 0) GTEST_SKIP() << "starting munge, slurmctld and slurmd needs root";
  Harness h("slurm-pd");
  SlurmCluster cluster(h.Path("slurm"));
  ASSERT_TRUE(cluster.started()) << cluster.output();
  const std::string out = h.Path("out");
  const std::string matrix = h.WriteFile("m.yaml", R"(name: pd
engine: sim
model: test-model
sim: {ttft_ms: 5, itl_ms: 2}
layout: {tp: 1, prefill_instances: 1, decode_instances: 2}
workload: {input_len: 16, output_len: 16, num_requests: 20, warmup_requests: 1}
axes:
  concurrency: [1, 4]
)");
  // A heterogeneous job: component 0 (1 node) the prefill pool, component 1 (2 nodes) decode.
  ASSERT_FALSE(SubmitAndWait(h, {matrix, "--out", out, "--prefill-nodes", "1", "--decode-nodes",
                                 "2", "--emulate-gpus", "1"})
                   .empty());

  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM runs WHERE status='done'"), 2);
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM agents"), 3);
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM agents WHERE pool='prefill'"), 1);
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM agents WHERE pool='decode'"), 2);
  // Every run: head on the prefill node, then the two decode nodes.
  const auto placements = h.Query(out, "SELECT agents, pd_split FROM results");
  ASSERT_EQ(placements.rows.size(), 2u);
  for (const auto& row : placements.rows) {
    EXPECT_EQ(row[0].substr(0, row[0].find(' ')),
              h.Query(out, "SELECT agent_id FROM agents WHERE pool='prefill'").rows.at(0).at(0));
    EXPECT_EQ(std::count(row[0].begin(), row[0].end(), ' '), 2) << row[0];
    EXPECT_EQ(row[1], "1P2D");
  }
}

// `submit slurm --search`: the head node runs the search, every round on the job's two agents
// (engines kept between rounds), and at its end the agents are told so and leave by themselves.
TEST(SlurmEndToEnd, SubmittedSearchRunsEveryRoundOnTheJobsAgents) {
  if (::geteuid() != 0) GTEST_SKIP() << "starting munge, slurmctld and slurmd needs root";
  Harness h("slurm-search");
  SlurmCluster cluster(h.Path("slurm"));
  ASSERT_TRUE(cluster.started()) << cluster.output();
  const std::string out = h.Path("out");
  const std::string matrix = h.WriteFile("m.yaml", R"(name: slurmsearch
engine: sim
model: meta-llama/Llama-3.1-8B-Instruct
sim: {hardware: h200, startup_ms: 100}
workload: {api: completions, input_len: 1024, output_len: 16, num_requests: 8, warmup_requests: 0, concurrency: 1}
axes:
  engine_config: [{max_num_seqs: 4}, {max_num_seqs: 64}]
search:
  objective: max_output_tok_per_s_per_gpu
  constraints:
    ttft_p90_ms: {max: 200}
  load: {knob: concurrency, min: 1, max: 64}
  precision: 0.25
  requests_per_level: 2
)");
  const std::string job_id =
      SubmitAndWait(h, {matrix, "--out", out, "--nodes", "2", "--emulate-gpus", "1", "--search"});
  ASSERT_FALSE(job_id.empty());
  const std::string job_log = ReadTextFile(fmt::format("{}/slurm-{}.out", out, job_id));
  ASSERT_TRUE(std::filesystem::exists(out + "/search.json")) << job_log;
  const std::string answer = ReadTextFile(out + "/search.json");
  EXPECT_EQ(answer.find("\"winner\": null"), std::string::npos) << answer;
  std::set<std::string> agents;
  int rounds = 0;
  for (; std::filesystem::exists(fmt::format("{}/rounds/{:03}", out, rounds + 1)); ++rounds) {
    for (const auto& row :
         h.Query(fmt::format("{}/rounds/{:03}", out, rounds + 1), "SELECT agent_id FROM results")
             .rows) {
      agents.insert(row[0]);
    }
  }
  EXPECT_GT(rounds, 1);
  EXPECT_EQ(agents, (std::set<std::string>{"n1", "n2"}));
  // Each agent heard the last bye (none follows) and left: no grace period was needed.
  size_t byes = 0;
  for (size_t at = 0;
       (at = job_log.find("coordinator said bye: sweep finished\n", at)) != std::string::npos;
       ++at) {
    ++byes;
  }
  EXPECT_EQ(byes, 2u) << job_log;
}

TEST(SlurmEndToEnd, OversizedMatrixIsRefusedBeforeSubmitting) {
  Harness h("slurm-refused");
  const std::string matrix = h.WriteFile("m.yaml", R"(name: big
engine: sim
model: m
layout: {tp: 8}
workload: {input_len: 16, output_len: 16, num_requests: 3, concurrency: 1}
)");
  const size_t submit = h.Start("submit", {"submit", "slurm", matrix, "--out", h.Path("out"),
                                           "--nodes", "3", "--gpus-per-node", "2"});
  const auto status = h.process(submit).Wait(seconds(30));
  ASSERT_TRUE(status);
  EXPECT_NE(*status, 0);
  EXPECT_NE(
      h.Log("submit").find("needs 8 GPU(s); expected it to fit the allocation of 3 node(s) x 2"),
      std::string::npos)
      << h.Log("submit");
  EXPECT_FALSE(std::filesystem::exists(h.Path("out/sweep.sbatch")));
}

}  // namespace
}  // namespace servesweep::testing
