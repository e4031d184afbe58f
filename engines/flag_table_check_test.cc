// The flag tables against their engines' own parsers: the option strings vLLM 0.33.0 / 0.11.0,
// SGLang 0.5.23 and their routers accept (dumped from the installed packages by
// `engine_check.py --options`, tests/data/engine-facts/; CI checks the live parsers too,
// tests/e2e/engine_check_e2e_test.cc) and llama-server's --help.
#include "engines/flag_table_check.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "testing/process_helpers.h"

namespace servesweep::engines {
namespace {

ParserOptions Saved(const std::string& file) {
  const std::string path = "tests/data/engine-facts/" + file;
  ParserOptions options;
  if (file.rfind("help-", 0) == 0) {
    return OptionsFromHelp(testing::ReadSourceFile(path), "llama-server", "11434");
  }
  Status s = ParseParserOptions(testing::ReadSourceFile(path), path, &options);
  EXPECT_TRUE(s.ok()) << s.message();
  return options;
}

// The saved parser of a table: options-<engine>-<first checked version>.json and its router's
// options-<engine>-router-<router version>.json; llama.cpp's --help.
TableCheck CheckAgainstSaved(const FlagTable& table) {
  if (table.engine == "llamacpp") {
    return CrossCheckFlagTable(table, Saved("help-llama-server-" + table.version + ".txt"),
                               nullptr);
  }
  const ParserOptions engine =
      Saved(fmt::format("options-{}-{}.json", table.engine, table.checked_first));
  const ParserOptions router =
      Saved(fmt::format("options-{}-router-{}.json", table.engine, table.router_version));
  return CrossCheckFlagTable(table, engine, &router);
}

FlagTable Table(const std::string& path) {
  FlagTable table;
  EXPECT_TRUE(ParseFlagTable(EmbeddedFlagTable(path), path, &table).ok()) << path;
  return table;
}

TEST(FlagTableCheck, EveryTableUsesOnlyOptionsItsEnginesParserAccepts) {
  for (auto path : EmbeddedFlagTablePaths()) {
    const FlagTable table = Table(std::string(path));
    const TableCheck check = CheckAgainstSaved(table);
    EXPECT_TRUE(check.ok()) << path << ":\n" << fmt::format("{}", fmt::join(check.missing, "\n"));
    // Visible, current spellings only: nothing hidden or deprecated is left in a table.
    EXPECT_EQ(check.hidden, std::vector<std::string>{}) << path;
    EXPECT_EQ(check.deprecated, std::vector<std::string>{}) << path;
  }
}

TEST(FlagTableCheck, AMisspeltFlagFailsTheCrossCheck) {
  FlagTable table = Table("engines/flags/vllm-0.33.0.yaml");
  table.flags["tp"] = {"--tensor-paralel-size", "{tp}"};
  table.router_decode = {"--decoder", "{url}"};
  const TableCheck check = CheckAgainstSaved(table);
  EXPECT_FALSE(check.ok());
  EXPECT_EQ(check.missing,
            (std::vector<std::string>{
                "flags.tp: --tensor-paralel-size is not an option of vllm-serve 0.33.0",
                "router.decode: --decoder is not an option of vllm-router 0.1.17"}));
}

TEST(FlagTableCheck, HiddenAndDeprecatedSpellingsAreReported) {
  FlagTable vllm = Table("engines/flags/vllm-0.33.0.yaml");
  vllm.flags["prefix_caching_off"] = {"--no-enable-prefix-caching"};
  TableCheck check = CheckAgainstSaved(vllm);
  EXPECT_TRUE(check.ok());
  ASSERT_EQ(check.hidden.size(), 1u);
  EXPECT_NE(check.hidden[0].find("flags.prefix_caching_off: --no-enable-prefix-caching "
                                 "(vllm-serve 0.33.0) is a hidden alias of "
                                 "--enable-prefix-caching/--disable-prefix-caching"),
            std::string::npos)
      << check.hidden[0];
  FlagTable sglang = Table("engines/flags/sglang-0.5.23.yaml");
  sglang.flags["dp_attention"] = {"--enable-dp-attention"};
  check = CheckAgainstSaved(sglang);
  ASSERT_EQ(check.deprecated.size(), 1u);
  EXPECT_NE(check.deprecated[0].find("--enable-dp-attention (sglang-serve 0.5.23) is deprecated"),
            std::string::npos)
      << check.deprecated[0];
  FlagTable llamacpp = Table("engines/flags/llamacpp.yaml");
  llamacpp.flags["spec_num_tokens"] = {"--draft-max", "{spec_num_tokens}"};
  check = CheckAgainstSaved(llamacpp);
  ASSERT_EQ(check.deprecated.size(), 1u);
  EXPECT_NE(check.deprecated[0].find("the argument has been removed"), std::string::npos)
      << check.deprecated[0];
  EXPECT_EQ(OptionTokens({"--chunked-prefill-size", "-1", "{tp}", "-np", "--x=1"}),
            (std::vector<std::string>{"--chunked-prefill-size", "-np", "--x"}));
}

}  // namespace
}  // namespace servesweep::engines
