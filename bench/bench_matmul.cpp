// Dense products at the policy's shapes: node features [n, d] times weights
// [d, d_out]. Ours is oneDNN's sgemm behind go::kernels::gemm; the anchor is
// Eigen's product on the same data and threads, measured in the same run.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <Eigen/Core>

#include "go/autograd/autograd.hpp"
#include "go/kernels/gemm.hpp"
#include "go/kernels/math.hpp"
#include "go/kernels/rowwise.hpp"
#include "go/nn/functional.hpp"

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

// Weight gradients dW = X^T G: a small C [d_in, d_out] summed over a long inner dimension n (every
// layer's backward), gemm's k-chunked split against Eigen's product on the same data and threads.
struct WeightGradData {
  go::Tensor x, g, dw;
  WeightGradData(std::int64_t n, std::int64_t din, std::int64_t dout) {
    go::Rng rng(2);
    x = go::Tensor::uniform(go::Shape{n, din}, rng, -1, 1);
    g = go::Tensor::uniform(go::Shape{n, dout}, rng, -1, 1);
    dw = go::Tensor::zeros(go::Shape{din, dout});
  }
};

void BM_weight_grad_onednn(benchmark::State& st) {
  const std::int64_t n = st.range(0), din = st.range(1), dout = st.range(2);
  WeightGradData w(n, din, dout);
  for (auto _ : st) {
    go::kernels::gemm(true, false, din, dout, n, 1.f, w.x.f32(), din, w.g.f32(), dout, 0.f, w.dw.f32(), dout);
    benchmark::DoNotOptimize(w.dw.f32());
  }
  report(st, 2.0 * n * din * dout);
}

void BM_weight_grad_eigen_anchor(benchmark::State& st) {
  const std::int64_t n = st.range(0), din = st.range(1), dout = st.range(2);
  WeightGradData w(n, din, dout);
  Eigen::setNbThreads(omp_get_max_threads());
  for (auto _ : st) {
    go::kernels::gemm_eigen(true, false, din, dout, n, 1.f, w.x.f32(), din, w.g.f32(), dout, 0.f, w.dw.f32(), dout);
    benchmark::DoNotOptimize(w.dw.f32());
  }
  report(st, 2.0 * n * din * dout);
}

// The backward of the attention blocks' pre-norm feed-forward (x [n, 64] -> LN -> 256 -> gelu -> 64):
// kernels::feed_forward_backward's tiles against the same steps over all rows one after another
// (how nn::mlp_gelu's backward ran before: gelu and gelu' into [n, 256] buffers, the column sums,
// four gemm calls, LN recomputed and back-propagated), on the same data and threads. GFLOP/s
// counts the four products.
struct FeedForwardData {
  std::int64_t n, in, hid, out;
  go::Tensor x, w1, b1, w2, b2, gamma, beta, mean, rstd, pre, dy, dx, dw1, db1, dw2, db2, dgamma, dbeta;
  FeedForwardData(std::int64_t n_, std::int64_t in_, std::int64_t hid_, std::int64_t out_)
      : n(n_), in(in_), hid(hid_), out(out_) {
    go::Rng rng(3);
    using go::Shape;
    using go::Tensor;
    x = Tensor::uniform(Shape{n, in}, rng, -2, 2);
    w1 = Tensor::uniform(Shape{in, hid}, rng, -0.2f, 0.2f);
    b1 = Tensor::uniform(Shape{hid}, rng, -0.1f, 0.1f);
    w2 = Tensor::uniform(Shape{hid, out}, rng, -0.1f, 0.1f);
    b2 = Tensor::zeros(Shape{out});
    gamma = Tensor::ones(Shape{in});
    beta = Tensor::zeros(Shape{in});
    mean = Tensor::empty(Shape{n});
    rstd = Tensor::empty(Shape{n});
    Tensor xn = Tensor::empty(Shape{n, in}), y = Tensor::empty(Shape{n, out});
    go::kernels::layer_norm_forward(x.f32(), gamma.f32(), beta.f32(), xn.f32(), mean.f32(), rstd.f32(), n, in, 1e-5f);
    pre = Tensor::empty(Shape{n, hid});
    go::kernels::feed_forward(n, in, hid, out, xn.f32(), w1.f32(), b1.f32(), w2.f32(), b2.f32(), pre.f32(), y.f32(),
                              false);
    dy = Tensor::uniform(Shape{n, out}, rng, -1, 1);
    dx = Tensor::empty(Shape{n, in});
    dw1 = Tensor::empty(Shape{in, hid});
    db1 = Tensor::empty(Shape{hid});
    dw2 = Tensor::empty(Shape{hid, out});
    db2 = Tensor::empty(Shape{out});
    dgamma = Tensor::empty(Shape{in});
    dbeta = Tensor::empty(Shape{in});
  }
  double flops() const { return 4 * 2.0 * static_cast<double>(n) * static_cast<double>(in) * static_cast<double>(hid); }
};

void BM_feed_forward_backward(benchmark::State& st) {
  FeedForwardData d(st.range(0), 64, 256, 64);
  const go::kernels::FeedForwardNorm norm{d.gamma.f32(), d.beta.f32(), d.mean.f32(), d.rstd.f32(), 1e-5f};
  go::kernels::FeedForwardGrads g;
  g.dx = d.dx.f32();
  g.dw1 = d.dw1.f32();
  g.db1 = d.db1.f32();
  g.dw2 = d.dw2.f32();
  g.db2 = d.db2.f32();
  g.dgamma = d.dgamma.f32();
  g.dbeta = d.dbeta.f32();
  for (auto _ : st) {
    go::kernels::feed_forward_backward(d.n, d.in, d.hid, d.out, d.x.f32(), &norm, d.w1.f32(), d.w2.f32(), d.pre.f32(),
                                       d.dy.f32(), g);
    benchmark::DoNotOptimize(d.dx.f32());
  }
  report(st, d.flops());
}

void BM_feed_forward_backward_steps_anchor(benchmark::State& st) {
  FeedForwardData d(st.range(0), 64, 256, 64);
  const std::int64_t n = d.n, in = d.in, hid = d.hid, out = d.out, m = n * hid;
  using go::Tensor;
  for (auto _ : st) {
    Tensor act = Tensor::empty(d.pre.shape()), dg = Tensor::empty(d.pre.shape());
    const float* pp = d.pre.f32();
    float* pa = act.f32();
    float* pdg = dg.f32();
#pragma omp parallel for simd
    for (std::int64_t i = 0; i < m; ++i) {
      const float e = go::kernels::gelu_erf(pp[i]);
      pa[i] = go::kernels::gelu_of(pp[i], e);
      pdg[i] = go::kernels::gelu_df_of(pp[i], e);
    }
    go::nn::detail::column_sum_into(d.dy.f32(), n, out, d.db2.f32(), false);
    go::kernels::gemm(true, false, hid, out, n, 1.f, pa, hid, d.dy.f32(), out, 0.f, d.dw2.f32(), out);
    float* pd = act.f32();  // d act over the activation, then d pre in place
    go::kernels::gemm(false, true, n, hid, out, 1.f, d.dy.f32(), out, d.w2.f32(), out, 0.f, pd, hid);
#pragma omp parallel for simd
    for (std::int64_t i = 0; i < m; ++i) pd[i] *= pdg[i];
    go::nn::detail::column_sum_into(pd, n, hid, d.db1.f32(), false);
    Tensor xn = Tensor::empty(go::Shape{n, in}), m2 = Tensor::empty(go::Shape{n}), r2 = Tensor::empty(go::Shape{n});
    go::kernels::layer_norm_forward(d.x.f32(), d.gamma.f32(), d.beta.f32(), xn.f32(), m2.f32(), r2.f32(), n, in, 1e-5f);
    go::kernels::gemm(true, false, in, hid, n, 1.f, xn.f32(), in, pd, hid, 0.f, d.dw1.f32(), hid);
    go::kernels::gemm(false, true, n, in, hid, 1.f, pd, hid, d.w1.f32(), hid, 0.f, xn.f32(), in);
    d.dgamma.fill(0.f);
    d.dbeta.fill(0.f);
    go::kernels::layer_norm_backward(d.x.f32(), d.gamma.f32(), d.mean.f32(), d.rstd.f32(), xn.f32(), d.dx.f32(),
                                     d.dgamma.f32(), d.dbeta.f32(), n, in);
    benchmark::DoNotOptimize(d.dx.f32());
  }
  report(st, d.flops());
}

void shapes(benchmark::internal::Benchmark* b) {
  for (std::int64_t n : {1000, 10000, 100000})
    for (std::int64_t d : {64, 128, 256}) b->Args({n, d});
  // Warm-up: at n = 100,000 one iteration can outlast --benchmark_min_time, and a lone first
  // iteration pays oneDNN's kernel generation and the first touch of 50-100 MB of fresh pages
  // (the autograd row read 3x slow for that alone).
  b->ArgNames({"n", "d"})->Unit(benchmark::kMicrosecond)->UseRealTime()->MinWarmUpTime(0.1);
}

void weight_grad_shapes(benchmark::internal::Benchmark* b) {
  for (auto [din, dout] : {std::pair{64, 64}, std::pair{64, 256}, std::pair{256, 64}}) b->Args({100000, din, dout});
  b->ArgNames({"n", "in", "out"})->Unit(benchmark::kMicrosecond)->UseRealTime()->MinWarmUpTime(0.1);
}

void feed_forward_shapes(benchmark::internal::Benchmark* b) {
  for (std::int64_t n : {10000, 100000}) b->Args({n});
  b->ArgNames({"n"})->Unit(benchmark::kMicrosecond)->UseRealTime()->MinWarmUpTime(0.1);
}

}  // namespace

BENCHMARK(BM_gemm_onednn)->Apply(shapes);
BENCHMARK(BM_gemm_eigen_anchor)->Apply(shapes);
BENCHMARK(BM_matmul_autograd_fwd_bwd)->Apply(shapes);
BENCHMARK(BM_weight_grad_onednn)->Apply(weight_grad_shapes);
BENCHMARK(BM_weight_grad_eigen_anchor)->Apply(weight_grad_shapes);
BENCHMARK(BM_feed_forward_backward)->Apply(feed_forward_shapes);
BENCHMARK(BM_feed_forward_backward_steps_anchor)->Apply(feed_forward_shapes);
