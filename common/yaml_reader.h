// The one YAML reader of servesweep: matrices, hardware/model/engine profiles and engine flag
// tables are all read through it, so every input error reads the same way:
//   origin:line:column: expected <what>, found <what was there>
// and a misspelt key is "unknown key 'X' in SECTION (did you mean 'Y'?); expected one of: ...".
//
// YamlReader holds one document's origin (a file path, or an embedded file's name) and the first
// error met; its typed getters record an error at the node's position and return a fallback, so
// a reader runs to the end and reports the first problem. YamlMap reads one mapping: each Get()
// registers the key it asks for, and Finish() rejects the first key of the mapping nobody asked
// for, suggesting the closest registered one. There is no list of allowed keys kept beside the
// code that reads them: the reading code is the list.
//
// Thread-safety: a reader and its maps belong to one thread; separate readers are independent.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace servesweep {

// How a YAML node reads in an error's "found ..." part: 'text', a list, a mapping, nothing.
std::string DescribeYamlNode(const YAML::Node& node);

class YamlReader {
 public:
  explicit YamlReader(std::string origin) : origin_(std::move(origin)) {}

  // Parses a whole document; false (and an error with the syntax error's position) when the text
  // is not YAML.
  bool Parse(std::string_view text, YAML::Node* root);

  const std::string& origin() const { return origin_; }
  bool ok() const { return status_.ok(); }
  bool failed() const { return !status_.ok(); }
  // The first error (invalid argument), or Ok.
  const Status& status() const { return status_; }

  // Records "origin:line:column: what" at `at` (or "origin: what" for a node without a position)
  // unless an error is recorded already.
  void Fail(const YAML::Node& at, const std::string& what);

  // Typed values. Each records an error naming `key` and what was found when `node` does not fit,
  // and then returns the fallback shown.
  uint32_t Uint(const YAML::Node& node, const std::string& key, uint32_t min_value,
                uint32_t max_value = 1'000'000'000);                       // fallback min_value
  int Int(const YAML::Node& node, const std::string& key, int min_value);  // fallback min_value
  double Number(const YAML::Node& node, const std::string& key, double min_value = 0);  // 0
  double Fraction(const YAML::Node& node, const std::string& key);   // in (0, 1]; fallback 1
  bool Bool(const YAML::Node& node, const std::string& key);         // fallback false
  std::string Text(const YAML::Node& node, const std::string& key);  // a scalar; fallback ""
  // A list of scalars (a one-scalar list may be written as the scalar when `allow_scalar`).
  std::vector<std::string> TextList(const YAML::Node& node, const std::string& key,
                                    bool allow_scalar = false);
  // One of `choices`; fallback "" (with the choices in the error).
  std::string Choice(const YAML::Node& node, const std::string& key,
                     const std::vector<std::string>& choices);

 private:
  friend class YamlMap;
  // An unknown key explains the errors it causes (a required key "missing" in its mapping), so
  // it replaces an error recorded since `since`, the mapping's start.
  void FailUnknownKey(const YAML::Node& at, const std::string& what, uint64_t since);
  uint64_t Now() { return ++clock_; }

  std::string origin_;
  Status status_;
  uint64_t clock_ = 0;      // counts mappings opened and errors, to order them
  uint64_t failed_at_ = 0;  // clock_ when status_ was recorded
};

class YamlMap {
 public:
  // `section` names the mapping in messages ("the matrix", "layout", "engine_config.price").
  // Records an error when `map` is not a mapping (Get() then finds nothing).
  YamlMap(YamlReader& reader, const YAML::Node& map, std::string section);
  // A mapping of one entry (an axis value applied as `key: value`), positioned at the key.
  YamlMap(YamlReader& reader, const YAML::Node& key, const YAML::Node& value, std::string section);

  YamlReader& reader() { return reader_; }
  const std::string& section() const { return section_; }
  bool is_map() const { return is_map_; }

  // The value under `key` (a null node when absent); registers the key as known.
  YAML::Node Get(const std::string& key);
  // Get(), with an error "expected 'key' in SECTION, found none" when absent.
  YAML::Node Required(const std::string& key);
  // The nested mapping under `key` (absent: an empty one, or an error when `required`), named
  // `name` in messages (default "SECTION.key").
  YamlMap Section(const std::string& key, bool required = false, std::string name = "");

  // Typed reads into *out, left as it is when the key is absent (an error when kRequired) or the
  // value does not fit (an error naming the key, the bound and what was found).
  enum Presence { kOptional, kRequired };
  void ReadNumber(const std::string& key, double* out, double min_value = 0,
                  Presence presence = kOptional);
  void ReadInt(const std::string& key, int* out, int min_value, Presence presence = kOptional);
  void ReadFraction(const std::string& key, double* out);  // in (0, 1]
  void ReadBool(const std::string& key, bool* out);
  void ReadText(const std::string& key, std::string* out,
                Presence presence = kOptional);  // non-empty

  // Rejects the first key nobody asked for (with a did-you-mean). Call after every Get().
  void Finish();

  // The keys and values, in file order (for mappings whose keys are data, e.g. env vars).
  std::vector<std::pair<YAML::Node, YAML::Node>> Entries() const;

 private:
  YamlReader& reader_;
  std::vector<std::pair<YAML::Node, YAML::Node>> entries_;
  YAML::Node node_;
  std::string section_;
  bool is_map_ = false;
  uint64_t started_at_ = 0;
  std::set<std::string> known_;
  std::vector<std::string> known_in_order_;  // for "expected one of" in reading order
};

// A whole document read as one top-level mapping: the opening every table and profile reader
// shares. When the text is not YAML or not a mapping, status() says where and root() finds
// nothing.
class YamlDocument {
 public:
  // `what` names the top-level mapping in messages ("the engine profile").
  YamlDocument(std::string origin, std::string_view text, std::string what)
      : reader_(std::move(origin)), root_(reader_, Parsed(reader_, text), std::move(what)) {}
  YamlDocument(const YamlDocument&) = delete;
  YamlDocument& operator=(const YamlDocument&) = delete;

  YamlReader& reader() { return reader_; }
  YamlMap& root() { return root_; }
  bool ok() const { return reader_.ok(); }
  const Status& status() const { return reader_.status(); }

 private:
  static YAML::Node Parsed(YamlReader& reader, std::string_view text) {
    YAML::Node root;
    reader.Parse(text, &root);
    return root;
  }
  YamlReader reader_;  // declared before root_, which refers to it
  YamlMap root_;
};

}  // namespace servesweep
