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
// per lane, so no two warps write one row: no atomics, and the same bits on every run. All three
// are tiled: a block's 8 warps take 8 consecutive rows of a head and share each tile of 32 rows
// they read (keys and values, or queries and dout) in shared memory, 4.5-5.6x faster than every
// warp reading its rows from L2 (H100, bench/README "CUDA backend"). Head dims up to 256
// (registers per lane: the head dim, rounded up to 16, 32, 64, 128 or 256).
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

// The tiled kernels: a block takes kWarpsPerBlock consecutive rows of one head (a warp per row)
// and walks the union of their windows in tiles of 32 key rows, loaded once into shared memory for
// all its warps (rows of D + 1 floats: lane r reads row r without bank conflicts); each warp uses
// the keys of its own window.
struct Tile {
  Item row;         // this warp's row (the block's last row for a warp past the end)
  bool on;          // whether the warp has a row
  i64 lo, hi;       // the keys of the block's rows: [lo, hi]
};
__device__ __forceinline__ Tile tile_of(const Dims& g, i64 block_item) {
  const int h = static_cast<int>(block_item % g.heads);
  const i64 r0 = block_item / g.heads * kWarpsPerBlock;
  const i64 last = (r0 + kWarpsPerBlock < g.n ? r0 + kWarpsPerBlock : g.n) - 1;
  const i64 i = r0 + threadIdx.x / kWarp;
  Tile t;
  t.on = i < g.n;
  t.row = item(g, (t.on ? i : last) * g.heads + h);
  t.lo = item(g, r0 * g.heads + h).lo;  // windows only move forward with the row
  t.hi = item(g, last * g.heads + h).hi;
  return t;
}
__device__ __forceinline__ i64 tile_items(const Dims& g) { return (g.n + kWarpsPerBlock - 1) / kWarpsPerBlock * g.heads; }

// Loads key rows [j0, j0 + 32) of a and b (head columns from col; zeros past hi) into sa, sb.
template <int D>
__device__ __forceinline__ void load_tile(const Dims& g, i64 j0, i64 hi, i64 col, const float* __restrict__ a,
                                          const float* __restrict__ b, float* sa, float* sb) {
  for (int x = threadIdx.x; x < kWarp * g.hd; x += kBlock) {
    const int r = x / g.hd, c = x % g.hd;
    const i64 j = j0 + r;
    sa[r * (D + 1) + c] = j <= hi ? a[j * g.ld + col + c] : 0.f;
    sb[r * (D + 1) + c] = j <= hi ? b[j * g.ld + col + c] : 0.f;
  }
}

template <int D>
__global__ void attn_fwd_kernel(Dims g, const float* __restrict__ q, const float* __restrict__ k,
                                const float* __restrict__ v, float* __restrict__ out, float* __restrict__ lse) {
  extern __shared__ float smem[];
  float* ks = smem;
  float* vs = smem + kWarp * (D + 1);
  const int lane = threadIdx.x % kWarp;
  for (i64 bi = blockIdx.x; bi < tile_items(g); bi += gridDim.x) {
    const Tile t = tile_of(g, bi);
    const auto [i, h, col, lo, hi] = t.row;
    float qr[D];
    load_row(qr, q + i * g.ld + col, g.hd, g.scale);
    float acc[D];
#pragma unroll
    for (int d = 0; d < D; ++d) acc[d] = 0.f;
    float m = -INFINITY, l = 0.f;  // l: this lane's share of the softmax's sum
    for (i64 j0 = t.lo; j0 <= t.hi; j0 += kWarp) {
      __syncthreads();  // every warp is done with the previous tile
      load_tile<D>(g, j0, t.hi, col, k, v, ks, vs);
      __syncthreads();
      const i64 j = j0 + lane;
      const bool on = t.on && j >= lo && j <= hi;
      if (!__any_sync(0xffffffffu, on)) continue;  // the tile is outside this warp's window
      const float* kr = ks + lane * (D + 1);
      const float s = on ? dot(qr, kr, g.hd) : -INFINITY;
      const float mn = fmaxf(m, warp_max(s));  // finite: some lane is on
      const float corr = expf(m - mn);         // 0 on the warp's first tile
      const float p = on ? expf(s - mn) : 0.f;
      l = l * corr + p;
      const float* vr = vs + lane * (D + 1);  // zeros or a key off the window: p = 0
#pragma unroll
      for (int d = 0; d < D; ++d)
        if (d < g.hd) acc[d] = fmaf(p, vr[d], acc[d] * corr);
      m = mn;
    }
    if (!t.on) continue;
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
  extern __shared__ float smem[];
  float* ks = smem;
  float* vs = smem + kWarp * (D + 1);
  const int lane = threadIdx.x % kWarp;
  for (i64 bi = blockIdx.x; bi < tile_items(g); bi += gridDim.x) {
    const Tile t = tile_of(g, bi);
    const auto [i, h, col, lo, hi] = t.row;
    float qr[D], dor[D], acc[D];
    load_row(qr, q + i * g.ld + col, g.hd, g.scale);
    load_row(dor, dout + i * g.ld + col, g.hd, 1.f);
#pragma unroll
    for (int d = 0; d < D; ++d) acc[d] = 0.f;
    const float L = lse[static_cast<i64>(h) * g.n + i], dl = delta[static_cast<i64>(h) * g.n + i];
    for (i64 j0 = t.lo; j0 <= t.hi; j0 += kWarp) {
      __syncthreads();
      load_tile<D>(g, j0, t.hi, col, k, v, ks, vs);
      __syncthreads();
      const i64 j = j0 + lane;
      if (!t.on || j < lo || j > hi) continue;
      const float* kr = ks + lane * (D + 1);
      const float p = expf(dot(qr, kr, g.hd) - L);
      const float ds = p * (dot(dor, vs + lane * (D + 1), g.hd) - dl);
#pragma unroll
      for (int d = 0; d < D; ++d)
        if (d < g.hd) acc[d] = fmaf(ds, kr[d], acc[d]);
    }
    if (t.on) store_sum(dq + i * g.ld + col, acc, g.hd, g.scale, lane);
  }
}

// dk[j] = scale * sum_i ds_ij q_i and dv[j] = sum_i p_ij dout_i over the queries of j's own
// segment that see j (i >= j when causal). Tiled like the forward, over query rows: a block takes
// 8 consecutive key rows of a head, and each tile holds 32 query rows of q and dout, their lse and
// delta.
template <int D>
__global__ void attn_dkv_kernel(Dims g, const float* __restrict__ q, const float* __restrict__ k,
                                const float* __restrict__ v, const float* __restrict__ lse,
                                const float* __restrict__ delta, const float* __restrict__ dout, float* __restrict__ dk,
                                float* __restrict__ dv) {
  extern __shared__ float smem[];
  float* qs = smem;
  float* ds_ = smem + kWarp * (D + 1);
  float* ls = smem + 2 * kWarp * (D + 1);  // lse, then delta, of the tile's 32 rows
  const int lane = threadIdx.x % kWarp;
  auto seg_end = [&](i64 r) { return r / g.seg * g.seg + g.seg < g.n ? r / g.seg * g.seg + g.seg : g.n; };
  for (i64 bi = blockIdx.x; bi < tile_items(g); bi += gridDim.x) {
    const Tile t = tile_of(g, bi);
    const i64 j = t.row.row, col = t.row.col;
    const int h = t.row.head;
    const i64 first = bi / g.heads * kWarpsPerBlock;
    // the queries that see the block's keys: from its first row's (causal) or segment start to its
    // last row's segment end
    const i64 r_last = (first + kWarpsPerBlock < g.n ? first + kWarpsPerBlock : g.n) - 1;
    const i64 qlo = g.causal ? first : first / g.seg * g.seg, qhi = seg_end(r_last) - 1;
    const i64 start = g.causal ? j : j / g.seg * g.seg, end = seg_end(j);  // this warp's queries: [start, end)
    float kr[D], vr[D], ak[D], av[D];
    load_row(kr, k + j * g.ld + col, g.hd, g.scale);
    load_row(vr, v + j * g.ld + col, g.hd, 1.f);
#pragma unroll
    for (int d = 0; d < D; ++d) ak[d] = av[d] = 0.f;
    for (i64 i0 = qlo; i0 <= qhi; i0 += kWarp) {
      __syncthreads();
      load_tile<D>(g, i0, qhi, col, q, dout, qs, ds_);
      if (threadIdx.x < kWarp) {
        const i64 i = i0 + threadIdx.x;
        ls[threadIdx.x] = i <= qhi ? lse[static_cast<i64>(h) * g.n + i] : 0.f;
        ls[kWarp + threadIdx.x] = i <= qhi ? delta[static_cast<i64>(h) * g.n + i] : 0.f;
      }
      __syncthreads();
      const i64 i = i0 + lane;
      if (!t.on || i < start || i >= end) continue;
      const float* qi = qs + lane * (D + 1);
      const float* di = ds_ + lane * (D + 1);
      const float p = expf(dot(kr, qi, g.hd) - ls[lane]);
      const float dsv = p * (dot(vr, di, g.hd) - ls[kWarp + lane]);
#pragma unroll
      for (int d = 0; d < D; ++d)
        if (d < g.hd) {
          ak[d] = fmaf(dsv, qi[d], ak[d]);
          av[d] = fmaf(p, di[d], av[d]);
        }
    }
    if (!t.on) continue;
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


// Launches a tiled kernel<D>: a block per kWarpsPerBlock rows of a head, two tiles of 32 rows of
// D + 1 floats and 64 floats more (dk/dv's lse and delta) in dynamic shared memory (66 KB at
// D = 256, above the default 48 KB).
template <int D, class Kernel, class... Args>
void launch_tiled(Kernel kernel, const Dims& g, Args... args) {
  constexpr int bytes = (2 * kWarp * (D + 1) + 2 * kWarp) * static_cast<int>(sizeof(float));
  if constexpr (bytes > 48 * 1024)
    GO_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  const i64 blocks = (g.n + kWarpsPerBlock - 1) / kWarpsPerBlock * g.heads;
  kernel<<<grid_for(blocks, 1), kBlock, bytes>>>(g, args...);
  GO_CUDA_CHECK_LAUNCH();
}
// For the smallest D in {16, 32, 64, 128, 256} that holds the head dim.
#define GO_ATTN_TILED(kernel, g, ...)                                       \
  do {                                                                      \
    if ((g).hd <= 16) launch_tiled<16>(kernel<16>, (g), __VA_ARGS__);       \
    else if ((g).hd <= 32) launch_tiled<32>(kernel<32>, (g), __VA_ARGS__);  \
    else if ((g).hd <= 64) launch_tiled<64>(kernel<64>, (g), __VA_ARGS__);  \
    else if ((g).hd <= 128) launch_tiled<128>(kernel<128>, (g), __VA_ARGS__); \
    else launch_tiled<256>(kernel<256>, (g), __VA_ARGS__);                  \
  } while (0)

}  // namespace

void seg_attention_forward(const kernels::SegAttention& p, const float* q, const float* k, const float* v, float* out,
                           float* lse) {
  const Dims g = dims_of(p);
  if (g.n == 0) return;
  GO_ATTN_TILED(attn_fwd_kernel, g, q, k, v, out, lse);
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
  GO_ATTN_TILED(attn_dq_kernel, g, q, k, v, lse, delta, dout, dq);
  GO_ATTN_TILED(attn_dkv_kernel, g, q, k, v, lse, delta, dout, dk, dv);
}

}  // namespace go::cuda
