// Conditions of a matrix (`where:` keeps runs, `exclude:` drops them): small expressions over a
// run's variables, e.g. "tp * pp <= gpus_per_node * nodes" or "engine == 'sglang' and tp > 4".
//
// Grammar: or / and / not; comparisons < <= > >= == !=; + - * / %; unary minus; parentheses;
// numbers, 'single' or "double" quoted strings, and variable names. Numbers compare with
// numbers and strings with strings (== and != only); a comparison or logic yields 1 or 0, and
// an expression holds when its value is a non-zero number.
//
// Thread-safety: a parsed Expression is immutable; Evaluate() may run on any thread.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "common/status.h"

namespace servesweep::matrix {

using ExpressionValue = std::variant<double, std::string>;
// A variable's value, or nullopt when there is no variable of that name.
using VariableLookup = std::function<std::optional<ExpressionValue>(const std::string& name)>;

class Expression {
 public:
  // Parses `text`; an error names the column (1-based) within `text`.
  static Status Parse(const std::string& text, std::unique_ptr<Expression>* out);
  ~Expression();

  // Whether the expression holds; an error for an unknown variable or mismatched types.
  Status Holds(const VariableLookup& lookup, bool* holds) const;

  struct Node;

 private:
  explicit Expression(std::unique_ptr<Node> root);
  std::unique_ptr<Node> root_;
};

}  // namespace servesweep::matrix
