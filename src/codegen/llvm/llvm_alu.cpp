// Scalar ops in LLVM IR with kiln's semantics; see llvm_alu.h.
//
// Narrow floats: f16 and bf16 are computed in f32 and rounded back after every op. That equals
// rounding the exact result once, because f32 carries at least 2p+2 bits for both (p = 11 and 8),
// the classic condition under which double rounding of +, -, *, / and sqrt is harmless.
// bf16 rounding is done with integer ops rather than `fptrunc … to bfloat`, which x86 lowers to a
// compiler-rt call on CPUs without AVX512-BF16. f16 uses `fptrunc`/`fpext` (F16C instructions; on a
// CPU without F16C, LLVM would call compiler-rt and cpu_compile reports the external symbol).
#include "codegen/llvm/llvm_alu.h"

#include <array>
#include <cmath>
#include <llvm/IR/Intrinsics.h>

#include "support/error.h"

namespace kiln {

namespace {

[[noreturn]] void unsupported(Ops op, DType dtype) {
  throw_internal_error(str_cat("LLVM renderer: ", op_name(op), " on ", dtype.name(), " has no meaning"));
}

int bit_width(DType dtype) { return dtype.is_bool() ? 1 : dtype.scalar_bytes() * 8; }

// `scalar` as a vector of `like`'s width when `like` is a vector (ops work lane by lane).
llvm::Type* shaped_like(llvm::Value* like, llvm::Type* scalar) {
  if (auto* vector = llvm::dyn_cast<llvm::FixedVectorType>(like->getType()))
    return llvm::FixedVectorType::get(scalar, vector->getNumElements());
  return scalar;
}

// f16/bf16 → f32 (exact); other values unchanged.
//
// A vector f16 widening is wrapped in llvm.arithmetic.fence (which compiles to nothing). Without it,
// InstCombine rewrites `fcmp (fpext a), (fpext b)`, and a compare with a constant that f16 holds
// exactly, into a compare of the f16 vectors themselves, and x86 without AVX512-FP16 scalarises
// vector compares of halves: one vcvtph2ps and one vucomiss per lane, plus mask shuffling. Every
// f16 ReLU, max, erf and NaN test paid that (BERT-base fp16's GELU: 512 vucomiss per 256 values).
llvm::Value* widen(llvm::IRBuilderBase& b, llvm::Value* value, DType dtype) {
  if (dtype.scalar() == ScalarType::Float16) {
    llvm::Value* wide = b.CreateFPExt(value, shaped_like(value, b.getFloatTy()));
    return wide->getType()->isVectorTy() ? b.CreateArithmeticFence(wide, wide->getType()) : wide;
  }
  if (dtype.scalar() != ScalarType::BFloat16) return value;
  // bf16 is the top half of an f32 (lane by lane for vectors).
  llvm::Value* bits = b.CreateZExt(b.CreateBitCast(value, shaped_like(value, b.getInt16Ty())),
                                   shaped_like(value, b.getInt32Ty()));
  return b.CreateBitCast(b.CreateShl(bits, 16), shaped_like(value, b.getFloatTy()));
}

// f32 → bf16, round to nearest even; NaN stays NaN (quieted), overflow becomes infinity.
llvm::Value* f32_to_bf16(llvm::IRBuilderBase& b, llvm::Value* value) {
  llvm::Type* i32 = shaped_like(value, b.getInt32Ty());
  llvm::Value* bits = b.CreateBitCast(value, i32);
  llvm::Value* lowest_kept = b.CreateAnd(b.CreateLShr(bits, 16), 1);
  llvm::Value* rounded =
      b.CreateLShr(b.CreateAdd(bits, b.CreateAdd(lowest_kept, llvm::ConstantInt::get(i32, 0x7FFF))), 16);
  llvm::Value* quiet_nan = b.CreateOr(b.CreateLShr(bits, 16), 0x40);
  llvm::Value* is_nan = b.CreateFCmpUNO(value, value);
  llvm::Value* half = b.CreateTrunc(b.CreateSelect(is_nan, quiet_nan, rounded), shaped_like(value, b.getInt16Ty()));
  return half;
}

// f32 → the float dtype `to` (f16, bf16 or f32 itself).
llvm::Value* from_f32(llvm::IRBuilderBase& b, llvm::Value* value, DType to) {
  switch (to.scalar()) {
    case ScalarType::Float16: return b.CreateFPTrunc(value, shaped_like(value, b.getHalfTy()));
    case ScalarType::BFloat16: return f32_to_bf16(b, value);
    case ScalarType::Float32: return value;
    case ScalarType::Float64: return b.CreateFPExt(value, shaped_like(value, b.getDoubleTy()));
    default: throw_internal_error("from_f32 to " + to.name());
  }
}

// f64 → f32 rounded to odd: truncated toward zero, with the lowest bit set when inexact. Rounding
// that again to f16/bf16 (to nearest even) gives the correctly rounded result; rounding f64 → f32
// to nearest first could land on a midpoint of the narrow type and round twice.
llvm::Value* f64_to_f32_round_to_odd(llvm::IRBuilderBase& b, llvm::Value* value) {
  llvm::Type* f32 = shaped_like(value, b.getFloatTy());
  llvm::Type* i32 = shaped_like(value, b.getInt32Ty());
  llvm::Value* nearest = b.CreateFPTrunc(value, f32);
  llvm::Value* back = b.CreateFPExt(nearest, value->getType());
  llvm::Value* inexact = b.CreateFCmpONE(back, value);  // false for NaN and for exact values
  llvm::Value* rounded_up = b.CreateFCmpOGT(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, back),
                                            b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, value));
  llvm::Value* bits = b.CreateBitCast(nearest, i32);
  // One step toward zero in magnitude is one less in the bit pattern, for either sign.
  llvm::Value* truncated = b.CreateSub(bits, b.CreateZExt(rounded_up, i32));
  llvm::Value* odd = b.CreateOr(truncated, llvm::ConstantInt::get(i32, 1));
  return b.CreateBitCast(b.CreateSelect(inexact, odd, bits), f32);
}

llvm::Value* float_to_float(llvm::IRBuilderBase& b, llvm::Value* value, DType from, DType to) {
  if (from.scalar() == ScalarType::Float64) {
    if (to.scalar() == ScalarType::Float32) return b.CreateFPTrunc(value, shaped_like(value, b.getFloatTy()));
    return from_f32(b, f64_to_f32_round_to_odd(b, value), to);
  }
  return from_f32(b, widen(b, value, from), to);  // f16/bf16/f32 → f32 is exact
}

// An integer of more than 24 bits → f32 with a sticky bit, so that rounding it to bf16 afterwards is
// exact: the magnitude is shifted down to 24 significant bits, ORing the lost bits into the lowest,
// converted (exactly) and scaled back by a power of two.
llvm::Value* wide_integer_to_f32_sticky(llvm::IRBuilderBase& b, llvm::Value* value, DType from) {
  auto* type = llvm::cast<llvm::IntegerType>(value->getType());
  unsigned width = type->getBitWidth();
  llvm::Value* negative = from.is_signed() ? b.CreateICmpSLT(value, llvm::ConstantInt::get(type, 0)) : b.getFalse();
  llvm::Value* magnitude = b.CreateSelect(negative, b.CreateNeg(value), value);
  llvm::Value* leading_zeros = b.CreateBinaryIntrinsic(llvm::Intrinsic::ctlz, magnitude, b.getFalse());
  llvm::Value* length = b.CreateSub(llvm::ConstantInt::get(type, width), leading_zeros);
  llvm::Value* shift = b.CreateBinaryIntrinsic(llvm::Intrinsic::usub_sat, length, llvm::ConstantInt::get(type, 24));
  llvm::Value* kept = b.CreateLShr(magnitude, shift);
  llvm::Value* lost_mask = b.CreateSub(b.CreateShl(llvm::ConstantInt::get(type, 1), shift), llvm::ConstantInt::get(type, 1));
  llvm::Value* sticky = b.CreateZExt(b.CreateICmpNE(b.CreateAnd(magnitude, lost_mask), llvm::ConstantInt::get(type, 0)), type);
  llvm::Value* converted = b.CreateUIToFP(b.CreateOr(kept, sticky), b.getFloatTy());
  llvm::Value* exponent = b.CreateShl(b.CreateAdd(b.CreateTrunc(shift, b.getInt32Ty()), b.getInt32(127)), 23);
  llvm::Value* scaled = b.CreateFMul(converted, b.CreateBitCast(exponent, b.getFloatTy()));
  return b.CreateSelect(negative, b.CreateFNeg(scaled), scaled);
}

llvm::Value* integer_to_float(llvm::IRBuilderBase& b, llvm::Value* value, DType from, DType to) {
  bool is_signed = from.is_signed();
  auto convert = [&](llvm::Type* type) {
    return is_signed ? b.CreateSIToFP(value, type) : b.CreateUIToFP(value, type);
  };
  switch (to.scalar()) {
    case ScalarType::Float32: return convert(shaped_like(value, b.getFloatTy()));
    case ScalarType::Float64: return convert(shaped_like(value, b.getDoubleTy()));
    // Integers below 2^24 are exact in f32; from 2^24 on, both roundings give f16 infinity.
    case ScalarType::Float16:
      return b.CreateFPTrunc(convert(shaped_like(value, b.getFloatTy())), shaped_like(value, b.getHalfTy()));
    case ScalarType::BFloat16:
      if (bit_width(from) <= 16) return f32_to_bf16(b, convert(shaped_like(value, b.getFloatTy())));
      // (Scalar only: opt/expand.cpp keeps such casts lane by lane.)
      return f32_to_bf16(b, wide_integer_to_f32_sticky(b, value, from));
    default: throw_internal_error("integer_to_float to " + to.name());
  }
}

// Signed targets clamp, convert and patch the ends with selects rather than calling
// llvm.fptosi.sat: x86 has no saturating convert, and LLVM 19 scalarises the vector intrinsic (a
// 16-lane exp2, whose range reduction converts to i32, spent most of its time in 16 scalar converts).
llvm::Value* float_to_integer(llvm::IRBuilderBase& b, llvm::Value* value, DType from, DType to) {
  llvm::Value* wide = widen(b, value, from);
  llvm::Type* target = llvm_register_type(b.getContext(), to);
  llvm::Type* type = wide->getType();
  if (!to.is_signed() && !to.is_bool() && bit_width(to) <= 16) {
    // u8 and u16 the same way: [0, 2^bits - 1] holds only values exact in f32 and f64, so clamping
    // there (NaN and negatives to 0) and converting through i32 is the saturating convert, and
    // vectorises (a quantization to u8 spent most of its time in LLVM's 16 scalar converts).
    llvm::Value* zero = llvm::ConstantFP::get(type, 0.0);
    llvm::Value* high = llvm::ConstantFP::get(type, std::ldexp(1.0, bit_width(to)) - 1.0);
    llvm::Value* clamped = b.CreateSelect(b.CreateFCmpOGT(wide, zero), wide, zero);
    clamped = b.CreateSelect(b.CreateFCmpOGT(clamped, high), high, clamped);
    return b.CreateTrunc(b.CreateFPToSI(clamped, shaped_like(wide, b.getInt32Ty())), target);
  }
  if (!to.is_signed()) return b.CreateIntrinsic(llvm::Intrinsic::fptoui_sat, {target, type}, {wide});
  const llvm::fltSemantics& semantics = type->getScalarType()->getFltSemantics();
  int bits = bit_width(to);
  llvm::APFloat limit = llvm::APFloat::getOne(semantics);  // 2^(bits-1), exact in every float type
  limit = llvm::scalbn(limit, bits - 1, llvm::APFloat::rmNearestTiesToEven);
  llvm::APFloat below = limit;  // the largest value below the limit
  below.next(true);
  llvm::Value* low = llvm::ConstantFP::get(type, -limit.convertToDouble());
  llvm::Value* high = llvm::ConstantFP::get(type, below.convertToDouble());
  llvm::Value* clamped = b.CreateSelect(b.CreateFCmpOLT(wide, low), low, wide);
  clamped = b.CreateSelect(b.CreateFCmpOGT(clamped, high), high, clamped);
  llvm::Value* converted = b.CreateFPToSI(clamped, target);  // in range, or NaN (replaced below)
  llvm::Value* largest = llvm::ConstantInt::get(target, llvm::APInt::getSignedMaxValue(static_cast<unsigned>(bits)));
  converted = b.CreateSelect(b.CreateFCmpOGE(wide, llvm::ConstantFP::get(type, limit.convertToDouble())), largest, converted);
  return b.CreateSelect(b.CreateFCmpUNO(wide, wide), llvm::ConstantInt::get(target, 0), converted);
}

llvm::Value* compare(llvm::IRBuilderBase& b, Ops op, DType dtype, llvm::Value* x, llvm::Value* y) {
  if (dtype.is_float()) {
    x = widen(b, x, dtype);
    y = widen(b, y, dtype);
    if (op == Ops::CMPLT) return b.CreateFCmpOLT(x, y);
    if (op == Ops::CMPNE) return b.CreateFCmpUNE(x, y);  // NaN != anything
    return b.CreateFCmpOEQ(x, y);
  }
  if (op == Ops::CMPLT) return dtype.is_signed() ? b.CreateICmpSLT(x, y) : b.CreateICmpULT(x, y);
  if (op == Ops::CMPNE) return b.CreateICmpNE(x, y);
  return b.CreateICmpEQ(x, y);
}

// Bool arithmetic is integer arithmetic on 0/1 followed by `!= 0` (ir/evaluate.cpp): a+b is OR,
// a-b is XOR, a*b is AND; a/b is a AND b (division by false gives 0); a%b is always false; shift
// amounts are taken modulo a width of 1, so shifts leave the value as it is.
llvm::Value* bool_alu(llvm::IRBuilderBase& b, Ops op, llvm::Value* x, llvm::Value* y) {
  switch (op) {
    case Ops::NEG: case Ops::TRUNC: case Ops::ROUND_EVEN: case Ops::SHL: case Ops::SHR: return x;
    case Ops::NOT: return b.CreateNot(x);
    case Ops::ADD: case Ops::OR: case Ops::MAX: return b.CreateOr(x, y);
    case Ops::SUB: case Ops::XOR: return b.CreateXor(x, y);
    case Ops::MUL: case Ops::AND: case Ops::IDIV: return b.CreateAnd(x, y);
    case Ops::MOD: return llvm::ConstantInt::get(x->getType(), 0);
    default: unsupported(op, dtypes::bool_);
  }
}

// Truncating division and modulo without traps: x/0 = x%0 = 0, MIN/-1 = MIN (wrapping -x), x%-1 = 0.
llvm::Value* divide(llvm::IRBuilderBase& b, Ops op, DType dtype, llvm::Value* x, llvm::Value* y) {
  llvm::Type* type = x->getType();
  llvm::Value* zero = llvm::ConstantInt::get(type, 0);
  llvm::Value* one = llvm::ConstantInt::get(type, 1);
  llvm::Value* by_zero = b.CreateICmpEQ(y, zero);
  if (!dtype.is_signed()) {
    llvm::Value* divisor = b.CreateSelect(by_zero, one, y);
    if (op == Ops::MOD) return b.CreateURem(x, divisor);  // x % 1 == 0
    return b.CreateSelect(by_zero, zero, b.CreateUDiv(x, divisor));
  }
  llvm::Value* by_minus_one = b.CreateICmpEQ(y, llvm::ConstantInt::getSigned(type, -1));
  llvm::Value* divisor = b.CreateSelect(b.CreateOr(by_zero, by_minus_one), one, y);
  if (op == Ops::MOD) return b.CreateSRem(x, divisor);
  llvm::Value* quotient = b.CreateSelect(by_zero, zero, b.CreateSDiv(x, divisor));
  return b.CreateSelect(by_minus_one, b.CreateNeg(x), quotient);
}

llvm::Value* integer_alu(llvm::IRBuilderBase& b, Ops op, DType dtype, llvm::Value* x, llvm::Value* y,
                         DType shift_amount) {
  // `index` never overflows (ops.def), so its arithmetic carries nsw, which helps loop analysis.
  bool no_signed_wrap = dtype.is_index();
  switch (op) {
    case Ops::NEG: return b.CreateNeg(x, "", no_signed_wrap);
    case Ops::NOT: return b.CreateNot(x);
    case Ops::TRUNC: case Ops::ROUND_EVEN: return x;
    case Ops::ADD: return b.CreateAdd(x, y, "", false, no_signed_wrap);
    case Ops::SUB: return b.CreateSub(x, y, "", false, no_signed_wrap);
    case Ops::MUL: return b.CreateMul(x, y, "", false, no_signed_wrap);
    case Ops::IDIV: case Ops::MOD: return divide(b, op, dtype, x, y);
    case Ops::MAX:
      return b.CreateBinaryIntrinsic(dtype.is_signed() ? llvm::Intrinsic::smax : llvm::Intrinsic::umax, x, y);
    case Ops::AND: return b.CreateAnd(x, y);
    case Ops::OR: return b.CreateOr(x, y);
    case Ops::XOR: return b.CreateXor(x, y);
    case Ops::SHL: case Ops::SHR: {
      // The amount is taken modulo the width; its low bits survive any width change.
      llvm::Value* amount = shift_amount.is_bool() ? b.CreateZExt(y, x->getType()) : b.CreateZExtOrTrunc(y, x->getType());
      amount = b.CreateAnd(amount, llvm::ConstantInt::get(x->getType(), bit_width(dtype) - 1));
      if (op == Ops::SHL) return b.CreateShl(x, amount);
      return dtype.is_signed() ? b.CreateAShr(x, amount) : b.CreateLShr(x, amount);
    }
    default: unsupported(op, dtype);
  }
}

// max(x, y) with NaN winning and -0 < +0. Written out rather than as llvm.maximum: LLVM 19's x86
// lowering of the vectorised intrinsic returned +0 for maximum(NaN, +0) (seen in an f16 minimum).
// The two selects are x86's MAXPS with its operands each way round (each returns its second operand
// for equal or unordered inputs), so for ordered inputs they agree except on {-0, +0}, where AND-ing
// their bits gives +0; unordered inputs take x + y, a quiet NaN. Six instructions on AVX2, where
// nested compare-selects took eight, three of them blends.
llvm::Value* float_maximum(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* y) {
  llvm::Type* bits_type = shaped_like(x, b.getIntNTy(x->getType()->getScalarSizeInBits()));
  llvm::Value* x_unless_less = b.CreateSelect(b.CreateFCmpOGT(x, y), x, y);
  llvm::Value* y_unless_less = b.CreateSelect(b.CreateFCmpOGT(y, x), y, x);
  llvm::Value* ordered = b.CreateBitCast(
      b.CreateAnd(b.CreateBitCast(x_unless_less, bits_type), b.CreateBitCast(y_unless_less, bits_type)), x->getType());
  llvm::Value* any_nan = b.CreateFCmpUNO(x, y);
  return b.CreateSelect(any_nan, b.CreateFAdd(x, y), ordered);  // x + y is a quiet NaN when either is NaN
}

llvm::Value* float_alu(llvm::IRBuilderBase& b, Ops op, DType dtype, llvm::Value* x, llvm::Value* y, bool reassociate) {
  if (op == Ops::NEG) {
    if (!dtype.is_narrow_float()) return b.CreateFNeg(x);
    // A sign flip on the bits: x86 would widen a narrow fneg and call compiler-rt to narrow it back.
    llvm::Type* bits_type = shaped_like(x, b.getInt16Ty());
    llvm::Value* bits = b.CreateXor(b.CreateBitCast(x, bits_type), llvm::ConstantInt::get(bits_type, 0x8000));
    return b.CreateBitCast(bits, x->getType());
  }
  x = widen(b, x, dtype);
  if (y != nullptr) y = widen(b, y, dtype);
  llvm::Value* result = nullptr;
  switch (op) {
    case Ops::SQRT: result = b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x); break;
    case Ops::TRUNC: result = b.CreateUnaryIntrinsic(llvm::Intrinsic::trunc, x); break;
    case Ops::ROUND_EVEN: result = b.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, x); break;
    case Ops::RECIPROCAL: result = b.CreateFDiv(llvm::ConstantFP::get(x->getType(), 1.0), x); break;
    case Ops::ADD: result = b.CreateFAdd(x, y); break;
    case Ops::SUB: result = b.CreateFSub(x, y); break;
    case Ops::MUL: result = b.CreateFMul(x, y); break;
    case Ops::FDIV: result = b.CreateFDiv(x, y); break;
    case Ops::MAX: result = float_maximum(b, x, y); break;
    default: unsupported(op, dtype);
  }
  if (reassociate && (op == Ops::ADD || op == Ops::MUL))
    if (auto* instruction = llvm::dyn_cast<llvm::Instruction>(result)) instruction->setHasAllowReassoc(true);
  return dtype.is_narrow_float() ? from_f32(b, result, dtype) : result;
}

// The i16 bit pattern of `value` rounded to bf16 (to nearest even).
llvm::Constant* bf16_constant(llvm::LLVMContext& context, double value) {
  llvm::APFloat rounded(value);
  bool inexact = false;
  rounded.convert(llvm::APFloat::BFloat(), llvm::APFloat::rmNearestTiesToEven, &inexact);
  return llvm::ConstantInt::get(llvm::Type::getInt16Ty(context), rounded.bitcastToAPInt());
}

}  // namespace

llvm::Type* llvm_register_type(llvm::LLVMContext& context, DType dtype) {
  if (dtype.is_pointer()) throw_internal_error("LLVM renderer: a pointer of type " + dtype.name() + " is not a value");
  if (dtype.count() != 1) {
    // Vectors of the types whose ops work lane by lane in LLVM: f16 vectors widen to f32 vectors
    // and back (F16C's VCVTPH2PS / VCVTPS2PH), bf16 vectors are i16 vectors widened by a shift and
    // rounded back with integer vector ops; index vectors appear only in padding tests.
    return llvm::FixedVectorType::get(llvm_register_type(context, dtype.base()), static_cast<unsigned>(dtype.count()));
  }
  switch (dtype.scalar()) {
    case ScalarType::Bool: return llvm::Type::getInt1Ty(context);
    case ScalarType::Int8: case ScalarType::UInt8: return llvm::Type::getInt8Ty(context);
    case ScalarType::Int16: case ScalarType::UInt16: return llvm::Type::getInt16Ty(context);
    case ScalarType::Int32: case ScalarType::UInt32: return llvm::Type::getInt32Ty(context);
    case ScalarType::Int64: case ScalarType::UInt64: case ScalarType::Index: return llvm::Type::getInt64Ty(context);
    case ScalarType::Float16: return llvm::Type::getHalfTy(context);
    // bf16 values live in i16 registers: x86 without AVX512-BF16 would lower any `bfloat` value
    // (even a select) by widening it and calling compiler-rt to narrow it back.
    case ScalarType::BFloat16: return llvm::Type::getInt16Ty(context);
    case ScalarType::Float32: return llvm::Type::getFloatTy(context);
    case ScalarType::Float64: return llvm::Type::getDoubleTy(context);
    case ScalarType::Void: break;
  }
  throw_internal_error("LLVM renderer: no value has type " + dtype.name());
}

llvm::Type* llvm_memory_type(llvm::LLVMContext& context, DType dtype) {
  DType value = dtype.pointee();
  if (!value.base().is_bool()) return llvm_register_type(context, value);
  llvm::Type* byte = llvm::Type::getInt8Ty(context);
  return value.count() == 1 ? byte : llvm::FixedVectorType::get(byte, static_cast<unsigned>(value.count()));
}

llvm::Value* llvm_to_memory(llvm::IRBuilderBase& builder, llvm::Value* value, DType dtype) {
  return dtype.base().is_bool() ? builder.CreateZExt(value, shaped_like(value, builder.getInt8Ty())) : value;
}

llvm::Value* llvm_from_memory(llvm::IRBuilderBase& builder, llvm::Value* value, DType dtype) {
  return dtype.base().is_bool() ? builder.CreateICmpNE(value, llvm::ConstantInt::get(value->getType(), 0)) : value;
}

llvm::Constant* llvm_constant(llvm::LLVMContext& context, const UOp& node) {
  DType dtype = node.dtype();
  llvm::Type* type = llvm_register_type(context, dtype);
  if (dtype.is_bool()) return llvm::ConstantInt::get(type, node.arg_bool() ? 1 : 0);
  if (dtype.scalar() == ScalarType::BFloat16) return bf16_constant(context, node.arg_float());
  if (dtype.is_float()) return llvm::ConstantFP::get(type, node.arg_float());  // rounds to nearest even
  // Integers are stored in their type's range (u64 as its bit pattern); truncation keeps the value.
  return llvm::ConstantInt::get(type, static_cast<uint64_t>(node.arg_int()), dtype.is_signed());
}

llvm::Value* llvm_alu(llvm::IRBuilderBase& builder, Ops op, DType operand, std::span<llvm::Value* const> sources,
                      DType shift_amount, bool reassociate) {
  switch (op) {
    case Ops::EXP2: case Ops::LOG2: case Ops::SIN:
      throw_internal_error(str_cat("LLVM renderer: ", op_name(op),
                                   " reached code generation; the transcendental pass (src/passes/transcendental.*) "
                                   "must run first, since kernels may not call libm"));
    case Ops::MULACC:
      if (operand.is_float()) {
        // Rounded once: llvm.fma is a fused multiply-add on every target (an FMA instruction where
        // there is one). Narrow floats are computed in f32 and rounded back, as the IR evaluator does.
        std::array<llvm::Value*, 3> wide{};
        for (size_t i = 0; i < 3; ++i) wide[i] = widen(builder, sources[i], operand);
        llvm::Value* fused = builder.CreateIntrinsic(llvm::Intrinsic::fma, {wide[0]->getType()}, {wide[0], wide[1], wide[2]});
        return operand.is_narrow_float() ? from_f32(builder, fused, operand) : fused;
      }
      unsupported(op, operand);
    case Ops::POW: case Ops::THREEFRY:
      throw_internal_error(str_cat("LLVM renderer: ", op_name(op), " never reaches a renderer (docs/kernel-ast.md)"));
    case Ops::WHERE: return builder.CreateSelect(sources[0], sources[1], sources[2]);
    case Ops::CMPLT: case Ops::CMPNE: case Ops::CMPEQ: return compare(builder, op, operand, sources[0], sources[1]);
    default: break;
  }
  KILN_ASSERT(op_is_alu(op) && !sources.empty(), "not an ALU op: ", op_name(op));
  llvm::Value* x = sources[0];
  llvm::Value* y = sources.size() > 1 ? sources[1] : nullptr;
  if (operand.is_bool()) return bool_alu(builder, op, x, y);
  if (operand.is_float()) return float_alu(builder, op, operand, x, y, reassociate);
  if (operand.is_int()) return integer_alu(builder, op, operand, x, y, shift_amount);
  unsupported(op, operand);
}

llvm::Value* llvm_cast(llvm::IRBuilderBase& builder, llvm::Value* value, DType from, DType to) {
  llvm::LLVMContext& context = builder.getContext();
  if (from == to) return value;
  if (to.is_bool()) {
    if (from.is_float()) {
      llvm::Value* wide = widen(builder, value, from);
      return builder.CreateFCmpUNE(wide, llvm::ConstantFP::get(wide->getType(), 0.0));  // NaN → true
    }
    return builder.CreateICmpNE(value, llvm::ConstantInt::get(value->getType(), 0));
  }
  if (from.is_bool()) {
    if (to.scalar() == ScalarType::BFloat16) {
      auto shaped = [&](llvm::Constant* scalar) -> llvm::Constant* {
        auto* vector = llvm::dyn_cast<llvm::FixedVectorType>(value->getType());
        return vector ? llvm::ConstantVector::getSplat(vector->getElementCount(), scalar) : scalar;
      };
      return builder.CreateSelect(value, shaped(bf16_constant(context, 1.0)), shaped(bf16_constant(context, 0.0)));
    }
    if (to.is_float()) {
      llvm::Type* type = llvm_register_type(context, to);
      return builder.CreateSelect(value, llvm::ConstantFP::get(type, 1.0), llvm::ConstantFP::get(type, 0.0));
    }
    return builder.CreateZExt(value, llvm_register_type(context, to));
  }
  if (from.is_int() && to.is_int()) return builder.CreateIntCast(value, llvm_register_type(context, to), from.is_signed());
  if (from.is_int() && to.is_float()) return integer_to_float(builder, value, from, to);
  if (from.is_float() && to.is_int()) return float_to_integer(builder, value, from, to);
  if (from.is_float() && to.is_float()) return float_to_float(builder, value, from, to);
  throw_internal_error("LLVM renderer: CAST from " + from.name() + " to " + to.name());
}

llvm::Value* llvm_bitcast(llvm::IRBuilderBase& builder, llvm::Value* value, DType from, DType to) {
  if (from.bytes() != to.bytes() || from.count() != to.count())
    throw_internal_error("LLVM renderer: BITCAST from " + from.name() + " to " + to.name() + " changes the size");
  llvm::Type* bits_type = shaped_like(value, builder.getIntNTy(static_cast<unsigned>(from.scalar_bytes() * 8)));
  llvm::Value* bits = from.is_bool() ? builder.CreateZExt(value, bits_type) : builder.CreateBitCast(value, bits_type);
  if (to.base().is_bool()) return builder.CreateICmpNE(bits, llvm::ConstantInt::get(bits_type, 0));
  return builder.CreateBitCast(bits, llvm_register_type(builder.getContext(), to));
}

}  // namespace kiln
