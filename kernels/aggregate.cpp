// Sparse neighbour aggregation over CSR (see go/kernels/aggregate.hpp).
//
// The work is bandwidth-bound: every edge reads one d-float row of x (forward) or
// of dout (backward), at a random address. What the kernel does about it:
//  * each output row is accumulated in registers, up to 256 columns (16 zmm) for
//    sum/mean and 128 columns (8 value + 8 index zmm) for max, and written once;
//    wider rows are processed in column chunks (the index list is re-read, the
//    feature rows are not);
//  * a row tail (d not a multiple of 16) is handled with masked loads and stores,
//    so any d works without touching memory past the row;
//  * the feature rows of the edge kPrefetch positions ahead (crossing row
//    boundaries) are software-prefetched, since random gathers defeat the hardware
//    prefetcher (2x on DRAM-bound graphs);
//  * a large argmax (max forward) is written with non-temporal stores;
//  * rows are cut into contiguous chunks of equal weight (edges + rows, found by
//    binary search on row_ptr, no allocation) that threads take dynamically, which
//    balances skewed degree distributions down to the granularity of one row (a
//    single hub row holding more than 1/threads of the edges still runs on one thread);
//  * the backward pass walks the transposed CSR, so each dx row belongs to one thread
//    (no atomics). For max, a transposed row must list a destination's duplicates
//    adjacently (Csr::transpose sorts them): the gradient goes once per
//    (destination, source) pair, to the argmax source, as the derivative of a max
//    over repeated copies of the same value.
// Without AVX-512 (GO_NATIVE=OFF, or an older CPU) a portable loop version runs; the
// same tests pass on both (build with -DGO_NATIVE=OFF to check it).
#include "go/kernels/aggregate.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

#include "avx512.hpp"

namespace go::kernels {
namespace {

using i64 = std::int64_t;
using i32 = std::int32_t;

// Below this many floats moved in total a call runs on the calling thread.
constexpr i64 kParallelMinFloats = 1 << 15;
// Minimum weight (edges + rows) of one scheduling chunk, and chunks per thread.
constexpr i64 kMinChunkWeight = 64;
constexpr i64 kChunksPerThread = 16;

// Smallest i in [0, n] with row_ptr[i] + i >= w (the weight before row i).
inline i64 row_at_weight(const i64* row_ptr, i64 n, i64 w) {
  i64 lo = 0, hi = n;
  while (lo < hi) {
    const i64 mid = lo + (hi - lo) / 2;
    if (row_ptr[mid] + mid < w) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// Calls body(lo, hi) on contiguous row ranges covering [0, n_rows), in parallel
// when the work is large enough.
template <class Body>
void for_row_ranges(const i64* row_ptr, i64 n_rows, i64 d, Body&& body) {
  if (n_rows <= 0) return;
  const i64 total = row_ptr[n_rows] + n_rows;  // weight: one per edge and one per row
  const int threads = omp_get_max_threads();
  if (threads <= 1 || total * d < kParallelMinFloats || omp_in_parallel()) {
    body(i64{0}, n_rows);
    return;
  }
  const i64 chunks = std::clamp<i64>(total / kMinChunkWeight, threads, threads * kChunksPerThread);
#pragma omp parallel for schedule(dynamic, 1)
  for (i64 c = 0; c < chunks; ++c) {
    const i64 lo = row_at_weight(row_ptr, n_rows, total * c / chunks);
    const i64 hi = row_at_weight(row_ptr, n_rows, total * (c + 1) / chunks);
    if (lo < hi) body(lo, hi);
  }
}

#if defined(__AVX512F__)

constexpr int kLanes = 16;
constexpr int kSumVecs = 16;  // 256 columns per pass for sum / mean
constexpr int kMaxVecs = 8;   // 128 columns per pass for max (values + indices in registers)
// The max forward writes argmax with non-temporal stores above this size: it is read
// only by the backward pass, and a write-allocate would double its traffic.
constexpr i64 kStreamMinBytes = i64{8} << 20;

enum class Scale { none, row, edge };  // sum; mean forward (1/deg of the row); mean backward (1/deg of each edge's row)

inline __mmask16 tail_mask(i64 lanes) { return static_cast<__mmask16>((1u << lanes) - 1u); }

// How many edges ahead the feature rows are prefetched, for NV cache lines per row:
// about 16 KiB ahead, 8 to 32 edges (tuned on a Zen 5 VM: without prefetch the
// DRAM-bound gathers ran at half the bandwidth; 4 edges ahead was too close for d = 64).
template <int NV>
constexpr i64 prefetch_distance() {
  return std::clamp<i64>(16384 / (NV * 64), 8, 32);
}

template <int NV>
inline void prefetch_row(const float* p) {
#pragma GCC unroll 16
  for (int v = 0; v < NV; ++v) _mm_prefetch(reinterpret_cast<const char*>(p + v * kLanes), _MM_HINT_T0);
}

struct SumArgs {
  const i64* row_ptr;    // the CSR walked
  const i32* col;        // its column indices
  const float* src;      // [*, d] rows gathered
  float* out;            // [n_rows, d]
  i64 d;
  const i64* deg_ptr;    // Scale::edge: row_ptr of the CSR whose degrees scale each edge
};

// Columns [c0, c0 + 16 NV) of row `row` (the last vector masked by `tail`).
// Edges [eb, ee); prefetch runs up to edge pf_end.
template <int NV, Scale S>
inline void sum_cols(const SumArgs& a, i64 row, i64 eb, i64 ee, i64 pf_end, i64 c0, __mmask16 tail) {
  constexpr i64 kPrefetch = prefetch_distance<NV>();
  const i64 d = a.d;
  __m512 acc[NV];
#pragma GCC unroll 16
  for (int v = 0; v < NV; ++v) acc[v] = _mm512_setzero_ps();
  for (i64 e = eb; e < ee; ++e) {
    if (e + kPrefetch < pf_end) prefetch_row<NV>(a.src + static_cast<i64>(a.col[e + kPrefetch]) * d + c0);
    const i64 j = a.col[e];
    const float* s = a.src + j * d + c0;
    if constexpr (S == Scale::edge) {
      const i64 deg = a.deg_ptr[j + 1] - a.deg_ptr[j];
      const __m512 w = _mm512_set1_ps(1.f / static_cast<float>(deg > 0 ? deg : 1));
#pragma GCC unroll 16
      for (int v = 0; v < NV - 1; ++v) acc[v] = _mm512_fmadd_ps(_mm512_loadu_ps(s + v * kLanes), w, acc[v]);
      acc[NV - 1] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, s + (NV - 1) * kLanes), w, acc[NV - 1]);
    } else {
#pragma GCC unroll 16
      for (int v = 0; v < NV - 1; ++v) acc[v] = _mm512_add_ps(acc[v], _mm512_loadu_ps(s + v * kLanes));
      acc[NV - 1] = _mm512_add_ps(acc[NV - 1], _mm512_maskz_loadu_ps(tail, s + (NV - 1) * kLanes));
    }
  }
  if constexpr (S == Scale::row) {
    const i64 deg = ee - eb;
    const __m512 w = _mm512_set1_ps(1.f / static_cast<float>(deg > 0 ? deg : 1));
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) acc[v] = _mm512_mul_ps(acc[v], w);
  }
  float* o = a.out + row * d + c0;
#pragma GCC unroll 16
  for (int v = 0; v < NV - 1; ++v) _mm512_storeu_ps(o + v * kLanes, acc[v]);
  _mm512_mask_storeu_ps(o + (NV - 1) * kLanes, tail, acc[NV - 1]);
}

// Rows [lo, hi): full 256-column chunks, then a last chunk of NVL vectors.
template <int NVL, Scale S>
void sum_range(const SumArgs& a, i64 lo, i64 hi) {
  constexpr i64 kChunk = kSumVecs * kLanes;
  const i64 full = (a.d - 1) / kChunk;
  const i64 c_last = full * kChunk;
  const __mmask16 tail = tail_mask(a.d - c_last - (NVL - 1) * kLanes);
  const i64 pf_end = a.row_ptr[hi];
  for (i64 r = lo; r < hi; ++r) {
    const i64 eb = a.row_ptr[r], ee = a.row_ptr[r + 1];
    for (i64 k = 0; k < full; ++k) sum_cols<kSumVecs, S>(a, r, eb, ee, pf_end, k * kChunk, tail_mask(kLanes));
    sum_cols<NVL, S>(a, r, eb, ee, pf_end, c_last, tail);
  }
}

using SumRangeFn = void (*)(const SumArgs&, i64, i64);
template <Scale S, std::size_t... I>
constexpr std::array<SumRangeFn, sizeof...(I)> sum_table(std::index_sequence<I...>) {
  return {&sum_range<static_cast<int>(I) + 1, S>...};
}

template <Scale S>
void sum_all(const SumArgs& a, i64 n_rows) {
  static constexpr auto table = sum_table<S>(std::make_index_sequence<kSumVecs>{});
  constexpr i64 kChunk = kSumVecs * kLanes;
  const i64 rem = a.d - (a.d - 1) / kChunk * kChunk;  // columns of the last chunk, 1..256
  const SumRangeFn fn = table[(rem + kLanes - 1) / kLanes - 1];
  for_row_ranges(a.row_ptr, n_rows, a.d, [&](i64 lo, i64 hi) { fn(a, lo, hi); });
}

struct MaxFwdArgs {
  const i64* row_ptr;
  const i32* col;
  const float* x;
  float* out;
  i32* argmax;
  i64 d;
  bool stream;  // argmax rows are whole aligned vectors and large: write them with non-temporal stores
};

template <int NV>
inline void max_cols(const MaxFwdArgs& a, i64 row, i64 eb, i64 ee, i64 pf_end, i64 c0, __mmask16 tail) {
  constexpr i64 kPrefetch = prefetch_distance<NV>();
  const i64 d = a.d;
  float* o = a.out + row * d + c0;
  i32* am = a.argmax + row * d + c0;
  if (eb == ee) {  // no neighbours: 0, argmax -1
#pragma GCC unroll 8
    for (int v = 0; v < NV - 1; ++v) {
      _mm512_storeu_ps(o + v * kLanes, _mm512_setzero_ps());
      _mm512_storeu_si512(am + v * kLanes, _mm512_set1_epi32(-1));
    }
    _mm512_mask_storeu_ps(o + (NV - 1) * kLanes, tail, _mm512_setzero_ps());
    _mm512_mask_storeu_epi32(am + (NV - 1) * kLanes, tail, _mm512_set1_epi32(-1));
    return;
  }
  __m512 best[NV];
  __m512i arg[NV];
  {
    const i32 j = a.col[eb];
    const float* s = a.x + static_cast<i64>(j) * d + c0;
    const __m512i jv = _mm512_set1_epi32(j);
#pragma GCC unroll 8
    for (int v = 0; v < NV - 1; ++v) {
      best[v] = _mm512_loadu_ps(s + v * kLanes);
      arg[v] = jv;
    }
    best[NV - 1] = _mm512_maskz_loadu_ps(tail, s + (NV - 1) * kLanes);
    arg[NV - 1] = jv;
  }
  for (i64 e = eb + 1; e < ee; ++e) {
    if (e + kPrefetch < pf_end) prefetch_row<NV>(a.x + static_cast<i64>(a.col[e + kPrefetch]) * d + c0);
    const i32 j = a.col[e];
    const float* s = a.x + static_cast<i64>(j) * d + c0;
    const __m512i jv = _mm512_set1_epi32(j);
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      const __m512 x = v < NV - 1 ? _mm512_loadu_ps(s + v * kLanes) : _mm512_maskz_loadu_ps(tail, s + v * kLanes);
      // Strict: the first maximum wins (and a NaN never does).
      const __mmask16 gt = _mm512_cmp_ps_mask(x, best[v], _CMP_GT_OQ);
      best[v] = _mm512_mask_mov_ps(best[v], gt, x);
      arg[v] = _mm512_mask_mov_epi32(arg[v], gt, jv);
    }
  }
#pragma GCC unroll 8
  for (int v = 0; v < NV - 1; ++v) {
    _mm512_storeu_ps(o + v * kLanes, best[v]);
    if (a.stream) _mm512_stream_si512(reinterpret_cast<__m512i*>(am + v * kLanes), arg[v]);
    else _mm512_storeu_si512(am + v * kLanes, arg[v]);
  }
  _mm512_mask_storeu_ps(o + (NV - 1) * kLanes, tail, best[NV - 1]);
  if (a.stream) _mm512_stream_si512(reinterpret_cast<__m512i*>(am + (NV - 1) * kLanes), arg[NV - 1]);
  else _mm512_mask_storeu_epi32(am + (NV - 1) * kLanes, tail, arg[NV - 1]);
}

template <int NVL>
void max_range(const MaxFwdArgs& a, i64 lo, i64 hi) {
  constexpr i64 kChunk = kMaxVecs * kLanes;
  const i64 full = (a.d - 1) / kChunk;
  const i64 c_last = full * kChunk;
  const __mmask16 tail = tail_mask(a.d - c_last - (NVL - 1) * kLanes);
  const i64 pf_end = a.row_ptr[hi];
  for (i64 r = lo; r < hi; ++r) {
    const i64 eb = a.row_ptr[r], ee = a.row_ptr[r + 1];
    for (i64 k = 0; k < full; ++k) max_cols<kMaxVecs>(a, r, eb, ee, pf_end, k * kChunk, tail_mask(kLanes));
    max_cols<NVL>(a, r, eb, ee, pf_end, c_last, tail);
  }
}

struct MaxBwdArgs {
  const i64* t_row_ptr;
  const i32* t_col;
  const float* dout;
  const i32* argmax;
  float* dx;
  i64 d;
};

template <int NV>
inline void max_bwd_cols(const MaxBwdArgs& a, i64 j, i64 eb, i64 ee, i64 pf_end, i64 c0, __mmask16 tail) {
  constexpr i64 kPrefetch = prefetch_distance<NV>();
  const i64 d = a.d;
  __m512 acc[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) acc[v] = _mm512_setzero_ps();
  const __m512i jv = _mm512_set1_epi32(static_cast<i32>(j));
  i32 prev = -1;
  for (i64 e = eb; e < ee; ++e) {
    const i32 i = a.t_col[e];
    if (e + kPrefetch < pf_end) {
      const i64 ip = a.t_col[e + kPrefetch];
      prefetch_row<NV>(a.dout + ip * d + c0);
      prefetch_row<NV>(reinterpret_cast<const float*>(a.argmax + ip * d + c0));
    }
    if (i == prev) continue;  // a duplicate edge (i <- j): the max took x[j] once
    prev = i;
    const float* g = a.dout + static_cast<i64>(i) * d + c0;
    const i32* am = a.argmax + static_cast<i64>(i) * d + c0;
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      const __mmask16 lanes = v < NV - 1 ? tail_mask(kLanes) : tail;
      const __mmask16 hit = _mm512_mask_cmpeq_epi32_mask(lanes, _mm512_maskz_loadu_epi32(lanes, am + v * kLanes), jv);
      acc[v] = _mm512_mask_add_ps(acc[v], hit, acc[v], _mm512_maskz_loadu_ps(hit, g + v * kLanes));
    }
  }
  float* o = a.dx + j * d + c0;
#pragma GCC unroll 8
  for (int v = 0; v < NV - 1; ++v) _mm512_storeu_ps(o + v * kLanes, acc[v]);
  _mm512_mask_storeu_ps(o + (NV - 1) * kLanes, tail, acc[NV - 1]);
}

template <int NVL>
void max_bwd_range(const MaxBwdArgs& a, i64 lo, i64 hi) {
  constexpr i64 kChunk = kMaxVecs * kLanes;
  const i64 full = (a.d - 1) / kChunk;
  const i64 c_last = full * kChunk;
  const __mmask16 tail = tail_mask(a.d - c_last - (NVL - 1) * kLanes);
  const i64 pf_end = a.t_row_ptr[hi];
  for (i64 r = lo; r < hi; ++r) {
    const i64 eb = a.t_row_ptr[r], ee = a.t_row_ptr[r + 1];
    for (i64 k = 0; k < full; ++k) max_bwd_cols<kMaxVecs>(a, r, eb, ee, pf_end, k * kChunk, tail_mask(kLanes));
    max_bwd_cols<NVL>(a, r, eb, ee, pf_end, c_last, tail);
  }
}

template <class Args>
using RangeFn = void (*)(const Args&, i64, i64);
template <std::size_t... I>
constexpr std::array<RangeFn<MaxFwdArgs>, sizeof...(I)> max_table(std::index_sequence<I...>) {
  return {&max_range<static_cast<int>(I) + 1>...};
}
template <std::size_t... I>
constexpr std::array<RangeFn<MaxBwdArgs>, sizeof...(I)> max_bwd_table(std::index_sequence<I...>) {
  return {&max_bwd_range<static_cast<int>(I) + 1>...};
}

inline int last_chunk_vecs(i64 d, i64 chunk_vecs) {
  const i64 chunk = chunk_vecs * kLanes;
  const i64 rem = d - (d - 1) / chunk * chunk;
  return static_cast<int>((rem + kLanes - 1) / kLanes);
}

#else  // portable version

void sum_rows(const i64* row_ptr, const i32* col, const float* src, i64 d, float* out, bool mean_row,
              const i64* deg_ptr, i64 lo, i64 hi) {
  for (i64 r = lo; r < hi; ++r) {
    float* o = out + r * d;
    std::fill(o, o + d, 0.f);
    for (i64 e = row_ptr[r]; e < row_ptr[r + 1]; ++e) {
      const i64 j = col[e];
      const float* s = src + j * d;
      float w = 1.f;
      if (deg_ptr) {
        const i64 deg = deg_ptr[j + 1] - deg_ptr[j];
        w = 1.f / static_cast<float>(deg > 0 ? deg : 1);
      }
#pragma omp simd
      for (i64 f = 0; f < d; ++f) o[f] += w * s[f];
    }
    if (mean_row) {
      const i64 deg = row_ptr[r + 1] - row_ptr[r];
      const float w = 1.f / static_cast<float>(deg > 0 ? deg : 1);
#pragma omp simd
      for (i64 f = 0; f < d; ++f) o[f] *= w;
    }
  }
}

#endif

}  // namespace

void csr_aggregate_forward(Reduce reduce, const i64* row_ptr, const i32* col_idx, i64 n_dst, const float* x, i64 d,
                           float* out, i32* argmax) {
  if (n_dst <= 0 || d <= 0) return;
#if defined(__AVX512F__)
  switch (reduce) {
    case Reduce::sum: sum_all<Scale::none>({row_ptr, col_idx, x, out, d, nullptr}, n_dst); return;
    case Reduce::mean: sum_all<Scale::row>({row_ptr, col_idx, x, out, d, nullptr}, n_dst); return;
    case Reduce::max: {
      static constexpr auto table = max_table(std::make_index_sequence<kMaxVecs>{});
      const bool stream = d % kLanes == 0 && reinterpret_cast<std::uintptr_t>(argmax) % 64 == 0 &&
                          n_dst * d * static_cast<i64>(sizeof(i32)) >= kStreamMinBytes;
      const MaxFwdArgs a{row_ptr, col_idx, x, out, argmax, d, stream};
      const auto fn = table[last_chunk_vecs(d, kMaxVecs) - 1];
      for_row_ranges(row_ptr, n_dst, d, [&](i64 lo, i64 hi) {
        fn(a, lo, hi);
        if (stream) _mm_sfence();
      });
      return;
    }
  }
#else
  if (reduce != Reduce::max) {
    for_row_ranges(row_ptr, n_dst, d, [&](i64 lo, i64 hi) {
      sum_rows(row_ptr, col_idx, x, d, out, reduce == Reduce::mean, nullptr, lo, hi);
    });
    return;
  }
  for_row_ranges(row_ptr, n_dst, d, [&](i64 lo, i64 hi) {
    for (i64 r = lo; r < hi; ++r) {
      float* o = out + r * d;
      i32* am = argmax + r * d;
      const i64 eb = row_ptr[r], ee = row_ptr[r + 1];
      if (eb == ee) {
        std::fill(o, o + d, 0.f);
        std::fill(am, am + d, -1);
        continue;
      }
      const i32 j0 = col_idx[eb];
      std::memcpy(o, x + static_cast<i64>(j0) * d, static_cast<std::size_t>(d) * sizeof(float));
      std::fill(am, am + d, j0);
      for (i64 e = eb + 1; e < ee; ++e) {
        const i32 j = col_idx[e];
        const float* s = x + static_cast<i64>(j) * d;
#pragma omp simd
        for (i64 f = 0; f < d; ++f) {
          const bool gt = s[f] > o[f];
          o[f] = gt ? s[f] : o[f];
          am[f] = gt ? j : am[f];
        }
      }
    }
  });
#endif
}

void csr_aggregate_backward(Reduce reduce, const i64* row_ptr, const i64* t_row_ptr, const i32* t_col_idx, i64 n_src,
                            i64 n_dst, const float* dout, i64 d, const i32* argmax, float* dx) {
  (void)n_dst;
  if (n_src <= 0 || d <= 0) return;
#if defined(__AVX512F__)
  switch (reduce) {
    case Reduce::sum: sum_all<Scale::none>({t_row_ptr, t_col_idx, dout, dx, d, nullptr}, n_src); return;
    case Reduce::mean: sum_all<Scale::edge>({t_row_ptr, t_col_idx, dout, dx, d, row_ptr}, n_src); return;
    case Reduce::max: {
      static constexpr auto table = max_bwd_table(std::make_index_sequence<kMaxVecs>{});
      const MaxBwdArgs a{t_row_ptr, t_col_idx, dout, argmax, dx, d};
      const auto fn = table[last_chunk_vecs(d, kMaxVecs) - 1];
      for_row_ranges(t_row_ptr, n_src, d, [&](i64 lo, i64 hi) { fn(a, lo, hi); });
      return;
    }
  }
#else
  if (reduce != Reduce::max) {
    for_row_ranges(t_row_ptr, n_src, d, [&](i64 lo, i64 hi) {
      sum_rows(t_row_ptr, t_col_idx, dout, d, dx, false, reduce == Reduce::mean ? row_ptr : nullptr, lo, hi);
    });
    return;
  }
  for_row_ranges(t_row_ptr, n_src, d, [&](i64 lo, i64 hi) {
    for (i64 j = lo; j < hi; ++j) {
      float* o = dx + j * d;
      std::fill(o, o + d, 0.f);
      i32 prev = -1;
      for (i64 e = t_row_ptr[j]; e < t_row_ptr[j + 1]; ++e) {
        const i32 i = t_col_idx[e];
        if (i == prev) continue;  // a duplicate edge: the max took x[j] once
        prev = i;
        const float* g = dout + static_cast<i64>(i) * d;
        const i32* am = argmax + static_cast<i64>(i) * d;
        const i32 jj = static_cast<i32>(j);
#pragma omp simd
        for (i64 f = 0; f < d; ++f) o[f] += am[f] == jj ? g[f] : 0.f;
      }
    }
  });
#endif
}

}  // namespace go::kernels
