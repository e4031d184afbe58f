#include "engines/flag_table_check.h"

#include <fmt/format.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <sstream>

namespace servesweep::engines {
namespace {

bool IsOption(const std::string& token) {
  if (token.size() < 2 || token[0] != '-') return false;
  const size_t start = token[1] == '-' ? 2 : 1;
  return token.size() > start && std::isalpha(static_cast<unsigned char>(token[start]));
}

void CheckPattern(const std::string& name, const Argv& pattern, const ParserOptions& parser,
                  TableCheck* out) {
  for (const auto& option : OptionTokens(pattern)) {
    const std::string where =
        fmt::format("{}: {} ({} {})", name, option, parser.parser, parser.version);
    if (auto it = parser.deprecated.find(option); it != parser.deprecated.end()) {
      out->deprecated.push_back(fmt::format("{} is deprecated: {}", where, it->second));
    }
    if (parser.listed.count(option)) continue;
    if (auto it = parser.hidden.find(option); it != parser.hidden.end()) {
      out->hidden.push_back(fmt::format("{} is a hidden alias of {}", where, it->second));
      continue;
    }
    out->missing.push_back(fmt::format("{} is not an option of {} {}", name + ": " + option,
                                       parser.parser, parser.version));
  }
}

}  // namespace

Status ParseParserOptions(std::string_view json, const std::string& where, ParserOptions* out) {
  const nlohmann::json root = nlohmann::json::parse(json, nullptr, false);
  if (root.is_discarded() || !root.contains("options") || !root["options"].is_array()) {
    return Status::InvalidArgument(fmt::format(
        "{}: expected the JSON of engine_check.py --options, found something else", where));
  }
  ParserOptions p;
  p.parser = root.value("parser", "");
  p.version = root.value("version", "");
  for (const auto& option : root["options"]) {
    std::string listed;
    for (const auto& s : option["option_strings"]) {
      const std::string text = s.get<std::string>();
      if (option.value("suppressed", false)) {
        p.hidden[text] = "(hidden from help)";
      } else {
        p.listed.insert(text);
      }
      listed += (listed.empty() ? "" : "/") + text;
    }
    for (const auto& s : option["hidden_aliases"]) p.hidden[s.get<std::string>()] = listed;
    if (!option["deprecated"].empty()) {
      std::string why;
      for (const auto& w : option["deprecated"]) {
        why += (why.empty() ? "" : "; ") + w.get<std::string>();
      }
      for (const auto& s : option["option_strings"]) p.deprecated[s.get<std::string>()] = why;
      for (const auto& s : option["hidden_aliases"]) p.deprecated[s.get<std::string>()] = why;
    }
  }
  *out = std::move(p);
  return Status::Ok();
}

ParserOptions OptionsFromHelp(const std::string& help, const std::string& parser,
                              const std::string& version) {
  ParserOptions p;
  p.parser = parser;
  p.version = version;
  // An entry starts with its option strings at the line's start ("-np,   --parallel N"); what
  // follows on its lines describes it ("the argument has been removed. use ...").
  std::vector<std::string> entry;
  std::string text;
  auto finish = [&] {
    const bool gone = text.find("has been removed") != std::string::npos ||
                      text.find("deprecated") != std::string::npos;
    for (const auto& o : entry) {
      p.listed.insert(o);
      if (gone) p.deprecated[o] = text.substr(0, 160);
    }
    entry.clear();
    text.clear();
  };
  std::istringstream lines(help);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '-') {
      text += " " + line;
      continue;
    }
    finish();
    std::istringstream tokens(line);
    for (std::string token; tokens >> token;) {
      if (!token.empty() && token.back() == ',') token.pop_back();
      if (!IsOption(token)) break;
      entry.push_back(token);
    }
    text = line;
  }
  finish();
  return p;
}

std::vector<std::string> OptionTokens(const Argv& pattern) {
  std::vector<std::string> out;
  for (const auto& token : pattern) {
    const std::string flag = token.substr(0, token.find('='));
    if (IsOption(flag)) out.push_back(flag);
  }
  return out;
}

TableCheck CrossCheckFlagTable(const FlagTable& table, const ParserOptions& engine,
                               const ParserOptions* router) {
  TableCheck out;
  CheckPattern("program", table.program, engine, &out);
  for (const auto& [key, pattern] : table.flags)
    CheckPattern("flags." + key, pattern, engine, &out);
  if (router != nullptr && !table.router_program.empty()) {
    CheckPattern("router.program", table.router_program, *router, &out);
    CheckPattern("router.kv_connector", table.router_kv_connector, *router, &out);
    CheckPattern("router.prefill", table.router_prefill, *router, &out);
    CheckPattern("router.prefill_bootstrap", table.router_prefill_bootstrap, *router, &out);
    CheckPattern("router.decode", table.router_decode, *router, &out);
  }
  return out;
}

}  // namespace servesweep::engines
