// Size programs, libkiln's half: check_size_program (once, at load) and evaluate_size_program (per run).
#include "plan/size_program.h"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

namespace kiln::plan {
namespace {

bool is_binary(int64_t opcode) {
  return opcode >= static_cast<int64_t>(SizeOp::kAdd) && opcode <= static_cast<int64_t>(SizeOp::kMax);
}

std::optional<int64_t> apply(SizeOp op, int64_t a, int64_t b) {
  int64_t result = 0;
  switch (op) {
    case SizeOp::kAdd: if (__builtin_add_overflow(a, b, &result)) return std::nullopt; return result;
    case SizeOp::kSub: if (__builtin_sub_overflow(a, b, &result)) return std::nullopt; return result;
    case SizeOp::kMul: if (__builtin_mul_overflow(a, b, &result)) return std::nullopt; return result;
    case SizeOp::kDiv:
    case SizeOp::kMod:
      if (b == 0 || (a == INT64_MIN && b == -1)) return std::nullopt;
      return op == SizeOp::kDiv ? a / b : a % b;  // C's truncation, as the IR's IDIV and MOD
    case SizeOp::kMin: return std::min(a, b);
    case SizeOp::kMax: return std::max(a, b);
    default: return std::nullopt;
  }
}

}  // namespace

std::string check_size_program(std::span<const int64_t> program, size_t variable_count) {
  if (program.size() % 2 != 0) return "a size program of odd length";
  size_t length = program.size() / 2;
  if (length == 0) return "an empty size program";
  if (length > kMaxSizeProgramLength)
    return "a size program of " + std::to_string(length) + " instructions (at most " +
           std::to_string(kMaxSizeProgramLength) + ")";
  size_t depth = 0;
  for (size_t i = 0; i < length; ++i) {
    int64_t opcode = program[2 * i], operand = program[2 * i + 1];
    std::string at = "size program instruction " + std::to_string(i) + ": ";
    if (opcode == static_cast<int64_t>(SizeOp::kPush) || opcode == static_cast<int64_t>(SizeOp::kVariable)) {
      if (opcode == static_cast<int64_t>(SizeOp::kVariable) && (operand < 0 || static_cast<uint64_t>(operand) >= variable_count))
        return at + "variable " + std::to_string(operand) + " of " + std::to_string(variable_count);
      if (++depth > kMaxSizeProgramDepth)
        return at + "more than " + std::to_string(kMaxSizeProgramDepth) + " values on the stack";
    } else if (is_binary(opcode)) {
      if (operand != 0) return at + "a binary op with a non-zero operand";
      if (depth < 2) return at + "a binary op with fewer than two values on the stack";
      --depth;
    } else {
      return at + "unknown opcode " + std::to_string(opcode);
    }
  }
  if (depth != 1) return "a size program that leaves " + std::to_string(depth) + " values, not one";
  return {};
}

std::optional<int64_t> evaluate_size_program(std::span<const int64_t> program, std::span<const int64_t> variables) {
  // Checked programs hold at most kMaxSizeProgramDepth values; an unchecked one is stopped there.
  std::array<int64_t, kMaxSizeProgramDepth> stack{};
  size_t depth = 0;
  for (size_t i = 0; i + 1 < program.size(); i += 2) {
    auto op = static_cast<SizeOp>(program[i]);
    int64_t operand = program[i + 1];
    if (op == SizeOp::kPush || op == SizeOp::kVariable) {
      if (depth == stack.size()) return std::nullopt;
      if (op == SizeOp::kVariable && (operand < 0 || static_cast<uint64_t>(operand) >= variables.size()))
        return std::nullopt;
      stack[depth++] = op == SizeOp::kPush ? operand : variables[static_cast<size_t>(operand)];
      continue;
    }
    if (depth < 2) return std::nullopt;
    std::optional<int64_t> value = apply(op, stack[depth - 2], stack[depth - 1]);
    if (!value) return std::nullopt;
    stack[depth - 2] = *value;
    --depth;
  }
  if (depth != 1) return std::nullopt;
  return stack[0];
}

int64_t size_program_variable(std::span<const int64_t> program) {
  if (program.size() != 2 || program[0] != static_cast<int64_t>(SizeOp::kVariable)) return -1;
  return program[1];
}

std::string size_program_text(std::span<const int64_t> program, const std::vector<std::string>& names) {
  // Each stack entry is a text and its outermost operator (kPush for an atom or a call), so that
  // parentheses appear only where the order of evaluation needs them.
  auto precedence = [](SizeOp op) {
    return op == SizeOp::kAdd || op == SizeOp::kSub ? 1 : op == SizeOp::kMul || op == SizeOp::kDiv || op == SizeOp::kMod ? 2 : 3;
  };
  std::vector<std::pair<std::string, SizeOp>> stack;
  for (size_t i = 0; i + 1 < program.size(); i += 2) {
    auto op = static_cast<SizeOp>(program[i]);
    int64_t operand = program[i + 1];
    if (op == SizeOp::kPush || op == SizeOp::kVariable) {
      bool named = op == SizeOp::kVariable && operand >= 0 && static_cast<uint64_t>(operand) < names.size();
      std::string text = op == SizeOp::kPush ? std::to_string(operand)
                         : named             ? names[static_cast<size_t>(operand)]
                                             : "v" + std::to_string(operand);
      stack.emplace_back(std::move(text), SizeOp::kPush);
      continue;
    }
    if (stack.size() < 2) return "?";
    auto right = std::move(stack.back());
    stack.pop_back();
    auto left = std::move(stack.back());
    stack.pop_back();
    if (op == SizeOp::kMin || op == SizeOp::kMax) {
      stack.emplace_back(std::string(op == SizeOp::kMin ? "min(" : "max(") + left.first + ", " + right.first + ")",
                         SizeOp::kPush);
      continue;
    }
    const char* symbol = op == SizeOp::kAdd ? " + " : op == SizeOp::kSub ? " - " : op == SizeOp::kMul ? " * "
                         : op == SizeOp::kDiv ? " // " : " % ";
    // The right operand needs parentheses at equal precedence too, except where regrouping keeps
    // the value: a + (b - c) is a + b - c and a * (b * c) is a * b * c, but a - (b + c),
    // a * (b // c) and a // (b * c) are not.
    bool regroups = op == SizeOp::kAdd || (op == SizeOp::kMul && right.second == SizeOp::kMul);
    int p = precedence(op);
    std::string a = precedence(left.second) < p ? "(" + left.first + ")" : left.first;
    std::string b = precedence(right.second) < p || (precedence(right.second) == p && !regroups)
                        ? "(" + right.first + ")"
                        : right.first;
    stack.emplace_back(a + symbol + b, op);
  }
  return stack.size() == 1 ? stack[0].first : "?";
}

}  // namespace kiln::plan
