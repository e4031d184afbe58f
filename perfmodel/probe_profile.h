// Hardware profiles from our own probes: the figures of a `servesweep probe --json` report
// (docs/probes.md) become a profile the emulator and `plan --simulate` can take, written as the
// same YAML a user would write (profiles/hardware/*.yaml).
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "common/status.h"
#include "perfmodel/profiles.h"

namespace servesweep::perfmodel {

// The figures of a probe report (JSON). Per GPU the largest HBM copy buffer's figure, the bf16
// and fp8 GEMM and the host-to-device figure; across GPUs the slowest, since the slowest GPU
// gates a TP group. Only probes whose status is "ok" count. Fails when the report is not a probe
// report or holds no measured figure (a node without a GPU says "no_gpu").
Status ProbeFiguresFromReport(const std::string& report_json, ProbeFigures* out);

// The profile as YAML that ParseHardwareProfile reads back to the same figures; `comment` (may
// be several lines) goes on top as # lines.
std::string HardwareProfileYaml(const HardwareProfile& hw, const std::string& comment);

}  // namespace servesweep::perfmodel
