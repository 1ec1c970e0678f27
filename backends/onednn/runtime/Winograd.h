// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// Winograd F(4x4, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2015):
// a 3x3 convolution of stride 1 computed as 36 matrix products over 6x6 input tiles, each giving a
// 4x4 block of outputs: 4x fewer multiplications than the direct convolution. On AVX2, where oneDNN
// has no Winograd kernel and its direct f32 convolutions already run near the CPU's peak, that is the
// one way to compute ResNet's 3x3 layers faster (1.0-2.6x per layer, README "Winograd convolutions";
// F(2x2, 3x3), 2.25x fewer, measured no faster than F(4x4, 3x3) on any layer there).
//
// The steps: input tiles V[36][T][IC] = B^T d B per tile d of the channels-last src (zero outside
// it), products M[36][T][OC] = V x U by one oneDNN batched matmul, with U[36][IC][OC] = G g G^T of the
// weights g made once at init, and outputs Y = A^T m A per tile, plus bias, residual and ReLU, written
// into the channels-last dst. Round-off grows by about ten f32 ulps of the inputs' magnitude, but an
// infinity in a tile turns into NaN through the transforms' differences, so the step is guarded
// (ConvolutionSteps.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace executorch::backends::onednn {

// The backend option "winograd", read when a program is loaded: 0 never; 1 (the default) for the layers
// where it was measured faster than oneDNN's direct kernels (ConvolutionSteps.cpp says which); 2 for
// every layer it can compute, on every CPU with AVX2.
inline constexpr char kWinogradOption[] = "winograd";
enum class WinogradUse : int { never = 0, where_faster = 1, always = 2 };
void set_winograd_use(WinogradUse use) noexcept;
WinogradUse winograd_use() noexcept;

constexpr size_t kWinogradTile = 4;                               // outputs per tile side
constexpr size_t kWinogradSide = kWinogradTile + 2;               // inputs per tile side
constexpr size_t kWinogradPoints = kWinogradSide * kWinogradSide; // the batch of the matmul
constexpr size_t kWinogradLanes = 8; // channels per AVX2 vector: both channel counts are multiples

struct WinogradShape {
  size_t batch = 0;
  size_t height = 0; // src, channels-last [batch, height, width, channels]
  size_t width = 0;
  size_t channels = 0;
  size_t out_height = 0; // dst, channels-last [batch, out_height, out_width, out_channels]
  size_t out_width = 0;
  size_t out_channels = 0;
  int64_t pad_top = 0;
  int64_t pad_left = 0;
  bool relu = false; // the output transform ends with max(y, 0)
  size_t tiles_high() const {
    return (out_height + kWinogradTile - 1) / kWinogradTile;
  }
  size_t tiles_wide() const {
    return (out_width + kWinogradTile - 1) / kWinogradTile;
  }
  size_t tiles() const {
    return batch * tiles_high() * tiles_wide();
  }
};

// `count` 3x3 filters (9 values each, as in PyTorch's [OC, IC, 3, 3]) -> `transformed` [count][36];
// the runtime reorders that into the matmul's [36][IC][OC] weights.
void winograd_weights(const float* filters, size_t count, float* transformed);

// Tiles [begin, end) of `src` into `tiles` [36][shape.tiles()][channels]. AVX2 with FMA required.
void winograd_input_tiles(const WinogradShape& shape, const float* src, float* tiles, size_t begin, size_t end);

// Tiles [begin, end) of `products` [36][shape.tiles()][out_channels] into `dst`, adding `bias`
// [out_channels] and `residual` (dst's shape and layout) where not null, then ReLU when shape.relu.
void winograd_output_tiles(
    const WinogradShape& shape,
    const float* products,
    const float* bias,
    const float* residual,
    float* dst,
    size_t begin,
    size_t end);

} // namespace executorch::backends::onednn
