// Segment-recurrent attention (go::kernels::seg_attention_*) against its anchor:
// oneDNN sgemm (go::kernels::gemm) on the same products, per segment and head,
// in the same OpenMP loop over (segment, head) that the fused kernel uses.
//
// FLOPs count only unmasked work: with P = the number of (query, visible key)
// pairs of a head (for non-causal attention P = sum over segments of L * (L + M),
// M the memory rows actually available to that segment),
//   forward  = 4 * d * P                          (S = Q K^T and O = P V)
//   backward = 2 * d * (3 * P + 2 * P_own)        (S, dP, dQ over all visible keys;
//                                                  dK, dV over the segment's own keys)
// per head. The GEMM anchors compute exactly these products as dense GEMMs
// (for non-causal attention their FLOPs are the same numbers).
//
// Arguments: /n/hidden/causal; hidden = heads * head_dim with head_dim 32 (hidden 64
// and 128) or 64 (hidden 256); seg_len = mem_len = 128.
#include <benchmark/benchmark.h>

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "go/core/rng.hpp"
#include "go/core/tensor.hpp"
#include "go/kernels/attention.hpp"
#include "go/kernels/gemm.hpp"
#include "attention_pairs.hpp"

namespace {

using go::kernels::SegAttention;
using go::bench::count_pairs;
using go::bench::Pairs;

// head_dim 0: 32, or 64 from hidden 256 on.
SegAttention make_params(std::int64_t n, std::int64_t hidden, bool causal, std::int64_t head_dim) {
  SegAttention p;
  p.n = n;
  p.head_dim = static_cast<std::int32_t>(head_dim > 0 ? head_dim : hidden >= 256 ? 64 : 32);
  p.heads = static_cast<std::int32_t>(hidden / p.head_dim);
  p.seg_len = 128;
  p.mem_len = 128;
  p.causal = causal;
  return p;
}

struct Inputs {
  go::Tensor q, k, v, out, lse, dout, dq, dk, dv;
  explicit Inputs(const SegAttention& p) {
    go::Rng rng(7);
    const go::Shape s{p.n, static_cast<std::int64_t>(p.heads) * p.head_dim};
    q = go::Tensor::uniform(s, rng, -1.f, 1.f);
    k = go::Tensor::uniform(s, rng, -1.f, 1.f);
    v = go::Tensor::uniform(s, rng, -1.f, 1.f);
    dout = go::Tensor::uniform(s, rng, -1.f, 1.f);
    out = go::Tensor::zeros(s);
    dq = go::Tensor::zeros(s);
    dk = go::Tensor::zeros(s);
    dv = go::Tensor::zeros(s);
    lse = go::Tensor::zeros({p.heads, p.n});
  }
};

void set_counters(benchmark::State& state, const SegAttention& p, double flops) {
  state.counters["GFLOPs"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = omp_get_max_threads();
  state.counters["heads"] = p.heads;
  state.counters["head_dim"] = p.head_dim;
}

void BM_attention_forward(benchmark::State& state) {
  const SegAttention p = make_params(state.range(0), state.range(1), state.range(2) != 0, state.range(3));
  Inputs x(p);
  for (auto _ : state) {
    go::kernels::seg_attention_forward(p, x.q.f32(), x.k.f32(), x.v.f32(), x.out.f32(), x.lse.f32());
    benchmark::ClobberMemory();
  }
  set_counters(state, p, 4.0 * p.head_dim * p.heads * count_pairs(p).all);
}

void BM_attention_backward(benchmark::State& state) {
  const SegAttention p = make_params(state.range(0), state.range(1), state.range(2) != 0, state.range(3));
  Inputs x(p);
  go::kernels::seg_attention_forward(p, x.q.f32(), x.k.f32(), x.v.f32(), x.out.f32(), x.lse.f32());
  for (auto _ : state) {
    go::kernels::seg_attention_backward(p, x.q.f32(), x.k.f32(), x.v.f32(), x.out.f32(), x.lse.f32(), x.dout.f32(),
                                        x.dq.f32(), x.dk.f32(), x.dv.f32());
    benchmark::ClobberMemory();
  }
  const Pairs c = count_pairs(p);
  set_counters(state, p, 2.0 * p.head_dim * p.heads * (3 * c.all + 2 * c.own));
}

// The anchor: per (segment, head), S = Q K^T ([L x d] . [d x (L+M)]) then
// O = S V ([L x (L+M)] . [(L+M) x d]) through go::kernels::gemm (oneDNN), in the
// same parallel loop as the fused kernel (each call runs on its thread).
void BM_gemm_anchor_forward(benchmark::State& state) {
  const SegAttention p = make_params(state.range(0), state.range(1), false, state.range(3));
  Inputs x(p);
  const std::int64_t ld = static_cast<std::int64_t>(p.heads) * p.head_dim, nseg = (p.n + p.seg_len - 1) / p.seg_len;
  std::vector<std::vector<float>> ws(omp_get_max_threads(),
                                     std::vector<float>(static_cast<std::size_t>(p.seg_len * (p.seg_len + p.mem_len))));
  for (auto _ : state) {
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t t = 0; t < nseg * p.heads; ++t) {
      const std::int64_t s = t / p.heads, hc = (t % p.heads) * p.head_dim;
      const std::int64_t b = s * p.seg_len, e = std::min(p.n, b + p.seg_len),
                         kb = std::max<std::int64_t>(0, b - p.mem_len);
      const std::int64_t L = e - b, Lk = e - kb;
      float* S = ws[omp_get_thread_num()].data();
      go::kernels::gemm(false, true, L, Lk, p.head_dim, 1.f, x.q.f32() + b * ld + hc, ld, x.k.f32() + kb * ld + hc, ld,
                        0.f, S, Lk);
      go::kernels::gemm(false, false, L, p.head_dim, Lk, 1.f, S, Lk, x.v.f32() + kb * ld + hc, ld, 0.f,
                        x.out.f32() + b * ld + hc, ld);
    }
    benchmark::ClobberMemory();
  }
  set_counters(state, p, 4.0 * p.head_dim * p.heads * count_pairs(p).all);
}

// The backward's five products as GEMMs: S = Q K^T, dP = dO V^T, dQ = dS K (all visible
// keys), dK = dS_own^T Q, dV = P_own^T dO (the segment's own keys).
void BM_gemm_anchor_backward(benchmark::State& state) {
  const SegAttention p = make_params(state.range(0), state.range(1), false, state.range(3));
  Inputs x(p);
  const std::int64_t ld = static_cast<std::int64_t>(p.heads) * p.head_dim, nseg = (p.n + p.seg_len - 1) / p.seg_len;
  const std::size_t tile = static_cast<std::size_t>(p.seg_len * (p.seg_len + p.mem_len));
  std::vector<std::vector<float>> ws(omp_get_max_threads(), std::vector<float>(2 * tile));
  for (auto _ : state) {
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t t = 0; t < nseg * p.heads; ++t) {
      const std::int64_t s = t / p.heads, hc = (t % p.heads) * p.head_dim;
      const std::int64_t b = s * p.seg_len, e = std::min(p.n, b + p.seg_len),
                         kb = std::max<std::int64_t>(0, b - p.mem_len);
      const std::int64_t L = e - b, Lk = e - kb, d = p.head_dim;
      float* S = ws[omp_get_thread_num()].data();
      float* dP = S + tile;
      const float *q = x.q.f32() + b * ld + hc, *k = x.k.f32() + kb * ld + hc, *v = x.v.f32() + kb * ld + hc;
      const float* dO = x.dout.f32() + b * ld + hc;
      go::kernels::gemm(false, true, L, Lk, d, 1.f, q, ld, k, ld, 0.f, S, Lk);
      go::kernels::gemm(false, true, L, Lk, d, 1.f, dO, ld, v, ld, 0.f, dP, Lk);
      go::kernels::gemm(false, false, L, d, Lk, 1.f, dP, Lk, k, ld, 0.f, x.dq.f32() + b * ld + hc, ld);
      const std::int64_t off = b - kb;  // the own keys' columns in S and dP
      go::kernels::gemm(true, false, L, d, L, 1.f, dP + off, Lk, q, ld, 0.f, x.dk.f32() + b * ld + hc, ld);
      go::kernels::gemm(true, false, L, d, L, 1.f, S + off, Lk, dO, ld, 0.f, x.dv.f32() + b * ld + hc, ld);
    }
    benchmark::ClobberMemory();
  }
  const Pairs c = count_pairs(p);
  set_counters(state, p, 2.0 * p.head_dim * p.heads * (3 * c.all + 2 * c.own));
}

// The machine's large-GEMM rate (oneDNN, all threads): the ceiling of both.
void BM_gemm_peak(benchmark::State& state) {
  const std::int64_t m = state.range(0);
  go::Rng rng(3);
  const go::Tensor a = go::Tensor::uniform({m, m}, rng), b = go::Tensor::uniform({m, m}, rng);
  go::Tensor c = go::Tensor::zeros({m, m});
  for (auto _ : state) {
    go::kernels::gemm(false, false, m, m, m, 1.f, a.f32(), m, b.f32(), m, 0.f, c.f32(), m);
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPs"] = benchmark::Counter(2.0 * m * m * m * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = omp_get_max_threads();
}

void grid(benchmark::internal::Benchmark* b, bool with_causal) {
  for (std::int64_t n : {1000, 10000, 100000})
    for (std::int64_t hidden : {64, 128, 256}) {
      b->Args({n, hidden, 0, 0});
      if (with_causal) b->Args({n, hidden, 1, 0});
    }
  // The shipped policy's shape: hidden 64 as 4 heads of 16, on an 80,000-op graph.
  b->Args({80000, 64, 0, 16});
  if (with_causal) b->Args({80000, 64, 1, 16});
  b->ArgNames({"n", "hidden", "causal", "head_dim"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

}  // namespace

BENCHMARK(BM_attention_forward)->Apply([](auto* b) { grid(b, true); });
BENCHMARK(BM_gemm_anchor_forward)->Apply([](auto* b) { grid(b, false); });
BENCHMARK(BM_attention_backward)->Apply([](auto* b) { grid(b, true); });
BENCHMARK(BM_gemm_anchor_backward)->Apply([](auto* b) { grid(b, false); });
BENCHMARK(BM_gemm_peak)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();
