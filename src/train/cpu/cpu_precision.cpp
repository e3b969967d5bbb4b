// Mixed precision's two ops on the CPU: scale_cast (loss scaling and unscaling) and
// find_nonfinite (the check before an optimizer step).
#include <atomic>
#include <cstring>

#include "train/cpu/cpu_backend.hpp"

namespace sluice::train::cpu {
namespace {

template <class S, class D>
void scale_span(const S* src, float scale, D* dst, std::int64_t b, std::int64_t e) {
  // In place (src == dst, the same type) reads each element before writing it.
  for (std::int64_t i = b; i < e; ++i) store(dst, i, load(src, i) * scale);
}

// True when an element of [b, e) is an infinity or a NaN: its exponent bits all set, tested on
// the stored bits (no widening, and immune to a finite-math compile of the caller).
template <class Bits>
bool any_nonfinite(const Bits* p, Bits exponent, std::int64_t b, std::int64_t e) {
  Bits found = 0;
  for (std::int64_t i = b; i < e; ++i) found |= static_cast<Bits>((p[i] & exponent) == exponent);
  return found != 0;
}

}  // namespace

void CpuBackend::scale_cast(Context&, const Tensor& src, float scale, Tensor& dst) {
  with_float_type(src.dtype(), [&](auto* src_tag) {
    using S = std::remove_pointer_t<decltype(src_tag)>;
    with_float_type(dst.dtype(), [&](auto* dst_tag) {
      using D = std::remove_pointer_t<decltype(dst_tag)>;
      const S* s = src.data_as<const S>();
      D* d = dst.data_as<D>();
      elementwise(src.elements(), [&](std::int64_t b, std::int64_t e) { scale_span(s, scale, d, b, e); });
    });
  });
}

void CpuBackend::find_nonfinite(Context&, const Tensor& t, Tensor& flag) {
  std::atomic<bool> found{false};
  const std::int64_t n = t.elements();
  if (t.dtype() == DType::kF32) {
    const auto* p = t.data_as<const std::uint32_t>();
    elementwise(n, [&](std::int64_t b, std::int64_t e) {
      if (any_nonfinite<std::uint32_t>(p, 0x7f800000u, b, e)) found.store(true, std::memory_order_relaxed);
    });
  } else {
    const auto* p = t.data_as<const std::uint16_t>();
    const std::uint16_t exponent = t.dtype() == DType::kF16 ? 0x7c00u : 0x7f80u;
    elementwise(n, [&](std::int64_t b, std::int64_t e) {
      if (any_nonfinite<std::uint16_t>(p, exponent, b, e)) found.store(true, std::memory_order_relaxed);
    });
  }
  if (found.load()) *flag.data_as<float>() = 1.0f;
}

}  // namespace sluice::train::cpu
