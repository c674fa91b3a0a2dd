// ONNX signal processing: DFT (opsets 17 and 20), STFT, the Hann / Hamming / Blackman windows and
// MelWeightMatrix.
//
// kiln has no FFT primitive, so a DFT of static length n is a matrix product with cosine and sine
// matrices (n_in × bins). They are computed on the host in double precision with the phase reduced
// to (j·k mod n) before the trigonometry, so every entry is exact to double rounding; the products
// then accumulate in f32 (f64 for f64 input), which holds the conformance tolerance (rtol 1e-3).
// Cost: O(n·bins) multiply-adds per transformed row instead of an FFT's O(n log n), and two
// constant matrices of n·bins elements; fine for the frame sizes of audio front ends (≤ a few
// thousand), wasteful for very long transforms.
//
// The window functions and MelWeightMatrix have only scalar inputs: their values are read at build
// time (input_ints / input_doubles) and the result is a host-computed constant.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>
#include <string>
#include <vector>

#include "op_helpers.h"
#include "op_registry.h"

namespace kiln::onnx_import {
namespace {

using Outputs = std::vector<Tensor>;

// f16/bf16 are computed in f32 and cast back; f64 stays f64.
ScalarType compute_type(ScalarType type) { return type == ScalarType::Float64 ? type : ScalarType::Float32; }

// A complex signal held as separate real and imaginary tensors of the same shape; a real signal
// has no imaginary part.
struct Complex {
  Tensor real;
  std::optional<Tensor> imag;
};

// The rows × columns matrix cos(2π·j·k/n) (or sin), j the row and k the column, as a constant of
// `type`; row j is multiplied by row_weight[j] when given (the inverse real transform's weights).
Tensor dft_basis(int64_t rows, int64_t columns, int64_t n, bool sine, ScalarType type,
                 const std::vector<double>* row_weight = nullptr) {
  std::vector<double> values(static_cast<size_t>(rows * columns));
  for (int64_t j = 0; j < rows; ++j)
    for (int64_t k = 0; k < columns; ++k) {
      // Reducing j·k modulo n first keeps the angle in [0, 2π): no precision lost to large phases.
      double angle = 2.0 * std::numbers::pi * static_cast<double>((j * k) % n) / static_cast<double>(n);
      double value = sine ? std::sin(angle) : std::cos(angle);
      if (row_weight) value *= (*row_weight)[static_cast<size_t>(j)];
      values[static_cast<size_t>(j * columns + k)] = value;
    }
  return Tensor::from_vector(values, {rows, columns}).cast(type);
}

// The DFT of length n along the last axis of `x` (which may be shorter or longer than n: extra
// samples are dropped, missing ones are zeros), keeping the first `bins` outputs. The inverse
// transform flips the sign of the exponent and divides by n.
Complex dft_last_axis(const Complex& x, int64_t n, int64_t bins, bool inverse) {
  int64_t used = std::min(x.real.dim(-1), n);  // zero padding contributes nothing to the sums
  ScalarType type = x.real.dtype();
  Tensor cosines = dft_basis(used, bins, n, false, type);
  Tensor sines = dft_basis(used, bins, n, true, type);
  Tensor re = x.real.slice(-1, 0, used);
  // Forward: X[k] = Σ x[j]·(cos θ − i·sin θ); inverse: Σ x[j]·(cos θ + i·sin θ), θ = 2πjk/n.
  Tensor out_re = re.matmul(cosines);
  Tensor out_im = inverse ? re.matmul(sines) : re.matmul(sines).neg();
  if (x.imag) {
    Tensor im = x.imag->slice(-1, 0, used);
    out_re = inverse ? out_re - im.matmul(sines) : out_re + im.matmul(sines);
    out_im = out_im + im.matmul(cosines);
  }
  if (inverse) {
    out_re = out_re / static_cast<double>(n);
    out_im = out_im / static_cast<double>(n);
  }
  return {out_re, out_im};
}

// The inverse of a one-sided spectrum (numpy's irfft): the missing half is the conjugate mirror of
// the given bins, so x[j] = (1/n)·Σ_k w_k·(Re X[k]·cos θ − Im X[k]·sin θ) over k = 0…n/2, with
// w_k = 2 for the mirrored bins and 1 for k = 0 and (n even) k = n/2. Bins past n/2 are ignored.
Tensor inverse_real_dft_last_axis(const Complex& x, int64_t n) {
  int64_t used = std::min(x.real.dim(-1), n / 2 + 1);
  std::vector<double> weight(static_cast<size_t>(used), 2.0);
  weight[0] = 1.0;
  if (n % 2 == 0 && used == n / 2 + 1) weight[static_cast<size_t>(n / 2)] = 1.0;
  ScalarType type = x.real.dtype();
  Tensor result = x.real.slice(-1, 0, used).matmul(dft_basis(used, n, n, false, type, &weight));
  if (x.imag) result = result - x.imag->slice(-1, 0, used).matmul(dft_basis(used, n, n, true, type, &weight));
  return result / static_cast<double>(n);
}

// (…, c) with c = 1 (real) or 2 (complex) → its parts in the compute type.
Complex split_complex(const OnnxNode& node, const Tensor& x) {
  if (x.ndim() < 2) node.fail("input must have at least 2 dimensions (signal dimensions, then real/imaginary)");
  int64_t components = x.dim(-1);
  if (components != 1 && components != 2)
    node.fail("the last dimension must be 1 (real) or 2 (complex), not " + std::to_string(components));
  ScalarType type = compute_type(x.dtype());
  Complex parts{x.slice(-1, 0, 1).squeeze({-1}).cast(type), std::nullopt};
  if (components == 2) parts.imag = x.slice(-1, 1, 2).squeeze({-1}).cast(type);
  return parts;
}

// Real and imaginary parts → (…, 2).
Tensor join_complex(const Tensor& real, const Tensor& imag) {
  return Tensor::concat({real.unsqueeze(real.ndim()), imag.unsqueeze(imag.ndim())}, -1);
}

int64_t scalar_int_input(const OnnxNode& node, size_t index, const char* what) {
  std::vector<int64_t> values = node.input_ints(index);
  if (values.size() != 1) node.fail(std::string(what) + " must hold exactly one value");
  return values[0];
}

// ---------------------------------------------------------------------------------------------
// DFT

Outputs dft(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  Complex parts = split_complex(node, x);
  int64_t rank = x.ndim();
  // Opset 17: `axis` attribute, default 1. Opset 20: optional input 2, default -2. Either way the
  // last (real/imaginary) dimension is not a valid axis.
  int64_t axis_value = node.opset() < 20 ? node.attr_int("axis", 1)
                                         : (node.has_input(2) ? scalar_int_input(node, 2, "axis") : -2);
  int64_t axis = normalize_axis(node, axis_value, rank);
  if (axis == rank - 1) node.fail("axis " + std::to_string(axis_value) + " names the real/imaginary dimension");
  bool inverse = node.attr_int("inverse", 0) != 0;
  bool onesided = node.attr_int("onesided", 0) != 0;
  bool complex_input = parts.imag.has_value();
  if (onesided && !inverse && complex_input) node.fail("unsupported: onesided=1 forward DFT of a complex input (the spec allows real input only)");
  if (onesided && inverse && !complex_input) node.fail("unsupported: onesided=1 inverse DFT of a real input (the spec allows complex input only)");

  int64_t length = x.dim(axis);
  int64_t n = onesided && inverse ? 2 * (length - 1) : length;
  if (node.has_input(1)) n = scalar_int_input(node, 1, "dft_length");
  if (n <= 0) node.fail("dft_length must be positive, not " + std::to_string(n));

  std::vector<int64_t> order = axis_to_last(rank - 1, axis);
  std::vector<int64_t> back = inverse_permutation(order);
  Complex moved{parts.real.permute(order), std::nullopt};
  if (parts.imag) moved.imag = parts.imag->permute(order);

  if (onesided && inverse) {
    Tensor real = inverse_real_dft_last_axis(moved, n).permute(back);
    return {real.unsqueeze(real.ndim()).cast(x.dtype())};
  }
  int64_t bins = onesided ? n / 2 + 1 : n;
  Complex result = dft_last_axis(moved, n, bins, inverse);
  return {join_complex(result.real.permute(back), result.imag->permute(back)).cast(x.dtype())};
}

// ---------------------------------------------------------------------------------------------
// STFT

Outputs stft(const OnnxNode& node) {
  const Tensor& signal = node.input(0);
  if (signal.ndim() != 3) node.fail("signal must be 3-D (batch, length, 1 or 2)");
  Complex parts = split_complex(node, signal);
  int64_t length = signal.dim(1);
  int64_t step = scalar_int_input(node, 1, "frame_step");
  if (step <= 0) node.fail("frame_step must be positive, not " + std::to_string(step));

  std::optional<Tensor> window;
  if (node.has_input(2)) {
    window = node.input(2);
    if (window->ndim() != 1) node.fail("window must be 1-D");
  }
  int64_t frame_length = length;
  if (node.has_input(3)) {
    frame_length = scalar_int_input(node, 3, "frame_length");
    if (window && window->dim(0) != frame_length)
      node.fail("window has " + std::to_string(window->dim(0)) + " entries but frame_length is " + std::to_string(frame_length));
  } else if (window) {
    frame_length = window->dim(0);
  }
  if (frame_length <= 0 || frame_length > length)
    node.fail("frame_length " + std::to_string(frame_length) + " must be in [1, signal length " + std::to_string(length) + "]");
  bool onesided = node.attr_int("onesided", 1) != 0;
  if (onesided && parts.imag) node.fail("unsupported: onesided=1 with a complex signal (the spec allows it for real signals only)");

  // Frame f holds samples f·step + [0, frame_length): one gather builds (batch, frames, frame_length).
  int64_t frames = (length - frame_length) / step + 1;
  std::vector<int64_t> positions;
  positions.reserve(static_cast<size_t>(frames * frame_length));
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t i = 0; i < frame_length; ++i) positions.push_back(f * step + i);
  Tensor index = Tensor::from_vector(positions, {frames, frame_length});
  Complex framed{parts.real.take(index, 1), std::nullopt};
  if (parts.imag) framed.imag = parts.imag->take(index, 1);
  if (window) {
    Tensor weights = window->cast(framed.real.dtype());
    framed.real = framed.real * weights;
    if (framed.imag) framed.imag = *framed.imag * weights;
  }
  Complex result = dft_last_axis(framed, frame_length, onesided ? frame_length / 2 + 1 : frame_length, false);
  return {join_complex(result.real, *result.imag).cast(signal.dtype())};
}

// ---------------------------------------------------------------------------------------------
// Window functions: generalized cosine windows Σ_m (−1)^m·a_m·cos(2πmk/N), where N is the size
// (periodic) or size − 1 (symmetric).

Outputs cosine_window(const OnnxNode& node, const std::vector<double>& coefficients) {
  int64_t size = scalar_int_input(node, 0, "size");
  if (size < 0) node.fail("size must not be negative, not " + std::to_string(size));
  bool periodic = node.attr_int("periodic", 1) != 0;
  ScalarType type = scalar_type_from_onnx(static_cast<int32_t>(node.attr_int("output_datatype", 1)));
  // A symmetric window of size 1 would divide by zero (N = 0); it is [1], as numpy and scipy give.
  if (!periodic && size == 1) return {Tensor::ones({1}, type)};
  double period = static_cast<double>(periodic ? size : size - 1);
  std::vector<double> values;
  values.reserve(static_cast<size_t>(size));
  for (int64_t k = 0; k < size; ++k) {
    double value = 0.0, sign = 1.0;
    for (size_t m = 0; m < coefficients.size(); ++m, sign = -sign)
      value += sign * coefficients[m] * std::cos(2.0 * std::numbers::pi * static_cast<double>(m) * static_cast<double>(k) / period);
    values.push_back(value);
  }
  return {Tensor::from_vector(values, {size}).cast(type)};
}

Outputs hann_window(const OnnxNode& node) { return cosine_window(node, {0.5, 0.5}); }
// ONNX's Hamming uses the "optimal" α = 25/46 (not the rounded 0.54), β = 1 − α.
Outputs hamming_window(const OnnxNode& node) { return cosine_window(node, {25.0 / 46.0, 21.0 / 46.0}); }
Outputs blackman_window(const OnnxNode& node) { return cosine_window(node, {0.42, 0.5, 0.08}); }

// ---------------------------------------------------------------------------------------------
// MelWeightMatrix

double hertz_to_mel(double hertz) { return 2595.0 * std::log10(1.0 + hertz / 700.0); }
double mel_to_hertz(double mel) { return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0); }

Outputs mel_weight_matrix(const OnnxNode& node) {
  int64_t mel_bins = scalar_int_input(node, 0, "num_mel_bins");
  int64_t dft_length = scalar_int_input(node, 1, "dft_length");
  int64_t sample_rate = scalar_int_input(node, 2, "sample_rate");
  double lower = node.input_doubles(3).at(0), upper = node.input_doubles(4).at(0);
  if (mel_bins <= 0 || dft_length <= 0 || sample_rate <= 0)
    node.fail("num_mel_bins, dft_length and sample_rate must be positive");
  if (lower < 0 || upper <= lower) node.fail("need 0 <= lower_edge_hertz < upper_edge_hertz");
  ScalarType type = scalar_type_from_onnx(static_cast<int32_t>(node.attr_int("output_datatype", 1)));
  int64_t spectrum_bins = dft_length / 2 + 1;

  // num_mel_bins + 2 band edges spaced evenly on the mel scale, each mapped to the DFT bin
  // floor((dft_length + 1)·f / sample_rate). The spacing divides the mel range by
  // num_mel_bins + 2 (so the last edge stops short of upper_edge_hertz): that is the convention
  // of the ONNX reference and its conformance data, which the spec text leaves open.
  int64_t edge_count = mel_bins + 2;
  double low_mel = hertz_to_mel(lower);
  double mel_step = (hertz_to_mel(upper) - low_mel) / static_cast<double>(edge_count);
  std::vector<int64_t> edge_bin;
  for (int64_t e = 0; e < edge_count; ++e) {
    double hertz = mel_to_hertz(low_mel + static_cast<double>(e) * mel_step);
    edge_bin.push_back(static_cast<int64_t>(std::floor(static_cast<double>(dft_length + 1) * hertz / static_cast<double>(sample_rate))));
  }

  // Band m is a triangle rising from edge m to a peak of 1 at edge m + 1, falling to edge m + 2.
  std::vector<double> matrix(static_cast<size_t>(spectrum_bins * mel_bins), 0.0);
  auto set = [&](int64_t bin, int64_t band, double value) {
    if (bin >= 0 && bin < spectrum_bins) matrix[static_cast<size_t>(bin * mel_bins + band)] = value;
  };
  for (int64_t band = 0; band < mel_bins; ++band) {
    int64_t left = edge_bin[static_cast<size_t>(band)], center = edge_bin[static_cast<size_t>(band + 1)],
            right = edge_bin[static_cast<size_t>(band + 2)];
    if (center == left) {
      set(center, band, 1.0);
    } else {
      for (int64_t bin = left; bin <= center; ++bin)
        set(bin, band, static_cast<double>(bin - left) / static_cast<double>(center - left));
    }
    for (int64_t bin = center; bin < right; ++bin)
      set(bin, band, static_cast<double>(right - bin) / static_cast<double>(right - center));
  }
  return {Tensor::from_vector(matrix, {spectrum_bins, mel_bins}).cast(type)};
}

}  // namespace

void register_signal_ops(OpRegistry& registry) {
  registry.add("DFT", dft, 17);
  registry.add("STFT", stft, 17);
  registry.add("HannWindow", hann_window, 17);
  registry.add("HammingWindow", hamming_window, 17);
  registry.add("BlackmanWindow", blackman_window, 17);
  registry.add("MelWeightMatrix", mel_weight_matrix, 17);
}

}  // namespace kiln::onnx_import
