// Replaces the global operator new/delete family with one that counts every call, for tests that
// prove a steady state allocates nothing ("no heap allocation per sample", "no operator new in a
// training step"). Include it in exactly one source file of a test executable: a replacement
// operator new is a definition, so two would not link.
//
// Sanitizers replace operator new themselves and counting would fight them, so under ASan or
// TSan this header defines nothing and SLUICE_COUNTING_NEW is 0: such tests skip, saying why.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SLUICE_COUNTING_NEW 0
#else
#define SLUICE_COUNTING_NEW 1
#endif

namespace sluice::test {
// operator new calls in the process so far (0 under a sanitizer).
inline std::atomic<long> g_new_calls{0};
inline long new_calls() { return g_new_calls.load(std::memory_order_relaxed); }
}  // namespace sluice::test

#if SLUICE_COUNTING_NEW
// GCC sees the replacement delete's free() inlined where a container of the including file frees
// what operator new returned and takes the pair for a mismatch; the replacements are a matching
// malloc/free pair, so the warning is a false positive here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
  sluice::test::g_new_calls.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  sluice::test::g_new_calls.fetch_add(1, std::memory_order_relaxed);
  const auto align = static_cast<std::size_t>(a);
  if (void* p = std::aligned_alloc(align, (n + align - 1) & ~(align - 1))) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  sluice::test::g_new_calls.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
#endif
