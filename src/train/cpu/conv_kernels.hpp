// The CPU backend's f32 inner kernels for convolutions, one image (or one channel plane) at a
// time: im2col and col2im for Conv2D, and the direct depthwise kernels. The callers parallelise
// over images; these loops are written so the compiler vectorises them (stride-1 rows, no
// reductions across lanes) and are compiled for AVX-512, AVX2+FMA and baseline x86-64 with
// run-time selection (conv_kernels.cpp).
#pragma once

#include "sluice/train/ops.hpp"

namespace sluice::train::cpu {

// x (C, H, W) -> col (C * kh * kw, OH * OW): row (c, ky, kx) holds the input under that kernel
// tap for every output position, zero where it falls in the padding.
void im2col(const float* x, int channels, int h, int w, const Window2d& win, int oh, int ow, float* col);
// The adjoint: dx (C, H, W) = sum of col's entries over the taps that read each pixel (dx is
// overwritten).
void col2im(const float* col, int channels, int h, int w, const Window2d& win, int oh, int ow, float* dx);

// One plane of a depthwise convolution: y (OH, OW) = bias + sum over taps of w (kh, kw) * x (H, W).
void depthwise_plane_forward(const float* x, int h, int w, const float* weight, float bias,
                             const Window2d& win, int oh, int ow, float* y);
// dx (H, W) = the transposed convolution of dy (OH, OW) with w (overwritten).
void depthwise_plane_backward_input(const float* dy, int h, int w, const float* weight,
                                    const Window2d& win, int oh, int ow, float* dx);
// dw (kh, kw) += correlation of x (H, W) with dy (OH, OW). `rows` is scratch of kh * kw * OW
// floats (per-tap running sums kept as vectors, reduced once at the end).
void depthwise_plane_backward_weight(const float* x, int h, int w, const float* dy,
                                     const Window2d& win, int oh, int ow, float* rows, float* dw);

// y (K, P) += bias[k] per row; sums (K) += the sum of each row of dy (K, P).
void add_row_bias(float* y, int rows, int cols, const float* bias);
void add_row_sums(const float* dy, int rows, int cols, float* sums);

}  // namespace sluice::train::cpu
