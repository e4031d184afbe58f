// Tests of fitting: a shipped profile with one coefficient moved far from its value, written
// where a calibration can read it. Figures the model makes with it are the "truth" a fit from
// the shipped value must find again.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "perfmodel/engine_profile.h"
#include "testing/scratch_dir.h"

namespace servesweep::calibration {

// vllm-0.12 with cpu.step_us at 3x its value + 300 us, as dir/truth.yaml; its path, and the
// value in *true_step_us.
inline std::string WriteTrueProfile(const testing::ScratchDir& dir, double* true_step_us) {
  perfmodel::EngineProfile truth;
  EXPECT_TRUE(perfmodel::LoadEngineProfile("vllm-0.12", &truth).ok());
  double start_value = 0;
  EXPECT_TRUE(perfmodel::GetCoefficient(truth, "cpu.step_us", &start_value).ok());
  *true_step_us = start_value * 3 + 300;
  EXPECT_TRUE(perfmodel::SetCoefficient(&truth, "cpu.step_us", *true_step_us).ok());
  const std::string path = dir.Path("truth.yaml");
  std::ofstream(path) << perfmodel::EngineProfileYaml(truth, "");
  return path;
}

}  // namespace servesweep::calibration
