#pragma once
// Dense matrix products on raw row-major pointers (oneDNN's sgemm underneath, one call per
// tile of a split fixed by the shape, so the bits do not depend on the number of threads).
#include <cstdint>

namespace go::kernels {

// C[m x n] = alpha * op(A) * op(B) + beta * C, all row-major; op(X) = X or X^T.
// lda/ldb/ldc are the row strides of A, B and C as stored.
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc);

// The same product through Eigen, used as an independent reference and anchor.
void gemm_eigen(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
                std::int64_t ldc);

}  // namespace go::kernels
