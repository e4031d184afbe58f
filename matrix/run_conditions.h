// The conditions of a matrix over its runs: `where` (keep a run when all hold), `exclude` (drop
// it when any holds) and `baseline` (mark the runs a comparison group is judged against), each
// one expression or a list of them (matrix_expression.h), over the variables of one run.
//
// Thread-safety: conditions are immutable once read; Holds() may run on any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/yaml_reader.h"
#include "matrix/matrix_expression.h"
#include "schema/run_spec.capnp.h"

namespace servesweep::matrix {

struct LocalCluster;

// One condition and where it was written (for its errors).
struct Condition {
  std::shared_ptr<Expression> expression;
  YAML::Node node;
  std::string text;
  std::string key;  // "where", "exclude" or "baseline"
};

// The conditions under `key` of the matrix's top level (none when absent).
std::vector<Condition> ReadConditions(YamlMap& top, const std::string& key);

// The variables a condition may use, for one run on `cluster`.
VariableLookup RunVariables(schema::RunSpec::Reader spec, const LocalCluster& cluster);

// Whether all `conditions` hold (`if_none` when there are none) / whether any holds; an error
// (an unknown variable, a type mismatch) is recorded at the condition's node, with the names of
// the variables.
bool AllHold(YamlReader& r, const std::vector<Condition>& conditions, const VariableLookup& lookup,
             bool if_none);
bool AnyHolds(YamlReader& r, const std::vector<Condition>& conditions,
              const VariableLookup& lookup);

}  // namespace servesweep::matrix
