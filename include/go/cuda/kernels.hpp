#pragma once
// CUDA counterparts of the CPU kernels in go/kernels/, on device pointers (first increment of
// the CUDA backend: raw entry points, not yet wired into the autograd).
//
// Each function has the signature and the semantics of the CPU kernel of the same name (read
// the comments there): same layouts, same conventions for zero-degree rows (0, argmax -1), same
// overwrite / accumulate rules. All pointers are device pointers (go/cuda/device.hpp); the
// scalar sizes are host values. Kernels run on the default stream and return without waiting:
// call go::cuda::synchronize() before reading results on the host (copy_to_host also waits).
// Per-element math is the GO_HOST_DEVICE code of go/kernels/math.hpp, shared with the CPU.
//
// Compiles without CUDA: in such builds every function throws go::Error (kernels/cuda_nocuda.cpp).
#include <cstdint>
#include <memory>

#include "go/kernels/aggregate.hpp"
#include "go/kernels/attention.hpp"
#include "go/kernels/math.hpp"

namespace go::cuda {

// ---- dense products (cuBLAS) ----------------------------------------------------------
// C[m x n] = alpha * op(A) * op(B) + beta * C, row-major with row strides lda/ldb/ldc, exactly
// as go::kernels::gemm (go/kernels/gemm.hpp). FP32 math (no TF32): results match the CPU to
// float rounding. Uses a per-thread cuBLAS handle created on first use.
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc);

// ---- CSR aggregation (go/kernels/aggregate.hpp) ---------------------------------------
// One warp per output row, lanes over the features; no atomics (the backward walks the
// transposed CSR), so results are deterministic. Sum order per feature is the edge order,
// as on the CPU.
void csr_aggregate_forward(kernels::Reduce reduce, const std::int64_t* row_ptr, const std::int32_t* col_idx,
                           std::int64_t n_dst, const float* x, std::int64_t d, float* out, std::int32_t* argmax);
void csr_aggregate_backward(kernels::Reduce reduce, const std::int64_t* row_ptr, const std::int64_t* t_row_ptr,
                            const std::int32_t* t_col_idx, std::int64_t n_src, std::int64_t n_dst,
                            const float* dout, std::int64_t d, const std::int32_t* argmax, float* dx);

// ---- elementwise and row-wise (go/kernels/rowwise.hpp) --------------------------------
// Any Unary op; relu, gelu, tanh and sigmoid are the ones the policy uses.
void unary_forward(kernels::Unary op, const float* x, float* y, std::int64_t n);
void unary_backward(kernels::Unary op, const float* x, const float* y, const float* dy, float* dx, std::int64_t n,
                    bool accumulate);

// One block per row; the column sums of the backward (dgamma, dbeta, accumulated into) run in
// a second kernel, one thread per column, in row order (deterministic).
void layer_norm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                        std::int64_t rows, std::int64_t cols, float eps);
void layer_norm_backward(const float* x, const float* gamma, const float* mean, const float* rstd, const float* dy,
                         float* dx, float* dgamma, float* dbeta, std::int64_t rows, std::int64_t cols);

void softmax_forward(const float* x, float* y, std::int64_t rows, std::int64_t cols, bool log);
void softmax_backward(const float* y, const float* dy, float* dx, std::int64_t rows, std::int64_t cols, bool log);

void adam_step(float* param, const float* grad, float* m, float* v, std::int64_t n, float lr, float beta1,
               float beta2, float eps, float weight_decay, float bc1, float bc2);

// ---- segment-recurrent attention (go/kernels/attention.hpp) ----------------------------
// The CPU kernel's windows, causal mask, scale, lse layout ([heads, n], natural log) and
// gradient rule (cached rows are constants); head_dim <= 256. One warp per (row, head), the
// softmax online over tiles of 32 keys that a block's 8 rows share in shared memory; the backward
// recomputes the probabilities from lse and writes dk / dv per key row (no atomics: the same bits
// on every run). Exponentials are CUDA's
// expf, the CPU's a base-2 polynomial: results agree to float rounding, not bit for bit.
void seg_attention_forward(const kernels::SegAttention& p, const float* q, const float* k, const float* v, float* out,
                           float* lse);
void seg_attention_backward(const kernels::SegAttention& p, const float* q, const float* k, const float* v,
                            const float* out, const float* lse, const float* dout, float* dq, float* dk, float* dv);

// ---- reference: cuSPARSE SpMM on the same CSR (benchmarks, tests) --------------------
// out[n_dst x d] = A * x[n_src x d] (row-major), A the n_dst x n_src CSR matrix with values
// `values` (nnz floats; all ones gives the sum aggregation). cuSPARSE's generic SpMM wants
// 32-bit row offsets with 32-bit column indices, so row_ptr is int32 here. The descriptors and
// the workspace are made once by the constructor; run() only launches the product.
class CsrSpmm {
 public:
  CsrSpmm(const std::int32_t* row_ptr, const std::int32_t* col_idx, const float* values, std::int64_t n_dst,
          std::int64_t n_src, std::int64_t nnz, const float* x, std::int64_t d, float* out);
  ~CsrSpmm();
  CsrSpmm(const CsrSpmm&) = delete;
  CsrSpmm& operator=(const CsrSpmm&) = delete;
  void run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace go::cuda
