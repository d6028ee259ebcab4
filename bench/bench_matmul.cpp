// Dense products at the policy's shapes: node features [n, d] times weights
// [d, d_out]. Ours is oneDNN's sgemm behind go::kernels::gemm; the anchor is
// Eigen's product on the same data and threads, measured in the same run.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <Eigen/Core>

#include "go/autograd/autograd.hpp"
#include "go/kernels/gemm.hpp"

namespace {

struct Data {
  go::Tensor a, b, c;
  Data(std::int64_t n, std::int64_t d, std::int64_t e) {
    go::Rng rng(1);
    a = go::Tensor::uniform(go::Shape{n, d}, rng, -1, 1);
    b = go::Tensor::uniform(go::Shape{d, e}, rng, -1, 1);
    c = go::Tensor::zeros(go::Shape{n, e});
  }
};

void report(benchmark::State& st, double flops) {
  st.counters["GFLOP"] = benchmark::Counter(flops * 1e-9 * st.iterations(), benchmark::Counter::kIsRate);
  st.counters["threads"] = omp_get_max_threads();
}

void BM_gemm_onednn(benchmark::State& st) {
  const std::int64_t n = st.range(0), d = st.range(1);
  Data x(n, d, d);
  for (auto _ : st) {
    go::kernels::gemm(false, false, n, d, d, 1.f, x.a.f32(), d, x.b.f32(), d, 0.f, x.c.f32(), d);
    benchmark::DoNotOptimize(x.c.f32());
  }
  report(st, 2.0 * n * d * d);
}

void BM_gemm_eigen_anchor(benchmark::State& st) {
  const std::int64_t n = st.range(0), d = st.range(1);
  Data x(n, d, d);
  Eigen::setNbThreads(omp_get_max_threads());
  for (auto _ : st) {
    go::kernels::gemm_eigen(false, false, n, d, d, 1.f, x.a.f32(), d, x.b.f32(), d, 0.f, x.c.f32(), d);
    benchmark::DoNotOptimize(x.c.f32());
  }
  report(st, 2.0 * n * d * d);
}

// The autograd op: forward and backward of y = x W (three GEMMs).
void BM_matmul_autograd_fwd_bwd(benchmark::State& st) {
  const std::int64_t n = st.range(0), d = st.range(1);
  Data x(n, d, d);
  go::Variable a(x.a, true), w(x.b, true);
  const go::Tensor seed = go::Tensor::ones(go::Shape{n, d});
  for (auto _ : st) {
    a.zero_grad();
    w.zero_grad();
    go::matmul(a, w).backward(seed);
    benchmark::DoNotOptimize(w.grad().f32());
  }
  report(st, 3 * 2.0 * n * d * d);
}

void shapes(benchmark::internal::Benchmark* b) {
  for (std::int64_t n : {1000, 10000, 100000})
    for (std::int64_t d : {64, 128, 256}) b->Args({n, d});
  // Warm-up: at n = 100,000 one iteration can outlast --benchmark_min_time, and a lone first
  // iteration pays oneDNN's kernel generation and the first touch of 50-100 MB of fresh pages
  // (the autograd row read 3x slow for that alone).
  b->ArgNames({"n", "d"})->Unit(benchmark::kMicrosecond)->UseRealTime()->MinWarmUpTime(0.1);
}

}  // namespace

BENCHMARK(BM_gemm_onednn)->Apply(shapes);
BENCHMARK(BM_gemm_eigen_anchor)->Apply(shapes);
BENCHMARK(BM_matmul_autograd_fwd_bwd)->Apply(shapes);
