// Tensor::matmul: numpy's matmul as one broadcast product and one sum, with the right operand's
// layout chosen for the kernel that reads it (transposed, in panels, in dot-product panels).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>
#include <optional>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "codegen/target.h"
#include "driver/run_on_device.h"
#include "support/error.h"
#include "tensor/matmul_precision.h"
#include "tensor/nn_helpers.h"
#include "tensor/tensor_internal.h"
#include "tensor/winograd.h"

namespace kiln {

using namespace nn;

// numpy matmul as one broadcast product and one sum: (…, n, 1, k) · (…, 1, m, k) summed over k.
// The batch axes broadcast in the product, so the expanded operands are never materialised.
namespace {
// Contractions and output widths from this size up read the right operand from a transposed copy.
constexpr int64_t kTransposeMinimum = 16;
// A right operand of at least this many elements is stored in panels of kPanelColumns columns:
// (K, N) → (N/32, K, 32). A register tile reads one row of 32 columns per step of K; in a
// row-major b those rows are N·4 bytes apart, which for power-of-two N maps every row of the strip
// to the same few cache sets (2048³ ran at 23 % of peak, the same as without tiles). In a panel
// they are adjacent.
constexpr int64_t kPanelColumns = 32;
constexpr int64_t kPanelMinimumElements = 64 * 1024;

// b (…, K, N) stored panel by panel, viewed again as (…, K, N). An N that is not a multiple of
// kPanelColumns is padded with zero columns up to one, which the view leaves out. A classifier's
// 1000 columns were read row-major before: a vector of 16 columns per step, its rows 4000 bytes
// apart, so each 64-byte line was split between two vectors that read it a whole pass over the
// weight apart (from memory twice). AlexNet's 4096 -> 1000 alone, one thread on the AVX-512
// Xeon: 1.43 -> 0.56 ms (onnxruntime 0.60).
Tensor in_panels(const Tensor& b) {
  int64_t rank = static_cast<int64_t>(b.ndim());
  int64_t columns = b.dim(-1), padded = (columns + kPanelColumns - 1) / kPanelColumns * kPanelColumns;
  Tensor source = b;
  if (padded != columns) {
    std::vector<int64_t> pads(2 * static_cast<size_t>(rank), 0);
    pads.back() = padded - columns;
    source = b.pad(pads);
  }
  Shape split(source.shape().begin(), source.shape().end());
  split.back() = padded / kPanelColumns;
  split.push_back(kPanelColumns);  // (…, K, N/32, 32)
  std::vector<int64_t> to_panels, back;
  for (int64_t axis = 0; axis < rank - 2; ++axis) to_panels.push_back(axis);
  back = to_panels;
  to_panels.insert(to_panels.end(), {rank - 1, rank - 2, rank});  // (…, N/32, K, 32)
  back.insert(back.end(), {rank - 1, rank - 2, rank});            // the same swap undoes it
  Tensor panels = contiguous(source.reshape(split).permute(to_panels));
  Tensor viewed = panels.permute(back).reshape(source.shape());
  return padded == columns ? viewed : viewed.slice(-1, 0, columns);
}

// b (…, K, N), 8-bit, stored for 8-bit dot products over `lanes` columns (opt/dot_products.h) and
// viewed again as (…, K, N): panels of `lanes` columns, (…, N/lanes, K/4, lanes, 4), so that one
// instruction's operand (4 steps of the reduction for each of the lanes' columns, side by side) is
// 4·lanes consecutive bytes, one vector load; in row order it was four row pieces interleaved by
// shuffles, which cost more than the multiply-adds. K is a multiple of 4.
Tensor in_dot_product_panels(const Tensor& b, int64_t lanes) {
  const auto rank = static_cast<int64_t>(b.ndim());
  const int64_t k = b.dim(-2), columns = b.dim(-1), padded = (columns + lanes - 1) / lanes * lanes;
  Tensor source = b;
  if (padded != columns) {
    std::vector<int64_t> pads(2 * static_cast<size_t>(rank), 0);
    pads.back() = padded - columns;
    source = b.pad(pads);
  }
  Shape split(source.shape().begin(), source.shape().end() - 2);
  split.insert(split.end(), {k / 4, 4, padded / lanes, lanes});  // (…, K/4, 4, N/lanes, lanes)
  std::vector<int64_t> order;
  for (int64_t axis = 0; axis < rank - 2; ++axis) order.push_back(axis);
  std::vector<int64_t> back = order;
  order.insert(order.end(), {rank, rank - 2, rank + 1, rank - 1});  // (…, N/lanes, K/4, lanes, 4)
  back.insert(back.end(), {rank - 1, rank + 1, rank - 2, rank});   // its inverse
  Tensor panels = contiguous(source.reshape(split).permute(order));
  Tensor viewed = panels.permute(back).reshape(source.shape());
  return padded == columns ? viewed : viewed.slice(-1, 0, columns);
}

// True when t is its buffer in row-major order (a BUFFER, possibly reshaped): reading it row by
// row is already contiguous.
bool is_buffer_view(const Tensor& t) {
  const UOpPtr& node = t.data().node;
  return node->op() == Ops::BUFFER || (node->op() == Ops::RESHAPE && node->src(0)->op() == Ops::BUFFER);
}

// Whether every axis of t but the last has one element (the left operand of a matrix-vector product).
bool one_row(const Tensor& t) {
  Dims dims = dims_of(t);
  return std::all_of(dims.begin(), dims.end() - 1, [](const Dim& d) { return d.is(1); });
}

// Whether t is computed elementwise from one 8-bit integer buffer as large as t and from small
// parameters (a DequantizeLinear of a weight: (w − zero point) · scale per column), and is large
// enough (kPanelMinimumElements) that constant folding leaves it unfolded (4 bytes an element
// against 1: fold_constants.cpp's size rule); a small one is folded into f32 as before.
bool dequantized_weight(const Tensor& t) {
  if (has_symbolic_shape(t) || t.ndim() < 2 || t.numel() < kPanelMinimumElements) return false;
  const int64_t small = t.dim(-1) + t.dim(-2);
  int64_t large_integer_buffers = 0;
  for (const UOp* node : toposort(t.data().node)) {
    Ops op = node->op();
    if (op == Ops::REDUCE_AXIS || op == Ops::CONTIGUOUS) return false;
    if (op != Ops::BUFFER) continue;
    const int64_t elements = node->arg_list().at(1);
    DType type = node->dtype().base();
    if (elements >= t.numel() / 2 && type.is_int() && type.scalar_bytes() == 1 && type != dtypes::bool_)
      ++large_integer_buffers;
    else if (elements > small) return false;
  }
  return large_integer_buffers == 1;
}

// The 8-bit integer value below `t` when t is that value widened to a larger integer (an integer
// matmul's operands: onnx/ops_quant.cpp); undefined otherwise.
Tensor widened_8bit_integer(const Tensor& t) {
  const UOpPtr& node = t.data().node;
  if (!widens_8bit_integer(node.get())) return Tensor();
  return make_tensor_dims(node->src(0), dims_of(t), node->src(0)->dtype(), {&t});
}
}  // namespace

namespace {

// Whether a matmul whose output columns are symbolic (attention's scores over keys of any count)
// takes its right operand row-major, (k, n), as for columns that are whole vectors: the tile then
// takes the columns in vector blocks, PADTO'd to whole vectors, and the rows of `a` as its rows, so
// each load of b feeds a row of FMAs, as in a fixed plan over a known key count. b goes through a
// transposing copy (K stored with its keys contiguous), which pays only when many rows read it:
// a decoder's one query row per step keeps (n, k). int8 BERT at 128 tokens, one thread: the
// scores 0.51 -> 0.29 ms (fixed plan 0.18, with the same copy).
bool symbolic_columns_in_rows(const Tensor& a, const Dim& n) {
  return !n.is_known() && n.max() >= kTransposeMinimum && a.ndim() >= 2 && dim_of(a, -2).max() >= kTransposeMinimum;
}

// Whether t is computed by a reduction (and elementwise ops and views after it) that no CONTIGUOUS
// separates from it: a projection's output.
bool computed_by_reduction(const Tensor& t) {
  bool found = false;
  walk(t.data().node, [&](const UOp* node) {
    found = found || node->op() == Ops::REDUCE_AXIS;
    return !found && node->op() != Ops::CONTIGUOUS && node->op() != Ops::BUFFER;
  });
  return found;
}

}  // namespace

Tensor Tensor::matmul(const Tensor& other) const {
  require_defined(*this, "matmul", "the left operand");
  require_defined(other, "matmul", "the right operand");
  if (ndim() == 0 || other.ndim() == 0)
    throw UserError(str_cat("matmul: operands must have at least one axis, got ", dims_string(dims_of(*this)), " and ",
                            dims_string(dims_of(other))));
  // Sizes are Dims: rows, columns and batch axes may be symbolic (docs/symbolic-shapes.md). The
  // layout choices below only pick a faster form, so a symbolic size counts at its maximum there,
  // and the panel layout (which splits N) needs a known N.
  Tensor a = ndim() == 1 ? reshape_to(*this, {1, dim_of(*this, 0)}) : *this;
  Tensor b = other.ndim() == 1 ? reshape_to(other, {dim_of(other, 0), 1}) : other;
  Dim k = dim_of(a, -1), n = dim_of(b, -1);
  if (!(k == dim_of(b, -2)))
    throw UserError(str_cat("matmul: shapes ", dims_string(dims_of(*this)), " and ", dims_string(dims_of(other)),
                            " do not align (", k, " != ", dim_of(b, -2), ")"));
  if (Tensor reduced = bf16_weight_matmul(a, b); reduced.defined())  // matmul_precision.h
    return ndim() == 1 ? reduced.squeeze({-2}) : reduced;
  if (Tensor reduced = bf16_batched_matmul(a, b); reduced.defined()) return reduced;
  ScalarType type = promoted(a, b), compute = compute_type(type);
  // A left operand whose rows are permuted pieces is made contiguous first: its producer (often the
  // reduction before it) then stores it in row order.
  if (k.max() >= kTransposeMinimum && a.ndim() >= 2 && dim_of(a, -2).max() >= kTransposeMinimum && rows_are_permuted(a))
    a = contiguous(a);
  // A computed 8-bit left operand (a dynamically quantized activation) is stored in its own width
  // and widened where the product reads it: each element is read once per output column, and the
  // fusion would otherwise store the widened value, or recompute the quantization per column.
  // Narrow operands are what 8-bit dot-product instructions multiply (opt/dot_products.h).
  if (Tensor narrow = widened_8bit_integer(a); narrow.defined() && computes(narrow))
    a = contiguous(narrow).cast(a.dtype());
  Tensor left = a.cast(compute).unsqueeze(-2);
  // The reduction reads a row of `left` and, per output column j, b[…, k, j]. Two layouts of b:
  //  - row-major (k, n), when n is a multiple of 4: the optimisation layer (src/opt/heuristics.h)
  //    vectorises the output columns, so each step of k loads contiguous lanes of one row of b and a
  //    register tile of rows shares them. A b that is not a row-major buffer is copied into that
  //    order first, and a large one into panels of 32 columns (folded into the weights when b is
  //    constant).
  //  - transposed (n, k) otherwise: a column of a row-major b is strided, which defeats the scalar
  //    loop (25-40x slower at 512³), so b goes through one transposing copy and k is read contiguously.
  // Small operands stay fused.
  bool large = k.max() >= kTransposeMinimum && n.max() >= kTransposeMinimum;
  Tensor right_rows;
  if (one_row(a) && dequantized_weight(b) && !graph_target_caps().output_grid) {
    // A matrix-vector product reads each element of b once: a b dequantized from 8-bit integers
    // (a QDQ model's classifier) is read as those integers and dequantized in the kernel,
    // along its rows (n, k), where folded into f32 panels it streamed 4x the bytes (QDQ
    // MobileNetV3's 1024 -> 1000 Gemm: 4 MB a run at 29 GB/s, 0.145 ms; now 0.096).
    right_rows = b.cast(compute).transpose(-1, -2);
  } else if ((n.is_known() && n.value() % 4 == 0) || symbolic_columns_in_rows(a, n)) {
    // Where narrow floats are stored wide (the CPU), the copy holds the widened b, as a conv's
    // filter panels do, so that a constant b folds into f32 panels: cast after the copy, the fold
    // realised the cast in b's own row-major order, and BERT-base fp16's FFN matmuls read rows of
    // their weight 3072 bytes apart (80 against 260 GFLOP/s in fp32). Elsewhere the copy keeps the
    // narrow type: half the bytes, and the f16 operand tensor cores take.
    bool widen_first = graph_target_caps().narrow_floats_stored_wide;
    Tensor rows_of_b = widen_first ? b.cast(compute) : b;
    // An 8-bit integer b (an integer matmul's weight) keeps its own width through the copy: a
    // quarter of the bytes of i32, and the operand 8-bit dot-product instructions take.
    Tensor narrow = widened_8bit_integer(b);
    if (narrow.defined()) rows_of_b = narrow;
    const int64_t dot_lanes = n.is_known() ? graph_target_caps().dot_product_lanes(n.value()) : 0;
    if (narrow.defined() && dot_lanes > 0 && !has_symbolic_shape(b) && b.dim(-2) % 4 == 0 && b.dim(-2) >= 16)
      rows_of_b = in_dot_product_panels(rows_of_b, dot_lanes);
    else if (!has_symbolic_shape(b) && n.value() * b.dim(-2) >= kPanelMinimumElements)
      rows_of_b = in_panels(rows_of_b);
    else if (large && !is_buffer_view(b) && !n.is_known() && computed_by_reduction(b))
      // A symbolic b computed by a reduction (attention's keys, a projection's output) is stored in
      // its own order, then copied transposed (transposed_block_opts in symbolic_tiles.cpp): fused
      // into the projection, the copy made it scatter each vector of its stores a symbolic key
      // count apart (the legacy BERT's key projections 5-10 % slower and no faster scores).
      rows_of_b = contiguous(contiguous(rows_of_b.transpose(-1, -2)).transpose(-1, -2));
    else if (large && !is_buffer_view(b)) rows_of_b = contiguous(rows_of_b);
    right_rows = rows_of_b.cast(compute).transpose(-1, -2);
  } else {
    right_rows = b.cast(compute).transpose(-1, -2);
    if (large && !is_buffer_view(right_rows)) right_rows = contiguous(right_rows);
  }
  Tensor right = right_rows.unsqueeze(-3);
  Tensor product = left.mul(right).sum({-1});  // bool: AND, then the i64 count, then != 0 below
  if (ndim() == 1) product = product.squeeze({-2});
  if (other.ndim() == 1) product = product.squeeze({-1});
  // An empty contraction is all zeros; say so directly instead of emitting a loop of no iterations.
  if (k.is(0)) return expand_to(Tensor::scalar(0.0, type), dims_of(product));
  return product.cast(type);
}

}  // namespace kiln
