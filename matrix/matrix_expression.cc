#include "matrix/matrix_expression.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <vector>

namespace servesweep::matrix {

struct Expression::Node {
  enum class Kind { kNumber, kText, kVariable, kUnary, kBinary } kind = Kind::kNumber;
  double number = 0;
  std::string text;  // kText: the string; kVariable: its name; kUnary/kBinary: the operator
  size_t column = 0;
  std::unique_ptr<Node> left, right;
};

namespace {

using Node = Expression::Node;

class ExpressionParser {
 public:
  explicit ExpressionParser(const std::string& text) : text_(text) {}

  Status Parse(std::unique_ptr<Node>* out) {
    // Parsing, evaluation and destruction recurse over the tree: bound its size and depth so a
    // hostile matrix cannot overflow the stack.
    if (text_.size() > kMaxChars) {
      status_ = Status::InvalidArgument(fmt::format(
          "expected an expression of at most {} characters, found {}", kMaxChars, text_.size()));
      *out = std::make_unique<Node>();
      return status_;
    }
    *out = Or();
    Skip();
    if (status_.ok() && pos_ < text_.size()) {
      Fail(fmt::format("expected an operator or the end, found '{}'", text_.substr(pos_)));
    }
    return status_;
  }

 private:
  static constexpr size_t kMaxChars = 4096;
  static constexpr int kMaxNesting = 64;  // parentheses, `not` and unary minus

  // Counts one level of nesting while alive; past the limit the parse fails instead of
  // recursing further.
  struct Nest {
    explicit Nest(ExpressionParser& p) : parser(p) { ++parser.depth_; }
    ~Nest() { --parser.depth_; }
    bool too_deep() const {
      if (parser.depth_ <= kMaxNesting) return false;
      parser.Fail(
          fmt::format("expected at most {} nested parentheses, not or unary minus", kMaxNesting));
      return true;
    }
    ExpressionParser& parser;
  };

  void Fail(const std::string& what) {
    if (status_.ok())
      status_ = Status::InvalidArgument(fmt::format("column {}: {}", pos_ + 1, what));
  }
  void Skip() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  // Consumes `token` (a word must not run on into an identifier).
  bool Accept(const std::string& token) {
    Skip();
    if (text_.compare(pos_, token.size(), token) != 0) return false;
    const size_t end = pos_ + token.size();
    if (std::isalpha(static_cast<unsigned char>(token[0])) && end < text_.size() &&
        (std::isalnum(static_cast<unsigned char>(text_[end])) || text_[end] == '_')) {
      return false;
    }
    pos_ = end;
    return true;
  }
  std::unique_ptr<Node> Make(Node::Kind kind, std::string op, std::unique_ptr<Node> left,
                             std::unique_ptr<Node> right, size_t column) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->text = std::move(op);
    n->left = std::move(left);
    n->right = std::move(right);
    n->column = column;
    return n;
  }
  // A left-associative level over `ops`, each operand parsed by `next`.
  template <typename Next>
  std::unique_ptr<Node> Level(const std::vector<std::string>& ops, Next next) {
    auto left = (this->*next)();
    while (status_.ok()) {
      Skip();
      const size_t column = pos_;
      std::string matched;
      for (const auto& op : ops) {
        if (Accept(op)) {
          matched = op;
          break;
        }
      }
      if (matched.empty()) break;
      left = Make(Node::Kind::kBinary, matched, std::move(left), (this->*next)(), column);
    }
    return left;
  }
  std::unique_ptr<Node> Or() { return Level({"or"}, &ExpressionParser::And); }
  std::unique_ptr<Node> And() { return Level({"and"}, &ExpressionParser::Not); }
  std::unique_ptr<Node> Not() {
    Skip();
    const size_t column = pos_;
    if (Accept("not")) {
      Nest nest(*this);
      if (nest.too_deep()) return std::make_unique<Node>();
      return Make(Node::Kind::kUnary, "not", Not(), nullptr, column);
    }
    return Comparison();
  }
  std::unique_ptr<Node> Comparison() {
    // Two-character operators first, so "<=" is not read as "<".
    return Level({"<=", ">=", "==", "!=", "<", ">"}, &ExpressionParser::Sum);
  }
  std::unique_ptr<Node> Sum() { return Level({"+", "-"}, &ExpressionParser::Product); }
  std::unique_ptr<Node> Product() { return Level({"*", "/", "%"}, &ExpressionParser::Unary); }
  std::unique_ptr<Node> Unary() {
    Skip();
    const size_t column = pos_;
    if (Accept("-")) {
      Nest nest(*this);
      if (nest.too_deep()) return std::make_unique<Node>();
      return Make(Node::Kind::kUnary, "-", Unary(), nullptr, column);
    }
    return Atom();
  }
  std::unique_ptr<Node> Atom() {
    Skip();
    auto n = std::make_unique<Node>();
    n->column = pos_;
    if (pos_ >= text_.size()) {
      Fail("expected a number, a string, a variable or '(', found the end");
      return n;
    }
    const char c = text_[pos_];
    if (c == '(') {
      Nest nest(*this);
      if (nest.too_deep()) return n;
      ++pos_;
      n = Or();
      if (!Accept(")")) Fail("expected ')'");
      return n;
    }
    if (c == '\'' || c == '"') {
      const size_t close = text_.find(c, pos_ + 1);
      if (close == std::string::npos) {
        Fail(fmt::format("expected a closing {} for the string", c));
        return n;
      }
      n->kind = Node::Kind::kText;
      n->text = text_.substr(pos_ + 1, close - pos_ - 1);
      pos_ = close + 1;
      return n;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      size_t used = 0;
      try {
        n->number = std::stod(text_.substr(pos_), &used);
      } catch (const std::exception&) {
        Fail(fmt::format("expected a number, found '{}'", text_.substr(pos_)));
        return n;
      }
      pos_ += used;
      return n;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const size_t start = pos_;
      while (pos_ < text_.size() &&
             (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
        ++pos_;
      }
      n->kind = Node::Kind::kVariable;
      n->text = text_.substr(start, pos_ - start);
      return n;
    }
    Fail(fmt::format("expected a number, a string, a variable or '(', found '{}'", c));
    return n;
  }

  const std::string& text_;
  size_t pos_ = 0;
  int depth_ = 0;
  Status status_ = Status::Ok();
};

std::string TypeName(const ExpressionValue& v) {
  return std::holds_alternative<double>(v) ? "a number" : "a string";
}

Status Evaluate(const Node& n, const VariableLookup& lookup, ExpressionValue* out) {
  auto fail = [&](const std::string& what) {
    return Status::InvalidArgument(fmt::format("column {}: {}", n.column + 1, what));
  };
  switch (n.kind) {
    case Node::Kind::kNumber:
      *out = n.number;
      return Status::Ok();
    case Node::Kind::kText:
      *out = n.text;
      return Status::Ok();
    case Node::Kind::kVariable: {
      auto value = lookup(n.text);
      if (!value) return fail(fmt::format("unknown variable '{}'", n.text));
      *out = *value;
      return Status::Ok();
    }
    case Node::Kind::kUnary: {
      ExpressionValue v;
      if (Status s = Evaluate(*n.left, lookup, &v); !s.ok()) return s;
      if (!std::holds_alternative<double>(v)) {
        return fail(fmt::format("expected a number after '{}', found {}", n.text, TypeName(v)));
      }
      const double x = std::get<double>(v);
      *out = n.text == "-" ? -x : (x == 0 ? 1.0 : 0.0);
      return Status::Ok();
    }
    case Node::Kind::kBinary:
      break;
  }
  ExpressionValue a, b;
  if (Status s = Evaluate(*n.left, lookup, &a); !s.ok()) return s;
  if (Status s = Evaluate(*n.right, lookup, &b); !s.ok()) return s;
  const std::string& op = n.text;
  if (std::holds_alternative<std::string>(a) || std::holds_alternative<std::string>(b)) {
    if (a.index() != b.index() || (op != "==" && op != "!=")) {
      return fail(
          fmt::format("expected '{}' between two numbers, or ==/!= between two strings; "
                      "found {} and {}",
                      op, TypeName(a), TypeName(b)));
    }
    *out = ((std::get<std::string>(a) == std::get<std::string>(b)) == (op == "==")) ? 1.0 : 0.0;
    return Status::Ok();
  }
  const double x = std::get<double>(a), y = std::get<double>(b);
  double r = 0;
  if (op == "or")
    r = (x != 0 || y != 0);
  else if (op == "and")
    r = (x != 0 && y != 0);
  else if (op == "<")
    r = x < y;
  else if (op == "<=")
    r = x <= y;
  else if (op == ">")
    r = x > y;
  else if (op == ">=")
    r = x >= y;
  else if (op == "==")
    r = x == y;
  else if (op == "!=")
    r = x != y;
  else if (op == "+")
    r = x + y;
  else if (op == "-")
    r = x - y;
  else if (op == "*")
    r = x * y;
  else if (y == 0)
    return fail(fmt::format("division by zero in '{}'", op));
  else
    r = op == "/" ? x / y : std::fmod(x, y);
  *out = r;
  return Status::Ok();
}

}  // namespace

Expression::Expression(std::unique_ptr<Node> root) : root_(std::move(root)) {}
Expression::~Expression() = default;

Status Expression::Parse(const std::string& text, std::unique_ptr<Expression>* out) {
  std::unique_ptr<Node> root;
  ExpressionParser parser(text);
  if (Status s = parser.Parse(&root); !s.ok()) return s;
  out->reset(new Expression(std::move(root)));
  return Status::Ok();
}

Status Expression::Holds(const VariableLookup& lookup, bool* holds) const {
  ExpressionValue value;
  if (Status s = Evaluate(*root_, lookup, &value); !s.ok()) return s;
  if (!std::holds_alternative<double>(value)) {
    return Status::InvalidArgument(
        "expected a condition (a comparison or a number), found a string");
  }
  *holds = std::get<double>(value) != 0;
  return Status::Ok();
}

}  // namespace servesweep::matrix
