// The CPU backend's frame: construction, staging of 16-bit tensors, the shared reductions, and
// the memory ops (fill, cast, copies). The op families live in cpu_conv.cpp, cpu_separable.cpp,
// cpu_dense.cpp, cpu_elementwise.cpp, cpu_batchnorm.cpp and cpu_loss_optim.cpp.
#include "train/cpu/cpu_backend.hpp"

#include "train/cpu/conv_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace sluice::train {

std::unique_ptr<Backend> make_cpu_backend(int threads) { return std::make_unique<cpu::CpuBackend>(threads); }

namespace cpu {

// ---- staging ---------------------------------------------------------------------------------

const float* Staging::in(const Tensor& t) {
  if (t.dtype() == DType::kF32) return t.data_as<float>();
  float* f = scratch_.take(static_cast<std::size_t>(t.elements()));
  pool_.for_each(t.elements(), kElementGrain,
                 [&](std::int64_t b, std::int64_t e) { to_f32(t.dtype(), t.data(), b, e - b, f + b); });
  return f;
}

float* Staging::out(Tensor& t, bool load) {
  if (t.dtype() == DType::kF32) return t.data_as<float>();
  float* f = load ? const_cast<float*>(in(t)) : scratch_.take(static_cast<std::size_t>(t.elements()));
  if (out_count_ == static_cast<int>(outs_.size())) throw Error(ErrorCode::kInternal, "Staging: too many outputs");
  outs_[out_count_++] = {&t, f};
  return f;
}

void Staging::finish() {
  for (int i = 0; i < out_count_; ++i) {
    Tensor& t = *outs_[i].first;
    const float* f = outs_[i].second;
    pool_.for_each(t.elements(), kElementGrain,
                   [&](std::int64_t b, std::int64_t e) { from_f32(t.dtype(), f + b, e - b, t.data(), b); });
  }
  out_count_ = 0;
}

// ---- the backend -----------------------------------------------------------------------------

CpuBackend::CpuBackend(int threads) : pool_(threads), blas_(blas_init()) {}

std::string CpuBackend::describe() const {
  return "cpu (" + std::to_string(pool_.threads()) + (pool_.threads() == 1 ? " thread, " : " threads, ") + blas_ + ")";
}

int CpuBackend::workers(std::int64_t n) const { return std::max(1, pool_.chunks_for(n)); }

void CpuBackend::reduce_partials(const float* partials, int groups, std::size_t stride, std::int64_t n, float* out,
                                 bool accumulate) {
  pool_.for_each(n, kElementGrain, [&](std::int64_t b, std::int64_t e) {
    if (!accumulate) std::fill(out + b, out + e, 0.0f);
    for (int g = 0; g < groups; ++g) {
      const float* __restrict p = partials + g * stride;
      float* __restrict o = out;
      for (std::int64_t i = b; i < e; ++i) o[i] += p[i];
    }
  });
}

void CpuBackend::channel_sums(const Tensor& dy, std::int64_t batch, int channels, std::int64_t plane, float* rows,
                              float* sums, bool accumulate) {
  const std::size_t row_floats = staged_floats(dy.dtype(), plane);
  pool_.run(channels, workers(channels), [&](int chunk, std::int64_t k0, std::int64_t k1) {
    float* row = rows + chunk * row_floats;
    for (std::int64_t k = k0; k < k1; ++k) {
      float acc = 0.0f;
      for (std::int64_t n = 0; n < batch; ++n) {
        add_row_sums(image_in(dy, (n * channels + k) * plane, plane, row), 1, static_cast<int>(plane), &acc);
      }
      sums[k] = accumulate ? sums[k] + acc : acc;
    }
  });
}

// ---- memory ops ------------------------------------------------------------------------------

void CpuBackend::fill(Context&, Tensor& t, float value) {
  const std::int64_t n = t.elements();
  switch (t.dtype()) {
    case DType::kF32: {
      float* p = t.data_as<float>();
      elementwise(n, [&](std::int64_t b, std::int64_t e) { std::fill(p + b, p + e, value); });
      return;
    }
    case DType::kF16:
    case DType::kBF16: {
      const std::uint16_t bits = t.dtype() == DType::kF16 ? float_to_f16(value) : float_to_bf16(value);
      auto* p = t.data_as<std::uint16_t>();
      elementwise(n, [&](std::int64_t b, std::int64_t e) { std::fill(p + b, p + e, bits); });
      return;
    }
    case DType::kI32: {
      // Truncated towards zero, saturating (a float beyond the range has no i32 to truncate to).
      const double v = std::trunc(std::isnan(value) ? 0.0 : static_cast<double>(value));
      const auto i = static_cast<std::int32_t>(
          std::clamp(v, double{std::numeric_limits<std::int32_t>::min()}, double{std::numeric_limits<std::int32_t>::max()}));
      auto* p = t.data_as<std::int32_t>();
      elementwise(n, [&](std::int64_t b, std::int64_t e) { std::fill(p + b, p + e, i); });
      return;
    }
    case DType::kU8: {
      const double v = std::trunc(std::isnan(value) ? 0.0 : static_cast<double>(value));
      const auto u = static_cast<std::uint8_t>(std::clamp(v, 0.0, 255.0));
      auto* p = t.data_as<std::uint8_t>();
      elementwise(n, [&](std::int64_t b, std::int64_t e) { std::fill(p + b, p + e, u); });
      return;
    }
  }
}

void CpuBackend::cast(Context&, const Tensor& src, Tensor& dst) {
  if (src.data() == dst.data()) return;  // ops.cpp allows this only for equal dtypes: a no-op
  if (src.dtype() == dst.dtype()) {
    const auto* s = static_cast<const std::byte*>(src.data());
    auto* d = static_cast<std::byte*>(dst.data());
    pool_.for_each(static_cast<std::int64_t>(src.bytes()), kElementGrain * 4,
                   [&](std::int64_t b, std::int64_t e) { std::memcpy(d + b, s + b, static_cast<std::size_t>(e - b)); });
    return;
  }
  // Through f32 in blocks that stay in L1; f32 -> 16 bits rounds to nearest even, 16 bits -> f32
  // is exact, and f16 <-> bf16 rounds once (the f32 step is exact).
  elementwise(src.elements(), [&](std::int64_t b, std::int64_t e) {
    alignas(64) float block[1024];
    for (std::int64_t i = b; i < e; i += 1024) {
      const std::int64_t m = std::min<std::int64_t>(1024, e - i);
      to_f32(src.dtype(), src.data(), i, m, block);
      from_f32(dst.dtype(), block, m, dst.data(), i);
    }
  });
}

void CpuBackend::copy_to_host(Context&, const Tensor& src, void* dst) {
  if (src.bytes() > 0) std::memcpy(dst, src.data(), src.bytes());
}

void CpuBackend::copy_from_host(Context&, const void* src, Tensor& dst) {
  if (dst.bytes() > 0) std::memmove(dst.data(), src, dst.bytes());
}

}  // namespace cpu
}  // namespace sluice::train
