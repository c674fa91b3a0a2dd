// Size programs, libkiln's half: check_size_program (once, at load) and evaluate_size_program (per run).
#include "plan/size_program.h"

#include <algorithm>
#include <array>

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
    if (opcode == static_cast<int64_t>(SizeOp::kPush)) {
      ++depth;
    } else if (opcode == static_cast<int64_t>(SizeOp::kVariable)) {
      if (operand < 0 || static_cast<uint64_t>(operand) >= variable_count)
        return at + "variable " + std::to_string(operand) + " of " + std::to_string(variable_count);
      ++depth;
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
  // Checked programs push at most one value per instruction.
  std::array<int64_t, kMaxSizeProgramLength> stack{};
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

}  // namespace kiln::plan
