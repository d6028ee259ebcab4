// CUDA kernels of the first backend increment (go/cuda/kernels.hpp): CSR aggregation, row-wise
// layer norm and softmax, elementwise activations, Adam, cuBLAS GEMM and a cuSPARSE SpMM
// reference. Tested and measured on an H100 (bench/README "CUDA backend"). Loading a row's edge
// indices once per 32 edges and broadcasting them with shuffles was 1.8x slower there than every
// lane loading the same entry; vectorized loads and several rows per warp for small d are not
// tried yet.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusparse.h>

#include <climits>
#include <cmath>
#include <cstdint>

#include "check.cuh"
#include "warp.cuh"
#include "go/core/error.hpp"
#include "go/cuda/device.hpp"
#include "go/cuda/kernels.hpp"
#include "go/kernels/math.hpp"

namespace go::cuda {
namespace {

using i32 = std::int32_t;
using i64 = std::int64_t;
using kernels::Reduce;
using kernels::Unary;
using namespace detail;  // warp.cuh

// Sum (or max) over the block's kBlock threads; every thread gets the result. sh: kWarp floats.
template <bool Max>
__device__ float block_reduce(float v, float* sh) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = Max ? warp_max(v) : warp_sum(v);
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < kWarpsPerBlock ? sh[lane] : (Max ? -INFINITY : 0.f);
    w = Max ? warp_max(w) : warp_sum(w);
    if (lane == 0) sh[kWarp - 1] = w;
  }
  __syncthreads();
  const float r = sh[kWarp - 1];
  __syncthreads();  // sh may be reused right after
  return r;
}

// ---- CSR aggregation -------------------------------------------------------------------
// One warp per row of the (forward or transposed) CSR, lanes over features: each lane keeps K
// accumulators (features f0, f0 + 32, ..., f0 = lane + 32 K c) in registers. Every lane loads the
// same col_idx entry (one broadcast transaction). With K = 1 a row's edges are read once per 32
// features; with K = reg_width(d) (d <= 256) once per edge, so each edge issues K independent
// feature loads: on the H100 that took sum, mean and max forward and sum backward 1.1-1.2x faster
// than K = 1 in the same run (bench/README "CUDA backend"). Max backward keeps K = 1 above d = 64,
// where 8 registers per lane were 1.22x slower, and mean backward (each edge loads the source's
// degree, then its row) keeps K = 1 at every d: K registers were 1-15% slower there. Every K gives
// the same bits: the per-feature order of each sum is the edge order, as on the CPU.
template <int K>
__global__ void agg_sum_kernel(const i64* __restrict__ rp, const i32* __restrict__ ci, i64 rows,
                               const float* __restrict__ x, i64 d, float* __restrict__ out,
                               const i64* __restrict__ scale_rp, bool scale_row) {
  const i64 warps = static_cast<i64>(gridDim.x) * kWarpsPerBlock;
  const int lane = threadIdx.x % kWarp;
  for (i64 r = static_cast<i64>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp; r < rows; r += warps) {
    const i64 eb = rp[r], ee = rp[r + 1];
    // mean forward: divide by this row's degree; mean backward (scale_rp): each edge carries
    // dout[i] / deg(i) with deg from the forward CSR.
    const float row_scale = scale_row ? 1.f / static_cast<float>(ee - eb > 1 ? ee - eb : 1) : 1.f;
    for (i64 f0 = lane; f0 < d; f0 += K * kWarp) {
      float acc[K];
#pragma unroll
      for (int k = 0; k < K; ++k) acc[k] = 0.f;
      for (i64 e = eb; e < ee; ++e) {
        const i32 j = ci[e];
        float deg = 1.f;
        if (scale_rp) {
          const i64 n = scale_rp[j + 1] - scale_rp[j];
          deg = static_cast<float>(n > 1 ? n : 1);
        }
        const float* xr = x + static_cast<i64>(j) * d;
#pragma unroll
        for (int k = 0; k < K; ++k) {
          const i64 f = f0 + k * kWarp;
          if (f < d) {
            float v = xr[f];
            if (scale_rp) v /= deg;
            acc[k] += v;
          }
        }
      }
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const i64 f = f0 + k * kWarp;
        if (f < d) out[r * d + f] = acc[k] * row_scale;
      }
    }
  }
}

template <int K>
__global__ void agg_max_fwd_kernel(const i64* __restrict__ rp, const i32* __restrict__ ci, i64 rows,
                                   const float* __restrict__ x, i64 d, float* __restrict__ out,
                                   i32* __restrict__ argmax) {
  const i64 warps = static_cast<i64>(gridDim.x) * kWarpsPerBlock;
  const int lane = threadIdx.x % kWarp;
  for (i64 r = static_cast<i64>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp; r < rows; r += warps) {
    const i64 eb = rp[r], ee = rp[r + 1];
    for (i64 f0 = lane; f0 < d; f0 += K * kWarp) {
      float m[K];
      i32 am[K];
#pragma unroll
      for (int k = 0; k < K; ++k) {
        m[k] = 0.f;
        am[k] = -1;
      }
      for (i64 e = eb; e < ee; ++e) {
        const i32 j = ci[e];
        const float* xr = x + static_cast<i64>(j) * d;
#pragma unroll
        for (int k = 0; k < K; ++k) {
          const i64 f = f0 + k * kWarp;
          if (f < d) {
            const float v = xr[f];
            if (e == eb || v > m[k]) {  // strict: ties keep the first edge, NaN never wins (as on the CPU)
              m[k] = v;
              am[k] = j;
            }
          }
        }
      }
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const i64 f = f0 + k * kWarp;
        if (f < d) {
          out[r * d + f] = m[k];
          argmax[r * d + f] = am[k];
        }
      }
    }
  }
}

template <int K>
__global__ void agg_max_bwd_kernel(const i64* __restrict__ trp, const i32* __restrict__ tci, i64 n_src,
                                   const float* __restrict__ dout, i64 d, const i32* __restrict__ argmax,
                                   float* __restrict__ dx) {
  const i64 warps = static_cast<i64>(gridDim.x) * kWarpsPerBlock;
  const int lane = threadIdx.x % kWarp;
  for (i64 j = static_cast<i64>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp; j < n_src; j += warps) {
    const i64 eb = trp[j], ee = trp[j + 1];
    const i32 jj = static_cast<i32>(j);
    for (i64 f0 = lane; f0 < d; f0 += K * kWarp) {
      float s[K];
#pragma unroll
      for (int k = 0; k < K; ++k) s[k] = 0.f;
      i32 prev = -1;
      for (i64 e = eb; e < ee; ++e) {
        const i32 i = tci[e];
        if (i == prev) continue;  // duplicate edge: the max took x[j] once
        prev = i;
#pragma unroll
        for (int k = 0; k < K; ++k) {
          const i64 f = f0 + k * kWarp;
          if (f < d) {
            const i64 at = static_cast<i64>(i) * d + f;
            if (argmax[at] == jj) s[k] += dout[at];
          }
        }
      }
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const i64 f = f0 + k * kWarp;
        if (f < d) dx[j * d + f] = s[k];
      }
    }
  }
}

// Registers per lane for d features: 1, 2, 4 or 8 up to d = 256, 1 for wider rows.
int reg_width(i64 d) {
  const i64 k = (d + kWarp - 1) / kWarp;
  return k <= 1 ? 1 : k <= 2 ? 2 : k <= 4 ? 4 : k <= 8 ? 8 : 1;
}

// Launches kernel<K> for K = reg_width(d).
#define GO_AGG_LAUNCH(kernel, grid, d, ...)                   \
  switch (reg_width(d)) {                                     \
    case 2: kernel<2><<<grid, kBlock>>>(__VA_ARGS__); break;  \
    case 4: kernel<4><<<grid, kBlock>>>(__VA_ARGS__); break;  \
    case 8: kernel<8><<<grid, kBlock>>>(__VA_ARGS__); break;  \
    default: kernel<1><<<grid, kBlock>>>(__VA_ARGS__); break; \
  }

// ---- elementwise -----------------------------------------------------------------------
__global__ void unary_fwd_kernel(Unary op, const float* __restrict__ x, float* __restrict__ y, i64 n) {
  const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = kernels::unary_f(op, x[i]);
}

__global__ void unary_bwd_kernel(Unary op, const float* __restrict__ x, const float* __restrict__ y,
                                 const float* __restrict__ dy, float* __restrict__ dx, i64 n, bool accumulate) {
  const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float g = dy[i] * kernels::unary_df(op, x[i], y[i]);
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

__global__ void adam_kernel(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ m,
                            float* __restrict__ v, i64 n, float lr, float b1, float b2, float eps, float wd, float bc1,
                            float bc2) {
  const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    kernels::adam_update(p[i], g[i], m[i], v[i], lr, b1, b2, eps, wd, bc1, bc2);
}

// ---- row-wise: one block per row -----------------------------------------------------------
__global__ void layer_norm_fwd_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                      const float* __restrict__ beta, float* __restrict__ y, float* __restrict__ mean,
                                      float* __restrict__ rstd, i64 rows, i64 cols, float eps) {
  __shared__ float sh[kWarp];
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float s = 0.f;
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
    s = block_reduce<false>(s, sh);
    const float mu = cols ? s / static_cast<float>(cols) : 0.f;
    float ss = 0.f;
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x) ss += (xr[c] - mu) * (xr[c] - mu);
    ss = block_reduce<false>(ss, sh);
    const float rs = 1.f / sqrtf((cols ? ss / static_cast<float>(cols) : 0.f) + eps);
    if (threadIdx.x == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x) {
      float v = (xr[c] - mu) * rs;
      if (gamma) v *= gamma[c];
      if (beta) v += beta[c];
      yr[c] = v;
    }
  }
}

__global__ void layer_norm_bwd_dx_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                         const float* __restrict__ mean, const float* __restrict__ rstd,
                                         const float* __restrict__ dy, float* __restrict__ dx, i64 rows, i64 cols) {
  __shared__ float sh[kWarp];
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    float* dxr = dx + r * cols;
    const float m = mean[r], rs = rstd[r];
    float sg = 0.f, sgx = 0.f;
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x) {
      const float g = dyr[c] * (gamma ? gamma[c] : 1.f);
      sg += g;
      sgx += g * (xr[c] - m) * rs;
    }
    sg = block_reduce<false>(sg, sh);
    sgx = block_reduce<false>(sgx, sh);
    const float mg = cols ? sg / static_cast<float>(cols) : 0.f;
    const float mgx = cols ? sgx / static_cast<float>(cols) : 0.f;
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x) {
      const float g = dyr[c] * (gamma ? gamma[c] : 1.f);
      const float xh = (xr[c] - m) * rs;
      dxr[c] = rs * (g - mg - xh * mgx);
    }
  }
}

// dgamma[c] += sum_r dy * xhat, dbeta[c] += sum_r dy: one thread per column, rows in order.
__global__ void layer_norm_bwd_params_kernel(const float* __restrict__ x, const float* __restrict__ mean,
                                             const float* __restrict__ rstd, const float* __restrict__ dy,
                                             float* __restrict__ dgamma, float* __restrict__ dbeta, i64 rows,
                                             i64 cols) {
  const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 c = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; c < cols; c += stride) {
    float sg = 0.f, sb = 0.f;
    for (i64 r = 0; r < rows; ++r) {
      const float g = dy[r * cols + c];
      sg += g * (x[r * cols + c] - mean[r]) * rstd[r];
      sb += g;
    }
    if (dgamma) dgamma[c] += sg;
    if (dbeta) dbeta[c] += sb;
  }
}

__global__ void softmax_fwd_kernel(const float* __restrict__ x, float* __restrict__ y, i64 rows, i64 cols, bool log) {
  __shared__ float sh[kWarp];
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float mx = -INFINITY;
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x) mx = fmaxf(mx, xr[c]);
    mx = block_reduce<true>(mx, sh);
    if (mx == -INFINITY) mx = 0.f;  // an all -inf row: no inf - inf
    float s = 0.f;
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x) s += kernels::exp_f(xr[c] - mx);
    s = block_reduce<false>(s, sh);
    if (log) {
      const float lse = mx + logf(s);
      for (i64 c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = xr[c] - lse;
    } else {
      const float inv = 1.f / s;
      for (i64 c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = kernels::exp_f(xr[c] - mx) * inv;
    }
  }
}

__global__ void softmax_bwd_kernel(const float* __restrict__ y, const float* __restrict__ dy, float* __restrict__ dx,
                                   i64 rows, i64 cols, bool log) {
  __shared__ float sh[kWarp];
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* yr = y + r * cols;
    const float* dyr = dy + r * cols;
    float* dxr = dx + r * cols;
    float s = 0.f;
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x) s += log ? dyr[c] : dyr[c] * yr[c];
    s = block_reduce<false>(s, sh);
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x)
      dxr[c] = log ? dyr[c] - kernels::exp_f(yr[c]) * s : yr[c] * (dyr[c] - s);
  }
}

// ---- library handles -----------------------------------------------------------------------
void check_cublas(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS) GO_FAIL(what, " failed: ", cublasGetStatusName(st), ": ", cublasGetStatusString(st));
}
void check_cusparse(cusparseStatus_t st, const char* what) {
  if (st != CUSPARSE_STATUS_SUCCESS)
    GO_FAIL(what, " failed: ", cusparseGetErrorName(st), ": ", cusparseGetErrorString(st));
}

// One cuBLAS handle per host thread, bound to the device current when it was made; kept for
// the thread's lifetime (destroying it at process exit can race the runtime's own teardown).
cublasHandle_t cublas_handle() {
  thread_local cublasHandle_t handle = nullptr;
  if (!handle) {
    check_cublas(cublasCreate(&handle), "cublasCreate");
    // Plain FP32: no TF32 tensor-core rounding, so results compare to the CPU at float precision.
    check_cublas(cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
  }
  return handle;
}

void check_int(i64 v, const char* name) {
  GO_CHECK(v >= 0 && v <= INT_MAX, "go::cuda: ", name, " = ", v, " is outside the 32-bit range the library call takes");
}

}  // namespace

// ---- entry points ------------------------------------------------------------------------------
void gemm(bool trans_a, bool trans_b, i64 m, i64 n, i64 k, float alpha, const float* a, i64 lda, const float* b,
          i64 ldb, float beta, float* c, i64 ldc) {
  if (m <= 0 || n <= 0) return;
  check_int(m, "m");
  check_int(n, "n");
  check_int(k, "k");
  check_int(lda, "lda");
  check_int(ldb, "ldb");
  check_int(ldc, "ldc");
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the row-major storage of
  // B read column-major is B^T, so op(B) needs no extra transpose flag, only the swap of A and B.
  const cublasOperation_t ob = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t oa = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_cublas(cublasSgemm(cublas_handle(), ob, oa, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
                           &alpha, b, static_cast<int>(ldb), a, static_cast<int>(lda), &beta, c, static_cast<int>(ldc)),
               "cublasSgemm");
}

void csr_aggregate_forward(Reduce reduce, const i64* row_ptr, const i32* col_idx, i64 n_dst, const float* x, i64 d,
                           float* out, i32* argmax) {
  if (n_dst <= 0 || d <= 0) return;
  const unsigned grid = grid_for(n_dst, kWarpsPerBlock);
  if (reduce == Reduce::max) {
    GO_CHECK(argmax, "go::cuda::csr_aggregate_forward: max needs an argmax buffer");
    GO_AGG_LAUNCH(agg_max_fwd_kernel, grid, d, row_ptr, col_idx, n_dst, x, d, out, argmax);
  } else {
    GO_AGG_LAUNCH(agg_sum_kernel, grid, d, row_ptr, col_idx, n_dst, x, d, out, nullptr,
                  reduce == Reduce::mean);
  }
  GO_CUDA_CHECK_LAUNCH();
}

void csr_aggregate_backward(Reduce reduce, const i64* row_ptr, const i64* t_row_ptr, const i32* t_col_idx, i64 n_src,
                            i64 n_dst, const float* dout, i64 d, const i32* argmax, float* dx) {
  if (n_src <= 0 || d <= 0) return;
  const unsigned grid = grid_for(n_src, kWarpsPerBlock);
  switch (reduce) {
    case Reduce::sum:
      GO_AGG_LAUNCH(agg_sum_kernel, grid, d, t_row_ptr, t_col_idx, n_src, dout, d, dx, nullptr, false);
      break;
    case Reduce::mean:
      GO_CHECK(row_ptr, "go::cuda::csr_aggregate_backward: mean needs the forward row_ptr");
      // K = 1: see the kernels' comment
      agg_sum_kernel<1><<<grid, kBlock>>>(t_row_ptr, t_col_idx, n_src, dout, d, dx, row_ptr, false);
      break;
    case Reduce::max:
      // With no destination rows there is no edge, and the argmax buffer may be empty (nullptr).
      GO_CHECK(argmax || n_dst == 0, "go::cuda::csr_aggregate_backward: max needs the forward argmax");
      if (d > kWarp && d <= 2 * kWarp)  // K = 2 at most: see the kernels' comment
        agg_max_bwd_kernel<2><<<grid, kBlock>>>(t_row_ptr, t_col_idx, n_src, dout, d, argmax, dx);
      else
        agg_max_bwd_kernel<1><<<grid, kBlock>>>(t_row_ptr, t_col_idx, n_src, dout, d, argmax, dx);
      break;
  }
  GO_CUDA_CHECK_LAUNCH();
}

void unary_forward(Unary op, const float* x, float* y, i64 n) {
  if (n <= 0) return;
  unary_fwd_kernel<<<grid_for(n, kBlock), kBlock>>>(op, x, y, n);
  GO_CUDA_CHECK_LAUNCH();
}

void unary_backward(Unary op, const float* x, const float* y, const float* dy, float* dx, i64 n, bool accumulate) {
  if (n <= 0) return;
  unary_bwd_kernel<<<grid_for(n, kBlock), kBlock>>>(op, x, y, dy, dx, n, accumulate);
  GO_CUDA_CHECK_LAUNCH();
}

void layer_norm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                        i64 rows, i64 cols, float eps) {
  if (rows <= 0) return;
  layer_norm_fwd_kernel<<<grid_for(rows, 1), kBlock>>>(x, gamma, beta, y, mean, rstd, rows, cols, eps);
  GO_CUDA_CHECK_LAUNCH();
}

void layer_norm_backward(const float* x, const float* gamma, const float* mean, const float* rstd, const float* dy,
                         float* dx, float* dgamma, float* dbeta, i64 rows, i64 cols) {
  if (rows <= 0 || cols <= 0) return;
  layer_norm_bwd_dx_kernel<<<grid_for(rows, 1), kBlock>>>(x, gamma, mean, rstd, dy, dx, rows, cols);
  GO_CUDA_CHECK_LAUNCH();
  if (dgamma || dbeta) {
    layer_norm_bwd_params_kernel<<<grid_for(cols, kBlock), kBlock>>>(x, mean, rstd, dy, dgamma, dbeta, rows, cols);
    GO_CUDA_CHECK_LAUNCH();
  }
}

void softmax_forward(const float* x, float* y, i64 rows, i64 cols, bool log) {
  if (rows <= 0 || cols <= 0) return;
  softmax_fwd_kernel<<<grid_for(rows, 1), kBlock>>>(x, y, rows, cols, log);
  GO_CUDA_CHECK_LAUNCH();
}

void softmax_backward(const float* y, const float* dy, float* dx, i64 rows, i64 cols, bool log) {
  if (rows <= 0 || cols <= 0) return;
  softmax_bwd_kernel<<<grid_for(rows, 1), kBlock>>>(y, dy, dx, rows, cols, log);
  GO_CUDA_CHECK_LAUNCH();
}

void adam_step(float* param, const float* grad, float* m, float* v, i64 n, float lr, float beta1, float beta2,
               float eps, float weight_decay, float bc1, float bc2) {
  if (n <= 0) return;
  adam_kernel<<<grid_for(n, kBlock), kBlock>>>(param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, bc1, bc2);
  GO_CUDA_CHECK_LAUNCH();
}

// ---- cuSPARSE reference ----------------------------------------------------------------------------
struct CsrSpmm::Impl {
  cusparseHandle_t handle = nullptr;
  cusparseSpMatDescr_t mat = nullptr;
  cusparseDnMatDescr_t x = nullptr;
  cusparseDnMatDescr_t out = nullptr;
  DeviceBuffer workspace;
  ~Impl() {
    if (out) cusparseDestroyDnMat(out);
    if (x) cusparseDestroyDnMat(x);
    if (mat) cusparseDestroySpMat(mat);
    if (handle) cusparseDestroy(handle);
  }
};

CsrSpmm::CsrSpmm(const i32* row_ptr, const i32* col_idx, const float* values, i64 n_dst, i64 n_src, i64 nnz,
                 const float* x, i64 d, float* out)
    : impl_(std::make_unique<Impl>()) {
  check_int(nnz, "nnz");
  Impl& s = *impl_;
  check_cusparse(cusparseCreate(&s.handle), "cusparseCreate");
  check_cusparse(cusparseCreateCsr(&s.mat, n_dst, n_src, nnz, const_cast<i32*>(row_ptr), const_cast<i32*>(col_idx),
                                   const_cast<float*>(values), CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                   CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F),
                 "cusparseCreateCsr");
  check_cusparse(cusparseCreateDnMat(&s.x, n_src, d, d, const_cast<float*>(x), CUDA_R_32F, CUSPARSE_ORDER_ROW),
                 "cusparseCreateDnMat(x)");
  check_cusparse(cusparseCreateDnMat(&s.out, n_dst, d, d, out, CUDA_R_32F, CUSPARSE_ORDER_ROW),
                 "cusparseCreateDnMat(out)");
  const float alpha = 1.f, beta = 0.f;
  std::size_t bytes = 0;
  check_cusparse(cusparseSpMM_bufferSize(s.handle, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                         &alpha, s.mat, s.x, &beta, s.out, CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT,
                                         &bytes),
                 "cusparseSpMM_bufferSize");
  s.workspace = DeviceBuffer(bytes);
}

CsrSpmm::~CsrSpmm() = default;

void CsrSpmm::run() {
  Impl& s = *impl_;
  const float alpha = 1.f, beta = 0.f;
  check_cusparse(cusparseSpMM(s.handle, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha,
                              s.mat, s.x, &beta, s.out, CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT, s.workspace.get()),
                 "cusparseSpMM");
}

}  // namespace go::cuda
