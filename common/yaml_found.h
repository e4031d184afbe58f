// How a YAML node reads in an error's "found ..." part: 'text', a list, a mapping, nothing.
//
// Thread-safety: pure function.
#pragma once

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <string>

namespace servesweep {

inline std::string DescribeYamlNode(const YAML::Node& node) {
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
      return "an undefined node";
  }
}

}  // namespace servesweep
