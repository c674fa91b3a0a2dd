// Winograd convolution F(2x2, 3x3) for 2-D, 3x3, stride-1 float32 convolutions (winograd.cpp,
// docs/winograd.md): Tensor::conv dispatches here where it is faster than the direct convolution.
#pragma once

#include "kiln/kiln.hpp"

namespace kiln {

// Which convolutions take the Winograd path. KILN_WINOGRAD sets it (0 = Off, 1 or unset = Auto,
// 2 = Always); tests override it with set_winograd_mode.
enum class WinogradMode {
  Off,     // every convolution is direct
  Auto,    // eligible convolutions where the measured rule says Winograd wins
  Always,  // every eligible convolution (for tests and measurements)
};
WinogradMode winograd_mode();
void set_winograd_mode(WinogradMode mode);

// True when x.conv(weight, bias, options) can be computed by winograd_conv: 4-D float32 input,
// weight (F, C, 3, 3), float32 bias or none, groups 1, stride 1, dilation 1, non-negative padding.
bool winograd_eligible(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvOptions& options);
// True when the current mode sends this convolution to winograd_conv (eligible, and under Auto
// the size rule holds). Tensor::conv asks this first.
bool use_winograd(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvOptions& options);
// The convolution computed by F(2x2, 3x3); requires winograd_eligible. Bias may be undefined.
Tensor winograd_conv(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvOptions& options);

}  // namespace kiln
