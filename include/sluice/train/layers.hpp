// The layers a Sequential model is built from (sluice/train/layer.hpp has the contract):
// Conv2D, DepthwiseConv2D, SeparableConv2D and Dense with their weights; BatchNorm with gamma,
// beta and running statistics; ReLU, MaxPool2D, GlobalAvgPool, Dropout and Flatten without
// parameters. Parameters are f32 (the optimizers update f32 parameters); in mixed precision the
// weighted layers compute with 16-bit copies of them (Layer::set_compute_dtype). Shapes follow PyTorch:
// convolution weights (K, C, kh, kw), dense weights (out, in).
//
// Implementations: conv_layers.cpp (the three convolutions), dense_layer.cpp, batchnorm_layer.cpp,
// simple_layers.cpp (the parameterless ones).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sluice/train/layer.hpp"
#include "sluice/train/ops.hpp"

namespace sluice::train {

struct Conv2DOptions {
  int in_channels = 0;
  int out_channels = 0;
  Window2d window = Window2d::square(3, 1, 1);
  bool bias = false;  // off by default: a BatchNorm usually follows
};

class Conv2D : public Layer {
 public:
  Conv2D(Context& ctx, Conv2DOptions options);
  std::string describe() const override;
  Shape output_shape(const Shape& input) const override;
  void initialize(Context& ctx, std::uint64_t key) override;
  Tensor forward(Context& ctx, Tensor x, const ForwardMode& mode) override;
  Tensor backward(Context& ctx, Tensor dy, InputGradient input_gradient) override;
  void parameters(const std::string& prefix, std::vector<Parameter>& out) override;
  void release_saved() override { x_.reset(); }
  void set_compute_dtype(Context& ctx, DType dtype) override;

 private:
  Conv2DOptions options_;
  Param weight_;  // (K, C, kh, kw)
  Param bias_;    // (K), when options_.bias
  Tensor x_;      // (N, C, H, W): the input, kept for backward
};

struct DepthwiseConv2DOptions {
  int channels = 0;
  Window2d window = Window2d::square(3, 1, 1);
  bool bias = false;
};

class DepthwiseConv2D : public Layer {
 public:
  DepthwiseConv2D(Context& ctx, DepthwiseConv2DOptions options);
  std::string describe() const override;
  Shape output_shape(const Shape& input) const override;
  void initialize(Context& ctx, std::uint64_t key) override;
  Tensor forward(Context& ctx, Tensor x, const ForwardMode& mode) override;
  Tensor backward(Context& ctx, Tensor dy, InputGradient input_gradient) override;
  void parameters(const std::string& prefix, std::vector<Parameter>& out) override;
  void release_saved() override { x_.reset(); }
  void set_compute_dtype(Context& ctx, DType dtype) override;

 private:
  DepthwiseConv2DOptions options_;
  Param weight_;  // (C, 1, kh, kw)
  Param bias_;    // (C), when options_.bias
  Tensor x_;      // (N, C, H, W)
};

// A depthwise convolution then a 1x1 pointwise one, fused by the op: the depthwise result never
// exists for the whole batch, which is what makes the model memory-lean.
struct SeparableConv2DOptions {
  int in_channels = 0;
  int out_channels = 0;
  Window2d window = Window2d::square(3, 1, 1);  // the depthwise part's
  bool bias = false;
};

class SeparableConv2D : public Layer {
 public:
  SeparableConv2D(Context& ctx, SeparableConv2DOptions options);
  std::string describe() const override;
  Shape output_shape(const Shape& input) const override;
  void initialize(Context& ctx, std::uint64_t key) override;
  Tensor forward(Context& ctx, Tensor x, const ForwardMode& mode) override;
  Tensor backward(Context& ctx, Tensor dy, InputGradient input_gradient) override;
  void parameters(const std::string& prefix, std::vector<Parameter>& out) override;
  void release_saved() override { x_.reset(); }
  void set_compute_dtype(Context& ctx, DType dtype) override;

 private:
  SeparableConv2DOptions options_;
  Param depthwise_;  // (C, 1, kh, kw)
  Param pointwise_;  // (K, C, 1, 1)
  Param bias_;       // (K), when options_.bias
  Tensor x_;         // (N, C, H, W)
};

struct DenseOptions {
  std::int64_t in_features = 0;
  std::int64_t out_features = 0;
  bool bias = true;
};

class Dense : public Layer {
 public:
  Dense(Context& ctx, DenseOptions options);
  std::string describe() const override;
  Shape output_shape(const Shape& input) const override;
  void initialize(Context& ctx, std::uint64_t key) override;
  Tensor forward(Context& ctx, Tensor x, const ForwardMode& mode) override;
  Tensor backward(Context& ctx, Tensor dy, InputGradient input_gradient) override;
  void parameters(const std::string& prefix, std::vector<Parameter>& out) override;
  void release_saved() override { x_.reset(); }
  void set_compute_dtype(Context& ctx, DType dtype) override;

 private:
  DenseOptions options_;
  Param weight_;  // (out, in)
  Param bias_;    // (out), when options_.bias
  Tensor x_;      // (N, in)
};

struct BatchNormOptions {
  int channels = 0;
  BatchNormParams params;  // epsilon, momentum (PyTorch's defaults)
};

// Over (N, C, H, W) or (N, C). gamma and beta are trained; the running mean and variance are
// buffers, saved with the weights and used by an inference forward.
class BatchNorm : public Layer {
 public:
  BatchNorm(Context& ctx, BatchNormOptions options);
  std::string describe() const override;
  Shape output_shape(const Shape& input) const override;
  void initialize(Context& ctx, std::uint64_t key) override;
  Tensor forward(Context& ctx, Tensor x, const ForwardMode& mode) override;
  Tensor backward(Context& ctx, Tensor dy, InputGradient input_gradient) override;
  void parameters(const std::string& prefix, std::vector<Parameter>& out) override;
  void buffers(const std::string& prefix, std::vector<Buffer>& out) override;
  void release_saved() override;

 private:
  BatchNormOptions options_;
  Param gamma_, beta_;                            // (C) f32, no 16-bit copies
  Tensor running_mean_, running_var_;             // (C) f32, category weights
  Tensor x_, saved_mean_, saved_invstd_;          // the input and the batch statistics
};

// max(x, 0). In place when handed the only reference to an activation (in a Sequential: the
// output of a convolution or a BatchNorm, whose backward needs its input rather than its
// output), so a conv-BN-ReLU block keeps two tensors, not three.
class ReLU : public Layer {
 public:
  std::string describe() const override { return "ReLU"; }
  Shape output_shape(const Shape& input) const override { return input; }
  Tensor forward(Context& ctx, Tensor x, const ForwardMode& mode) override;
  Tensor backward(Context& ctx, Tensor dy, InputGradient input_gradient) override;
  void release_saved() override { y_.reset(); }

 private:
  Tensor y_;  // the output, kept for backward (its sign is the mask)
};

class MaxPool2D : public Layer {
 public:
  explicit MaxPool2D(Window2d window = Window2d::square(2, 2, 0)) : window_(window) {}
  std::string describe() const override;
  Shape output_shape(const Shape& input) const override;
  Tensor forward(Context& ctx, Tensor x, const ForwardMode& mode) override;
  Tensor backward(Context& ctx, Tensor dy, InputGradient input_gradient) override;
  void release_saved() override { x_.reset(); }

 private:
  Window2d window_;
  Tensor x_;  // the input: backward finds each window's maximum again
};

// (N, C, H, W) -> (N, C): the mean of each plane.
class GlobalAvgPool : public Layer {
 public:
  std::string describe() const override { return "GlobalAvgPool"; }
  Shape output_shape(const Shape& input) const override;
  Tensor forward(Context& ctx, Tensor x, const ForwardMode& mode) override;
  Tensor backward(Context& ctx, Tensor dy, InputGradient input_gradient) override;
  void release_saved() override { input_shape_ = {}; }

 private:
  Shape input_shape_;  // only the shape is needed for backward
};

// Inverted dropout with a counter-based mask keyed on (key, step, element): backward recomputes
// the mask, nothing is stored. Identity in inference.
class Dropout : public Layer {
 public:
  // `key`: the layer's random stream (Sequential passes derive_key(seed, layer index)).
  Dropout(float rate, std::uint64_t key = 0);
  std::string describe() const override;
  Shape output_shape(const Shape& input) const override { return input; }
  void initialize(Context& ctx, std::uint64_t key) override;
  Tensor forward(Context& ctx, Tensor x, const ForwardMode& mode) override;
  Tensor backward(Context& ctx, Tensor dy, InputGradient input_gradient) override;
  void release_saved() override { pending_ = false; }

 private:
  DropoutMask mask_;
  bool pending_ = false;  // a training forward ran and its backward did not yet
};

// (N, ...) -> (N, product of the rest), sharing the storage.
class Flatten : public Layer {
 public:
  std::string describe() const override { return "Flatten"; }
  Shape output_shape(const Shape& input) const override;
  Tensor forward(Context& ctx, Tensor x, const ForwardMode& mode) override;
  Tensor backward(Context& ctx, Tensor dy, InputGradient input_gradient) override;
  void release_saved() override { input_shape_ = {}; }

 private:
  Shape input_shape_;
};

}  // namespace sluice::train
