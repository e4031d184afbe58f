// `servesweep submit slurm MATRIX ...`: hand a sweep to a cluster's scheduler.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <memory>

#include "cli/commands.h"
#include "common/subprocess.h"
#include "submit/slurm_submit.h"

namespace servesweep::cli {

void AddSubmitCommand(CLI::App& app, int* exit_code) {
  auto* submit = app.add_subcommand("submit", "Submit a sweep to Slurm");
  submit->require_subcommand(1);

  auto o = std::make_shared<submit::SlurmOptions>();
  auto* slurm = submit->add_subcommand("slurm", "Render the sbatch script of a sweep and submit it");
  slurm->add_option("matrix", o->matrix_path, "Experiment matrix (YAML)")->required();
  slurm->add_option("--out", o->out_dir, "Results folder, shared by every node")->required();
  slurm->add_option("--nodes", o->nodes, "Nodes to allocate (one agent each)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  slurm->add_option("--gpus-per-node", o->gpus_per_node, "GPUs to request per node");
  slurm->add_option("--emulate-gpus", o->emulate_gpus,
                    "Agents announce G emulated GPUs (sim sweeps; no GPU is requested)");
  slurm->add_option("--partition", o->partition, "Slurm partition");
  slurm->add_option("--time", o->time, "Time limit, as sbatch --time");
  slurm->add_option("--account", o->account, "Slurm account");
  slurm->add_option("--container", o->container_image, "Container image (pyxis/enroot)");
  slurm->add_option("--servesweep", o->servesweep_binary,
                    "servesweep on the nodes (default: this binary; must be on a shared path)");
  slurm->add_option("--port-base", o->port_base, "Coordinator port = base + job id % 1000")
      ->capture_default_str();
  slurm->add_option("--mpi", o->mpi, "srun --mpi plugin for the probe step, or none")
      ->capture_default_str();
  slurm->add_flag("--resume", o->resume, "Finish the sweep already in --out");
  slurm->add_flag("--dry-run", o->dry_run, "Print the script; submit nothing");
  slurm->callback([o, exit_code] {
    if (o->servesweep_binary.empty()) o->servesweep_binary = SelfExecutable();
    std::string job_id, script;
    if (Status s = submit::SubmitSlurm(*o, &job_id, &script); !s.ok()) {
      spdlog::error("{}", s.message());
      *exit_code = kExitError;
      return;
    }
    if (o->dry_run) {
      fmt::print("{}", script);
    } else {
      fmt::print("submitted batch job {}\n  script:  {}/sweep.sbatch\n  results: {}/results.db "
                 "(follow with: squeue -j {})\n",
                 job_id, o->out_dir, o->out_dir, job_id);
    }
    *exit_code = kExitOk;
  });
}

}  // namespace servesweep::cli
