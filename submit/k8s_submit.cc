#include "submit/k8s_submit.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/subprocess.h"
#include "matrix/feasibility.h"
#include "submit/template_renderer.h"
#include "transport/curve_keys.h"

namespace servesweep::submit {
namespace {

Status WriteText(const std::string& path, std::string_view text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  return out ? Status::Ok() : Status::Internal(fmt::format("{}: cannot write", path));
}

// Runs kubectl with `args`: its standard output in *output; its errors, if it fails, in the Status.
Status Kubectl(const std::vector<std::string>& args, const std::string& dir, std::string* output) {
  std::vector<std::string> argv = {"kubectl"};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string out_path = dir + "/kubectl.out";
  const std::string err_path = dir + "/kubectl.err";
  std::error_code ignored;
  std::filesystem::remove(out_path, ignored);
  std::filesystem::remove(err_path, ignored);
  ChildProcess kubectl;
  SpawnOptions spawn{argv, {}, out_path, err_path};
  if (Status s = ChildProcess::Spawn(spawn, &kubectl); !s.ok()) return s;
  const auto exit = kubectl.Wait(std::chrono::seconds(120));
  std::ifstream in(out_path);
  output->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (exit && *exit == 0) return Status::Ok();
  if (exit && WIFEXITED(*exit) && WEXITSTATUS(*exit) == 127) {
    return Status::FailedPrecondition(
        "submit k8s: expected kubectl on PATH, found none (scripts/install-deps.sh "
        "installs it)");
  }
  return Status::Internal(fmt::format("kubectl {} failed ({}): {}", args.front(),
                                      exit ? DescribeExit(*exit) : "no answer in 120 s",
                                      TailOfFile(err_path, 20)));
}

// The sweep's CurveZMQ keys (the Secrets' files): a keypair for the coordinator and one shared
// by its agents. Kept when already there, so submitting the same folder again keeps the pods'
// keys (and `keygen`'s rule: a key is never overwritten).
Status EnsureSweepKeys(const std::string& dir) {
  for (const char* name : {"coordinator", "agents"}) {
    if (std::filesystem::exists(fmt::format("{}/{}.secret", dir, name))) continue;
    CurveKeypair keypair;
    if (Status s = GenerateCurveKeypair(&keypair); !s.ok()) return s;
    if (Status s = WriteCurveKeypair(dir, name, keypair); !s.ok()) return s;
  }
  return Status::Ok();
}

// A YAML single-quoted scalar: whatever `text` holds stays one string.
std::string YamlQuote(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) quoted += c == '\'' ? std::string("''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace

Status RenderK8sKustomization(matrix::LoadedMatrix& matrix, const K8sOptions& options,
                              std::string* kustomization, std::string* agents_patch,
                              std::string* coordinator_patch) {
  const bool emulated = options.overlay == "emulator";
  const uint32_t gpus = emulated ? options.emulate_gpus : options.gpus_per_node;
  if (options.overlay != "gpu" && options.overlay != "gpu-hostnetwork" && !emulated) {
    return Status::InvalidArgument(
        fmt::format("submit k8s: expected --overlay gpu, gpu-hostnetwork or "
                    "emulator, found '{}'",
                    options.overlay));
  }
  const std::vector<uint32_t> nodes(options.nodes, gpus);
  for (auto spec : matrix.matrix().getRuns()) {
    if (!matrix::CouldEverPlace(spec, nodes)) {
      return Status::InvalidArgument(fmt::format(
          "{}: run {} [{}] needs {} GPU(s); expected it to fit {} agent(s) x {} GPU(s) (nothing "
          "was written or applied)",
          options.matrix_path, spec.getRunId().cStr(), spec.getLabel().cStr(), spec.getGpusNeeded(),
          options.nodes, gpus));
    }
  }
  // "registry/name:tag" -> name part and tag ("latest" when none); a ':' in the registry's
  // port is not a tag.
  const size_t slash = options.image.rfind('/');
  const size_t colon = options.image.rfind(':');
  const bool tagged = colon != std::string::npos && (slash == std::string::npos || colon > slash);
  const std::string image_name = tagged ? options.image.substr(0, colon) : options.image;
  const std::string image_tag = tagged ? options.image.substr(colon + 1) : "latest";

  // The emulator overlay appends `--emulate-gpus 1` to the agent's 15 base arguments.
  const std::string gpu_ops =
      emulated ? fmt::format(
                     "- op: replace\n  path: /spec/template/spec/containers/0/args/16\n"
                     "  value: \"{}\"",
                     gpus)
               : fmt::format(
                     "- op: replace\n  path: /spec/template/spec/containers/0/resources/"
                     "limits/nvidia.com~1gpu\n  value: {}",
                     gpus);
  const std::string agent_ops =
      gpu_ops + (options.skip_engine_check
                     ? "\n- op: add\n  path: /spec/template/spec/containers/0/args/-\n"
                       "  value: \"--skip-engine-check\""
                     : "");
  // A search: `search` for `coordinator` (the base's args/0), one configuration per agent.
  coordinator_patch->clear();
  if (options.search) {
    *coordinator_patch = fmt::format(
        "# servesweep search \"{}\": its rounds served to the {} agent(s).\n"
        "- op: replace\n  path: /spec/template/spec/containers/0/args/0\n  value: search\n",
        matrix.matrix().getName().cStr(), options.nodes);
    std::vector<std::string> args = {"--agents", std::to_string(options.nodes), "--gpus-per-agent",
                                     std::to_string(gpus)};
    args.insert(args.end(), options.search_args.begin(), options.search_args.end());
    for (const std::string& arg : args) {
      *coordinator_patch +=
          fmt::format("- op: add\n  path: /spec/template/spec/containers/0/args/-\n  value: {}\n",
                      YamlQuote(arg));
    }
  }
  const std::map<std::string, std::string> values = {
      {"sweep_name", matrix.matrix().getName()},
      {"dir", options.dir},
      {"namespace_line",
       options.namespace_name.empty() ? "" : "namespace: " + options.namespace_name + "\n"},
      {"overlay", options.overlay},
      {"image_name", image_name},
      {"image_tag", image_tag},
      {"nodes", std::to_string(options.nodes)},
      {"gpu_ops", agent_ops},
      {"coordinator_patch", options.search
                                ? "\n  - target: {group: batch, version: v1, kind: Job, name: "
                                  "servesweep-coordinator}\n    path: coordinator-patch.yaml"
                                : ""},
  };
  constexpr const char* kKustomization = "k8s/sweep-kustomization.yaml.in";
  constexpr const char* kPatch = "k8s/sweep-agents-patch.yaml.in";
  if (Status s =
          RenderTemplate(kKustomization, EmbeddedTemplate(kKustomization), values, kustomization);
      !s.ok()) {
    return s;
  }
  return RenderTemplate(kPatch, EmbeddedTemplate(kPatch), values, agents_patch);
}

Status SubmitK8s(const K8sOptions& options, std::string* manifests) {
  matrix::LoadedMatrix matrix;
  if (Status s = matrix::LoadMatrixFile(options.matrix_path, &matrix); !s.ok()) return s;
  std::string kustomization, agents_patch, coordinator_patch;
  if (Status s = RenderK8sKustomization(matrix, options, &kustomization, &agents_patch,
                                        &coordinator_patch);
      !s.ok()) {
    return s;
  }
  // The base and overlays travel with the kustomization: kustomize reads only below its root.
  for (std::string_view path : EmbeddedTemplatePaths()) {
    if (!path.starts_with("k8s/base/") && !path.starts_with("k8s/overlays/")) continue;
    const std::string target = fmt::format("{}/servesweep/{}", options.dir, path.substr(4));
    if (Status s = WriteText(target, EmbeddedTemplate(path)); !s.ok()) return s;
  }
  if (Status s = EnsureSweepKeys(options.dir + "/keys"); !s.ok()) return s;
  for (const auto& [name, text] :
       {std::pair<std::string, std::string_view>{"kustomization.yaml", kustomization},
        {"agents-patch.yaml", agents_patch},
        {"matrix.yaml", matrix.text}}) {
    if (Status s = WriteText(options.dir + "/" + name, text); !s.ok()) return s;
  }
  if (options.search) {
    if (Status s = WriteText(options.dir + "/coordinator-patch.yaml", coordinator_patch); !s.ok())
      return s;
  }
  if (options.dry_run) return Kubectl({"kustomize", options.dir}, options.dir, manifests);
  return Kubectl({"apply", "-k", options.dir}, options.dir, manifests);
}

}  // namespace servesweep::submit
