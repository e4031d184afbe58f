// The GPU side of a run's energy (record/run_energy.h): the energy counters read through
// nvidia-smi (`--query-gpu=index,uuid,total_energy_consumption`: NVML's total energy in mJ since
// the driver loaded, Volta and newer; "[N/A]" or "[Not Supported]" elsewhere), and which GPUs of
// the node a run's engine holds.
//
// Thread-safety: pure functions, but ReadEnergyCounters runs a short child process.
#pragma once

#include <string>
#include <vector>

#include "engines/launch_values.h"
#include "record/run_energy.h"

namespace servesweep::agent {

inline constexpr const char* kEnergyQuery = "index,uuid,total_energy_consumption";

// Parses the query's rows ("0, GPU-8f1..., 123456789"); a row whose counter is not a number keeps
// the GPU with a NaN counter. False (and why in read->why_none) when a line is not such a row.
bool ParseEnergyCounters(const std::string& csv, record::EnergyCounterRead* read);

// Runs nvidia-smi once (output in `log_path`, 10 s at most), timed on the steady clock. Never
// fails: a read that did not work says why in why_none.
record::EnergyCounterRead ReadEnergyCounters(const std::string& log_path);

// The run's GPUs on this node as nvidia-smi names them, in the engine's order: the agent's
// CUDA_VISIBLE_DEVICES entries (`visible_devices`, indices or UUIDs) when set, else indices from
// 0; in a disaggregated run, which of them prefill instances hold (engines::PdInstances' order:
// prefill instances first, filled onto agents in rank order); and how many GPUs of the run are
// on other nodes.
void RunGpusOnNode(const engines::LaunchContext& context, const std::string& visible_devices,
                   record::EnergyInputs* inputs);

}  // namespace servesweep::agent
