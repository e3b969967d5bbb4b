// The CPU backend's shared pieces: 16-bit element tags with f32 load/store, dispatch on a
// floating dtype, carving of the workspace into 64-byte aligned per-chunk pieces, the worker
// pool (oneTBB, behind this header) and the single-threaded sgemm every worker calls.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include "sluice/core/dtype.hpp"
#include "sluice/core/error.hpp"
#include "sluice/detail/core/half.hpp"

// SLUICE_CLONES compiles a hot f32 loop for AVX-512F, AVX2 and baseline x86-64 and picks one at
// load time (GCC function multi-versioning), since the build's default target is baseline x86-64
// (SSE2). The clones are named by ISA feature, not by CPU ("arch=skylake-avx512"): an arch= clone
// is chosen by __builtin_cpu_is, which a virtual CPU reported as a plain "Intel Xeon Processor"
// never matches, so every call fell back to SSE2 (a depthwise layer ran several times slower:
// docs/performance.md, "Figures behind choices in the code").
// Not under ThreadSanitizer: the clones' resolver (an ifunc) runs while the dynamic linker
// relocates, before the TSan runtime is up, and its instrumented entry crashes every program that
// loads libsluice (scripts/sanitize tsan).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define SLUICE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SLUICE_CLONES
#endif

namespace sluice::train::cpu {

// Storage tags for 16-bit tensors: elements are kept as bits, computed as f32.
struct F16 {
  std::uint16_t bits;
};
struct BF16 {
  std::uint16_t bits;
};

// f16 <-> f32 without branches, so the 16-bit loops vectorise (F. Giesen's half_to_float_fast5 and
// float_to_half_fast3_rtne): bit for bit sluice::f16_to_float and float_to_f16 (round to nearest
// even, subnormals, infinities and NaN payloads; checked over every f16 and every f32 input).
// The reference versions branch per element, which kept every 16-bit loop of the backend scalar
// (docs/performance.md, "Figures behind choices in the code", has what that cost a step).
inline float f16_bits_to_float(std::uint16_t h) {
  constexpr std::uint32_t shifted_exp = 0x7c00u << 13;
  std::uint32_t o = (static_cast<std::uint32_t>(h) & 0x7fffu) << 13;
  const std::uint32_t exp = shifted_exp & o;
  o += (127u - 15u) << 23;
  o += exp == shifted_exp ? (128u - 16u) << 23 : 0u;  // infinity or NaN: exponent all ones
  // Zero or subnormal: renormalised by an exact float subtraction.
  const float renorm = std::bit_cast<float>(o + (1u << 23)) - std::bit_cast<float>(113u << 23);
  o = exp == 0 ? std::bit_cast<std::uint32_t>(renorm) : o;
  return std::bit_cast<float>(o | (static_cast<std::uint32_t>(h) & 0x8000u) << 16);
}

inline std::uint16_t float_to_f16_bits(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = u & 0x80000000u;
  u ^= sign;
  const std::uint32_t special = u > 0x7f800000u ? 0x7e00u : 0x7c00u;  // NaN, or infinity / overflow
  // Subnormal or zero in f16: the float addition rounds to nearest even in place.
  constexpr std::uint32_t denorm_magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  const std::uint32_t sub =
      std::bit_cast<std::uint32_t>(std::bit_cast<float>(u) + std::bit_cast<float>(denorm_magic)) - denorm_magic;
  // Normal: rebias the exponent, round the 13 dropped bits to nearest even.
  const std::uint32_t normal = (u + ((15u - 127u) << 23) + 0xfffu + ((u >> 13) & 1u)) >> 13;
  const std::uint32_t o = u >= ((127u + 16u) << 23) ? special : (u < (113u << 23) ? sub : normal);
  return static_cast<std::uint16_t>(o | (sign >> 16));
}

inline float load(const float* p, std::int64_t i) { return p[i]; }
inline float load(const F16* p, std::int64_t i) { return f16_bits_to_float(p[i].bits); }
inline float load(const BF16* p, std::int64_t i) { return bf16_to_float(p[i].bits); }
inline void store(float* p, std::int64_t i, float v) { p[i] = v; }
inline void store(F16* p, std::int64_t i, float v) { p[i].bits = float_to_f16_bits(v); }
inline void store(BF16* p, std::int64_t i, float v) { p[i].bits = float_to_bf16(v); }

// Calls f with a null pointer of the storage type of `t` (float, F16 or BF16):
//   with_float_type(t, [&](auto* tag) { using T = std::remove_pointer_t<decltype(tag)>; ... });
template <class F>
decltype(auto) with_float_type(DType t, F&& f) {
  switch (t) {
    case DType::kF32: return f(static_cast<float*>(nullptr));
    case DType::kF16: return f(static_cast<F16*>(nullptr));
    case DType::kBF16: return f(static_cast<BF16*>(nullptr));
    default: break;
  }
  throw Error(ErrorCode::kInternal, "CPU backend: not a floating dtype");
}

// src[offset, offset + n) of a tensor of type t as f32 in dst.
void to_f32(DType t, const void* src, std::int64_t offset, std::int64_t n, float* dst);
// dst[offset, offset + n) = src, rounded to t; with `accumulate`, dst += src instead.
void from_f32(DType t, const float* src, std::int64_t n, void* dst, std::int64_t offset,
              bool accumulate = false);

// Floats rounded up to a whole 64-byte line, so every carved piece stays aligned.
constexpr std::size_t aligned_floats(std::size_t n) { return (n + 15) & ~std::size_t{15}; }

// A bump allocator over a workspace block: plan() with a null base to count, then carve.
class Scratch {
 public:
  explicit Scratch(void* base) : next_(static_cast<float*>(base)) {}
  float* take(std::size_t floats) {
    float* p = next_ == nullptr ? nullptr : next_ + used_;
    used_ += aligned_floats(floats);
    return p;
  }
  std::size_t bytes() const { return used_ * sizeof(float); }

 private:
  float* next_;
  std::size_t used_ = 0;
};

// A non-owning reference to a callable (std::function_ref before C++26): the worker pool's
// parameter type. std::function would copy each op's closure (a reference per variable it uses,
// more than its small buffer holds) to the heap on every call; the closure here outlives the
// call that takes it, so a pointer to it is all that is needed.
template <class Signature>
class FunctionRef;

template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> && std::is_invocable_r_v<R, F&, Args...>)
  FunctionRef(F&& f)  // NOLINT(google-explicit-constructor): passed as a lambda at every call
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* o, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<Args>(args)...);
        }) {}
  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

// The CPU backend's workers: a oneTBB arena of `threads` slots (the caller's thread is one).
// oneTBB rather than a pool of our own: it is already a dependency, its workers are shared with
// the input pipeline's executor (one market of threads for the process, so loading and training
// do not oversubscribe the cores), and exceptions thrown in a chunk reach the caller.
class WorkerPool {
 public:
  explicit WorkerPool(int threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int threads() const { return threads_; }
  // Runs fn(chunk, begin, end) for `chunks` contiguous, nearly equal pieces of [0, n), chunk in
  // [0, chunks), each exactly once, in parallel. The partition depends only on (n, chunks), so
  // per-chunk partial sums reduced in chunk order give the same result on every run.
  void run(std::int64_t n, int chunks, FunctionRef<void(int chunk, std::int64_t begin, std::int64_t end)> fn);
  // run() with as many chunks as threads, fewer when n / min_per_chunk is smaller.
  void for_each(std::int64_t n, std::int64_t min_per_chunk, FunctionRef<void(std::int64_t begin, std::int64_t end)> fn);
  // The chunk count for(n, min_per_chunk) uses.
  int chunks_for(std::int64_t n, std::int64_t min_per_chunk = 1) const;

 private:
  struct Impl;
  int threads_;
  std::unique_ptr<Impl> impl_;
};

// C = alpha * op(A) op(B) + beta * C, row-major, single-threaded (OpenBLAS cblas_sgemm with
// OpenBLAS's own threads set to one: the workers above parallelise around it).
void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc);
// Loads OpenBLAS (dlopen, train/cpu/openblas_api.hpp), sets it to one thread of its own (once per
// process) and says which library it is. Throws sluice::Error when OpenBLAS cannot be loaded.
const char* blas_init();

}  // namespace sluice::train::cpu
