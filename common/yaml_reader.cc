#include "common/yaml_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/unknown_key.h"

namespace servesweep {

std::string DescribeYamlNode(const YAML::Node& node) {
  if (!node.IsDefined()) return "nothing";
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "nothing";
    case YAML::NodeType::Scalar:
      return fmt::format("'{}'", node.Scalar());
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    default:
      return "nothing";
  }
}

bool YamlReader::Parse(std::string_view text, YAML::Node* root) {
  try {
    *root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    if (ok()) {
      status_ = Status::InvalidArgument(
          fmt::format("{}:{}:{}: expected valid YAML, found a syntax error: {}", origin_,
                      e.mark.line + 1, e.mark.column + 1, e.msg));
      failed_at_ = Now();
    }
    return false;
  }
  return true;
}

void YamlReader::Fail(const YAML::Node& at, const std::string& what) {
  if (failed()) return;
  const YAML::Mark mark = at.IsDefined() ? at.Mark() : YAML::Mark::null_mark();
  status_ = Status::InvalidArgument(
      mark.line < 0 ? fmt::format("{}: {}", origin_, what)
                    : fmt::format("{}:{}:{}: {}", origin_, mark.line + 1, mark.column + 1, what));
  failed_at_ = Now();
}

void YamlReader::FailUnknownKey(const YAML::Node& at, const std::string& what, uint64_t since) {
  if (failed() && failed_at_ < since) return;  // an earlier, unrelated error stands
  status_ = Status::Ok();
  Fail(at, what);
}

uint32_t YamlReader::Uint(const YAML::Node& node, const std::string& key, uint32_t min_value,
                          uint32_t max_value) {
  int64_t value = 0;
  if (!node.IsScalar() || !YAML::convert<int64_t>::decode(node, value)) {
    Fail(node,
         fmt::format("expected '{}' to be an integer, found {}", key, DescribeYamlNode(node)));
    return min_value;
  }
  if (value < min_value) {
    Fail(node,
         fmt::format("expected '{}' to be an integer >= {}, found {}", key, min_value, value));
    return min_value;
  }
  if (value > max_value) {
    Fail(node,
         fmt::format("expected '{}' from {} to {}, found {}", key, min_value, max_value, value));
    return min_value;
  }
  return static_cast<uint32_t>(value);
}

int YamlReader::Int(const YAML::Node& node, const std::string& key, int min_value) {
  int64_t value = 0;
  if (!node.IsScalar() || !YAML::convert<int64_t>::decode(node, value) || value < min_value ||
      value > 100'000'000) {
    Fail(node, fmt::format("expected '{}' to be an integer >= {}, found {}", key, min_value,
                           DescribeYamlNode(node)));
    return min_value;
  }
  return static_cast<int>(value);
}

double YamlReader::Number(const YAML::Node& node, const std::string& key, double min_value) {
  double value = 0;
  if (!node.IsScalar() || !YAML::convert<double>::decode(node, value) || !std::isfinite(value) ||
      value < min_value) {
    Fail(node, fmt::format("expected '{}' to be a number >= {}, found {}", key, min_value,
                           DescribeYamlNode(node)));
    return 0;
  }
  return value;
}

double YamlReader::Fraction(const YAML::Node& node, const std::string& key) {
  double value = 0;
  if (!node.IsScalar() || !YAML::convert<double>::decode(node, value) || !(value > 0) ||
      value > 1) {
    Fail(node, fmt::format("expected '{}' to be a fraction in (0, 1], found {}", key,
                           DescribeYamlNode(node)));
    return 1;
  }
  return value;
}

bool YamlReader::Bool(const YAML::Node& node, const std::string& key) {
  bool value = false;
  if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value)) {
    Fail(node,
         fmt::format("expected '{}' to be true or false, found {}", key, DescribeYamlNode(node)));
    return false;
  }
  return value;
}

std::string YamlReader::Text(const YAML::Node& node, const std::string& key) {
  if (!node.IsScalar()) {
    Fail(node, fmt::format("expected '{}' to be a string, found {}", key, DescribeYamlNode(node)));
    return "";
  }
  return node.Scalar();
}

std::vector<std::string> YamlReader::TextList(const YAML::Node& node, const std::string& key,
                                              bool allow_scalar) {
  std::vector<std::string> out;
  if (allow_scalar && node.IsScalar()) return {node.Scalar()};
  if (!node.IsSequence()) {
    Fail(node, fmt::format("expected '{}' to be a list of strings, found {}", key,
                           DescribeYamlNode(node)));
    return out;
  }
  for (const auto& item : node) {
    if (!item.IsScalar()) {
      Fail(item, fmt::format("expected '{}' to hold strings only, found {}", key,
                             DescribeYamlNode(item)));
      return {};
    }
    out.push_back(item.Scalar());
  }
  return out;
}

std::string YamlReader::Choice(const YAML::Node& node, const std::string& key,
                               const std::vector<std::string>& choices) {
  const std::string value = Text(node, key);
  if (failed()) return "";
  if (std::find(choices.begin(), choices.end(), value) != choices.end()) return value;
  std::string expected;
  for (size_t i = 0; i < choices.size(); ++i) {
    expected += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  }
  Fail(node, fmt::format("expected '{}' to be {}, found '{}'", key, expected, value));
  return "";
}

YamlMap::YamlMap(YamlReader& reader, const YAML::Node& map, std::string section)
    : reader_(reader), node_(map), section_(std::move(section)), started_at_(reader.Now()) {
  if (map.IsMap()) {
    is_map_ = true;
    for (const auto& entry : map) {
      // YAML keys are unique (YAML 1.2, 3.2.1.1); yaml-cpp keeps both, so one would be ignored.
      for (const auto& [key, value] : entries_) {
        if (key.IsScalar() && entry.first.IsScalar() && key.Scalar() == entry.first.Scalar()) {
          reader_.Fail(entry.first, fmt::format("expected each key once in {}, found '{}' again "
                                                "(first at line {})",
                                                section_, key.Scalar(), key.Mark().line + 1));
        }
      }
      entries_.emplace_back(entry.first, entry.second);
    }
  } else if (map.IsDefined() && !map.IsNull()) {
    reader_.Fail(
        map, fmt::format("expected {} as a mapping, found {}", section_, DescribeYamlNode(map)));
  }
}

YamlMap::YamlMap(YamlReader& reader, const YAML::Node& key, const YAML::Node& value,
                 std::string section)
    : reader_(reader), node_(key), section_(std::move(section)), started_at_(reader.Now()) {
  is_map_ = true;
  entries_.emplace_back(key, value);
}

YAML::Node YamlMap::Get(const std::string& key) {
  if (known_.insert(key).second) known_in_order_.push_back(key);
  for (const auto& [k, v] : entries_) {
    if (k.IsScalar() && k.Scalar() == key) return v;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

YAML::Node YamlMap::Required(const std::string& key) {
  YAML::Node value = Get(key);
  if (!value.IsDefined() || value.IsNull()) {
    reader_.Fail(node_, fmt::format("expected '{}' in {}, found none", key, section_));
  }
  return value;
}

YamlMap YamlMap::Section(const std::string& key, bool required, std::string name) {
  YAML::Node value = required ? Required(key) : Get(key);
  return YamlMap(reader_, value, name.empty() ? section_ + "." + key : std::move(name));
}

namespace {
bool Absent(const YAML::Node& node) { return !node.IsDefined() || node.IsNull(); }
}  // namespace

void YamlMap::ReadNumber(const std::string& key, double* out, double min_value, Presence presence) {
  const YAML::Node node = presence == kRequired ? Required(key) : Get(key);
  if (Absent(node)) return;
  const double value = reader_.Number(node, key, min_value);
  if (reader_.ok()) *out = value;
}

void YamlMap::ReadInt(const std::string& key, int* out, int min_value, Presence presence) {
  const YAML::Node node = presence == kRequired ? Required(key) : Get(key);
  if (Absent(node)) return;
  const int value = reader_.Int(node, key, min_value);
  if (reader_.ok()) *out = value;
}

void YamlMap::ReadFraction(const std::string& key, double* out) {
  const YAML::Node node = Get(key);
  if (Absent(node)) return;
  const double value = reader_.Fraction(node, key);
  if (reader_.ok()) *out = value;
}

void YamlMap::ReadBool(const std::string& key, bool* out) {
  const YAML::Node node = Get(key);
  if (Absent(node)) return;
  const bool value = reader_.Bool(node, key);
  if (reader_.ok()) *out = value;
}

void YamlMap::ReadText(const std::string& key, std::string* out, Presence presence) {
  const YAML::Node node = presence == kRequired ? Required(key) : Get(key);
  if (Absent(node)) return;
  if (!node.IsScalar() || node.Scalar().empty()) {
    reader_.Fail(node, fmt::format("expected '{}' to be a non-empty string, found {}", key,
                                   DescribeYamlNode(node)));
    return;
  }
  *out = node.Scalar();
}

void YamlMap::Finish() {
  for (const auto& [k, v] : entries_) {
    const std::string key = k.IsScalar() ? k.Scalar() : DescribeYamlNode(k);
    if (known_.count(key)) continue;
    reader_.FailUnknownKey(k, UnknownKeyMessage(key, section_, known_in_order_), started_at_);
    return;
  }
}

std::vector<std::pair<YAML::Node, YAML::Node>> YamlMap::Entries() const { return entries_; }

}  // namespace servesweep
