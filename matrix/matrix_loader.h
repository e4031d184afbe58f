// Experiment matrix loading: a YAML file -> the expanded list of run specs (schema::Matrix).
// The format is documented in docs/matrix.md. Every error names file:line:column, what was
// expected and what was found; unknown keys get a did-you-mean.
//
// Thread-safety: stateless functions.
#pragma once

#include <capnp/message.h>

#include <string>

#include "common/status.h"
#include "schema/run_spec.capnp.h"

namespace servesweep::matrix {

// Agents `servesweep run` starts on this machine when the matrix asks for none explicitly.
struct LocalCluster {
  uint32_t agents = 1;
  uint32_t gpus_per_agent = 1;
};

struct LoadedMatrix {
  capnp::MallocMessageBuilder message;  // root: schema::Matrix
  LocalCluster local;
  LocalCluster cluster;           // the target cluster (`cluster:`; default: `local`), for checks
  bool cluster_declared = false;  // the matrix has `cluster:` or `local:`
  std::string text;               // the file's text, stored with the sweep
  schema::Matrix::Reader matrix() { return message.getRoot<schema::Matrix>().asReader(); }
};

// Parses and expands `text` (named `path` in messages).
Status ExpandMatrix(const std::string& path, const std::string& text, LoadedMatrix* out);
// Reads the file, then ExpandMatrix().
Status LoadMatrixFile(const std::string& path, LoadedMatrix* out);

}  // namespace servesweep::matrix
