// Printers for the IR; see printer.h.
#include "ir/printer.h"

#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>
#include <unordered_map>

namespace kiln {

namespace {
std::string render_double(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  std::ostringstream out;
  out << std::setprecision(std::numeric_limits<double>::max_digits10) << value;
  std::string text = out.str();
  // Mark floats so that "1.0" and "1" read differently.
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  return text;
}
}  // namespace

std::string render_arg(const Arg& arg) {
  return std::visit(
      [](const auto& value) -> std::string {
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, std::monostate>) return "";
        else if constexpr (std::is_same_v<T, bool>) return value ? "true" : "false";
        else if constexpr (std::is_same_v<T, int64_t>) return std::to_string(value);
        else if constexpr (std::is_same_v<T, double>) return render_double(value);
        else if constexpr (std::is_same_v<T, std::string>) return "\"" + value + "\"";
        else if constexpr (std::is_same_v<T, Ops>) return std::string(op_name(value));
        else if constexpr (std::is_same_v<T, VariableSpec>)
          return value.name + ":" + std::to_string(value.min) + ".." + std::to_string(value.max);
        else {
          std::string text = "[";
          for (size_t i = 0; i < value.size(); ++i) text += (i ? ", " : "") + std::to_string(value[i]);
          return text + "]";
        }
      },
      arg);
}

std::string print_graph(const UOpPtr& root) {
  std::unordered_map<const UOp*, size_t> ids;
  std::ostringstream out;
  for (const UOp* node : toposort(root)) {
    size_t id = ids.size();
    ids[node] = id;
    out << "%" << id << " = " << op_name(node->op()) << " " << node->dtype().name();
    if (node->src_count() != 0) {
      out << " (";
      for (size_t i = 0; i < node->src_count(); ++i) out << (i ? ", %" : "%") << ids.at(node->src(i).get());
      out << ")";
    }
    if (!std::holds_alternative<std::monostate>(node->arg())) out << " {" << render_arg(node->arg()) << "}";
    out << "\n";
  }
  return out.str();
}

namespace {

// Binding strength of an infix form; higher binds tighter.
int precedence(Ops op) {
  switch (op) {
    case Ops::WHERE: return 1;
    case Ops::OR: return 2;
    case Ops::XOR: return 3;
    case Ops::AND: return 4;
    case Ops::CMPEQ: case Ops::CMPNE: return 5;
    case Ops::CMPLT: return 6;
    case Ops::SHL: case Ops::SHR: return 7;
    case Ops::ADD: case Ops::SUB: return 8;
    case Ops::MUL: case Ops::IDIV: case Ops::FDIV: case Ops::MOD: return 9;
    default: return 10;  // atoms, calls and unary forms
  }
}

const char* infix_symbol(Ops op) {
  switch (op) {
    case Ops::ADD: return "+";
    case Ops::SUB: return "-";
    case Ops::MUL: return "*";
    case Ops::IDIV: case Ops::FDIV: return "/";
    case Ops::MOD: return "%";
    case Ops::CMPLT: return "<";
    case Ops::CMPNE: return "!=";
    case Ops::CMPEQ: return "==";
    case Ops::AND: return "&";
    case Ops::OR: return "|";
    case Ops::XOR: return "^";
    case Ops::SHL: return "<<";
    case Ops::SHR: return ">>";
    default: return nullptr;
  }
}

// Expressions nest this deep at most before the rest is elided: render_expr also runs inside error
// messages, where a pathological graph must not overflow the stack.
constexpr int max_render_depth = 200;

std::string render(const UOp& node, int depth);

// Renders a source, parenthesised when it binds more loosely than its parent requires.
std::string operand(const UOp& node, int min_precedence, int depth) {
  std::string text = render(node, depth + 1);
  return precedence(node.op()) < min_precedence ? "(" + text + ")" : text;
}

std::string render(const UOp& node, int depth) {
  if (depth > max_render_depth) return "…";
  Ops op = node.op();
  if (op == Ops::CONST) return render_arg(node.arg());
  if (op == Ops::DEFINE_VAR) return node.arg_variable().name;
  if (op == Ops::RANGE) return "r" + std::to_string(node.arg_int());
  if (op == Ops::SPECIAL) return std::get<std::string>(node.arg());
  if (const char* symbol = infix_symbol(op); symbol != nullptr && node.src_count() == 2) {
    int p = precedence(op);
    // Left-associative: the left operand may sit at the same level, the right one may not.
    std::string right = operand(*node.src(1), p + 1, depth);
    // "a--3" would read as a decrement: a negative operand after a minus gets parentheses.
    if (op == Ops::SUB && right.starts_with('-')) right = "(" + right + ")";
    return operand(*node.src(0), p, depth) + symbol + right;
  }
  if (op == Ops::NEG) {
    std::string inner = operand(*node.src(0), 10, depth);
    return inner.starts_with('-') ? "-(" + inner + ")" : "-" + inner;
  }
  if (op == Ops::NOT) return "!" + operand(*node.src(0), 10, depth);
  if (op == Ops::WHERE)
    return operand(*node.src(0), 2, depth) + " ? " + operand(*node.src(1), 2, depth) + " : " + operand(*node.src(2), 1, depth);
  if (op == Ops::CAST) return "(" + node.dtype().name() + ")" + operand(*node.src(0), 10, depth);
  std::string name(op_name(op));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string text = name + "(";
  for (size_t i = 0; i < node.src_count(); ++i) text += (i ? ", " : "") + render(*node.src(i), depth + 1);
  if (!std::holds_alternative<std::monostate>(node.arg()))
    text += (node.src_count() ? ", " : "") + render_arg(node.arg());
  return text + ")";
}

}  // namespace

std::string render_expr(const UOpPtr& node) { return node ? render(*node, 0) : "<null>"; }

}  // namespace kiln
