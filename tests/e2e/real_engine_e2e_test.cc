// End-to-end with a real engine on CPU: `servesweep run` starts llama.cpp's llama-server (from
// scripts/install-engines.sh) with two slot counts at two concurrencies, measures it, scrapes its
// /metrics and tears it down. Skipped, saying why, where the engine is not installed.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/ids.h"
#include "common/net.h"
#include "tests/support/harness.h"

namespace servesweep::testing {
namespace {

// Processes whose command line contains `needle`.
int ProcessesWith(const std::string& needle) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(needle) != std::string::npos) ++count;
  }
  return count;
}

TEST(RealEngine, LlamacppSweepLaunchesMeasuresScrapesAndTearsDown) {
  if (!OnPath("llama-server") || !std::filesystem::exists(kSmolLm2Gguf)) {
    GTEST_SKIP() << "llama-server or " << kSmolLm2Gguf
                 << " is not installed: run scripts/install-engines.sh (compiles llama.cpp, "
                    "about 24 min on 2 cores) to run this real-engine test";
  }
  Harness h("llamacpp");
  // A served name of its own, so this test's engines can be told apart from any other.
  const std::string alias = "smollm2-e2e-" + RandomHex(8);
  std::string matrix = ReadSourceFile("examples/llamacpp-cpu.yaml");
  matrix = std::regex_replace(matrix, std::regex("model: smollm2 "), "model: " + alias + " ");
  ASSERT_NE(matrix.find(alias), std::string::npos);
  const std::string path = h.WriteFile("llamacpp-cpu.yaml", matrix);
  const std::string out = h.Path("out");
  const size_t run = h.Start("run", {"run", path, "--out", out});
  bool saw_engine = false;
  const bool ended = Harness::WaitFor(
      [&] {
        saw_engine = saw_engine || ProcessesWith("--alias " + alias) > 0;
        return h.process(run).Poll().has_value();
      },
      std::chrono::seconds(170));
  ASSERT_TRUE(ended) << h.Log("run");
  EXPECT_TRUE(saw_engine) << "llama-server was never seen running";

  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM runs WHERE status='done'"), 4) << h.Log("run");
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM results WHERE completed = 8 AND failed = 0"), 4)
      << h.Log("run");
  // Every measured request completed with its 16 output tokens (ignore_eos) and 32 input tokens.
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM requests WHERE success=1 AND output_tokens=16"),
            32);
  EXPECT_EQ(h.QueryInt(out, "SELECT SUM(total_output_tokens) FROM results"), 4 * 8 * 16);
  EXPECT_EQ(h.QueryInt(out, "SELECT SUM(total_input_tokens) FROM results"), 4 * 8 * 32);
  // /metrics was scraped with llama.cpp's names in every run, the engine's own token counter
  // moved in each, and the processing gauge was caught above zero (scrapes come once a second
  // and a run can be shorter, so at least one run, not every run, must have caught it).
  EXPECT_EQ(h.QueryInt(out,
                       "SELECT COUNT(DISTINCT run_id) FROM engine_samples WHERE "
                       "name='running'"),
            4);
  EXPECT_GE(h.QueryInt(out, "SELECT COUNT(*) FROM results WHERE running_max >= 1"), 1);
  EXPECT_EQ(h.QueryInt(out,
                       "SELECT COUNT(DISTINCT run_id) FROM engine_samples WHERE "
                       "name='generation_tokens' AND value > 0"),
            4);
  // One slot never processes two requests at once, whatever the concurrency.
  EXPECT_EQ(h.QueryInt(out,
                       "SELECT COUNT(*) FROM results JOIN runs USING(run_id) WHERE "
                       "running_max > 1 AND label LIKE 'max_num_seqs=1 %'"),
            0);
  // Provenance: the engine's version and a fingerprint of the GGUF file.
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM results WHERE engine_version LIKE 'n/a%'"), 0);
  EXPECT_EQ(h.QueryInt(out,
                       "SELECT COUNT(*) FROM results WHERE checkpoint_revision LIKE "
                       "'fnv1a64:%SmolLM2-135M-Instruct.Q4_1.gguf%'"),
            4);
  // One engine per slot count (engine_lifecycle per_configuration): its cold start on its first
  // run, its slots erased before the second, and the erase checked by the engine's own counter of
  // cached prompt tokens.
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(DISTINCT engine_id) FROM results"), 2);
  EXPECT_EQ(h.QueryInt(out,
                       "SELECT COUNT(*) FROM results WHERE engine_run_index = 0 AND "
                       "cold_start_ms > 0 AND cache_state = 'cold'"),
            2);
  EXPECT_EQ(h.QueryInt(out,
                       "SELECT COUNT(*) FROM results WHERE engine_run_index = 1 AND "
                       "cold_start_ms IS NULL AND cache_state = 'reset'"),
            2)
      << h.Log("run");
  // GPU telemetry and provenance are filled either way: figures where nvidia-smi is, else why not.
  const char* telemetry = OnPath("nvidia-smi") ? "nvidia-smi: %" : "n/a: no nvidia-smi on agent %";
  EXPECT_EQ(h.QueryInt(out, fmt::format("SELECT COUNT(*) FROM results WHERE gpu_telemetry LIKE "
                                        "'{}'",
                                        telemetry)),
            4);
  EXPECT_EQ(h.QueryInt(out,
                       "SELECT COUNT(*) FROM results WHERE driver_version = '' OR "
                       "cuda_version = '' OR nccl_version = ''"),
            0);
  // Torn down: no llama-server of this test is left.
  EXPECT_EQ(ProcessesWith("--alias " + alias), 0);
}

// Engines that exit at start, never get ready, or die mid-run each give a failed run with its
// reason while the sweep goes on, and leave no process behind (template engines: real processes).
TEST(RealEngine, EngineFailuresAreRecordedAndTheSweepGoesOn) {
  Harness h("faults");
  const std::string mark = RandomHex(6);
  const std::string matrix = fmt::format(R"(name: faults
engine: template
model: m
timeout_s: 6
max_attempts: 1
local: {{agents: 1, gpus_per_agent: 1}}
workload: {{input_len: 8, output_len: 50, num_requests: 40, concurrency: 2}}
axes:
  engine_config:
    - {{command: [sh, -c, "echo engine-boom-{0} >&2; exit 3"]}}
    - {{command: [sh, -c, "sleep 613.{1}; true"]}}
    - {{command: [timeout, -s, KILL, "3", "{{servesweep}}", sim, --host, 127.0.0.1, --port, "{{port}}", --model, "{{model}}", --ttft-ms, "5", --itl-ms, "20", --startup-ms, "{1}"]}}
    - {{command: ["{{servesweep}}", sim, --host, 127.0.0.1, --port, "{{port}}", --model, "{{model}}", --ttft-ms, "1", --itl-ms, "1", --startup-ms, "{1}"]}}
)",
                                         mark, std::stoul(mark, nullptr, 16) % 900 + 100);
  const std::string path = h.WriteFile("faults.yaml", matrix);
  const std::string out = h.Path("out");
  const size_t run = h.Start("run", {"run", path, "--out", out});
  ASSERT_TRUE(Harness::WaitFor([&] { return h.process(run).Poll().has_value(); },
                               std::chrono::seconds(120)))
      << h.Log("run");
  auto error_of = [&](int index) {
    auto table =
        h.Query(out, fmt::format("SELECT status, last_error FROM runs WHERE idx={}", index));
    return table.rows.empty() ? std::string("no run") : table.rows[0][0] + ": " + table.rows[0][1];
  };
  EXPECT_NE(error_of(0).find("failed: engine exited before it was ready"), std::string::npos)
      << error_of(0);
  EXPECT_NE(error_of(0).find("exit 3"), std::string::npos) << error_of(0);
  // Readiness gives up a second inside the 6 s run timeout, so its reason wins the race.
  EXPECT_NE(error_of(1).find("failed: engine not ready after 5 s"), std::string::npos)
      << error_of(1);
  EXPECT_NE(error_of(2).find("failed: engine died during the run"), std::string::npos)
      << error_of(2);
  EXPECT_EQ(error_of(3).rfind("done", 0), 0u) << error_of(3);
  // The failure record keeps the engine's last log lines.
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM attempts WHERE error LIKE '%engine log:%'"), 3);
  EXPECT_EQ(ProcessesWith("engine-boom-" + mark), 0);
  EXPECT_EQ(ProcessesWith(fmt::format("sleep 613.{}", std::stoul(mark, nullptr, 16) % 900 + 100)),
            0);
  EXPECT_EQ(
      ProcessesWith(fmt::format("--startup-ms {}", std::stoul(mark, nullptr, 16) % 900 + 100)), 0);
}

// A managed endpoint (here the emulator, reached as `engine: external`): nothing is started, the
// key from the named environment variable goes only into the requests, and the price list gives
// the cost per completed request.
TEST(RealEngine, ExternalEndpointIsPricedAndItsKeyIsNeverWritten) {
  Harness h("external");
  const uint16_t port = FreeLoopbackPort();
  h.Start("sim", {"sim", "--port", std::to_string(port), "--model", "deepseek-v4.1-flash",
                  "--ttft-ms", "2", "--itl-ms", "1"});
  const std::string url = fmt::format("http://127.0.0.1:{}", port);
  ASSERT_TRUE(Harness::WaitForHealthy(url));
  const std::string key = "sk-test-" + RandomHex(24);
  ::setenv("SERVESWEEP_E2E_API_KEY", key.c_str(), 1);  // inherited by the agents
  const std::string path = h.WriteFile("external.yaml", fmt::format(R"(name: external
engine: external
model: deepseek-v4.1-flash
engine_config:
  base_url: {}/v1
  api_key_env: SERVESWEEP_E2E_API_KEY
  price: {{input_per_mtok: 1000, output_per_mtok: 4000, currency: USD}}
workload: {{input_len: 100, output_len: 10, num_requests: 20, concurrency: 4, prompt: token_ids}}
local: {{agents: 1, gpus_per_agent: 1}}
)",
                                                                    url));
  const std::string out = h.Path("out");
  const size_t run = h.Start("run", {"run", path, "--out", out});
  ASSERT_TRUE(
      Harness::WaitFor([&] { return h.process(run).Poll().has_value(); }, std::chrono::seconds(60)))
      << h.Log("run");
  ::unsetenv("SERVESWEEP_E2E_API_KEY");
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM runs WHERE status='done'"), 1) << h.Log("run");
  // (100 x 1000 + 10 x 4000) / 1e6 = 0.14 per request.
  auto cost = h.Query(out, "SELECT cost_per_completed_request, cost_currency FROM results");
  ASSERT_EQ(cost.rows.size(), 1u);
  EXPECT_NEAR(std::stod(cost.rows[0][0]), 0.14, 1e-9);
  EXPECT_EQ(cost.rows[0][1], "USD");
  // The key is in no file the sweep wrote: logs, spool, database, reports.
  for (const auto& entry : std::filesystem::recursive_directory_iterator(h.dir())) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text.find(key), std::string::npos) << entry.path();
  }
}

}  // namespace
}  // namespace servesweep::testing
