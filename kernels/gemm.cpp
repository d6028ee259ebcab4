#include "go/kernels/gemm.hpp"

#include "avx512.hpp"  // before Eigen: GCC 12 warns falsely inside its AVX-512 headers

#include <Eigen/Core>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#include <algorithm>

#include "go/core/error.hpp"
#include "go/core/tensor.hpp"
#include "go/kernels/math.hpp"
#include "go/kernels/rowwise.hpp"

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
  // threads share the work without each reading all of A and B. The chunks alone share it out:
  // cutting C's rows too made every tile read all of B's chunk again, at a fraction of the rows
  // oneDNN's kernel is fast for (the feed-forward's 64 x 256 weight gradient over 80,588 rows:
  // 74 ms in 4 x 16 calls, 27 ms in 16, the same bits).
  if (k >= 4 * std::max(m, n) && k >= 4096 && m * n <= kMaxPartials) {
    const i64 chunks = std::min(kMaxChunks, k / 2048);
    s.kc = (k + chunks - 1) / chunks;
    return s;
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

// C = beta * C: the product of an empty inner dimension (oneDNN rejects k == 0).
void scale_only(i64 m, i64 n, float beta, float* c, i64 ldc) {
  for (i64 i = 0; i < m; ++i)
    for (i64 j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.f ? 0.f : beta * c[i * ldc + j];
}

}  // namespace

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    scale_only(m, n, beta, c, ldc);
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
  // from the tensor core's block cache: the same sizes come back every training step, where a fresh
  // allocation of a few MB costs page faults (and, freed, is unmapped again)
  Tensor partial = Tensor::empty(Shape{direct ? 0 : chunks * m * n});
  float* const pp = partial.f32();
  int failed = dnnl_success;  // a failing call's status (any one of them)
#pragma omp parallel for schedule(static) collapse(2) if (chunks * tiles > 1)
  for (i64 q = 0; q < chunks; ++q)
    for (i64 t = 0; t < tiles; ++t) {
      const i64 i0 = t * s.mb, rows = std::min(s.mb, m - i0);
      const i64 p0 = q * s.kc, depth = std::min(s.kc, k - p0);
      const int st = sgemm_one_thread(trans_a, trans_b, rows, n, depth, direct ? alpha : 1.f, a_at(i0, p0), lda,
                                      b_at(p0), ldb, direct ? beta : 0.f,
                                      direct ? c + i0 * ldc : pp + (q * m + i0) * n, direct ? ldc : n);
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
      float sum = pp[i * n + j];
      for (i64 q = 1; q < chunks; ++q) sum += pp[(q * m + i) * n + j];
      float& out = c[i * ldc + j];
      out = beta == 0.f ? alpha * sum : alpha * sum + beta * out;
    }
}

namespace {

// gemm()'s rows per tile of an m x n x k product split by rows alone, or 0 when it also cuts k.
i64 row_tile(i64 m, i64 n, i64 k) {
  if (m == 0 || n == 0 || k == 0) return 0;
  const Split s = split_for(m, n, k);
  return s.kc == k ? s.mb : 0;
}

// One row of the feed-forward's first step: pre += b1 (kept), act = gelu(pre). Without FMA
// contraction, as nn::mlp_gelu's backward recomputes gelu (compiled into src/, whose files are
// built with -ffp-contract=off): the same activation bits in both passes.
#if defined(__clang__)
void bias_gelu_row(std::int64_t hid, const float* b1, float* pre, float* act) {
#pragma clang fp contract(off)
#elif defined(__GNUC__)
__attribute__((optimize("fp-contract=off"))) void bias_gelu_row(std::int64_t hid, const float* b1, float* pre,
                                                                 float* act) {
#else
void bias_gelu_row(std::int64_t hid, const float* b1, float* pre, float* act) {
#endif
#pragma omp simd
  for (std::int64_t c = 0; c < hid; ++c) {
    const float z = pre[c] + b1[c];
    pre[c] = z;
    act[c] = gelu_f(z);
  }
}

inline void add_bias_row(std::int64_t out, const float* b2, float* y) {
#pragma omp simd
  for (std::int64_t c = 0; c < out; ++c) y[c] += b2[c];
}

}  // namespace

void feed_forward(std::int64_t m, std::int64_t in, std::int64_t hid, std::int64_t out, const float* x, const float* w1,
                  const float* b1, const float* w2, const float* b2, float* pre, float* y, bool accumulate) {
  const float beta2 = accumulate ? 1.f : 0.f;
  // Tiles are gemm's own (the same calls, so the same bits) where both products cut the rows alike.
  const i64 tile = row_tile(m, hid, in);
  if (tile == 0 || tile != row_tile(m, out, hid)) {
    Tensor own_pre = Tensor::empty(Shape{pre ? 0 : m * hid}), act = Tensor::empty(Shape{m * hid});
    float* pp = pre ? pre : own_pre.f32();
    gemm(false, false, m, hid, in, 1.f, x, in, w1, hid, 0.f, pp, hid);
#pragma omp parallel for if (m * hid > (1 << 15))
    for (i64 r = 0; r < m; ++r) bias_gelu_row(hid, b1, pp + r * hid, act.f32() + r * hid);
    gemm(false, false, m, out, hid, 1.f, act.f32(), hid, w2, out, beta2, y, out);
#pragma omp parallel for if (m * out > (1 << 15))
    for (i64 r = 0; r < m; ++r) add_bias_row(out, b2, y + r * out);
    return;
  }
  const i64 tiles = (m + tile - 1) / tile;
  int failed = dnnl_success;
#pragma omp parallel if (tiles > 1)
  {
    // this thread's activation tile, and its pre-activation tile when pre is not kept
    Tensor buf = Tensor::empty(Shape{tile * hid * (pre ? 1 : 2)});
    float* act = buf.f32();
    float* own_pre = pre ? nullptr : act + tile * hid;
#pragma omp for schedule(static)
    for (i64 t = 0; t < tiles; ++t) {
      const i64 r0 = t * tile, rows = std::min(tile, m - r0);
      float* pp = pre ? pre + r0 * hid : own_pre;
      float* yt = y + r0 * out;
      int st = sgemm_one_thread(false, false, rows, hid, in, 1.f, x + r0 * in, in, w1, hid, 0.f, pp, hid);
      for (i64 r = 0; r < rows; ++r) bias_gelu_row(hid, b1, pp + r * hid, act + r * hid);
      if (st == dnnl_success)
        st = sgemm_one_thread(false, false, rows, out, hid, 1.f, act, hid, w2, out, beta2, yt, out);
      for (i64 r = 0; r < rows; ++r) add_bias_row(out, b2, yt + r * out);
      if (st != dnnl_success) {
#pragma omp atomic write
        failed = st;
      }
    }
  }
  GO_CHECK(failed == dnnl_success, "oneDNN sgemm failed (status ", failed, ") in the feed-forward of ", m, " rows, ",
           in, " -> ", hid, " -> ", out);
}

namespace {

// One row of the feed-forward's backward: act = gelu(pre), dg = gelu'(pre), sharing their erf;
// without FMA contraction, as bias_gelu_row: the forward's activation bits.
#if defined(__clang__)
void gelu_and_derivative_row(std::int64_t hid, const float* pre, float* act, float* dg) {
#pragma clang fp contract(off)
#elif defined(__GNUC__)
__attribute__((optimize("fp-contract=off"))) void gelu_and_derivative_row(std::int64_t hid, const float* pre,
                                                                           float* act, float* dg) {
#else
void gelu_and_derivative_row(std::int64_t hid, const float* pre, float* act, float* dg) {
#endif
#pragma omp simd
  for (std::int64_t c = 0; c < hid; ++c) {
    const float z = pre[c];
    const float e = gelu_erf(z);
    act[c] = gelu_of(z, e);
    dg[c] = gelu_df_of(z, e);
  }
}

// acc[c] += sum over the rows of a [rows, cols], rows in order.
void add_column_sums(i64 rows, i64 cols, const float* a, float* acc) {
  for (i64 r = 0; r < rows; ++r) {
#pragma omp simd
    for (i64 c = 0; c < cols; ++c) acc[c] += a[r * cols + c];
  }
}

constexpr i64 kBackwardChunks = 16;                   // fixed by the shape: the bits do not depend on threads
constexpr i64 kBackwardChunkRows = 512;               // rows per chunk at least: its partials cost once a chunk
constexpr i64 kBackwardPartialFloats = i64(1) << 22;  // all chunks' weight-gradient partials together

}  // namespace

FeedForwardBackwardPlan feed_forward_backward_plan(std::int64_t m, std::int64_t in, std::int64_t hid, std::int64_t out) {
  FeedForwardBackwardPlan p;
  if (m <= 0 || in <= 0 || hid <= 0 || out <= 0) return p;
  // A tile's hidden-width buffers (activation, gelu', its gradient) about 128 KB each, so that
  // with its input and output rows they stay in a core's L2 between the four products.
  p.tile = std::clamp<i64>((32768 / hid) / 16 * 16, 16, 256);
  const i64 per_chunk = in * hid + hid * out + hid + out + 2 * in;
  p.chunks = std::min({kBackwardChunks, m / kBackwardChunkRows, (m + p.tile - 1) / p.tile,
                       kBackwardPartialFloats / per_chunk});
  if (p.chunks <= 1) {
    // Weights too large for a partial sum per chunk (or one tile in all): one chunk, whose
    // products share out their own work (gemm), in tiles large enough to pay for that.
    p.chunks = 1;
    p.tile = std::min<i64>(m, 512);
  }
  return p;
}

void feed_forward_backward(std::int64_t m, std::int64_t in, std::int64_t hid, std::int64_t out, const float* x,
                           const FeedForwardNorm* norm, const float* w1, const float* w2, const float* pre,
                           const float* dy, const FeedForwardGrads& g) {
  if (m <= 0) return;
  const FeedForwardBackwardPlan plan = feed_forward_backward_plan(m, in, hid, out);
  const i64 R = plan.tile, tiles = (m + R - 1) / R, chunks = plan.chunks;
  const bool want_w1 = g.dw1 != nullptr, want_w2 = g.dw2 != nullptr;
  const bool want_gamma = norm && g.dgamma, want_beta = norm && g.dbeta;
  // Per chunk: dW1 [in, hid], dW2 [hid, out], db1 [hid], db2 [out], dgamma, dbeta [in].
  const i64 o_w2 = in * hid, o_b1 = o_w2 + hid * out, o_b2 = o_b1 + hid, o_gm = o_b2 + out, o_bt = o_gm + in,
            per_chunk = o_bt + in;
  Tensor partial_block = Tensor::zeros(Shape{chunks * per_chunk});
  float* const partial = partial_block.f32();
  // The tiles of chunk q, on one thread, with that thread's buffers (the MLP's input LN(x) or x,
  // activation, gelu', d pre, d input, row statistics); product() is one oneDNN call (several
  // chunks) or gemm's split (one).
  auto run_chunk = [&](i64 q, float* buf, auto&& product) {
    float* xn = buf;
    float* act = xn + R * in;
    float* dg = act + R * hid;
    float* dpre = dg + R * hid;
    float* dxn = dpre + R * hid;
    float* mean = dxn + R * in;
    float* rstd = mean + R;
    float* part = partial + q * per_chunk;
    for (i64 t = q * tiles / chunks; t < (q + 1) * tiles / chunks; ++t) {
      const i64 r0 = t * R, rows = std::min(R, m - r0);
      const float* xt = x + r0 * in;
      const float* dyt = dy + r0 * out;
      const float* in_rows = xt;
      if (norm) {  // LN(x) again, bit for bit the forward's (its statistics too)
        layer_norm_forward(xt, norm->gamma, norm->beta, xn, mean, rstd, rows, in, norm->eps);
        in_rows = xn;
      }
      for (i64 r = 0; r < rows; ++r) gelu_and_derivative_row(hid, pre + (r0 + r) * hid, act + r * hid, dg + r * hid);
      add_column_sums(rows, out, dyt, part + o_b2);
      if (want_w2 && !product(true, false, hid, out, rows, act, hid, dyt, out, 1.f, part + o_w2, out)) return false;
      // d pre = (dy W2^T) * gelu'(pre)
      if (!product(false, true, rows, hid, out, dyt, out, w2, out, 0.f, dpre, hid)) return false;
      for (i64 i = 0; i < rows * hid; ++i) dpre[i] *= dg[i];
      add_column_sums(rows, hid, dpre, part + o_b1);
      if (want_w1 && !product(true, false, in, hid, rows, in_rows, in, dpre, hid, 1.f, part, hid)) return false;
      if (!g.dx && !want_gamma && !want_beta) continue;
      // d input = d pre W1^T, through the layer norm when there is one
      float* dxt = g.dx ? g.dx + r0 * in : nullptr;
      float* dst = norm || g.accumulate_dx || !dxt ? dxn : dxt;
      if (!product(false, true, rows, in, hid, dpre, hid, w1, hid, 0.f, dst, in)) return false;
      if (norm) {  // LN's input gradient over the normalized rows, read for the last time above
        layer_norm_backward(xt, norm->gamma, norm->mean + r0, norm->rstd + r0, dxn, xn,
                            want_gamma ? part + o_gm : nullptr, want_beta ? part + o_bt : nullptr, rows, in);
        dst = xn;
      }
      if (dxt && dst != dxt) {
        if (g.accumulate_dx) {
          for (i64 i = 0; i < rows * in; ++i) dxt[i] += dst[i];
        } else {
          std::copy(dst, dst + rows * in, dxt);
        }
      }
    }
    return true;
  };
  const i64 buf_floats = R * (2 * in + 3 * hid) + 2 * R;
  if (chunks == 1) {
    Tensor buf = Tensor::empty(Shape{buf_floats});
    run_chunk(0, buf.f32(),
              [](bool ta, bool tb, i64 mm, i64 nn, i64 kk, const float* a, i64 lda, const float* b, i64 ldb, float beta,
                 float* c, i64 ldc) {
                gemm(ta, tb, mm, nn, kk, 1.f, a, lda, b, ldb, beta, c, ldc);
                return true;
              });
  } else {
    int failed = dnnl_success;
    const int threads = omp_get_max_threads();  // scratch only: the work is cut by chunks
    Tensor bufs = Tensor::empty(Shape{buf_floats * threads});
#pragma omp parallel num_threads(threads)
    {
      float* buf = bufs.f32() + buf_floats * omp_get_thread_num();
#pragma omp for schedule(static)
      for (i64 q = 0; q < chunks; ++q) {
        int st = dnnl_success;
        run_chunk(q, buf,
                  [&st](bool ta, bool tb, i64 mm, i64 nn, i64 kk, const float* a, i64 lda, const float* b, i64 ldb,
                        float beta, float* c, i64 ldc) {
                    st = sgemm_one_thread(ta, tb, mm, nn, kk, 1.f, a, lda, b, ldb, beta, c, ldc);
                    return st == dnnl_success;
                  });
        if (st != dnnl_success) {
#pragma omp atomic write
          failed = st;
        }
      }
    }
    GO_CHECK(failed == dnnl_success, "oneDNN sgemm failed (status ", failed, ") in the feed-forward backward of ", m,
             " rows, ", in, " -> ", hid, " -> ", out);
  }
  // The chunks' partials summed in chunk order, added to what the outputs hold when they accumulate.
  auto merge = [&](float* dst, i64 offset, i64 count, bool accumulate) {
    if (!dst) return;
    for (i64 j = 0; j < count; ++j) {
      float s = partial[offset + j];
      for (i64 q = 1; q < chunks; ++q) s += partial[q * per_chunk + offset + j];
      dst[j] = accumulate ? dst[j] + s : s;
    }
  };
  merge(g.dw1, 0, in * hid, g.accumulate_dw1);
  merge(g.dw2, o_w2, hid * out, g.accumulate_dw2);
  merge(g.db1, o_b1, hid, g.accumulate_db1);
  merge(g.db2, o_b2, out, g.accumulate_db2);
  if (norm) {
    merge(g.dgamma, o_gm, in, g.accumulate_dgamma);
    merge(g.dbeta, o_bt, in, g.accumulate_dbeta);
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
