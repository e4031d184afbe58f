#include "tests/support/harness.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "common/ids.h"
#include "common/net.h"
#include "scraper/http_get.h"
#include "transport/curve_keys.h"

namespace servesweep::testing {

std::string ServesweepBinary() { return SERVESWEEP_BINARY; }

Harness::Harness(const std::string& name) : scratch_(name) {}

Harness::~Harness() {
  for (auto& process : processes_) {
    if (process->started() && !process->Poll()) process->Stop(std::chrono::seconds(2));
  }
  if (::testing::Test::HasFailure()) scratch_.Keep();  // its logs and databases tell why
}

std::string Harness::KeyPath(const std::string& name, const std::string& ext) const {
  const std::string path = Path("keys/" + name + "." + ext);
  if (!std::filesystem::exists(path)) {
    CurveKeypair keypair;
    if (Status s = GenerateCurveKeypair(&keypair); !s.ok()) ADD_FAILURE() << s.message();
    if (Status s = WriteCurveKeypair(Path("keys"), name, keypair); !s.ok()) {
      ADD_FAILURE() << s.message();
    }
  }
  return path;
}

std::vector<std::string> Harness::CoordinatorKeyArgs() {
  return {"--secret-key", KeyPath("coordinator", "secret"), "--allowed-keys",
          KeyPath("agent", "pub")};
}

std::vector<std::string> Harness::AgentKeyArgs(const std::string& agent_key,
                                               const std::string& server_key) {
  return {"--server-key", KeyPath(server_key, "pub"), "--secret-key", KeyPath(agent_key, "secret")};
}

size_t Harness::Start(const std::string& log_name, std::vector<std::string> args,
                      const std::vector<std::string>& wrapper) {
  SpawnOptions options;
  options.argv = wrapper;
  options.argv.push_back(ServesweepBinary());
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.log_path = Path(log_name + ".log");
  auto process = std::make_unique<ChildProcess>();
  Status status = ChildProcess::Spawn(options, process.get());
  if (!status.ok()) throw std::runtime_error(status.message());
  processes_.push_back(std::move(process));
  return processes_.size() - 1;
}

std::string Harness::Log(const std::string& log_name) const {
  std::ifstream in(Path(log_name + ".log"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

bool Harness::WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return condition();
}

bool Harness::WaitForHealthy(const std::string& base_url) {
  return WaitFor(
      [&] {
        scraper::HttpResponse r;
        return scraper::HttpGet(base_url + "/health", 200, &r).ok() && r.status_code == 200;
      },
      std::chrono::seconds(10));
}

results::Table Harness::Query(const std::string& out_dir, const std::string& sql) const {
  results::Table table;
  const std::string db = out_dir + "/results.db";
  if (!std::filesystem::exists(db)) return table;
  std::unique_ptr<results::ResultsStore> store;
  if (!results::ResultsStore::Open(db, &store).ok()) return table;
  // Tests poll the database while the coordinator creates and writes it: a failed query reads as
  // no rows (not yet), its reason on stderr for the test's log.
  if (Status s = store->Query(sql, &table); !s.ok()) {
    std::cerr << "harness: query failed (read as no rows): " << sql << ": " << s.message() << "\n";
    return results::Table{};
  }
  return table;
}

int64_t Harness::QueryInt(const std::string& out_dir, const std::string& sql) const {
  const auto table = Query(out_dir, sql);
  if (table.rows.empty() || table.rows[0].empty() || table.rows[0][0].empty()) return -1;
  return std::stoll(table.rows[0][0]);
}

int RunServesweep(const std::string& args, std::string* output) {
  const int status = RunShell(fmt::format("{} {} 2>&1", ServesweepBinary(), args), output);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string SimMatrix(const std::string& name, int runs, int num_requests, int concurrency,
                      int output_len, double ttft_ms, double itl_ms, int tp) {
  std::string levels;
  for (int i = 0; i < runs; ++i) levels += fmt::format("{}{}", i ? ", " : "", concurrency + i);
  return fmt::format(R"(name: {}
engine: sim
model: test-model
sim: {{ttft_ms: {}, itl_ms: {}}}
layout: {{tp: {}}}
workload: {{input_len: 16, output_len: {}, num_requests: {}, warmup_requests: 1}}
axes:
  concurrency: [{}]
)",
                     name, ttft_ms, itl_ms, tp, output_len, num_requests, levels);
}

bool OnPath(const std::string& program) {
  std::stringstream dirs(std::getenv("PATH") ? std::getenv("PATH") : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (!dir.empty() && ::access((dir + "/" + program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

}  // namespace servesweep::testing
