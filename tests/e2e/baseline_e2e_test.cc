// End-to-end: frozen baselines over the results databases of real sweeps (coordinator, agent
// and emulator as processes): freeze, compare a later sweep against the baseline's repeats, and
// a changed workload starting a new baseline generation instead of being compared.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/support/harness.h"

namespace servesweep::testing {
namespace {

// Two concurrency levels; only the emulator's timing and the output length vary.
std::string Sweep(Harness& h, const std::string& name, double ttft_ms, int output_len,
                  int repeats) {
  const std::string matrix =
      h.WriteFile(name + ".yaml", SimMatrix(name, 2, 6, 1, output_len, ttft_ms, 1) +
                                      fmt::format("repeats: {}\n", repeats));
  const std::string out = h.Path(name);
  std::string output;
  EXPECT_EQ(RunServesweep(fmt::format("run {} --out {} --progress off", matrix, out), &output), 0)
      << output;
  return out;
}

TEST(BaselineEndToEnd, FreezeCompareAndANewBaselineWhenTheWorkloadChanges) {
  Harness h("baseline");
  const std::string store = h.Path("store");
  const std::string base = Sweep(h, "base", 5, 4, 3);
  const std::string slow = Sweep(h, "slow", 60, 4, 2);
  const std::string longer = Sweep(h, "longer", 5, 8, 2);

  std::string frozen;
  ASSERT_EQ(
      RunServesweep(fmt::format("baseline freeze {} --name main --store {}", base, store), &frozen),
      0)
      << frozen;
  EXPECT_NE(frozen.find("as baseline 'main' generation 1 (6 runs, 6 ok)"), std::string::npos)
      << frozen;
  EXPECT_TRUE(std::filesystem::exists(store + "/main/1/results.db"));
  const auto info = nlohmann::json::parse(ReadTextFile(store + "/main/1/baseline.json"));
  EXPECT_EQ(info["reason"], "frozen by hand");
  EXPECT_EQ(info["source_dir"], base);

  // A matched later sweep: compared with the baseline's medians and ranges over its 3 repeats.
  std::string text;
  ASSERT_EQ(RunServesweep(
                fmt::format("compare --baseline main {} --store {} --include-invalid", slow, store),
                &text),
            0)
      << text;
  EXPECT_NE(text.find("against baseline 'main' generation 1 (frozen "), std::string::npos) << text;
  EXPECT_NE(text.find("matched: every condition"), std::string::npos) << text;
  EXPECT_NE(text.find("varied: sim.ttft_ms"), std::string::npos) << text;
  EXPECT_EQ(text.find("new baseline"), std::string::npos) << text;
  std::string json_text;
  ASSERT_EQ(
      RunServesweep(fmt::format("compare --baseline main {} --store {} --json --include-invalid",
                                slow, store),
                    &json_text),
      0)
      << json_text;
  const auto json = nlohmann::json::parse(json_text);
  EXPECT_FALSE(json["new_baseline"].get<bool>());
  EXPECT_EQ(json["baseline"]["generation"], 1);
  ASSERT_EQ(json["comparison"]["pairs"].size(), 2u);
  for (const auto& pair : json["comparison"]["pairs"]) {
    for (const auto& f : pair["figures"]) {
      if (f["column"] == "ttft_median_ms") {
        EXPECT_EQ(f["a"]["runs"], 3);  // the baseline's repeats
        EXPECT_EQ(f["b"]["runs"], 2);
        EXPECT_EQ(f["verdict"], "B worse");  // 55 ms more to the first token
      }
      if (f["column"] == "success_rate") {
        EXPECT_EQ(f["verdict"], "same");
      }
    }
  }

  // A changed workload starts a new baseline: nothing is attributed to the varied axis.
  std::string changed;
  EXPECT_EQ(RunServesweep(fmt::format("compare --baseline main {} --store {} --include-invalid",
                                      longer, store),
                          &changed),
            3)
      << changed;
  EXPECT_NE(
      changed.find("new baseline: workload differs (workload.output_len: fixed:4 -> fixed:8)"),
      std::string::npos)
      << changed;
  EXPECT_EQ(changed.find("== concurrency"), std::string::npos) << changed;
  EXPECT_FALSE(std::filesystem::exists(store + "/main/2"));
  // ... and with --freeze-new it becomes the baseline's generation 2.
  std::string renewed;
  ASSERT_EQ(RunServesweep(
                fmt::format("compare --baseline main {} --store {} --freeze-new --include-invalid",
                            longer, store),
                &renewed),
            0)
      << renewed;
  EXPECT_NE(renewed.find("as baseline 'main' generation 2 (now current; generation 1 kept)"),
            std::string::npos)
      << renewed;
  const auto info2 = nlohmann::json::parse(ReadTextFile(store + "/main/2/baseline.json"));
  EXPECT_EQ(info2["reason"],
            "new baseline: workload differs (workload.output_len: fixed:4 -> fixed:8)");
  std::string list;
  ASSERT_EQ(RunServesweep(fmt::format("baseline list --store {}", store), &list), 0) << list;
  EXPECT_NE(list.find("frozen by hand"), std::string::npos) << list;
  EXPECT_NE(list.find("current"), std::string::npos) << list;
  EXPECT_LT(list.find("frozen by hand"), list.find("new baseline: workload differs")) << list;

  // The longer sweep now compares against its own generation; the old workload no longer does.
  std::string again;
  ASSERT_EQ(RunServesweep(fmt::format("compare --baseline main {} --store {} --include-invalid",
                                      longer, store),
                          &again),
            0)
      << again;
  EXPECT_NE(again.find("against baseline 'main' generation 2"), std::string::npos) << again;
  EXPECT_NE(again.find("varied: nothing"), std::string::npos) << again;
  std::string back;
  EXPECT_EQ(RunServesweep(
                fmt::format("compare --baseline main {} --store {} --include-invalid", slow, store),
                &back),
            3)
      << back;
  EXPECT_NE(back.find("new baseline: workload differs (workload.output_len: fixed:8 -> fixed:4)"),
            std::string::npos)
      << back;
}

TEST(BaselineEndToEnd, BadRequestsSayWhatWasExpected) {
  Harness h("baseline-errors");
  const std::string store = h.Path("store");
  const std::string done = Sweep(h, "done", 5, 4, 1);
  std::string output;
  EXPECT_EQ(
      RunServesweep(fmt::format("compare --baseline nope {} --store {}", done, store), &output), 1);
  EXPECT_NE(output.find("no baseline named 'nope'"), std::string::npos) << output;
  EXPECT_NE(output.find("the store is empty"), std::string::npos) << output;

  EXPECT_EQ(
      RunServesweep(fmt::format("baseline freeze {} --name 'bad/name' --store {}", done, store),
                    &output),
      1);
  EXPECT_NE(output.find("expected letters, digits"), std::string::npos) << output;
  EXPECT_EQ(
      RunServesweep(fmt::format("baseline freeze {} --name x --store {}", h.Path("nowhere"), store),
                    &output),
      1);
  EXPECT_NE(output.find("expected a sweep's results database, found none"), std::string::npos)
      << output;

  // A sweep with a run still pending is not a baseline.
  const std::string unfinished = h.Path("unfinished");
  ASSERT_EQ(RunShell(fmt::format("cp -r {} {} && sqlite3 {}/results.db \"UPDATE runs SET "
                                 "status='pending' WHERE idx = 1\"",
                                 done, unfinished, unfinished),
                     &output),
            0)
      << output;
  EXPECT_EQ(RunServesweep(fmt::format("baseline freeze {} --name x --store {}", unfinished, store),
                          &output),
            1);
  EXPECT_NE(output.find("expected a finished sweep to freeze, found 1 of 2 run(s) pending"),
            std::string::npos)
      << output;
  EXPECT_FALSE(std::filesystem::exists(store + "/x/1"));
}

}  // namespace
}  // namespace servesweep::testing
