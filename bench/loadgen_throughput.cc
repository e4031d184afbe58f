// How fast the load generator can drive the emulator (another process, real HTTP/SSE) on this
// machine, and what it costs the client: requests/s, output chunks/s and client CPU per request,
// at several concurrency levels. The emulator answers with no delay (ttft = itl = 0), so the
// figures are the client + server ceiling, far above what a real engine serves.
//
// Usage: loadgen_throughput [requests_per_level=4000] [output_len=16]
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include "common/net.h"
#include "common/subprocess.h"
#include "loadgen/bench_metrics.h"
#include "loadgen/load_generator.h"
#include "scraper/http_get.h"

namespace {

double CpuSeconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// CPU seconds a child process has used so far (utime + stime from /proc).
double ChildCpuSeconds(pid_t pid) {
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));  // skip "pid (comm) "
  std::string field;
  double ticks = 0;
  for (int i = 3; fields >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);  // utime, stime
    if (i == 15) break;
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

}  // namespace

int main(int argc, char** argv) {
  using namespace servesweep;
  const uint32_t requests = argc > 1 ? static_cast<uint32_t>(std::atoi(argv[1])) : 4000;
  const uint32_t output_len = argc > 2 ? static_cast<uint32_t>(std::atoi(argv[2])) : 16;
  const uint16_t port = FreeLoopbackPort();
  SpawnOptions options;
  options.argv = {SERVESWEEP_BINARY, "--log-level", "warn",     "sim", "--model", "m",
                  "--ttft-ms",       "0",           "--itl-ms", "0"};
  options.argv.push_back("--port");
  options.argv.push_back(std::to_string(port));
  ChildProcess sim;
  Status status = ChildProcess::Spawn(options, &sim);
  if (!status.ok()) {
    fmt::print(stderr, "{}\n", status.message());
    return 1;
  }
  const std::string url = fmt::format("http://127.0.0.1:{}", port);
  for (int i = 0; i < 500; ++i) {
    scraper::HttpResponse response;
    if (scraper::HttpGet(url + "/health", 200, &response).ok() && response.status_code == 200)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  fmt::print("load generator -> emulator (ttft=itl=0), {} requests per level, {} tokens each\n",
             requests, output_len);
  fmt::print("{:>11} {:>11} {:>10} {:>18} {:>17} {:>7}\n", "concurrency", "requests/s", "chunks/s",
             "client CPU us/req", "server CPU us/req", "failed");
  for (uint32_t concurrency : {1u, 16u, 64u, 256u}) {
    loadgen::LoadSettings settings;
    settings.base_url = url;
    settings.model = "m";
    settings.concurrency = concurrency;
    settings.num_requests = requests;
    settings.warmup_requests = concurrency;
    settings.input_len_tok = 64;
    settings.output_len_tok = output_len;
    const double cpu_before = CpuSeconds();
    const double server_cpu_before = ChildCpuSeconds(sim.pid());
    loadgen::LoadResult result;
    if (Status refused = loadgen::RunLoad(settings, &result); !refused.ok()) {
      std::fprintf(stderr, "%s\n", refused.message().c_str());
      std::exit(2);
    }
    const double cpu_s = CpuSeconds() - cpu_before;
    const double server_cpu_s = ChildCpuSeconds(sim.pid()) - server_cpu_before;
    const loadgen::BenchSummary summary = loadgen::Summarize(result);
    uint64_t chunks = 0;
    for (const auto& r : result.requests) chunks += r.chunk_times_ns.size();
    const double sent = requests + concurrency;  // warm-up included in the CPU figures
    fmt::print("{:>11} {:>11.0f} {:>10.0f} {:>18.1f} {:>17.1f} {:>7}\n", concurrency,
               summary.request_throughput, static_cast<double>(chunks) / summary.duration_s,
               cpu_s * 1e6 / sent, server_cpu_s * 1e6 / sent, summary.failed);
  }
  sim.Stop(std::chrono::seconds(2));
  return 0;
}
