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

// The backward of feed_forward, with an optional layer norm before it (x' = LN(x), the
// forward's normalization with its saved row statistics), by tiles of rows: each tile recomputes
// LN(x), gelu and gelu' from the saved pre-activation and runs the four products with its rows in
// cache, so no [m, hid] buffer is written. The weight, bias and norm gradients are summed per
// chunk of tiles (fixed by the shape, feed_forward_backward_plan), then over the chunks in order:
// the bits do not depend on the number of threads. Each output may be null (not wanted); each is
// written, or added to when its accumulate flag is set.
struct FeedForwardNorm {
  const float* gamma;  // [in]
  const float* beta;   // [in]
  const float* mean;   // [m], the forward's
  const float* rstd;   // [m], the forward's
  float eps;
};
struct FeedForwardGrads {
  float* dx = nullptr;   // [m, in]
  float* dw1 = nullptr;  // [in, hid]
  float* db1 = nullptr;  // [hid]
  float* dw2 = nullptr;  // [hid, out]
  float* db2 = nullptr;  // [out]
  float* dgamma = nullptr, *dbeta = nullptr;  // [in], with a norm
  bool accumulate_dx = false, accumulate_dw1 = false, accumulate_db1 = false, accumulate_dw2 = false,
       accumulate_db2 = false, accumulate_dgamma = false, accumulate_dbeta = false;
};
struct FeedForwardBackwardPlan {
  std::int64_t tile = 0;    // rows per tile
  std::int64_t chunks = 0;  // chunks of consecutive tiles, one partial sum each
};
FeedForwardBackwardPlan feed_forward_backward_plan(std::int64_t m, std::int64_t in, std::int64_t hid,
                                                   std::int64_t out);
// x [m, in]: the block's input (LN's input with norm); pre [m, hid]: x' W1 + b1 as the forward
// kept it; dy [m, out]: the gradient of y.
void feed_forward_backward(std::int64_t m, std::int64_t in, std::int64_t hid, std::int64_t out, const float* x,
                           const FeedForwardNorm* norm, const float* w1, const float* w2, const float* pre,
                           const float* dy, const FeedForwardGrads& grads);

// The same product through Eigen, used as an independent reference and anchor.
void gemm_eigen(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
                std::int64_t ldc);

}  // namespace go::kernels
