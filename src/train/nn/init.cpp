// He normal initialisation: Box-Muller over Philox draws keyed on (key, element pair), generated
// on the host and copied to the tensor's device once (initialisation is not a hot path).
#include "sluice/train/init.hpp"

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/rng.hpp"
#include "sluice/train/ops.hpp"

namespace sluice::train {

void he_normal(Context& ctx, Tensor& w, std::int64_t fan_in, std::uint64_t key) {
  if (!w.defined() || w.dtype() != DType::kF32) {
    throw Error(ErrorCode::kInvalidArgument, "he_normal: expected an f32 tensor, got " + w.describe());
  }
  if (fan_in < 1) throw Error(ErrorCode::kInvalidArgument, "he_normal: fan_in must be >= 1, got " + std::to_string(fan_in));
  const double stddev = std::sqrt(2.0 / static_cast<double>(fan_in));
  const std::int64_t n = w.elements();
  std::vector<float> values(static_cast<std::size_t>(n));
  // One counter stream per pair of elements: each pair is a pure function of (key, pair).
  for (std::int64_t pair = 0; 2 * pair < n; ++pair) {
    CounterRng rng(key, static_cast<std::uint64_t>(pair), 0);
    const double u1 = 1.0 - rng.uniform();  // (0, 1]: log is finite
    const double u2 = rng.uniform();
    const double r = std::sqrt(-2.0 * std::log(u1)) * stddev;
    values[static_cast<std::size_t>(2 * pair)] = static_cast<float>(r * std::cos(2.0 * std::numbers::pi * u2));
    if (2 * pair + 1 < n) {
      values[static_cast<std::size_t>(2 * pair + 1)] = static_cast<float>(r * std::sin(2.0 * std::numbers::pi * u2));
    }
  }
  ops::copy_from_host(ctx, values.data(), w);
}

}  // namespace sluice::train
