// The benchmark record as columns: one table, used to create the results table, to fill it from a
// RunResult, and to export summary.csv, so the three can never drift apart. docs/results.md
// lists the same columns with their definitions.
//
// Thread-safety: the table is built once, immutable afterwards.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/status.h"
#include "schema/result.capnp.h"

namespace servesweep::results {

// NaN doubles are stored as NULL and exported as "n/a".
using ColumnValue = std::variant<std::string, int64_t, double>;

struct RecordColumn {
  std::string name;      // results-table column and summary.csv header
  std::string sql_type;  // TEXT, INTEGER or REAL
  std::function<ColumnValue(schema::RunResult::Reader)> value;
  // A measured figure or engine signal: stored as NULL for a result that is not ok, whose
  // figures would otherwise read as zeros.
  bool figure = false;
  // Read from the benchmark record: NULL when the result carries none (failed before starting).
  bool from_record = false;
};

const std::vector<RecordColumn>& RecordColumns();

// The validity verdict as results.db and summary.csv store it: "" (not judged), "valid",
// "invalid", "not reconciled"; and back. Readers of the database compare the enum, never the text.
std::string_view ValidityName(schema::Validity validity);
// InvalidArgument for a name that is none of the four (a database of another servesweep).
Status ParseValidity(std::string_view name, schema::Validity* out);

// An early stop as results.db and summary.csv store it: "" (ran its full length), "stable",
// "oversaturated", "max_duration".
std::string_view StopReasonName(schema::StopReason reason);

// An energy figure (energy_*) counts only where the run's energy is valid, energy_valid = 1
// (docs/results.md#energy): one with a GPU missing or a window too short is recorded, never
// compared, plotted or searched on. `figures` are record columns by name.
bool IsEnergyColumn(std::string_view column);
bool EnergyValid(const std::map<std::string, double>& figures);

}  // namespace servesweep::results
