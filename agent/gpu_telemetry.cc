#include "agent/gpu_telemetry.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "common/clock.h"

namespace servesweep::agent {
namespace {

std::string Trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t\r\n");
  const size_t end = s.find_last_not_of(" \t\r\n");
  return begin == std::string::npos ? "" : s.substr(begin, end - begin + 1);
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs `argv` with stdout+stderr in `log_path` for at most `timeout`; the output, or "" when it
// did not end well.
std::string RunCapture(const std::vector<std::string>& argv, const std::string& log_path,
                       std::chrono::milliseconds timeout) {
  std::error_code ec;
  std::filesystem::remove(log_path, ec);
  ChildProcess process;
  if (!ChildProcess::Spawn({argv, {}, log_path, ""}, &process).ok()) return "";
  const auto status = process.Wait(timeout);
  if (!status) {
    process.Stop(std::chrono::seconds(1));
    return "";
  }
  if (*status != 0) return "";
  return ReadWholeFile(log_path);
}

// Drops ANSI escape sequences (ESC [ ... letter): `nvidia-smi topo -m` underlines its header even
// when printing to a file.
std::string StripAnsiCodes(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {
      size_t j = i + 2;
      while (j < text.size() && !std::isalpha(static_cast<unsigned char>(text[j]))) ++j;
      i = j;
      continue;
    }
    out += text[i];
  }
  return out;
}

constexpr const char* kFigures[] = {"util_pct", "memory_used_mib", "power_w", "sm_clock_mhz"};

}  // namespace

bool OnPath(const std::string& program) {
  const char* path_env = std::getenv("PATH");
  std::stringstream dirs(path_env ? path_env : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (!dir.empty() && ::access((dir + "/" + program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

bool ParseGpuTelemetryLine(const std::string& line, int64_t at_ns,
                           std::vector<scraper::ScrapedSample>* out) {
  std::vector<std::string> fields;
  std::stringstream cells(line);
  for (std::string cell; std::getline(cells, cell, ',');) fields.push_back(Trim(cell));
  if (fields.size() != 5) return false;
  uint32_t index = 0;
  try {
    size_t used = 0;
    index = static_cast<uint32_t>(std::stoul(fields[0], &used));
    if (used != fields[0].size()) return false;
  } catch (const std::exception&) {
    return false;
  }
  for (size_t i = 1; i < fields.size(); ++i) {
    char* end = nullptr;
    const double value = std::strtod(fields[i].c_str(), &end);
    if (fields[i].empty() || end != fields[i].c_str() + fields[i].size() || !std::isfinite(value))
      continue;  // "[N/A]", "[Not Supported]"
    out->push_back({at_ns, fmt::format("gpu{}.{}", index, kFigures[i - 1]), value});
  }
  return true;
}

GpuTelemetrySampler::~GpuTelemetrySampler() { Stop(); }

void GpuTelemetrySampler::Start(const std::string& csv_path, int interval_ms, int64_t origin_ns) {
  if (started_ || !OnPath("nvidia-smi")) return;
  csv_path_ = csv_path;
  origin_ns_ = origin_ns;
  std::error_code ec;
  std::filesystem::remove(csv_path, ec);
  SpawnOptions options;
  options.argv = {"nvidia-smi", std::string("--query-gpu=") + kGpuTelemetryQuery,
                  "--format=csv,noheader,nounits", "-lms", std::to_string(interval_ms)};
  options.log_path = csv_path;
  options.stderr_path = csv_path + ".err";
  if (!ChildProcess::Spawn(options, &process_).ok()) return;
  started_ = true;
  stop_.store(false);
  reader_ = std::thread([this] {
    while (!stop_.load()) {
      ReadNewLines();
      for (int i = 0; i < 10 && !stop_.load(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  });
}

void GpuTelemetrySampler::ReadNewLines() {
  std::ifstream in(csv_path_, std::ios::binary);
  if (!in) return;
  in.seekg(static_cast<std::streamoff>(offset_));
  std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (chunk.empty()) return;
  offset_ += chunk.size();
  partial_ += chunk;
  // Rows are timed when read (every 100 ms): nvidia-smi writes one block per interval.
  const int64_t at_ns = SteadyNowNs() - origin_ns_;
  std::vector<scraper::ScrapedSample> parsed;
  size_t start = 0;
  for (size_t newline; (newline = partial_.find('\n', start)) != std::string::npos;
       start = newline + 1) {
    ParseGpuTelemetryLine(partial_.substr(start, newline - start), at_ns, &parsed);
  }
  partial_.erase(0, start);
  std::lock_guard<std::mutex> lock(mutex_);
  samples_.insert(samples_.end(), parsed.begin(), parsed.end());
}

void GpuTelemetrySampler::Stop() {
  if (!started_) return;
  stop_.store(true);
  if (reader_.joinable()) reader_.join();
  process_.Stop(std::chrono::seconds(2));
  ReadNewLines();
  started_ = false;
}

std::vector<scraper::ScrapedSample> GpuTelemetrySampler::Samples() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return samples_;
}

std::string CleanTopology(const std::string& topo_m) { return StripAnsiCodes(topo_m); }

void ParseNvidiaSmiBanner(const std::string& text, std::string* driver, std::string* cuda) {
  auto after = [&text](const std::string& label) {
    const size_t at = text.find(label);
    if (at == std::string::npos) return std::string();
    const size_t begin = text.find_first_not_of(' ', at + label.size());
    if (begin == std::string::npos) return std::string();
    const size_t end = text.find_first_of(" |\r\n", begin);
    return text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  };
  *driver = after("Driver Version:");
  *cuda = after("CUDA Version:");
}

std::string NcclVersionFromCode(int code) {
  if (code <= 0) return "";
  if (code >= 10000) {
    return fmt::format("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100);
  }
  return fmt::format("{}.{}.{}", code / 1000, (code % 1000) / 100, code % 100);
}

std::string NcclLibraryVersion() {
  void* library = ::dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) return "";
  using GetVersion = int (*)(int*);
  auto get_version = reinterpret_cast<GetVersion>(::dlsym(library, "ncclGetVersion"));
  int code = 0;
  std::string version;
  if (get_version != nullptr && get_version(&code) == 0) version = NcclVersionFromCode(code);
  ::dlclose(library);
  return version;
}

GpuProvenance ReadGpuProvenance(const std::string& log_prefix, const std::string& agent_id) {
  GpuProvenance p;
  p.nccl_version = NcclLibraryVersion();
  if (!OnPath("nvidia-smi")) {
    p.why_missing = fmt::format("no nvidia-smi on agent {}", agent_id);
    return p;
  }
  const auto timeout = std::chrono::seconds(20);
  const std::string banner = RunCapture({"nvidia-smi"}, log_prefix + ".nvidia-smi.log", timeout);
  ParseNvidiaSmiBanner(banner, &p.driver_version, &p.cuda_version);
  p.topology =
      CleanTopology(RunCapture({"nvidia-smi", "topo", "-m"}, log_prefix + ".topo.txt", timeout));
  if (banner.empty()) p.why_missing = fmt::format("nvidia-smi failed on agent {}", agent_id);
  return p;
}

}  // namespace servesweep::agent
