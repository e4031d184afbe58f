// GPU telemetry and provenance: parsing nvidia-smi's CSV rows, banner and NCCL version codes, the
// record's summary, and the sampler against a real child process (a fake nvidia-smi script on
// PATH, tests/data/fake-nvidia-smi), with and without nvidia-smi.
#include "agent/gpu_telemetry.h"

#include <capnp/message.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "agent/engine_processes.h"
#include "common/clock.h"
#include "common/ids.h"
#include "record/gpu_summary.h"
#include "record/record_builder.h"
#include "testing/process_helpers.h"

namespace servesweep::agent {
namespace {

TEST(GpuTelemetry, ParsesRowsAndSkipsFiguresTheGpuDoesNotReport) {
  std::vector<scraper::ScrapedSample> samples;
  EXPECT_TRUE(ParseGpuTelemetryLine("3, 87, 70123, 512.34, 1980", 5, &samples));
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_EQ(samples[0].signal, "gpu3.util_pct");
  EXPECT_EQ(samples[0].value, 87);
  EXPECT_EQ(samples[1].signal, "gpu3.memory_used_mib");
  EXPECT_EQ(samples[1].value, 70123);
  EXPECT_EQ(samples[2].signal, "gpu3.power_w");
  EXPECT_DOUBLE_EQ(samples[2].value, 512.34);
  EXPECT_EQ(samples[3].signal, "gpu3.sm_clock_mhz");
  EXPECT_EQ(samples[3].at_ns, 5);
  samples.clear();
  EXPECT_TRUE(ParseGpuTelemetryLine("0, 10, 100, [N/A], [Not Supported]", 0, &samples));
  EXPECT_EQ(samples.size(), 2u);
  EXPECT_FALSE(ParseGpuTelemetryLine("index, utilization.gpu [%], memory.used", 0, &samples));
  EXPECT_FALSE(ParseGpuTelemetryLine("No devices were found", 0, &samples));
  EXPECT_FALSE(ParseGpuTelemetryLine("", 0, &samples));
  EXPECT_EQ(samples.size(), 2u);
}

TEST(GpuTelemetry, SummaryAveragesUtilisationAndPowerAndTakesTheHighestMemory) {
  std::vector<scraper::ScrapedSample> samples;
  for (const char* line : {"0, 80, 1000, 300, 1900", "1, 40, 3000, 100, 1700",
                           "0, 60, 2000, 200, 1900", "1, 20, 500, [N/A], 1700"}) {
    ASSERT_TRUE(ParseGpuTelemetryLine(line, 0, &samples));
  }
  const record::GpuTelemetrySummary s = record::SummarizeGpuSamples(samples);
  EXPECT_DOUBLE_EQ(s.util_mean_pct, 50);
  EXPECT_DOUBLE_EQ(s.memory_used_max_mib, 3000);
  EXPECT_DOUBLE_EQ(s.power_mean_w, 200);
  EXPECT_DOUBLE_EQ(s.sm_clock_mean_mhz, 1800);
  EXPECT_EQ(s.gpus, 2u);
  EXPECT_EQ(s.rows, 4u);
  const record::GpuTelemetrySummary none =
      record::SummarizeGpuSamples({{0, "kv_cache_usage", 0.5}});
  EXPECT_TRUE(std::isnan(none.util_mean_pct));
  EXPECT_TRUE(std::isnan(none.memory_used_max_mib));
  EXPECT_EQ(none.gpus, 0u);
}

TEST(GpuTelemetry, ProvenanceParsers) {
  std::string driver, cuda;
  ParseNvidiaSmiBanner(
      "+----+\n| NVIDIA-SMI 570.86.15   Driver Version: 570.86.15   CUDA Version: 12.8  |\n",
      &driver, &cuda);
  EXPECT_EQ(driver, "570.86.15");
  EXPECT_EQ(cuda, "12.8");
  ParseNvidiaSmiBanner("NVIDIA-SMI has failed", &driver, &cuda);
  EXPECT_EQ(driver, "");
  EXPECT_EQ(cuda, "");
  EXPECT_EQ(NcclVersionFromCode(22105), "2.21.5");
  EXPECT_EQ(NcclVersionFromCode(2804), "2.8.4");
  EXPECT_EQ(NcclVersionFromCode(0), "");
  // The Python engines' version command (engines/flags/vllm-*.yaml).
  std::string version, commit;
  const std::string output = "version: 0.33.0 (commit 4ba787ec9)\nnccl: 2.27.3\n";
  ParseVersionOutput(output, &version, &commit);
  EXPECT_EQ(commit, "4ba787ec9");
  EXPECT_EQ(version.rfind("0.33.0", 0), 0u) << version;
  EXPECT_EQ(ParseNcclLine(output), "2.27.3");
  EXPECT_EQ(ParseNcclLine("version: 0.5.23\n"), "");
}

// Real output of an idle H200 (tests/data/h200-nvidia-smi/README.md).
TEST(GpuTelemetry, ParsesARealH200sOutput) {
  std::string driver, cuda;
  ParseNvidiaSmiBanner(testing::ReadSourceFile("tests/data/h200-nvidia-smi/banner.txt"), &driver,
                       &cuda);
  EXPECT_EQ(driver, "580.159.04");
  EXPECT_EQ(cuda, "13.0");
  std::vector<scraper::ScrapedSample> samples;
  std::stringstream rows(testing::ReadSourceFile("tests/data/h200-nvidia-smi/query.csv"));
  for (std::string row; std::getline(rows, row);) {
    EXPECT_TRUE(ParseGpuTelemetryLine(row, 0, &samples)) << row;
  }
  const record::GpuTelemetrySummary summary = record::SummarizeGpuSamples(samples);
  EXPECT_EQ(summary.gpus, 1u);
  EXPECT_EQ(summary.rows, 4u);
  EXPECT_DOUBLE_EQ(summary.util_mean_pct, 0);
  EXPECT_DOUBLE_EQ(summary.memory_used_max_mib, 0);
  EXPECT_NEAR(summary.power_mean_w, (76.81 + 76.89 + 76.96 + 76.92) / 4, 1e-9);
  EXPECT_DOUBLE_EQ(summary.sm_clock_mean_mhz, 345);
  const std::string raw = testing::ReadSourceFile("tests/data/h200-nvidia-smi/topo-m.txt");
  ASSERT_NE(raw.find('\x1b'), std::string::npos) << "the capture keeps nvidia-smi's ANSI codes";
  const std::string topology = CleanTopology(raw);
  EXPECT_EQ(topology.find('\x1b'), std::string::npos);
  EXPECT_EQ(topology.rfind("\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \t0-15", 0),
            0u)
      << topology;
  EXPECT_EQ(NcclVersionFromCode(22803), "2.28.3");  // libnccl.so.2 on that machine
}

// A scratch folder with the fake nvidia-smi as `nvidia-smi`, put first on PATH for the test.
class FakeNvidiaSmi {
 public:
  explicit FakeNvidiaSmi(bool install) {
    dir_ = std::filesystem::temp_directory_path() / ("servesweep-fake-smi-" + RandomHex(8));
    std::filesystem::create_directories(dir_);
    if (install) {
      std::filesystem::copy_file(std::string(SERVESWEEP_SOURCE_DIR) + "/tests/data/fake-nvidia-smi",
                                 dir_ / "nvidia-smi");
    }
    old_path_ = std::getenv("PATH") ? std::getenv("PATH") : "";
    // Without the fake: a PATH of standard folders that hold no nvidia-smi.
    std::string path = dir_.string();
    std::stringstream dirs(old_path_);
    for (std::string d; std::getline(dirs, d, ':');) {
      if (install || !std::filesystem::exists(d + "/nvidia-smi")) path += ":" + d;
    }
    ::setenv("PATH", path.c_str(), 1);
  }
  ~FakeNvidiaSmi() {
    ::setenv("PATH", old_path_.c_str(), 1);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  std::string dir() const { return dir_.string(); }

 private:
  std::filesystem::path dir_;
  std::string old_path_;
};

int ProcessesWith(const std::string& needle) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmdline.find(needle) != std::string::npos) ++count;
  }
  return count;
}

TEST(GpuTelemetry, SamplerReadsARealNvidiaSmiChildAsItPrintsAndStopsIt) {
  FakeNvidiaSmi fake(true);
  GpuTelemetrySampler sampler;
  const int64_t origin_ns = SteadyNowNs();
  sampler.Start(fake.Path("gpu.csv"), 200, origin_ns);
  ASSERT_TRUE(sampler.available());
  // Parsed while nvidia-smi still runs (incrementally), not only at the end.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (sampler.Samples().size() < 3 * 7 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GE(sampler.Samples().size(), 3u * 7) << "three intervals of 7 figures each";
  EXPECT_EQ(ProcessesWith(fake.dir() + "/nvidia-smi"), 1);
  sampler.Stop();
  EXPECT_EQ(ProcessesWith(fake.dir() + "/nvidia-smi"), 0) << "nvidia-smi left behind";
  const auto samples = sampler.Samples();
  int64_t last_ns = 0;
  for (const auto& s : samples) {
    EXPECT_GE(s.at_ns, last_ns);
    last_ns = s.at_ns;
  }
  const record::GpuTelemetrySummary summary = record::SummarizeGpuSamples(samples);
  EXPECT_DOUBLE_EQ(summary.util_mean_pct, 50);  // GPU 0 at 75 %, GPU 1 at 25 %
  EXPECT_DOUBLE_EQ(summary.memory_used_max_mib, 40000);
  EXPECT_DOUBLE_EQ(summary.power_mean_w, 300.5);  // GPU 1 reports no power
  EXPECT_DOUBLE_EQ(summary.sm_clock_mean_mhz, (1980 + 1755) / 2.0);
  EXPECT_EQ(summary.gpus, 2u);

  capnp::MallocMessageBuilder message;
  auto record = message.initRoot<schema::BenchmarkRecord>();
  record::FillGpuTelemetry(samples, "unused", record);
  EXPECT_EQ(std::string(record.getGpuTelemetry().cStr()).rfind("nvidia-smi: 2 GPU(s), ", 0), 0u)
      << record.getGpuTelemetry().cStr();
  EXPECT_DOUBLE_EQ(record.getGpuUtilMeanPct(), 50);

  const GpuProvenance provenance = ReadGpuProvenance(fake.Path("run"), "a1");
  EXPECT_EQ(provenance.driver_version, "570.86.15");
  EXPECT_EQ(provenance.cuda_version, "12.8");
  EXPECT_NE(provenance.topology.find("GPU0\t X \tNV18"), std::string::npos) << provenance.topology;
  EXPECT_EQ(provenance.why_missing, "");
  EXPECT_TRUE(std::filesystem::exists(fake.Path("run.topo.txt")));
}

TEST(GpuTelemetry, WithoutNvidiaSmiThereAreNoSamplesAndTheRecordSaysWhy) {
  FakeNvidiaSmi fake(false);
  GpuTelemetrySampler sampler;
  sampler.Start(fake.Path("gpu.csv"), 200, SteadyNowNs());
  EXPECT_FALSE(sampler.available());
  sampler.Stop();
  EXPECT_TRUE(sampler.Samples().empty());
  const GpuProvenance provenance = ReadGpuProvenance(fake.Path("run"), "a1");
  EXPECT_EQ(provenance.why_missing, "no nvidia-smi on agent a1");
  EXPECT_EQ(provenance.driver_version, "");
  capnp::MallocMessageBuilder message;
  auto record = message.initRoot<schema::BenchmarkRecord>();
  record::FillGpuTelemetry(sampler.Samples(), provenance.why_missing, record);
  EXPECT_EQ(std::string(record.getGpuTelemetry().cStr()), "n/a: no nvidia-smi on agent a1");
  EXPECT_TRUE(std::isnan(record.getGpuUtilMeanPct()));
  EXPECT_TRUE(std::isnan(record.getGpuPowerMeanW()));
}

}  // namespace
}  // namespace servesweep::agent

namespace servesweep::agent {
namespace {

// On a machine with GPUs: the real nvidia-smi, as the agent runs it. Skipped elsewhere.
TEST(GpuTelemetry, RealNvidiaSmiWhereThereIsOne) {
  if (!OnPath("nvidia-smi")) GTEST_SKIP() << "no nvidia-smi on PATH";
  const auto dir = std::filesystem::temp_directory_path() / ("servesweep-smi-" + RandomHex(8));
  std::filesystem::create_directories(dir);
  GpuTelemetrySampler sampler;
  sampler.Start((dir / "gpu.csv").string(), 500, SteadyNowNs());
  ASSERT_TRUE(sampler.available());
  std::this_thread::sleep_for(std::chrono::milliseconds(2600));
  sampler.Stop();
  const record::GpuTelemetrySummary summary = record::SummarizeGpuSamples(sampler.Samples());
  EXPECT_GE(summary.gpus, 1u);
  EXPECT_GE(summary.rows, 3u * summary.gpus);
  EXPECT_GE(summary.util_mean_pct, 0);
  EXPECT_LE(summary.util_mean_pct, 100);
  EXPECT_GE(summary.memory_used_max_mib, 0);  // 0 MiB on an idle GPU
  EXPECT_GT(summary.sm_clock_mean_mhz, 0);
  const GpuProvenance provenance = ReadGpuProvenance((dir / "run").string(), "real");
  EXPECT_NE(provenance.driver_version, "");
  EXPECT_NE(provenance.cuda_version, "");
  EXPECT_NE(provenance.topology.find("GPU0"), std::string::npos) << provenance.topology;
  std::cout << "driver " << provenance.driver_version << ", CUDA " << provenance.cuda_version
            << ", NCCL '" << provenance.nccl_version << "', " << summary.gpus << " GPU(s), util "
            << summary.util_mean_pct << " %, memory max " << summary.memory_used_max_mib
            << " MiB, power " << summary.power_mean_w << " W, SM clock "
            << summary.sm_clock_mean_mhz << " MHz\n";
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace servesweep::agent
