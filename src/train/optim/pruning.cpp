// The polynomial-decay schedule, magnitude masks as bitmaps, and their application.
#include "sluice/train/pruning.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "sluice/core/error.hpp"
#include "sluice/train/ops.hpp"

namespace sluice::train {

void PolynomialDecay::validate() const {
  auto fail = [](const std::string& what) { throw Error(ErrorCode::kInvalidArgument, "pruning schedule: " + what); };
  if (!(initial_sparsity >= 0.0 && initial_sparsity < 1.0)) fail("initial_sparsity must be in [0, 1)");
  if (!(final_sparsity >= 0.0 && final_sparsity < 1.0)) fail("final_sparsity must be in [0, 1)");
  if (begin_step < 0) fail("begin_step must be >= 0");
  if (end_step < begin_step) fail("end_step must be >= begin_step");
  if (frequency <= 0) fail("frequency must be > 0");
  if (!(power > 0.0)) fail("power must be > 0");
}

double PolynomialDecay::sparsity(std::int64_t step) const {
  // TF divides by (end - begin) as it is; begin == end is a step function at begin.
  double p = end_step > begin_step
                 ? static_cast<double>(step - begin_step) / static_cast<double>(end_step - begin_step)
                 : (step >= begin_step ? 1.0 : 0.0);
  p = std::min(1.0, std::max(0.0, p));
  return final_sparsity + (initial_sparsity - final_sparsity) * std::pow(1.0 - p, power);
}

bool PolynomialDecay::should_prune(std::int64_t step) const {
  return step >= begin_step && step <= end_step && (step - begin_step) % frequency == 0;
}

bool is_prunable(const Parameter& p) { return p.value != nullptr && p.value->rank() >= 2; }

PruneMask magnitude_mask(const float* values, std::int64_t n, double sparsity) {
  PruneMask m;
  m.elements = n;
  m.bits.assign(static_cast<std::size_t>((n + 63) / 64), 0);
  if (n == 0) return m;
  const auto keep = std::clamp<std::int64_t>(std::llround(static_cast<double>(n) * (1.0 - sparsity)), 1, n);
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  // Largest |w| first, the lower index first among equals: a strict total order, so the kept set
  // is exactly the first `keep` of it whatever nth_element's internal order.
  auto before = [values](std::int64_t a, std::int64_t b) {
    const float fa = std::fabs(values[a]), fb = std::fabs(values[b]);
    return fa != fb ? fa > fb : a < b;
  };
  std::nth_element(order.begin(), order.begin() + (keep - 1), order.end(), before);
  for (std::int64_t j = 0; j < keep; ++j) {
    const std::int64_t i = order[static_cast<std::size_t>(j)];
    m.bits[static_cast<std::size_t>(i >> 6)] |= std::uint64_t{1} << (i & 63);
  }
  m.kept = keep;
  return m;
}

MagnitudePruner::MagnitudePruner(const std::vector<Parameter>& params, PolynomialDecay schedule)
    : schedule_(schedule) {
  schedule_.validate();
  for (const Parameter& p : params) {
    if (!is_prunable(p)) continue;
    if (p.value->dtype() != DType::kF32) {
      throw Error(ErrorCode::kInvalidArgument, "pruning: parameter " + p.name + " is " + p.value->describe() +
                                                   "; masks apply to f32 weights");
    }
    PruneMask m;
    m.name = p.name;
    m.elements = p.value->elements();
    m.kept = m.elements;
    m.bits.assign(static_cast<std::size_t>((m.elements + 63) / 64), ~std::uint64_t{0});
    masks_.push_back(std::move(m));
    tensors_.push_back(p.value);
  }
}

std::vector<float> MagnitudePruner::host_values(Context& ctx, const Tensor& t) const {
  std::vector<float> v(static_cast<std::size_t>(t.elements()));
  ops::copy_to_host(ctx, t, v.data());
  return v;
}

bool MagnitudePruner::after_step(Context& ctx, std::int64_t step) {
  if (schedule_.should_prune(step)) {
    update_masks(ctx, schedule_.sparsity(step));
    return true;
  }
  apply(ctx);
  return false;
}

void MagnitudePruner::update_masks(Context& ctx, double sparsity) {
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = *tensors_[i];
    PruneMask m;
    if (t.is_host()) {
      m = magnitude_mask(t.data_as<float>(), t.elements(), sparsity);
    } else {
      const std::vector<float> v = host_values(ctx, t);
      m = magnitude_mask(v.data(), t.elements(), sparsity);
    }
    m.name = masks_[i].name;
    masks_[i] = std::move(m);
  }
  target_ = sparsity;
  apply(ctx);
}

void MagnitudePruner::apply(Context& ctx) {
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    Tensor& t = *tensors_[i];
    const PruneMask& m = masks_[i];
    if (m.kept == m.elements) continue;
    auto zero = [&m](float* w) {
      for (std::size_t word = 0; word < m.bits.size(); ++word) {
        std::uint64_t dropped = ~m.bits[word];
        if (word == m.bits.size() - 1 && (m.elements & 63) != 0) dropped &= (std::uint64_t{1} << (m.elements & 63)) - 1;
        while (dropped != 0) {
          const int b = __builtin_ctzll(dropped);
          w[word * 64 + static_cast<std::size_t>(b)] = 0.0f;
          dropped &= dropped - 1;
        }
      }
    };
    if (t.is_host()) {
      zero(t.data_as<float>());
    } else {
      std::vector<float> v = host_values(ctx, t);
      zero(v.data());
      ops::copy_from_host(ctx, v.data(), t);
    }
  }
}

double MagnitudePruner::sparsity() const {
  std::int64_t n = 0, pruned = 0;
  for (const PruneMask& m : masks_) {
    n += m.elements;
    pruned += m.pruned();
  }
  return n > 0 ? static_cast<double>(pruned) / static_cast<double>(n) : 0.0;
}

double measured_sparsity(Context& ctx, const std::vector<Parameter>& params) {
  std::int64_t n = 0, zeros = 0;
  for (const Parameter& p : params) {
    if (!is_prunable(p) || p.value->dtype() != DType::kF32) continue;
    std::vector<float> v(static_cast<std::size_t>(p.value->elements()));
    ops::copy_to_host(ctx, *p.value, v.data());
    n += p.value->elements();
    zeros += std::count(v.begin(), v.end(), 0.0f);
  }
  return n > 0 ? static_cast<double>(zeros) / static_cast<double>(n) : 0.0;
}

}  // namespace sluice::train
