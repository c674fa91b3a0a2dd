// Fuzz target: the symbolic simplifier (src/passes/symbolic.*). The bytes are a small stack program
// that builds an integer expression over bounded variables; the expression is simplified, and both
// forms are evaluated (ir/evaluate.h) at every corner of the variables' box and at points the bytes
// choose. Where the original is defined, the simplified form must be defined and equal: any
// difference, or an internal error from the rewriter, aborts.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/build.h"
#include "ir/evaluate.h"
#include "ir/printer.h"
#include "passes/symbolic.h"

using namespace kiln;

namespace {

// Reads the fuzz bytes front to back; past the end every read is 0, so any input is a program.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return at_ >= size_; }
  uint8_t next() { return at_ < size_ ? data_[at_++] : 0; }
  // A value in [low, low + span).
  int64_t in(int64_t low, int64_t span) { return low + next() % span; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

struct Variable {
  std::string name;
  int64_t min, max;
  UOpPtr node;
};

// Small leaves, at most kMaxLeaves of them and at most kMaxOperations operations keep every
// intermediate inside int128, where the evaluator computes `index` exactly: each leaf is below 2^7
// in magnitude and each operation adds at most one bit beyond the product of its operands, so
// values stay below 2^(12*7 + 24) = 2^108.
constexpr int kMaxLeaves = 12;
constexpr int kMaxOperations = 24;
constexpr size_t kMaxStack = 8;

UOpPtr build_expression(ByteReader& bytes, const std::vector<Variable>& variables, DType dtype) {
  std::vector<UOpPtr> stack;
  int leaves = 0, operations = 0;
  auto pop = [&] {
    UOpPtr top = stack.back();
    stack.pop_back();
    return top;
  };
  while (!bytes.done() && operations < kMaxOperations) {
    uint8_t code = bytes.next();
    switch (code % 13) {
      case 0:
      case 1:  // a variable
        if (leaves < kMaxLeaves && stack.size() < kMaxStack) {
          stack.push_back(variables[bytes.next() % variables.size()].node);
          ++leaves;
        }
        continue;
      case 2:  // a constant in [-64, 63]
        if (leaves < kMaxLeaves && stack.size() < kMaxStack) {
          stack.push_back(const_int(dtype, bytes.in(-64, 128)));
          ++leaves;
        }
        continue;
      case 3:
        if (!stack.empty()) {
          stack.push_back(-pop());
          ++operations;
        }
        continue;
      default: break;
    }
    if (stack.size() < 2) continue;
    ++operations;
    UOpPtr b = pop();
    UOpPtr a = pop();
    switch (code % 13) {
      case 4: stack.push_back(a + b); break;
      case 5: stack.push_back(a - b); break;
      case 6: stack.push_back(a * b); break;
      case 7: stack.push_back(a / b); break;  // division by zero: undefined, skipped at evaluation
      case 8: stack.push_back(a % b); break;
      case 9: stack.push_back(maximum(a, b)); break;
      case 10: stack.push_back(minimum(a, b)); break;
      case 11: stack.push_back(where(lt(a, b), a, b * 2)); break;
      case 12: stack.push_back(where(ne(a, b), a + 1, b)); break;
    }
  }
  return stack.empty() ? nullptr : stack.back();
}

[[noreturn]] void mismatch(const UOpPtr& original, const UOpPtr& simplified,
                           const std::unordered_map<std::string, int128>& point, const char* what) {
  std::fprintf(stderr, "symbolic fuzz: %s\noriginal:   %s\nsimplified: %s\nat:", what, render_expr(original).c_str(),
               render_expr(simplified).c_str());
  for (const auto& [name, value] : point) std::fprintf(stderr, " %s=%s", name.c_str(), to_string(value).c_str());
  std::fprintf(stderr, "\n");
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteReader bytes(data, size);
  uint8_t header = bytes.next();
  // index is exact; the fixed-width types wrap, so fewer rules apply to them.
  static constexpr DType dtypes_to_try[] = {dtypes::index, dtypes::i32, dtypes::i64, dtypes::u32};
  DType dtype = dtypes_to_try[header % 4];
  bool is_unsigned = dtype == dtypes::u32;
  std::vector<Variable> variables(1 + (header / 4) % 3);
  for (size_t i = 0; i < variables.size(); ++i) {
    Variable& variable = variables[i];
    variable.name = std::string(1, static_cast<char>('a' + i));
    variable.min = is_unsigned ? bytes.in(0, 64) : bytes.in(-32, 64);
    variable.max = variable.min + bytes.in(0, 64);
    variable.node = kiln::variable(variable.name, variable.min, variable.max, dtype);
  }
  UOpPtr original = build_expression(bytes, variables, dtype);
  if (original == nullptr) return 0;
  UOpPtr simplified = simplify(original);

  // The corners of the box, then points picked by the bytes (again from the start: any input works).
  std::vector<std::unordered_map<std::string, int128>> points;
  for (unsigned corner = 0; corner < (1u << variables.size()); ++corner) {
    auto& point = points.emplace_back();
    for (size_t i = 0; i < variables.size(); ++i)
      point[variables[i].name] = (corner >> i) & 1 ? variables[i].max : variables[i].min;
  }
  ByteReader picks(data, size);
  for (int k = 0; k < 4; ++k) {
    auto& point = points.emplace_back();
    for (const Variable& variable : variables)
      point[variable.name] = variable.min + picks.next() % (variable.max - variable.min + 1);
  }
  for (const auto& point : points) {
    std::optional<ScalarValue> before = evaluate(original, point);
    if (!before) continue;  // undefined (a division by zero): the simplifier may do anything
    std::optional<ScalarValue> after = evaluate(simplified, point);
    if (!after) mismatch(original, simplified, point, "the simplified form is undefined where the original is not");
    if (after->integer != before->integer) mismatch(original, simplified, point, "the forms differ");
  }
  return 0;
}
