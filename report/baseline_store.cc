#include "report/baseline_store.h"

#include <fmt/format.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/clock.h"
#include "report/comparison.h"
#include "results/results_store.h"

namespace servesweep::report {
namespace {

namespace fs = std::filesystem;

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 100 || name[0] == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

bool AllDigits(const std::string& text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A consistent copy of a live or finished SQLite database (VACUUM INTO: one read transaction).
Status CopyDatabase(const std::string& from, const std::string& to) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(from.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr);
  std::unique_ptr<sqlite3, decltype(&sqlite3_close)> db(raw, &sqlite3_close);
  if (rc != SQLITE_OK) {
    return Status::Internal(fmt::format("{}: cannot open: {}", from, sqlite3_errstr(rc)));
  }
  sqlite3_busy_timeout(db.get(), 5000);
  sqlite3_stmt* raw_stmt = nullptr;
  if (sqlite3_prepare_v2(db.get(), "VACUUM INTO ?", -1, &raw_stmt, nullptr) != SQLITE_OK) {
    return Status::Internal(fmt::format("{}: cannot copy: {}", from, sqlite3_errmsg(db.get())));
  }
  std::unique_ptr<sqlite3_stmt, decltype(&sqlite3_finalize)> stmt(raw_stmt, &sqlite3_finalize);
  sqlite3_bind_text(stmt.get(), 1, to.c_str(), -1, SQLITE_TRANSIENT);
  if (sqlite3_step(stmt.get()) != SQLITE_DONE) {
    return Status::Internal(
        fmt::format("copying {} to {} failed: {}", from, to, sqlite3_errmsg(db.get())));
  }
  return Status::Ok();
}

nlohmann::json ToJson(const BaselineInfo& info) {
  return {{"name", info.name},
          {"generation", info.generation},
          {"frozen_unix_ms", info.frozen_unix_ms},
          {"source_dir", info.source_dir},
          {"reason", info.reason},
          {"runs", info.runs},
          {"ok_runs", info.ok_runs}};
}

Status ReadInfo(const fs::path& dir, BaselineInfo* out) {
  const fs::path path = dir / "baseline.json";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const auto json = nlohmann::json::parse(text.str(), nullptr, false);
  if (!in || json.is_discarded() || !json.is_object()) {
    return Status::InvalidArgument(fmt::format(
        "{}: expected a baseline description (JSON object), found none", path.string()));
  }
  try {
    out->name = json.at("name").get<std::string>();
    out->generation = json.at("generation").get<uint32_t>();
    out->frozen_unix_ms = json.at("frozen_unix_ms").get<int64_t>();
    out->source_dir = json.at("source_dir").get<std::string>();
    out->reason = json.at("reason").get<std::string>();
    out->runs = json.at("runs").get<size_t>();
    out->ok_runs = json.at("ok_runs").get<size_t>();
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(fmt::format("{}: {}", path.string(), e.what()));
  }
  out->dir = dir.string();
  return Status::Ok();
}

}  // namespace

std::string BaselineStore::DefaultRoot() {
  if (const char* root = std::getenv("SERVESWEEP_BASELINES"); root && *root) return root;
  const char* home = std::getenv("HOME");
  return fmt::format("{}/.local/share/servesweep/baselines", home && *home ? home : ".");
}

Status BaselineStore::Generations(const std::string& name, std::vector<BaselineInfo>* out) const {
  out->clear();
  std::error_code error;
  const fs::path dir = fs::path(root_) / name;
  if (!fs::is_directory(dir, error)) return Status::Ok();
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (!entry.is_directory() || !AllDigits(entry.path().filename().string())) continue;
    BaselineInfo info;
    if (Status s = ReadInfo(entry.path(), &info); !s.ok()) return s;
    out->push_back(std::move(info));
  }
  if (error) {
    return Status::Internal(fmt::format("{}: cannot list: {}", dir.string(), error.message()));
  }
  std::sort(out->begin(), out->end(), [](const BaselineInfo& a, const BaselineInfo& b) {
    return a.generation < b.generation;
  });
  return Status::Ok();
}

Status BaselineStore::List(std::vector<BaselineInfo>* out) const {
  out->clear();
  std::error_code error;
  if (!fs::is_directory(root_, error)) return Status::Ok();
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(root_, error)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && ValidName(name)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    std::vector<BaselineInfo> generations;
    if (Status s = Generations(name, &generations); !s.ok()) return s;
    out->insert(out->end(), generations.begin(), generations.end());
  }
  return Status::Ok();
}

Status BaselineStore::Current(const std::string& name, BaselineInfo* out) const {
  std::vector<BaselineInfo> generations;
  if (Status s = Generations(name, &generations); !s.ok()) return s;
  if (!generations.empty()) {
    *out = generations.back();
    return Status::Ok();
  }
  std::vector<BaselineInfo> all;
  if (Status s = List(&all); !s.ok()) return s;
  std::string known;
  for (const auto& info : all) {
    if (known.find("'" + info.name + "'") == std::string::npos) {
      known += (known.empty() ? "" : ", ") + ("'" + info.name + "'");
    }
  }
  return Status::NotFound(fmt::format(
      "no baseline named '{}' in {}; expected one of: {} (freeze one with `servesweep baseline "
      "freeze DIR --name {}`)",
      name, root_, known.empty() ? "none, the store is empty" : known, name));
}

Status BaselineStore::Freeze(const std::string& sweep_dir, const std::string& name,
                             const std::string& reason, BaselineInfo* out) const {
  if (!ValidName(name)) {
    return Status::InvalidArgument(fmt::format(
        "baseline name '{}': expected letters, digits, '.', '_' or '-' (not first), at most 100",
        name));
  }
  const std::string db_path = sweep_dir + "/results.db";
  if (!fs::exists(db_path)) {
    return Status::NotFound(
        fmt::format("{}: expected a sweep's results database, found none", db_path));
  }
  BaselineInfo info;
  info.name = name;
  info.reason = reason;
  info.frozen_unix_ms = UnixNowMs();
  info.source_dir = fs::absolute(sweep_dir).lexically_normal().string();
  {
    std::unique_ptr<results::ResultsStore> store;
    if (Status s = results::ResultsStore::Open(db_path, &store); !s.ok()) return s;
    std::vector<results::StoredRun> stored;
    if (Status s = store->LoadRuns(&stored); !s.ok()) return s;
    const auto unfinished =
        std::count_if(stored.begin(), stored.end(), [](const results::StoredRun& r) {
          return r.state == results::RunState::kPending || r.state == results::RunState::kRunning;
        });
    if (unfinished > 0) {
      return Status::FailedPrecondition(fmt::format(
          "{}: expected a finished sweep to freeze, found {} of {} run(s) pending or running "
          "(finish it with `servesweep run MATRIX --out {} --resume`)",
          db_path, unfinished, stored.size(), sweep_dir));
    }
    std::vector<ComparedRun> runs;
    if (Status s = LoadComparedRuns(*store, &runs); !s.ok()) {
      return s.Prefixed(db_path);
    }
    info.runs = runs.size();
    info.ok_runs = static_cast<size_t>(
        std::count_if(runs.begin(), runs.end(), [](const ComparedRun& r) { return r.ok; }));
    if (info.ok_runs == 0) {
      return Status::FailedPrecondition(
          fmt::format("{}: expected at least one run with an ok result to freeze, found none of {}",
                      db_path, info.runs));
    }
  }
  std::vector<BaselineInfo> generations;
  if (Status s = Generations(name, &generations); !s.ok()) return s;
  info.generation = generations.empty() ? 1 : generations.back().generation + 1;

  std::error_code error;
  const fs::path name_dir = fs::path(root_) / name;
  fs::create_directories(name_dir, error);
  if (error) {
    return Status::Internal(fmt::format("{}: cannot create the baseline folder: {}",
                                        name_dir.string(), error.message()));
  }
  const fs::path staging =
      name_dir / fmt::format(".freezing-{}-{}", ::getpid(), info.frozen_unix_ms);
  const fs::path final_dir = name_dir / std::to_string(info.generation);
  fs::create_directories(staging, error);
  auto cleanup = [&] {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
  };
  Status copied = CopyDatabase(db_path, (staging / "results.db").string());
  if (!copied.ok()) {
    cleanup();
    return copied;
  }
  {
    std::ofstream json(staging / "baseline.json");
    json << ToJson(info).dump(2) << "\n";
    if (!json) {
      cleanup();
      return Status::Internal(fmt::format("{}: cannot write baseline.json", staging.string()));
    }
  }
  fs::rename(staging, final_dir, error);
  if (error) {
    cleanup();
    return Status::Internal(fmt::format(
        "{}: cannot freeze generation {} (another freeze of '{}' at the same time?): {}",
        final_dir.string(), info.generation, name, error.message()));
  }
  info.dir = final_dir.string();
  *out = info;
  return Status::Ok();
}

}  // namespace servesweep::report
