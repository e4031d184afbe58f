// A flag table against what its engine's own parser accepts: the option strings read from the
// installed engine (engine_check.py --options, saved under tests/data/engine-facts/) or from a
// program's --help (llama-server). A flag the table uses and the parser lacks fails; a flag the
// parser accepts but hides (an alias left out of its help), suppresses or marks deprecated is
// reported, so the table moves to the visible spelling.
//
// Thread-safety: pure functions over values.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engines/flag_table.h"

namespace servesweep::engines {

struct ParserOptions {
  std::string parser, version;                    // "vllm-serve", "0.33.0"
  std::set<std::string> listed;                   // option strings in the parser's help
  std::map<std::string, std::string> hidden;      // accepted but not listed -> what it aliases
  std::map<std::string, std::string> deprecated;  // option -> why (the parser's own marker)
};

// engine_check.py --options output.
Status ParseParserOptions(std::string_view json, const std::string& where, ParserOptions* out);
// A --help text: every -x / --xyz it lists (llama.cpp's server prints no machine-readable form).
ParserOptions OptionsFromHelp(const std::string& help, const std::string& parser,
                              const std::string& version);

// The option strings of an argv pattern ("--port", "-np"; not values such as "-1" or
// "{tp}").
std::vector<std::string> OptionTokens(const Argv& pattern);

struct TableCheck {
  std::vector<std::string> missing;     // fails: "flags.tp: --tensor-paralel-size"
  std::vector<std::string> hidden;      // reported
  std::vector<std::string> deprecated;  // reported
  bool ok() const { return missing.empty(); }
};

// The table's program and flags against `engine`, its router sections against `router`
// (nullptr: not checked).
TableCheck CrossCheckFlagTable(const FlagTable& table, const ParserOptions& engine,
                               const ParserOptions* router);

}  // namespace servesweep::engines
