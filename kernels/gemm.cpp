#include "go/kernels/gemm.hpp"

#include "avx512.hpp"  // before Eigen: GCC 12 warns falsely inside its AVX-512 headers

#include <Eigen/Core>
#include <oneapi/dnnl/dnnl.h>

#include "go/core/error.hpp"

namespace go::kernels {

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // oneDNN rejects k == 0; the product is empty, so C = beta * C.
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.f ? 0.f : beta * c[i * ldc + j];
    return;
  }
  const dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb,
                                      beta, c, ldc);
  GO_CHECK(st == dnnl_success, "oneDNN sgemm failed (status ", static_cast<int>(st), ") for m=", m, " n=", n,
           " k=", k);
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
