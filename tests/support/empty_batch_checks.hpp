// What every op that takes a batch dimension does with a batch of 0, on any Context: nothing
// fails, nothing is launched that could fail (a zero-sized CUDA grid is a launch error), and a
// parameter gradient sums over no image: 0 when overwritten, unchanged when accumulated into.
// tests/unit/train/empty_batch_test.cpp runs it on the CPU reference, tests/gpu/
// empty_work_gpu_test.cpp on cuda:0 (where the conv and separable backward used to leave their
// f32 sums unwritten for a batch of 0).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "sluice/detail/core/half.hpp"
#include "sluice/train/context.hpp"
#include "sluice/train/ops.hpp"
#include "sluice/train/tensor.hpp"

namespace sluice::test {

// Every element of `t` (f32, f16 or bf16) as f32, read back through the context.
inline std::vector<float> read_values(train::Context& ctx, const train::Tensor& t) {
  std::vector<std::uint8_t> bytes(t.bytes());
  train::ops::copy_to_host(ctx, t, bytes.data());
  std::vector<float> out(static_cast<std::size_t>(t.elements()));
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (t.dtype() == DType::kF32) {
      std::memcpy(&out[i], bytes.data() + 4 * i, 4);
    } else {
      std::uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      out[i] = t.dtype() == DType::kF16 ? f16_to_float(h) : bf16_to_float(h);
    }
  }
  return out;
}

inline void expect_all(train::Context& ctx, const train::Tensor& t, float value, const std::string& what) {
  const std::vector<float> v = read_values(ctx, t);
  ASSERT_FALSE(v.empty()) << what;
  for (std::size_t i = 0; i < v.size(); ++i) {
    ASSERT_EQ(v[i], value) << what << ": element " << i << " of " << v.size();
  }
}

// Runs conv2d, depthwise_conv2d, separable_conv2d, dense, max pooling, global average pooling,
// ReLU, dropout, scale and cast on a batch of 0 in `ctx` and checks the gradients' rule.
inline void expect_empty_batch_ops_are_no_ops(train::Context& ctx, DType t) {
  namespace ops = train::ops;
  using train::GradMode;
  using train::Tensor;
  auto make = [&](const Shape& s, DType dt) { return ctx.empty(s, dt, TensorCategory::kActivations); };
  auto filled = [&](const Shape& s, float v) {
    Tensor x = make(s, t);
    ops::fill(ctx, x, v);
    return x;
  };
  const std::string dt = " (" + std::string(to_string(t)) + ")";

  {  // Conv2D, 3x3 (im2col) and 1x1 (direct)
    for (const train::Window2d& win : {train::Window2d::square(3, 1, 1), train::Window2d::square(1)}) {
      const train::Conv2dShape s = train::Conv2dShape::make({0, 3, 8, 8}, 4, win);
      Tensor x = make(s.input(), t), w = filled(s.weight(), 0.5f), b = filled({4}, 0.25f), y = make(s.output(), t);
      ops::conv2d_forward(ctx, s, x, w, &b, y);
      Tensor dy = make(s.output(), t), dx = make(s.input(), t), dw = filled(s.weight(), 7.0f), db = filled({4}, 7.0f);
      ops::conv2d_backward(ctx, s, x, w, dy, &dx, dw, &db);
      expect_all(ctx, dw, 0.0f, "conv2d dw, overwritten" + dt);
      expect_all(ctx, db, 0.0f, "conv2d dbias, overwritten" + dt);
      ops::fill(ctx, dw, 3.0f);
      ops::fill(ctx, db, 3.0f);
      ops::conv2d_backward(ctx, s, x, w, dy, nullptr, dw, &db, GradMode::kAccumulate);
      expect_all(ctx, dw, 3.0f, "conv2d dw, accumulated" + dt);
      expect_all(ctx, db, 3.0f, "conv2d dbias, accumulated" + dt);
    }
  }
  {  // DepthwiseConv2D
    const train::Conv2dShape s = train::Conv2dShape::make_depthwise({0, 3, 8, 8}, train::Window2d::square(3, 1, 1));
    Tensor x = make(s.input(), t), w = filled(s.depthwise_weight(), 0.5f), y = make(s.output(), t);
    ops::depthwise_conv2d_forward(ctx, s, x, w, nullptr, y);
    Tensor dy = make(s.output(), t), dx = make(s.input(), t), dw = filled(s.depthwise_weight(), 7.0f);
    ops::depthwise_conv2d_backward(ctx, s, x, w, dy, &dx, dw, nullptr);
    expect_all(ctx, dw, 0.0f, "depthwise dw, overwritten" + dt);
    ops::fill(ctx, dw, 3.0f);
    ops::depthwise_conv2d_backward(ctx, s, x, w, dy, nullptr, dw, nullptr, GradMode::kAccumulate);
    expect_all(ctx, dw, 3.0f, "depthwise dw, accumulated" + dt);
  }
  {  // SeparableConv2D
    const train::SeparableShape s = train::SeparableShape::make({0, 3, 8, 8}, 5, train::Window2d::square(3, 1, 1));
    Tensor x = make(s.input(), t), wd = filled(s.depthwise_weight(), 0.5f), wp = filled(s.pointwise_weight(), 0.5f),
           b = filled({5}, 0.25f), y = make(s.output(), t);
    ops::separable_conv2d_forward(ctx, s, x, wd, wp, &b, y);
    Tensor dy = make(s.output(), t), dx = make(s.input(), t), dwd = filled(s.depthwise_weight(), 7.0f),
           dwp = filled(s.pointwise_weight(), 7.0f), db = filled({5}, 7.0f);
    ops::separable_conv2d_backward(ctx, s, x, wd, wp, dy, &dx, dwd, dwp, &db);
    expect_all(ctx, dwd, 0.0f, "separable dwd, overwritten" + dt);
    expect_all(ctx, dwp, 0.0f, "separable dwp, overwritten" + dt);
    expect_all(ctx, db, 0.0f, "separable dbias, overwritten" + dt);
    ops::fill(ctx, dwd, 3.0f);
    ops::fill(ctx, dwp, 3.0f);
    ops::separable_conv2d_backward(ctx, s, x, wd, wp, dy, nullptr, dwd, dwp, nullptr, GradMode::kAccumulate);
    expect_all(ctx, dwd, 3.0f, "separable dwd, accumulated" + dt);
    expect_all(ctx, dwp, 3.0f, "separable dwp, accumulated" + dt);
  }
  {  // Dense
    const train::DenseShape s = train::DenseShape::make({0, 6}, 4);
    Tensor x = make(s.input(), t), w = filled(s.weight(), 0.5f), b = filled({4}, 0.25f), y = make(s.output(), t);
    ops::dense_forward(ctx, s, x, w, &b, y);
    Tensor dy = make(s.output(), t), dx = make(s.input(), t), dw = filled(s.weight(), 7.0f), db = filled({4}, 7.0f);
    ops::dense_backward(ctx, s, x, w, dy, &dx, dw, &db);
    expect_all(ctx, dw, 0.0f, "dense dw, overwritten" + dt);
    expect_all(ctx, db, 0.0f, "dense dbias, overwritten" + dt);
    ops::fill(ctx, dw, 3.0f);
    ops::fill(ctx, db, 3.0f);
    ops::dense_backward(ctx, s, x, w, dy, nullptr, dw, &db, GradMode::kAccumulate);
    expect_all(ctx, dw, 3.0f, "dense dw, accumulated" + dt);
    expect_all(ctx, db, 3.0f, "dense dbias, accumulated" + dt);
  }
  {  // pooling, activations, dropout, scale, cast: nothing to do and nothing to fail
    const train::Pool2dShape p = train::Pool2dShape::make({0, 3, 8, 8}, train::Window2d::square(2, 2));
    Tensor x = make(p.input(), t), y = make(p.output(), t), dy = make(p.output(), t), dx = make(p.input(), t);
    ops::maxpool2d_forward(ctx, p, x, y);
    ops::maxpool2d_backward(ctx, p, x, dy, dx);
    Tensor g = make({0, 3}, t);
    ops::global_avg_pool_forward(ctx, x, g);
    ops::global_avg_pool_backward(ctx, g, dx);
    ops::relu_forward(ctx, x, dx);
    ops::relu_backward(ctx, x, x, dx);
    ops::dropout_forward(ctx, train::DropoutMask{0.5f, 17, 1}, x, dx);
    ops::dropout_backward(ctx, train::DropoutMask{0.5f, 17, 1}, x, dx);
    ops::scale(ctx, x, 0.5f);
    Tensor f32 = make(p.input(), DType::kF32);
    ops::cast(ctx, x, f32);
  }
  ctx.synchronize();  // a launch error would surface by here at the latest
}

}  // namespace sluice::test
