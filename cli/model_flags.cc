#include "cli/model_flags.h"

#include "perfmodel/engine_profile.h"
#include "perfmodel/error_bands.h"

namespace servesweep::cli {

void AddModelFlags(CLI::App& cmd, ModelFlags& flags) {
  cmd.add_option("--hardware", flags.hardware,
                 "Hardware profile for runs whose matrix names none (e.g. h200, or a YAML path)");
  cmd.add_option("--error-bands", flags.error_bands,
                 "Label each run's error with these cross-validated bands (a file written by "
                 "`calibrate --cross-validate --bands-out`) instead of the shipped "
                 "profiles/error_bands.yaml");
  cmd.add_option("--engine-profile", flags.engine_profiles,
                 "Engine profile for the runs of its engine (a shipped name or a YAML path, e.g. "
                 "one `servesweep calibrate` wrote); repeatable. Default: the run's engine and "
                 "version choose a shipped one");
}

Status VirtualRunOptionsFrom(const ModelFlags& flags, record::VirtualRunOptions* out) {
  *out = record::VirtualRunOptions{};
  out->default_hardware = flags.hardware;
  for (const auto& name : flags.engine_profiles) {
    perfmodel::EngineProfile profile;
    if (Status s = perfmodel::LoadEngineProfile(name, &profile); !s.ok()) {
      return Status::InvalidArgument("--engine-profile: " + s.message());
    }
    out->engine_profiles.push_back(std::move(profile));
  }
  if (!flags.error_bands.empty()) {
    out->error_bands.emplace();
    if (Status s = perfmodel::LoadErrorBands(flags.error_bands, &*out->error_bands); !s.ok()) {
      return Status::InvalidArgument("--error-bands: " + s.message());
    }
  }
  return Status::Ok();
}

}  // namespace servesweep::cli
