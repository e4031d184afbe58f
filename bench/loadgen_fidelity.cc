// The load generator as a measuring instrument, against a server another process runs (the
// emulator or nginx; bench/loadgen_vs_nginx.sh starts them):
//   throughput URL REQUESTS CONCURRENCY OUTPUT_TOK  closed loop, as `servesweep bench` runs it
//                                       (RunLoad, warm-up of one request per slot): requests/s
//   hold URL STREAMS OUTPUT_TOK         STREAMS requests at once (closed loop, concurrency =
//                                       STREAMS): the peak of streams open together, failures
//   lateness URL RATE REQUESTS OUTPUT_TOK  open loop (Poisson, uncapped): send-time lateness
//                                       (start - scheduled) p50 / p99 / max, achieved rate
//   agree URL SIM_LOG REQUESTS CONCURRENCY OUTPUT_TOK  against `servesweep sim --request-log
//                                       SIM_LOG`: TTFT and each ITL as the client measured them
//                                       beside the emulator's own timestamps, p50 / p99 / max of
//                                       the absolute differences
// Figures are printed, never asserted (shared machines are noisy).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/percentile.h"
#include "loadgen/load_generator.h"

namespace {

using servesweep::Status;
using servesweep::loadgen::LoadResult;
using servesweep::loadgen::LoadSettings;
using servesweep::loadgen::RequestRecord;
using servesweep::loadgen::RunLoad;

// numpy's percentile (common/percentile.h), on a sorted copy.
double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return servesweep::PercentileOfSorted(v, p);
}

void PrintDistribution(const char* name, const std::vector<double>& us) {
  fmt::print("{:<34} p50 {:>9.1f} us   p99 {:>9.1f} us   max {:>9.1f} us   (n = {})\n", name,
             Percentile(us, 50), Percentile(us, 99), Percentile(us, 100), us.size());
}

LoadSettings Base(const std::string& url, uint32_t requests, uint32_t output_tok) {
  LoadSettings s;
  s.base_url = url;
  s.model = "m";
  s.num_requests = requests;
  s.input_len_tok = 16;
  s.output_len_tok = output_tok;
  s.request_timeout_s = 300;
  s.seed = 1;
  return s;
}

uint32_t Failed(const LoadResult& r) {
  uint32_t failed = 0;
  for (const auto& q : r.requests) failed += !q.success;
  return failed;
}

std::string FirstError(const LoadResult& r) {
  for (const auto& q : r.requests) {
    if (!q.success) return q.error;
  }
  return "";
}

int Throughput(const std::string& url, uint32_t requests, uint32_t concurrency,
               uint32_t output_tok) {
  LoadSettings s = Base(url, requests, output_tok);
  s.concurrency = concurrency;
  s.warmup_requests = concurrency;
  LoadResult r;
  if (Status status = RunLoad(s, &r); !status.ok()) {
    std::fprintf(stderr, "%s\n", status.message().c_str());
    std::exit(2);
  }
  uint32_t completed = 0;
  for (const auto& q : r.requests) completed += q.success;
  fmt::print("throughput: {:.0f} requests/s ({} completed, {} failed, {:.2f} s)\n",
             static_cast<double>(completed) / r.duration_s, completed, Failed(r), r.duration_s);
  return 0;
}

int Hold(const std::string& url, uint32_t streams, uint32_t output_tok) {
  LoadSettings s = Base(url, streams, output_tok);
  s.concurrency = streams;
  LoadResult r;
  if (Status status = RunLoad(s, &r); !status.ok()) {
    std::fprintf(stderr, "%s\n", status.message().c_str());
    std::exit(2);
  }
  // Peak of streams open together: +1 at each start, -1 at each done.
  std::vector<std::pair<int64_t, int>> edges;
  for (const auto& q : r.requests) {
    edges.emplace_back(q.start_ns, +1);
    edges.emplace_back(q.done_ns, -1);
  }
  std::sort(edges.begin(), edges.end());
  int open = 0, peak = 0;
  for (const auto& [t, d] : edges) peak = std::max(peak, open += d);
  // How long all of them were open at once: last start to first done.
  int64_t last_start = 0, first_done = INT64_MAX;
  for (const auto& q : r.requests) {
    last_start = std::max(last_start, q.start_ns);
    first_done = std::min(first_done, q.done_ns);
  }
  fmt::print(
      "hold: {} streams requested, peak {} open together, all open for {:.2f} s, {} failed{}{}, "
      "run {:.1f} s\n",
      streams, peak, static_cast<double>(first_done - last_start) / 1e9, Failed(r),
      Failed(r) ? ", first error: " : "", FirstError(r), r.duration_s);
  return 0;
}

int Lateness(const std::string& url, double rate, uint32_t requests, uint32_t output_tok) {
  LoadSettings s = Base(url, requests, output_tok);
  s.request_rate_per_s = rate;
  s.concurrency = 0;
  LoadResult r;
  if (Status status = RunLoad(s, &r); !status.ok()) {
    std::fprintf(stderr, "%s\n", status.message().c_str());
    std::exit(2);
  }
  std::vector<double> late_us;
  for (const auto& q : r.requests) {
    late_us.push_back(static_cast<double>(q.start_ns - q.scheduled_ns) / 1e3);
  }
  const int64_t last_start =
      std::max_element(r.requests.begin(), r.requests.end(), [](const auto& a, const auto& b) {
        return a.start_ns < b.start_ns;
      })->start_ns;
  fmt::print(
      "lateness: target {:.0f} requests/s, achieved send rate {:.0f} requests/s, {} failed\n", rate,
      static_cast<double>(requests - 1) / (static_cast<double>(last_start) / 1e9), Failed(r));
  PrintDistribution("send lateness (start - scheduled)", late_us);
  return 0;
}

struct SimRequest {
  int64_t arrival_ns = 0;
  uint32_t prompt_tok = 0;
  std::vector<int64_t> token_ns;
  bool used = false;
};

int Agree(const std::string& url, const std::string& sim_log, uint32_t requests,
          uint32_t concurrency, uint32_t output_tok) {
  LoadSettings s = Base(url, requests, output_tok);
  s.concurrency = concurrency;
  // Prompts of 16 .. 16 + concurrency - 1 token ids in turn: requests in flight together differ
  // in prompt length (which the emulator logs), not in output length, so they still start and
  // end together as a closed loop's do, and each pairs with its line of the log (below).
  s.replay_arrivals = false;
  s.token_id_prompts = true;
  for (uint32_t i = 0; i < requests; ++i) {
    servesweep::loadgen::PlannedRequest planned;
    planned.input_len_tok = 16 + i % concurrency;
    planned.output_len_tok = output_tok;
    s.plan.push_back(planned);
  }
  LoadResult r;
  if (Status status = RunLoad(s, &r); !status.ok()) {
    std::fprintf(stderr, "%s\n", status.message().c_str());
    std::exit(2);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the emulator flushes each 1 s
  std::vector<SimRequest> sim;
  std::ifstream in(sim_log);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.value("status", "") != "ok") continue;
    sim.push_back({j["arrival_ns"].get<int64_t>(), j["prompt_tokens"].get<uint32_t>(),
                   j["token_ns"].get<std::vector<int64_t>>()});
  }
  // Pair each client request with the emulator request of the same prompt length whose first
  // token went out closest to the one the client saw (the log has no client id). Requests of
  // equal prompt length are `concurrency` requests apart, a whole request's time; the delivery
  // delay is microseconds.
  std::vector<double> ttft_diff_us, itl_diff_us, first_token_delay_us, request_delay_us;
  uint32_t unmatched = 0;
  for (const RequestRecord& q : r.requests) {
    if (!q.success) {
      ++unmatched;
      continue;
    }
    const int64_t first_abs = r.t0_steady_ns + q.first_token_ns;
    SimRequest* best = nullptr;
    for (auto& c : sim) {
      if (c.used || c.prompt_tok != q.prompt_tokens || c.token_ns.size() != q.chunk_times_ns.size())
        continue;
      if (!best ||
          std::llabs(c.token_ns[0] - first_abs) < std::llabs(best->token_ns[0] - first_abs)) {
        best = &c;
      }
    }
    if (!best || std::llabs(best->token_ns[0] - first_abs) > 2'000'000) {
      ++unmatched;
      continue;
    }
    best->used = true;
    const double client_ttft = static_cast<double>(q.first_token_ns - q.sent_ns);
    const double sim_ttft = static_cast<double>(best->token_ns[0] - best->arrival_ns);
    ttft_diff_us.push_back(std::abs(client_ttft - sim_ttft) / 1e3);
    first_token_delay_us.push_back(static_cast<double>(first_abs - best->token_ns[0]) / 1e3);
    request_delay_us.push_back(
        static_cast<double>(best->arrival_ns - (r.t0_steady_ns + q.sent_ns)) / 1e3);
    for (size_t i = 1; i < q.chunk_times_ns.size(); ++i) {
      const double client_gap = static_cast<double>(q.chunk_times_ns[i] - q.chunk_times_ns[i - 1]);
      const double sim_gap = static_cast<double>(best->token_ns[i] - best->token_ns[i - 1]);
      itl_diff_us.push_back(std::abs(client_gap - sim_gap) / 1e3);
    }
  }
  fmt::print(
      "agree: {} requests at concurrency {}, {} tokens each; {} matched, {} unmatched, {} failed\n",
      requests, concurrency, output_tok, ttft_diff_us.size(), unmatched, Failed(r));
  PrintDistribution("|TTFT client - TTFT emulator|", ttft_diff_us);
  PrintDistribution("|ITL client - ITL emulator|", itl_diff_us);
  // The two legs of the TTFT difference: the request's way in, the first token's way out.
  PrintDistribution("request: sim arrival - client sent", request_delay_us);
  PrintDistribution("first token: client saw - sim sent", first_token_delay_us);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> a(argv + 1, argv + argc);
  auto u = [&](size_t i) { return static_cast<uint32_t>(std::stoul(a.at(i))); };
  try {
    if (a.size() == 5 && a[0] == "throughput") return Throughput(a[1], u(2), u(3), u(4));
    if (a.size() == 4 && a[0] == "hold") return Hold(a[1], u(2), u(3));
    if (a.size() == 5 && a[0] == "lateness") return Lateness(a[1], std::stod(a[2]), u(3), u(4));
    if (a.size() == 6 && a[0] == "agree") return Agree(a[1], a[2], u(3), u(4), u(5));
  } catch (const std::exception& e) {
    fmt::print(stderr, "loadgen_fidelity: {}\n", e.what());
    return 1;
  }
  fmt::print(stderr,
             "usage: loadgen_fidelity throughput URL REQUESTS CONCURRENCY OUTPUT_TOK\n"
             "       loadgen_fidelity hold URL STREAMS OUTPUT_TOK\n"
             "       loadgen_fidelity lateness URL RATE REQUESTS OUTPUT_TOK\n"
             "       loadgen_fidelity agree URL SIM_LOG REQUESTS CONCURRENCY OUTPUT_TOK\n");
  return 2;
}
