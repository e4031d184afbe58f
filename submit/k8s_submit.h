// `servesweep submit k8s`: writes a kustomization for a sweep (the embedded k8s/ base and
// overlays, the matrix as a ConfigMap, the agent count and GPUs as a patch, and for a search the
// coordinator's command as another), then renders it with
// `kubectl kustomize` (dry run) or applies it with `kubectl apply -k`.
//
// Thread-safety: functions over the caller's data.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "matrix/matrix_loader.h"

namespace servesweep::submit {

struct K8sOptions {
  std::string matrix_path;
  std::string overlay = "gpu";  // "gpu", "gpu-hostnetwork" or "emulator"
  uint32_t nodes = 1;           // agents, one per node
  uint32_t gpus_per_node = 8;   // gpu overlays: nvidia.com/gpu per agent
  uint32_t emulate_gpus = 1;    // emulator overlay: GPUs each agent announces
  std::string image = "servesweep:" SERVESWEEP_VERSION;
  std::string namespace_name;
  std::string dir;  // where the kustomization is written
  bool dry_run = false;
  bool skip_engine_check = false;  // agents start engines without the engines' own check
  // `servesweep search` in the coordinator's pod instead of `coordinator` (the matrix's
  // search: section), its rounds served to the agents; `search_args` go to it as they are.
  bool search = false;
  std::vector<std::string> search_args;
};

// Generated files of the kustomization (without the copied base), by name; *coordinator_patch
// is empty unless options.search.
Status RenderK8sKustomization(matrix::LoadedMatrix& matrix, const K8sOptions& options,
                              std::string* kustomization, std::string* agents_patch,
                              std::string* coordinator_patch);

// Writes the kustomization into options.dir; dry run: *manifests gets `kubectl kustomize`'s
// output; otherwise the result of `kubectl apply -k`.
Status SubmitK8s(const K8sOptions& options, std::string* manifests);

}  // namespace servesweep::submit
