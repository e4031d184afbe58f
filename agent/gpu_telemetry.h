// GPU telemetry and GPU provenance of a node, read through nvidia-smi (a child process, so the
// agent needs no NVML at build time and a node without a driver simply has none):
//  - GpuTelemetrySampler runs `nvidia-smi --query-gpu=index,utilization.gpu,memory.used,
//    power.draw,clocks.sm --format=csv,noheader,nounits -lms <interval>` for the measured phase,
//    its output kept in a CSV file beside the run's logs and parsed as it grows, into samples
//    named `gpu<i>.util_pct`, `gpu<i>.memory_used_mib`, `gpu<i>.power_w`, `gpu<i>.sm_clock_mhz`.
//  - ReadGpuProvenance asks nvidia-smi for the driver and CUDA versions and `topo -m`, and the
//    NCCL library (when the agent can load libnccl.so.2) for its version.
//
// Thread-safety: a sampler is owned by one thread (its reader thread is internal); the free
// functions are pure or run short child processes.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/subprocess.h"
#include "scraper/metrics_scraper.h"

namespace servesweep::agent {

// The columns the sampler asks nvidia-smi for, in order.
inline constexpr const char* kGpuTelemetryQuery =
    "index,utilization.gpu,memory.used,power.draw,clocks.sm";

// Whether `program` is an executable on PATH.
bool OnPath(const std::string& program);

// Parses one line of the query above ("0, 87, 70123, 512.34, 1980"); appends one sample per
// figure nvidia-smi knew (it prints "[N/A]" or "[Not Supported]" for the others). False when
// the line is not such a row.
bool ParseGpuTelemetryLine(const std::string& line, int64_t at_ns,
                           std::vector<scraper::ScrapedSample>* out);

class GpuTelemetrySampler {
 public:
  ~GpuTelemetrySampler();
  // Starts nvidia-smi with its output in `csv_path`; samples are timed on the steady clock
  // relative to `origin_ns`. Without nvidia-smi on PATH nothing starts and available() is false.
  void Start(const std::string& csv_path, int interval_ms, int64_t origin_ns);
  // Stops nvidia-smi (its group) and reads what it printed last.
  void Stop();
  bool available() const { return started_; }
  std::vector<scraper::ScrapedSample> Samples() const;

 private:
  void ReadNewLines();

  ChildProcess process_;
  std::string csv_path_;
  int64_t origin_ns_ = 0;
  bool started_ = false;
  std::atomic<bool> stop_{false};
  std::thread reader_;
  uint64_t offset_ = 0;  // bytes of csv_path_ consumed (reader thread, then Stop())
  std::string partial_;  // an unfinished last line
  mutable std::mutex mutex_;
  std::vector<scraper::ScrapedSample> samples_;  // guarded by mutex_
};

struct GpuProvenance {
  std::string driver_version;  // "" when unknown
  std::string cuda_version;
  std::string nccl_version;
  std::string topology;     // `nvidia-smi topo -m` as printed
  std::string why_missing;  // e.g. "no nvidia-smi on agent a1"
};

// Parses the banner of plain `nvidia-smi` ("Driver Version: 570.86.15   CUDA Version: 12.8").
void ParseNvidiaSmiBanner(const std::string& text, std::string* driver, std::string* cuda);

// `nvidia-smi topo -m` output without the ANSI codes it prints even into a file.
std::string CleanTopology(const std::string& topo_m);

// NCCL's version as the library reports it (ncclGetVersion through dlopen of libnccl.so.2),
// e.g. "2.21.5"; "" when the agent cannot load it.
std::string NcclLibraryVersion();
// ncclGetVersion's code to "major.minor.patch" (codes >= 10000 since NCCL 2.9, else x*1000).
std::string NcclVersionFromCode(int code);

// Runs nvidia-smi (banner and `topo -m`, 20 s at most each, outputs in `<log_prefix>.nvidia-smi.
// log` and `<log_prefix>.topo.txt`) and reads NCCL's version. Never fails: what it cannot tell
// stays empty and why_missing says so.
GpuProvenance ReadGpuProvenance(const std::string& log_prefix, const std::string& agent_id);

}  // namespace servesweep::agent
