// Helpers of the op tests: a host allocator and contexts at chosen thread counts, tensors from and
// to std::vector<float> (through f32, whatever the tensor's dtype), seeded random fills, a
// finite-difference gradient checker, and an expectation that an op rejects a call with a given
// message.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/detail/core/half.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/context.hpp"
#include "sluice/train/ops.hpp"
#include "sluice/train/tensor.hpp"

namespace sluice::test {

using train::Context;
using train::Tensor;

// An allocator and a context over it. Several contexts (thread counts) may share the allocator.
struct OpsEnv {
  explicit OpsEnv(int threads = 2)
      : allocator(std::make_unique<Allocator>(host(), AllocatorOptions{.name = "ops test"})),
        ctx(std::make_unique<Context>(*allocator, train::ContextOptions{.threads = threads})) {}
  std::unique_ptr<Allocator> allocator;
  std::unique_ptr<Context> ctx;
};

inline float round_to(DType t, float v) {
  if (t == DType::kF16) return f16_to_float(float_to_f16(v));
  if (t == DType::kBF16) return bf16_to_float(float_to_bf16(v));
  return v;
}

// Element i of a host tensor as f32.
inline float get(const Tensor& t, std::int64_t i) {
  switch (t.dtype()) {
    case DType::kF32: return t.data_as<float>()[i];
    case DType::kF16: return f16_to_float(t.data_as<std::uint16_t>()[i]);
    case DType::kBF16: return bf16_to_float(t.data_as<std::uint16_t>()[i]);
    case DType::kI32: return static_cast<float>(t.data_as<std::int32_t>()[i]);
    case DType::kU8: return static_cast<float>(t.data_as<std::uint8_t>()[i]);
  }
  return 0.0f;
}

inline void set(Tensor& t, std::int64_t i, float v) {
  switch (t.dtype()) {
    case DType::kF32: t.data_as<float>()[i] = v; return;
    case DType::kF16: t.data_as<std::uint16_t>()[i] = float_to_f16(v); return;
    case DType::kBF16: t.data_as<std::uint16_t>()[i] = float_to_bf16(v); return;
    case DType::kI32: t.data_as<std::int32_t>()[i] = static_cast<std::int32_t>(v); return;
    case DType::kU8: t.data_as<std::uint8_t>()[i] = static_cast<std::uint8_t>(v); return;
  }
}

inline void fill_value(Tensor& t, float v) {
  for (std::int64_t i = 0; i < t.elements(); ++i) set(t, i, v);
}

inline std::vector<float> values(const Tensor& t) {
  std::vector<float> v(static_cast<std::size_t>(t.elements()));
  for (std::int64_t i = 0; i < t.elements(); ++i) v[static_cast<std::size_t>(i)] = get(t, i);
  return v;
}

inline Tensor make(Context& ctx, const Shape& shape, const std::vector<float>& v, DType dtype = DType::kF32,
                   TensorCategory category = TensorCategory::kActivations) {
  Tensor t = ctx.empty(shape, dtype, category);
  for (std::int64_t i = 0; i < t.elements(); ++i) set(t, i, v[static_cast<std::size_t>(i)]);
  return t;
}

// Uniform in [lo, hi), seeded: the same values on every run.
inline std::vector<float> random_values(std::int64_t n, std::uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

inline Tensor random_tensor(Context& ctx, const Shape& shape, std::uint32_t seed, DType dtype = DType::kF32,
                            float lo = -1.0f, float hi = 1.0f) {
  return make(ctx, shape, random_values(shape.elements(), seed, lo, hi), dtype);
}

// Tensors over exactly sized heap blocks rather than the allocator's regions: an op that reads or
// writes past a tensor then leaves its block, which AddressSanitizer reports (inside a region it
// would land in a neighbouring tensor, unseen).
class HeapTensors {
 public:
  Tensor make(const Shape& shape, DType dtype, TensorCategory category = TensorCategory::kActivations) {
    const std::size_t bytes = static_cast<std::size_t>(shape.elements()) * size_of(dtype);
    blocks_.push_back(std::make_unique<std::byte[]>(bytes == 0 ? 1 : bytes));
    return Tensor::wrap(blocks_.back().get(), shape, dtype, host(), category);
  }
  Tensor make(const Shape& shape, const std::vector<float>& v, DType dtype = DType::kF32,
              TensorCategory category = TensorCategory::kActivations) {
    Tensor t = make(shape, dtype, category);
    for (std::int64_t i = 0; i < t.elements(); ++i) set(t, i, v[static_cast<std::size_t>(i)]);
    return t;
  }

 private:
  std::vector<std::unique_ptr<std::byte[]>> blocks_;
};

// sum_i t_i * r_i in double: the scalar a gradient check differentiates (dL/dt = r).
inline double dot(const Tensor& t, const std::vector<float>& r) {
  double s = 0.0;
  for (std::int64_t i = 0; i < t.elements(); ++i) s += double{get(t, i)} * r[static_cast<std::size_t>(i)];
  return s;
}

// Central differences of loss() with respect to each element of `param` (every element when
// there are at most 64, else 64 spread over it) against `analytic`. The ops are f32: eps is
// large enough that rounding of the loss (about 1e-7 of its terms) stays far below the
// tolerance after dividing by 2 eps, small enough for the curvature of BatchNorm and softmax.
inline void expect_gradient(const char* what, Tensor& param, const std::vector<float>& analytic,
                            const std::function<double()>& loss, float eps = 1e-2f, double atol = 2e-3,
                            double rtol = 1e-2) {
  ASSERT_EQ(static_cast<std::int64_t>(analytic.size()), param.elements()) << what;
  const std::int64_t n = param.elements();
  const std::int64_t step = n <= 64 ? 1 : n / 64;
  int failures = 0;
  for (std::int64_t i = 0; i < n; i += step) {
    const float saved = get(param, i);
    set(param, i, saved + eps);
    const double up = loss();
    set(param, i, saved - eps);
    const double down = loss();
    set(param, i, saved);
    const double numeric = (up - down) / (2.0 * eps);
    const double a = analytic[static_cast<std::size_t>(i)];
    if (std::abs(numeric - a) > atol + rtol * std::abs(numeric) && ++failures <= 5) {
      ADD_FAILURE() << what << "[" << i << "]: analytic " << a << ", numeric " << numeric;
    }
  }
}

// Runs fn, expecting sluice::Error(kInvalidArgument) whose message contains `needle`.
inline void expect_rejects(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing \"" << needle << "\"";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
  }
}

// Bitwise equality of two tensors' contents.
inline bool same_bits(const Tensor& a, const Tensor& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.data(), b.data(), a.bytes()) == 0;
}

}  // namespace sluice::test
