// The subcommands of the `servesweep` binary. Each Add*Command registers its options and a
// callback; the callback's exit code is stored in *exit_code.
//
// Thread-safety: called once from main().
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace servesweep::cli {

void AddRunCommand(CLI::App& app, int* exit_code);
void AddSearchCommand(CLI::App& app, int* exit_code);
void AddCoordinatorCommand(CLI::App& app, int* exit_code);
void AddAgentCommand(CLI::App& app, int* exit_code);
void AddSimCommand(CLI::App& app, int* exit_code);
void AddBenchCommand(CLI::App& app, int* exit_code);
void AddPlanCommand(CLI::App& app, int* exit_code);
void AddCalibrateCommand(CLI::App& app, int* exit_code);
void AddReportCommand(CLI::App& app, int* exit_code);
void AddCompareCommand(CLI::App& app, int* exit_code);
void AddBaselineCommand(CLI::App& app, int* exit_code);
void AddProbeCommand(CLI::App& app, int* exit_code);
void AddSubmitCommand(CLI::App& app, int* exit_code);
void AddKeygenCommand(CLI::App& app, int* exit_code);

// Shared by `baseline` and `compare --baseline`: the store option, and times as UTC text.
void AddBaselineStoreOption(CLI::App& cmd, std::string& store);
std::string UtcTimeText(int64_t unix_ms);

// Exit codes shared by the subcommands.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;          // bad input or a failure before measuring
inline constexpr int kExitRunsFailed = 2;     // the sweep finished, some runs failed
inline constexpr int kExitNewBaseline = 3;    // compare --baseline: conditions changed, not frozen
inline constexpr int kExitInterrupted = 130;  // stopped by SIGINT/SIGTERM

}  // namespace servesweep::cli
