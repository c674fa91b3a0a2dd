// Winograd convolution F(2x2, 3x3) (Lavin & Gray, "Fast Algorithms for Convolutional Neural
// Networks", 2015) built from Tensor ops, so the ordinary compiler makes its kernels. Each 2x2 block
// of outputs (a tile) needs a 4x4 block of input d; with the transforms below,
//     Y = Aᵀ [ (G g Gᵀ) ⊙ (Bᵀ d B) ] A,
// and summed over input channels the ⊙ becomes 16 independent matrix products
//     M[ij] (F × tiles) = U[ij] (F × C) · V[ij] (C × tiles),
// 16·F·C multiply-adds per tile instead of the direct convolution's 36·F·C: 2.25x fewer.
//
// The kernels, in order (docs/winograd.md has the measurements behind each choice). Tiles are
// numbered per image, row-major (t = th·tile_columns + tw), and every intermediate keeps that
// index innermost, as NCHW keeps the pixels: no kernel transposes anything.
//  1. the zero-padded input split into 8 planes by row parity, column parity and a one-column
//     shift, so that each of a tile's 16 input pixels is one plane read at t plus a constant:
//     the 16 transform kernels then read at unit stride, with no padding masks and no division;
//  2. V[ij] = (Bᵀ d B)[ij] for each of the 16 (i, j): four loads and three adds per element, stored
//     (C, tiles) row-major: the right operand layout of the fast matmul path (tiles vectorised,
//     a register tile over filters);
//  3. U[ij] = (G g Gᵀ)[ij], (F, C): a weight-only value, which fold_constants computes once when
//     the weight is constant, so a plan stores the 16 transformed matrices instead of g;
//  4. the 16 products M[ij] = U[ij] · V[ij] (src/opt's matmul tiles, 95 % of a core's peak at
//     64 channels and 784 tiles);
//  5. Y = Aᵀ M A plus the bias, stored as (N, F, tile row, dy, tile column, dx): the 2x2 outputs of
//     a tile come from one iteration, so the loop over tiles reads every M[ij] at unit stride.
//     Read back as (N, F, 2·rows, 2·columns) (cropped for odd sizes) it is the NCHW result, and an
//     elementwise epilogue (ReLU) joins whatever kernel reads it.
#include "tensor/winograd.h"

#include <algorithm>
#include <array>
#include <atomic>

#include "codegen/target.h"
#include "driver/run_on_device.h"
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
  // Tiles per image as the products see them: tile_rows·tile_columns rounded up to a multiple of
  // 16 (the AVX-512 lanes) or, when that costs at most 1/8 more, of 32, so that the products get
  // a register tile two vectors wide (src/opt/heuristics.h). The extra tiles compute values from
  // the zero padding that nothing reads.
  int64_t padded_tiles;
  // Rows of each plane of the split input (step 1): enough that every padded tile reads inside it.
  int64_t plane_rows;
  int64_t tiles() const { return batch * padded_tiles; }
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

int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

Geometry geometry(const Tensor& x, const Tensor& weight, const ConvOptions& options) {
  std::array<int64_t, 4> pads{};
  read_padding(options.padding, pads);
  Geometry g{};
  g.batch = x.dim(0), g.channels = x.dim(1), g.height = x.dim(2), g.width = x.dim(3);
  g.filters = weight.dim(0);
  g.pad_top = pads[0], g.pad_left = pads[1], g.pad_bottom = pads[2], g.pad_right = pads[3];
  g.out_height = g.height + g.pad_top + g.pad_bottom - 2;
  g.out_width = g.width + g.pad_left + g.pad_right - 2;
  // An empty output has no tiles (winograd_eligible refuses it); the tile count must not divide
  // below (an input narrower than the kernel made it divide by zero; found by tests/fuzz onnx).
  if (g.out_height <= 0 || g.out_width <= 0) return g;
  g.tile_rows = (g.out_height + kTile - 1) / kTile;
  g.tile_columns = (g.out_width + kTile - 1) / kTile;
  int64_t tiles = g.tile_rows * g.tile_columns;
  g.padded_tiles = round_up(tiles, 32) * 8 <= round_up(tiles, 16) * 9 ? round_up(tiles, 32) : round_up(tiles, 16);
  // A tile reads plane rows th and th + 1 (flat offsets up to padded_tiles - 1 + tile_columns).
  g.plane_rows = std::max(g.tile_rows + 1, (g.padded_tiles + g.tile_columns + g.tile_columns - 1) / g.tile_columns);
  return g;
}

// Step 1: the zero-padded input split into 8 planes (N, C, 8, plane_rows·tile_columns): plane
// (p, q, s) holds padded[2·r + p, 2·(c + s) + q] at [r, c]. Input pixel d[2·th + a, 2·tw + b] of
// tile (th, tw) is then plane (a % 2, b % 2, b / 2) at flat index th·tile_columns + tw +
// (a / 2)·tile_columns: every transform kernel reads its four planes at unit stride along the
// flat tile index, with no padding masks and no division.
Tensor split_input(const Tensor& x, const Geometry& g) {
  int64_t rows = kTile * g.plane_rows, columns = kTile * (g.tile_columns + 1);
  Tensor padded = x.pad({0, 0, 0, 0, g.pad_top, rows - g.height - g.pad_top, g.pad_left,
                         columns - g.width - g.pad_left});
  // (N, C, R, 2, TW + 1, 2) → (N, C, p, q, R, TW + 1)
  Tensor parities = padded.reshape({g.batch, g.channels, g.plane_rows, 2, g.tile_columns + 1, 2})
                        .permute({0, 1, 3, 5, 2, 4});
  // The two column shifts, chosen by comparing an arange (a stack would add a padding mask per
  // shift on top of the conv's own).
  Tensor first_shift = Tensor::arange(2, ScalarType::Int32).reshape({1, 1, 1, 1, 2, 1, 1}).eq(
      Tensor::scalar(0, ScalarType::Int32));
  Tensor planes = first_shift.where(shrink_axis(parities, 5, 0, g.tile_columns).unsqueeze(4),
                                    shrink_axis(parities, 5, 1, 1 + g.tile_columns).unsqueeze(4));  // (N, C, p, q, s, R, TW)
  return contiguous(planes).reshape({g.batch, g.channels, 8, g.plane_rows * g.tile_columns});
}

// Step 2: V[ij] as (C, N·padded_tiles), row-major.
Tensor input_transform(const Tensor& planes, const Geometry& g, int i, int j) {
  std::vector<std::pair<double, Tensor>> terms;
  for (int a = 0; a < kInput; ++a)
    for (int b = 0; b < kInput; ++b) {
      double coefficient = kBT[i][a] * kBT[j][b];
      if (coefficient == 0) continue;
      int64_t plane = (a % 2) * 4 + (b % 2) * 2 + b / 2, offset = (a / 2) * g.tile_columns;
      Tensor view = shrink_axis(shrink_axis(planes, 2, plane, plane + 1), 3, offset, offset + g.padded_tiles);
      terms.emplace_back(coefficient, view.reshape({g.batch, g.channels, g.padded_tiles}));
    }
  Tensor v = linear_combination(terms).permute({1, 0, 2});  // (C, N, padded tiles)
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

// The largest output (pixels per image) at which Winograd's cold transformed weights cost more
// than its products save (see use_winograd).
constexpr int64_t kWeightBoundPixels = 28 * 28;

bool use_winograd(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvOptions& options) {
  // Winograd's tiles are laid out for known sizes: a symbolic batch takes the direct conv.
  if (has_symbolic_shape(x)) return false;
  WinogradMode mode = winograd_mode();
  if (mode == WinogradMode::Off || !winograd_eligible(x, weight, bias, options)) return false;
  if (mode == WinogradMode::Always) return true;
  // On a GPU target the direct conv, one thread per output, ran at 1.7-3.3 TFLOP/s on an H200 and
  // Winograd's per-tap products at 0.5, in 48 extra launches (ResNet-50); GPU Winograd would need
  // its own kernels.
  if (graph_target_caps().output_grid) return false;
  // Measured with bench-tensor, one thread, AVX-512 (docs/winograd.md): Winograd's 16 products
  // save 20·F·C multiply-adds per tile, its transforms and intermediates cost memory traffic per
  // tile in proportion to C + F, and beyond 56x56 outputs the intermediates leave the caches
  // (16·(C + F)·4 bytes per tile). So: at most 56x56 outputs per image with 32 channels or more
  // on both sides (32->32 @56: 1.75x, 64->64 @56: 2.3x); up to 112x112 only from 64 channels
  // (64->64 @112: 1.15x, but 32->32 @112: 0.9-1.07x and 16->16 @112: 0.7x); never above (64->64
  // @224: 0.8x). 16 channels won 1.3x at 56x56, too little to trade a one-kernel conv for 37
  // kernels without more measurements.
  // More than 28x28 outputs: bench-tensor times one conv with its weights hot in the caches, but
  // in a model every conv's weights come from memory once per run, and the 16 transformed
  // matrices are 16/9 the direct weight. With few tiles to share them the products are bound by
  // that traffic: in ResNet-50 (one thread) the 7x7 products ran at 48 GFLOP/s and the 14x14 ones
  // at 80, against 110-155 for the direct convs, and taking Winograd only at 56x56 made the model
  // 7 % faster at one thread and 12 % at two than taking it from 4x4 up (bench/README.md).
  // A weight that broadcasts one value (the weight-stripped test models) stays direct: there the
  // direct conv computed each distinct output once (DenseNet-121's light model: 52 → 69 ms with
  // Winograd). Since a conv weight in panels is now stored in full (fold_constants folds the
  // copy), that holds only for weights without panels; not re-measured on AVX-512.
  if (is_broadcast_value(weight)) return false;
  // Measured on AVX-512 only. On an AVX2 CPU (Zen 3, 16 registers) it lost: ResNet-50 ran about
  // 15 % slower with it at one thread (the direct conv reading a padded copy is 60-79 GFLOP/s
  // there, and a ReLU after Winograd's output copy runs in the next conv's loads), and bench-tensor
  // had 64->64 @56 and 256->256 @14 at 0.6-0.7x. So Auto uses it only with 32 vector registers.
  if (host_cpu_caps().vector_registers < 32) return false;
  Geometry g = geometry(x, weight, options);
  int64_t channels = std::min(g.channels, g.filters), pixels = g.out_height * g.out_width;
  if (pixels <= kWeightBoundPixels) return false;
  return (channels >= 32 && pixels <= 56 * 56) || (channels >= 64 && pixels <= 112 * 112);
}

Tensor winograd_conv(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvOptions& options) {
  Geometry g = geometry(x, weight, options);
  Tensor planes = split_input(x, g);
  std::array<std::array<Tensor, kInput>, kInput> m;  // M[i][j] as (N, F, tile rows, 1, tile columns, 1)
  for (int i = 0; i < kInput; ++i)
    for (int j = 0; j < kInput; ++j) {
      Tensor product = tile_product(weight_transform(weight, i, j), input_transform(planes, g, i, j));
      Tensor tiles = shrink_axis(product.reshape({g.filters, g.batch, g.padded_tiles}), 2, 0,
                                 g.tile_rows * g.tile_columns);
      m[i][j] = tiles.reshape({g.filters, g.batch, g.tile_rows, 1, g.tile_columns, 1}).permute({1, 0, 2, 3, 4, 5});
    }
  // Step 5: Aᵀ M A, one axis after the other. Row dy of Aᵀ is chosen by comparing an arange with
  // 0 (index math, no buffer): both rows are computed and one selected, which costs two adds more
  // than a branch but keeps every load of M unconditional and shared by the four outputs of a tile
  // (a stack would pad each output with its own masked loads: 36 loads per output instead of 16
  // per tile).
  auto first_row = [](int64_t axis) {
    Shape shape(6, 1);
    shape[static_cast<size_t>(axis)] = kTile;
    return Tensor::arange(kTile, ScalarType::Int32).reshape(shape).eq(Tensor::scalar(0, ScalarType::Int32));
  };
  auto apply_at = [](const Tensor& is_first, const std::array<Tensor, kInput>& v) {
    std::array<Tensor, kTile> rows;
    for (int d = 0; d < kTile; ++d) {
      std::vector<std::pair<double, Tensor>> terms;
      for (int k = 0; k < kInput; ++k) terms.emplace_back(kAT[d][k], v[k]);
      rows[d] = linear_combination(terms);
    }
    return is_first.where(rows[0], rows[1]);
  };
  Tensor first_dy = first_row(3), first_dx = first_row(5);
  std::array<Tensor, kInput> z;  // z[j] = Σ_i Aᵀ[dy][i] M[i][j]
  for (int j = 0; j < kInput; ++j) z[j] = apply_at(first_dy, {m[0][j], m[1][j], m[2][j], m[3][j]});
  Tensor y = apply_at(first_dx, z);  // (N, F, tile rows, 2, tile columns, 2)
  if (bias.defined()) y = y + bias.reshape({1, g.filters, 1, 1, 1, 1});
  Tensor full = contiguous(y).reshape({g.batch, g.filters, kTile * g.tile_rows, kTile * g.tile_columns});
  if (full.dim(2) == g.out_height && full.dim(3) == g.out_width) return full;
  return full.shrink({{0, g.batch}, {0, g.filters}, {0, g.out_height}, {0, g.out_width}});
}

}  // namespace kiln
