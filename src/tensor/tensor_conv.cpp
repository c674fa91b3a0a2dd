// Tensor::conv: a convolution as one sum over sliding windows (views of the input), with the
// weight's and input's layouts chosen for the kernel (filter panels, channels-last), convs split
// into tap regions where padding would waste work, and Winograd where it pays (winograd.h).
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
#include "tensor/tensor_internal.h"
#include "tensor/nn_helpers.h"
#include "tensor/winograd.h"

namespace kiln {

using namespace nn;

namespace {

// Filters per panel of a conv weight: one vector of fp32 of the host (16 on AVX-512, 8 on AVX2),
// at least 8. With 16-filter panels on AVX2, whose register tile over 7 pixel rows is one 8-lane
// column, every reduction step used half of a 64-byte line and the weight strip took twice its
// size in L1 (ResNet-50 on an AVX2 Zen 3, one thread: 136-144 -> 132-134 ms, alternating runs).
int64_t filter_panel() {
  return std::clamp<int64_t>(host_cpu_caps().vector_lanes(dtypes::f32), 8, 16);
}

// The conv weight (F, C/g, K…) stored in panels of P = filter_panel() filters, (g, F/g/P, C/g, K…,
// P), and viewed again as (F, C/g, K…). One step of the reduction (a channel and a tap) then reads
// the weights of P consecutive filters side by side (P = 16: one 64-byte line), and the next step
// the ones after them, so the optimisation layer can make the filters a conv's vector axis: a strided conv's output pixels read
// strided input (a gather per lane), and a 7×7 image pads to 8 or 64 lanes, but a panel's filters
// are contiguous. A register tile over filters (the pixels as vector) reads its rows from one line
// too. (All filters innermost, (g, C/g, K…, F/g), was 3x slower on ResNet-50's 1x1 convs: with
// F = 1024 each row's next weight was 4 KB away.) A constant weight is reordered once at compile
// time (fold_constants); weights with fewer than P filters per group (depthwise) stay as they are.
Tensor filters_in_panels(const Tensor& weight, int64_t groups) {
  int64_t group_filters = weight.dim(0) / groups, panel = filter_panel();
  if (group_filters % panel != 0) return weight;
  Shape grouped{groups, group_filters / panel, panel};
  grouped.insert(grouped.end(), weight.shape().begin() + 1, weight.shape().end());
  int64_t rank = static_cast<int64_t>(grouped.size());
  std::vector<int64_t> to_panels{0, 1}, back{0, 1, rank - 1};
  for (int64_t axis = 3; axis < rank; ++axis) to_panels.push_back(axis);
  to_panels.push_back(2);
  for (int64_t axis = 2; axis < rank - 1; ++axis) back.push_back(axis);
  Tensor panels = contiguous(weight.reshape(grouped).permute(to_panels));
  return panels.permute(back).reshape(weight.shape());
}

// The orders of the channels-last copies Tensor::conv makes, which computed_channels_last also
// recognises: an activation (N, C, H, W) stored (N, H, W, C), a depthwise weight (C, 1, KH, KW)
// stored (KH, KW, C, 1).
const std::vector<int64_t> kChannelsLast{0, 2, 3, 1};
const std::vector<int64_t> kTapsFirst{2, 3, 0, 1};

// Whether t is computed (by elementwise ops and views) from a value it reads through a permutation
// that moves the value's last axis, a transposed read; stored values and reductions end the search.
bool computed_from_transposed_rows(const Tensor& t) {
  bool transposed = false;
  walk(t.data().node, [&](const UOp* node) {
    if (node->op() == Ops::REDUCE_AXIS || node->op() == Ops::CONTIGUOUS || node->op() == Ops::BUFFER) return false;
    if (node->op() == Ops::PERMUTE) {
      const auto& order = node->arg_list();
      transposed = transposed || (!order.empty() && order.back() != static_cast<int64_t>(order.size()) - 1);
    }
    return !transposed;
  });
  return transposed;
}

// Whether a reduction reads a reordered copy, CONTIGUOUS(PERMUTE(…)): a conv's weight in filter
// panels (filters_in_panels) or its channels-last input. A depthwise conv over an NCHW input reads
// neither; computed in channels-last order it would gather each vector of channels from as many
// planes (MobileNetV2's depthwise convs at 14×14 without the pointwise hint: 0.39 -> 1.47 ms).
bool reads_reordered_copy(const UOp* reduction) {
  bool reordered = false;
  walk(reduction->src(0), [&](const UOp* node) {
    if (node->op() != Ops::CONTIGUOUS) return !reordered;
    reordered = reordered || node->src(0)->op() == Ops::PERMUTE;
    return false;
  });
  return reordered;
}

// Whether t is computed from sums of products that read a reordered copy (convs over filter
// panels: at least one reduction, every one a sum over a MUL, so no pool, and reads_reordered_copy)
// by elementwise ops and views, without a PAD between (a concatenation pads its inputs).
// CONTIGUOUS copies and buffers end the search.
bool computed_from_products_unpadded(const Tensor& t) {
  bool reduces = false, other = false;
  walk(t.data().node, [&](const UOp* node) {
    if (other || node->op() == Ops::CONTIGUOUS) return false;
    if (node->op() == Ops::PAD) other = true;
    if (node->op() != Ops::REDUCE_AXIS) return !other;
    bool sum_of_products = !node->arg_list().empty() && node->arg_list()[0] == static_cast<int64_t>(Ops::ADD) &&
                           node->src(0)->op() == Ops::MUL;
    other = other || !sum_of_products || !reads_reordered_copy(node);
    reduces = true;
    return false;
  });
  return reduces && !other;
}

// Whether a 2-D image of `windows` pixels fills whole vectors of the host's fp32 lanes.
bool fills_vectors(const std::vector<int64_t>& windows) {
  return (windows[0] * windows[1]) % host_cpu_caps().vector_lanes(dtypes::f32) == 0;
}

// The image test of reads_channels_last below: whether a 1x1 conv over `channels` input channels
// at the 2-D image `windows` reads a channels-last copy of its input on the host CPU.
bool channels_last_image(int64_t channels, const std::vector<int64_t>& windows) {
  constexpr int64_t kLongReduction = 256;
  if (graph_target_caps().output_grid) return false;  // a GPU thread per output reads NCHW coalesced
  const TargetCaps& caps = host_cpu_caps();
  int64_t lanes = caps.vector_lanes(dtypes::f32);
  if (channels < lanes) return false;
  return (windows[0] * windows[1]) % lanes != 0 || (caps.vector_registers >= 32 && channels >= kLongReduction);
}

// Whether a depthwise 2-D conv (one filter per channel) computes channels-last: its padded input is
// copied (or stored by its producer) in (N, H, W, C) order, its weight is stored (K…, C), and its
// output is computed in (N, H, W, C) order by the 1x1 conv that follows it. That is the case where
// that 1x1 conv reads a channels-last copy of this conv's output anyway (channels_last_image, the
// same test on the same image): MobileNetV2's blocks at 14×14 and 7×7. In NCHW the depthwise conv
// vectorised 14 or 7 pixels of a row in 16 lanes, and its output and input each went through a
// copy of their own (the 1x1 conv before it stored its filters, which it vectorises, one plane
// apart). Channels-last, each step loads one vector of consecutive channels from the input and
// the weights, the producer stores its filter vector contiguously into the padded buffer, and the
// output is stored in the order the next conv reads. One thread, AVX-512 Xeon: the 14×14 and 7×7
// depthwise convs 16-36 % faster, and per block two copy kernels gone (the padded input's, now
// small kernels that zero the border, and the 1x1 conv's channels-last copy); MobileNetV2 8 %
// faster at one and two threads. The readers come from the ONNX graph (`reader_filters`,
// ConvOptions::pointwise_reader_filters): without such a reader the output would be stored NCHW.
// Where the 1x1 conv after it reads NCHW (28×28 and 56×56 images of under 256 channels), a
// channels-last depthwise conv would store a transposed output: 7x slower on 192×28×28.
// Under `--precision bf16` on AMX tiles every such conv is channels-last: the pointwise convs around
// it compute channels-last (tensor_conv_bf16.cpp), and an NCHW depthwise conv between them read
// and wrote across their rows (MobileNetV2 bf16 at one thread: 9.1 -> 8.7 ms).
// Likewise where its input is computed from a channels-last value read through a transposing view
// (the pixels × filters sums of a QDQ model's integer 1x1 conv over a 14×14 or 7×7 image): an NCHW
// padded copy would gather every element across those rows (MobileNetV3 QDQ at one thread: 2.07 ->
// 1.83 ms, its requantizations of the 1x1 convs' sums now channels-last passes).
bool depthwise_channels_last(const Tensor& padded, const Shape& kernel, int64_t groups, int64_t filters,
                             const std::vector<int64_t>& windows, int64_t reader_filters, bool transposed_input) {
  if (kernel.size() != 2 || groups < 2 || groups != filters || groups != padded.dim(1)) return false;
  if (bf16_products() || transposed_input) return true;
  if (reader_filters <= 0 || reader_filters % filter_panel() != 0) return false;
  return channels_last_image(groups, windows);
}

// Whether t is computed by one reduction (and elementwise ops after it) that is a channels-last
// depthwise conv: it reads both copies that Tensor::conv makes for one, the input's
// CONTIGUOUS(PERMUTE(x, (0, 2, 3, 1))) and the weight's CONTIGUOUS(PERMUTE(w, (2, 3, 0, 1))).
// (Other convs that read a channels-last input, with their filters as the vector, were slower
// storing channels-last: SqueezeNet, DenseNet and Inception-v2 2-6 %.) The nodes behind a
// CONTIGUOUS are another kernel's and are not looked at.
bool computed_channels_last(const Tensor& t) {
  std::vector<const UOp*> reductions;
  walk(t.data().node, [&](const UOp* node) {
    if (node->op() == Ops::REDUCE_AXIS) reductions.push_back(node);
    return node->op() != Ops::CONTIGUOUS && node->op() != Ops::REDUCE_AXIS;
  });
  if (reductions.size() != 1) return false;
  bool input_copy = false, weight_copy = false;
  walk(reductions[0]->src(0), [&](const UOp* node) {
    if (node->op() != Ops::CONTIGUOUS) return true;
    const UOp* source = node->src(0).get();
    if (source->op() == Ops::PERMUTE) {
      input_copy |= source->arg_list() == kChannelsLast;
      weight_copy |= source->arg_list() == kTapsFirst;
    }
    return false;
  });
  return input_copy && weight_copy;
}

// Whether a conv reads its input through a channels-last copy (N, H, W, C), viewed again as
// (N, C, H, W): a 2-D 1x1 conv without padding whose output image does not fill whole vectors (7×7,
// 14×14, SqueezeNet's 13×13), over at least one panel of filters. Such a conv takes its filters as
// the vector (filters_in_panels) and its pixels as the register tile's rows, so every reduction step
// broadcasts one input value per row. In NCHW those values lie a whole image apart from one channel
// to the next: each step read new cache lines, and a long reduction's lines did not stay in L1
// (ResNet-50's 1x1 2048->512 at 7×7 ran at 28 GFLOP/s on an AVX2 Zen 3). Channels-last, each row
// reads one sequential stream (the same conv: 47 GFLOP/s). The copy is one pass over the input,
// which the conv reads F/P times. Images that fill whole vectors keep their pixels as the vector
// and read NCHW rows contiguously already -- except, with 32 vector registers, over a reduction of
// at least kLongReduction channels: there the register tile takes the filters as its vector even
// on whole vectors of pixels (two columns of up to 8 rows, symbolic_tiles.cpp), and the NCHW lines of a
// 28×28 or 56×56 image, one per step, leave L1 long before a row tile's reduction ends. ResNet-50's
// 1x1 512->128 at 28×28, one thread, AVX-512 Xeon: 112-117 GFLOP/s in NCHW, 161 channels-last
// (0.88 -> 0.64 ms, plus 0.14 ms for the copy); the model 0.95x at one thread, 0.99x at two. Shorter
// reductions (MobileNetV2's 144 channels at 56×56, YOLOX) keep NCHW: copying every 1x1 conv's input
// made those models 12-23 % slower.
bool reads_channels_last(const Tensor& input, const Shape& kernel, int64_t groups, int64_t filters,
                         const std::vector<int64_t>& windows) {
  if (kernel != Shape{1, 1} || groups != 1 || filters % filter_panel() != 0) return false;
  return channels_last_image(input.dim(1), windows);
}

// A padded 2-D conv whose padded input does not fit in half the L2 cache is copied into a
// channels-last (N, H, W, C) buffer instead of a padded NCHW one: the register tile takes the
// filters as its vector and broadcasts one input value per pixel row and reduction step, and in NCHW
// those values lie a whole image apart from one channel to the next, so every step of a 256-channel
// reduction touched a new page (VGG-19's 3x3 256->256 convs at 56x56: 114 GFLOP/s on a 180 GFLOP/s
// AVX-512 core, 27-31 beside another build; channels-last, where each pixel's channels are one
// sequential stream, 142 and 61-73). The copy is the padded copy's own pass, transposed, and slower
// than the plain copy (3 GB/s against 13), so it is made only where the conv reads its input several
// times over: inputs that fit in the cache (14x14 and smaller) keep NCHW, where the layouts ran the
// same, and so do convs of fewer than 64 filters (one or two register-tile strips): DenseNet-121's
// 128->32 at 56x56 ran no faster and the transposed copies made the model 7 % slower.
bool pads_channels_last(const Tensor& padded, const Shape& kernel, int64_t groups, int64_t filters,
                        const std::vector<int64_t>& stride) {
  constexpr int64_t kMinimumFilters = 64;
  if (kernel.size() != 2 || kernel == Shape{1, 1} || groups != 1 || filters % filter_panel() != 0 ||
      filters < kMinimumFilters)
    return false;
  if (std::any_of(stride.begin(), stride.end(), [](int64_t s) { return s != 1; })) return false;
  if (graph_target_caps().output_grid) return false;
  if (has_symbolic_shape(padded)) return false;  // a symbolic batch keeps the NCHW copy (not measured)
  const TargetCaps& caps = host_cpu_caps();
  // (in the type the CPU stores it in: f32 for f16 and bf16, TargetCaps::narrow_floats_stored_wide)
  int64_t bytes = padded.numel() / std::max<int64_t>(padded.dim(0), 1) *
                  DType(compute_type(padded.dtype())).scalar_bytes();
  return padded.dim(1) >= caps.vector_lanes(dtypes::f32) && 2 * bytes > caps.l2_bytes;
}

// Whether a conv's input, weight and bias have shapes that fit one another (channels, groups,
// bias length). The rewrites below slice the weight; shapes that do not fit go to Tensor::conv as
// they are, whose error then names the weight the caller gave, not a slice of it.
bool shapes_fit_conv(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvOptions& options) {
  if (!x.defined() || !weight.defined() || x.ndim() < 3 || weight.ndim() != x.ndim()) return false;
  const int64_t groups = options.groups;
  const Dim channels = dim_of(x, 1);
  return channels.is_known() && groups >= 1 && weight.dim(1) * groups == channels.value() &&
         weight.dim(0) % groups == 0 && (!bias.defined() || bias.shape() == Shape{weight.dim(0)});
}

// A conv whose kernel taps at one end of a spatial axis read only zero padding, for every output
// and every image size the plan allows (the largest decides: a smaller image has fewer live
// taps), with those taps gone: the weight sliced to the live taps and the pads reduced by what
// they covered, so that the output keeps its size. An atrous conv over a small feature map is
// the case: DeepLabV3's ASPP branches of dilation 24 and 36 (pads alike) over 14×14 features read
// the image with their centre tap only, and computed 9 taps over a copy of 86×86 padded rows (2 of
// the model's 10 ms at one thread, 224² input). nullopt where every tap may read the image, or
// where a crop (a negative pad) would be needed over an image of symbolic size.
struct LiveTaps {
  Tensor weight;
  ConvOptions options;
};
std::optional<LiveTaps> without_dead_taps(const Tensor& x, const Tensor& weight, const ConvOptions& options) {
  if (!shapes_fit_conv(x, weight, Tensor(), options)) return std::nullopt;
  const size_t n = static_cast<size_t>(x.ndim()) - 2;
  std::vector<int64_t> stride = per_axis(options.stride, n, 1, 1, "conv", "stride");
  std::vector<int64_t> dilation = per_axis(options.dilation, n, 1, 1, "conv", "dilation");
  auto [pad_begin, pad_end] = begin_end_pads(options.padding, n, true, "conv");
  Tensor live = weight;
  bool trimmed = false;
  for (size_t i = 0; i < n; ++i) {
    const auto axis = static_cast<int64_t>(i) + 2;
    const Dim size = dim_of(x, axis);
    const int64_t image = size.max(), taps = weight.dim(axis), d = dilation[i], s = stride[i];
    const int64_t span_left = image + pad_begin[i] + pad_end[i] - d * (taps - 1) - 1;
    if (image <= 0 || span_left < 0 || taps <= 1) continue;  // no output: the conv says so itself
    const int64_t outputs = span_left / s + 1;
    // Tap k reads image row o·s + k·d − pad for outputs o < `outputs`: live when one lands inside.
    auto reads_image = [&](int64_t k) {
      int64_t offset = k * d - pad_begin[i];
      int64_t first = offset >= 0 ? 0 : (-offset + s - 1) / s;  // the first output at or past row 0
      return first < outputs && first * s + offset < image;
    };
    int64_t low = 0, high = taps - 1;
    while (low <= high && !reads_image(low)) ++low;
    while (high >= low && !reads_image(high)) --high;
    if (low > high || (low == 0 && high == taps - 1)) continue;
    const int64_t begin = pad_begin[i] - low * d, end = pad_end[i] - (taps - 1 - high) * d;
    if (!size.is_known() && (begin < 0 || end < 0)) continue;
    live = live.slice(axis, low, high + 1);
    pad_begin[i] = begin;
    pad_end[i] = end;
    trimmed = true;
  }
  if (!trimmed) return std::nullopt;
  ConvOptions reduced = options;
  reduced.stride = stride;
  reduced.dilation = dilation;
  reduced.padding = pad_begin;
  reduced.padding.insert(reduced.padding.end(), pad_end.begin(), pad_end.end());
  return LiveTaps{live, reduced};
}

// A stride-1 conv whose output keeps the input's size and whose taps along some axis reach few of
// its rows, computed as one conv per tap over the rows that tap reaches. Dilated (atrous) convs
// over small feature maps: DeepLabV3's ASPP branch of dilation 12 over 14×14 features reaches 14 +
// 2 + 2 rows with its three taps, where the conv computed 3 × 14 over a copy padded by 12 on each
// side. And in a plan for images of any size, a tap may read only padding at small sizes and the
// image at large ones (dilation 24 over 14×14 to 32×32 features), which without_dead_taps cannot
// drop and the conv computed in full.
// A tap at offset o reads input rows [max(o, 0), H + min(o, 0)) for output rows shifted by -o, an
// extent of max(|o|, H) - |o| (0 where the tap is dead: its kernels then run no iterations); its
// conv's output is zero-padded back to H rows (by min(H, |o|) on the side it does not reach), the
// taps' convs are summed and the bias added once. An axis of a dilated conv goes by tap where at
// its largest size the taps reach at most 3/4 of the rows a padded conv computes (dilation 12 over
// 32 rows: 32 + 20 + 20 of 3 × 32, a 2-D conv then computing 56 % of the padded one's work, which
// measured faster still); other axes keep their taps and pads in each tap's conv. DeepLabV3, one
// thread: 224² 5.9 -> 5.2 ms, 512² 47.6 -> 43-45; the plan for 224² to 512² at 224² 8.1-8.5 -> 6.0-6.2.
// nullopt where no axis qualifies, or where more than kMaxTapConvs convs would result.
constexpr int64_t kMaxTapConvs = 16;
std::optional<Tensor> conv_by_tap_regions(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                          const ConvOptions& options) {
  if (!shapes_fit_conv(x, weight, bias, options)) return std::nullopt;
  const size_t n = static_cast<size_t>(x.ndim()) - 2;
  std::vector<int64_t> stride = per_axis(options.stride, n, 1, 1, "conv", "stride");
  std::vector<int64_t> dilation = per_axis(options.dilation, n, 1, 1, "conv", "dilation");
  auto [pad_begin, pad_end] = begin_end_pads(options.padding, n, true, "conv");
  std::vector<bool> by_tap(n, false);
  int64_t convs = 1;
  for (size_t i = 0; i < n; ++i) {
    const Dim size = dim_of(x, static_cast<int64_t>(i) + 2);
    const int64_t taps = weight.dim(static_cast<int64_t>(i) + 2), d = dilation[i];
    if (stride[i] != 1 || taps <= 1 || pad_begin[i] < 0 || pad_end[i] < 0 ||
        pad_begin[i] + pad_end[i] != d * (taps - 1))
      continue;
    // Tap k (offset o = k·d - pad_begin) reads max(0, H - |o|) image rows at size H: by tap where
    // at the largest size (the share only falls with H) the taps reach at most 3/4 of the rows a
    // padded conv computes. Dilated convs only: with dilation 1 that takes an image smaller than
    // about the kernel, where without_dead_taps has already dropped what reads only padding.
    const int64_t largest = size.max();
    int64_t reached = 0;
    for (int64_t k = 0; k < taps; ++k) reached += std::max<int64_t>(0, largest - std::abs(k * d - pad_begin[i]));
    by_tap[i] = d > 1 && 4 * reached <= 3 * taps * largest;
    if (by_tap[i]) convs *= taps;
  }
  if (convs == 1 || convs > kMaxTapConvs) return std::nullopt;
  // Each tap's conv reads the input: a computed one is stored once rather than computed by each.
  Tensor source = computes(x) ? contiguous(x) : x;
  Dims out_dims = dims_of(x);
  out_dims[1] = weight.dim(0);
  Tensor sum;
  for (int64_t index = 0; index < convs; ++index) {
    // This conv's tap along each by-tap axis (index in mixed radix over those axes).
    DimRanges crop, place;
    Dims pads;
    for (int64_t axis = 0; axis < 2; ++axis) {
      crop.emplace_back(0, dim_of(source, axis));
      pads.insert(pads.end(), {0, 0});
    }
    Tensor tap_weight = weight;
    ConvOptions tap_options = options;
    tap_options.stride = stride;
    tap_options.dilation = dilation;
    std::vector<int64_t> begins = pad_begin, ends = pad_end;
    int64_t rest = index;
    for (size_t i = 0; i < n; ++i) {
      const auto axis = static_cast<int64_t>(i) + 2;
      const Dim size = dim_of(source, axis);
      if (!by_tap[i]) {
        crop.emplace_back(0, size);
        pads.insert(pads.end(), {0, 0});
        continue;
      }
      const int64_t taps = weight.dim(axis), k = rest % taps;
      rest /= taps;
      const int64_t offset = k * dilation[i] - pad_begin[i], reach = std::abs(offset);
      tap_weight = tap_weight.slice(axis, k, k + 1);
      begins[i] = ends[i] = 0;
      const Dim rows = max(Dim(reach), size) - reach;  // the rows this tap reads, 0 where it is dead
      const Dim fill = min(size, Dim(reach));          // the output rows it does not reach
      if (offset >= 0) {
        crop.emplace_back(offset, offset + rows);
        pads.insert(pads.end(), {0, fill});
      } else {
        crop.emplace_back(0, rows);
        pads.insert(pads.end(), {fill, 0});
      }
    }
    tap_options.padding = begins;
    tap_options.padding.insert(tap_options.padding.end(), ends.begin(), ends.end());
    Tensor part = shrink_within(source, crop).conv(tap_weight, Tensor(), tap_options);
    DimRanges whole;
    for (const Dim& size : out_dims) whole.emplace_back(0, size);
    part = shrink_within(pad_zero_dims(part, pads), whole);
    sum = sum.defined() ? sum + part : part;
  }
  // The bias once, over the whole output (a tap's conv covers only the rows its tap reaches).
  if (bias.defined()) return sum + per_channel(bias.cast(sum.dtype()), sum, "conv", "bias");
  return sum;
}

}  // namespace

bool is_broadcast_value(const Tensor& t) {
  int64_t stored = 0;
  for (const UOp* node : toposort(t.data().node))
    if (node->op() == Ops::BUFFER) stored += node->arg_list().at(1);
  return stored < t.numel();
}

// Direct convolution as a broadcast product of a window view and the weight, summed over
// (C/groups, K1…Kn): (N, g, F/g, O…, C/g, K…) · (1, g, F/g, 1…, C/g, K…). One kernel, with the
// bias add (and whatever elementwise op follows) in its epilogue.
Tensor Tensor::conv(const Tensor& weight, const Tensor& bias, const ConvOptions& options) const {
  if (std::optional<LiveTaps> live = without_dead_taps(*this, weight, options)) return conv(live->weight, bias, live->options);
  if (std::optional<Tensor> by_taps = conv_by_tap_regions(*this, weight, bias, options)) return *by_taps;
  // `--precision bf16` on AMX tiles: an implicit matmul (tensor_conv_bf16.cpp).
  if (Tensor reduced = bf16_weight_conv(*this, weight, bias, options); reduced.defined()) return reduced;
  // 3x3 stride-1 float32 convolutions where F(2x2, 3x3) is faster (winograd.cpp, docs/winograd.md).
  if (use_winograd(*this, weight, bias, options)) return winograd_conv(*this, weight, bias, options);
  require_defined(*this, "conv", "the input");
  require_defined(weight, "conv", "the weight");
  require_batch_channels(*this, 3, "conv");
  size_t n = static_cast<size_t>(ndim()) - 2;
  // The batch may be symbolic (a plan over any batch size); channels and image sizes are known.
  Dim batch = dim_of(*this, 0);
  int64_t channels = dim(1), groups = options.groups;
  std::string input_shape = dims_string(dims_of(*this));
  if (weight.ndim() != ndim())
    throw UserError(str_cat("conv: weight of shape ", shape_string(weight.shape()), " must have ", ndim(),
                            " axes (F, C/groups, K…) for input ", input_shape));
  int64_t filters = weight.dim(0);
  if (groups < 1 || channels % groups != 0 || filters % groups != 0 || weight.dim(1) * groups != channels)
    throw UserError(str_cat("conv: input ", input_shape, " and weight ", shape_string(weight.shape()),
                            " do not fit groups = ", groups, " (need C and F divisible by groups, weight axis 1 = C/groups)"));
  if (bias.defined() && bias.shape() != Shape{filters})
    throw UserError(str_cat("conv: bias of shape ", shape_string(bias.shape()), " must have shape (", filters, ",)"));
  if (!options.output_padding.empty() &&
      std::any_of(options.output_padding.begin(), options.output_padding.end(), [](int64_t p) { return p != 0; }))
    throw UserError("conv: output_padding applies to conv_transpose only");
  std::vector<int64_t> stride = per_axis(options.stride, n, 1, 1, "conv", "stride");
  std::vector<int64_t> dilation = per_axis(options.dilation, n, 1, 1, "conv", "dilation");
  // Negative pads crop; conv_transpose relies on that.
  auto [pad_begin, pad_end] = begin_end_pads(options.padding, n, true, "conv");
  Shape kernel(weight.shape().begin() + 2, weight.shape().end());

  ScalarType type = bias.defined() ? promote_types(DType(promoted(*this, weight)), DType(bias.dtype())).scalar()
                                   : promoted(*this, weight);
  if (type == ScalarType::Bool) throw UserError("conv: bool tensors are not supported");
  ScalarType compute = compute_type(type);
  // An input that is a permuted view (ShuffleNet's channel shuffle: reshape, transpose, reshape)
  // would put the permutation's divisions into every load of the window, which hides the
  // contiguity of the output pixels from the optimisation layer (those depthwise convs stayed
  // scalar). One copy into plain order costs a pass over the input.
  Tensor source = rows_are_permuted(*this) ? contiguous(*this) : *this;
  // A zero-padded input is copied once into a padded buffer: read through the pad view, every
  // window load carries a bounds test, which on AVX2 became branches and spills in the register
  // tile (bench-tensor, 3x3 256->256 @14: 56 -> 135 GFLOP/s, 3x3 64->64 @56: 76 -> 117). The copy
  // is one pass over the input, which the conv reads K·F/g times; depthwise convs (K reads) were
  // no slower with it (MobileNetV2, YOLOX).
  // Computed values are realised before the copy (a ReLU or Clip in the previous conv's store, a
  // SiLU in an elementwise kernel of its own, vectorised either way): computed inside the copy,
  // YOLOX's SiLU ran through the copy's masked border lanes scalar (5 GFLOP/s on the 208×208
  // stem; the model 64 -> 46 ms at one thread on an AVX2 Zen 3).
  bool pads = pads_anything(pad_begin, pad_end);
  if (pads && computes(source)) source = contiguous(source);
  // The copies below hold the input in its own type, widened to `compute` only where the conv
  // reads it (the view below): a copy of the value itself is one that its other readers (a
  // residual add) read too (rangeify's contiguous_copy_of), where a copy of its widened value
  // left an f16 ResNet's residual chain to be recomputed by every later block's copy; and a GPU
  // conv then reads f16 operands, which tensor cores take.
  Tensor padded = source.pad(spatial_pad_list(pad_begin, pad_end));
  // Image sizes may be symbolic (an image or a signal of any size): the windows are then counted by
  // expressions, and the CPU's layout choices below, made for known images, are skipped.
  Dims window_dims;
  for (size_t i = 0; i < n; ++i) {
    int64_t span = dilation[i] * (kernel[i] - 1) + 1;
    Dim size = dim_of(padded, static_cast<int64_t>(i) + 2);
    // (A 1-wide window over rows that may be none gives no windows there: a tap's conv over the
    // rows it reaches, conv_by_tap_regions.)
    if (size.min() < span && !(span == 1 && stride[i] == 1 && size.min() >= 0))
      throw UserError(str_cat(size.is_known() ? "" : "unsupported: ", "conv: the padded input of shape ",
                              dims_string(dims_of(padded)), size.is_known() ? " is" : " may be",
                              " smaller than the dilated kernel of weight ", shape_string(weight.shape()),
                              " (dilation ", list_string(dilation), ")"));
    window_dims.push_back((size - span) / stride[i] + 1);
  }
  bool symbolic_image = !all_known(window_dims);
  std::vector<int64_t> windows = symbolic_image ? std::vector<int64_t>{} : known_sizes(window_dims);
  const bool transposed_input = computed_from_transposed_rows(*this);
  bool depthwise_last = pads && !symbolic_image &&
                        depthwise_channels_last(padded, kernel, groups, filters, windows, options.pointwise_reader_filters,
                                                transposed_input);
  if (pads && (depthwise_last || pads_channels_last(padded, kernel, groups, filters, stride)))
    padded = stored_in_order(padded, kChannelsLast);
  else if (pads) padded = contiguous(padded);
  int64_t group_channels = channels / groups, group_filters = filters / groups;
  if (!pads && !symbolic_image && reads_channels_last(padded, kernel, groups, filters, windows)) {
    // A strided 1x1 conv reads every s-th pixel: only those are copied, and the conv reads them
    // at stride 1. A computed input is realised in its own layout first (an activation that a
    // residual add also reads would otherwise be recomputed by both, each time from the start of
    // the residual chain) -- unless it is a channels-last depthwise conv's output (that conv
    // stores straight into the copy's order, depthwise_channels_last), or an image that does not
    // fill whole vectors read at stride 1. There the conv that computes the input has its filters
    // as the vector too, and stores them contiguously into the channels-last copy instead of one
    // NCHW plane per lane; other readers of the value (the next residual add) read the copy
    // through its permutation (rangeify's contiguous_copy_of). ResNet-50's blocks at 14×14 and
    // 7×7 lose a transposing copy each, and their convs their scattered stores.
    // Only sums (convs, not a max pool) of small images (14×14, 7×7: at most kSmallImage pixels,
    // where the convs take their filters as the vector), and no concatenation: DenseNet's,
    // Inception's and SqueezeNet's concatenations computed in the copy's order ran 1.1-2x slower,
    // and so did SqueezeNet's 55×55 max pool and its 1x1 convs there.
    // The conv computing the input then takes the image's rows as its register tile's rows, so the
    // image's width must split into 4 to 8 of them: SqueezeNet's 13×13 squeeze convs (64 filters)
    // got a tile of one row and ran 0.13 -> 0.42 ms that way (14×14 and 7×7 split into 7 rows).
    constexpr int64_t kSmallImage = 256;
    bool strided = std::any_of(stride.begin(), stride.end(), [](int64_t s) { return s != 1; });
    bool rows_split = false;
    for (int64_t rows = 4; rows <= 8; ++rows) rows_split = rows_split || windows[1] % rows == 0;
    bool small_image = windows[0] * windows[1] <= kSmallImage && !fills_vectors(windows) && rows_split &&
                       padded.dim(1) % (2 * host_cpu_caps().vector_lanes(dtypes::f32)) == 0;
    bool computed_in_copy_order =
        computed_channels_last(padded) || (!strided && small_image && computed_from_products_unpadded(padded));
    if (computes(padded) && !computed_in_copy_order) padded = contiguous(padded);
    Tensor picked = padded;
    for (size_t i = 0; i < n; ++i) {
      auto axis = static_cast<int64_t>(i) + 2;
      if (stride[i] != 1) picked = picked.slice(axis, 0, (windows[i] - 1) * stride[i] + 1, stride[i]);
    }
    padded = stored_in_order(picked, kChannelsLast);
    stride.assign(n, 1);
  }
  Tensor view = pool_windows(padded, kernel, stride, dilation, window_dims).cast(compute);  // (N, C, O…, K…)
  // (N, g, C/g, O…, K…) → (N, g, 1, O…, C/g, K…)
  Dims grouped{batch, groups, group_channels};
  Dims view_dims = dims_of(view);
  grouped.insert(grouped.end(), view_dims.begin() + 2, view_dims.end());
  std::vector<int64_t> order{0, 1};
  for (size_t i = 0; i < n; ++i) order.push_back(3 + static_cast<int64_t>(i));
  order.push_back(2);
  for (size_t i = 0; i < n; ++i) order.push_back(3 + static_cast<int64_t>(n + i));
  Tensor input = reshape_to(view, grouped).permute(order).unsqueeze(2);
  // (F, C/g, K…) → (1, g, F/g, 1…, C/g, K…)
  Shape weight_shape{1, groups, group_filters};
  weight_shape.insert(weight_shape.end(), n, 1);
  weight_shape.push_back(group_channels);
  weight_shape.insert(weight_shape.end(), kernel.begin(), kernel.end());
  // A channels-last depthwise conv reads one vector of consecutive channels per tap: its weight
  // (C, 1, K…) is stored (K…, C) (folded at compile time).
  Tensor weights = depthwise_last ? stored_in_order(weight.cast(compute), kTapsFirst)
                                  : filters_in_panels(weight.cast(compute), groups);
  weights = weights.reshape(weight_shape);
  Tensor result = input.mul(weights).sum(last_axes(static_cast<int64_t>(n) + 1, input.ndim()));
  Dims out_shape{batch, filters};
  out_shape.insert(out_shape.end(), window_dims.begin(), window_dims.end());
  result = reshape_to(result, out_shape);
  if (bias.defined()) result = result + per_channel(bias.cast(compute), result, "conv", "bias");
  // A channels-last depthwise conv over a transposed input whose reader is no pointwise conv that
  // copies it channels-last (a QDQ model's requantization, then its integer 1x1 conv, which reads
  // pixels × channels): stored channels-last, not gathered from NCHW planes by that reader.
  if (depthwise_last && transposed_input && options.pointwise_reader_filters <= 0)
    result = stored_in_order(result, kChannelsLast);
  return result.cast(type);
}

}  // namespace kiln
