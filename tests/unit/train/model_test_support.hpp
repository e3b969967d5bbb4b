// Helpers for the tests of layers, models, optimizers and checkpoints: a host allocator and
// context, host tensors from values and back, and a small seeded data set of learnable images.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "sluice/core/rng.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/context.hpp"
#include "sluice/train/ops.hpp"
#include "sluice/train/tensor.hpp"

namespace sluice::train::test {

struct HostRig {
  explicit HostRig(int threads = 1)
      : allocator(host(), AllocatorOptions{.name = "test"}), ctx(allocator, ContextOptions{.threads = threads}) {}
  Allocator allocator;
  Context ctx;
};

inline Tensor from_values(Context& ctx, const Shape& shape, const std::vector<float>& values,
                          TensorCategory category = TensorCategory::kActivations) {
  Tensor t = ctx.empty(shape, DType::kF32, category);
  ops::copy_from_host(ctx, values.data(), t);
  return t;
}

inline std::vector<float> values_of(Context& ctx, const Tensor& t) {
  std::vector<float> v(static_cast<std::size_t>(t.elements()));
  ops::copy_to_host(ctx, t, v.data());
  return v;
}

// Uniform values in [lo, hi) from (seed, i).
inline std::vector<float> random_values(std::int64_t n, std::uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(static_cast<std::size_t>(n));
  CounterRng rng(seed, 0, 0);
  for (float& x : v) x = static_cast<float>(rng.uniform(lo, hi));
  return v;
}

// A learnable toy set: `classes` classes of (channels, side, side) images, each class a bright
// square in its own place over noise. Images (n, channels, side, side) and labels (n).
struct ToySet {
  std::vector<float> images;
  std::vector<std::int32_t> labels;
};

inline ToySet toy_set(std::int64_t n, int channels, int side, int classes, std::uint64_t seed) {
  ToySet s;
  s.images.resize(static_cast<std::size_t>(n * channels * side * side));
  s.labels.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    CounterRng rng(seed, static_cast<std::uint64_t>(i), 1);
    const int label = static_cast<int>(rng.below(static_cast<std::uint64_t>(classes)));
    s.labels[static_cast<std::size_t>(i)] = label;
    const int half = side / 2;
    const int oy = (label / 2) % 2 * half, ox = label % 2 * half;
    for (int c = 0; c < channels; ++c) {
      for (int y = 0; y < side; ++y) {
        for (int x = 0; x < side; ++x) {
          const bool on = y >= oy && y < oy + half && x >= ox && x < ox + half;
          const float noise = static_cast<float>(rng.uniform(-0.5, 0.5));
          s.images[static_cast<std::size_t>(((i * channels + c) * side + y) * side + x)] = (on ? 1.0f : -0.5f) + noise;
        }
      }
    }
  }
  return s;
}

}  // namespace sluice::train::test
