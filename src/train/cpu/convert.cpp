// Conversions between a tensor's storage type and f32 for the CPU backend (cpu_util.hpp): the
// widening and rounding every 16-bit op does around its f32 kernel, and the cast op.
#include "train/cpu/cpu_util.hpp"

namespace sluice::train::cpu {
namespace {

template <class T>
void widen(const T* __restrict src, std::int64_t n, float* __restrict dst) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = load(src, i);
}

template <class T>
void narrow(const float* __restrict src, std::int64_t n, T* __restrict dst, bool accumulate) {
  if (accumulate) {
    // Added in f32 and rounded once, as a 16-bit accumulation on a GPU with f32 math does.
    for (std::int64_t i = 0; i < n; ++i) store(dst, i, load(dst, i) + src[i]);
  } else {
    for (std::int64_t i = 0; i < n; ++i) store(dst, i, src[i]);
  }
}

}  // namespace

void to_f32(DType t, const void* src, std::int64_t offset, std::int64_t n, float* dst) {
  with_float_type(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    widen(static_cast<const T*>(src) + offset, n, dst);
  });
}

void from_f32(DType t, const float* src, std::int64_t n, void* dst, std::int64_t offset, bool accumulate) {
  with_float_type(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    narrow(src, n, static_cast<T*>(dst) + offset, accumulate);
  });
}

}  // namespace sluice::train::cpu
