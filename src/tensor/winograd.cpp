// Winograd convolution F(2x2, 3x3) (Lavin & Gray, "Fast Algorithms for Convolutional Neural
// Networks", 2015) built from Tensor ops, so the ordinary compiler makes its kernels. Each 2x2 block
// of outputs (a tile) needs a 4x4 block of input d; with the transforms below,
//     Y = Aᵀ [ (G g Gᵀ) ⊙ (Bᵀ d B) ] A,
// and summed over input channels the ⊙ becomes 16 independent matrix products
//     M[ij] (F × tiles) = U[ij] (F × C) · V[ij] (C × tiles),
// 16·F·C multiply-adds per tile instead of the direct convolution's 36·F·C: 2.25x fewer.
//
// The kernels, in order (docs/winograd.md has the measurements behind each choice):
//  1. the zero-padded input with its columns de-interleaved by parity: a tile starts at an even
//     column, so its four columns are (even, odd, even, odd) at tile index tw and tw+1. Stored that
//     way, every later read moves with tw at unit stride and the 16 transform kernels read no
//     padding masks;
//  2. V[ij] = (Bᵀ d B)[ij] for each of the 16 (i, j): four loads and three adds per element, stored
//     (C, tiles) row-major: the right operand layout of the fast matmul path (tiles vectorised,
//     a register tile over filters);
//  3. U[ij] = (G g Gᵀ)[ij], (F, C): a weight-only value, which fold_constants computes once when
//     the weight is constant, so a plan stores the 16 transformed matrices instead of g;
//  4. the 16 products M[ij] = U[ij] · V[ij];
//  5. Y = Aᵀ M A plus the bias, stored as (N, F, tile row, dy, tile column, dx): the 2x2 outputs of a
//     tile are written by one iteration, so the loop over tiles reads every M[ij] at unit stride.
//     Read back as (N, F, 2·rows, 2·columns) (cropped for odd sizes) it is the NCHW result; an
//     elementwise epilogue (ReLU) fuses into whatever reads it.
#include "tensor/winograd.h"

#include <algorithm>
#include <array>
#include <atomic>

#include "support/debug.h"
#include "tensor/tensor_internal.h"

namespace kiln {
namespace {

// F(2, 3): output tile m = 2, kernel r = 3, input tile α = m + r - 1 = 4. These are the matrices
// of Lavin & Gray (interpolation points 0, 1, -1 and ∞). With them G's entries are 0, ±½, 1, so U
// is exact up to one rounding per sum, and Bᵀ and Aᵀ only add and subtract.
constexpr int kTile = 2;   // m
constexpr int kInput = 4;  // α
constexpr std::array<std::array<double, 4>, 4> kBT{{{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}}};
constexpr std::array<std::array<double, 3>, 4> kG{{{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}}};
constexpr std::array<std::array<double, 4>, 2> kAT{{{1, 1, 1, 0}, {0, 1, -1, -1}}};

// Σ coefficient·term over the non-zero coefficients, with ±1 as an add or subtract.
Tensor linear_combination(const std::vector<std::pair<double, Tensor>>& terms) {
  Tensor sum;
  for (const auto& [coefficient, term] : terms) {
    if (coefficient == 0) continue;
    if (!sum.defined()) {
      sum = coefficient == 1 ? term : term * coefficient;
    } else if (coefficient == 1) {
      sum = sum + term;
    } else if (coefficient == -1) {
      sum = sum - term;
    } else {
      sum = sum + term * coefficient;
    }
  }
  return sum;
}

struct Geometry {
  int64_t batch, channels, filters, height, width;
  int64_t pad_top, pad_left, pad_bottom, pad_right;
  int64_t out_height, out_width;
  int64_t tile_rows, tile_columns;  // ceil(out / 2)
  int64_t tiles() const { return batch * tile_rows * tile_columns; }
};

// Padding as ConvOptions gives it (empty, one value, one per axis, or begin pads then end pads),
// as (top, left, bottom, right); false for a layout conv() would reject.
bool read_padding(const std::vector<int64_t>& padding, std::array<int64_t, 4>& pads) {
  switch (padding.size()) {
    case 0: pads = {0, 0, 0, 0}; return true;
    case 1: pads = {padding[0], padding[0], padding[0], padding[0]}; return true;
    case 2: pads = {padding[0], padding[1], padding[0], padding[1]}; return true;
    case 4: pads = {padding[0], padding[1], padding[2], padding[3]}; return true;
    default: return false;
  }
}

// A stride or dilation of 1 on both axes (empty, one value, or one per axis; any other count is
// an error that the direct path reports).
bool all_ones(const std::vector<int64_t>& values) {
  return values.size() <= 2 && std::all_of(values.begin(), values.end(), [](int64_t v) { return v == 1; });
}

Geometry geometry(const Tensor& x, const Tensor& weight, const ConvOptions& options) {
  std::array<int64_t, 4> pads{};
  read_padding(options.padding, pads);
  Geometry g{};
  g.batch = x.dim(0), g.channels = x.dim(1), g.height = x.dim(2), g.width = x.dim(3);
  g.filters = weight.dim(0);
  g.pad_top = pads[0], g.pad_left = pads[1], g.pad_bottom = pads[2], g.pad_right = pads[3];
  g.out_height = g.height + g.pad_top + g.pad_bottom - 2;
  g.out_width = g.width + g.pad_left + g.pad_right - 2;
  g.tile_rows = (g.out_height + kTile - 1) / kTile;
  g.tile_columns = (g.out_width + kTile - 1) / kTile;
  return g;
}

// Step 1: (N, C, 2, rows, columns/2) with [.., p, y, c] = padded[.., y, 2c + p]. Padded to
// 2·tiles + 2 on each axis (the conv's own pads, then zeros that only feed the cropped outputs).
Tensor deinterleaved_input(const Tensor& x, const Geometry& g) {
  int64_t rows = kTile * g.tile_rows + kInput - kTile, columns = kTile * g.tile_columns + kInput - kTile;
  Tensor padded = x.pad({0, 0, 0, 0, g.pad_top, rows - g.height - g.pad_top, g.pad_left,
                         columns - g.width - g.pad_left});
  return contiguous(padded.reshape({g.batch, g.channels, rows, columns / 2, 2}).permute({0, 1, 4, 2, 3}));
}

// Step 2: V[ij] as (C, tiles), row-major.
Tensor input_transform(const Tensor& split, const Geometry& g, int i, int j) {
  std::vector<std::pair<double, Tensor>> terms;
  for (int a = 0; a < kInput; ++a)
    for (int b = 0; b < kInput; ++b) {
      double coefficient = kBT[i][a] * kBT[j][b];
      if (coefficient == 0) continue;
      // d[2·th + a, 2·tw + b] = split[b % 2, 2·th + a, tw + b / 2]
      Tensor parity = shrink_axis(split, 2, b % 2, b % 2 + 1).reshape(
          {g.batch, g.channels, split.dim(3), split.dim(4)});
      Tensor rows = parity.slice(2, a, a + kTile * (g.tile_rows - 1) + 1, kTile);
      terms.emplace_back(coefficient, shrink_axis(rows, 3, b / 2, b / 2 + g.tile_columns));
    }
  Tensor v = linear_combination(terms).permute({1, 0, 2, 3});  // (C, N, tile rows, tile columns)
  return contiguous(v).reshape({g.channels, g.tiles()});
}

// Step 3: U[ij] as (F, C).
Tensor weight_transform(const Tensor& weight, int i, int j) {
  std::vector<std::pair<double, Tensor>> terms;
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 3; ++b) {
      Tensor tap = shrink_axis(shrink_axis(weight, 2, a, a + 1), 3, b, b + 1).reshape({weight.dim(0), weight.dim(1)});
      terms.emplace_back(kG[i][a] * kG[j][b], tap);
    }
  return contiguous(linear_combination(terms));
}

// Step 4: M[ij] = U[ij] · V[ij], (F, tiles), as Tensor::matmul writes a product with a row-major
// right operand: (F, 1, C) · (1, tiles, C) summed over C.
Tensor tile_product(const Tensor& u, const Tensor& v) {
  Tensor left = u.unsqueeze(1);
  Tensor right = v.transpose(0, 1).unsqueeze(0);
  return contiguous(left.mul(right).sum({2}));
}

}  // namespace

namespace {
// Read once from KILN_WINOGRAD; atomic because conv() may be called from several threads.
std::atomic<WinogradMode>& winograd_mode_storage() {
  static std::atomic<WinogradMode> mode{[] {
    long setting = env_integer("KILN_WINOGRAD", 1);
    return setting == 0 ? WinogradMode::Off : setting == 2 ? WinogradMode::Always : WinogradMode::Auto;
  }()};
  return mode;
}
}  // namespace

WinogradMode winograd_mode() { return winograd_mode_storage().load(std::memory_order_relaxed); }
void set_winograd_mode(WinogradMode mode) { winograd_mode_storage().store(mode, std::memory_order_relaxed); }

bool winograd_eligible(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvOptions& options) {
  if (!x.defined() || !weight.defined() || x.ndim() != 4 || weight.ndim() != 4) return false;
  if (x.dtype() != ScalarType::Float32 || weight.dtype() != ScalarType::Float32) return false;
  if (bias.defined() && (bias.dtype() != ScalarType::Float32 || bias.shape() != Shape{weight.dim(0)})) return false;
  if (weight.dim(2) != 3 || weight.dim(3) != 3 || weight.dim(1) != x.dim(1) || options.groups != 1) return false;
  if (!all_ones(options.stride) || !all_ones(options.dilation)) return false;
  if (std::any_of(options.output_padding.begin(), options.output_padding.end(), [](int64_t p) { return p != 0; }))
    return false;
  std::array<int64_t, 4> pads{};
  if (!read_padding(options.padding, pads) || std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p < 0; }))
    return false;
  Geometry g = geometry(x, weight, options);
  return g.batch > 0 && g.channels > 0 && g.filters > 0 && g.height > 0 && g.width > 0 && g.out_height > 0 &&
         g.out_width > 0;
}

bool use_winograd(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvOptions& options) {
  WinogradMode mode = winograd_mode();
  if (mode == WinogradMode::Off || !winograd_eligible(x, weight, bias, options)) return false;
  if (mode == WinogradMode::Always) return true;
  Geometry g = geometry(x, weight, options);
  return g.channels >= 32 && g.filters >= 32;
}

Tensor winograd_conv(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvOptions& options) {
  Geometry g = geometry(x, weight, options);
  Tensor split = deinterleaved_input(x, g);
  std::array<std::array<Tensor, kInput>, kInput> m;  // M[i][j] as (N, F, tile rows, tile columns)
  for (int i = 0; i < kInput; ++i)
    for (int j = 0; j < kInput; ++j) {
      Tensor product = tile_product(weight_transform(weight, i, j), input_transform(split, g, i, j));
      m[i][j] = product.reshape({g.filters, g.batch, g.tile_rows, g.tile_columns}).permute({1, 0, 2, 3});
    }
  // Step 5: the four outputs of each tile, stacked as (…, tile row, dy, tile column, dx).
  Tensor channel_bias = bias.defined() ? bias.reshape({1, g.filters, 1, 1}) : Tensor();
  std::vector<Tensor> rows;
  for (int dy = 0; dy < kTile; ++dy) {
    std::vector<Tensor> columns;
    for (int dx = 0; dx < kTile; ++dx) {
      std::vector<std::pair<double, Tensor>> terms;
      for (int i = 0; i < kInput; ++i)
        for (int j = 0; j < kInput; ++j) terms.emplace_back(kAT[dy][i] * kAT[dx][j], m[i][j]);
      Tensor y = linear_combination(terms);
      columns.push_back(channel_bias.defined() ? y + channel_bias : y);
    }
    rows.push_back(Tensor::stack(columns, 4));
  }
  Tensor tiles = contiguous(Tensor::stack(rows, 3));  // (N, F, tile rows, 2, tile columns, 2)
  Tensor full = tiles.reshape({g.batch, g.filters, kTile * g.tile_rows, kTile * g.tile_columns});
  if (full.dim(2) == g.out_height && full.dim(3) == g.out_width) return full;
  return full.shrink({{0, g.batch}, {0, g.filters}, {0, g.out_height}, {0, g.out_width}});
}

}  // namespace kiln
