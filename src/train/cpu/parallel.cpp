// WorkerPool over a oneTBB arena, and the GEMM wrapper over OpenBLAS (dlopen()ed on first use
// through openblas_api.hpp, the only other file that sees <cblas.h>): the only places the CPU
// backend touches a third-party threading or BLAS library.
#include <algorithm>
#include <mutex>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include "train/cpu/cpu_util.hpp"
#include "train/cpu/openblas_api.hpp"

namespace sluice::train::cpu {

struct WorkerPool::Impl {
  explicit Impl(int threads) : arena(threads) {}
  tbb::task_arena arena;
};

WorkerPool::WorkerPool(int threads) : threads_(std::max(1, threads)), impl_(std::make_unique<Impl>(threads_)) {}
WorkerPool::~WorkerPool() = default;

int WorkerPool::chunks_for(std::int64_t n, std::int64_t min_per_chunk) const {
  if (n <= 0) return 0;
  const std::int64_t by_size = std::max<std::int64_t>(1, n / std::max<std::int64_t>(1, min_per_chunk));
  return static_cast<int>(std::min<std::int64_t>(threads_, by_size));
}

void WorkerPool::run(std::int64_t n, int chunks, FunctionRef<void(int, std::int64_t, std::int64_t)> fn) {
  if (n <= 0 || chunks <= 0) return;
  auto bounds = [n, chunks](int c) { return n * c / chunks; };
  if (chunks == 1 || threads_ == 1) {
    for (int c = 0; c < chunks; ++c) fn(c, bounds(c), bounds(c + 1));
    return;
  }
  impl_->arena.execute([&] {
    // static_partitioner: one range per slot, no stealing games; each chunk is one task.
    tbb::parallel_for(
        tbb::blocked_range<int>(0, chunks, 1),
        [&](const tbb::blocked_range<int>& r) {
          for (int c = r.begin(); c != r.end(); ++c) fn(c, bounds(c), bounds(c + 1));
        },
        tbb::static_partitioner());
  });
}

void WorkerPool::for_each(std::int64_t n, std::int64_t min_per_chunk, FunctionRef<void(std::int64_t, std::int64_t)> fn) {
  run(n, chunks_for(n, min_per_chunk), [&](int, std::int64_t b, std::int64_t e) { fn(b, e); });
}

const char* blas_init() {
  static std::once_flag once;
  // OpenBLAS's own pool would compete with the workers (and spin after each call), so it runs
  // each GEMM on the calling worker. Process-wide, as OpenBLAS's setting is. This is what loads
  // the library: CpuBackend's constructor calls it, so a process that never trains on the CPU
  // never maps OpenBLAS (nor starts its thread pool). A missing library throws here, and the
  // next call tries again.
  std::call_once(once, [] { cpu_detail::openblas_api().set_num_threads(1); });
  return "OpenBLAS";
}

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {  // BLAS leaves C alone for k = 0 only when beta is 1; be explicit
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) c[std::int64_t{i} * ldc + j] = beta == 0.0f ? 0.0f : beta * c[std::int64_t{i} * ldc + j];
    }
    return;
  }
  cpu_detail::openblas_api().sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                                   trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace sluice::train::cpu
