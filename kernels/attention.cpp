// Segment-recurrent multi-head attention on the CPU: a FlashAttention-2 style
// fused kernel (online softmax over key tiles) with register-blocked AVX-512
// micro-kernels (AVX2: the same with 16-lane vectors as two halves, one column
// vector per pass). See include/go/kernels/attention.hpp for the contract.
//
// Layout of the work. One task is one (segment, head); tasks run in parallel
// with OpenMP. Inside a task the queries are cut into blocks of kBq = 64 and the
// visible keys into blocks of kBk = 64. Scores are kept TRANSPOSED in a tile
// S^T[key][query] (64 x 64 floats, L1 resident): then every per-query quantity
// of the softmax (running max, running sum, rescale factor, lse) is a vector
// over 16 queries, and the reductions over keys are plain vertical max / add,
// never a horizontal reduction. All five products of forward and backward are
// one micro-kernel shape:
//
//   C[r, :] (=|+=|= rowscale[r] *) C[r, :]  +  sum_t A(r, t) * B[t, :]
//
// with A read by broadcast (any strides) and B read as rows of 16-float
// vectors (the last one masked when head_dim is not a multiple of 16):
//   S^T  = K  . Q^T     A = K rows,   B = packed, pre-scaled Q^T   (T = head_dim)
//   O    = O*alpha + P V  A = P^T (transposed access), B = V rows   (T = keys)
//   dP^T = V  . dO^T    A = V rows,   B = packed dO^T               (T = head_dim)
//   dQ  += dS K         A = dS^T (transposed access), B = K rows   (T = keys)
//   dK  += dS^T Q       A = dS^T rows, B = Q rows                  (T = queries)
//   dV  += P^T dO       A = P^T rows,  B = dO rows                 (T = queries)
// The softmax works in base 2 (Q^T is pre-scaled by scale * log2(e)), so the
// exponentials are exp2, computed by a polynomial plus scalef.
//
// Masks are never materialised: with causal, a key tile entirely after the
// query block is skipped, a tile entirely before it needs no mask, and only
// tiles that cross the diagonal compare key and query indices lane by lane.
//
// Backward without races: the cached (memory) rows are stop-gradient, so the
// key/value rows of segment s receive gradient only from the queries of
// segment s, and the query rows of segment s only from segment s too. Each
// (segment, head) task therefore owns rows [b, e) x columns of head h of dq,
// dk and dv: no atomics, no reduction buffers.
#include "go/kernels/attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "avx512.hpp"
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "go/core/error.hpp"

namespace go::kernels {
namespace {

constexpr int kW = 16;   // floats per vector
constexpr int kBq = 64;  // queries per block (4 vectors): row stride of the score tiles
constexpr int kBk = 64;  // keys per block
constexpr int kQV = kBq / kW;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Cephes exp2f minimax polynomial on [-0.5, 0.5], highest power first (Horner):
// 2^f = 1 + f * P(f), relative error ~1e-7.
constexpr int kExp2Terms = 7;
constexpr float kExp2Poly[kExp2Terms] = {1.535336188319500e-4f, 1.339887440266574e-3f, 9.618437357674640e-3f,
                                         5.550332471162809e-2f, 2.402264791363012e-1f, 6.931472028550421e-1f,
                                         1.f};

// ---- a minimal 16-lane float vector ---------------------------------------
#if defined(__AVX512F__)
using vf = __m512;
using vmask = __mmask16;
inline vmask mask_first(int count) { return static_cast<vmask>((1u << count) - 1u); }
inline vf vzero() { return _mm512_setzero_ps(); }
inline vf vset1(float x) { return _mm512_set1_ps(x); }
inline vf vload(const float* p) { return _mm512_loadu_ps(p); }
inline vf vloadm(const float* p, vmask m) { return _mm512_maskz_loadu_ps(m, p); }
inline void vstore(float* p, vf x) { _mm512_storeu_ps(p, x); }
inline void vstorem(float* p, vmask m, vf x) { _mm512_mask_storeu_ps(p, m, x); }
inline vf vfma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
inline vf vadd(vf a, vf b) { return _mm512_add_ps(a, b); }
inline vf vsub(vf a, vf b) { return _mm512_sub_ps(a, b); }
inline vf vmul(vf a, vf b) { return _mm512_mul_ps(a, b); }
inline vf vmax(vf a, vf b) { return _mm512_max_ps(a, b); }
// Lanes where key index j > query index (q0 + lane) become -inf.
inline vf vcausal(vf x, std::int64_t j, std::int64_t q0) {
  const std::int64_t lim = j - q0;  // lane < lim is masked
  if (lim <= 0) return x;
  if (lim >= kW) return vset1(kNegInf);
  return _mm512_mask_mov_ps(x, mask_first(static_cast<int>(lim)), vset1(kNegInf));
}
inline vf vround(vf x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
// p * 2^n where x >= lo, else 0 (n integral, >= -126).
inline vf vscale2_where_ge(vf p, vf n, vf x, float lo) {
  return _mm512_maskz_scalef_ps(_mm512_cmp_ps_mask(x, vset1(lo), _CMP_GE_OQ), p, n);
}
// log2(x) for positive normal x: exponent + atanh series of the mantissa in [sqrt(1/2), sqrt(2)).
inline vf vlog2(vf x) {
  vf m = _mm512_getmant_ps(x, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_zero);
  vf e = _mm512_getexp_ps(x);
  const vmask big = _mm512_cmp_ps_mask(m, vset1(1.41421356f), _CMP_GT_OQ);
  m = _mm512_mask_mul_ps(m, big, m, vset1(0.5f));
  e = _mm512_mask_add_ps(e, big, e, vset1(1.f));
  const vf z = _mm512_div_ps(vsub(m, vset1(1.f)), vadd(m, vset1(1.f)));  // |z| <= 0.172
  const vf z2 = vmul(z, z);
  vf p = vset1(1.f / 9);
  p = vfma(p, z2, vset1(1.f / 7));
  p = vfma(p, z2, vset1(1.f / 5));
  p = vfma(p, z2, vset1(1.f / 3));
  p = vfma(p, z2, vset1(1.f));
  return vfma(vmul(z, p), vset1(2.f * kLog2e), e);
}
// Transposes the 16 x 16 block held in r[0..15] (r[i] = row i) in place.
inline void transpose16(vf r[16]) {
  vf t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // u[4i + j], 128-bit lane k: column 4k + j of rows 4i .. 4i + 3
  vf u[16];
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int j = 0; j < 4; ++j) {
    const vf v0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88), w0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xDD);
    const vf v1 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88), w1 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xDD);
    r[j] = _mm512_shuffle_f32x4(v0, v1, 0x88);
    r[8 + j] = _mm512_shuffle_f32x4(v0, v1, 0xDD);
    r[4 + j] = _mm512_shuffle_f32x4(w0, w1, 0x88);
    r[12 + j] = _mm512_shuffle_f32x4(w0, w1, 0xDD);
  }
}
inline float vsum(vf x) { return _mm512_reduce_add_ps(x); }
#elif defined(__AVX2__) && defined(__FMA__)
// AVX2: a 16-lane vector is two 8-lane halves. Only 16 registers of half the width, so the
// micro-kernel takes one column vector per pass (kColumnPass below); the arithmetic is the
// AVX-512 path's, lane by lane (same polynomials, same fused multiply-adds).
struct vf {
  __m256 lo, hi;
};
struct vmask {
  __m256i lo, hi;  // all ones in the live lanes
};
inline __m256i lane_index_lo() { return _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7); }
inline __m256i lane_index_hi() { return _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15); }
// Lanes [0, count) live.
inline vmask mask_first(int count) {
  const __m256i c = _mm256_set1_epi32(count);
  return {_mm256_cmpgt_epi32(c, lane_index_lo()), _mm256_cmpgt_epi32(c, lane_index_hi())};
}
inline vf vzero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
inline vf vset1(float x) { return {_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
inline vf vload(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
// Masked lanes are neither read nor written (no access past a row's end).
inline vf vloadm(const float* p, vmask m) { return {_mm256_maskload_ps(p, m.lo), _mm256_maskload_ps(p + 8, m.hi)}; }
inline void vstore(float* p, vf x) {
  _mm256_storeu_ps(p, x.lo);
  _mm256_storeu_ps(p + 8, x.hi);
}
inline void vstorem(float* p, vmask m, vf x) {
  _mm256_maskstore_ps(p, m.lo, x.lo);
  _mm256_maskstore_ps(p + 8, m.hi, x.hi);
}
inline vf vfma(vf a, vf b, vf c) { return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)}; }
inline vf vadd(vf a, vf b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
inline vf vsub(vf a, vf b) { return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
inline vf vmul(vf a, vf b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
inline vf vmax(vf a, vf b) { return {_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)}; }
// Lanes where key index j > query index (q0 + lane) become -inf.
inline vf vcausal(vf x, std::int64_t j, std::int64_t q0) {
  const std::int64_t lim = j - q0;  // lane < lim is masked
  if (lim <= 0) return x;
  if (lim >= kW) return vset1(kNegInf);
  const vmask m = mask_first(static_cast<int>(lim));
  const __m256 inf = _mm256_set1_ps(kNegInf);
  return {_mm256_blendv_ps(x.lo, inf, _mm256_castsi256_ps(m.lo)), _mm256_blendv_ps(x.hi, inf, _mm256_castsi256_ps(m.hi))};
}
inline vf vround(vf x) {
  constexpr int kMode = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  return {_mm256_round_ps(x.lo, kMode), _mm256_round_ps(x.hi, kMode)};
}
// p * 2^n where x >= lo, else 0 (n integral, >= -126: 2^n from its exponent bits is a normal
// float, so the product is rounded once, as AVX-512's scalef rounds it).
inline __m256 scale2_half(__m256 p, __m256 n, __m256 x, float lo) {
  const __m256 pow2n =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
  return _mm256_and_ps(_mm256_mul_ps(p, pow2n), _mm256_cmp_ps(x, _mm256_set1_ps(lo), _CMP_GE_OQ));
}
inline vf vscale2_where_ge(vf p, vf n, vf x, float lo) {
  return {scale2_half(p.lo, n.lo, x.lo, lo), scale2_half(p.hi, n.hi, x.hi, lo)};
}
// log2(x) for positive normal x: exponent + atanh series of the mantissa in [sqrt(1/2), sqrt(2)).
inline __m256 log2_half(__m256 x) {
  const __m256i bits = _mm256_castps_si256(x);
  __m256 m = _mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)),
                                                 _mm256_set1_epi32(0x3f800000)));  // [1, 2)
  __m256 e = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(127)));
  const __m256 big = _mm256_cmp_ps(m, _mm256_set1_ps(1.41421356f), _CMP_GT_OQ);
  m = _mm256_blendv_ps(m, _mm256_mul_ps(m, _mm256_set1_ps(0.5f)), big);
  e = _mm256_add_ps(e, _mm256_and_ps(big, _mm256_set1_ps(1.f)));
  const __m256 one = _mm256_set1_ps(1.f);
  const __m256 z = _mm256_div_ps(_mm256_sub_ps(m, one), _mm256_add_ps(m, one));  // |z| <= 0.172
  const __m256 z2 = _mm256_mul_ps(z, z);
  __m256 p = _mm256_set1_ps(1.f / 9);
  p = _mm256_fmadd_ps(p, z2, _mm256_set1_ps(1.f / 7));
  p = _mm256_fmadd_ps(p, z2, _mm256_set1_ps(1.f / 5));
  p = _mm256_fmadd_ps(p, z2, _mm256_set1_ps(1.f / 3));
  p = _mm256_fmadd_ps(p, z2, one);
  return _mm256_fmadd_ps(_mm256_mul_ps(z, p), _mm256_set1_ps(2.f * kLog2e), e);
}
inline vf vlog2(vf x) { return {log2_half(x.lo), log2_half(x.hi)}; }
// Transposes the 8 x 8 block r[0..7] in place.
inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x20);
    r[4 + i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x31);
  }
}
// Transposes the 16 x 16 block held in r[0..15] (r[i] = row i) in place: four 8 x 8 blocks.
inline void transpose16(vf r[16]) {
  __m256 tl[8], tr[8], bl[8], br[8];
  for (int i = 0; i < 8; ++i) {
    tl[i] = r[i].lo;
    tr[i] = r[i].hi;
    bl[i] = r[8 + i].lo;
    br[i] = r[8 + i].hi;
  }
  transpose8(tl);
  transpose8(tr);
  transpose8(bl);
  transpose8(br);
  for (int i = 0; i < 8; ++i) {
    r[i] = {tl[i], bl[i]};
    r[8 + i] = {tr[i], br[i]};
  }
}
inline float vsum(vf x) {
  const __m256 s = _mm256_add_ps(x.lo, x.hi);
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}
#else
// Portable fallback with the same interface (the compiler vectorizes the loops).
struct vf {
  float x[kW];
};
using vmask = int;  // number of live leading lanes
inline vmask mask_first(int count) { return count; }
inline vf vzero() { return vf{}; }
inline vf vset1(float s) {
  vf r;
  for (int i = 0; i < kW; ++i) r.x[i] = s;
  return r;
}
inline vf vload(const float* p) {
  vf r;
  std::memcpy(r.x, p, sizeof r.x);
  return r;
}
inline vf vloadm(const float* p, vmask m) {
  vf r{};
  for (int i = 0; i < m; ++i) r.x[i] = p[i];
  return r;
}
inline void vstore(float* p, vf x) { std::memcpy(p, x.x, sizeof x.x); }
inline void vstorem(float* p, vmask m, vf x) {
  for (int i = 0; i < m; ++i) p[i] = x.x[i];
}
#define GO_ATT_LANEWISE(name, expr)       \
  inline vf name(vf a, vf b) {            \
    vf r;                                 \
    for (int i = 0; i < kW; ++i) {        \
      const float x = a.x[i], y = b.x[i]; \
      r.x[i] = (expr);                    \
    }                                     \
    return r;                             \
  }
GO_ATT_LANEWISE(vadd, x + y)
GO_ATT_LANEWISE(vsub, x - y)
GO_ATT_LANEWISE(vmul, x* y)
GO_ATT_LANEWISE(vmax, x > y ? x : y)
#undef GO_ATT_LANEWISE
inline vf vfma(vf a, vf b, vf c) {
  vf r;
  for (int i = 0; i < kW; ++i) r.x[i] = std::fma(a.x[i], b.x[i], c.x[i]);
  return r;
}
inline vf vcausal(vf x, std::int64_t j, std::int64_t q0) {
  for (int i = 0; i < kW; ++i)
    if (j > q0 + i) x.x[i] = kNegInf;
  return x;
}
inline vf vexp2(vf x) {
  vf r;
  for (int i = 0; i < kW; ++i) r.x[i] = x.x[i] < -126.f ? 0.f : std::exp2(x.x[i]);
  return r;
}
inline vf vlog2(vf x) {
  for (int i = 0; i < kW; ++i) x.x[i] = std::log2(x.x[i]);
  return x;
}
inline void transpose16(vf r[16]) {
  for (int i = 0; i < kW; ++i)
    for (int j = i + 1; j < kW; ++j) std::swap(r[i].x[j], r[j].x[i]);
}
inline float vsum(vf x) {
  float s = 0.f;
  for (int i = 0; i < kW; ++i) s += x.x[i];
  return s;
}
#endif

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
// 2^x for x <= 0 (or a little above); exactly 0 below -126, for -inf and for NaN.
inline vf vexp2(vf x) {
  const vf xc = vmax(x, vset1(-126.f));
  const vf n = vround(xc);
  const vf f = vsub(xc, n);  // [-0.5, 0.5]
  vf p = vset1(kExp2Poly[0]);
  for (int i = 1; i < kExp2Terms; ++i) p = vfma(p, f, vset1(kExp2Poly[i]));
  return vscale2_where_ge(p, n, x, -126.f);
}
#endif

// ---- the micro-kernel -------------------------------------------------------
enum class Init { zero, load, scale };  // acc starts at 0 | C | rowscale[r] * C

// Epilogue of the score product S^T = K Q^T: the causal mask (on a tile that
// crosses the diagonal) and the running per-query (per-column) max, applied to
// the accumulators before they are stored.
struct ScoreEpi {
  float* colmax;      // the tile's columns' running max, updated in place
  std::int64_t key0;  // key index of row 0 of C
  std::int64_t q0;    // query index of column 0 of C
  bool mask;          // apply the causal mask
};

// Column vectors one pass of the micro-kernel keeps in registers: all NV of a call where AVX-512's
// 32 registers hold R x NV accumulators; one where AVX2's 16 registers of half the width must hold
// R x 2 halves (the portable fallback's 6 x 4 block lived in memory: 3-7 GFLOP/s there).
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
constexpr bool kOneColumnPerPass = true;
#else
constexpr bool kOneColumnPerPass = false;
#endif

// C[R x (NV vectors)] = init + sum_{t < T} A[r*ars + t*acs] * B[t*ldb + :].
// The last vector of each row is masked with `tail` (loads of B, loads/stores of C) unless kFull says
// it is whole: AVX2's masked stores are microcoded on AMD's cores, several times a plain store.
// Each element is summed over t in order, whatever the passes, so the result does not depend on them.
template <int R, int NV, Init I, bool kEpi, bool kFull>
inline void micro(int T, const float* __restrict a, std::int64_t ars, std::int64_t acs, const float* __restrict b,
                  std::int64_t ldb, float* __restrict c, std::int64_t ldc, vmask tail, const float* rowscale,
                  const ScoreEpi* epi, int row0) {
  constexpr int P = kOneColumnPerPass ? 1 : NV;  // column vectors per pass
  for (int v0 = 0; v0 < NV; v0 += P) {
    vf acc[R][P];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int v = 0; v < P; ++v) {
        if constexpr (I == Init::zero) {
          acc[r][v] = vzero();
        } else {
          const float* cr = c + r * ldc + (v0 + v) * kW;
          vf x = !kFull && v0 + v == NV - 1 ? vloadm(cr, tail) : vload(cr);
          if constexpr (I == Init::scale) x = vmul(x, vset1(rowscale[r]));
          acc[r][v] = x;
        }
      }
    }
    for (int t = 0; t < T; ++t) {
      const float* bt = b + t * ldb + v0 * kW;
      vf bv[P];
#pragma GCC unroll 4
      for (int v = 0; v < P; ++v)
        bv[v] = !kFull && v0 + v == NV - 1 ? vloadm(bt + v * kW, tail) : vload(bt + v * kW);
      const float* at = a + t * acs;
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const vf ar = vset1(at[r * ars]);
#pragma GCC unroll 4
        for (int v = 0; v < P; ++v) acc[r][v] = vfma(ar, bv[v], acc[r][v]);
      }
    }
    if constexpr (kEpi) {
      if (epi->mask) {
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
          for (int v = 0; v < P; ++v) acc[r][v] = vcausal(acc[r][v], epi->key0 + row0 + r, epi->q0 + (v0 + v) * kW);
      }
#pragma GCC unroll 4
      for (int v = 0; v < P; ++v) {
        vf mx = vload(epi->colmax + (v0 + v) * kW);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) mx = vmax(mx, acc[r][v]);
        vstore(epi->colmax + (v0 + v) * kW, mx);
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int v = 0; v < P; ++v) {
        float* cr = c + r * ldc + (v0 + v) * kW;
        if (!kFull && v0 + v == NV - 1)
          vstorem(cr, tail, acc[r][v]);
        else
          vstore(cr, acc[r][v]);
      }
    }
  }
}

// Rows per micro-kernel call for NV vectors per row: about 24 accumulators (AVX-512), 12 halves
// of one column vector per pass (AVX2).
template <int NV>
constexpr int rows_for() {
  if constexpr (kOneColumnPerPass) return 6;
  return NV == 1 ? 16 : NV == 2 ? 12 : NV == 3 ? 8 : 6;
}

// The terms t a causal tile's rows [r, r + RR) take: [begin0 + r, end0 + r + RR) within [0, T). The
// others multiply masked entries, exactly zero, and x + 0 is x for every x but -0 (a sum that
// underflowed to -0 keeps its sign instead of turning +0), so a diagonal tile skips them with the
// same bits. The default takes every term.
struct Band {
  std::int64_t begin0 = -(std::int64_t{1} << 40);
  std::int64_t end0 = std::int64_t{1} << 40;
};

template <int NV, Init I, bool kEpi, bool kFull>
void rows_loop(int rows, int T, const float* a, std::int64_t ars, std::int64_t acs, const float* b, std::int64_t ldb,
               float* c, std::int64_t ldc, vmask tail, const float* rowscale, const ScoreEpi* epi, Band band) {
  constexpr int RM = rows_for<NV>();
  int r = 0;
  auto call = [&]<int RR>() {
    const std::int64_t tb = std::clamp<std::int64_t>(band.begin0 + r, 0, T);
    const std::int64_t te = std::clamp<std::int64_t>(band.end0 + r + RR, tb, T);
    micro<RR, NV, I, kEpi, kFull>(static_cast<int>(te - tb), a + r * ars + tb * acs, ars, acs, b + tb * ldb, ldb,
                                  c + r * ldc, ldc, tail, rowscale ? rowscale + r : nullptr, epi, r);
    r += RR;
  };
  while (r + RM <= rows) call.template operator()<RM>();
  if constexpr (RM > 8)
    if (rows - r >= 8) call.template operator()<8>();
  if constexpr (RM > 4)
    if (rows - r >= 4) call.template operator()<4>();
  if (rows - r >= 2) call.template operator()<2>();
  if (rows - r >= 1) call.template operator()<1>();
}

// C[rows x cols] = init + A . B with A(r, t) = a[r*ars + t*acs] and B rows of `cols` floats.
// With an epilogue, cols must be at most 64 (one chunk of columns).
template <Init I>
void tile_gemm(int rows, int cols, int T, const float* a, std::int64_t ars, std::int64_t acs, const float* b,
               std::int64_t ldb, float* c, std::int64_t ldc, const float* rowscale = nullptr,
               const ScoreEpi* epi = nullptr, Band band = {}) {
  if (rows <= 0) return;
  for (int c0 = 0; c0 < cols; c0 += 4 * kW) {
    const int cw = std::min(4 * kW, cols - c0);
    const int nv = (cw + kW - 1) / kW;
    const vmask tail = mask_first(cw - (nv - 1) * kW);
    const bool full = cw % kW == 0;
#define GO_ATT_ROWS_F(NV, F)                                                                            \
  (epi ? rows_loop<NV, I, true, F>(rows, T, a, ars, acs, b + c0, ldb, c + c0, ldc, tail, rowscale, epi, band) \
       : rows_loop<NV, I, false, F>(rows, T, a, ars, acs, b + c0, ldb, c + c0, ldc, tail, rowscale, nullptr, band))
#define GO_ATT_ROWS(NV) (full ? GO_ATT_ROWS_F(NV, true) : GO_ATT_ROWS_F(NV, false))
    switch (nv) {
      case 1:
        GO_ATT_ROWS(1);
        break;
      case 2:
        GO_ATT_ROWS(2);
        break;
      case 3:
        GO_ATT_ROWS(3);
        break;
      default:
        GO_ATT_ROWS(4);
        break;
    }
#undef GO_ATT_ROWS
#undef GO_ATT_ROWS_F
  }
}

// ---- per-thread scratch, reused across calls --------------------------------
struct Scratch {
  float* base = nullptr;
  std::size_t cap = 0;
  ~Scratch() { std::free(base); }
  float* get(std::size_t floats) {
    if (floats > cap) {
      std::free(base);
      cap = (floats + 15) / 16 * 16;
      base = static_cast<float*>(std::aligned_alloc(64, cap * sizeof(float)));
      GO_CHECK(base, "seg_attention: out of memory for ", cap, " floats of scratch");
    }
    return base;
  }
};
inline float* scratch(std::size_t floats) {
  thread_local Scratch s;
  return s.get(floats);
}

}  // namespace

float seg_attention_scale(const SegAttention& p) {
  GO_CHECK(p.n >= 0, "seg_attention: n = ", p.n, " must be >= 0");
  GO_CHECK(p.heads >= 1, "seg_attention: heads = ", p.heads, " must be >= 1");
  GO_CHECK(p.head_dim >= 1, "seg_attention: head_dim = ", p.head_dim, " must be >= 1");
  GO_CHECK(p.seg_len >= 1, "seg_attention: seg_len = ", p.seg_len, " must be >= 1");
  GO_CHECK(p.mem_len >= 0, "seg_attention: mem_len = ", p.mem_len, " must be >= 0");
  return p.scale != 0.f ? p.scale : 1.f / std::sqrt(static_cast<float>(p.head_dim));
}

namespace {

struct Geometry {
  std::int64_t n, seg, mem, ld;
  int heads, d, dp;  // dp: head_dim rounded up to whole vectors
  bool causal;
  float scale;
  std::int64_t segments() const { return (n + seg - 1) / seg; }
};

Geometry geometry(const SegAttention& p) {
  const float scale = seg_attention_scale(p);
  Geometry g;
  g.n = p.n;
  g.seg = p.seg_len;
  g.mem = p.mem_len;
  g.heads = p.heads;
  g.d = p.head_dim;
  g.dp = (p.head_dim + kW - 1) / kW * kW;
  g.ld = static_cast<std::int64_t>(p.heads) * p.head_dim;
  g.causal = p.causal;
  g.scale = scale;
  return g;
}

// Q^T (or dO^T) of a query block: dst[c * kBq + i] = mul * src[i * ld + c] for
// i < nq, c < d; zero for the padding queries nq <= i < qw. 16 x 16 blocks are
// transposed in registers.
void pack_transposed(const float* src, std::int64_t ld, int nq, int qw, int d, float mul, float* dst) {
  const vf vm = vset1(mul);
  for (int i0 = 0; i0 < qw; i0 += kW) {
    for (int c0 = 0; c0 < d; c0 += kW) {
      const int cw = std::min(kW, d - c0);
      const vmask m = mask_first(cw);
      vf r[kW];
      for (int i = 0; i < kW; ++i) {
        const float* row = src + (i0 + i) * ld + c0;
        r[i] = i0 + i < nq ? vmul(vm, cw == kW ? vload(row) : vloadm(row, m)) : vzero();
      }
      transpose16(r);
      for (int c = 0; c < cw; ++c) vstore(dst + static_cast<std::int64_t>(c0 + c) * kBq + i0, r[c]);
    }
  }
}

// Prefetches `rows` rows of d floats (row stride ld) into the cache: the kernels
// read K, V and Q rows with large strides, which the hardware prefetchers follow
// poorly; asking for a whole tile ahead of use overlaps the misses.
inline void prefetch_rows(const float* p, std::int64_t rows, std::int64_t ld, int d) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (int c = 0; c < d; c += kW) __builtin_prefetch(p + r * ld + c, 0, 3);
}

// Causal masks by whole runs of terms. Keys of the tile [j0, j0 + nk) that the queries of vector u
// (i0 + u kW ...) see: the first visible_keys rows; a row after them is masked in every lane.
inline int visible_keys(const Geometry& g, std::int64_t i0, std::int64_t j0, int nk, int u) {
  return g.causal ? static_cast<int>(std::clamp<std::int64_t>(i0 + (u + 1) * kW - j0, 0, nk)) : nk;
}
// Products whose rows are queries from i0 and terms keys from j0 (O += P V, dQ += dS K).
inline Band query_rows(const Geometry& g, std::int64_t i0, std::int64_t j0) {
  Band b;
  if (g.causal) b.end0 = i0 - j0;
  return b;
}
// Products whose rows are keys from j0 and terms queries from i0 (dV += P^T dO, dK += dS^T Q).
inline Band key_rows(const Geometry& g, std::int64_t i0, std::int64_t j0) {
  Band b;
  if (g.causal) b.begin0 = j0 - i0;
  return b;
}
// S^T (or dP^T) = K Q^T of a key tile: on a tile that crosses the diagonal, each query vector over
// the keys it sees only (`seen`); the rows after them are left unwritten.
void scores(const Geometry& g, bool diag, int nk, int nqv, const int* seen, const float* kt, const float* qt, float* st,
            float* colmax, std::int64_t j0, std::int64_t i0) {
  if (!diag) {
    const ScoreEpi epi{colmax, j0, i0, false};
    tile_gemm<Init::zero>(nk, nqv * kW, g.d, kt, g.ld, 1, qt, kBq, st, kBq, nullptr, colmax ? &epi : nullptr);
    return;
  }
  for (int u = 0; u < nqv; ++u) {
    const ScoreEpi epi{colmax + u * kW, j0, i0 + u * kW, true};
    tile_gemm<Init::zero>(seen[u], kW, g.d, kt, g.ld, 1, qt + u * kW, kBq, st + u * kW, kBq, nullptr,
                          colmax ? &epi : nullptr);
  }
}

// rowsum(a o b) over d floats.
inline float row_dot(const float* a, const float* b, int d) {
  vf acc = vzero();
  int c = 0;
  for (; c + kW <= d; c += kW) acc = vfma(vload(a + c), vload(b + c), acc);
  if (c < d) {
    const vmask m = mask_first(d - c);
    acc = vfma(vloadm(a + c, m), vloadm(b + c, m), acc);
  }
  return vsum(acc);
}

// dst[c] = mul * src[c] for c < d; zeros when src is null.
inline void scale_row(float* dst, const float* src, int d, float mul) {
  const vf vm = vset1(mul);
  int c = 0;
  for (; c + kW <= d; c += kW) vstore(dst + c, src ? vmul(vm, vload(src + c)) : vzero());
  if (c < d) {
    const vmask m = mask_first(d - c);
    vstorem(dst + c, m, src ? vmul(vm, vloadm(src + c, m)) : vzero());
  }
}

// ---- forward: one (segment, head) -------------------------------------------
void forward_task(const Geometry& g, std::int64_t s, int h, const float* q, const float* k, const float* v, float* out,
                  float* lse) {
  const std::int64_t b = s * g.seg, e = std::min(g.n, b + g.seg), kb = std::max<std::int64_t>(0, b - g.mem);
  const std::int64_t ld = g.ld, hc = static_cast<std::int64_t>(h) * g.d;
  float* qt = scratch(static_cast<std::size_t>(g.d) * kBq + kBk * kBq + static_cast<std::size_t>(kBq) * g.dp);
  float* st = qt + static_cast<std::int64_t>(g.d) * kBq;  // S^T, then P^T: [kBk][kBq]
  float* o = st + kBk * kBq;                              // O accumulator: [kBq][dp]
  alignas(64) float m[kBq], l[kBq], mx[kBq], alpha[kBq];

  prefetch_rows(q + b * ld + hc, std::min<std::int64_t>(kBq, e - b), ld, g.d);
  prefetch_rows(k + kb * ld + hc, std::min<std::int64_t>(kBk, e - kb), ld, g.d);
  prefetch_rows(v + kb * ld + hc, std::min<std::int64_t>(kBk, e - kb), ld, g.d);
  for (std::int64_t i0 = b; i0 < e; i0 += kBq) {
    const int nq = static_cast<int>(std::min<std::int64_t>(kBq, e - i0));
    const int nqv = (nq + kW - 1) / kW, qw = nqv * kW;
    pack_transposed(q + i0 * ld + hc, ld, nq, qw, g.d, g.scale * kLog2e, qt);
    if (i0 + kBq < e) prefetch_rows(q + (i0 + kBq) * ld + hc, std::min<std::int64_t>(kBq, e - i0 - kBq), ld, g.d);
    const std::int64_t jend = g.causal ? std::min(e, i0 + nq) : e;  // keys after the block's last query are masked
    bool first = true;
    for (std::int64_t j0 = kb; j0 < jend; j0 += kBk) {
      const int nk = static_cast<int>(std::min<std::int64_t>(kBk, jend - j0));
      if (j0 + kBk < e) {  // the next key tile (of this query block or of the next one)
        const std::int64_t nn = std::min<std::int64_t>(kBk, e - j0 - kBk);
        prefetch_rows(k + (j0 + kBk) * ld + hc, nn, ld, g.d);
        prefetch_rows(v + (j0 + kBk) * ld + hc, nn, ld, g.d);
      }
      // S^T = K Q^T (Q pre-scaled by scale * log2 e), masked on the diagonal; mx = new running max.
      for (int u = 0; u < nqv; ++u) vstore(mx + u * kW, first ? vset1(kNegInf) : vload(m + u * kW));
      const bool diag = g.causal && j0 + nk - 1 > i0;
      int seen[kQV];
      for (int u = 0; u < nqv; ++u) seen[u] = visible_keys(g, i0, j0, nk, u);
      scores(g, diag, nk, nqv, seen, k + j0 * ld + hc, qt, st, mx, j0, i0);
      vf mv[kQV], sum[kQV];
      for (int u = 0; u < nqv; ++u) {
        mv[u] = vload(mx + u * kW);
        if (!first) vstore(alpha + u * kW, vexp2(vsub(vload(m + u * kW), mv[u])));
        vstore(m + u * kW, mv[u]);
        sum[u] = vzero();
      }
      // P^T = exp2(S^T - m), column sums; zero where the mask covers the whole vector
      for (int j = 0; j < nk; ++j) {
        float* row = st + j * kBq;
        for (int u = 0; u < nqv; ++u) {
          if (j >= seen[u]) {
            vstore(row + u * kW, vzero());
            continue;
          }
          const vf pr = vexp2(vsub(vload(row + u * kW), mv[u]));
          vstore(row + u * kW, pr);
          sum[u] = vadd(sum[u], pr);
        }
      }
      // l = alpha * l + rowsum(P); O = alpha * O + P V
      if (first) {
        for (int u = 0; u < nqv; ++u) vstore(l + u * kW, sum[u]);
        tile_gemm<Init::zero>(nq, g.d, nk, st, 1, kBq, v + j0 * ld + hc, ld, o, g.dp, nullptr, nullptr,
                              query_rows(g, i0, j0));
      } else {
        for (int u = 0; u < nqv; ++u) vstore(l + u * kW, vfma(vload(l + u * kW), vload(alpha + u * kW), sum[u]));
        tile_gemm<Init::scale>(nq, g.d, nk, st, 1, kBq, v + j0 * ld + hc, ld, o, g.dp, alpha, nullptr,
                               query_rows(g, i0, j0));
      }
      first = false;
    }
    // out = O / l; lse = ln 2 * (m + log2 l)
    for (int i = 0; i < nq; ++i)
      scale_row(out + (i0 + i) * ld + hc, o + static_cast<std::int64_t>(i) * g.dp, g.d, 1.f / l[i]);
    float* lse_h = lse + static_cast<std::int64_t>(h) * g.n + i0;
    for (int u = 0; u < nqv; ++u) {
      const int cnt = std::min(kW, nq - u * kW);
      const vf r = vmul(vset1(kLn2), vadd(vload(m + u * kW), vlog2(vload(l + u * kW))));
      if (cnt == kW)
        vstore(lse_h + u * kW, r);
      else
        vstorem(lse_h + u * kW, mask_first(cnt), r);
    }
  }
}

// ---- backward: one (segment, head) ------------------------------------------
void backward_task(const Geometry& g, std::int64_t s, int h, const float* q, const float* k, const float* v,
                   const float* out, const float* lse, const float* dout, float* dq, float* dk, float* dv) {
  const std::int64_t b = s * g.seg, e = std::min(g.n, b + g.seg), kb = std::max<std::int64_t>(0, b - g.mem);
  const std::int64_t ld = g.ld, hc = static_cast<std::int64_t>(h) * g.d;
  const std::size_t dkq = static_cast<std::size_t>(g.d) * kBq;
  float* qt = scratch(2 * dkq + 2 * kBk * kBq + static_cast<std::size_t>(kBq) * g.dp);
  float* dot = qt + dkq;         // dO^T [d][kBq]
  float* pt = dot + dkq;         // S^T then P^T [kBk][kBq]
  float* dst = pt + kBk * kBq;   // dP^T then dS^T [kBk][kBq]
  float* dqa = dst + kBk * kBq;  // dQ accumulator [kBq][dp]
  alignas(64) float lse2[kBq], dd[kBq];

  // This task owns rows [b, e) of head h in dk and dv.
  for (std::int64_t j = b; j < e; ++j) {
    scale_row(dk + j * ld + hc, nullptr, g.d, 0.f);
    scale_row(dv + j * ld + hc, nullptr, g.d, 0.f);
  }
  const vf vscale = vset1(g.scale);
  auto prefetch_queries = [&](std::int64_t i0) {
    const std::int64_t nn = std::min<std::int64_t>(kBq, e - i0);
    prefetch_rows(q + i0 * ld + hc, nn, ld, g.d);
    prefetch_rows(dout + i0 * ld + hc, nn, ld, g.d);
    prefetch_rows(out + i0 * ld + hc, nn, ld, g.d);
  };
  auto prefetch_keys = [&](std::int64_t j0) {
    const std::int64_t nn = std::min<std::int64_t>(kBk, e - j0);
    prefetch_rows(k + j0 * ld + hc, nn, ld, g.d);
    prefetch_rows(v + j0 * ld + hc, nn, ld, g.d);
  };
  prefetch_queries(b);
  prefetch_keys(kb);
  for (std::int64_t i0 = b; i0 < e; i0 += kBq) {
    const int nq = static_cast<int>(std::min<std::int64_t>(kBq, e - i0));
    const int nqv = (nq + kW - 1) / kW, qw = nqv * kW;
    pack_transposed(q + i0 * ld + hc, ld, nq, qw, g.d, g.scale * kLog2e, qt);
    pack_transposed(dout + i0 * ld + hc, ld, nq, qw, g.d, 1.f, dot);
    if (i0 + kBq < e) prefetch_queries(i0 + kBq);
    for (int i = 0; i < kBq; ++i) {
      lse2[i] = 0.f;
      dd[i] = 0.f;
    }
    for (int i = 0; i < nq; ++i) {
      lse2[i] = lse[static_cast<std::int64_t>(h) * g.n + i0 + i] * kLog2e;
      dd[i] = row_dot(out + (i0 + i) * ld + hc, dout + (i0 + i) * ld + hc, g.d);  // D_i = rowsum(dO o O)
    }
    const std::int64_t jend = g.causal ? std::min(e, i0 + nq) : e;
    bool first = true;
    for (std::int64_t j0 = kb; j0 < jend; j0 += kBk) {
      const int nk = static_cast<int>(std::min<std::int64_t>(kBk, jend - j0));
      const bool diag = g.causal && j0 + nk - 1 > i0;
      if (j0 + kBk < e) prefetch_keys(j0 + kBk);
      int seen[kQV];
      for (int u = 0; u < nqv; ++u) seen[u] = visible_keys(g, i0, j0, nk, u);
      scores(g, diag, nk, nqv, seen, k + j0 * ld + hc, qt, pt, nullptr, j0, i0);   // S^T
      scores(g, diag, nk, nqv, seen, v + j0 * ld + hc, dot, dst, nullptr, j0, i0);  // dP^T = V dO^T
      for (int j = 0; j < nk; ++j) {
        float* prow = pt + j * kBq;
        float* drow = dst + j * kBq;
        for (int u = 0; u < nqv; ++u) {
          if (j >= seen[u]) {
            vstore(prow + u * kW, vzero());
            vstore(drow + u * kW, vzero());
            continue;
          }
          vf x = vload(prow + u * kW);
          if (diag) x = vcausal(x, j0 + j, i0 + u * kW);
          const vf pr = vexp2(vsub(x, vload(lse2 + u * kW)));
          vstore(prow + u * kW, pr);
          // dS = scale * P o (dP - D)
          vstore(drow + u * kW, vmul(vscale, vmul(pr, vsub(vload(drow + u * kW), vload(dd + u * kW)))));
        }
      }
      // dQ += dS K
      if (first)
        tile_gemm<Init::zero>(nq, g.d, nk, dst, 1, kBq, k + j0 * ld + hc, ld, dqa, g.dp, nullptr, nullptr,
                              query_rows(g, i0, j0));
      else
        tile_gemm<Init::load>(nq, g.d, nk, dst, 1, kBq, k + j0 * ld + hc, ld, dqa, g.dp, nullptr, nullptr,
                              query_rows(g, i0, j0));
      first = false;
      // Keys of this segment only (the memory is stop-gradient).
      const std::int64_t js = std::max(j0, b);
      if (js < j0 + nk) {
        const int r0 = static_cast<int>(js - j0), nown = nk - r0;
        tile_gemm<Init::load>(nown, g.d, nq, pt + r0 * kBq, kBq, 1, dout + i0 * ld + hc, ld, dv + js * ld + hc, ld,
                              nullptr, nullptr, key_rows(g, i0, js));
        tile_gemm<Init::load>(nown, g.d, nq, dst + r0 * kBq, kBq, 1, q + i0 * ld + hc, ld, dk + js * ld + hc, ld,
                              nullptr, nullptr, key_rows(g, i0, js));
      }
    }
    for (int i = 0; i < nq; ++i)
      scale_row(dq + (i0 + i) * ld + hc, dqa + static_cast<std::int64_t>(i) * g.dp, g.d, 1.f);
  }
}

}  // namespace

void seg_attention_forward(const SegAttention& p, const float* q, const float* k, const float* v, float* out,
                           float* lse) {
  const Geometry g = geometry(p);
  if (g.n == 0) return;
  const std::int64_t tasks = g.segments() * g.heads;
#pragma omp parallel for schedule(dynamic, 1) if (tasks > 1)
  for (std::int64_t t = 0; t < tasks; ++t)
    forward_task(g, t / g.heads, static_cast<int>(t % g.heads), q, k, v, out, lse);
}

void seg_attention_backward(const SegAttention& p, const float* q, const float* k, const float* v, const float* out,
                            const float* lse, const float* dout, float* dq, float* dk, float* dv) {
  const Geometry g = geometry(p);
  if (g.n == 0) return;
  const std::int64_t tasks = g.segments() * g.heads;
#pragma omp parallel for schedule(dynamic, 1) if (tasks > 1)
  for (std::int64_t t = 0; t < tasks; ++t)
    backward_task(g, t / g.heads, static_cast<int>(t % g.heads), q, k, v, out, lse, dout, dq, dk, dv);
}

}  // namespace go::kernels
