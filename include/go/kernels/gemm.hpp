#pragma once
// Dense matrix products on raw row-major pointers (oneDNN's sgemm underneath, one call per
// tile of a split fixed by the shape, so the bits do not depend on the number of threads).
#include <cstdint>

namespace go::kernels {

// C[m x n] = alpha * op(A) * op(B) + beta * C, all row-major; op(X) = X or X^T.
// lda/ldb/ldc are the row strides of A, B and C as stored.
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc);

// The transformer feed-forward y = gelu(x W1 + b1) W2 + b2 (+ y when accumulate): x [m, in],
// W1 [in, hid], b1 [hid], W2 [hid, out], b2 [out], y [m, out], all dense row-major; pre (optional,
// [m, hid]) receives x W1 + b1. Bit for bit what gemm, + b1, gelu, gemm, + b2 give in turn. Where
// gemm splits both products by the same rows alone, each tile of rows runs both on one thread with
// its activation in cache, so the activation (and, without pre, the pre-activation) is never
// written out whole; elsewhere the steps run one after the other over all rows.
void feed_forward(std::int64_t m, std::int64_t in, std::int64_t hid, std::int64_t out, const float* x, const float* w1,
                  const float* b1, const float* w2, const float* b2, float* pre, float* y, bool accumulate);

// The same product through Eigen, used as an independent reference and anchor.
void gemm_eigen(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
                std::int64_t ldc);

}  // namespace go::kernels
