// `servesweep submit slurm`: renders the sbatch script of a sweep from slurm/sweep.sbatch.in
// (coordinator on the allocation's first node, one agent per node via srun, probes first,
// results in a shared folder) and submits it with sbatch, or prints it. With `search`, the head
// node runs `servesweep search --bind` instead: every round a sweep on the same agents.
//
// Thread-safety: functions over the caller's data.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "matrix/matrix_loader.h"

namespace servesweep::submit {

struct SlurmOptions {
  std::string matrix_path;
  std::string out_dir;  // shared by every node; made absolute
  uint32_t nodes = 1;
  // Separate prefill and decode node pools (a heterogeneous job) instead of `nodes`, for
  // disaggregated layouts; both > 0 or both 0.
  uint32_t prefill_nodes = 0;
  uint32_t decode_nodes = 0;
  uint32_t gpus_per_node = 0;  // real GPUs requested per node (--gpus-per-node)
  uint32_t emulate_gpus = 0;   // or: agents announce this many emulated GPUs (sim sweeps)
  std::string partition, time, account;
  std::string container_image;    // pyxis/enroot: srun --container-image
  std::string servesweep_binary;  // path on the nodes (shared FS), or in the image
  uint32_t port_base = 20000;     // coordinator port = base + job id % 1000
  std::string mpi = "pmix";       // srun --mpi for the probe step ("none" to leave it out)
  bool resume = false;
  bool dry_run = false;
  bool skip_engine_check = false;  // agents start engines without the engines' own check
  // `servesweep search` on the head node instead of `coordinator` (the matrix's search:
  // section), its rounds served to the job's agents; `search_args` go to it as they are.
  bool search = false;
  std::vector<std::string> search_args;
};

// Checks that every run of the matrix fits the allocation (before anything is submitted).
Status CheckAllocation(matrix::LoadedMatrix& matrix, const SlurmOptions& options);

// The sbatch script for the sweep.
Status RenderSbatch(matrix::LoadedMatrix& matrix, const SlurmOptions& options,
                    const std::string& matrix_on_nodes, std::string* script);

// Validates, writes OUT/matrix.yaml and OUT/sweep.sbatch, and submits it (unless dry-run).
// *job_id is set to sbatch's job id ("" for a dry run); *script to the rendered text.
Status SubmitSlurm(SlurmOptions options, std::string* job_id, std::string* script);

}  // namespace servesweep::submit
