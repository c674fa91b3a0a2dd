// The C text of a WMMA; see c_mma.h.
#include "codegen/c_style/c_mma.h"

#include "opt/mma_layout.h"
#include "support/error.h"

namespace kiln {

namespace {

// A C integer expression that the layout functions of mma_layout.h compute on, so that the
// emulation places elements by the same formulas the transform loads them by.
struct CText {
  std::string text;
};
CText operator/(const CText& a, int64_t b) { return {str_cat("(", a.text, " / ", b, "u)")}; }
CText operator%(const CText& a, int64_t b) { return {str_cat("(", a.text, " % ", b, "u)")}; }
CText operator*(const CText& a, int64_t b) { return {str_cat("(", a.text, " * ", b, "u)")}; }
CText operator+(const CText& a, int64_t b) { return b == 0 ? a : CText{str_cat("(", a.text, " + ", b, "u)")}; }
CText operator+(const CText& a, const CText& b) { return {str_cat("(", a.text, " + ", b.text, ")")}; }

}  // namespace

std::string cuda_mma_helper(int architecture, bool bf16, const CDialect& dialect, std::string& name) {
  KILN_ASSERT(!bf16 || architecture >= 80, "bf16 mma before sm_80");
  std::string parameters =
      "(float& d0, float& d1, float& d2, float& d3, uint a01, uint a23, uint a45, uint a67, uint b01, uint b23, "
      "float c0, float c1, float c2, float c3)";
  std::string outputs = "\"=f\"(d0), \"=f\"(d1), \"=f\"(d2), \"=f\"(d3)";
  if (architecture >= 80) {
    const char* operand = bf16 ? "bf16" : "f16";
    name = str_cat("kiln_mma_m16n8k16_", operand);
    return str_cat(dialect.helper_prefix, " void ", name, parameters, " {\n",
                   "  asm(\"mma.sync.aligned.m16n8k16.row.col.f32.", operand, ".", operand,
                   ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                   "{%8, %9}, {%10, %11, %12, %13};\"\n      : ", outputs,
                   "\n      : \"r\"(a01), \"r\"(a23), \"r\"(a45), \"r\"(a67), \"r\"(b01), \"r\"(b23), "
                   "\"f\"(c0), \"f\"(c1), \"f\"(c2), \"f\"(c3));\n}\n");
  }
  // m16n8k8's A is rows g and g + 8 at columns 2t, 2t + 1 (m16n8k16's a01, a23 for k < 8; a45, a67
  // for k ≥ 8), its B rows 2t, 2t + 1 (b01; b23 for k ≥ 8).
  name = "kiln_mma_m16n8k8_twice";
  return str_cat(dialect.helper_prefix, " void ", name, parameters, " {\n",
                 "  asm(\"mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
                 "{%7, %8, %9, %10};\"\n      : ", outputs,
                 "\n      : \"r\"(a01), \"r\"(a23), \"r\"(b01), \"f\"(c0), \"f\"(c1), \"f\"(c2), \"f\"(c3));\n",
                 "  asm(\"mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
                 "{%0, %1, %2, %3};\"\n      : \"+f\"(d0), \"+f\"(d1), \"+f\"(d2), \"+f\"(d3)\n",
                 "      : \"r\"(a45), \"r\"(a67), \"r\"(b23));\n}\n");
}

std::string emulated_mma_dot_helper(const CDialect& dialect, std::string& name) {
  name = "kiln_mma_dot";
  std::string local = dialect.local_qualifier;
  return str_cat(dialect.helper_prefix, " float ", name, "(", local, " const float* a, ", local,
                 " const float* b, uint row, uint column) {\n  float sum = 0.0f;\n  for (uint k = 0; k < ",
                 mma::kDepth, "u; ++k) sum += a[row * ", mma::kDepth, "u + k] * b[k * ", mma::kColumns,
                 "u + column];\n  return sum;\n}\n");
}

std::string emulated_a_position(const std::string& lane, int i) {
  CText at{lane};
  return (mma::a_row(at, i) * mma::kDepth + mma::a_column(at, i)).text;
}

std::string emulated_b_position(const std::string& lane, int i) {
  CText at{lane};
  return (mma::b_row(at, i) * mma::kColumns + mma::b_column(at, i)).text;
}

std::string emulated_c_row(const std::string& lane, int i) { return mma::c_row(CText{lane}, i).text; }
std::string emulated_c_column(const std::string& lane, int i) { return mma::c_column(CText{lane}, i).text; }

}  // namespace kiln
