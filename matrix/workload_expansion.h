// A run's workload expanded from what the matrix names into what the agent needs, so agents read
// no file: a trace into the plan (arrivals and lengths), length distributions sampled into the
// plan, shared-prefix groups and a set prefix hit rate into block ids, `prompts: jsonl:FILE` into
// the custom prompts, and a quality task set into its tasks. Files were resolved against the
// matrix's folder when the keys were read (run_keys.h). Files read once are kept for the next run
// of the sweep.
//
// Thread-safety: an expander belongs to one matrix expansion (one thread).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/yaml_reader.h"
#include "schema/run_spec.capnp.h"
#include "workload/task_set.h"
#include "workload/trace_reader.h"

namespace servesweep::matrix {

class WorkloadExpander {
 public:
  explicit WorkloadExpander(YamlReader& reader) : reader_(reader) {}

  // Expands `spec`'s workload and quality tasks; an error is recorded in the reader at `where`
  // (the matrix's top level, or the key's own node when the key is there).
  void Expand(const YAML::Node& where, const YAML::Node& prompts_where,
              const YAML::Node& hit_rate_where, const YAML::Node& lora_where,
              schema::RunSpec::Builder spec);

 private:
  void ExpandTrace(const YAML::Node& where, schema::Workload::Builder w);
  void ExpandLengthDistributions(const YAML::Node& where, schema::Workload::Builder w);
  void ExpandSharedPrefixes(const YAML::Node& where, schema::Workload::Builder w);
  void ExpandPrefixHitRate(const YAML::Node& where, schema::RunSpec::Builder spec);
  void ExpandLora(const YAML::Node& where, schema::RunSpec::Builder spec);
  void ExpandCustomPrompts(const YAML::Node& where, schema::Workload::Builder w);
  void ExpandQuality(const YAML::Node& where, schema::QualitySettings::Builder q);
  // All requests of a trace (limit 0) or its first `limit`, read once per path and format.
  const std::vector<workload::TraceRequest>* Trace(const YAML::Node& where, const std::string& path,
                                                   const std::string& format_name, uint32_t limit,
                                                   workload::TraceFormat* format);

  YamlReader& reader_;
  std::map<std::string, std::vector<workload::TraceRequest>> traces_;
  std::map<std::string, std::vector<workload::QualityTask>> task_sets_;
};

}  // namespace servesweep::matrix
