// write_size_program: a post-order walk of the expression, one instruction per node visit.
#include "plan/size_program_writer.h"

#include "plan/size_program.h"
#include "support/error.h"

namespace kiln::plan {
namespace {

class SizeProgramWriter {
 public:
  explicit SizeProgramWriter(const std::map<std::string, int64_t>& variable_numbers) : numbers_(variable_numbers) {}

  // `depth` bounds the recursion as the length bounds the output: a node under more than
  // kMaxSizeProgramDepth others would not fit the evaluator's stack in general.
  void emit(const UOp& node, size_t depth = 0) {
    if (program_.size() / 2 >= kMaxSizeProgramLength || depth >= kMaxSizeProgramDepth)
      throw UserError(str_cat("unsupported: a size expression longer than ", kMaxSizeProgramLength, " instructions"));
    if (!node.dtype().is_int() && node.dtype() != dtypes::index)
      throw UserError(str_cat("unsupported: a ", node.dtype().name(), " value in a size expression"));
    switch (node.op()) {
      case Ops::CONST: {
        int128 value = node.const_int();
        if (value < INT64_MIN || value > INT64_MAX) throw UserError("unsupported: a size constant outside int64");
        instruction(SizeOp::kPush, static_cast<int64_t>(value));
        return;
      }
      case Ops::DEFINE_VAR: {
        auto found = numbers_.find(node.arg_variable().name);
        if (found == numbers_.end())
          throw UserError(str_cat("a size expression reads variable '", node.arg_variable().name, "', which the plan does not define"));
        instruction(SizeOp::kVariable, found->second);
        return;
      }
      case Ops::CAST: emit(*node.src(0), depth + 1); return;
      case Ops::NEG:
        instruction(SizeOp::kPush, 0);
        emit(*node.src(0), depth + 1);
        instruction(SizeOp::kSub, 0);
        return;
      default: break;
    }
    SizeOp op = binary_op(node.op());
    emit(*node.src(0), depth + 1);
    emit(*node.src(1), depth + 1);
    instruction(op, 0);
  }

  std::vector<int64_t> take() { return std::move(program_); }

 private:
  static SizeOp binary_op(Ops op) {
    switch (op) {
      case Ops::ADD: return SizeOp::kAdd;
      case Ops::SUB: return SizeOp::kSub;
      case Ops::MUL: return SizeOp::kMul;
      case Ops::IDIV: return SizeOp::kDiv;
      case Ops::MOD: return SizeOp::kMod;
      case Ops::MAX: return SizeOp::kMax;
      default: throw UserError(str_cat("unsupported: ", op_name(op), " in a size expression"));
    }
  }

  void instruction(SizeOp op, int64_t operand) {
    program_.push_back(static_cast<int64_t>(op));
    program_.push_back(operand);
  }

  const std::map<std::string, int64_t>& numbers_;
  std::vector<int64_t> program_;
};

}  // namespace

std::vector<int64_t> write_size_program(const UOpPtr& expression, const std::map<std::string, int64_t>& variable_numbers) {
  SizeProgramWriter writer(variable_numbers);
  writer.emit(*expression);
  return writer.take();
}

}  // namespace kiln::plan
