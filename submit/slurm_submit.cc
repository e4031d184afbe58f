#include "submit/slurm_submit.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "common/subprocess.h"
#include "matrix/feasibility.h"
#include "submit/template_renderer.h"

namespace servesweep::submit {
namespace {

constexpr const char* kTemplate = "slurm/sweep.sbatch.in";

Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  return out ? Status::Ok() : Status::Internal(fmt::format("{}: cannot write", path));
}

}  // namespace

Status CheckAllocation(matrix::LoadedMatrix& matrix, const SlurmOptions& options) {
  const uint32_t gpus = options.emulate_gpus > 0 ? options.emulate_gpus : options.gpus_per_node;
  if (gpus == 0) {
    return Status::InvalidArgument(
        "submit slurm: expected --gpus-per-node G (real GPUs) or --emulate-gpus G "
        "(emulated engines), found neither");
  }
  const bool pools = options.prefill_nodes > 0 || options.decode_nodes > 0;
  if (pools && (options.prefill_nodes == 0 || options.decode_nodes == 0)) {
    return Status::InvalidArgument(
        fmt::format("submit slurm: expected both --prefill-nodes and "
                    "--decode-nodes, found {} and {}",
                    options.prefill_nodes, options.decode_nodes));
  }
  const std::vector<uint32_t> nodes(options.nodes, gpus);
  const std::vector<uint32_t> prefill(options.prefill_nodes, gpus);
  const std::vector<uint32_t> decode(options.decode_nodes, gpus);
  const std::string allocation =
      pools ? fmt::format("{} prefill + {} decode node(s) x {} GPU(s)", options.prefill_nodes,
                          options.decode_nodes, gpus)
            : fmt::format("{} node(s) x {} GPU(s)", options.nodes, gpus);
  for (auto spec : matrix.matrix().getRuns()) {
    const bool fits = pools ? matrix::CouldEverPlaceInPools(spec, prefill, decode)
                            : matrix::CouldEverPlace(spec, nodes);
    if (!fits) {
      return Status::InvalidArgument(fmt::format(
          "{}: run {} [{}] needs {} GPU(s); expected it to fit the allocation of {} (nothing was "
          "submitted)",
          options.matrix_path, spec.getRunId().cStr(), spec.getLabel().cStr(), spec.getGpusNeeded(),
          allocation));
    }
  }
  return Status::Ok();
}

Status RenderSbatch(matrix::LoadedMatrix& matrix, const SlurmOptions& options,
                    const std::string& matrix_on_nodes, std::string* script) {
  // Per component: the node count and the resources asked of each node.
  std::string resources;
  auto add = [&](const std::string& line) { resources += "\n" + line; };
  if (options.gpus_per_node > 0)
    add(fmt::format("#SBATCH --gpus-per-node={}", options.gpus_per_node));
  if (!options.partition.empty()) add("#SBATCH --partition=" + options.partition);
  if (!options.time.empty()) add("#SBATCH --time=" + options.time);
  if (!options.account.empty()) add("#SBATCH --account=" + options.account);
  if (options.gpus_per_node == 0) add("# (emulated GPUs: no GPU request)");
  // Whole nodes: a benchmark shares its nodes with nothing, and the engines need every CPU and
  // all memory (one task per node would otherwise get one CPU's share).
  auto component = [&](uint32_t nodes) {
    return fmt::format(
        "#SBATCH --nodes={}\n#SBATCH --ntasks-per-node=1\n#SBATCH --exclusive\n"
        "#SBATCH --mem=0{}",
        nodes, resources);
  };
  const bool pools = options.prefill_nodes > 0;
  const std::string components =
      pools ? fmt::format(
                  "# Component 0: the prefill pool (and the coordinator); 1: the decode pool.\n"
                  "{}\n#SBATCH hetjob\n{}",
                  component(options.prefill_nodes), component(options.decode_nodes))
            : component(options.nodes);
  const std::string agent_groups =
      pools ? "start_agents --het-group=0 prefill\nstart_agents --het-group=1 decode"
            : "start_agents \"\" \"\"";

  std::string srun_options;
  std::string servesweep = options.servesweep_binary;
  if (!options.container_image.empty()) {
    // pyxis: the image brings servesweep; the shared results folder is mounted at the same path.
    srun_options =
        fmt::format("--container-image={} --container-mounts={}:{} --no-container-mount-home",
                    ShellQuote(options.container_image), options.out_dir, options.out_dir);
    servesweep = "servesweep";
  }
  std::string agent_options;
  if (options.emulate_gpus > 0)
    agent_options = fmt::format("--emulate-gpus {}", options.emulate_gpus);
  if (options.skip_engine_check)
    agent_options += (agent_options.empty() ? "" : " ") + std::string("--skip-engine-check");

  std::string coordinator_options = options.resume ? "--resume" : "";
  if (options.search) {
    // The search places its rounds on the job's agents, one configuration per agent.
    const uint32_t gpus = options.emulate_gpus > 0 ? options.emulate_gpus : options.gpus_per_node;
    coordinator_options +=
        fmt::format("{}--agents {} --gpus-per-agent {}", coordinator_options.empty() ? "" : " ",
                    pools ? options.prefill_nodes + options.decode_nodes : options.nodes, gpus);
    for (const std::string& arg : options.search_args) coordinator_options += " " + ShellQuote(arg);
  }

  const std::map<std::string, std::string> values = {
      {"sweep_name", matrix.matrix().getName()},
      {"out_dir", options.out_dir},
      {"sbatch_components", components},
      {"head_group", pools ? "--het-group=0" : ""},
      {"probe_groups",
       pools ? "probe_nodes --het-group=0\nprobe_nodes --het-group=1" : "probe_nodes \"\""},
      {"agent_groups", agent_groups},
      {"matrix", ShellQuote(matrix_on_nodes)},
      {"servesweep", ShellQuote(servesweep)},
      {"port_base", std::to_string(options.port_base)},
      {"srun_options", srun_options},
      {"coordinator_command", options.search ? "search" : "coordinator"},
      {"coordinator_options", coordinator_options},
      {"agent_options", agent_options},
      {"probe_mpi", options.mpi == "none" ? "" : "--mpi=" + options.mpi},
  };
  return RenderTemplate(kTemplate, EmbeddedTemplate(kTemplate), values, script);
}

Status SubmitSlurm(SlurmOptions options, std::string* job_id, std::string* script) {
  matrix::LoadedMatrix matrix;
  if (Status s = matrix::LoadMatrixFile(options.matrix_path, &matrix); !s.ok()) return s;
  if (Status s = CheckAllocation(matrix, options); !s.ok()) return s;
  options.out_dir = std::filesystem::absolute(options.out_dir).lexically_normal().string();
  // These go into the script unquoted (#SBATCH lines, srun --container-mounts).
  const std::pair<const char*, const std::string*> plain[] = {{"--out", &options.out_dir},
                                                              {"--partition", &options.partition},
                                                              {"--time", &options.time},
                                                              {"--account", &options.account}};
  for (const auto& [flag, value] : plain) {
    if (value->find_first_of(" \t\n'\"$`\\;&|<>") != std::string::npos) {
      return Status::InvalidArgument(
          fmt::format("submit slurm: expected {} without spaces or shell "
                      "characters, found '{}'",
                      flag, *value));
    }
  }
  // The matrix travels in the shared results folder, so every node reads the same file.
  const std::string matrix_on_nodes = options.out_dir + "/matrix.yaml";
  if (Status s = RenderSbatch(matrix, options, matrix_on_nodes, script); !s.ok()) return s;
  job_id->clear();
  if (options.dry_run) return Status::Ok();

  std::error_code error;
  std::filesystem::create_directories(options.out_dir, error);
  if (error)
    return Status::Internal(fmt::format("{}: cannot create: {}", options.out_dir, error.message()));
  if (Status s = WriteText(matrix_on_nodes, matrix.text); !s.ok()) return s;
  const std::string script_path = options.out_dir + "/sweep.sbatch";
  if (Status s = WriteText(script_path, *script); !s.ok()) return s;

  const std::string sbatch_log = options.out_dir + "/sbatch.log";
  std::filesystem::remove(sbatch_log, error);
  ChildProcess sbatch;
  if (Status s =
          ChildProcess::Spawn({{"sbatch", "--parsable", script_path}, {}, sbatch_log, ""}, &sbatch);
      !s.ok()) {
    return s;
  }
  const auto exit = sbatch.Wait(std::chrono::seconds(60));
  std::string output = TailOfFile(sbatch_log, 20);
  while (!output.empty() && (output.back() == '\n' || output.back() == ' ')) output.pop_back();
  if (!exit || *exit != 0) {
    return Status::Internal(fmt::format("sbatch {} failed ({}): {}", script_path,
                                        exit ? DescribeExit(*exit) : "no answer in 60 s", output));
  }
  *job_id = output.substr(0, output.find(';'));  // --parsable: "<id>[;<cluster>]"
  return Status::Ok();
}

}  // namespace servesweep::submit
