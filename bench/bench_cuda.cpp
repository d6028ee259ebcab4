// CUDA backend, first increment (go/cuda/kernels.hpp): our CSR aggregation kernels next to
// cuSPARSE's generic SpMM (CSR, unit values = the sum aggregation) on the same graph, and GEMM
// through cuBLAS. Each iteration launches once and waits for the device (real time).
//
// Aggregation arguments: n (nodes; n_dst = n_src = n), d (hidden size); uniform random sources
// with Poisson-like in-degree of average 8, as graph 0 of bench_aggregate.cpp.
// Counters (rates per second):
//   GB/s     the byte model of bench_aggregate.cpp: a d-float row read per edge, the output
//            written, the index arrays (4 B per edge, 8 B per row; cuSPARSE: 4 B per row and
//            4 B of value per edge), argmax written (max forward) or read per edge (max
//            backward). One pass each: no cache reuse assumed.
//   GFLOP/s  one add per edge per feature (nnz * d) for aggregation; 2 m n k for GEMM.
// BM_cuda_copy/<MiB>: cudaMemcpy device to device, GB/s counting bytes read and written: the
// bandwidth anchor the aggregation is measured against in the same run.
// Segment attention, arguments n/heads/head_dim/causal, seg_len = mem_len = 128: GFLOP/s of the
// visible (query, key) pairs only, as bench_attention counts them (attention_pairs.hpp):
// forward 4 d P, backward 2 d (3 P + 2 P_own). Its anchor, BM_cublas_scores: the forward's first
// product for every query at once, [n heads x d] . [d x 256] (each query against 256 keys), as one
// cuBLAS GEMM, which writes the scores out where the fused kernel keeps them in registers.
// Without a CUDA device (or without the CUDA backend) every benchmark reports
// "no CUDA device: <why>" through SkipWithError.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "go/core/csr.hpp"
#include "go/core/cuda.hpp"
#include "go/core/rng.hpp"
#include "go/core/tensor.hpp"
#include "go/cuda/device.hpp"
#include "go/cuda/kernels.hpp"
#include "go/cuda/tensor.hpp"
#include "attention_pairs.hpp"

namespace {

using go::kernels::Reduce;
using i64 = std::int64_t;

bool skip_without_device(benchmark::State& state) {
  if (go::cuda_device_count() > 0) return false;
  state.SkipWithError(("no CUDA device: " + go::cuda_describe()).c_str());
  return true;
}

go::Csr random_graph(i64 n, std::uint64_t seed) {
  go::Rng rng(seed);
  std::vector<std::int32_t> dst, src;
  for (i64 i = 0; i < n; ++i) {
    const auto deg = static_cast<i64>(rng.uniform_int(17));  // 0..16, mean 8
    for (i64 e = 0; e < deg; ++e) {
      dst.push_back(static_cast<std::int32_t>(i));
      src.push_back(static_cast<std::int32_t>(rng.uniform_int(static_cast<std::uint64_t>(n))));
    }
  }
  return go::Csr::from_edges(n, n, std::span<const std::int32_t>(dst), std::span<const std::int32_t>(src));
}

void set_rates(benchmark::State& state, double bytes, double flops) {
  state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

template <Reduce R, bool Backward>
void BM_cuda_aggregate(benchmark::State& state) {
  if (skip_without_device(state)) return;
  const i64 n = state.range(0), d = state.range(1);
  const go::Csr g = random_graph(n, 42);
  const go::Csr t = g.transpose();
  go::Rng rng(1);
  const auto x = go::cuda::to_device(go::Tensor::uniform(go::Shape{n, d}, rng, -1.f, 1.f));
  const auto dout = go::cuda::to_device(go::Tensor::uniform(go::Shape{n, d}, rng, -1.f, 1.f));
  const auto rp = go::cuda::to_device(g.row_ptr), ci = go::cuda::to_device(g.col_idx);
  const auto trp = go::cuda::to_device(t.row_ptr), tci = go::cuda::to_device(t.col_idx);
  auto out = go::cuda::device_empty(go::Shape{n, d});
  auto dx = go::cuda::device_empty(go::Shape{n, d});
  auto am = go::cuda::device_empty(go::Shape{n, d}, go::DType::i32);
  // The max backward needs the forward's argmax.
  if (R == Reduce::max)
    go::cuda::csr_aggregate_forward(R, rp.data<i64>(), ci.data<std::int32_t>(), n, x.data<float>(), d,
                                    out.data<float>(), am.data<std::int32_t>());
  go::cuda::synchronize();
  for (auto _ : state) {
    if (Backward)
      go::cuda::csr_aggregate_backward(R, rp.data<i64>(), trp.data<i64>(), tci.data<std::int32_t>(), n, n,
                                       dout.data<float>(), d, R == Reduce::max ? am.data<std::int32_t>() : nullptr,
                                       dx.data<float>());
    else
      go::cuda::csr_aggregate_forward(R, rp.data<i64>(), ci.data<std::int32_t>(), n, x.data<float>(), d,
                                      out.data<float>(), R == Reduce::max ? am.data<std::int32_t>() : nullptr);
    go::cuda::synchronize();
  }
  const double nnz = static_cast<double>(g.nnz()), rows = static_cast<double>(n), feats = static_cast<double>(d);
  double bytes = nnz * feats * 4 + rows * feats * 4 + nnz * 4 + (rows + 1) * 8;
  if (R == Reduce::max) bytes += Backward ? nnz * feats * 4 : rows * feats * 4;
  set_rates(state, bytes, nnz * feats);
}

void BM_cusparse_spmm(benchmark::State& state) {
  if (skip_without_device(state)) return;
  const i64 n = state.range(0), d = state.range(1);
  const go::Csr g = random_graph(n, 42);
  std::vector<std::int32_t> rp32;
  for (const i64 v : g.row_ptr.to_vector<i64>()) rp32.push_back(static_cast<std::int32_t>(v));
  go::Rng rng(1);
  const auto x = go::cuda::to_device(go::Tensor::uniform(go::Shape{n, d}, rng, -1.f, 1.f));
  const auto rp = go::cuda::to_device(go::Tensor::from_vector(rp32, go::Shape{n + 1}));
  const auto ci = go::cuda::to_device(g.col_idx);
  const auto val = go::cuda::to_device(go::Tensor::ones(go::Shape{g.nnz()}));
  auto out = go::cuda::device_empty(go::Shape{n, d});
  go::cuda::CsrSpmm spmm(rp.data<std::int32_t>(), ci.data<std::int32_t>(), val.data<float>(), n, n, g.nnz(),
                         x.data<float>(), d, out.data<float>());
  spmm.run();  // warm-up (cuSPARSE may set up on the first call)
  go::cuda::synchronize();
  for (auto _ : state) {
    spmm.run();
    go::cuda::synchronize();
  }
  const double nnz = static_cast<double>(g.nnz()), rows = static_cast<double>(n), feats = static_cast<double>(d);
  set_rates(state, nnz * feats * 4 + rows * feats * 4 + nnz * 8 + (rows + 1) * 4, nnz * feats);
}

void BM_cublas_gemm(benchmark::State& state) {
  if (skip_without_device(state)) return;
  const i64 m = state.range(0), n = state.range(1), k = state.range(2);
  go::Rng rng(2);
  const auto a = go::cuda::to_device(go::Tensor::uniform(go::Shape{m, k}, rng, -1.f, 1.f));
  const auto b = go::cuda::to_device(go::Tensor::uniform(go::Shape{k, n}, rng, -1.f, 1.f));
  auto c = go::cuda::device_zeros(go::Shape{m, n});
  go::cuda::gemm(false, false, m, n, k, 1.f, a.data<float>(), k, b.data<float>(), n, 0.f, c.data<float>(), n);
  go::cuda::synchronize();  // handle creation and warm-up outside the timing
  for (auto _ : state) {
    go::cuda::gemm(false, false, m, n, k, 1.f, a.data<float>(), k, b.data<float>(), n, 0.f, c.data<float>(), n);
    go::cuda::synchronize();
  }
  set_rates(state, 4.0 * static_cast<double>(m * k + k * n + m * n), 2.0 * static_cast<double>(m) * n * k);
}

go::kernels::SegAttention attention_params(benchmark::State& state) {
  go::kernels::SegAttention p;
  p.n = state.range(0);
  p.heads = static_cast<std::int32_t>(state.range(1));
  p.head_dim = static_cast<std::int32_t>(state.range(2));
  p.causal = state.range(3) != 0;
  p.seg_len = 128;
  p.mem_len = 128;
  return p;
}

void BM_cuda_attention(benchmark::State& state, bool backward) {
  if (skip_without_device(state)) return;
  const go::kernels::SegAttention p = attention_params(state);
  const go::Shape rows{p.n, static_cast<i64>(p.heads) * p.head_dim};
  go::Rng rng(7);
  const auto q = go::cuda::to_device(go::Tensor::uniform(rows, rng, -1.f, 1.f));
  const auto k = go::cuda::to_device(go::Tensor::uniform(rows, rng, -1.f, 1.f));
  const auto v = go::cuda::to_device(go::Tensor::uniform(rows, rng, -1.f, 1.f));
  const auto dout = go::cuda::to_device(go::Tensor::uniform(rows, rng, -1.f, 1.f));
  auto out = go::cuda::device_empty(rows), lse = go::cuda::device_empty(go::Shape{p.heads, p.n});
  auto dq = go::cuda::device_empty(rows), dk = go::cuda::device_empty(rows), dv = go::cuda::device_empty(rows);
  auto run = [&] {
    if (!backward) {
      go::cuda::seg_attention_forward(p, q.data<float>(), k.data<float>(), v.data<float>(), out.data<float>(),
                                      lse.data<float>());
    } else {
      go::cuda::seg_attention_backward(p, q.data<float>(), k.data<float>(), v.data<float>(), out.data<float>(),
                                       lse.data<float>(), dout.data<float>(), dq.data<float>(), dk.data<float>(),
                                       dv.data<float>());
    }
  };
  go::cuda::seg_attention_forward(p, q.data<float>(), k.data<float>(), v.data<float>(), out.data<float>(),
                                  lse.data<float>());
  run();  // warm-up (the backward's scratch)
  go::cuda::synchronize();
  for (auto _ : state) {
    run();
    go::cuda::synchronize();
  }
  const go::bench::Pairs c = go::bench::count_pairs(p);
  const double d = p.head_dim * static_cast<double>(p.heads);
  set_rates(state, 0.0, backward ? 2.0 * d * (3 * c.all + 2 * c.own) : 4.0 * d * c.all);
}
void BM_cuda_attention_forward(benchmark::State& state) { BM_cuda_attention(state, false); }
void BM_cuda_attention_backward(benchmark::State& state) { BM_cuda_attention(state, true); }

// The attention's anchor: S = Q K^T for all n * heads queries against 256 keys, one cuBLAS GEMM.
void BM_cublas_scores(benchmark::State& state) {
  if (skip_without_device(state)) return;
  const go::kernels::SegAttention p = attention_params(state);
  const i64 m = p.n * p.heads, n = 256, kd = p.head_dim;
  go::Rng rng(2);
  const auto a = go::cuda::to_device(go::Tensor::uniform(go::Shape{m, kd}, rng, -1.f, 1.f));
  const auto b = go::cuda::to_device(go::Tensor::uniform(go::Shape{n, kd}, rng, -1.f, 1.f));
  auto c = go::cuda::device_empty(go::Shape{m, n});
  go::cuda::gemm(false, true, m, n, kd, 1.f, a.data<float>(), kd, b.data<float>(), kd, 0.f, c.data<float>(), n);
  go::cuda::synchronize();
  for (auto _ : state) {
    go::cuda::gemm(false, true, m, n, kd, 1.f, a.data<float>(), kd, b.data<float>(), kd, 0.f, c.data<float>(), n);
    go::cuda::synchronize();
  }
  set_rates(state, 4.0 * static_cast<double>(m * kd + n * kd + m * n), 2.0 * static_cast<double>(m) * n * kd);
}

// The anchor for the memory-bound kernels: a device-to-device copy (bytes read + written), the
// device's own bandwidth in this run.
void BM_cuda_copy(benchmark::State& state) {
  if (skip_without_device(state)) return;
  const auto bytes = static_cast<std::size_t>(state.range(0)) << 20;
  go::cuda::DeviceBuffer src(bytes), dst(bytes);
  src.zero();  // cudaMemset: the copy's speed does not depend on the values
  go::cuda::copy_device_to_device(dst.get(), src.get(), bytes);
  go::cuda::synchronize();
  for (auto _ : state) {
    go::cuda::copy_device_to_device(dst.get(), src.get(), bytes);
    go::cuda::synchronize();
  }
  set_rates(state, 2.0 * static_cast<double>(bytes), 0);
}

void agg_args(benchmark::internal::Benchmark* b) {
  for (const i64 n : {16384, 262144, 1048576})
    for (const i64 d : {64, 256}) b->Args({n, d});
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

}  // namespace

BENCHMARK(BM_cuda_aggregate<Reduce::sum, false>)->Apply(agg_args);
BENCHMARK(BM_cuda_aggregate<Reduce::mean, false>)->Apply(agg_args);
BENCHMARK(BM_cuda_aggregate<Reduce::max, false>)->Apply(agg_args);
BENCHMARK(BM_cuda_aggregate<Reduce::sum, true>)->Apply(agg_args);
BENCHMARK(BM_cuda_aggregate<Reduce::mean, true>)->Apply(agg_args);
BENCHMARK(BM_cuda_aggregate<Reduce::max, true>)->Apply(agg_args);
BENCHMARK(BM_cusparse_spmm)->Apply(agg_args);
BENCHMARK(BM_cuda_copy)->Arg(64)->Arg(1024)->UseRealTime()->Unit(benchmark::kMicrosecond);
// The shipped policy's shape (80,000 rows, 4 heads of 16, causal) and a wider one.
#define GO_ATTENTION_ARGS ->Args({80000, 4, 16, 1})->Args({16384, 4, 64, 0})->UseRealTime()->Unit(benchmark::kMicrosecond)
BENCHMARK(BM_cuda_attention_forward) GO_ATTENTION_ARGS;
BENCHMARK(BM_cuda_attention_backward) GO_ATTENTION_ARGS;
BENCHMARK(BM_cublas_scores) GO_ATTENTION_ARGS;
#undef GO_ATTENTION_ARGS
BENCHMARK(BM_cublas_gemm)
    ->Args({256, 256, 256})
    ->Args({1024, 1024, 1024})
    ->Args({4096, 4096, 4096})
    ->Args({16384, 256, 256})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
