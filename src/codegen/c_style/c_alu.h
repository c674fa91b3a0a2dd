// Scalar semantics of kiln's IR (docs/kernel-ast.md) as C expressions, for the C-style renderer.
// Every function takes and returns expressions of one scalar lane; the renderer applies them lane by
// lane. What C leaves undefined is spelled out: integer arithmetic wraps (it is done in the unsigned
// type), division by zero gives 0, shift amounts are taken modulo the width, float → integer casts
// saturate with NaN → 0, float MAX propagates NaN with -0 < +0, f16 is computed in f32 and rounded
// back after every op. Longer pieces become small helper functions (CHelpers) defined once per program.
#pragma once

#include <span>
#include <string>
#include <unordered_set>

#include "codegen/c_style/c_dialect.h"
#include "ir/ops.h"
#include "ir/uop.h"

namespace kiln {

// The helper functions one program uses, each defined once, in the order of first use.
class CHelpers {
 public:
  // Adds `definition` under `name` unless it is there already; returns `name`.
  const std::string& use(const std::string& name, const std::string& definition);
  const std::string& text() const { return text_; }

 private:
  std::unordered_set<std::string> names_;
  std::string text_;
};

struct CExpressionContext {
  const CDialect& dialect;
  CHelpers& helpers;
};

// The register type of a scalar or of a vector's lanes.
std::string c_register_type(const CDialect& dialect, DType dtype);
// The memory type of a buffer element (bool is one byte in memory: the unsigned 8-bit type).
std::string c_memory_type(const CDialect& dialect, DType dtype);

// A scalar CONST as a literal of its register type (floats exactly, as hexadecimal literals).
std::string c_constant(const CExpressionContext& context, const UOp& constant);

// One lane of an ALU op (ops.def Unary/Binary/Ternary). `operand` is the scalar type of the sources
// (of sources 1 and 2 for WHERE), `shift_amount` the type of source 1 of SHL/SHR.
std::string c_alu(const CExpressionContext& context, Ops op, DType operand, std::span<const std::string> sources,
                  DType shift_amount);

// One lane of CAST and BITCAST between scalar types.
std::string c_cast(const CExpressionContext& context, const std::string& value, DType from, DType to);
std::string c_bitcast(const CExpressionContext& context, const std::string& value, DType from, DType to);

}  // namespace kiln
