#include "calibration/calibration_points.h"

#include <capnp/serialize.h>
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "common/file_text.h"
#include "common/unknown_key.h"
#include "common/yaml_reader.h"
#include "matrix/matrix_loader.h"
#include "results/record_columns.h"
#include "results/result_reads.h"
#include "results/results_store.h"

namespace servesweep::calibration {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The keys a point's match (and --holdout) compares, with their value in a spec.
struct MatchKey {
  const char* name;
  std::string (*value)(schema::RunSpec::Reader);
};

std::string Number(double v) { return fmt::format("{}", v); }

const MatchKey kMatchKeys[] = {
    {"engine", [](schema::RunSpec::Reader s) { return std::string(s.getEngine()); }},
    {"model", [](schema::RunSpec::Reader s) { return std::string(s.getModel()); }},
    {"engine_version", [](schema::RunSpec::Reader s) { return std::string(s.getEngineVersion()); }},
    {"concurrency",
     [](schema::RunSpec::Reader s) { return Number(s.getWorkload().getConcurrency()); }},
    {"request_rate",
     [](schema::RunSpec::Reader s) { return Number(s.getWorkload().getRequestRatePerS()); }},
    {"input_len",
     [](schema::RunSpec::Reader s) { return Number(s.getWorkload().getInputLenTok()); }},
    {"output_len",
     [](schema::RunSpec::Reader s) { return Number(s.getWorkload().getOutputLenTok()); }},
    {"num_requests",
     [](schema::RunSpec::Reader s) { return Number(s.getWorkload().getNumRequests()); }},
    {"tp", [](schema::RunSpec::Reader s) { return Number(s.getLayout().getTp()); }},
    {"dp", [](schema::RunSpec::Reader s) { return Number(s.getLayout().getDp()); }},
    {"dp_attention",
     [](schema::RunSpec::Reader s) {
       return std::string(s.getLayout().getDpAttention() ? "true" : "false");
     }},
    {"index", [](schema::RunSpec::Reader s) { return Number(s.getIndex()); }},
};

// A value as the spec's text gives it ("4" matches 4 and 4.0); "a|b" matches either.
bool SameValue(const std::string& want, const std::string& have) {
  if (want == have) return true;
  if (const size_t bar = want.find('|'); bar != std::string::npos) {
    return SameValue(want.substr(0, bar), have) || SameValue(want.substr(bar + 1), have);
  }
  try {
    size_t used = 0;
    const double a = std::stod(want, &used);
    if (used != want.size()) return false;
    return a == std::stod(have);
  } catch (const std::exception&) {
    return false;
  }
}

std::vector<std::string> MetricNames() {
  std::vector<std::string> names;
  for (const auto& c : results::RecordColumns()) {
    if (c.figure && c.sql_type == "REAL") names.push_back(c.name);
  }
  return names;
}

std::shared_ptr<capnp::MallocMessageBuilder> CopySpec(schema::RunSpec::Reader spec) {
  auto message = std::make_shared<capnp::MallocMessageBuilder>();
  message->setRoot(spec);
  return message;
}

}  // namespace

Status LoadPublishedTable(const std::string& path, PointSet* out) {
  std::string text;
  if (Status s = ReadWholeFile(path, "the published table", &text); !s.ok()) return s;
  YamlDocument document(path, text, "the published table");
  if (!document.ok()) return document.status();
  YamlReader& reader = document.reader();
  YamlMap& table = document.root();
  table.ReadNumber("median_bound_pct", &out->median_bound_pct);
  const YAML::Node cases = table.Required("cases");
  table.Finish();
  if (!reader.ok()) return reader.status();
  if (!cases.IsSequence()) {
    reader.Fail(cases,
                fmt::format("expected 'cases' to be a list, found {}", DescribeYamlNode(cases)));
    return reader.status();
  }
  const std::vector<std::string> metrics = MetricNames();
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  for (const YAML::Node& node : cases) {
    YamlMap c(reader, node, "a case");
    PublishedCase pc;
    std::string matrix_path;
    c.ReadText("name", &pc.name, YamlMap::kRequired);
    c.ReadText("source", &pc.source, YamlMap::kRequired);
    c.ReadText("conditions", &pc.conditions, YamlMap::kRequired);
    c.ReadBool("verified", &pc.verified);
    c.ReadText("matrix", &matrix_path, YamlMap::kRequired);
    c.ReadNumber("bound_pct", &pc.bound_pct);
    c.ReadText("engine_profile", &pc.engine_profile);
    const YAML::Node points = c.Required("points");
    c.Finish();
    if (!reader.ok()) return reader.status();
    matrix::LoadedMatrix loaded;
    const std::string resolved = (folder / matrix_path).string();
    if (Status s = matrix::LoadMatrixFile(resolved, &loaded); !s.ok()) {
      reader.Fail(c.Get("matrix"), fmt::format("case {}: {}", pc.name, s.message()));
      return reader.status();
    }
    const auto runs = loaded.matrix().getRuns();
    if (!points.IsSequence() || points.size() == 0) {
      reader.Fail(points, fmt::format("expected 'points' to be a non-empty list, found {}",
                                      DescribeYamlNode(points)));
      return reader.status();
    }
    for (const YAML::Node& p : points) {
      YamlMap pm(reader, p, "a point");
      YamlMap match = pm.Section("match", true);
      std::vector<std::pair<const MatchKey*, std::string>> wanted;
      std::string label;
      for (const MatchKey& key : kMatchKeys) {
        const YAML::Node v = match.Get(key.name);
        if (!v.IsDefined() || v.IsNull()) continue;
        wanted.emplace_back(&key, reader.Text(v, key.name));
        label += fmt::format("{}{}={}", label.empty() ? "" : " ", key.name, wanted.back().second);
      }
      match.Finish();
      CalibrationPoint point;
      point.case_name = pc.name;
      point.source = pc.source;
      point.verified = pc.verified;
      point.engine_profile = pc.engine_profile;
      point.id = fmt::format("{}: {}", pc.name, label);
      pm.ReadText("exclude", &point.excluded);
      if (!pc.verified && point.excluded.empty()) {
        point.excluded = "unverified source";
      }
      // The figures' keys are metric names (data): each must be a results-table figure.
      for (const auto& [key, value] : pm.Section("figures", true).Entries()) {
        const std::string metric = reader.Text(key, "figure");
        if (std::find(metrics.begin(), metrics.end(), metric) == metrics.end()) {
          reader.Fail(key, UnknownKeyMessage(metric, "figures", metrics));
          break;
        }
        point.metrics.push_back(metric);
        point.measured.push_back(reader.Number(value, metric, 1e-9));
      }
      pm.Finish();
      if (!reader.ok()) return reader.status();
      int found = 0;
      for (auto run : runs) {
        bool all = true;
        for (const auto& [key, want] : wanted) all = all && SameValue(want, key->value(run));
        if (!all) continue;
        ++found;
        point.spec = CopySpec(run);
      }
      if (found != 1) {
        reader.Fail(p, fmt::format("expected the point's match ({}) to select one run of {}, "
                                   "found {}",
                                   label, resolved, found));
        return reader.status();
      }
      out->points.push_back(std::move(point));
    }
    out->cases.push_back(std::move(pc));
  }
  return Status::Ok();
}

Status LoadMeasuredRuns(const std::string& db_path, const std::vector<std::string>& metrics,
                        const std::string& model_profile, PointSet* out) {
  if (!std::filesystem::exists(db_path)) {
    return Status::NotFound(fmt::format("{}: expected a results database, found none", db_path));
  }
  std::unique_ptr<results::ResultsStore> store;
  if (Status s = results::ResultsStore::Open(db_path, &store); !s.ok()) return s;
  std::vector<results::StoredRun> runs;
  if (Status s = store->LoadRuns(&runs); !s.ok()) return s;
  const std::vector<std::string> known = MetricNames();
  for (const auto& m : metrics) {
    if (std::find(known.begin(), known.end(), m) == known.end()) {
      return Status::InvalidArgument(UnknownKeyMessage(m, "--metrics", known));
    }
  }
  std::map<std::string, results::ResultFigures> figures_of;
  if (Status s = results::LoadOkResultFigures(*store, metrics, &figures_of); !s.ok()) return s;
  size_t added = 0;
  for (const auto& run : runs) {
    auto it = figures_of.find(run.run_id);
    if (run.state != results::RunState::kDone || it == figures_of.end()) continue;
    const results::ResultFigures& figures = it->second;
    if (figures.simulation != "none") continue;  // a simulated run measures nothing
    auto words = kj::heapArray<capnp::word>(run.spec_bytes.size() / sizeof(capnp::word));
    std::memcpy(words.begin(), run.spec_bytes.data(), words.size() * sizeof(capnp::word));
    capnp::FlatArrayMessageReader reader(words);
    CalibrationPoint point;
    point.spec = CopySpec(reader.getRoot<schema::RunSpec>());
    auto spec = point.spec->getRoot<schema::RunSpec>();
    if (!model_profile.empty() && spec.getSim().getModelProfile().size() == 0) {
      spec.getSim().setModelProfile(model_profile);
    }
    point.id = fmt::format("{}: {}", std::filesystem::path(db_path).filename().string(),
                           run.label.empty() ? run.run_id : run.label);
    point.case_name = db_path;
    point.source = db_path;
    for (size_t m = 0; m < metrics.size(); ++m) {
      if (!figures.values[m]) continue;
      point.metrics.push_back(metrics[m]);
      point.measured.push_back(*figures.values[m]);
    }
    out->points.push_back(std::move(point));
    ++added;
  }
  if (added == 0) {
    return Status::NotFound(
        fmt::format("{}: expected finished, measured runs, found none", db_path));
  }
  return Status::Ok();
}

Status Select(const std::string& selector, const PointSet& set, std::vector<bool>* out) {
  std::vector<std::pair<const MatchKey*, std::string>> wanted;
  std::stringstream parts(selector);
  for (std::string part; std::getline(parts, part, ',');) {
    const size_t eq = part.find('=');
    const std::string key = part.substr(0, eq);
    const MatchKey* found = nullptr;
    std::vector<std::string> names;
    for (const MatchKey& k : kMatchKeys) {
      names.push_back(k.name);
      if (key == k.name) found = &k;
    }
    if (found == nullptr || eq == std::string::npos) {
      return Status::InvalidArgument(fmt::format("expected key=value[,key=value], found '{}': {}",
                                                 part,
                                                 UnknownKeyMessage(key, "the selector", names)));
    }
    wanted.emplace_back(found, part.substr(eq + 1));
  }
  out->clear();
  for (const auto& p : set.points) {
    bool all = true;
    for (const auto& [key, want] : wanted) all = all && SameValue(want, key->value(p.Spec()));
    out->push_back(all);
  }
  return Status::Ok();
}

Prediction Predict(const CalibrationPoint& point, const record::VirtualRunOptions& options) {
  Prediction out;
  out.figures.assign(point.metrics.size(), kNaN);
  capnp::MallocMessageBuilder message;
  auto result = message.initRoot<schema::RunResult>();
  record::ExecuteVirtualRun(point.Spec(), options, result);
  if (result.getStatus() != schema::RunStatus::OK) {
    out.status = Status::FailedPrecondition(result.getError().cStr());
    return out;
  }
  const auto reader = result.asReader();
  std::map<std::string, double> value;
  for (const auto& c : results::RecordColumns()) {
    if (c.sql_type != "REAL" && c.sql_type != "INTEGER") continue;
    const results::ColumnValue v = c.value(reader);
    if (const double* d = std::get_if<double>(&v)) value[c.name] = *d;
    if (const int64_t* i = std::get_if<int64_t>(&v)) value[c.name] = static_cast<double>(*i);
  }
  for (size_t m = 0; m < point.metrics.size(); ++m) out.figures[m] = value[point.metrics[m]];
  const auto record = reader.getRecord();
  const double n = record.getCompleted() > 0 ? record.getCompleted() : 1;
  if (Status s = record::RunShapeOf(
          point.Spec(), options, static_cast<double>(record.getTotalInputTokens()) / n,
          static_cast<double>(record.getTotalOutputTokens()) / n,
          record.getRequestThroughput() * record.getE2elMs().getMean() / 1e3, &out.shape);
      !s.ok()) {
    out.status = s;
  }
  return out;
}

}  // namespace servesweep::calibration
