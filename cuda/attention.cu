// Segment-recurrent attention on the GPU (go/cuda/kernels.hpp), the semantics of
// go::kernels::seg_attention_forward / _backward (go/kernels/attention.hpp): the same windows
// (own segment plus up to mem_len cached rows, causal or not), natural-log lse per (head, row),
// cached rows constant for the gradient.
//
// One warp per (row, head). The forward and dq walk the row's keys 32 at a time, a key per lane:
// each lane takes the dot product of the query (in registers) with its key row, the warp takes
// the block's max, and each lane rescales and accumulates its own keys' p * v in registers (the
// online softmax's rescale factor is the same for every lane); the lanes' partial sums are added
// once at the end. dk / dv walk, per key row, the queries of its own segment that see it, a query
// per lane, so no two warps write one row: no atomics, and the same bits on every run. Head dims
// up to 256 (registers per lane: the head dim, rounded up to 16, 32, 64, 128 or 256).
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "check.cuh"
#include "warp.cuh"
#include "go/core/error.hpp"
#include "go/cuda/device.hpp"
#include "go/cuda/kernels.hpp"
#include "go/kernels/attention.hpp"

namespace go::cuda {
namespace {

using i64 = std::int64_t;

using namespace detail;

struct Dims {
  i64 n, seg, mem, ld;  // ld: heads * head_dim
  int heads, hd;
  bool causal;
  float scale;
};

// Item w of the grid-stride loops over (row, head): its row, head, the head's first column, and
// the keys [lo, hi] the row sees as a query.
struct Item {
  i64 row;
  int head;
  i64 col, lo, hi;
};
__device__ __forceinline__ Item item(const Dims& g, i64 w) {
  Item t;
  t.row = w / g.heads;
  t.head = static_cast<int>(w % g.heads);
  t.col = static_cast<i64>(t.head) * g.hd;
  const i64 b = t.row / g.seg * g.seg;
  const i64 e = b + g.seg < g.n ? b + g.seg : g.n;
  t.lo = b - g.mem > 0 ? b - g.mem : 0;
  t.hi = g.causal ? t.row : e - 1;
  return t;
}
// This warp's first item and the loop's stride.
__device__ __forceinline__ i64 first_item() { return static_cast<i64>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp; }
__device__ __forceinline__ i64 item_stride() { return static_cast<i64>(gridDim.x) * kWarpsPerBlock; }

// Loads row[0, hd) * mul into r[0, D) (zeros past hd).
template <int D>
__device__ __forceinline__ void load_row(float (&r)[D], const float* __restrict__ row, int hd, float mul) {
#pragma unroll
  for (int d = 0; d < D; ++d) r[d] = d < hd ? row[d] * mul : 0.f;
}
template <int D>
__device__ __forceinline__ float dot(const float (&r)[D], const float* __restrict__ row, int hd) {
  float s = 0.f;
#pragma unroll
  for (int d = 0; d < D; ++d)
    if (d < hd) s = fmaf(r[d], row[d], s);
  return s;
}
// dst[d] = mul * (the warp's sum of acc[d]), written by lane d % 32.
template <int D>
__device__ __forceinline__ void store_sum(float* __restrict__ dst, const float (&acc)[D], int hd, float mul, int lane) {
#pragma unroll
  for (int d = 0; d < D; ++d) {
    if (d >= hd) break;  // hd is the same on every lane
    const float s = warp_sum(acc[d]);
    if (lane == d % kWarp) dst[d] = s * mul;
  }
}

template <int D>
__global__ void attn_fwd_kernel(Dims g, const float* __restrict__ q, const float* __restrict__ k,
                                const float* __restrict__ v, float* __restrict__ out, float* __restrict__ lse) {
  const int lane = threadIdx.x % kWarp;
  for (i64 w = first_item(); w < g.n * g.heads; w += item_stride()) {
    const auto [i, h, col, lo, hi] = item(g, w);
    float qr[D];
    load_row(qr, q + i * g.ld + col, g.hd, g.scale);
    float acc[D];
#pragma unroll
    for (int d = 0; d < D; ++d) acc[d] = 0.f;
    float m = -INFINITY, l = 0.f;  // l: this lane's share of the softmax's sum
    for (i64 j0 = lo; j0 <= hi; j0 += kWarp) {
      const i64 j = j0 + lane;
      const bool on = j <= hi;
      const float s = on ? dot(qr, k + j * g.ld + col, g.hd) : -INFINITY;
      const float mn = fmaxf(m, warp_max(s));  // finite: lane 0's key is in the window
      const float corr = expf(m - mn);       // 0 on the first block
      const float p = on ? expf(s - mn) : 0.f;
      l = l * corr + p;
      const float* vr = v + (on ? j : lo) * g.ld + col;  // p = 0 off the window
#pragma unroll
      for (int d = 0; d < D; ++d)
        if (d < g.hd) acc[d] = fmaf(p, vr[d], acc[d] * corr);
      m = mn;
    }
    const float sum = warp_sum(l);
    store_sum(out + i * g.ld + col, acc, g.hd, 1.f / sum, lane);
    if (lane == 0) lse[static_cast<i64>(h) * g.n + i] = m + logf(sum);
  }
}

// delta[h * n + i] = sum_d dout[i, h, d] * out[i, h, d] (the softmax backward's row term).
__global__ void attn_delta_kernel(Dims g, const float* __restrict__ out, const float* __restrict__ dout,
                                  float* __restrict__ delta) {
  const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 w = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; w < g.n * g.heads; w += stride) {
    const Item t = item(g, w);
    const float* o = out + t.row * g.ld + t.col;
    const float* dO = dout + t.row * g.ld + t.col;
    float s = 0.f;
    for (int d = 0; d < g.hd; ++d) s = fmaf(o[d], dO[d], s);
    delta[static_cast<i64>(t.head) * g.n + t.row] = s;
  }
}

// dq[i] = scale * sum_j p_ij (dout_i . v_j - delta_i) k_j over query i's window (cached keys too).
template <int D>
__global__ void attn_dq_kernel(Dims g, const float* __restrict__ q, const float* __restrict__ k,
                               const float* __restrict__ v, const float* __restrict__ lse,
                               const float* __restrict__ delta, const float* __restrict__ dout, float* __restrict__ dq) {
  const int lane = threadIdx.x % kWarp;
  for (i64 w = first_item(); w < g.n * g.heads; w += item_stride()) {
    const auto [i, h, col, lo, hi] = item(g, w);
    float qr[D], dor[D], acc[D];
    load_row(qr, q + i * g.ld + col, g.hd, g.scale);
    load_row(dor, dout + i * g.ld + col, g.hd, 1.f);
#pragma unroll
    for (int d = 0; d < D; ++d) acc[d] = 0.f;
    const float L = lse[static_cast<i64>(h) * g.n + i], dl = delta[static_cast<i64>(h) * g.n + i];
    for (i64 j = lo + lane; j <= hi; j += kWarp) {
      const float* kr = k + j * g.ld + col;
      const float p = expf(dot(qr, kr, g.hd) - L);
      const float ds = p * (dot(dor, v + j * g.ld + col, g.hd) - dl);
#pragma unroll
      for (int d = 0; d < D; ++d)
        if (d < g.hd) acc[d] = fmaf(ds, kr[d], acc[d]);
    }
    store_sum(dq + i * g.ld + col, acc, g.hd, g.scale, lane);
  }
}

// dk[j] = scale * sum_i ds_ij q_i and dv[j] = sum_i p_ij dout_i over the queries of j's own
// segment that see j (i >= j when causal).
template <int D>
__global__ void attn_dkv_kernel(Dims g, const float* __restrict__ q, const float* __restrict__ k,
                                const float* __restrict__ v, const float* __restrict__ lse,
                                const float* __restrict__ delta, const float* __restrict__ dout, float* __restrict__ dk,
                                float* __restrict__ dv) {
  const int lane = threadIdx.x % kWarp;
  for (i64 w = first_item(); w < g.n * g.heads; w += item_stride()) {
    const Item t = item(g, w);
    const i64 j = t.row, col = t.col;
    const int h = t.head;
    const i64 b = j / g.seg * g.seg;
    const i64 e = b + g.seg < g.n ? b + g.seg : g.n;
    float kr[D], vr[D], ak[D], av[D];
    load_row(kr, k + j * g.ld + col, g.hd, g.scale);
    load_row(vr, v + j * g.ld + col, g.hd, 1.f);
#pragma unroll
    for (int d = 0; d < D; ++d) ak[d] = av[d] = 0.f;
    for (i64 i = (g.causal ? j : b) + lane; i < e; i += kWarp) {
      const float* qi = q + i * g.ld + col;
      const float* di = dout + i * g.ld + col;
      const float p = expf(dot(kr, qi, g.hd) - lse[static_cast<i64>(h) * g.n + i]);
      const float ds = p * (dot(vr, di, g.hd) - delta[static_cast<i64>(h) * g.n + i]);
#pragma unroll
      for (int d = 0; d < D; ++d)
        if (d < g.hd) {
          ak[d] = fmaf(ds, qi[d], ak[d]);
          av[d] = fmaf(p, di[d], av[d]);
        }
    }
    store_sum(dk + j * g.ld + col, ak, g.hd, g.scale, lane);
    store_sum(dv + j * g.ld + col, av, g.hd, 1.f, lane);
  }
}

Dims dims_of(const kernels::SegAttention& p) {
  Dims g;
  g.scale = kernels::seg_attention_scale(p);
  GO_CHECK(p.head_dim <= 256, "go::cuda::seg_attention: head_dim = ", p.head_dim, " must be <= 256 on the GPU");
  g.n = p.n;
  g.seg = p.seg_len;
  g.mem = p.mem_len;
  g.heads = p.heads;
  g.hd = p.head_dim;
  g.ld = static_cast<i64>(p.heads) * p.head_dim;
  g.causal = p.causal;
  return g;
}


// Launches kernel<D> for the smallest D in {16, 32, 64, 128, 256} that holds the head dim.
#define GO_ATTN_LAUNCH(kernel, g, ...)                                                    \
  do {                                                                                    \
    const unsigned grid_ = grid_for((g).n * (g).heads, kWarpsPerBlock);                                                  \
    if ((g).hd <= 16) kernel<16><<<grid_, kBlock>>>((g), __VA_ARGS__);                    \
    else if ((g).hd <= 32) kernel<32><<<grid_, kBlock>>>((g), __VA_ARGS__);               \
    else if ((g).hd <= 64) kernel<64><<<grid_, kBlock>>>((g), __VA_ARGS__);               \
    else if ((g).hd <= 128) kernel<128><<<grid_, kBlock>>>((g), __VA_ARGS__);             \
    else kernel<256><<<grid_, kBlock>>>((g), __VA_ARGS__);                                \
    GO_CUDA_CHECK_LAUNCH();                                                               \
  } while (0)

}  // namespace

void seg_attention_forward(const kernels::SegAttention& p, const float* q, const float* k, const float* v, float* out,
                           float* lse) {
  const Dims g = dims_of(p);
  if (g.n == 0) return;
  GO_ATTN_LAUNCH(attn_fwd_kernel, g, q, k, v, out, lse);
}

void seg_attention_backward(const kernels::SegAttention& p, const float* q, const float* k, const float* v,
                            const float* out, const float* lse, const float* dout, float* dq, float* dk, float* dv) {
  const Dims g = dims_of(p);
  if (g.n == 0) return;
  const i64 rows = g.n * g.heads;
  // delta's heads * n floats: per-thread scratch, grown as needed (cudaFree waits for the kernels
  // that used the old one), as the CPU kernel keeps its scratch.
  thread_local DeviceBuffer scratch;
  const std::size_t bytes = static_cast<std::size_t>(rows) * sizeof(float);
  if (scratch.bytes() < bytes) scratch = DeviceBuffer(bytes);
  float* delta = scratch.as<float>();
  attn_delta_kernel<<<grid_for(rows, kBlock), kBlock>>>(g, out, dout, delta);
  GO_CUDA_CHECK_LAUNCH();
  GO_ATTN_LAUNCH(attn_dq_kernel, g, q, k, v, lse, delta, dout, dq);
  GO_ATTN_LAUNCH(attn_dkv_kernel, g, q, k, v, lse, delta, dout, dk, dv);
}

}  // namespace go::cuda
