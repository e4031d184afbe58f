// Matched comparisons between two sweeps (`servesweep compare DIR_A DIR_B`), read from their
// results databases only. A comparison holds when every condition that shapes the figures is
// the same on both sides: checkpoint, GPU model and count, workload (lengths, sampling, stop
// conditions, request count, seed), load (concurrency or arrival process), warm-up, measurement
// window and SLO. What may differ is the system under test (engine, version, flags, layout,
// precision, ...): those are the "varied" axes, and more than one varied axis is warned about,
// since a difference then cannot be attributed to either.
//
// Runs pair up by load point (concurrency and request rate); repeats of one configuration are
// summarised as median and range, and a difference whose ranges overlap is within noise.
//
// Thread-safety: plain functions and values.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "schema/result.capnp.h"
#include "schema/run_spec.capnp.h"

namespace servesweep::results {
class ResultsStore;
}  // namespace servesweep::results

namespace servesweep::report {

// One named field of a run, as text (compared exactly).
struct Field {
  std::string name;
  std::string value;
};

// One run of a sweep as the comparison sees it.
struct ComparedRun {
  std::string run_id;
  std::string label;
  bool ok = false;                // a committed ok result
  std::vector<Field> conditions;  // must match across a comparison
  std::vector<Field> system;      // the system under test: may differ
  // The engine's own resolution of the settings a comparison depends on (the record's
  // effective_settings: budgets, running requests, speculative tokens, chunk, KV dtype); they
  // must match unless a matrix key that drives them differs. Empty: no engine check ran.
  std::vector<Field> effective;
  std::string load_point;  // pairing key, e.g. "concurrency 4"
  // "cold" (the run started its engine), "warm" (a later run on a kept engine), "" unknown.
  std::string engine_start;
  std::map<std::string, double> figures;  // record columns by name (ok runs)
  bool baseline = false;                  // selected by the matrix's `baseline`
  std::string compare_group;              // the matrix's comparison group, "" if none
  // The quality gate (`quality:` in the matrix): the task set ("" if none: no gate), e.g.
  // "arithmetic: 50 tasks, seed 1, max_tokens 16", and the margin below the baseline's accuracy
  // that fails a configuration.
  std::string quality_task_set;
  double quality_margin = 0;
  // The run's certificate (docs/metrics.md#certified-runs): the validity gate's verdict and the
  // client-bound verdict, with their reasons; not judged for a run without a result.
  schema::Validity validity = schema::Validity::NOT_JUDGED;
  std::string validity_reasons;
  bool client_bound = false;
  std::string client_bound_reasons;
  std::string energy_invalid_reason;  // "" where energy_valid = 1 (docs/results.md#energy)
  bool managed_endpoint = false;      // engine: external (its hardware is not known)
  // An ok result the gate did not reject and whose client was not the bottleneck: its figures
  // enter knees, frontiers and comparisons.
  bool certified() const { return ok && validity != schema::Validity::INVALID && !client_bound; }
  // Why not certified ("" when it is, or has no result): "invalid: ...", "client-bound: ...".
  std::string UncertifiedReason() const;
};

// Which runs a report or a comparison uses: certified ones only, unless asked.
struct RunSelection {
  bool include_uncertified = false;  // --include-invalid: invalid and client-bound runs too
  bool Uses(const ComparedRun& run) const {
    return run.ok && (include_uncertified || run.certified());
  }
};

// The conditions and system fields of a run spec; `record` gives measured conditions (GPU model,
// length and arrival descriptions) by record-column name, empty when the run has no result.
void DescribeRun(schema::RunSpec::Reader spec, const std::map<std::string, std::string>& record,
                 ComparedRun* out);

struct Spread {
  size_t runs = 0;  // ok repeats summarised
  double median = 0, min = 0, max = 0;
};

// How B's figure stands against A's. Readers branch on the kind; Text() is for people.
struct FigureVerdict {
  enum class Kind {
    kNotMeasured,  // a side has no certified run of it
    kSame,
    kWithinNoise,  // the repeats' ranges overlap (or the single run lies in the other's range)
    kBetter,       // B better by more than the noise (or the noise is unknown: see qualifier)
    kWorse,
    kNotAWin,  // B faster, but its answer quality failed the gate
  };
  Kind kind = Kind::kNotMeasured;
  std::string qualifier;  // ", noise unknown (<2 repeats)", ", outside A's range (B: 1 run)"
  // "B better, noise unknown (<2 repeats)", "within noise", ...; `against_baseline`: "better, ..."
  std::string Text(bool against_baseline = false) const;
};

struct ComparedFigure {
  std::string column;  // record column, e.g. "ttft_median_ms"
  bool higher_is_better = false;
  Spread a, b;
  double change_pct = 0;  // (median b - median a) / median a
  FigureVerdict verdict;
};

// B's answer quality against A's (the baseline): B fails when its median accuracy is below A's
// by more than the margin. A failed B's speed-ups are not wins: their verdicts say so.
struct QualityGate {
  bool applied = false;  // both sides answered the same task set
  bool failed = false;
  double accuracy_a = 0, accuracy_b = 0, margin = 0;  // medians over the ok repeats
  std::string text;  // "quality gate FAILED: accuracy 0.50 < baseline 0.96 - 0.02", or why not
};

// One field whose value differs between two runs.
struct FieldChange {
  std::string name;  // e.g. "workload.output_len"
  std::string a, b;  // "(absent)" where a side lacks the field
};

struct ComparedPair {
  std::string load_point;
  std::string label_a, label_b;
  // Why this pair was not compared (a side's runs at this load point are all invalid or
  // client-bound), "" when it was; then it has no figures.
  std::string refused;
  // What differs between the sides but is not a mismatch, e.g. the GPU count against a managed
  // endpoint, whose hardware is not known.
  std::vector<std::string> notes;
  std::vector<std::string> mismatches;         // "workload.input_len: 'fixed 128' vs 'fixed 256'"
  std::vector<FieldChange> condition_changes;  // the mismatches, field by field
  std::vector<std::string> varied;             // "engine: 'sim' vs 'vllm'"
  // Effective settings that differ ("effective.prefill_budget_tok"); those no differing matrix
  // key explains are mismatches too. `effective_unknown`: why some could not be compared.
  std::vector<FieldChange> effective_changes;
  std::vector<std::string> effective_unknown;
  std::vector<ComparedFigure> figures;
  QualityGate quality;
};

struct Comparison {
  std::vector<ComparedPair> pairs;
  std::vector<std::string> unpaired;  // configurations of either side with no partner
  bool matched() const;               // every pair matches in every condition
  bool any_refused() const;           // a pair was not compared: a side uncertified
};

// Every run of a sweep, in index order: from DIR/results.db, or from an open store.
Status LoadComparedRuns(const std::string& dir, std::vector<ComparedRun>* out);
Status LoadComparedRuns(results::ResultsStore& store, std::vector<ComparedRun>* out);

// Pairs configurations of `a` and `b` by load point and compares their figures, over the runs
// `selection` uses (certified ones by default): a pair whose side has none is refused with the
// reason. Fails when a side has no ok run, or two configurations at one load point (the pairing
// would be a guess).
Status CompareRuns(const std::vector<ComparedRun>& a, const std::vector<ComparedRun>& b,
                   Comparison* out, const RunSelection& selection = {});

// The comparison groups of one sweep (`compare:` in its matrix) as a report.md section: per
// group, whether its members match in every condition, what they vary, and each member's
// figures beside the baseline's (the member marked baseline, else the first). "" if no groups.
std::string RenderGroupComparisons(const std::vector<ComparedRun>& runs,
                                   const RunSelection& selection = {});

// Human-readable text and JSON (a string) of a comparison.
std::string RenderComparisonText(const Comparison& comparison, const std::string& name_a,
                                 const std::string& name_b);
std::string RenderComparisonJson(const Comparison& comparison, const std::string& name_a,
                                 const std::string& name_b);

}  // namespace servesweep::report
