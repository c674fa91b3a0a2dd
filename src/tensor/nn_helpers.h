// What the neural-network composites (tensor_matmul.cpp, tensor_conv.cpp, tensor_conv_transpose.cpp,
// tensor_pool.cpp, tensor_nn.cpp) share: the types they compute in, argument checks and per-axis
// options, sliding windows as views, per-channel parameters, pooling geometry, index maps, and a
// graph walk. Internal to the tensor layer (namespace kiln::nn).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "tensor/tensor_internal.h"

namespace kiln::nn {

// Whether a type is a half float (f16, bf16) or any float.
bool is_half(ScalarType type);

bool is_float(ScalarType type);

// The type products and sums are computed in: half floats widen to f32 (rounded once at the end).
ScalarType compute_type(ScalarType type);

// Float-only ops (softmax, norms, average pooling) turn integers and bool into f32, like mean().
ScalarType float_result(ScalarType type);

ScalarType promoted(const Tensor& a, const Tensor& b);

void require_defined(const Tensor& t, std::string_view operation, std::string_view what);

// (Dims: the other axes may be symbolic, a batch of any size.)
Tensor with_axis_sizes(const Tensor& t, int64_t axis, const Shape& sizes);

std::string list_string(const std::vector<int64_t>& values);

// A per-spatial-axis option: empty = `fallback` everywhere, one value = that value everywhere.
std::vector<int64_t> per_axis(const std::vector<int64_t>& values, size_t axes, int64_t fallback, int64_t minimum,
                              std::string_view operation, std::string_view name);

// Padding as (begin pads…, end pads…); n values mean the same pad at both ends, one value the
// same pad everywhere.
std::pair<std::vector<int64_t>, std::vector<int64_t>> begin_end_pads(const std::vector<int64_t>& padding, size_t axes,
                                                                     bool allow_negative, std::string_view operation);

// pad() arguments for the spatial axes (after the first two).
std::vector<int64_t> spatial_pad_list(const std::vector<int64_t>& begin, const std::vector<int64_t>& end);

// Replaces `axis` (size i) by the two axes (windows, kernel): element [o, j] is x[o·s + j·d]. Needs
// (windows-1)·s + (kernel-1)·d < i. Only views, so the window is index arithmetic in the consumer.
//  - Windows that do not overlap (d = 1, k <= s): group the axis as (o, s) and keep k of each group.
//  - Otherwise (tinygrad's _pool trick): tile the axis, then read it as rows of length L = f·i + d.
//    Row j starts at j·L ≡ j·d (mod i), so row j is x shifted by j·d; then take every s-th column.
//    The index is (j·L + o·s) mod i, which the simplifier reduces to j·d + o·s from the bound above.
// Over a symbolic axis (an image or a signal of any length i; x already padded) the axis is first
// padded with zeros to its largest length, a known one, and windowed as above for the windows of
// that length; the windows axis is then cut to the count at i. No window that is kept reads the
// zeros, and the index stays j·d + o·s, which the simplifier reduces as for a known length from
// known bounds; the padding's compare against i on each load of x is decided true by the
// simplifier where the windows' loop end proves it (passes/loop_end_bounds.h), else it stays.
Tensor window_axis(const Tensor& x, int64_t axis, int64_t kernel, int64_t stride, int64_t dilation,
                   const Dim& window_count);

Tensor window_axis_symbolic(const Tensor& x, int64_t axis, int64_t kernel, int64_t stride, int64_t dilation,
                            const Dim& windows);

// Sliding windows over the last n axes: (pre…, I1…In) → (pre…, O1…On, K1…Kn).
Tensor pool_windows(const Tensor& x, const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                    const std::vector<int64_t>& dilation, const Dims& windows);

std::vector<int64_t> last_axes(int64_t count, int64_t ndim);

// A per-channel parameter (C) as (1, C, 1, …) for an (N, C, …) tensor.
Tensor per_channel(const Tensor& parameter, const Tensor& x, std::string_view operation, std::string_view name);

void require_batch_channels(const Tensor& x, int64_t minimum_ndim, std::string_view operation);

// Normalises over `axes` (kept as size 1): (x - mean) / sqrt(var + eps), two-pass for accuracy.
Tensor normalize(const Tensor& x, const std::vector<int64_t>& axes, double epsilon);

struct PoolGeometry {
  std::vector<int64_t> kernel, stride, dilation, pad_begin, pad_end;
  Dims windows;  // symbolic where the input's size is (an image of any size)
  std::vector<int64_t> extra_end;  // ceil_mode: padding past pad_end for the last partial window
};

PoolGeometry pool_geometry(const Tensor& x, const PoolOptions& options, std::string_view operation);

// The lowest value of a type: max pooling pads with it.
double lowest_value(ScalarType type);

// y[o] = x[clamp(floor((a·o + b) / c), 0, n-1)] along `axis`, o in [0, out), as views only: repeat
// each element c times (element j is x[j / c]), extend both ends with edge copies for the clamp,
// then take every a-th element from b. So a resize is index arithmetic, with no gather.
Tensor affine_index_map(const Tensor& x, int64_t axis, int64_t a, int64_t b, int64_t c, int64_t out);

// A host-computed per-position vector along `axis` of an ndim tensor, as a broadcastable constant.
Tensor axis_constant(const std::vector<double>& values, int64_t axis, int64_t ndim, ScalarType type);

// Whether t has arithmetic of its own (not only views of buffers and constants).
bool computes(const Tensor& t);

// t copied into a buffer in `order` (a permutation of its axes) and viewed again in its own order.
Tensor stored_in_order(const Tensor& t, const std::vector<int64_t>& order);

// A view whose rows are not contiguous runs of its source: a permute that moves the last axis, or
// a reshape that merges permuted axes (attention heads (h, s, d) → (s, h·d)). Read as the left
// operand of a matmul, each row is gathered in pieces (BERT's output projection read 12 runs of 64
// per row, 3x slower than a contiguous row).
bool rows_are_permuted(const Tensor& t);

// Whether spatial pads (before, after) add anything: negative pads crop and zeros do nothing.
bool pads_anything(const std::vector<int64_t>& before, const std::vector<int64_t>& after);

// Visits each node of the graph under `root` once, sources after their consumer; `visit(node)`
// says whether to go on into node's sources.
template <typename Visit>
void walk(const UOpPtr& root, Visit&& visit) {
  std::vector<const UOp*> stack{root.get()};
  std::unordered_set<const UOp*> seen;
  while (!stack.empty()) {
    const UOp* node = stack.back();
    stack.pop_back();
    if (!seen.insert(node).second || !visit(node)) continue;
    for (const UOpPtr& source : node->srcs()) stack.push_back(source.get());
  }
}

}  // namespace kiln::nn
