// Size programs: how a symbolic plan (docs/symbolic-shapes.md, decision 5) will store the sizes the
// runtime computes per run — a kernel's parallel extent, an output's dimensions, a buffer's bytes —
// as small postfix programs over the plan's variables. This half is libkiln's: checking a program
// read from an untrusted plan, and evaluating it with the run's variable values. The compiler's
// half (index expression → program) is size_program_writer.h.
//
// A program is a sequence of int64 pairs (opcode, operand). kPush pushes the operand, kVariable
// pushes the value of variable number `operand`; the others pop b then a and push `a OP b` (the
// operand must be 0). Division truncates toward zero and modulo takes the dividend's sign, as C and
// kiln's IR (IDIV, MOD; src/ir/ops.def) do, so a program computes exactly what its expression did.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kiln::plan {

enum class SizeOp : int64_t {
  kPush = 1,
  kVariable = 2,
  kAdd = 3,
  kSub = 4,
  kMul = 5,
  kDiv = 6,
  kMod = 7,
  kMin = 8,
  kMax = 9,
};

// A program longer than this (in instructions) is refused: sizes are short expressions, the longest
// a sum over many run-decided counts (a detector's concatenation of 90 classes' top-k: ~730).
constexpr size_t kMaxSizeProgramLength = 4096;
// A program that holds more values than this on its stack at once is refused: the evaluator's stack
// is that deep (on the caller's stack, 2 KiB), and sizes are evaluated left to right.
constexpr size_t kMaxSizeProgramDepth = 256;

// Why `program` (2 * n int64s) is not a valid size program over `variable_count` variables: an odd
// length, an unknown opcode, a variable out of range, a binary op with fewer than two values on the
// stack, more than kMaxSizeProgramDepth values on it, or not exactly one value left at the end. Empty when it is valid.
std::string check_size_program(std::span<const int64_t> program, size_t variable_count);

// The value of a checked program for these variable values; nothing when a step overflows int64 or
// divides by zero (a plan whose variables respect their ranges never does; a hostile one might).
std::optional<int64_t> evaluate_size_program(std::span<const int64_t> program, std::span<const int64_t> variables);

// The variable that a program is exactly (one kVariable instruction), or -1. An input dimension
// that is exactly a variable is where a run reads the variable's value.
int64_t size_program_variable(std::span<const int64_t> program);

// A checked program as infix text with its variables named by `names` (one per variable):
// "n", "2 * n", "(n + 1) // 2", "max(a, b)". For messages, `kiln inspect` and the C API.
std::string size_program_text(std::span<const int64_t> program, const std::vector<std::string>& names);

}  // namespace kiln::plan
