// Convolutions of `--precision bf16` (matmul_precision.h) as products that AMX tiles compute
// (opt/amx_tiles.h): an implicit matmul over the input's pixels, with no im2col copy.
//
// The input is copied once, rounded to bf16, into a channels-last buffer of the padded images laid
// end to end: pixel p = (n·Hp + y)·Wp + x of the padded (N, Hp, Wp) images, its channels (padded
// with zeros to whole tile steps) contiguous. Output position q then reads, for tap (i, j), pixel
// q·s + i·dh·Wp + j·dw: one row of a row-major matrix whose start the tap moves. That holds for
// every q, so the product is computed at every position of the padded images, (N·Hp/s·Wp) rows,
// and the output is the view of the rows where a window lies inside its image: (n, oy, ox) at
// q = n·Hp/s·Wp + oy·Wp + ox. The other rows (a window that runs past its row's padding into the
// next row, or, strided, every position between two output rows) are computed and never read:
// (Wp - OW)/Wp of a stride-1 conv's rows (2 of 58 at 56×56 for 3x3), about half of a stride-2
// conv's. A 1x1 conv reads its strided pixels through a copy of only those, at stride 1.
//
// A strided stem over few channels, and a conv whose strides differ between its axes (a 1-D conv's),
// is instead a stride-1 conv over blocks of pixels (space_to_depth_conv). The weight folds at compile time into pair panels over (taps, channels)
// (bf16_operands.h); the bias is added in the product's kernel. A computed input is stored once as
// its bf16 bits, channels-last, which its other readers read too (a rounded stand-in, ir/ops.h), and
// which a 1x1 conv reads as it is. A 1x1 conv's rows are all read, so
// they stay a value and what follows (a residual add, an activation) is fused into that kernel;
// rows with dropped positions are stored whole, channels-last, and what follows reads them through
// the output's view, in the kernel that makes the next conv's copy.
#include <algorithm>
#include <vector>

#include "codegen/target.h"
#include "driver/run_on_device.h"
#include "tensor/bf16_operands.h"
#include "tensor/matmul_precision.h"
#include "tensor/nn_helpers.h"
#include "tensor/tensor_internal.h"

namespace kiln {

using namespace bf16_operands;
using namespace nn;

namespace {

// The narrowest convs that take the tiles: 16 filters (half a block's columns), and tile rows of
// which at least half is the conv's own (below). MobileNetV2's 3x3 stride-2 stem, 9 of 32 steps and
// every other position dropped, ran 0.25 -> 0.56 ms with its copies on tiles; its 16- and
// 24-channel convs, on the other hand, between convs that take the tiles, computed NCHW in f32 and
// read and wrote across the others' channels-last rows (MobileNetV2 bf16 at one thread: 8.7 -> 4.3
// ms with them on tiles).
constexpr int64_t kFewestFilters = 16;
constexpr int64_t kLeastRowShare = 2;  // the conv's (channels, column taps) / the tile row's ≥ 1/2

// How a conv's input fills the 32 steps of a tile row. Channels padded to whole rows where there
// are 32 or more (or where the column taps are dilated); fewer are padded to a power of two that
// divides 32 and the column taps to whole rows of them, so that a row holds the channels of
// consecutive pixels (channels-last, adjacent pixels are adjacent in memory): a 7x7 stem over RGB
// reads 8 pixels × 4 channels a row for its 7 × 3 (21 of 32 steps its own, where padded channels
// alone would give 3 of 32). The extra tap's weights are zeros; its pixel lies outside the window
// (the next pixel of the row, or of the next row), so a non-finite input value there (0 · inf) makes
// the neighbouring window's output NaN too: documented in docs/optimisation.md.
struct TileRows {
  int64_t channels;  // per pixel, zero-padded
  int64_t taps_x;    // column taps, zero taps appended
};

TileRows tile_rows(int64_t channels, int64_t taps_x, int64_t dilation_x) {
  if (channels >= kDepthStep) return {round_up(channels, kDepthStep), taps_x};
  int64_t padded = 1;
  while (padded < channels) padded *= 2;
  if (padded == kDepthStep || dilation_x != 1) return {kDepthStep, taps_x};
  return {padded, round_up(taps_x, kDepthStep / padded)};
}

// space_to_depth_conv takes strided convs over fewer than 32 channels (a stem over RGB) of at least
// kBlockedOutputs output pixels and kBlockedSteps products per output. ResNet-50's 7x7 stem: 1.25
// -> 0.46 ms, its copy 0.28 -> 0.17. Over wider inputs the dropped positions cost about what the
// zero taps do, and the copy into blocks is a gather (ResNet-50's 3x3 128->128 at 28×28: 0.44 ->
// 0.37 ms, its copy 0.12 -> 0.31); over few outputs the products read the weight, 16/9 as large
// with a 3x3 kernel's zero taps, more than they compute (3x3 512->512 at 7×7: 0.77 -> 1.16 ms).
// And only where each output sums enough products to pay for the copy into blocks (a gather from
// the NCHW image) and the dropped positions' stores: MobileNetV2's 3x3 stem over RGB, 27 products,
// ran 0.26 -> 0.41 ms that way; ResNet-50's 7x7, 147, is the case above.
constexpr int64_t kBlockedOutputs = 256;
constexpr int64_t kBlockedSteps = 64;

int64_t strided_outputs(const Tensor& x, const Tensor& weight, const std::vector<int64_t>& s,
                        const std::vector<int64_t>& pad_begin, const std::vector<int64_t>& pad_end) {
  int64_t outputs = 1;
  for (size_t i = 0; i < 2; ++i) {
    const int64_t size = x.dim(static_cast<int64_t>(i) + 2) + pad_begin[i] + pad_end[i];
    const int64_t taps = weight.dim(static_cast<int64_t>(i) + 2);
    if (size < taps) return 0;
    outputs *= (size - taps) / s[static_cast<size_t>(i)] + 1;
  }
  return outputs;
}

// A conv of strides (sy, sx) as a stride-1 conv over the input's sy × sx blocks of pixels (space
// to depth): channel (i, j, c) of block (y, x) is pixel (sy·y + i, sx·x + j) of channel c, and the
// weight (padded with zero taps to whole blocks) is regrouped the same way, (F, C·sy·sx, ⌈KH/sy⌉,
// ⌈KW/sx⌉). The products are the same, plus the zero taps' (a 3x3 conv's 9 of 16); the positions
// the stride-1 conv drops are those of one padded row and column of blocks, where over the pixels
// themselves every other position of a row and every other row were computed and dropped. The
// input's blocks are a view: the copy bf16_weight_conv makes of them reads the image once.
// ResNet-50's 7x7 stem over RGB becomes 4x4 taps over 12 channels (16 a tile row's pixel, 4 pixels
// a row); a 1-D conv (one row, strides (1, s)) becomes a conv over blocks of s samples.
Tensor space_to_depth_conv(const Tensor& x, const Tensor& weight, const Tensor& bias, const std::vector<int64_t>& s,
                           const std::vector<int64_t>& pad_begin, const std::vector<int64_t>& pad_end) {
  const int64_t batch = x.dim(0), channels = x.dim(1), filters = weight.dim(0);
  std::vector<int64_t> outputs(2), block_taps(2), padded(2);
  for (size_t i = 0; i < 2; ++i) {
    const int64_t size = x.dim(static_cast<int64_t>(i) + 2) + pad_begin[i] + pad_end[i];
    const int64_t taps = weight.dim(static_cast<int64_t>(i) + 2);
    outputs[i] = (size - taps) / s[i] + 1;
    block_taps[i] = (taps + s[i] - 1) / s[i];
    // Whole blocks, and enough of them for the last output's block taps.
    padded[i] = std::max(round_up(size, s[i]), (outputs[i] - 1 + block_taps[i]) * s[i]);
  }
  // A computed input is stored channels-last first, as bf16_weight_conv does, by the kernel that
  // computes it; the blocks' channels are (i, j, c), so that the copy reads each block's channels
  // as one run from it (wav2vec2's 1-D blocks, gathered from (C, L) rows: 1.15 ms a copy).
  Tensor source = computes(x) ? stored_in_order(x, {0, 2, 3, 1}) : x;
  Tensor image = source.pad(std::vector<int64_t>{0, 0, 0, 0, pad_begin[0], padded[0] - x.dim(2) - pad_begin[0],
                                                 pad_begin[1], padded[1] - x.dim(3) - pad_begin[1]});
  const int64_t block_channels = channels * s[0] * s[1];
  Tensor blocks = image.reshape({batch, channels, padded[0] / s[0], s[0], padded[1] / s[1], s[1]})
                      .permute({0, 3, 5, 1, 2, 4})
                      .reshape({batch, block_channels, padded[0] / s[0], padded[1] / s[1]});
  Tensor taps = weight.pad(std::vector<int64_t>{0, 0, 0, 0, 0, block_taps[0] * s[0] - weight.dim(2), 0,
                                                block_taps[1] * s[1] - weight.dim(3)});
  Tensor block_weight = taps.reshape({filters, channels, block_taps[0], s[0], block_taps[1], s[1]})
                            .permute({0, 3, 5, 1, 2, 4})
                            .reshape({filters, block_channels, block_taps[0], block_taps[1]});
  Tensor result = bf16_weight_conv(blocks, block_weight, bias, ConvOptions{});
  if (!result.defined()) return Tensor();
  return result.slice(2, 0, outputs[0]).slice(3, 0, outputs[1]);
}

// A 1-D conv (an audio front end's) as a 2-D one over images of one row; a strided one then goes
// through space_to_depth_conv (strides (1, s)): wav2vec2's 128-channel kernel-3 stride-2 convs
// compute 4 taps over 256 channels at every output, where a stride-2 row would compute twice the
// outputs and drop half.
Tensor one_dimensional_conv(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvOptions& options) {
  ConvOptions row = options;
  row.stride = {1, per_axis(options.stride, 1, 1, 1, "conv", "stride")[0]};
  row.dilation = {1, per_axis(options.dilation, 1, 1, 1, "conv", "dilation")[0]};
  auto [pad_begin, pad_end] = begin_end_pads(options.padding, 1, true, "conv");
  row.padding = {0, pad_begin[0], 0, pad_end[0]};
  Tensor result = bf16_weight_conv(x.unsqueeze(2), weight.unsqueeze(2), bias, row);
  return result.defined() ? result.reshape({x.dim(0), weight.dim(0), result.dim(3)}) : Tensor();
}

}  // namespace

Tensor bf16_weight_conv(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvOptions& options) {
  if (!bf16_products() || !x.defined() || !weight.defined()) return Tensor();
  if (x.dtype() != ScalarType::Float32 || weight.dtype() != ScalarType::Float32) return Tensor();
  if (bias.defined() && bias.dtype() != ScalarType::Float32) return Tensor();
  if (x.ndim() == 3 && weight.ndim() == 3 && options.groups == 1 && !has_symbolic_shape(x))
    return one_dimensional_conv(x, weight, bias, options);
  if (x.ndim() != 4 || weight.ndim() != 4 || options.groups != 1) return Tensor();
  if (has_symbolic_shape(x) || reads_graph_input(weight)) return Tensor();
  if (std::any_of(options.output_padding.begin(), options.output_padding.end(), [](int64_t p) { return p != 0; }))
    return Tensor();
  const int64_t batch = x.dim(0), channels = x.dim(1), filters = weight.dim(0);
  // Shapes that do not fit go to Tensor::conv, whose errors name them.
  if (weight.dim(1) != channels || (bias.defined() && bias.shape() != Shape{filters})) return Tensor();
  if (filters < kFewestFilters) return Tensor();
  std::vector<int64_t> stride = per_axis(options.stride, 2, 1, 1, "conv", "stride");
  std::vector<int64_t> dilation = per_axis(options.dilation, 2, 1, 1, "conv", "dilation");
  auto [pad_begin, pad_end] = begin_end_pads(options.padding, 2, true, "conv");
  for (size_t i = 0; i < 2; ++i)
    if (pad_begin[i] < 0 || pad_end[i] < 0) return Tensor();
  // Strided convs whose positions the flat rows cannot step through (strides that differ between
  // the axes: a 1-D conv's (1, s)), or that pay for it (kBlockedSteps), go over blocks of pixels.
  const bool strided_kernel = (stride[0] > 1 || stride[1] > 1) && (weight.dim(2) > 1 || weight.dim(3) > 1);
  const bool blocked_stem = stride[0] == stride[1] && channels < kDepthStep &&
                            channels * weight.dim(2) * weight.dim(3) >= kBlockedSteps &&
                            strided_outputs(x, weight, stride, pad_begin, pad_end) >= kBlockedOutputs;
  if (strided_kernel && dilation == std::vector<int64_t>{1, 1} && (stride[0] != stride[1] || blocked_stem))
    return space_to_depth_conv(x, weight, bias, stride, pad_begin, pad_end);
  const int64_t taps_y = weight.dim(2);
  const TileRows row = tile_rows(channels, weight.dim(3), dilation[1]);
  if (kLeastRowShare * channels * weight.dim(3) < row.channels * row.taps_x) return Tensor();
  const int64_t taps_x = row.taps_x, depth_channels = row.channels;
  std::vector<int64_t> outputs(2);
  for (size_t i = 0; i < 2; ++i) {
    const int64_t padded = x.dim(static_cast<int64_t>(i) + 2) + pad_begin[i] + pad_end[i];
    const int64_t span = dilation[i] * (weight.dim(static_cast<int64_t>(i) + 2) - 1) + 1;
    if (padded < span) return Tensor();
    outputs[i] = (padded - span) / stride[i] + 1;
  }

  // A computed input (a residual add and its Relu) is stored once, channels-last and rounded to
  // bf16, by the kernel that computes it: the copy below reads it contiguously, and a 1x1 conv's
  // rows are that buffer itself. Its other readers (the next block's residual add) read the same
  // rounded values (a rounded stand-in, ir/ops.h), as an engine that keeps activations in bf16
  // does: one 2-byte store where f32 took a 4-byte store, a 4-byte read and a 2-byte store for
  // the bits (ResNet-50 bf16 15.9 -> 14.7 ms at one thread). Stored in NCHW order, as rangeify
  // would by itself, each element was gathered across the rows (12 ms of 48 in its first block).
  const Tensor stored_bits = computes(x) ? rounded_stand_in(bf16_bits(x.permute({0, 2, 3, 1}))) : Tensor();
  Tensor source = stored_bits.defined() ? widened(stored_bits).permute({0, 3, 1, 2}) : x;
  const bool pointwise = taps_y == 1 && weight.dim(3) == 1 && pad_begin == std::vector<int64_t>{0, 0} &&
                         pad_end == std::vector<int64_t>{0, 0};
  const bool unit_stride = stride == std::vector<int64_t>{1, 1};
  if (pointwise && (stride[0] != 1 || stride[1] != 1)) {
    source = source.slice(2, 0, (outputs[0] - 1) * stride[0] + 1, stride[0])
                 .slice(3, 0, (outputs[1] - 1) * stride[1] + 1, stride[1]);
    stride = {1, 1};
  }
  // Positions advance by one stride along the flat pixels: the same stride on both axes.
  if (stride[0] != stride[1]) return Tensor();
  const int64_t step = stride[0];
  const int64_t width = source.dim(3) + pad_begin[1] + pad_end[1];
  // Rows padded to a whole number of strides, so each image is Hp/s·Wp positions.
  const int64_t height = round_up(source.dim(2) + pad_begin[0] + pad_end[0], step);
  const int64_t image_positions = height / step * width;
  const int64_t positions = batch * image_positions;
  if (positions < kPanelColumns) return Tensor();
  // Pixels the last position's windows reach, past the last image's end: zeros.
  const int64_t tap_rows_reach = (taps_y - 1) * dilation[0] * width, tap_columns_reach = (taps_x - 1) * dilation[1];
  const int64_t windows_by_row = (positions - 1) * step + tap_rows_reach + 1;
  const int64_t pixels = windows_by_row + tap_columns_reach;
  const int64_t image_pixels = batch * height * width;

  // The input's bf16 bits, channels-last over the padded images laid end to end.
  const int64_t rows_after = height - source.dim(2) - pad_begin[0];
  Tensor padded = source.pad(std::vector<int64_t>{0, 0, 0, depth_channels - channels, pad_begin[0], rows_after,
                                                  pad_begin[1], pad_end[1]});
  Tensor rows = padded.permute({0, 2, 3, 1}).reshape({image_pixels, depth_channels});
  if (pixels > image_pixels) rows = rows.pad({0, pixels - image_pixels, 0, 0});
  // (a 1x1 conv over whole tile rows of a stored computed input reads the stored bits as they are)
  const bool rows_are_stored = stored_bits.defined() && pointwise && unit_stride && depth_channels == channels &&
                               pixels == image_pixels;
  Tensor bits = rows_are_stored ? widened(stored_bits.reshape({image_pixels, depth_channels}))
                                : widened(contiguous(bf16_bits(rows)));
  // (positions, taps_y, taps_x, channels): position q, tap (i, j) at pixel q·s + i·dh·Wp + j·dw.
  Tensor by_column = window_axis(bits, 0, taps_x, 1, dilation[1], Dim(windows_by_row));
  Tensor windows = window_axis(by_column, 0, taps_y, step, dilation[0] * width, Dim(positions));

  // (F, C, KH, KW) → (KH·KW·C', F) in pair panels, viewed as (F, KH, KW, C').
  const int64_t depth = taps_y * taps_x * depth_channels;
  Tensor taps_first =
      weight.permute({2, 3, 1, 0}).pad({0, 0, 0, taps_x - weight.dim(3), 0, depth_channels - channels, 0, 0});
  Tensor panels = widened(bf16_pair_panels(taps_first.reshape({depth, filters}), depth));
  Tensor filters_first = panels.transpose(0, 1).reshape({filters, taps_y, taps_x, depth_channels});

  Tensor product = windows.unsqueeze(1).mul(filters_first).sum({2, 3, 4});  // (positions, F)
  if (bias.defined()) product = product + bias.reshape({1, filters});
  // Rows that are all read (a 1x1 conv's) stay a value, so that rangeify fuses what follows into
  // the product's kernel (the residual add and its Relu, stored channels-last for the next conv:
  // ResNet-50 bf16 18.7 -> 18.0 ms at one thread); rows with dropped positions are stored whole,
  // which keeps the tile kernel's rows one stride apart.
  const bool every_position_read = positions == batch * outputs[0] * outputs[1];
  Tensor stored = every_position_read ? product : contiguous(product);
  Tensor images = stored.reshape({batch, height / step, width, filters});
  return images.slice(1, 0, outputs[0]).slice(2, 0, outputs[1]).permute({0, 3, 1, 2});
}

}  // namespace kiln
