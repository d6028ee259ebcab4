// Sparse neighbour aggregation: our CSR kernels (forward and backward, sum / mean /
// max) against the anchor, Eigen's SparseMatrix<float, RowMajor> x dense row-major
// matrix on the same CSR with the same OpenMP threads, plus a STREAM-like copy for the
// machine's bandwidth ceiling.
//
// Arguments: n (nodes; n_dst = n_src = n), d (hidden size), graph:
//   0: uniform random sources, average in-degree 8 (Poisson degrees);
//   1: op-graph-like: average in-degree 2.5, sources mostly among the 64 nodes
//      before the destination in topological order, 10% long-range edges.
// Counters (rates per second):
//   GB/s     bytes moved per call: a d-float row read per edge, the output written,
//            the index arrays (4 B per edge, 8 B per row), plus argmax written (max
//            forward) or read per edge (max backward); Eigen also reads its 4 B value
//            per edge. One pass each: what a cache-less machine would have to move.
//   GFLOP/s  one add per edge per feature (nnz * d): a direct time comparison between
//            our sum and Eigen on the same graph.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <Eigen/Core>
#include <Eigen/SparseCore>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "go/core/csr.hpp"
#include "go/core/rng.hpp"
#include "go/core/tensor.hpp"
#include "go/kernels/aggregate.hpp"

namespace {

using go::kernels::Reduce;
using i64 = std::int64_t;

#ifndef EIGEN_HAS_OPENMP
#error "bench_aggregate: Eigen must be built with OpenMP (EIGEN_HAS_OPENMP) for a fair anchor"
#endif

go::Csr make_graph(i64 n, int kind) {
  go::Rng rng(static_cast<std::uint64_t>(n) * 31 + static_cast<std::uint64_t>(kind));
  std::vector<std::int32_t> dst, src;
  if (kind == 0) {
    const i64 m = 8 * n;
    dst.reserve(m);
    src.reserve(m);
    for (i64 k = 0; k < m; ++k) {
      dst.push_back(static_cast<std::int32_t>(rng.uniform_int(n)));
      src.push_back(static_cast<std::int32_t>(rng.uniform_int(n)));
    }
  } else {
    const i64 m = 5 * n / 2;
    for (i64 k = 0; k < m; ++k) {
      const i64 i = static_cast<i64>(rng.uniform_int(n));
      i64 j;
      if (rng.uniform() < 0.9f) j = i - 1 - static_cast<i64>(rng.uniform_int(64));
      else j = static_cast<i64>(rng.uniform_int(n));
      if (j < 0) j += n;
      dst.push_back(static_cast<std::int32_t>(i));
      src.push_back(static_cast<std::int32_t>(j));
    }
  }
  return go::Csr::from_edges(n, n, dst, src);
}

struct Problem {
  go::Csr fwd, bwd;
  go::Tensor x, out, argmax, dout, dx;
  i64 d = 0;
};

// Graphs and buffers are built once per (n, d, graph) and reused by every benchmark.
Problem& problem(i64 n, i64 d, int kind) {
  static std::map<std::tuple<i64, i64, int>, std::unique_ptr<Problem>> cache;
  auto& slot = cache[{n, d, kind}];
  if (!slot) {
    slot = std::make_unique<Problem>();
    Problem& p = *slot;
    p.fwd = make_graph(n, kind);
    p.bwd = p.fwd.transpose();
    p.d = d;
    go::Rng rng(7);
    p.x = go::Tensor::uniform(go::Shape{n, d}, rng, -1.f, 1.f);
    p.dout = go::Tensor::uniform(go::Shape{n, d}, rng, -1.f, 1.f);
    p.out = go::Tensor::zeros(go::Shape{n, d});
    p.dx = go::Tensor::zeros(go::Shape{n, d});
    p.argmax = go::Tensor::zeros(go::Shape{n, d}, go::DType::i32);
  }
  return *slot;
}

void set_counters(benchmark::State& state, double bytes, double flops) {
  state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9 * static_cast<double>(state.iterations()),
                                              benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9 * static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate);
  state.counters["threads"] = omp_get_max_threads();
}

template <Reduce R>
void BM_aggregate_fwd(benchmark::State& state) {
  const i64 n = state.range(0), d = state.range(1);
  Problem& p = problem(n, d, static_cast<int>(state.range(2)));
  const i64 nnz = p.fwd.nnz();
  const auto* rp = p.fwd.row_ptr.data<i64>();
  const auto* ci = p.fwd.col_idx.data<std::int32_t>();
  std::int32_t* am = R == Reduce::max ? p.argmax.data<std::int32_t>() : nullptr;
  for (auto _ : state) {
    go::kernels::csr_aggregate_forward(R, rp, ci, n, p.x.f32(), d, p.out.f32(), am);
    benchmark::ClobberMemory();
  }
  double bytes = 4.0 * nnz * d + 4.0 * n * d + 4.0 * nnz + 8.0 * (n + 1);
  if (R == Reduce::max) bytes += 4.0 * n * d;
  set_counters(state, bytes, static_cast<double>(nnz) * d);
}

template <Reduce R>
void BM_aggregate_bwd(benchmark::State& state) {
  const i64 n = state.range(0), d = state.range(1);
  Problem& p = problem(n, d, static_cast<int>(state.range(2)));
  const i64 nnz = p.fwd.nnz();
  if (R == Reduce::max)  // the argmax the backward reads
    go::kernels::csr_aggregate_forward(R, p.fwd.row_ptr.data<i64>(), p.fwd.col_idx.data<std::int32_t>(), n,
                                       p.x.f32(), d, p.out.f32(), p.argmax.data<std::int32_t>());
  const auto* rp = p.fwd.row_ptr.data<i64>();
  const auto* trp = p.bwd.row_ptr.data<i64>();
  const auto* tci = p.bwd.col_idx.data<std::int32_t>();
  const std::int32_t* am = p.argmax.data<std::int32_t>();
  for (auto _ : state) {
    go::kernels::csr_aggregate_backward(R, rp, trp, tci, n, n, p.dout.f32(), d, am, p.dx.f32());
    benchmark::ClobberMemory();
  }
  double bytes = 4.0 * nnz * d + 4.0 * n * d + 4.0 * nnz + 8.0 * (n + 1);
  if (R == Reduce::max) bytes += 4.0 * nnz * d;
  set_counters(state, bytes, static_cast<double>(nnz) * d);
}

// The anchor: Y = A X with A the same CSR (values 1) as Eigen::SparseMatrix<float, RowMajor>.
void BM_eigen_spmm(benchmark::State& state) {
  const i64 n = state.range(0), d = state.range(1);
  Problem& p = problem(n, d, static_cast<int>(state.range(2)));
  const i64 nnz = p.fwd.nnz();
  using Sparse = Eigen::SparseMatrix<float, Eigen::RowMajor, int>;
  using Dense = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Sparse a(n, n);
  a.resizeNonZeros(nnz);
  const auto* rp = p.fwd.row_ptr.data<i64>();
  for (i64 i = 0; i <= n; ++i) a.outerIndexPtr()[i] = static_cast<int>(rp[i]);
  std::memcpy(a.innerIndexPtr(), p.fwd.col_idx.data<std::int32_t>(), sizeof(int) * nnz);
  std::fill(a.valuePtr(), a.valuePtr() + nnz, 1.f);
  Eigen::Map<const Dense> x(p.x.f32(), n, d);
  Dense y(n, d);
  Eigen::setNbThreads(omp_get_max_threads());
  // Same result as our sum, or the comparison is meaningless.
  y.noalias() = a * x;
  go::kernels::csr_aggregate_forward(Reduce::sum, rp, p.fwd.col_idx.data<std::int32_t>(), n, p.x.f32(), d,
                                     p.out.f32(), nullptr);
  for (i64 k = 0; k < n * d; ++k)
    if (std::abs(y.data()[k] - p.out.f32()[k]) > 1e-4f * (1.f + std::abs(y.data()[k]))) {
      state.SkipWithError("Eigen and csr_aggregate_forward(sum) disagree");
      return;
    }
  for (auto _ : state) {
    y.noalias() = a * x;
    benchmark::ClobberMemory();
  }
  const double bytes = 4.0 * nnz * d + 4.0 * n * d + 8.0 * nnz + 4.0 * (n + 1);
  set_counters(state, bytes, static_cast<double>(nnz) * d);
  state.counters["eigen_threads"] = Eigen::nbThreads();
}

// STREAM-like copy of an [n, d] matrix with the same threads: the bandwidth ceiling.
void BM_stream_copy(benchmark::State& state) {
  const i64 n = state.range(0), d = state.range(1);
  Problem& p = problem(n, d, 0);
  const float* src = p.x.f32();
  float* dst = p.out.f32();
  const i64 total = n * d;
  for (auto _ : state) {
#pragma omp parallel for schedule(static)
    for (i64 k = 0; k < total; ++k) dst[k] = src[k];
    benchmark::ClobberMemory();
  }
  set_counters(state, 8.0 * static_cast<double>(total), 0.0);
}

void graph_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n", "d", "graph"})->ArgsProduct({{1000, 10000, 100000}, {64, 128, 256}, {0, 1}});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

}  // namespace

BENCHMARK(BM_eigen_spmm)->Apply(graph_args);
BENCHMARK_TEMPLATE(BM_aggregate_fwd, Reduce::sum)->Apply(graph_args);
BENCHMARK_TEMPLATE(BM_aggregate_fwd, Reduce::mean)->Apply(graph_args);
BENCHMARK_TEMPLATE(BM_aggregate_fwd, Reduce::max)->Apply(graph_args);
BENCHMARK_TEMPLATE(BM_aggregate_bwd, Reduce::sum)->Apply(graph_args);
BENCHMARK_TEMPLATE(BM_aggregate_bwd, Reduce::mean)->Apply(graph_args);
BENCHMARK_TEMPLATE(BM_aggregate_bwd, Reduce::max)->Apply(graph_args);
BENCHMARK(BM_stream_copy)
    ->ArgNames({"n", "d"})
    ->ArgsProduct({{1000, 10000, 100000}, {64, 256}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
