// Scalar values in LLVM IR with kiln's exact semantics (docs/kernel-ast.md, ops.def): the types
// that hold each dtype, constants, ALU ops and conversions, written so that no undefined behaviour
// reaches LLVM (division by zero, shifts past the width, out-of-range float → int) and so that no
// libm or compiler-rt call is needed (f16/bf16 rounding is done in registers).
// The LLVM renderer uses these for everything that is not control flow or memory.
#pragma once

#include <span>

#include <llvm/IR/IRBuilder.h>

#include "ir/uop.h"

namespace kiln {

// The type a value lives in between ops: i1 for bool, i64 for index, half/bfloat for f16/bf16.
llvm::Type* llvm_register_type(llvm::LLVMContext& context, DType dtype);
// The type of an element in memory: as above, except bool, which is one byte (0 or 1).
llvm::Type* llvm_memory_type(llvm::LLVMContext& context, DType dtype);
// Register value ↔ memory value (only bool differs: i1 ↔ i8; a loaded byte is true when non-zero).
llvm::Value* llvm_to_memory(llvm::IRBuilderBase& builder, llvm::Value* value, DType dtype);
llvm::Value* llvm_from_memory(llvm::IRBuilderBase& builder, llvm::Value* value, DType dtype);

// The value of a scalar CONST node.
llvm::Constant* llvm_constant(llvm::LLVMContext& context, const UOp& node);

// An ALU op (ops.def Unary/Binary/Ternary) on register values. `operand` is the dtype of the first
// source (the WHERE arms for WHERE), `shift_amount` the dtype of a shift's second source.
// `reassociate` marks the update of a reduction accumulator: float ADD/MUL may then be reordered, which
// lets LLVM vectorise the reduction. Throws InternalError for ops the renderer must not see (EXP2,
// LOG2, SIN before the transcendental pass; POW, THREEFRY, MULACC) and for ops on dtypes that lack
// them (FDIV on integers, SQRT on bool, …).
llvm::Value* llvm_alu(llvm::IRBuilderBase& builder, Ops op, DType operand, std::span<llvm::Value* const> sources,
                      DType shift_amount, bool reassociate);

// CAST: value conversion, rounding to nearest even, float → int truncating and saturating (NaN → 0),
// anything → bool as `!= 0`, bool → anything as 0 or 1.
llvm::Value* llvm_cast(llvm::IRBuilderBase& builder, llvm::Value* value, DType from, DType to);
// BITCAST: the same bytes read as another dtype of the same size.
llvm::Value* llvm_bitcast(llvm::IRBuilderBase& builder, llvm::Value* value, DType from, DType to);

}  // namespace kiln
