// The keys that describe one run (engine, model, layout, workload, slo, sim, engine_config,
// quality, ...): read from a matrix mapping (its top level, an axis value, a zip position) into
// a run spec. Every key is registered by the code that reads it (common/yaml_reader.h), so the
// mapping's Finish() rejects a misspelt key with a did-you-mean, and docs/matrix.md is the only
// other place the keys are listed.
//
// Paths in run keys (sim.model_profile; traces, prompts and task sets are expanded later by
// workload_expansion.h) are resolved against the matrix file's folder.
//
// Thread-safety: pure functions over the reader they are given.
#pragma once

#include <string>

#include "common/yaml_reader.h"
#include "schema/run_spec.capnp.h"

namespace servesweep::matrix {

// Reads every run key `m` holds into `spec` (keys set earlier stay unless `m` sets them again).
// Does not call m.Finish(): a mapping may hold other keys too (the matrix's own, at the top).
void ReadRunKeys(YamlMap& m, const std::string& matrix_path, schema::RunSpec::Builder spec);

// A path from the matrix, relative to the matrix file's folder unless absolute.
std::string ResolveMatrixPath(const std::string& matrix_path, const std::string& path);

}  // namespace servesweep::matrix
