// Shared by the data-parallel tests under mpirun (mpi_train_test.cpp, mpi_nccl_test.cpp): a small
// CNN of the training core's layers without BatchNorm or dropout, deterministic batches, the
// weights as one flat host vector, and a bit-for-bit comparison with rank 0's.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "sluice/train/context.hpp"
#include "sluice/train/layers.hpp"
#include "sluice/train/ops.hpp"
#include "sluice/train/optimizer.hpp"
#include "sluice/train/sequential.hpp"

namespace sluice_mpi_test {

namespace st = sluice::train;

constexpr int kClasses = 5;
constexpr std::uint64_t kSeed = 7;
const st::SgdOptions kSgd{.learning_rate = 0.1f, .momentum = 0.9f, .nesterov = true, .weight_decay = 5e-4f};

// Conv-ReLU-pool twice, then two dense layers, on 1 x 12 x 12 inputs; biases on.
inline std::unique_ptr<st::Sequential> plain_cnn(st::Context& ctx) {
  auto m = std::make_unique<st::Sequential>(sluice::Shape{1, 12, 12});
  m->add<st::Conv2D>(ctx, st::Conv2DOptions{.in_channels = 1, .out_channels = 4, .bias = true});
  m->add<st::ReLU>();
  m->add<st::MaxPool2D>();  // 6 x 6
  m->add<st::Conv2D>(ctx, st::Conv2DOptions{.in_channels = 4, .out_channels = 8, .bias = true});
  m->add<st::ReLU>();
  m->add<st::MaxPool2D>();  // 3 x 3
  m->add<st::Flatten>();
  m->add<st::Dense>(ctx, st::DenseOptions{.in_features = 8 * 3 * 3, .out_features = 16});
  m->add<st::ReLU>();
  m->add<st::Dense>(ctx, st::DenseOptions{.in_features = 16, .out_features = kClasses});
  m->initialize(ctx, kSeed);
  return m;
}

// Deterministic inputs in [-1, 1) and labels, the same on every rank.
inline void make_batch(std::int64_t n, std::int64_t per_sample, std::vector<float>& x, std::vector<std::int32_t>& y) {
  x.resize(static_cast<std::size_t>(n * per_sample));
  y.resize(static_cast<std::size_t>(n));
  std::uint64_t s = 0x9E3779B97F4A7C15ull;
  for (float& v : x) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    v = static_cast<float>(s >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f;
  }
  for (std::int64_t i = 0; i < n; ++i) y[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 3 + 1) % kClasses);
}

inline std::vector<float> flat(st::Context& ctx, const std::vector<st::Tensor*>& tensors) {
  std::vector<float> out;
  for (const st::Tensor* t : tensors) {
    const std::size_t at = out.size();
    out.resize(at + static_cast<std::size_t>(t->elements()));
    st::ops::copy_to_host(ctx, *t, out.data() + at);
  }
  return out;
}

inline std::vector<float> weights(st::Context& ctx, st::Sequential& m) {
  std::vector<st::Tensor*> t;
  for (const st::Parameter& p : m.parameters()) t.push_back(p.value);
  return flat(ctx, t);
}

inline std::vector<float> buffers(st::Context& ctx, st::Sequential& m) {
  std::vector<st::Tensor*> t;
  for (const st::Buffer& b : m.buffers()) t.push_back(b.value);
  return flat(ctx, t);
}

inline double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double d = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(static_cast<double>(a[i]) - b[i]));
  return d;
}

// True when `mine` equals rank 0's, bit for bit.
inline bool same_as_rank_zero(std::vector<float> mine) {
  std::vector<float> root = mine;
  int count = static_cast<int>(root.size());
  MPI_Bcast(&count, 1, MPI_INT, 0, MPI_COMM_WORLD);
  root.resize(static_cast<std::size_t>(count));
  MPI_Bcast(root.data(), count, MPI_FLOAT, 0, MPI_COMM_WORLD);
  return root.size() == mine.size() && std::memcmp(root.data(), mine.data(), mine.size() * sizeof(float)) == 0;
}

inline sluice::TensorView view(std::vector<float>& x, std::int64_t begin, std::int64_t end, const sluice::Shape& sample) {
  const std::int64_t per_sample = sample.elements();
  sluice::TensorView v;
  v.data = x.data() + begin * per_sample;
  v.dtype = sluice::DType::kF32;
  v.shape = sluice::Shape{end - begin, sample[0], sample[1], sample[2]};
  return v;
}

}  // namespace sluice_mpi_test
