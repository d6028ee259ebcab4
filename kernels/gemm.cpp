#include "go/kernels/gemm.hpp"

#include "avx512.hpp"  // before Eigen: GCC 12 warns falsely inside its AVX-512 headers

#include <Eigen/Core>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#include <algorithm>
#include <vector>

#include "go/core/error.hpp"

namespace go::kernels {

namespace {

using i64 = std::int64_t;

// oneDNN's sgemm splits a product over its OpenMP threads differently for each thread count, and
// on some CPUs (AVX2: 1,000 x 64 x 64, 64 x 64 x 4,096, 8 x 8 x 16,384) the bits of C then differ
// between 1 and 2 threads. go promises the same bits whatever the thread count, so the split is
// ours and depends on the shape alone: tiles of C's rows and, for a small C with a long inner
// dimension, chunks of k summed in chunk order afterwards. Each (tile, chunk) is one oneDNN call
// on one thread, and the threads only share out the calls.
struct Split {
  i64 mb = 0;  // rows of C per tile
  i64 kc = 0;  // inner dimension per chunk
};

constexpr double kTaskFlops = 4.0 * (1 << 20);  // below this a call's set-up dominates
constexpr i64 kMaxChunks = 16;
constexpr i64 kMaxPartials = 1 << 18;            // floats of C that k-chunks may each keep

Split split_for(i64 m, i64 n, i64 k) {
  Split s{m, k};
  if (2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) <= kTaskFlops) return s;
  // A long inner dimension against a small C (the weight gradients X^T dY): chunks of k, so the
  // threads share the work without each reading all of A and B.
  if (k >= 4 * std::max(m, n) && k >= 4096 && m * n <= kMaxPartials) {
    const i64 chunks = std::min(kMaxChunks, k / 2048);
    s.kc = (k + chunks - 1) / chunks;
  }
  const double per_row = 2.0 * static_cast<double>(n) * static_cast<double>(s.kc);
  i64 mb = static_cast<i64>(kTaskFlops / per_row) + 1;
  mb = (mb + 15) / 16 * 16;
  s.mb = std::min(m, mb);
  return s;
}

// One oneDNN call on the calling thread alone: oneDNN sizes its own team from omp_get_max_threads()
// (1 inside an active parallel region), so that is set to 1 for the call and restored. Returns
// oneDNN's status: the callers check it outside their parallel regions, which must not throw.
int sgemm_one_thread(bool trans_a, bool trans_b, i64 m, i64 n, i64 k, float alpha, const float* a, i64 lda,
                     const float* b, i64 ldb, float beta, float* c, i64 ldc) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const dnnl_status_t st =
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  omp_set_num_threads(saved);
  return static_cast<int>(st);
}

}  // namespace

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // oneDNN rejects k == 0; the product is empty, so C = beta * C.
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.f ? 0.f : beta * c[i * ldc + j];
    return;
  }
  const Split s = split_for(m, n, k);
  const i64 tiles = (m + s.mb - 1) / s.mb, chunks = (k + s.kc - 1) / s.kc;
  // Element (i, p) of op(A); row p of op(B).
  auto a_at = [&](i64 i, i64 p) { return trans_a ? a + p * lda + i : a + i * lda + p; };
  auto b_at = [&](i64 p) { return trans_b ? b + p : b + p * ldb; };
  // With one chunk every tile goes straight into C; with several, chunk q's product goes into
  // partial[q] (m x n, dense), and C = alpha * (sum over q in order) + beta * C afterwards.
  const bool direct = chunks == 1;
  std::vector<float> partial(direct ? 0 : static_cast<std::size_t>(chunks * m * n));
  int failed = dnnl_success;  // a failing call's status (any one of them)
#pragma omp parallel for schedule(static) collapse(2) if (chunks * tiles > 1)
  for (i64 q = 0; q < chunks; ++q)
    for (i64 t = 0; t < tiles; ++t) {
      const i64 i0 = t * s.mb, rows = std::min(s.mb, m - i0);
      const i64 p0 = q * s.kc, depth = std::min(s.kc, k - p0);
      const int st = sgemm_one_thread(trans_a, trans_b, rows, n, depth, direct ? alpha : 1.f, a_at(i0, p0), lda,
                                      b_at(p0), ldb, direct ? beta : 0.f,
                                      direct ? c + i0 * ldc : partial.data() + (q * m + i0) * n, direct ? ldc : n);
      if (st != dnnl_success) {
#pragma omp atomic write
        failed = st;
      }
    }
  GO_CHECK(failed == dnnl_success, "oneDNN sgemm failed (status ", failed, ") for m=", m, " n=", n, " k=", k);
  if (direct) return;
#pragma omp parallel for schedule(static) if (m * n >= 4096)
  for (i64 i = 0; i < m; ++i)
    for (i64 j = 0; j < n; ++j) {
      float sum = partial[static_cast<std::size_t>(i * n + j)];
      for (i64 q = 1; q < chunks; ++q) sum += partial[static_cast<std::size_t>((q * m + i) * n + j)];
      float& out = c[i * ldc + j];
      out = beta == 0.f ? alpha * sum : alpha * sum + beta * out;
    }
}

void gemm_eigen(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
                std::int64_t ldc) {
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Stride = Eigen::OuterStride<>;
  using CMap = Eigen::Map<const Mat, 0, Stride>;
  Eigen::Map<Mat, 0, Stride> C(c, m, n, Stride(ldc));
  if (beta == 0.f) C.setZero();
  else if (beta != 1.f) C *= beta;
  if (m == 0 || n == 0 || k == 0) return;
  CMap A(a, trans_a ? k : m, trans_a ? m : k, Stride(lda));
  CMap B(b, trans_b ? n : k, trans_b ? k : n, Stride(ldb));
  if (!trans_a && !trans_b) C.noalias() += alpha * A * B;
  else if (trans_a && !trans_b) C.noalias() += alpha * A.transpose() * B;
  else if (!trans_a && trans_b) C.noalias() += alpha * A * B.transpose();
  else C.noalias() += alpha * A.transpose() * B.transpose();
}

}  // namespace go::kernels
