// Every load mode end to end: `servesweep bench` (a real process) against `servesweep sim` (another
// process) over HTTP. The emulator's request log is the ground truth: when each request arrived
// (CLOCK_MONOTONIC, shared across processes), its prompt and completion tokens, and whether it
// was aborted.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "tests/support/harness.h"

namespace servesweep::testing {
namespace {

using nlohmann::json;

// One emulator with a request log; Bench() runs `servesweep bench` against it.
class SimBench {
 public:
  SimBench(const std::string& name, double ttft_ms, double itl_ms)
      : h_(name), port_(FreeLoopbackPort()), log_(h_.Path("requests.jsonl")) {
    sim_ = h_.Start("sim", {"sim", "--port", std::to_string(port_), "--model", "m", "--ttft-ms",
                            std::to_string(ttft_ms), "--itl-ms", std::to_string(itl_ms),
                            "--request-log", log_});
    url_ = fmt::format("http://127.0.0.1:{}", port_);
    ready_ = Harness::WaitForHealthy(url_);
  }

  bool ready() const { return ready_; }
  Harness& harness() { return h_; }

  // Runs bench with `args`; returns its exit code; the result JSON in *result when it wrote one.
  int Bench(const std::string& args, json* result, std::string* output) {
    const std::string path = h_.Path(fmt::format("result{}.json", runs_++));
    const int rc = RunServesweep(
        fmt::format("bench --url {} --model m --result-json {} {}", url_, path, args), output);
    const std::string text = ReadTextFile(path);
    if (!text.empty()) *result = json::parse(text);
    return rc;
  }

  // The emulator's log lines, sorted by arrival, after it has flushed `expected` of them.
  std::vector<json> Log(size_t expected) {
    Harness::WaitFor(
        [&] {
          std::ifstream in(log_);
          return static_cast<size_t>(std::count(std::istreambuf_iterator<char>(in),
                                                std::istreambuf_iterator<char>(), '\n')) >=
                 expected;
        },
        std::chrono::seconds(10));
    h_.process(sim_).Stop(std::chrono::seconds(5));
    std::vector<json> lines;
    std::ifstream in(log_);
    for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
    std::sort(lines.begin(), lines.end(), [](const json& a, const json& b) {
      return a.at("arrival_ns").get<int64_t>() < b.at("arrival_ns").get<int64_t>();
    });
    return lines;
  }

 private:
  Harness h_;
  uint16_t port_;
  std::string log_;
  size_t sim_ = 0;
  std::string url_;
  bool ready_ = false;
  int runs_ = 0;
};

std::vector<double> ArrivalGapsMs(const std::vector<json>& lines) {
  std::vector<double> gaps;
  for (size_t i = 1; i < lines.size(); ++i) {
    gaps.push_back(
        (lines[i].at("arrival_ns").get<int64_t>() - lines[i - 1].at("arrival_ns").get<int64_t>()) /
        1e6);
  }
  return gaps;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

TEST(LoadModesE2e, ConstantArrivalsReachTheServerAtExactGaps) {
  SimBench sb("lm-constant", 5, 1);
  ASSERT_TRUE(sb.ready());
  json result;
  std::string out;
  ASSERT_EQ(sb.Bench("--rate 50 --arrival constant --num-requests 25 --input-len 8 --output-len 4",
                     &result, &out),
            0)
      << out;
  EXPECT_EQ(result.at("completed"), 25);
  EXPECT_EQ(result.at("arrival"), "constant");
  const auto lines = sb.Log(25);
  ASSERT_EQ(lines.size(), 25u);
  const auto gaps = ArrivalGapsMs(lines);
  EXPECT_NEAR(Median(gaps), 20, 2);
  // Absolute schedule: the whole span is 24 gaps, whatever each send's lateness.
  const double span_ms = (lines.back().at("arrival_ns").get<int64_t>() -
                          lines.front().at("arrival_ns").get<int64_t>()) /
                         1e6;
  EXPECT_NEAR(span_ms, 480, 10);
}

TEST(LoadModesE2e, LinearRampSpeedsUpFromStartToEndRate) {
  SimBench sb("lm-ramp", 2, 1);
  ASSERT_TRUE(sb.ready());
  json result;
  std::string out;
  // Linear 10 -> 50/s over 60 requests: T = 2 x 60 / 60 = 2 s; constant gaps follow 1 / r(t).
  ASSERT_EQ(sb.Bench("--ramp linear --ramp-start-rate 10 --ramp-end-rate 50 --arrival constant "
                     "--num-requests 60 --input-len 4 --output-len 2",
                     &result, &out),
            0)
      << out;
  EXPECT_EQ(result.at("arrival"), "constant ramp linear 10->50/s over 2 s");
  EXPECT_EQ(result.at("ramp_up_strategy"), "linear");
  EXPECT_EQ(result.at("ramp_up_start_rps"), 10);
  EXPECT_EQ(result.at("ramp_up_end_rps"), 50);
  const auto lines = sb.Log(60);
  ASSERT_EQ(lines.size(), 60u);
  const auto gaps = ArrivalGapsMs(lines);
  // Arrival i at Lambda^-1(i), Lambda(t) = 10 t + 10 t^2: the first five gaps average 73.2 ms
  // (t_5 = 0.36603 s), the last five 20.59 ms (t_54 = 1.87698 s, t_59 = 1.97992 s): the rate
  // grew from 10/s towards 50/s. Averages of five gaps on the absolute schedule.
  const auto at_s = [&](size_t i) {
    return (lines[i].at("arrival_ns").get<int64_t>() - lines[0].at("arrival_ns").get<int64_t>()) /
           1e9;
  };
  EXPECT_NEAR(at_s(5) / 5 * 1e3, 73.2, 3);
  EXPECT_NEAR((at_s(59) - at_s(54)) / 5 * 1e3, 20.59, 3);
  EXPECT_GT(Median(std::vector<double>(gaps.begin(), gaps.begin() + 10)),
            2 * Median(std::vector<double>(gaps.end() - 10, gaps.end())));
  const double span_s = (lines.back().at("arrival_ns").get<int64_t>() -
                         lines.front().at("arrival_ns").get<int64_t>()) /
                        1e9;
  EXPECT_NEAR(span_s, 1.9799, 0.015);
}

TEST(LoadModesE2e, DurationModeMeasuresTheWindowAndDrainCancelsTheRest) {
  SimBench sb("lm-duration", 5, 2);
  ASSERT_TRUE(sb.ready());
  json result;
  std::string out;
  ASSERT_EQ(sb.Bench("--concurrency 4 --warmup-s 0.3 --duration-s 0.6 --input-len 8 "
                     "--output-len 8",
                     &result, &out),
            0)
      << out;
  const json& r = result;
  EXPECT_DOUBLE_EQ(r.at("window_s").get<double>(), 0.6);
  const int measured = r.at("completed").get<int>() + r.at("failed").get<int>();
  EXPECT_GT(measured, 10);
  EXPECT_EQ(r.at("cancelled"), 0);
  // Roughly 4 in flight, 8 tokens each: ~4 x 8 / (5 + 7 x 2 ms) tokens per ms in the window.
  EXPECT_GT(r.at("window_output_throughput").get<double>(), 500);
  // The server saw the warm-up requests too, and nothing was sent after the window closed.
  const auto lines = sb.Log(static_cast<size_t>(measured) + 4);
  EXPECT_GT(lines.size(), static_cast<size_t>(measured));
  const double span_s = (lines.back().at("arrival_ns").get<int64_t>() -
                         lines.front().at("arrival_ns").get<int64_t>()) /
                        1e9;
  EXPECT_LT(span_s, 0.95);  // scheduled before 0.9 s; a loaded machine may send a little late
  EXPECT_GT(span_s, 0.8);

  // Drain: 4 streams of 100 tokens x 50 ms can never finish in a 0.3 s window + 0.2 s drain.
  SimBench slow("lm-drain", 5, 50);
  ASSERT_TRUE(slow.ready());
  json cut;
  EXPECT_NE(slow.Bench("--concurrency 4 --duration-s 0.3 --drain-timeout-s 0.2 --input-len 4 "
                       "--output-len 100",
                       &cut, &out),
            0);  // nothing completed
  EXPECT_EQ(cut.at("cancelled"), 4);
  EXPECT_EQ(cut.at("failed"), 4);
  EXPECT_EQ(cut.at("completed"), 0);
  EXPECT_NE(out.find("of which cancelled (drain):"), std::string::npos) << out;
  const auto aborted = slow.Log(4);
  ASSERT_EQ(aborted.size(), 4u);
  for (const auto& line : aborted) EXPECT_EQ(line.at("status"), "aborted");
}

TEST(LoadModesE2e, ClientQueueTimeAndFirstByteAreReportedApart) {
  SimBench sb("lm-queue", 20, 5);
  ASSERT_TRUE(sb.ready());
  json result;
  std::string out;
  // 200/s into one slot of ~35 ms requests: request i waits about i x 30 ms.
  ASSERT_EQ(sb.Bench("--api chat --rate 200 --arrival constant --max-in-flight 1 --num-requests 6 "
                     "--input-len 8 --output-len 4",
                     &result, &out),
            0)
      << out;
  EXPECT_EQ(result.at("max_concurrency"), 1);
  EXPECT_GT(result.at("p99_client_queue_ms").get<double>(), 100);
  EXPECT_GT(result.at("mean_client_queue_ms").get<double>(), 30);
  // The emulator writes its first body bytes (the role chunk, then the first token) at TTFT:
  // the first byte comes no later than the first token.
  EXPECT_GE(result.at("median_ttfb_ms").get<double>(), 20);
  EXPECT_LE(result.at("median_ttfb_ms").get<double>(),
            result.at("median_ttft_ms").get<double>() + 1e-9);
}

TEST(LoadModesE2e, MultiTurnSessionsGrowThePromptAndWaitTheThinkTime) {
  for (const char* api : {"chat", "completions"}) {
    SimBench sb(fmt::format("lm-sessions-{}", api), 5, 1);
    ASSERT_TRUE(sb.ready());
    json result;
    std::string out;
    ASSERT_EQ(sb.Bench(fmt::format("--api {} --sessions 3 --turns 3 --concurrency 3 "
                                   "--think-time-s 0.2 --input-len 10 --output-len 5",
                                   api),
                       &result, &out),
              0)
        << out;
    EXPECT_EQ(result.at("completed"), 9);
    const auto lines = sb.Log(9);
    ASSERT_EQ(lines.size(), 9u);
    // Turn k's prompt: k previous user messages (10 words) and answers (5 words) + 10 new.
    std::map<int, int> by_prompt;
    for (const auto& line : lines) by_prompt[line.at("prompt_tokens").get<int>()]++;
    EXPECT_EQ(by_prompt, (std::map<int, int>{{10, 3}, {25, 3}, {40, 3}})) << api;
    // Think time: the turns come in three waves at least 0.2 s apart.
    const int64_t first = lines.front().at("arrival_ns").get<int64_t>();
    for (const auto& line : lines) {
      const int turn = (line.at("prompt_tokens").get<int>() - 10) / 15;
      const double at_s = (line.at("arrival_ns").get<int64_t>() - first) / 1e9;
      EXPECT_GE(at_s, turn * 0.2) << api;
      EXPECT_LT(at_s, turn * 0.35 + 0.2) << api;
    }
  }
}

TEST(LoadModesE2e, CustomJsonlPromptsAreSentAsWritten) {
  SimBench sb("lm-jsonl", 2, 1);
  ASSERT_TRUE(sb.ready());
  const std::string file = sb.harness().WriteFile(
      "prompts.jsonl",
      "{\"prompt\": \"one two three\"}\n"
      "\n"
      "{\"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, {\"role\": \"user\", "
      "\"content\": \"four five six seven\"}], \"max_tokens\": 3}\n"
      "{\"prompt\": \"a b\", \"output_len\": 2}\n");
  json result;
  std::string out;
  ASSERT_EQ(sb.Bench(fmt::format("--api chat --prompts jsonl:{} --num-requests 3 --concurrency 1 "
                                 "--output-len 6",
                                 file),
                     &result, &out),
            0)
      << out;
  EXPECT_EQ(result.at("completed"), 3);
  EXPECT_EQ(result.at("total_input_tokens"), 3 + 6 + 2);
  EXPECT_EQ(result.at("total_output_tokens"), 6 + 3 + 2);
  const auto lines = sb.Log(3);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].at("prompt_tokens"), 3);
  EXPECT_EQ(lines[1].at("prompt_tokens"), 6);
  EXPECT_EQ(lines[2].at("completion_tokens"), 2);

  const std::string bad =
      sb.harness().WriteFile("bad.jsonl", "{\"prompt\": \"fine\"}\n{\"prompt\": 7}\n");
  json none;
  EXPECT_NE(sb.Bench(fmt::format("--prompts jsonl:{} --num-requests 1 --concurrency 1", bad), &none,
                     &out),
            0);
  EXPECT_NE(out.find(bad + ":2: expected \"prompt\" to be a non-empty string, found number"),
            std::string::npos)
      << out;
}

TEST(LoadModesE2e, CompatVllmCountsTheRoleChunkAsAToken) {
  SimBench sb("lm-compat", 30, 2);
  ASSERT_TRUE(sb.ready());
  json result;
  std::string out;
  // vLLM's spelling of the slots: --max-concurrency without a rate is a closed loop.
  ASSERT_EQ(sb.Bench("--api chat --compat vllm --max-concurrency 2 --num-requests 8 "
                     "--input-len 8 --output-len 6",
                     &result, &out),
            0)
      << out;
  EXPECT_EQ(result.at("max_concurrency"), 2);
  EXPECT_EQ(result.at("request_rate"), "inf");
  EXPECT_NE(out.find("As vllm bench serve computes it"), std::string::npos);
  EXPECT_EQ(result.at("compat"), "vllm");
  const json& ours = result.at("servesweep_view");
  // The emulator writes its role-only chunk together with the first token, so both TTFTs agree;
  // but vLLM counts the role chunk as a token chunk: one more ITL gap (of ~0) per request, so
  // its mean ITL is ours x 40 / 48 (8 requests, 5 gaps each for us, 6 for vLLM).
  // vLLM's clock starts before the request is handed to the HTTP client, ours when it is sent:
  // apart by the load thread's hand-over, which a loaded machine stretched to 0.51 ms once. Within
  // 1 ms, under the 2 ms of a gap between tokens that counting the wrong chunk would add.
  EXPECT_NEAR(result.at("median_ttft_ms").get<double>(), ours.at("median_ttft_ms").get<double>(),
              1.0);
  EXPECT_GE(ours.at("median_ttft_ms").get<double>(), 30);
  // vLLM's latency ends at its last data chunk, ours at the stream's end: apart by the
  // emulator's last write, which a busy machine delays by a millisecond or two.
  EXPECT_NEAR(result.at("mean_e2el_ms").get<double>(), ours.at("mean_e2el_ms").get<double>(),
              0.05 * ours.at("mean_e2el_ms").get<double>());
  const double ours_itl = ours.at("mean_itl_ms").get<double>();
  EXPECT_GT(ours_itl, 0);
  EXPECT_NEAR(result.at("mean_itl_ms").get<double>(), ours_itl * 40 / 48, 0.05 * ours_itl);
  EXPECT_EQ(result.at("total_output_tokens"), ours.at("total_output_tokens"));
  EXPECT_EQ(result.at("completed"), 8);
}

}  // namespace
}  // namespace servesweep::testing

namespace servesweep::testing {
namespace {

// The same modes through a sweep (coordinator, agent, emulator as processes): the matrix keys
// reach the load generator and the record's new columns reach the results database.
TEST(LoadModesE2e, SweepRecordsTheWindowSessionsAndRamps) {
  Harness h("lm-sweep");
  const std::string matrix = h.WriteFile("modes.yaml", R"(name: modes
engine: sim
model: test-model
sim: {ttft_ms: 5, itl_ms: 2}
axes:
  workload:
    - {name: window, input_len: 8, output_len: 4, concurrency: 2, warmup_s: 0.2, duration_s: 0.5}
    - {name: chat-sessions, api: chat, input_len: 8, output_len: 4, concurrency: 2,
       sessions: {count: 3, turns: 2, think_time_s: 0.05}}
    - {name: ramp, input_len: 8, output_len: 4, num_requests: 20, arrival: constant,
       ramp: {kind: exponential, start_rate: 20, end_rate: 80}}
)");
  const std::string out = h.Path("out");
  std::string output;
  ASSERT_EQ(RunServesweep(fmt::format("run {} --out {}", matrix, out), &output), 0) << output;
  auto text = [&](const std::string& workload, const std::string& column) {
    const auto table = h.Query(
        out, fmt::format("SELECT \"{}\" FROM results WHERE workload = '{}'", column, workload));
    return table.rows.size() == 1 && !table.rows[0].empty() && !table.is_null[0][0]
               ? table.rows[0][0]
               : std::string("<none>");
  };
  EXPECT_EQ(text("window", "window_s"), "0.5");
  EXPECT_EQ(text("window", "cancelled"), "0");
  EXPECT_EQ(text("window", "arrival"), "closed-loop, warm-up 0.2 s, window 0.5 s");
  EXPECT_GT(std::stod(text("window", "window_output_throughput")), 100);
  EXPECT_GT(std::stoi(text("window", "completed")), 10);
  EXPECT_EQ(text("chat-sessions", "completed"), "6");
  EXPECT_EQ(text("chat-sessions", "arrival"), "sessions 3x2 turns, think 0.05 s");
  // Per-request records carry the session and the turn.
  const auto turns = h.Query(out,
                             "SELECT session_id, turn, COUNT(*) FROM requests JOIN results USING "
                             "(run_id) WHERE workload = 'chat-sessions' GROUP BY session_id, turn");
  ASSERT_EQ(turns.rows.size(), 6u);
  for (size_t i = 0; i < turns.rows.size(); ++i) {
    EXPECT_EQ(turns.rows[i][0], std::to_string(i / 2));
    EXPECT_EQ(turns.rows[i][1], std::to_string(i % 2));
    EXPECT_EQ(turns.rows[i][2], "1");
  }
  EXPECT_EQ(text("ramp", "completed"), "20");
  EXPECT_EQ(text("ramp", "arrival").rfind("constant ramp exponential 20->80/s over ", 0), 0u)
      << text("ramp", "arrival");
  EXPECT_NE(text("ramp", "ttfb_median_ms"), "<none>");
}

}  // namespace
}  // namespace servesweep::testing
