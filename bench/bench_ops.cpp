// Bandwidth-bound ops of the policy (activations, broadcasting arithmetic,
// layer norm, softmax) in GB/s, next to the anchor: a STREAM-like copy of the
// same number of bytes with the same threads, measured in the same run. And the policy's
// categorical draws in draws/s, next to drawing sample by sample.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstring>
#include <span>
#include <vector>

#include "go/autograd/autograd.hpp"

namespace {

constexpr std::int64_t kCols = 128;

void report(benchmark::State& st, double bytes) {
  st.counters["GB"] = benchmark::Counter(bytes * 1e-9 * st.iterations(), benchmark::Counter::kIsRate);
  st.counters["threads"] = omp_get_max_threads();
}

go::Tensor input(std::int64_t n) {
  go::Rng rng(1);
  return go::Tensor::uniform(go::Shape{n, kCols}, rng, -1, 1);
}

// Anchor: read n x 128 floats, write them elsewhere.
void BM_copy_anchor(benchmark::State& st) {
  const std::int64_t n = st.range(0), total = n * kCols;
  go::Tensor a = input(n), b = go::Tensor::empty(a.shape());
  const float* src = a.f32();
  float* dst = b.f32();
  for (auto _ : st) {
#pragma omp parallel for simd
    for (std::int64_t i = 0; i < total; ++i) dst[i] = src[i];
    benchmark::DoNotOptimize(dst);
  }
  report(st, 2.0 * total * 4);
}

void BM_gelu_forward(benchmark::State& st) {
  const std::int64_t n = st.range(0);
  go::Tensor a = input(n), b = go::Tensor::empty(a.shape());
  for (auto _ : st) {
    go::kernels::unary_forward(go::kernels::Unary::gelu, a.f32(), b.f32(), a.numel());
    benchmark::DoNotOptimize(b.f32());
  }
  report(st, 2.0 * a.numel() * 4);
}

void BM_relu_forward(benchmark::State& st) {
  const std::int64_t n = st.range(0);
  go::Tensor a = input(n), b = go::Tensor::empty(a.shape());
  for (auto _ : st) {
    go::kernels::unary_forward(go::kernels::Unary::relu, a.f32(), b.f32(), a.numel());
    benchmark::DoNotOptimize(b.f32());
  }
  report(st, 2.0 * a.numel() * 4);
}

// x [n, 128] + bias [1, 128] through the autograd op (no graph recorded).
void BM_add_row_broadcast(benchmark::State& st) {
  const std::int64_t n = st.range(0);
  go::Variable a(input(n)), b(go::Tensor::ones(go::Shape{1, kCols}));
  for (auto _ : st) {
    go::Variable c = a + b;
    benchmark::DoNotOptimize(c.value().f32());
  }
  report(st, 2.0 * n * kCols * 4);
}

void BM_layer_norm_forward(benchmark::State& st) {
  const std::int64_t n = st.range(0);
  go::Tensor x = input(n), y = go::Tensor::empty(x.shape()), mu = go::Tensor::empty(go::Shape{n}),
             rs = go::Tensor::empty(go::Shape{n}), g = go::Tensor::ones(go::Shape{kCols}),
             b = go::Tensor::zeros(go::Shape{kCols});
  for (auto _ : st) {
    go::kernels::layer_norm_forward(x.f32(), g.f32(), b.f32(), y.f32(), mu.f32(), rs.f32(), n, kCols, 1e-5f);
    benchmark::DoNotOptimize(y.f32());
  }
  report(st, 2.0 * n * kCols * 4);
}

void BM_layer_norm_backward(benchmark::State& st) {
  const std::int64_t n = st.range(0);
  go::Tensor x = input(n), y = go::Tensor::empty(x.shape()), mu = go::Tensor::empty(go::Shape{n}),
             rs = go::Tensor::empty(go::Shape{n}), g = go::Tensor::ones(go::Shape{kCols}),
             b = go::Tensor::zeros(go::Shape{kCols}), dx = go::Tensor::empty(x.shape()),
             dg = go::Tensor::zeros(go::Shape{kCols}), db = go::Tensor::zeros(go::Shape{kCols});
  go::kernels::layer_norm_forward(x.f32(), g.f32(), b.f32(), y.f32(), mu.f32(), rs.f32(), n, kCols, 1e-5f);
  for (auto _ : st) {
    go::kernels::layer_norm_backward(x.f32(), g.f32(), mu.f32(), rs.f32(), y.f32(), dx.f32(), dg.f32(), db.f32(), n,
                                     kCols);
    benchmark::DoNotOptimize(dx.f32());
  }
  report(st, 3.0 * n * kCols * 4);  // read x and dy, write dx
}

void BM_softmax_forward(benchmark::State& st) {
  const std::int64_t n = st.range(0);
  go::Tensor x = input(n), y = go::Tensor::empty(x.shape());
  for (auto _ : st) {
    go::kernels::softmax_forward(x.f32(), y.f32(), n, kCols, false);
    benchmark::DoNotOptimize(y.f32());
  }
  report(st, 2.0 * n * kCols * 4);
}

// The policy's K samples of one task: K categorical draws per row of probabilities [n, a], in
// draws/s. Anchor: one sample_from_probs(probs, rng) per sample; the batched form draws the same
// actions (tests/test_ops.cpp), each row's cumulative sums made once for the K draws.
go::Tensor draw_probs(std::int64_t n, std::int64_t a) {
  go::Rng rng(3);
  return go::categorical_probs(go::Tensor::uniform(go::Shape{n, a}, rng, -2, 2));
}
std::vector<go::Rng> draw_rngs(std::int64_t k) {
  std::vector<go::Rng> r;
  for (std::int64_t j = 0; j < k; ++j) r.push_back(go::Rng(5).fork(static_cast<std::uint64_t>(j)));
  return r;
}
void report_draws(benchmark::State& st, std::int64_t n, std::int64_t k) {
  st.counters["draws"] = benchmark::Counter(static_cast<double>(n * k) * st.iterations(), benchmark::Counter::kIsRate);
}
void BM_draws_anchor_per_sample(benchmark::State& st) {
  const std::int64_t n = 80588, a = st.range(0), k = st.range(1);
  const go::Tensor probs = draw_probs(n, a);
  std::vector<go::Rng> rngs = draw_rngs(k);
  for (auto _ : st)
    for (go::Rng& r : rngs) benchmark::DoNotOptimize(go::sample_from_probs(probs, r).data<std::int32_t>());
  report_draws(st, n, k);
}
void BM_draws_batched(benchmark::State& st) {
  const std::int64_t n = 80588, a = st.range(0), k = st.range(1);
  const go::Tensor probs = draw_probs(n, a);
  std::vector<go::Rng> rngs = draw_rngs(k);
  for (auto _ : st) benchmark::DoNotOptimize(go::sample_from_probs(probs, std::span<go::Rng>(rngs)).size());
  report_draws(st, n, k);
}
void draw_sizes(benchmark::internal::Benchmark* b) {
  for (std::int64_t a : {2, 8, 16})
    for (std::int64_t k : {16, 128}) b->Args({a, k});
  b->ArgNames({"a", "K"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

void sizes(benchmark::internal::Benchmark* b) {
  for (std::int64_t n : {1000, 10000, 100000}) b->Arg(n);
  b->ArgName("n")->Unit(benchmark::kMicrosecond)->UseRealTime();
}

}  // namespace

BENCHMARK(BM_copy_anchor)->Apply(sizes);
BENCHMARK(BM_relu_forward)->Apply(sizes);
BENCHMARK(BM_gelu_forward)->Apply(sizes);
BENCHMARK(BM_add_row_broadcast)->Apply(sizes);
BENCHMARK(BM_layer_norm_forward)->Apply(sizes);
BENCHMARK(BM_layer_norm_backward)->Apply(sizes);
BENCHMARK(BM_softmax_forward)->Apply(sizes);
BENCHMARK(BM_draws_anchor_per_sample)->Apply(draw_sizes);
BENCHMARK(BM_draws_batched)->Apply(draw_sizes);
