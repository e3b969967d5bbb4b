// Dense on the CPU: three sgemms over row blocks. Every output element is computed whole by one
// GEMM call (no partial sums across workers), and the blocks are cut into kReduceGroups pieces
// whatever the thread count, so the calls, hence the results, are the same at any thread count.
//   y  (N, O) = x (N, I) w^T (I, O) + bias      rows of y by blocks of the batch
//   dx (N, I) = dy (N, O) w (O, I)              rows of dx by blocks of the batch
//   dw (O, I) = dy^T (O, N) x (N, I)            rows of dw by blocks of the outputs
#include <algorithm>

#include "train/cpu/cpu_backend.hpp"

namespace sluice::train::cpu {

std::size_t CpuBackend::dense_workspace(const DenseShape& s, DType dtype) const {
  const std::int64_t xin = s.batch * s.in_features, yout = s.batch * s.out_features;
  const std::int64_t wn = s.out_features * s.in_features;
  return staged_floats(dtype, xin, wn, s.out_features, yout, xin, wn, s.out_features) * sizeof(float);
}

void CpuBackend::dense_forward(Context& ctx, const DenseShape& s, const Tensor& x, const Tensor& w, const Tensor* bias,
                               Tensor& y) {
  Scratch sc = scratch(ctx, dense_workspace(s, x.dtype()));
  Staging st(pool_, sc);
  const float* xf = st.in(x);
  const float* wf = st.in(w);
  const float* bf = st.in(bias);
  float* yf = st.out(y);
  const int I = static_cast<int>(s.in_features), O = static_cast<int>(s.out_features);
  const int groups = reduce_groups(s.batch);
  pool_.run(groups, workers(std::max(groups, 1)), [&](int, std::int64_t g0, std::int64_t g1) {
    for (std::int64_t g = g0; g < g1; ++g) {
      const std::int64_t n0 = s.batch * g / groups, n1 = s.batch * (g + 1) / groups;
      if (n1 == n0) continue;
      float* yb = yf + n0 * O;
      gemm(false, true, static_cast<int>(n1 - n0), O, I, 1.0f, xf + n0 * I, I, wf, I, 0.0f, yb, O);
      if (bf == nullptr) continue;
      for (std::int64_t n = n0; n < n1; ++n) {
        float* __restrict row = yf + n * O;
        for (int o = 0; o < O; ++o) row[o] += bf[o];
      }
    }
  });
  st.finish();
}

void CpuBackend::dense_backward(Context& ctx, const DenseShape& s, const Tensor& x, const Tensor& w, const Tensor& dy,
                                Tensor* dx, Tensor& dw, Tensor* dbias, GradMode mode) {
  const bool accumulate = mode == GradMode::kAccumulate;
  Scratch sc = scratch(ctx, dense_workspace(s, x.dtype()));
  Staging st(pool_, sc);
  const float* xf = st.in(x);
  const float* wf = st.in(w);
  const float* dyf = st.in(dy);
  float* dxf = st.out(dx);
  float* dwf = st.out(dw, accumulate);
  float* dbf = st.out(dbias, accumulate);
  const int N = static_cast<int>(s.batch), I = static_cast<int>(s.in_features), O = static_cast<int>(s.out_features);

  // dx by blocks of the batch.
  const int row_groups = reduce_groups(s.batch);
  if (dxf != nullptr) {
    pool_.run(row_groups, workers(std::max(row_groups, 1)), [&](int, std::int64_t g0, std::int64_t g1) {
      for (std::int64_t g = g0; g < g1; ++g) {
        const std::int64_t n0 = s.batch * g / row_groups, n1 = s.batch * (g + 1) / row_groups;
        if (n1 > n0) gemm(false, false, static_cast<int>(n1 - n0), I, O, 1.0f, dyf + n0 * O, O, wf, I, 0.0f, dxf + n0 * I, I);
      }
    });
  }
  // dw and dbias by blocks of the outputs; a column of dy summed in row order for dbias.
  const int out_groups = reduce_groups(s.out_features);
  const float beta = accumulate ? 1.0f : 0.0f;
  pool_.run(out_groups, workers(out_groups), [&](int, std::int64_t g0, std::int64_t g1) {
    for (std::int64_t g = g0; g < g1; ++g) {
      const std::int64_t o0 = s.out_features * g / out_groups, o1 = s.out_features * (g + 1) / out_groups;
      if (o1 == o0) continue;
      const int m = static_cast<int>(o1 - o0);
      gemm(true, false, m, I, N, 1.0f, dyf + o0, O, xf, I, beta, dwf + o0 * I, I);
      if (dbf == nullptr) continue;
      if (!accumulate) std::fill(dbf + o0, dbf + o1, 0.0f);
      for (int n = 0; n < N; ++n) {
        const float* __restrict row = dyf + std::int64_t{n} * O;
        for (std::int64_t o = o0; o < o1; ++o) dbf[o] += row[o];
      }
    }
  });
  st.finish();
}

}  // namespace sluice::train::cpu
