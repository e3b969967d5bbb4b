// The CPU backend's convolutions, forward + backward, at the shapes of cifar10-separable, and one
// whole training step of that model written directly against the ops (no layer objects, so it
// measures the backend alone): the figure to set against PyTorch's CPU step on the same batch
// and threads (bench/peers/torch_train_peer.py --model cifar10-separable). Reports images/s.
// Run: build/bench/train_ops_bench [--benchmark_filter=Step] (SLUICE_THREADS=n, default 2)
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "sluice/train/allocator.hpp"
#include "sluice/train/context.hpp"
#include "sluice/train/ops.hpp"

namespace {

using namespace sluice;
using namespace sluice::train;

int bench_threads() {
  const char* env = std::getenv("SLUICE_THREADS");
  return env != nullptr ? std::max(1, std::atoi(env)) : 2;
}

struct Env {
  Env() : allocator(host(), AllocatorOptions{.name = "bench"}), ctx(allocator, {.threads = bench_threads()}) {}
  Tensor random(const Shape& s, float scale = 1.0f, TensorCategory c = TensorCategory::kActivations) {
    Tensor t = ctx.empty(s, DType::kF32, c);
    std::mt19937 rng(static_cast<std::uint32_t>(s.elements()));
    std::normal_distribution<float> d(0.0f, scale);
    for (std::int64_t i = 0; i < t.elements(); ++i) t.data_as<float>()[i] = d(rng);
    return t;
  }
  Tensor empty(const Shape& s, TensorCategory c = TensorCategory::kActivations) {
    return ctx.empty(s, DType::kF32, c);
  }
  Allocator allocator;
  Context ctx;
};

// Conv2D 3x3 pad 1, (batch, cin, hw, hw) -> cout: forward, then backward with dx.
void BM_Conv2dForwardBackward(benchmark::State& state) {
  Env e;
  const auto batch = state.range(0);
  const int cin = static_cast<int>(state.range(1)), cout = static_cast<int>(state.range(2));
  const int hw = static_cast<int>(state.range(3));
  const Conv2dShape s = Conv2dShape::make({batch, cin, hw, hw}, cout, Window2d::square(3, 1, 1));
  Tensor x = e.random(s.input()), w = e.random(s.weight(), 0.1f), y = e.empty(s.output());
  Tensor dy = e.random(s.output()), dx = e.empty(s.input()), dw = e.empty(s.weight());
  e.ctx.reserve_workspace(ops::conv2d_workspace(e.ctx, s, DType::kF32));
  for (auto _ : state) {
    ops::conv2d_forward(e.ctx, s, x, w, nullptr, y);
    ops::conv2d_backward(e.ctx, s, x, w, dy, &dx, dw, nullptr);
  }
  state.counters["images/s"] = benchmark::Counter(static_cast<double>(batch * state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Conv2dForwardBackward)->Args({32, 3, 32, 32})->Args({32, 64, 64, 16})->Unit(benchmark::kMillisecond)->UseRealTime();

// SeparableConv2D 3x3 pad 1, (batch, cin, hw, hw) -> cout: forward, then backward with dx.
void BM_SeparableForwardBackward(benchmark::State& state) {
  Env e;
  const auto batch = state.range(0);
  const int cin = static_cast<int>(state.range(1)), cout = static_cast<int>(state.range(2));
  const int hw = static_cast<int>(state.range(3));
  const SeparableShape s = SeparableShape::make({batch, cin, hw, hw}, cout, Window2d::square(3, 1, 1));
  Tensor x = e.random(s.input()), wd = e.random(s.depthwise_weight(), 0.3f), wp = e.random(s.pointwise_weight(), 0.1f);
  Tensor y = e.empty(s.output()), dy = e.random(s.output()), dx = e.empty(s.input());
  Tensor dwd = e.empty(s.depthwise_weight()), dwp = e.empty(s.pointwise_weight());
  e.ctx.reserve_workspace(ops::separable_conv2d_workspace(e.ctx, s, DType::kF32));
  for (auto _ : state) {
    ops::separable_conv2d_forward(e.ctx, s, x, wd, wp, nullptr, y);
    ops::separable_conv2d_backward(e.ctx, s, x, wd, wp, dy, &dx, dwd, dwp, nullptr);
  }
  state.counters["images/s"] = benchmark::Counter(static_cast<double>(batch * state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SeparableForwardBackward)
    ->Args({32, 32, 64, 32})
    ->Args({32, 64, 128, 32})
    ->Args({32, 128, 256, 16})
    ->Args({32, 256, 512, 8})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// cifar10-separable (src/train/nn/models.cpp, bench/peers/torch_train_peer.py): conv 3->32, BN,
// ReLU; separable blocks 32->64, 64->128 (pool), 128->128, 128->256 (pool), 256->256, 256->512
// (pool), each separable conv (no bias), BN, ReLU; global average pool; dense 512->10; softmax
// cross-entropy; SGD with Nesterov momentum on every parameter.
class Cifar10SeparableStep {
 public:
  Cifar10SeparableStep(Env& e, std::int64_t batch) : e_(e) {
    x_ = e.random({batch, 3, 32, 32});
    std::vector<float> labels(static_cast<std::size_t>(batch));
    labels_ = e.ctx.empty({batch}, DType::kI32, TensorCategory::kInputHost);
    for (std::int64_t i = 0; i < batch; ++i) labels_.data_as<std::int32_t>()[i] = static_cast<std::int32_t>(i % 10);
    Shape in = x_.shape();
    const int plan[][3] = {{32, 64, 0}, {64, 128, 1}, {128, 128, 0}, {128, 256, 1}, {256, 256, 0}, {256, 512, 1}};
    stem_ = Conv2dShape::make(in, 32, Window2d::square(3, 1, 1));
    stem_w_ = param(stem_.weight(), 0.2f);
    stem_y_ = e.empty(stem_.output());
    in = stem_.output();
    bn_.push_back(make_bn(in));
    for (const auto& p : plan) {
      Block b;
      b.s = SeparableShape::make(in, p[1], Window2d::square(3, 1, 1));
      b.wd = param(b.s.depthwise_weight(), 0.3f);
      b.wp = param(b.s.pointwise_weight(), 0.1f);
      b.y = e.empty(b.s.output());
      in = b.s.output();
      b.bn = bn_.size();
      bn_.push_back(make_bn(in));
      if (p[2] != 0) {
        b.pool = Pool2dShape::make(in, Window2d::square(2, 2));
        b.pooled = e.empty(b.pool.output());
        in = b.pool.output();
      }
      blocks_.push_back(std::move(b));
    }
    gap_ = e.empty({batch, 512});
    dense_ = DenseShape::make({batch, 512}, 10);
    dense_w_ = param(dense_.weight(), 0.05f);
    dense_b_ = param({10}, 0.0f);
    logits_ = e.empty({batch, 10});
    std::size_t ws = ops::conv2d_workspace(e.ctx, stem_, DType::kF32);
    for (const Block& b : blocks_) ws = std::max(ws, ops::separable_conv2d_workspace(e.ctx, b.s, DType::kF32));
    e.ctx.reserve_workspace(ws);
  }

  void step() {
    Context& c = e_.ctx;
    // forward
    ops::conv2d_forward(c, stem_, x_, stem_w_.w, nullptr, stem_y_);
    const Tensor* h = &bn_relu_forward(bn_[0], stem_y_);
    for (Block& b : blocks_) {
      b.in = h;  // the previous ReLU's (or pool's) output, kept for backward
      ops::separable_conv2d_forward(c, b.s, *b.in, b.wd.w, b.wp.w, nullptr, b.y);
      h = &bn_relu_forward(bn_[b.bn], b.y);
      if (b.pooled.defined()) {
        ops::maxpool2d_forward(c, b.pool, *h, b.pooled);
        h = &b.pooled;
      }
    }
    ops::global_avg_pool_forward(c, *h, gap_);
    ops::dense_forward(c, dense_, gap_, dense_w_.w, &dense_b_.w, logits_);
    // backward
    if (!dlogits_.defined()) dlogits_ = e_.empty(logits_.shape());
    ops::softmax_cross_entropy(c, logits_, labels_, &dlogits_);
    if (!dgap_.defined()) dgap_ = e_.empty(gap_.shape());
    ops::dense_backward(c, dense_, gap_, dense_w_.w, dlogits_, &dgap_, dense_w_.g, &dense_b_.g);
    Tensor* g = &grad_of(h->shape(), 0);
    ops::global_avg_pool_backward(c, dgap_, *g);
    for (auto b = blocks_.rbegin(); b != blocks_.rend(); ++b) {
      if (b->pooled.defined()) {
        Tensor& dr = grad_of(b->s.output(), 1);
        ops::maxpool2d_backward(c, b->pool, bn_[b->bn].relu, *g, dr);
        g = &dr;
      }
      Tensor& dy = grad_of(b->s.output(), 2);
      bn_relu_backward(bn_[b->bn], b->y, *g, dy);
      Tensor& dx = grad_of(b->s.input(), 3);
      ops::separable_conv2d_backward(c, b->s, *b->in, b->wd.w, b->wp.w, dy, &dx, b->wd.g, b->wp.g, nullptr);
      g = &dx;
    }
    Tensor& dstem = grad_of(stem_.output(), 2);
    bn_relu_backward(bn_[0], stem_y_, *g, dstem);
    ops::conv2d_backward(c, stem_, x_, stem_w_.w, dstem, nullptr, stem_w_.g, nullptr);
    // update
    const SgdUpdate u{.learning_rate = 0.01f, .momentum = 0.9f, .nesterov = true, .weight_decay = 5e-4f};
    for (Param* p : params_) ops::sgd_update(c, u, p->w, p->g, &p->m);
  }

 private:
  struct Param {
    Tensor w, g, m;
  };
  struct Bn {
    BatchNormShape s;
    Param gamma, beta;
    Tensor rm, rv, mean, invstd, y, relu;
  };
  struct Block {
    SeparableShape s;
    const Tensor* in = nullptr;
    Param wd, wp;
    Tensor y;
    std::size_t bn = 0;
    Pool2dShape pool;
    Tensor pooled;
  };

  Param param(const Shape& shape, float scale) {
    auto p = std::make_unique<Param>();
    p->w = e_.random(shape, scale, TensorCategory::kWeights);
    p->g = e_.ctx.zeros(shape, DType::kF32, TensorCategory::kGradients);
    p->m = e_.ctx.zeros(shape, DType::kF32, TensorCategory::kOptimizerState);
    owned_.push_back(std::move(p));
    params_.push_back(owned_.back().get());
    return *owned_.back();  // shares storage with the owned copy the update uses
  }
  Bn make_bn(const Shape& in) {
    Bn b;
    b.s = BatchNormShape::make(in);
    const int c = static_cast<int>(in[1]);
    b.gamma = param({c}, 0.0f);
    ops::fill(e_.ctx, b.gamma.w, 1.0f);
    b.beta = param({c}, 0.0f);
    b.rm = e_.ctx.zeros({c}, DType::kF32, TensorCategory::kWeights);
    b.rv = e_.ctx.zeros({c}, DType::kF32, TensorCategory::kWeights);
    b.mean = e_.empty({c});
    b.invstd = e_.empty({c});
    b.y = e_.empty(in);
    b.relu = e_.empty(in);
    return b;
  }
  const Tensor& bn_relu_forward(Bn& b, const Tensor& x) {
    ops::batchnorm_forward_training(e_.ctx, b.s, {}, x, b.gamma.w, b.beta.w, b.rm, b.rv, b.y, b.mean, b.invstd);
    ops::relu_forward(e_.ctx, b.y, b.relu);
    return b.relu;
  }
  void bn_relu_backward(Bn& b, const Tensor& x, const Tensor& dout, Tensor& dx) {
    Tensor& dbn = grad_of(x.shape(), 4);
    ops::relu_backward(e_.ctx, b.relu, dout, dbn);
    ops::batchnorm_backward(e_.ctx, b.s, x, b.gamma.w, b.mean, b.invstd, dbn, &dx, b.gamma.g, b.beta.g);
  }
  // Gradient buffers by (shape, slot), made once: the steady state allocates nothing.
  Tensor& grad_of(const Shape& s, int slot) {
    for (auto& [shape, k, t] : grads_) {
      if (shape == s && k == slot) return t;
    }
    grads_.push_back({s, slot, e_.empty(s, TensorCategory::kGradients)});
    return std::get<2>(grads_.back());
  }

  Env& e_;
  Tensor x_, labels_;
  Conv2dShape stem_;
  Param stem_w_;
  Tensor stem_y_;
  std::vector<Bn> bn_;
  std::vector<Block> blocks_;
  Tensor gap_;
  DenseShape dense_;
  Param dense_w_, dense_b_;
  Tensor logits_, dlogits_, dgap_;
  std::vector<std::unique_ptr<Param>> owned_;
  std::vector<Param*> params_;
  std::vector<std::tuple<Shape, int, Tensor>> grads_;
};

void BM_Cifar10SeparableStep(benchmark::State& state) {
  Env e;
  Cifar10SeparableStep model(e, state.range(0));
  model.step();  // warm-up: the workspace and gradient buffers settle
  for (auto _ : state) model.step();
  state.counters["images/s"] =
      benchmark::Counter(static_cast<double>(state.range(0) * state.iterations()), benchmark::Counter::kIsRate);
  state.counters["threads"] = e.ctx.threads();
}
BENCHMARK(BM_Cifar10SeparableStep)->Arg(128)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
