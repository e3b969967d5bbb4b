// The training core's CUDA backend against its CPU reference (label gpu): every op, forward and
// backward, on the same random inputs in a CPU and a cuda:0 Context, then a tiny network's
// training steps. Skips, saying why, without a usable CUDA device.
//
// Tolerances, |gpu - cpu| <= tol * max(1, |cpu|, rms(cpu)) per element (the RMS because a sum
// of many terms that cancels carries the rounding of its terms, not of its small result):
//   f32   1e-4  the two sum in different orders (cuBLAS tiles, block reductions), nothing else;
//   f16   5e-3  a 16-bit result may round the other way (1 ulp is 2^-11 relative);
//   bf16  3e-2  the same with 8 mantissa bits (1 ulp is 2^-8 relative).
// SeparableConv2D's depthwise result, the pointwise GEMM's input, is kept in the activation dtype
// on the GPU (tensor cores) and in f32 on the CPU: its weight gradient, a sum of N x P products
// of it, is where 16-bit results differ most (the RMS term covers it).
// Exact (bit for bit): fill, cast, ReLU, max pooling forward, the dropout mask (offsets too),
// scale, the loss's count of correct rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "sluice/core/error.hpp"
#include "sluice/detail/core/half.hpp"
#include "sluice/core/rng.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/context.hpp"
#include "sluice/train/ops.hpp"
#include "train/tensor/backend.hpp"

namespace sluice::train {
namespace {

constexpr int kCpu = 0;
constexpr int kGpu = 1;

double tolerance(DType t) {
  switch (t) {
    case DType::kF16:
      return 5e-3;
    case DType::kBF16:
      return 3e-2;
    default:
      return 1e-4;
  }
}

std::vector<std::uint8_t> encode(const std::vector<float>& v, DType t) {
  std::vector<std::uint8_t> out(v.size() * size_of(t));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (t == DType::kF32) {
      std::memcpy(out.data() + 4 * i, &v[i], 4);
    } else {
      const std::uint16_t h = t == DType::kF16 ? float_to_f16(v[i]) : float_to_bf16(v[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

std::vector<float> decode(const std::vector<std::uint8_t>& bytes, DType t) {
  std::vector<float> out(bytes.size() / size_of(t));
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (t == DType::kF32) {
      std::memcpy(&out[i], bytes.data() + 4 * i, 4);
    } else {
      std::uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      out[i] = t == DType::kF16 ? f16_to_float(h) : bf16_to_float(h);
    }
  }
  return out;
}

// One tensor on each side; [kCpu] and [kGpu].
struct Both {
  Tensor side[2];
  Tensor& operator[](int i) { return side[i]; }
  const Tensor& operator[](int i) const { return side[i]; }
};

class TrainOpsGpu : public ::testing::Test {
 public:  // the run_* helpers below take the fixture
  void SetUp() override {
    SLUICE_REQUIRE_GPU();
    cpu_allocator_ = std::make_unique<Allocator>(host());
    gpu_allocator_ = std::make_unique<Allocator>(cuda(0));
    ctx_[kCpu] = std::make_unique<Context>(*cpu_allocator_, ContextOptions{.threads = 2});
    ctx_[kGpu] = std::make_unique<Context>(*gpu_allocator_);
  }

  Context& ctx(int side) { return *ctx_[side]; }

  std::vector<float> random(std::int64_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& x : v) x = dist(rng_);
    return v;
  }

  // `values` (rounded to t) on both sides.
  Both upload(const Shape& shape, DType t, const std::vector<float>& values,
              TensorCategory category = TensorCategory::kActivations) {
    EXPECT_EQ(static_cast<std::int64_t>(values.size()), shape.elements());
    const std::vector<std::uint8_t> bytes = encode(values, t);
    Both b;
    for (int s : {kCpu, kGpu}) {
      b[s] = ctx(s).empty(shape, t, category);
      ops::copy_from_host(ctx(s), bytes.data(), b[s]);
    }
    return b;
  }
  Both random_tensor(const Shape& shape, DType t, float lo = -1.0f, float hi = 1.0f) {
    return upload(shape, t, random(shape.elements(), lo, hi));
  }
  // An output: filled with a sentinel, so an element a kernel forgets shows up.
  Both output(const Shape& shape, DType t) {
    Both b;
    for (int s : {kCpu, kGpu}) {
      b[s] = ctx(s).empty(shape, t, TensorCategory::kActivations);
      ops::fill(ctx(s), b[s], 7.0f);
    }
    return b;
  }

  std::vector<std::uint8_t> bytes_of(int side, const Tensor& t) {
    std::vector<std::uint8_t> out(t.bytes());
    ops::copy_to_host(ctx(side), t, out.data());
    return out;
  }
  std::vector<float> values(int side, const Tensor& t) { return decode(bytes_of(side, t), t.dtype()); }

  // Every element within tol * max(1, |cpu|, rms(cpu)); reports the worst one.
  void expect_close(const Both& b, double tol, const std::string& what) {
    const std::vector<float> c = values(kCpu, b[kCpu]);
    const std::vector<float> g = values(kGpu, b[kGpu]);
    ASSERT_EQ(c.size(), g.size()) << what;
    double squares = 0.0;
    for (const float v : c) squares += std::isfinite(v) ? static_cast<double>(v) * v : 0.0;
    const double rms = c.empty() ? 0.0 : std::sqrt(squares / static_cast<double>(c.size()));
    std::size_t bad = 0, worst = 0;
    double worst_ratio = 0.0;
    for (std::size_t i = 0; i < c.size(); ++i) {
      if (std::isnan(c[i]) && std::isnan(g[i])) continue;
      const double err = std::abs(static_cast<double>(g[i]) - c[i]);
      const double ratio = err / (tol * std::max({1.0, std::abs(static_cast<double>(c[i])), rms}));
      if (!(ratio <= 1.0)) ++bad;
      if (!(ratio <= worst_ratio)) {
        worst_ratio = ratio;
        worst = i;
      }
    }
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << c.size() << " elements off by more than " << tol
                       << "; worst at " << worst << ": cpu " << c[worst] << ", cuda " << g[worst];
  }
  void expect_equal_bytes(const Both& b, const std::string& what) {
    EXPECT_TRUE(bytes_of(kCpu, b[kCpu]) == bytes_of(kGpu, b[kGpu])) << what << " differs between cpu and cuda";
  }

  std::mt19937 rng_{20261130};
  std::unique_ptr<Allocator> cpu_allocator_, gpu_allocator_;
  std::unique_ptr<Context> ctx_[2];
};

class TrainOpsGpuTyped : public TrainOpsGpu, public ::testing::WithParamInterface<DType> {};

std::string dtype_name(const ::testing::TestParamInfo<DType>& info) { return std::string(to_string(info.param)); }

// ---- convolutions ------------------------------------------------------------------------------

struct ConvCase {
  Shape input;
  int out_channels;
  Window2d window;
};

void run_conv(TrainOpsGpu& t, DType dt, const ConvCase& c, double tol) {
  const Conv2dShape s = Conv2dShape::make(c.input, c.out_channels, c.window);
  Both x = t.random_tensor(s.input(), dt), w = t.random_tensor(s.weight(), dt),
       b = t.random_tensor({c.out_channels}, dt);
  Both y = t.output(s.output(), dt);
  for (int side : {kCpu, kGpu}) ops::conv2d_forward(t.ctx(side), s, x[side], w[side], &b[side], y[side]);
  t.expect_close(y, tol, "conv2d y");

  Both dy = t.random_tensor(s.output(), dt), dx = t.output(s.input(), dt), dw = t.output(s.weight(), dt),
       db = t.output({c.out_channels}, dt);
  for (int side : {kCpu, kGpu}) {
    ops::conv2d_backward(t.ctx(side), s, x[side], w[side], dy[side], &dx[side], dw[side], &db[side]);
  }
  t.expect_close(dx, tol, "conv2d dx");
  t.expect_close(dw, tol, "conv2d dw");
  t.expect_close(db, tol, "conv2d dbias");

  // Gradient accumulation: dw and dbias add to what they hold; no dx asked for.
  for (int side : {kCpu, kGpu}) {
    ops::conv2d_backward(t.ctx(side), s, x[side], w[side], dy[side], nullptr, dw[side], &db[side],
                         GradMode::kAccumulate);
  }
  t.expect_close(dw, tol, "conv2d dw accumulated");
  t.expect_close(db, tol, "conv2d dbias accumulated");
}

TEST_P(TrainOpsGpuTyped, Conv2d3x3Pad1Stride1) {
  run_conv(*this, GetParam(), {{4, 5, 9, 11}, 6, Window2d::square(3, 1, 1)}, tolerance(GetParam()));
}

TEST_P(TrainOpsGpuTyped, Conv2d5x3Stride2Pad) {
  run_conv(*this, GetParam(), {{3, 4, 13, 10}, 7, {5, 3, 2, 2, 2, 1}}, tolerance(GetParam()));
}

// 1x1, stride 1, no padding: the GEMMs read x directly (no im2col); f32 writes dx straight.
TEST_P(TrainOpsGpuTyped, Conv2dPointwise) {
  run_conv(*this, GetParam(), {{3, 16, 6, 7}, 12, Window2d::square(1)}, tolerance(GetParam()));
}

// Columns of 42 MB an image: the backend takes one image a chunk (64 MiB of workspace), so three
// chunks, with dw summed across them.
TEST_F(TrainOpsGpu, Conv2dLargeRunsInChunks) {
  run_conv(*this, DType::kF32, {{3, 64, 96, 96}, 8, Window2d::square(3, 1, 1)}, 1e-4);
}

// 4.7 MB of f32 weight-gradient partials an image: three images a group (16 MiB), so dw is
// summed over two groups of one chunk.
TEST_F(TrainOpsGpu, Conv2dWideLayerSumsGroupsOfPartials) {
  run_conv(*this, DType::kF32, {{4, 128, 4, 4}, 1024, Window2d::square(3, 1, 1)}, 1e-4);
}

void run_depthwise(TrainOpsGpu& t, DType dt, const Shape& input, const Window2d& win, double tol) {
  const Conv2dShape s = Conv2dShape::make_depthwise(input, win);
  const int c = s.in_channels;
  Both x = t.random_tensor(s.input(), dt), w = t.random_tensor(s.depthwise_weight(), dt), b = t.random_tensor({c}, dt);
  Both y = t.output(s.output(), dt);
  for (int side : {kCpu, kGpu}) ops::depthwise_conv2d_forward(t.ctx(side), s, x[side], w[side], &b[side], y[side]);
  t.expect_close(y, tol, "depthwise y");
  Both dy = t.random_tensor(s.output(), dt), dx = t.output(s.input(), dt), dw = t.output(s.depthwise_weight(), dt),
       db = t.output({c}, dt);
  for (int side : {kCpu, kGpu}) {
    ops::depthwise_conv2d_backward(t.ctx(side), s, x[side], w[side], dy[side], &dx[side], dw[side], &db[side]);
  }
  t.expect_close(dx, tol, "depthwise dx");
  t.expect_close(dw, tol, "depthwise dw");
  t.expect_close(db, tol, "depthwise dbias");
  for (int side : {kCpu, kGpu}) {
    ops::depthwise_conv2d_backward(t.ctx(side), s, x[side], w[side], dy[side], nullptr, dw[side], nullptr,
                                   GradMode::kAccumulate);
  }
  t.expect_close(dw, tol, "depthwise dw accumulated");
}

TEST_P(TrainOpsGpuTyped, DepthwiseConv2d3x3Pad1) {
  run_depthwise(*this, GetParam(), {5, 8, 12, 9}, Window2d::square(3, 1, 1), tolerance(GetParam()));
}

TEST_P(TrainOpsGpuTyped, DepthwiseConv2d5x5Stride2) {
  run_depthwise(*this, GetParam(), {3, 6, 17, 14}, Window2d::square(5, 2, 2), tolerance(GetParam()));
}

void run_separable(TrainOpsGpu& t, DType dt, const Shape& input, int out_channels, const Window2d& win, double tol) {
  const SeparableShape s = SeparableShape::make(input, out_channels, win);
  Both x = t.random_tensor(s.input(), dt), wd = t.random_tensor(s.depthwise_weight(), dt),
       wp = t.random_tensor(s.pointwise_weight(), dt), b = t.random_tensor({out_channels}, dt);
  Both y = t.output(s.output(), dt);
  for (int side : {kCpu, kGpu}) {
    ops::separable_conv2d_forward(t.ctx(side), s, x[side], wd[side], wp[side], &b[side], y[side]);
  }
  t.expect_close(y, tol, "separable y");
  Both dy = t.random_tensor(s.output(), dt), dx = t.output(s.input(), dt), dwd = t.output(s.depthwise_weight(), dt),
       dwp = t.output(s.pointwise_weight(), dt), db = t.output({out_channels}, dt);
  for (int side : {kCpu, kGpu}) {
    ops::separable_conv2d_backward(t.ctx(side), s, x[side], wd[side], wp[side], dy[side], &dx[side], dwd[side],
                                   dwp[side], &db[side]);
  }
  t.expect_close(dx, tol, "separable dx");
  t.expect_close(dwd, tol, "separable dwd");
  t.expect_close(dwp, tol, "separable dwp");
  t.expect_close(db, tol, "separable dbias");
  for (int side : {kCpu, kGpu}) {
    ops::separable_conv2d_backward(t.ctx(side), s, x[side], wd[side], wp[side], dy[side], nullptr, dwd[side], dwp[side],
                                   &db[side], GradMode::kAccumulate);
  }
  t.expect_close(dwd, tol, "separable dwd accumulated");
  t.expect_close(dwp, tol, "separable dwp accumulated");
  t.expect_close(db, tol, "separable dbias accumulated");
}

TEST_P(TrainOpsGpuTyped, SeparableConv2d3x3) {
  run_separable(*this, GetParam(), {4, 8, 10, 12}, 16, Window2d::square(3, 1, 1), tolerance(GetParam()));
}

TEST_P(TrainOpsGpuTyped, SeparableConv2dStride2) {
  run_separable(*this, GetParam(), {3, 5, 11, 9}, 7, Window2d::square(3, 2, 1), tolerance(GetParam()));
}

// 32 MiB of depthwise result and its gradient an image: two images a chunk (64 MiB), so a full
// chunk and a partial one, with the weight gradients summed across them.
TEST_F(TrainOpsGpu, SeparableConv2dLargeRunsInChunks) {
  run_separable(*this, DType::kF32, {3, 256, 128, 128}, 8, Window2d::square(3, 1, 1), 1e-4);
}

// 4 MiB of pointwise-gradient partials an image: four images a group, so two groups (4 + 2).
TEST_F(TrainOpsGpu, SeparableConv2dWideLayerSumsGroupsOfPartials) {
  run_separable(*this, DType::kF32, {6, 1024, 4, 4}, 1024, Window2d::square(3, 1, 1), 1e-4);
}

// ---- dense -------------------------------------------------------------------------------------

TEST_P(TrainOpsGpuTyped, Dense) {
  const DType dt = GetParam();
  const double tol = tolerance(dt);
  const DenseShape s = DenseShape::make({9, 37}, 13);
  Both x = random_tensor(s.input(), dt), w = random_tensor(s.weight(), dt), b = random_tensor({13}, dt);
  Both y = output(s.output(), dt);
  for (int side : {kCpu, kGpu}) ops::dense_forward(ctx(side), s, x[side], w[side], &b[side], y[side]);
  expect_close(y, tol, "dense y");
  Both y2 = output(s.output(), dt);  // no bias
  for (int side : {kCpu, kGpu}) ops::dense_forward(ctx(side), s, x[side], w[side], nullptr, y2[side]);
  expect_close(y2, tol, "dense y without bias");
  Both dy = random_tensor(s.output(), dt), dx = output(s.input(), dt), dw = output(s.weight(), dt),
       db = output({13}, dt);
  for (int side : {kCpu, kGpu})
    ops::dense_backward(ctx(side), s, x[side], w[side], dy[side], &dx[side], dw[side], &db[side]);
  expect_close(dx, tol, "dense dx");
  expect_close(dw, tol, "dense dw");
  expect_close(db, tol, "dense dbias");
  for (int side : {kCpu, kGpu}) {
    ops::dense_backward(ctx(side), s, x[side], w[side], dy[side], nullptr, dw[side], &db[side], GradMode::kAccumulate);
  }
  expect_close(dw, tol, "dense dw accumulated");
  expect_close(db, tol, "dense dbias accumulated");
}

// cuBLAS's scratch comes from the training allocator, so the profiler and the OOM report account
// for it (4 MiB, 32 MiB on Hopper), under workspace: taken when the context is made, not by the
// first GEMM (cuda_plan_gpu_test.cpp has the rest of that contract).
TEST_F(TrainOpsGpu, CublasWorkspaceComesFromTheTrainingAllocator) {
  const std::uint64_t before = gpu_allocator_->stats().category(TensorCategory::kWorkspace).in_use_bytes;
  EXPECT_GE(before, std::uint64_t{4} << 20) << "taken at setup";
  const DenseShape s = DenseShape::make({4, 8}, 3);
  Both x = random_tensor(s.input(), DType::kF32), w = random_tensor(s.weight(), DType::kF32);
  Both y = output(s.output(), DType::kF32);
  ops::dense_forward(ctx(kGpu), s, x[kGpu], w[kGpu], nullptr, y[kGpu]);
  ctx(kGpu).synchronize();
  EXPECT_EQ(gpu_allocator_->stats().category(TensorCategory::kWorkspace).in_use_bytes, before) << "no op takes more";
  const std::string name = ctx(kGpu).backend().describe();
  EXPECT_NE(name.find("cuda:0"), std::string::npos) << name;
  EXPECT_NE(name.find("cuBLAS"), std::string::npos) << name;
}

// ---- activations, pooling ----------------------------------------------------------------------

TEST_P(TrainOpsGpuTyped, ReluIsExact) {
  const DType dt = GetParam();
  const Shape shape{3, 5, 7, 9};
  Both x = random_tensor(shape, dt), y = output(shape, dt);
  for (int side : {kCpu, kGpu}) ops::relu_forward(ctx(side), x[side], y[side]);
  expect_equal_bytes(y, "relu y");
  Both dy = random_tensor(shape, dt), dx = output(shape, dt);
  for (int side : {kCpu, kGpu}) ops::relu_backward(ctx(side), y[side], dy[side], dx[side]);
  expect_equal_bytes(dx, "relu dx");
  for (int side : {kCpu, kGpu}) ops::relu_forward(ctx(side), x[side], x[side]);  // in place
  expect_equal_bytes(x, "relu in place");
}

TEST_P(TrainOpsGpuTyped, MaxPool) {
  const DType dt = GetParam();
  const Shape in{3, 4, 11, 13};
  for (const Window2d& win : {Window2d::square(2, 2), Window2d::square(3, 2, 1), Window2d{3, 2, 1, 2, 1, 0}}) {
    const Pool2dShape s = Pool2dShape::make(in, win);
    Both x = random_tensor(in, dt), y = output(s.output(), dt);
    for (int side : {kCpu, kGpu}) ops::maxpool2d_forward(ctx(side), s, x[side], y[side]);
    expect_equal_bytes(y, "maxpool y");
    Both dy = random_tensor(s.output(), dt), dx = output(in, dt);
    for (int side : {kCpu, kGpu}) ops::maxpool2d_backward(ctx(side), s, x[side], dy[side], dx[side]);
    expect_close(dx, tolerance(dt), "maxpool dx (kernel " + std::to_string(win.kernel_h) + ")");
  }
}

TEST_P(TrainOpsGpuTyped, GlobalAvgPool) {
  const DType dt = GetParam();
  const double tol = tolerance(dt);
  for (const Shape& in : {Shape{4, 6, 5, 7}, Shape{2, 3, 33, 40}}) {
    Both x = random_tensor(in, dt), y = output({in[0], in[1]}, dt);
    for (int side : {kCpu, kGpu}) ops::global_avg_pool_forward(ctx(side), x[side], y[side]);
    expect_close(y, tol, "global_avg_pool y " + in.to_string());
    Both dy = random_tensor({in[0], in[1]}, dt), dx = output(in, dt);
    for (int side : {kCpu, kGpu}) ops::global_avg_pool_backward(ctx(side), dy[side], dx[side]);
    expect_close(dx, tol, "global_avg_pool dx " + in.to_string());
  }
}

// ---- batch norm --------------------------------------------------------------------------------

TEST_P(TrainOpsGpuTyped, BatchNorm) {
  const DType dt = GetParam();
  const double tol = tolerance(dt);
  for (const Shape& in : {Shape{6, 5, 7, 9}, Shape{32, 11}}) {
    const BatchNormShape s = BatchNormShape::make(in);
    const Shape c = s.channel_shape();
    Both x = upload(in, dt, random(in.elements(), -2.0f, 3.0f));  // a non-zero mean
    Both gamma = upload(c, DType::kF32, random(s.channels, 0.5f, 1.5f), TensorCategory::kWeights);
    Both beta = upload(c, DType::kF32, random(s.channels), TensorCategory::kWeights);
    Both rmean = upload(c, DType::kF32, random(s.channels));
    Both rvar = upload(c, DType::kF32, random(s.channels, 0.5f, 2.0f));
    Both y = output(in, dt), smean = output(c, DType::kF32), sinv = output(c, DType::kF32);
    const BatchNormParams p{.epsilon = 1e-5f, .momentum = 0.1f};
    for (int side : {kCpu, kGpu}) {
      ops::batchnorm_forward_training(ctx(side), s, p, x[side], gamma[side], beta[side], rmean[side], rvar[side],
                                      y[side], smean[side], sinv[side]);
    }
    const std::string shape = in.to_string();
    expect_close(y, tol, "batchnorm training y " + shape);
    expect_close(smean, 1e-4, "batchnorm saved mean " + shape);
    expect_close(sinv, 1e-4, "batchnorm saved invstd " + shape);
    expect_close(rmean, 1e-4, "batchnorm running mean " + shape);
    expect_close(rvar, 1e-4, "batchnorm running var " + shape);

    Both yi = output(in, dt);
    for (int side : {kCpu, kGpu}) {
      ops::batchnorm_forward_inference(ctx(side), s, p, x[side], gamma[side], beta[side], rmean[side], rvar[side],
                                       yi[side]);
    }
    expect_close(yi, tol, "batchnorm inference y " + shape);

    Both dy = random_tensor(in, dt), dx = output(in, dt), dgamma = output(c, DType::kF32),
         dbeta = output(c, DType::kF32);
    for (int side : {kCpu, kGpu}) {
      ops::batchnorm_backward(ctx(side), s, x[side], gamma[side], smean[side], sinv[side], dy[side], &dx[side],
                              dgamma[side], dbeta[side]);
    }
    expect_close(dx, tol, "batchnorm dx " + shape);
    expect_close(dgamma, tol, "batchnorm dgamma " + shape);
    expect_close(dbeta, tol, "batchnorm dbeta " + shape);
    for (int side : {kCpu, kGpu}) {  // in place (dx = dy), accumulating the parameter gradients
      ops::batchnorm_backward(ctx(side), s, x[side], gamma[side], smean[side], sinv[side], dy[side], &dy[side],
                              dgamma[side], dbeta[side], GradMode::kAccumulate);
    }
    expect_close(dy, tol, "batchnorm dx in place " + shape);
    expect_close(dgamma, tol, "batchnorm dgamma accumulated " + shape);
    expect_close(dbeta, tol, "batchnorm dbeta accumulated " + shape);
  }
}

// ---- dropout -----------------------------------------------------------------------------------

TEST_P(TrainOpsGpuTyped, DropoutMaskIsTheCpuMask) {
  const DType dt = GetParam();
  const Shape shape{7, 3, 5, 11};  // 1155 elements: not a multiple of 4 (the last Philox block)
  // The last one starts at element 4099 of its stream (a micro-batch of gradient accumulation).
  for (const DropoutMask& m : {DropoutMask{0.5f, 0x1234abcdull, 3}, DropoutMask{0.1f, derive_key(7, 2), 1ull << 40},
                               DropoutMask{0.3f, derive_key(3, 1), 9, 4099}}) {
    Both x = random_tensor(shape, dt, 0.5f, 1.5f), y = output(shape, dt);  // no zeros in x
    for (int side : {kCpu, kGpu}) ops::dropout_forward(ctx(side), m, x[side], y[side]);
    expect_equal_bytes(y, "dropout y (rate " + std::to_string(m.rate) + ")");
    const std::vector<float> yv = values(kGpu, y[kGpu]);
    const auto dropped = std::count(yv.begin(), yv.end(), 0.0f);
    EXPECT_NEAR(static_cast<double>(dropped) / yv.size(), m.rate, 0.06) << "the mask drops about `rate`";
    Both dy = random_tensor(shape, dt), dx = output(shape, dt);
    for (int side : {kCpu, kGpu}) ops::dropout_backward(ctx(side), m, dy[side], dx[side]);
    expect_equal_bytes(dx, "dropout dx");
  }
}

// The scaled loss gradient of gradient accumulation: t *= alpha, in place, as on the CPU.
TEST_P(TrainOpsGpuTyped, ScaleIsTheCpuScale) {
  const DType dt = GetParam();
  const Shape shape{7, 3, 5, 11};
  for (const float alpha : {0.25f, 1.0f / 3.0f, -2.0f}) {
    Both t = random_tensor(shape, dt, -3.0f, 3.0f);
    for (int side : {kCpu, kGpu}) ops::scale(ctx(side), t[side], alpha);
    expect_equal_bytes(t, "scale by " + std::to_string(alpha));
  }
}

// ---- loss --------------------------------------------------------------------------------------

TEST_P(TrainOpsGpuTyped, SoftmaxCrossEntropy) {
  const DType dt = GetParam();
  for (const auto& [rows, classes] : {std::pair<int, int>{64, 10}, std::pair<int, int>{5, 1000}}) {
    std::vector<float> z = random(std::int64_t{rows} * classes, -4.0f, 4.0f);
    std::vector<std::int32_t> labels(rows);
    for (int r = 0; r < rows; ++r) {
      labels[r] = static_cast<std::int32_t>((r * 7 + 3) % classes);
      if (r % 3 == 0) z[static_cast<std::size_t>(r) * classes + labels[r]] = 5.0f;  // a right row
    }
    Both logits = upload({rows, classes}, dt, z);
    Both lab;
    for (int side : {kCpu, kGpu}) {
      lab[side] = ctx(side).empty({rows}, DType::kI32, TensorCategory::kActivations);
      ops::copy_from_host(ctx(side), labels.data(), lab[side]);
    }
    Both dl = output({rows, classes}, dt);
    LossResult r[2];
    for (int side : {kCpu, kGpu}) r[side] = ops::softmax_cross_entropy(ctx(side), logits[side], lab[side], &dl[side]);
    EXPECT_NEAR(r[kGpu].loss, r[kCpu].loss, 1e-4 * std::max(1.0, r[kCpu].loss));
    EXPECT_EQ(r[kGpu].correct, r[kCpu].correct);
    expect_close(dl, tolerance(dt), "softmax_cross_entropy dlogits");
    const LossResult no_grad = ops::softmax_cross_entropy(ctx(kGpu), logits[kGpu], lab[kGpu], nullptr);
    EXPECT_EQ(no_grad.loss, r[kGpu].loss);
  }
}

TEST_F(TrainOpsGpu, SoftmaxCrossEntropyRejectsABadLabelFoundOnTheDevice) {
  const int rows = 40, classes = 10;
  Both logits = random_tensor({rows, classes}, DType::kF32);
  for (const std::int32_t bad : {classes, -1}) {
    std::vector<std::int32_t> labels(rows, 1);
    labels[17] = bad;
    labels[31] = bad;
    Tensor lab = ctx(kGpu).empty({rows}, DType::kI32, TensorCategory::kActivations);
    ops::copy_from_host(ctx(kGpu), labels.data(), lab);
    try {
      ops::softmax_cross_entropy(ctx(kGpu), logits[kGpu], lab, nullptr);
      ADD_FAILURE() << "label " << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("row 17"), std::string::npos) << e.what();
    }
  }
  // The backend is still usable afterwards.
  std::vector<std::int32_t> good(rows, 2);
  Tensor lab = ctx(kGpu).empty({rows}, DType::kI32, TensorCategory::kActivations);
  ops::copy_from_host(ctx(kGpu), good.data(), lab);
  EXPECT_GT(ops::softmax_cross_entropy(ctx(kGpu), logits[kGpu], lab, nullptr).loss, 0.0);
}

// ---- optimizers, memory ------------------------------------------------------------------------

TEST_F(TrainOpsGpu, SgdAndAdamWUpdates) {
  const Shape shape{1000, 3};
  Both g = random_tensor(shape, DType::kF32);
  for (const SgdUpdate& u : {SgdUpdate{0.1f, 0.0f, false, 0.0f, false}, SgdUpdate{0.05f, 0.9f, false, 1e-4f, true},
                             SgdUpdate{0.05f, 0.9f, true, 1e-4f, false}}) {
    Both w = random_tensor(shape, DType::kF32), buf = random_tensor(shape, DType::kF32);
    for (int side : {kCpu, kGpu})
      ops::sgd_update(ctx(side), u, w[side], g[side], u.momentum != 0 ? &buf[side] : nullptr);
    expect_close(w, 1e-6, "sgd w");
    expect_close(buf, 1e-6, "sgd momentum buffer");
  }
  Both w = random_tensor(shape, DType::kF32), m = random_tensor(shape, DType::kF32, -0.1f, 0.1f),
       v = random_tensor(shape, DType::kF32, 0.0f, 0.01f);
  for (std::int64_t step : {1, 2, 50}) {
    const AdamWUpdate u{.learning_rate = 1e-3f, .weight_decay = 0.01f, .step = step};
    for (int side : {kCpu, kGpu}) ops::adamw_update(ctx(side), u, w[side], g[side], m[side], v[side]);
    expect_close(w, 1e-6, "adamw w at step " + std::to_string(step));
    expect_close(m, 1e-6, "adamw m");
    expect_close(v, 1e-6, "adamw v");
  }
}

TEST_F(TrainOpsGpu, FillAndCastAreExact) {
  const Shape shape{5, 77};
  for (const DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kU8}) {
    // Integers truncate and saturate (u8: -2.75 is 0, 300 is 255).
    for (const float value : {0.0f, 1.0f, -2.75f, 3.3f, 200.6f, 300.0f}) {
      Both b;
      for (int side : {kCpu, kGpu}) {
        b[side] = ctx(side).empty(shape, t, TensorCategory::kActivations);
        ops::fill(ctx(side), b[side], value);
      }
      expect_equal_bytes(b, "fill " + std::string(to_string(t)) + " with " + std::to_string(value));
    }
  }
  const std::vector<float> v = random(shape.elements(), -70000.0f, 70000.0f);  // f16 overflows some
  for (const DType from : {DType::kF32, DType::kF16, DType::kBF16}) {
    Both src = upload(shape, from, v);
    for (const DType to : {DType::kF32, DType::kF16, DType::kBF16}) {
      Both dst = output(shape, to);
      for (int side : {kCpu, kGpu}) ops::cast(ctx(side), src[side], dst[side]);
      expect_equal_bytes(dst, "cast " + std::string(to_string(from)) + " to " + std::string(to_string(to)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, TrainOpsGpuTyped, ::testing::Values(DType::kF32, DType::kF16, DType::kBF16),
                         dtype_name);

// ---- a tiny network, end to end ----------------------------------------------------------------
// conv 3x3 (3 -> 8) -> batch norm -> ReLU -> max pool 2 -> separable 3x3 (8 -> 16) -> ReLU ->
// global average pool -> dropout -> dense (16 -> 10) -> softmax cross-entropy; backward through
// all of it; SGD with momentum. Three steps on the same batch: the losses, the correct counts and
// the weights after each step agree.
TEST_F(TrainOpsGpu, TinyNetworkTrainingStepsAgree) {
  const std::int64_t n = 16;
  const DType f32 = DType::kF32;
  const Conv2dShape conv = Conv2dShape::make({n, 3, 12, 12}, 8, Window2d::square(3, 1, 1));
  const BatchNormShape bn = BatchNormShape::make(conv.output());
  const Pool2dShape pool = Pool2dShape::make(conv.output(), Window2d::square(2, 2));
  const SeparableShape sep = SeparableShape::make(pool.output(), 16, Window2d::square(3, 1, 1));
  const DenseShape dense = DenseShape::make({n, 16}, 10);
  const DropoutMask drop{0.25f, derive_key(1, 9), 0};

  Both x = random_tensor(conv.input(), f32);
  std::vector<std::int32_t> labels(n);
  for (std::int64_t i = 0; i < n; ++i) labels[i] = static_cast<std::int32_t>(i % 10);
  Both lab;
  for (int side : {kCpu, kGpu}) {
    lab[side] = ctx(side).empty({n}, DType::kI32, TensorCategory::kActivations);
    ops::copy_from_host(ctx(side), labels.data(), lab[side]);
  }
  auto weights = [&](const Shape& s, float scale) {
    return upload(s, f32, random(s.elements(), -scale, scale), TensorCategory::kWeights);
  };
  Both w1 = weights(conv.weight(), 0.3f), b1 = weights({8}, 0.1f);
  Both gamma = upload({8}, f32, std::vector<float>(8, 1.0f)), beta = upload({8}, f32, std::vector<float>(8, 0.0f));
  Both rmean = upload({8}, f32, std::vector<float>(8, 0.0f)), rvar = upload({8}, f32, std::vector<float>(8, 1.0f));
  Both wd = weights(sep.depthwise_weight(), 0.3f), wp = weights(sep.pointwise_weight(), 0.3f), b2 = weights({16}, 0.1f);
  Both w3 = weights(dense.weight(), 0.3f), b3 = weights({10}, 0.1f);
  std::vector<Both*> params{&w1, &b1, &gamma, &beta, &wd, &wp, &b2, &w3, &b3};
  std::vector<Both> grads, bufs;
  for (Both* p : params) {
    grads.push_back(output((*p)[kCpu].shape(), f32));
    bufs.push_back(output((*p)[kCpu].shape(), f32));
  }

  Both a1 = output(conv.output(), f32), a2 = output(conv.output(), f32), smean = output({8}, f32),
       sinv = output({8}, f32), a3 = output(pool.output(), f32), a4 = output(sep.output(), f32),
       a5 = output({n, 16}, f32), a6 = output({n, 16}, f32), logits = output({n, 10}, f32);
  Both d_logits = output({n, 10}, f32), d6 = output({n, 16}, f32), d5 = output({n, 16}, f32),
       d4 = output(sep.output(), f32), d3 = output(pool.output(), f32), d2 = output(conv.output(), f32),
       d1 = output(conv.output(), f32);

  for (int step = 0; step < 3; ++step) {
    LossResult r[2];
    for (int side : {kCpu, kGpu}) {
      Context& c = ctx(side);
      ops::conv2d_forward(c, conv, x[side], w1[side], &b1[side], a1[side]);
      ops::batchnorm_forward_training(c, bn, {}, a1[side], gamma[side], beta[side], rmean[side], rvar[side], a2[side],
                                      smean[side], sinv[side]);
      ops::relu_forward(c, a2[side], a2[side]);
      ops::maxpool2d_forward(c, pool, a2[side], a3[side]);
      ops::separable_conv2d_forward(c, sep, a3[side], wd[side], wp[side], &b2[side], a4[side]);
      ops::relu_forward(c, a4[side], a4[side]);
      ops::global_avg_pool_forward(c, a4[side], a5[side]);
      DropoutMask m = drop;
      m.step = static_cast<std::uint64_t>(step);
      ops::dropout_forward(c, m, a5[side], a6[side]);
      ops::dense_forward(c, dense, a6[side], w3[side], &b3[side], logits[side]);
      r[side] = ops::softmax_cross_entropy(c, logits[side], lab[side], &d_logits[side]);

      ops::dense_backward(c, dense, a6[side], w3[side], d_logits[side], &d6[side], grads[7][side], &grads[8][side]);
      ops::dropout_backward(c, m, d6[side], d5[side]);
      ops::global_avg_pool_backward(c, d5[side], d4[side]);
      ops::relu_backward(c, a4[side], d4[side], d4[side]);
      ops::separable_conv2d_backward(c, sep, a3[side], wd[side], wp[side], d4[side], &d3[side], grads[4][side],
                                     grads[5][side], &grads[6][side]);
      ops::maxpool2d_backward(c, pool, a2[side], d3[side], d2[side]);
      ops::relu_backward(c, a2[side], d2[side], d2[side]);
      ops::batchnorm_backward(c, bn, a1[side], gamma[side], smean[side], sinv[side], d2[side], &d1[side],
                              grads[2][side], grads[3][side]);
      ops::conv2d_backward(c, conv, x[side], w1[side], d1[side], nullptr, grads[0][side], &grads[1][side]);
      const SgdUpdate u{.learning_rate = 0.05f, .momentum = 0.9f, .weight_decay = 1e-4f, .first_step = step == 0};
      for (std::size_t i = 0; i < params.size(); ++i)
        ops::sgd_update(c, u, (*params[i])[side], grads[i][side], &bufs[i][side]);
    }
    EXPECT_NEAR(r[kGpu].loss, r[kCpu].loss, 1e-4 * std::max(1.0, r[kCpu].loss)) << "step " << step;
    EXPECT_EQ(r[kGpu].correct, r[kCpu].correct) << "step " << step;
    expect_close(logits, 2e-4, "logits at step " + std::to_string(step));
    const char* names[] = {"conv w",      "conv b",      "gamma",   "beta",   "depthwise w",
                           "pointwise w", "separable b", "dense w", "dense b"};
    for (std::size_t i = 0; i < params.size(); ++i) {
      expect_close(*params[i], 2e-4, std::string(names[i]) + " after step " + std::to_string(step));
    }
    expect_close(rvar, 1e-4, "running var after step " + std::to_string(step));
  }
  std::printf("cuda backend: %s\n", ctx(kGpu).backend().describe().c_str());
}

}  // namespace
}  // namespace sluice::train
