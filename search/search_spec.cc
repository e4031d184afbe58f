#include "search/search_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "common/yaml_reader.h"

namespace servesweep::search {
namespace {

constexpr std::array<ObjectiveInfo, 5> kObjectives = {{
    {"max_output_tok_per_s_per_gpu", "output_throughput_per_gpu", true, "output tok/s per GPU"},
    {"max_goodput_per_gpu", "", true, "good requests/s per GPU"},
    {"min_cost_per_m_output_tok", "cost_per_mtok_output", false, "per million output tokens"},
    {"max_tok_per_s_per_user", "decode_median_tok_per_s", true, "tok/s per user"},
    {"min_energy_per_output_tok_j", "energy_per_output_tok_j", false, "J per output token"},
}};

bool IsRateColumn(const std::string& column) {
  return column == "success_rate" || column.starts_with("decode_");
}

}  // namespace

const ObjectiveInfo& InfoOf(Objective objective) {
  return kObjectives[static_cast<size_t>(objective)];
}

const std::vector<std::string>& ConstrainableColumns() {
  static const std::vector<std::string> columns = [] {
    std::vector<std::string> out;
    for (const char* metric : {"ttft", "tpot", "itl", "e2el"}) {
      for (const char* stat : {"median", "p90", "p95", "p99"}) {
        out.push_back(fmt::format("{}_{}_ms", metric, stat));
      }
    }
    for (const char* stat : {"median", "min"})
      out.push_back(fmt::format("decode_{}_tok_per_s", stat));
    out.push_back("success_rate");
    // Energy (max): counted only where the run's energy is valid (docs/search.md#energy).
    for (const char* per : {"output_tok", "total_tok", "request"})
      out.push_back(fmt::format("energy_per_{}_j", per));
    return out;
  }();
  return columns;
}

bool UsesEnergy(const SearchSpec& spec) {
  auto energy = [](std::string_view column) { return column.starts_with("energy_"); };
  return energy(InfoOf(spec.objective).column) ||
         std::any_of(spec.constraints.begin(), spec.constraints.end(),
                     [&](const Constraint& c) { return energy(c.column); });
}

Status ParseSearchSpec(const std::string& path, const std::string& text, SearchSpec* out) {
  *out = SearchSpec{};
  YamlReader reader(path);
  YAML::Node root;
  if (!reader.Parse(text, &root)) return reader.status();
  const YAML::Node node = root.IsMap() ? root["search"] : YAML::Node();
  if (!node) {
    return Status::InvalidArgument(fmt::format(
        "{}: expected a 'search:' section (objective, constraints, load) for `servesweep "
        "search`, found none (docs/search.md)",
        path));
  }
  YamlMap search(reader, node, "search");
  if (auto v = search.Get("objective")) {
    std::vector<std::string> names;
    for (const auto& o : kObjectives) names.push_back(o.name);
    const std::string name = reader.Choice(v, "objective", names);
    const auto at = std::find(names.begin(), names.end(), name);
    if (at != names.end()) out->objective = static_cast<Objective>(at - names.begin());
  }
  if (auto v = search.Get("constraints")) {
    YamlMap constraints(reader, v, "search.constraints");
    const auto& allowed = ConstrainableColumns();
    for (const auto& [key, value] : constraints.Entries()) {
      const std::string column = key.Scalar();
      constraints.Get(column);  // the columns are checked here, not as the map's keys
      if (std::find(allowed.begin(), allowed.end(), column) == allowed.end()) {
        std::string list;
        for (const auto& c : allowed) list += (list.empty() ? "" : ", ") + c;
        reader.Fail(key, fmt::format("expected a constrainable record column ({}), found '{}'",
                                     list, column));
        break;
      }
      YamlMap bound(reader, value, "search.constraints." + column);
      Constraint c;
      c.column = column;
      const YAML::Node max = bound.Get("max"), min = bound.Get("min");
      const bool rate = IsRateColumn(column);
      if (rate && max) {
        reader.Fail(max, fmt::format("expected 'min' for {} (a floor), found 'max'", column));
      } else if (!rate && min) {
        reader.Fail(min, fmt::format("expected 'max' for {} ({}), found 'min'", column,
                                     column.ends_with("_ms") ? "a latency" : "a ceiling"));
      } else if (!max && !min) {
        reader.Fail(value, fmt::format("expected {{{}: LIMIT}} for {}, found {}",
                                       rate ? "min" : "max", column, DescribeYamlNode(value)));
      } else {
        c.is_max = !rate;
        c.limit = rate ? reader.Number(min, "min") : reader.Number(max, "max");
        if (reader.ok() && !rate && c.limit <= 0) {
          reader.Fail(max,
                      fmt::format("expected a limit above 0 for {}, found {}", column, c.limit));
        }
      }
      bound.Finish();
      out->constraints.push_back(c);
    }
    constraints.Finish();
  }
  if (auto v = search.Get("load")) {
    YamlMap load(reader, v, "search.load");
    if (auto k = load.Get("knob")) {
      const std::string knob = reader.Choice(k, "knob", {"concurrency", "request_rate"});
      out->knob = knob == "request_rate" ? LoadKnob::kRequestRate : LoadKnob::kConcurrency;
    }
    const double floor = out->knob == LoadKnob::kConcurrency ? 1 : 1e-6;
    load.ReadNumber("min", &out->load_min, floor);
    load.ReadNumber("max", &out->load_max, floor);
    if (reader.ok() && out->load_max < out->load_min) {
      reader.Fail(load.Get("max"),
                  fmt::format("expected max >= min ({}), found {}", out->load_min, out->load_max));
    }
    if (reader.ok() && out->knob == LoadKnob::kConcurrency) {
      for (const char* key : {"min", "max"}) {
        const double value = key[1] == 'i' ? out->load_min : out->load_max;
        if (value != static_cast<double>(static_cast<int64_t>(value))) {
          reader.Fail(load.Get(key),
                      fmt::format("expected a whole concurrency for '{}', found {}", key, value));
        }
      }
    }
    load.Finish();
  }
  if (auto v = search.Get("precision")) {
    out->precision = reader.Number(v, "precision");
    if (reader.ok() && (out->precision <= 0 || out->precision >= 1)) {
      reader.Fail(v, fmt::format("expected 'precision' in (0, 1) (0.05: the limit within 5%), "
                                 "found {}",
                                 out->precision));
    }
  }
  search.ReadInt("boundary_repeats", &out->boundary_repeats, 1);
  search.ReadNumber("noise_pct", &out->noise_pct, 0);
  search.ReadInt("requests_per_level", &out->requests_per_level, 1);
  if (auto v = search.Get("budget")) {
    YamlMap budget(reader, v, "search.budget");
    budget.ReadInt("runs", &out->budget.runs, 1);
    budget.ReadNumber("gpu_hours", &out->budget.gpu_hours, 0);
    budget.ReadNumber("wall_s", &out->budget.wall_s, 0);
    budget.Finish();
  }
  search.Finish();
  if (reader.ok() && out->constraints.empty()) {
    reader.Fail(node,
                "expected at least one constraint under search.constraints (e.g. "
                "ttft_p90_ms: {max: 2000}), found none");
  }
  return reader.status();
}

std::string DescribeLevel(const SearchSpec& spec, double level) {
  return spec.knob == LoadKnob::kConcurrency ? fmt::format("concurrency={}", level)
                                             : fmt::format("request_rate={:.4g}", level);
}

}  // namespace servesweep::search
