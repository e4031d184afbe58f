#include "matrix/run_conditions.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>

#include "matrix/feasibility.h"
#include "matrix/matrix_loader.h"

namespace servesweep::matrix {
namespace {

using Variables = std::vector<std::pair<std::string, std::function<ExpressionValue()>>>;

// The variables of one run, by name; their names are listed in errors from the same map.
Variables VariablesOf(schema::RunSpec::Reader spec, const LocalCluster& cluster) {
  const auto layout = spec.getLayout();
  const auto w = spec.getWorkload();
  auto text = [](capnp::Text::Reader t) { return [t] { return ExpressionValue(std::string(t)); }; };
  return {
      {"tp", [=] { return double(layout.getTp()); }},
      {"pp", [=] { return double(layout.getPp()); }},
      {"dp", [=] { return double(layout.getDp()); }},
      {"ep", [=] { return layout.getExpertParallel() ? 1.0 : 0.0; }},
      {"prefill_instances", [=] { return double(layout.getPrefillInstances()); }},
      {"decode_instances", [=] { return double(layout.getDecodeInstances()); }},
      {"gpus", [=] { return double(GpusForLayout(layout)); }},
      {"nodes", [=] { return double(cluster.agents); }},
      {"gpus_per_node",
       [=] {
         return double(layout.getGpusPerNode() > 0 ? layout.getGpusPerNode()
                                                   : cluster.gpus_per_agent);
       }},
      {"concurrency", [=] { return double(w.getConcurrency()); }},
      {"max_in_flight", [=] { return double(w.getMaxInFlight()); }},
      {"request_rate", [=] { return w.getRequestRatePerS(); }},
      {"input_len", [=] { return double(w.getInputLenTok()); }},
      {"output_len", [=] { return double(w.getOutputLenTok()); }},
      {"num_requests", [=] { return double(w.getNumRequests()); }},
      {"engine", text(spec.getEngine())},
      {"engine_version", text(spec.getEngineVersion())},
      {"model", text(spec.getModel())},
      {"precision", text(spec.getPrecision())},
      {"quantization", text(spec.getQuantization())},
      {"kv_cache_dtype", text(spec.getKvCacheDtype())},
      {"workload", text(w.getName())},
  };
}

bool Holds(YamlReader& r, const Condition& c, const VariableLookup& lookup) {
  bool holds = false;
  if (Status s = c.expression->Holds(lookup, &holds); !s.ok()) {
    capnp::MallocMessageBuilder empty;
    std::string names;
    for (const auto& [name, value] :
         VariablesOf(empty.initRoot<schema::RunSpec>().asReader(), LocalCluster{})) {
      names += (names.empty() ? "" : ", ") + name;
    }
    r.Fail(c.node, fmt::format("in '{}' expression '{}': {}; variables: {}", c.key, c.text,
                               s.message(), names));
  }
  return holds;
}

}  // namespace

std::vector<Condition> ReadConditions(YamlMap& top, const std::string& key) {
  YamlReader& r = top.reader();
  std::vector<Condition> out;
  const YAML::Node node = top.Get(key);
  if (!node.IsDefined() || node.IsNull()) return out;
  std::vector<YAML::Node> items;
  if (node.IsSequence()) {
    for (const auto& item : node) items.push_back(item);
  } else {
    items.push_back(node);
  }
  for (const auto& item : items) {
    const std::string text = r.Text(item, key);
    if (r.failed()) return out;
    std::unique_ptr<Expression> expression;
    if (Status s = Expression::Parse(text, &expression); !s.ok()) {
      r.Fail(item, fmt::format("in '{}' expression '{}': {}", key, text, s.message()));
      return out;
    }
    out.push_back({std::shared_ptr<Expression>(std::move(expression)), item, text, key});
  }
  return out;
}

VariableLookup RunVariables(schema::RunSpec::Reader spec, const LocalCluster& cluster) {
  return [variables = VariablesOf(spec, cluster)](
             const std::string& name) -> std::optional<ExpressionValue> {
    for (const auto& [variable, value] : variables) {
      if (variable == name) return value();
    }
    return std::nullopt;
  };
}

bool AllHold(YamlReader& r, const std::vector<Condition>& conditions, const VariableLookup& lookup,
             bool if_none) {
  if (conditions.empty()) return if_none;
  return std::all_of(conditions.begin(), conditions.end(),
                     [&](const Condition& c) { return Holds(r, c, lookup); });
}

bool AnyHolds(YamlReader& r, const std::vector<Condition>& conditions,
              const VariableLookup& lookup) {
  return std::any_of(conditions.begin(), conditions.end(),
                     [&](const Condition& c) { return Holds(r, c, lookup); });
}

}  // namespace servesweep::matrix
