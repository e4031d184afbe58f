// `servesweep submit slurm MATRIX ...`: hand a sweep to a cluster's scheduler.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <memory>

#include "cli/commands.h"
#include "cli/engine_checks.h"
#include "common/subprocess.h"
#include "search/search_spec.h"
#include "submit/k8s_submit.h"
#include "submit/slurm_submit.h"

namespace servesweep::cli {
namespace {

// The engine check where `submit` runs (engines installed here, or --engine-env); nodes whose
// engines are not here are checked by their agents before each run.
// A search's matrix must say what to search for (its search: section, read as `search` reads
// it), before anything is queued.
int CheckBeforeSubmit(const std::string& matrix_path, const EngineCheckFlags& check, bool search) {
  matrix::LoadedMatrix matrix;
  Status s = matrix::LoadMatrixFile(matrix_path, &matrix);
  search::SearchSpec spec;
  if (s.ok() && search) s = search::ParseSearchSpec(matrix_path, matrix.text, &spec);
  if (!s.ok()) {
    spdlog::error("{}", s.message());
    return kExitError;
  }
  return RefuseRejectedSweep(matrix, check);
}

// --search and --search-arg, the same for both schedulers.
void AddSearchOptions(CLI::App& cmd, bool& search, std::vector<std::string>& args) {
  cmd.add_flag("--search", search,
               "Run `servesweep search` on the matrix's search: section instead of its sweep "
               "(every round on the job's agents; the answer in OUT/search.md)");
  cmd.add_option("--search-arg", args,
                 "An argument for the search, as given (repeat it: --search-arg=--learn)")
      ->allow_extra_args(false);
}

}  // namespace

void AddSubmitCommand(CLI::App& app, int* exit_code) {
  auto* submit = app.add_subcommand("submit", "Submit a sweep to Slurm or Kubernetes");
  submit->require_subcommand(1);

  auto o = std::make_shared<submit::SlurmOptions>();
  auto* slurm =
      submit->add_subcommand("slurm", "Render the sbatch script of a sweep and submit it");
  slurm->add_option("matrix", o->matrix_path, "Experiment matrix (YAML)")->required();
  slurm->add_option("--out", o->out_dir, "Results folder, shared by every node")->required();
  slurm->add_option("--nodes", o->nodes, "Nodes to allocate (one agent each)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  slurm->add_option(
      "--prefill-nodes", o->prefill_nodes,
      "Prefill pool: a heterogeneous job of prefill + decode nodes (with --decode-nodes)");
  slurm->add_option("--decode-nodes", o->decode_nodes, "Decode pool (with --prefill-nodes)");
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
  AddSearchOptions(*slurm, o->search, o->search_args);
  auto slurm_check = std::make_shared<EngineCheckFlags>();
  AddEngineCheckFlags(*slurm, *slurm_check, true);
  slurm->callback([o, slurm_check, exit_code] {
    if (o->servesweep_binary.empty()) o->servesweep_binary = SelfExecutable();
    o->skip_engine_check = slurm_check->skip;
    if (const int code = CheckBeforeSubmit(o->matrix_path, *slurm_check, o->search); code >= 0) {
      *exit_code = code;
      return;
    }
    std::string job_id, script;
    if (Status s = submit::SubmitSlurm(*o, &job_id, &script); !s.ok()) {
      spdlog::error("{}", s.message());
      *exit_code = kExitError;
      return;
    }
    if (o->dry_run) {
      fmt::print("{}", script);
    } else {
      fmt::print(
          "submitted batch job {}\n  script:  {}/sweep.sbatch\n  results: {}/{} "
          "(follow with: squeue -j {})\n",
          job_id, o->out_dir, o->out_dir, o->search ? "search.md" : "results.db", job_id);
    }
    *exit_code = kExitOk;
  });

  auto k = std::make_shared<submit::K8sOptions>();
  auto* k8s =
      submit->add_subcommand("k8s", "Write a sweep's kustomization and apply it with kubectl");
  k8s->add_option("matrix", k->matrix_path, "Experiment matrix (YAML)")->required();
  k8s->add_option("--overlay", k->overlay, "gpu, gpu-hostnetwork or emulator")
      ->check(CLI::IsMember({"gpu", "gpu-hostnetwork", "emulator"}))
      ->capture_default_str();
  k8s->add_option("--nodes", k->nodes, "Agents, one per node")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  k8s->add_option("--gpus-per-node", k->gpus_per_node, "nvidia.com/gpu per agent (gpu overlays)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  k8s->add_option("--emulate-gpus", k->emulate_gpus, "GPUs each agent announces (emulator overlay)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  k8s->add_option("--image", k->image, "servesweep container image")->capture_default_str();
  k8s->add_option("--namespace", k->namespace_name, "Namespace (one sweep per namespace)");
  k8s->add_option("--dir", k->dir,
                  "Where to write the kustomization (default: ./servesweep-k8s-NAME)");
  k8s->add_flag("--dry-run", k->dry_run, "Print the rendered manifests; apply nothing");
  AddSearchOptions(*k8s, k->search, k->search_args);
  auto k8s_check = std::make_shared<EngineCheckFlags>();
  AddEngineCheckFlags(*k8s, *k8s_check, true);
  k8s->callback([k, k8s_check, exit_code] {
    k->skip_engine_check = k8s_check->skip;
    if (const int code = CheckBeforeSubmit(k->matrix_path, *k8s_check, k->search); code >= 0) {
      *exit_code = code;
      return;
    }
    if (k->dir.empty()) {
      matrix::LoadedMatrix matrix;
      if (Status s = matrix::LoadMatrixFile(k->matrix_path, &matrix); !s.ok()) {
        spdlog::error("{}", s.message());
        *exit_code = kExitError;
        return;
      }
      k->dir = fmt::format("servesweep-k8s-{}", matrix.matrix().getName().cStr());
    }
    std::string output;
    if (Status s = submit::SubmitK8s(*k, &output); !s.ok()) {
      spdlog::error("{}", s.message());
      *exit_code = kExitError;
      return;
    }
    fmt::print("{}", output);
    if (!k->dry_run) fmt::print("applied {} (kubectl apply -k)\n", k->dir);
    *exit_code = kExitOk;
  });
}

}  // namespace servesweep::cli
