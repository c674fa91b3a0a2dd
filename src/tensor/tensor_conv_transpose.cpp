// Tensor::conv_transpose: a transposed convolution as gathers over its output's phases.
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
#include "tensor/tensor_internal.h"
#include "tensor/nn_helpers.h"
#include "tensor/winograd.h"

namespace kiln {

using namespace nn;

// ---- Transposed convolution ----
//
// Along one spatial axis, a transposed convolution scatters: input element i, through kernel tap k,
// adds to output t = i·s + k·d of the full (unpadded) output, and the output we return is
// o = t - pad_begin. The textbook way to compute it as a gather puts s-1 zeros between the input
// elements and slides the flipped kernel over that: simple, but (s-1)/s of the products per axis
// (3/4 of them for a 2-D stride 2) multiply an inserted zero.
//
// The phase split avoids them. Write t = q·s + r with 0 <= r < s. Since i·s ≡ 0 (mod s), only taps
// with k·d ≡ r (mod s) reach positions of residue r. With g = gcd(s, d), k·d mod s repeats with
// period s/g in k, so those taps are k0, k0 + s/g, k0 + 2·s/g, … (J of them, k0 < s/g the smallest
// one), or none at all when no k < s/g hits r (g does not divide r, or K is too short). Tap
// k = k0 + j·s/g reads input i = (t - k·d)/s = q - m0 - j·(d/g), where m0 = (k0·d - r)/s >= 0. So
// phase r is y_r[q] = Σ_j x[q - m0 - j·d/g] · w[k0 + j·s/g]: a stride-1 transposed convolution of
// the input itself (no zeros) with the sub-kernel w[k0::s/g] at dilation d/g, shifted by m0; that
// is an ordinary direct conv with the flipped sub-kernel and begin pad m0 + (J-1)·d/g - q_first.
// Per axis the phases' taps partition the kernel, so summed over phases the multiply-adds are
// exactly the non-zero ones: a 1/s share of the zero-insertion count per axis.
//
// In n dimensions a phase is a choice of residue per axis (Π s phases), each one direct conv whose
// sub-kernel is a strided slice of the weight on every axis. Each phase is computed only for the q
// whose t falls inside the requested output, then zero-padded onto a q grid shared by all phases of
// the axis; stacking the phases of an axis on a new axis after it and merging the two gives
// position q·s + r from phase r (a view and a select per element, like concat), and a final crop
// removes the grid's ragged ends. A phase no tap reaches, or whose reads fall entirely in padding,
// is a zero constant. The phases are reductions under padding, so each is a kernel of its own, and
// the interleave (with the bias and any elementwise op that follows) is one more kernel.
namespace {

int64_t floor_divide(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0); }

// Residue r of one spatial axis (see above).
struct AxisPhase {
  int64_t taps = 0;        // J: kernel taps reaching the phase; 0 = none (the phase is zero)
  int64_t first_tap = 0;   // k0; the others follow every tap_step taps
  int64_t tap_step = 1;    // s/g
  int64_t input_step = 1;  // d/g: the sub-kernel's dilation
  int64_t shift = 0;       // m0 = (k0·d - r)/s
  int64_t first = 0, count = 0;  // the q with q·s + r in [pad_begin, pad_begin + output)
};

struct AxisPhases {
  int64_t stride = 1, input = 0;
  int64_t begin = 0, length = 0;  // the q grid shared by all phases: [begin, begin + length)
  int64_t offset = 0, output = 0;  // the output is [offset, offset + output) of the interleaved grid
  std::vector<AxisPhase> phases;   // by residue
};

AxisPhases axis_phases(int64_t input, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_begin,
                       int64_t output) {
  AxisPhases axis;
  axis.stride = stride;
  axis.input = input;
  axis.output = output;
  axis.begin = pad_begin / stride;
  axis.length = (pad_begin + output + stride - 1) / stride - axis.begin;
  axis.offset = pad_begin - axis.begin * stride;
  int64_t common = std::gcd(stride, dilation);
  for (int64_t r = 0; r < stride; ++r) {
    AxisPhase phase;
    phase.tap_step = stride / common;
    phase.input_step = dilation / common;
    for (int64_t k = 0; k < std::min(kernel, phase.tap_step); ++k)
      if (k * dilation % stride == r) {
        phase.first_tap = k;
        phase.taps = (kernel - 1 - k) / phase.tap_step + 1;
        break;
      }
    if (phase.taps > 0) {
      phase.shift = (phase.first_tap * dilation - r) / stride;
      phase.first = -floor_divide(r - pad_begin, stride);  // ceil((pad_begin - r) / s)
      int64_t last = floor_divide(pad_begin + output - 1 - r, stride);
      phase.count = std::max<int64_t>(0, last - phase.first + 1);
    }
    axis.phases.push_back(phase);
  }
  return axis;
}

// One phase (a residue per axis) on the shared q grid, (N, F, length…). `weight` is (F, C/g, K…),
// not flipped; input and weight are already in the compute type.
Tensor phase_output(const Tensor& input, const Tensor& weight, int64_t groups, const std::vector<AxisPhases>& axes,
                    const std::vector<const AxisPhase*>& phase) {
  size_t n = axes.size();
  Shape grid{input.dim(0), weight.dim(0)};
  for (const AxisPhases& a : axes) grid.push_back(a.length);
  ConvOptions direct;
  direct.groups = groups;
  std::vector<int64_t> begin, end, grid_pads{0, 0, 0, 0};
  Tensor sub = weight;
  for (size_t i = 0; i < n; ++i) {
    const AxisPhase& p = *phase[i];
    const AxisPhases& a = axes[i];
    if (p.taps == 0 || p.count == 0) return Tensor::zeros(grid, input.dtype());
    int64_t reach = (p.taps - 1) * p.input_step;
    int64_t before = p.shift + reach - p.first;            // may be negative: a crop
    int64_t after = p.count + reach - a.input - before;    // so that the conv gives `count` outputs
    // The reads span input indices [-before, input + after): none inside means only zeros.
    if (before <= -a.input || after <= -a.input) return Tensor::zeros(grid, input.dtype());
    begin.push_back(before);
    end.push_back(after);
    direct.dilation.push_back(p.input_step);
    auto axis = static_cast<int64_t>(i) + 2;
    sub = sub.slice(axis, p.first_tap, p.first_tap + (p.taps - 1) * p.tap_step + 1, p.tap_step);
    grid_pads.push_back(p.first - a.begin);
    grid_pads.push_back(a.begin + a.length - p.first - p.count);
  }
  // The phase's pads (and crops) as a view of the input, not conv padding: conv would copy a padded
  // input into a buffer of its own, one more kernel for every phase of these small convs.
  Tensor flipped = sub.flip(last_axes(static_cast<int64_t>(n), sub.ndim()));
  Tensor padded = input.pad(spatial_pad_list(begin, end));
  return pad_zero(padded.conv(flipped, Tensor(), direct), grid_pads);
}

// Interleaves the phases of axes i… (residues of axes before i fixed in `phase`): the phases of
// axis i are stacked on a new axis after it, and (length, s) merges into length·s.
Tensor interleave_phases(const Tensor& input, const Tensor& weight, int64_t groups, const std::vector<AxisPhases>& axes,
                         std::vector<const AxisPhase*>& phase, size_t i) {
  if (i == axes.size()) return phase_output(input, weight, groups, axes, phase);
  std::vector<Tensor> parts;
  for (const AxisPhase& p : axes[i].phases) {
    phase[i] = &p;
    parts.push_back(interleave_phases(input, weight, groups, axes, phase, i + 1));
  }
  if (parts.size() == 1) return parts[0];
  auto axis = static_cast<int64_t>(i) + 2;
  Shape merged = parts[0].shape();
  merged[static_cast<size_t>(axis)] *= axes[i].stride;
  return Tensor::stack(parts, axis + 1).reshape(merged);
}

}  // namespace

// Stride 1 everywhere: a direct convolution with the flipped kernel (channel axes swapped per
// group), padded by d·(K-1) - pad (negative pads crop) plus output_padding at the end. Any stride
// above 1: the phase split above.
namespace {

// x with `stride` - 1 zeros after each element along `axis` but the last: length (n - 1)·stride + 1.
Tensor spread_with_zeros(const Tensor& x, int64_t axis, int64_t stride) {
  Tensor column = x.unsqueeze(axis + 1);
  Dims pads(2 * static_cast<size_t>(axis) + 4, 0);
  pads.back() = stride - 1;
  Dims merged = dims_of(x);
  Dim length = merged[static_cast<size_t>(axis)];
  merged[static_cast<size_t>(axis)] = length * Dim(stride);
  // (…, n, stride, …) → (…, n·stride, …)
  Tensor spread = reshape_within(pad_zero_dims(column, pads), merged);
  DimRanges kept;
  for (const Dim& size : merged) kept.emplace_back(0, size);
  kept[static_cast<size_t>(axis)] = {0, length * Dim(stride) - Dim(stride - 1)};
  return shrink_within(spread, kept);
}

}  // namespace

Tensor Tensor::conv_transpose(const Tensor& weight, const Tensor& bias, const ConvOptions& options) const {
  require_defined(*this, "conv_transpose", "the input");
  require_defined(weight, "conv_transpose", "the weight");
  require_batch_channels(*this, 3, "conv_transpose");
  size_t n = static_cast<size_t>(ndim()) - 2;
  int64_t channels = dim(1), groups = options.groups;
  if (weight.ndim() != ndim())
    throw UserError(str_cat("conv_transpose: weight of shape ", shape_string(weight.shape()), " must have ", ndim(),
                            " axes (C, F/groups, K…) for input ", dims_string(dims_of(*this))));
  if (groups < 1 || channels % groups != 0 || weight.dim(0) != channels)
    throw UserError(str_cat("conv_transpose: input ", dims_string(dims_of(*this)), " and weight ", shape_string(weight.shape()),
                            " do not fit groups = ", groups, " (need weight axis 0 = C, divisible by groups)"));
  std::vector<int64_t> stride = per_axis(options.stride, n, 1, 1, "conv_transpose", "stride");
  std::vector<int64_t> dilation = per_axis(options.dilation, n, 1, 1, "conv_transpose", "dilation");
  std::vector<int64_t> output_padding = per_axis(options.output_padding, n, 0, 0, "conv_transpose", "output_padding");
  auto [pad_begin, pad_end] = begin_end_pads(options.padding, n, false, "conv_transpose");
  bool symbolic_image = false;
  for (size_t i = 0; i < n; ++i) {
    Dim size = dim_of(*this, static_cast<int64_t>(i) + 2);
    if (size.is(0))
      throw UserError(str_cat("conv_transpose: input of shape ", dims_string(dims_of(*this)), " has an empty spatial axis"));
    symbolic_image = symbolic_image || !size.is_known();
  }
  // Over an image of any size the phases below (known lengths) are not available: a strided axis
  // is spread instead, s - 1 zeros after each element, and the stride-1 form below runs over it.
  // Correct for every size, at s times the multiply-adds per strided axis (the zeros' products).
  Tensor source = *this;
  if (symbolic_image)
    for (size_t i = 0; i < n; ++i)
      if (stride[i] > 1) {
        source = spread_with_zeros(source, static_cast<int64_t>(i) + 2, stride[i]);
        stride[i] = 1;
      }

  int64_t group_channels = channels / groups, group_filters = weight.dim(1), filters = groups * group_filters;
  Shape kernel(weight.shape().begin() + 2, weight.shape().end());
  // (C, F/g, K…) → (g, C/g, F/g, K…) → (g, F/g, C/g, K…) → (F, C/g, K…).
  Shape split{groups, group_channels, group_filters};
  split.insert(split.end(), kernel.begin(), kernel.end());
  std::vector<int64_t> order{0, 2, 1};
  for (size_t i = 0; i < n; ++i) order.push_back(3 + static_cast<int64_t>(i));
  Shape merged{filters, group_channels};
  merged.insert(merged.end(), kernel.begin(), kernel.end());
  Tensor regrouped = weight.reshape(split).permute(order).reshape(merged);

  if (std::all_of(stride.begin(), stride.end(), [](int64_t s) { return s == 1; })) {
    ConvOptions direct;
    direct.dilation = dilation;
    direct.groups = groups;
    std::vector<int64_t> begin, end;
    for (size_t i = 0; i < n; ++i) {
      begin.push_back(dilation[i] * (kernel[i] - 1) - pad_begin[i]);
      end.push_back(dilation[i] * (kernel[i] - 1) - pad_end[i] + output_padding[i]);
    }
    direct.padding = begin;
    direct.padding.insert(direct.padding.end(), end.begin(), end.end());
    return source.conv(regrouped.flip(last_axes(static_cast<int64_t>(n), ndim())), bias, direct);
  }

  if (bias.defined() && bias.shape() != Shape{filters})
    throw UserError(str_cat("conv_transpose: bias of shape ", shape_string(bias.shape()), " must have shape (", filters,
                            ",)"));
  ScalarType type = bias.defined() ? promote_types(DType(promoted(*this, weight)), DType(bias.dtype())).scalar()
                                   : promoted(*this, weight);
  if (type == ScalarType::Bool) throw UserError("conv_transpose: bool tensors are not supported");
  ScalarType compute = compute_type(type);
  std::vector<AxisPhases> axes;
  for (size_t i = 0; i < n; ++i) {
    int64_t input = dim(static_cast<int64_t>(i) + 2);
    int64_t output = (input - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1 - pad_begin[i] - pad_end[i] +
                     output_padding[i];
    if (output < 1)
      throw UserError(str_cat("conv_transpose: padding ", list_string(options.padding), " leaves no output of input ",
                              shape_string(shape()), " with weight ", shape_string(weight.shape()), " (spatial axis ",
                              i, ")"));
    axes.push_back(axis_phases(input, kernel[i], stride[i], dilation[i], pad_begin[i], output));
  }
  std::vector<const AxisPhase*> phase(n, nullptr);
  Tensor result = interleave_phases(cast(compute), regrouped.cast(compute), groups, axes, phase, 0);
  Ranges crop = full_ranges(result);
  for (size_t i = 0; i < n; ++i) crop[i + 2] = {axes[i].offset, axes[i].offset + axes[i].output};
  result = result.shrink(crop);
  if (bias.defined()) result = result + per_channel(bias.cast(compute), result, "conv_transpose", "bias");
  return result.cast(type);
}

}  // namespace kiln
