// Sparse neighbour aggregation: raw kernels against a naive reference, the Csr
// type (validation, construction, transpose), the tensor adapters' checks and the
// autograd op's gradients.
#include <catch2/catch.hpp>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "go/autograd/aggregate.hpp"
#include "go/core/csr.hpp"
#include "harness.hpp"

namespace test_aggregate {
using go::Csr;
using go::CsrPair;
using go::Rng;
using go::Shape;
using go::Tensor;
using go::kernels::Reduce;

namespace {

struct Edges {
  std::int64_t n_dst = 0, n_src = 0;
  std::vector<std::int32_t> dst, src;
  void add(std::int64_t i, std::int64_t j) {
    dst.push_back(static_cast<std::int32_t>(i));
    src.push_back(static_cast<std::int32_t>(j));
  }
};

// A random graph with the awkward cases mixed in: nodes without in-edges (every
// 5th destination), duplicate edges, self-loops and optionally a hub that receives
// and sends many edges.
Edges random_edges(Rng& rng, std::int64_t n_dst, std::int64_t n_src, double avg_deg, bool hub) {
  Edges g{n_dst, n_src, {}, {}};
  if (n_dst == 0 || n_src == 0) return g;
  const auto m = static_cast<std::int64_t>(avg_deg * static_cast<double>(n_dst));
  for (std::int64_t k = 0; k < m; ++k) {
    std::int64_t i = static_cast<std::int64_t>(rng.uniform_int(n_dst));
    if (i % 5 == 3) i = (i + 1) % n_dst;  // keep some destinations empty
    if (i % 5 == 3) continue;
    const auto j = static_cast<std::int64_t>(rng.uniform_int(n_src));
    g.add(i, j);
    if (rng.uniform() < 0.05f) g.add(i, j);                            // duplicate
    if (rng.uniform() < 0.05f && i < n_src) g.add(i, i);               // self-loop
  }
  if (hub) {
    const std::int64_t h = 0, s = n_src - 1;
    for (std::int64_t k = 0; k < 4 * n_dst; ++k) g.add(h, static_cast<std::int64_t>(rng.uniform_int(n_src)));
    for (std::int64_t i = 0; i < n_dst; i += 2)
      if (i % 5 != 3) g.add(i, s);  // one source feeding half the graph
  }
  // Shuffle the edge list so from_edges has to sort it.
  for (std::size_t k = g.dst.size(); k > 1; --k) {
    const auto r = static_cast<std::size_t>(rng.uniform_int(k));
    std::swap(g.dst[k - 1], g.dst[r]);
    std::swap(g.src[k - 1], g.src[r]);
  }
  return g;
}

CsrPair make_pair(const Edges& e) { return CsrPair::from_edges(e.n_dst, e.n_src, e.dst, e.src); }

// Naive reference straight from the edge list (not the CSR), in double.
// out_abs / dx_abs: the sums of |term| behind each element, which bound the
// rounding of a float accumulation (a hub row sums thousands of terms).
struct Reference {
  std::vector<double> out, out_abs;
  std::vector<std::int32_t> argmax;
  std::vector<double> dx, dx_abs;
};

Reference reference(const Edges& g, const Tensor& x, const Tensor& dout, Reduce r) {
  const std::int64_t d = x.dim(1);
  const float* px = x.f32();
  const float* pg = dout.f32();
  Reference ref;
  ref.out.assign(static_cast<std::size_t>(g.n_dst * d), 0.0);
  ref.out_abs.assign(static_cast<std::size_t>(g.n_dst * d), 0.0);
  ref.dx_abs.assign(static_cast<std::size_t>(g.n_src * d), 0.0);
  ref.argmax.assign(static_cast<std::size_t>(g.n_dst * d), -1);
  ref.dx.assign(static_cast<std::size_t>(g.n_src * d), 0.0);
  std::vector<std::int64_t> deg(static_cast<std::size_t>(g.n_dst), 0);
  // Edges in the order from_edges keeps them: stable by destination.
  std::vector<std::size_t> order(g.dst.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return g.dst[a] < g.dst[b]; });
  for (std::size_t k : order) {
    const std::int64_t i = g.dst[k], j = g.src[k];
    ++deg[i];
    for (std::int64_t f = 0; f < d; ++f) {
      const float v = px[j * d + f];
      double& o = ref.out[i * d + f];
      std::int32_t& a = ref.argmax[i * d + f];
      if (r == Reduce::max) {
        if (a < 0 || v > o) {
          o = v;
          a = static_cast<std::int32_t>(j);
        }
      } else {
        o += v;
        ref.out_abs[i * d + f] += std::abs(v);
      }
    }
  }
  for (std::int64_t i = 0; i < g.n_dst; ++i)
    if (r == Reduce::mean && deg[i] > 0)
      for (std::int64_t f = 0; f < d; ++f) {
        ref.out[i * d + f] /= static_cast<double>(deg[i]);
        ref.out_abs[i * d + f] /= static_cast<double>(deg[i]);
      }
  if (r == Reduce::max) {
    // Each destination passes its gradient to the source of its maximum, once.
    for (std::int64_t i = 0; i < g.n_dst; ++i)
      for (std::int64_t f = 0; f < d; ++f) {
        const std::int32_t a = ref.argmax[i * d + f];
        if (a >= 0) {
          ref.dx[a * d + f] += pg[i * d + f];
          ref.dx_abs[a * d + f] += std::abs(pg[i * d + f]);
        }
      }
  } else {
    for (std::size_t k = 0; k < g.dst.size(); ++k) {
      const std::int64_t i = g.dst[k], j = g.src[k];
      const double w = r == Reduce::mean ? 1.0 / static_cast<double>(deg[i]) : 1.0;
      for (std::int64_t f = 0; f < d; ++f) {
        ref.dx[j * d + f] += w * pg[i * d + f];
        ref.dx_abs[j * d + f] += w * std::abs(pg[i * d + f]);
      }
    }
  }
  return ref;
}

// |got - want| <= 1e-6 + 1e-5 |want| + 4e-7 * (sum of |terms|): a few float roundings
// per term at most, far below what one missing or extra edge would change.
void require_close_ref(const Tensor& got, const std::vector<double>& want, const std::vector<double>& abs_sum,
                       const std::string& what) {
  INFO(what << " of shape " << got.shape().to_string());
  REQUIRE(static_cast<std::size_t>(got.numel()) == want.size());
  const float* p = got.f32();
  for (std::size_t k = 0; k < want.size(); ++k) {
    if (!(std::abs(p[k] - want[k]) <= 1e-6 + 1e-5 * std::abs(want[k]) + 4e-7 * abs_sum[k])) {
      FAIL(what << ": element " << k << " is " << p[k] << ", expected " << want[k]);
    }
  }
}

const char* name(Reduce r) { return go::reduce_name(r); }

// Runs forward and backward through the tensor adapters and compares with the reference.
void check_against_reference(const Edges& e, std::int64_t d, Reduce r, std::uint64_t seed) {
  INFO("reduce " << name(r) << ", n_dst " << e.n_dst << ", n_src " << e.n_src << ", nnz " << e.dst.size()
                 << ", d " << d << ", seed " << seed);
  Rng rng(seed);
  const CsrPair g = make_pair(e);
  const Tensor x = Tensor::uniform(Shape{e.n_src, d}, rng, -1.f, 1.f);
  const Tensor dout = Tensor::uniform(Shape{e.n_dst, d}, rng, -1.f, 1.f);
  Tensor argmax;
  const Tensor out = go::tensor::aggregate(x, g.fwd, r, &argmax);
  const Tensor dx = go::tensor::aggregate_backward(dout, g, r, argmax);
  const Reference ref = reference(e, x, dout, r);
  require_close_ref(out, ref.out, ref.out_abs, "forward");
  if (r == Reduce::max) {
    REQUIRE(argmax.shape() == out.shape());
    const auto am = argmax.to_vector<std::int32_t>();
    const auto bad = std::mismatch(am.begin(), am.end(), ref.argmax.begin());
    if (bad.first != am.end())
      FAIL("argmax element " << (bad.first - am.begin()) << " is " << *bad.first << ", expected " << *bad.second);
  }
  require_close_ref(dx, ref.dx, ref.dx_abs, "backward");
}

const Reduce kAll[] = {Reduce::sum, Reduce::mean, Reduce::max};

using go::test::ThreadsGuard;

}  // namespace

TEST_CASE("aggregate kernels match the naive reference on random graphs", "[aggregate]") {
  // d covers a single lane, a partial vector, whole vectors, one past a max chunk (129),
  // a full and a partial second sum chunk (256 + 44).
  const std::int64_t dims[] = {1, 7, 16, 64, 129, 300};
  std::uint64_t seed = 1;
  for (std::int64_t d : dims)
    for (Reduce r : kAll) {
      Rng rng(seed);
      const std::int64_t n = 200 + static_cast<std::int64_t>(rng.uniform_int(400));
      check_against_reference(random_edges(rng, n, n, 3.0, false), d, r, seed++);
      // Rectangular (n_dst != n_src), denser.
      check_against_reference(random_edges(rng, n / 2, n + 17, 8.0, false), d, r, seed++);
    }
}

TEST_CASE("aggregate kernels take the parallel path correctly on a skewed graph", "[aggregate]") {
  // Large enough for several threads and scheduling chunks; a hub row and a hub source.
  const ThreadsGuard guard;
  omp_set_num_threads(std::max(guard.saved, 4));  // oversubscribe a small machine to exercise the partition
  for (Reduce r : kAll)
    for (std::int64_t d : {std::int64_t{33}, std::int64_t{64}}) {
      Rng rng(100 + static_cast<std::uint64_t>(r) + static_cast<std::uint64_t>(d));
      check_against_reference(random_edges(rng, 3000, 3000, 6.0, true), d, r, 7);
    }
  // An argmax of 8 MiB or more (kStreamMinBytes in kernels/aggregate.cpp) is written with
  // streaming stores when d is a multiple of 16: 17000 x 128 x 4 B = 8.3 MiB.
  for (Reduce r : kAll) {
    Rng rng(200 + static_cast<std::uint64_t>(r));
    check_against_reference(random_edges(rng, 17000, 17000, 2.0, true), 128, r, 8);
  }
}

TEST_CASE("aggregate results do not depend on the number of threads", "[aggregate]") {
  Rng rng(5);
  const Edges e = random_edges(rng, 2000, 2000, 8.0, true);
  const CsrPair g = make_pair(e);
  const Tensor x = Tensor::uniform(Shape{2000, 40}, rng, -1.f, 1.f);
  const Tensor dout = Tensor::uniform(Shape{2000, 40}, rng, -1.f, 1.f);
  const ThreadsGuard guard;
  for (Reduce r : kAll) {
    INFO("reduce " << name(r));
    omp_set_num_threads(1);
    Tensor am1, am3;
    const Tensor o1 = go::tensor::aggregate(x, g.fwd, r, &am1);
    const Tensor d1 = go::tensor::aggregate_backward(dout, g, r, am1);
    omp_set_num_threads(3);
    const Tensor o3 = go::tensor::aggregate(x, g.fwd, r, &am3);
    const Tensor d3 = go::tensor::aggregate_backward(dout, g, r, am3);
    REQUIRE(std::memcmp(o1.raw(), o3.raw(), o1.nbytes()) == 0);
    REQUIRE(std::memcmp(d1.raw(), d3.raw(), d1.nbytes()) == 0);
    if (r == Reduce::max) REQUIRE(std::memcmp(am1.raw(), am3.raw(), am1.nbytes()) == 0);
  }
}

// One DYNAMIC_SECTION per reduction: a plain SECTION inside the loop would run for the
// first reduction only (Catch enters each named section once per pass).
TEST_CASE("aggregate on degenerate graphs", "[aggregate]") {
  Rng rng(11);
  for (Reduce r : kAll) {
    DYNAMIC_SECTION("no edges: zeros, argmax -1, zero gradient; reduce " << name(r)) {
      const Edges e{5, 4, {}, {}};
      check_against_reference(e, 7, r, 1);
      const CsrPair g = make_pair(e);
      Tensor am;
      const Tensor x = Tensor::uniform(Shape{4, 7}, rng, 1.f, 2.f);
      const Tensor out = go::tensor::aggregate(x, g.fwd, r, &am);
      for (float v : out.to_vector()) REQUIRE(v == 0.f);
      if (r == Reduce::max)
        for (std::int32_t a : am.to_vector<std::int32_t>()) REQUIRE(a == -1);
      const Tensor dx = go::tensor::aggregate_backward(Tensor::ones(Shape{5, 7}), g, r, am);
      for (float v : dx.to_vector()) REQUIRE(v == 0.f);
    }
    DYNAMIC_SECTION("no nodes; reduce " << name(r)) {
      check_against_reference(Edges{0, 0, {}, {}}, 8, r, 2);
      check_against_reference(Edges{0, 3, {}, {}}, 8, r, 3);  // no destinations
      check_against_reference(Edges{3, 0, {}, {}}, 8, r, 4);  // no sources: all rows empty
    }
    DYNAMIC_SECTION("d = 0; reduce " << name(r)) {
      const CsrPair g = make_pair(random_edges(rng, 10, 10, 2.0, false));
      Tensor am;
      const Tensor out = go::tensor::aggregate(Tensor::empty(Shape{10, 0}), g.fwd, r, &am);
      REQUIRE(out.shape() == Shape({10, 0}));
      const Tensor dx = go::tensor::aggregate_backward(Tensor::empty(Shape{10, 0}), g, r, am);
      REQUIRE(dx.shape() == Shape({10, 0}));
    }
    DYNAMIC_SECTION("only duplicates and self-loops; reduce " << name(r)) {
      Edges e{3, 3, {}, {}};
      for (int k = 0; k < 3; ++k) e.add(1, 1);
      e.add(0, 2);
      e.add(0, 2);
      e.add(2, 2);
      check_against_reference(e, 20, r, 5);
    }
  }
}

TEST_CASE("aggregate values on a hand-made graph", "[aggregate]") {
  // 0 <- {1, 2, 2}, 1 <- {}, 2 <- {0, 2}; x = [[1, 5], [3, -1], [2, 7]]
  Edges e{3, 3, {}, {}};
  e.add(0, 1);
  e.add(0, 2);
  e.add(0, 2);
  e.add(2, 0);
  e.add(2, 2);
  const CsrPair g = make_pair(e);
  const Tensor x = Tensor::from_vector<float>({1, 5, 3, -1, 2, 7}, Shape{3, 2});
  Tensor am;
  CHECK(go::tensor::aggregate(x, g.fwd, Reduce::sum).to_vector() == std::vector<float>{7, 13, 0, 0, 3, 12});
  const auto mean = go::tensor::aggregate(x, g.fwd, Reduce::mean).to_vector();
  CHECK(mean[0] == Approx(7.f / 3));
  CHECK(mean[1] == Approx(13.f / 3));
  CHECK(mean[4] == Approx(1.5f));
  CHECK(go::tensor::aggregate(x, g.fwd, Reduce::max, &am).to_vector() == std::vector<float>{3, 7, 0, 0, 2, 7});
  CHECK(am.to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 2, -1, -1, 2, 2});
  // Ties go to the first edge: 1 <- {0, 2} with equal rows picks 0.
  Edges t{2, 3, {}, {}};
  t.add(1, 2);
  t.add(1, 0);
  const Tensor xt = Tensor::from_vector<float>({4, 4, 9, 9, 4, 4}, Shape{3, 2});
  CsrPair gt = make_pair(t);
  go::tensor::aggregate(xt, gt.fwd, Reduce::max, &am);
  CHECK(am.to_vector<std::int32_t>() == std::vector<std::int32_t>{-1, -1, 2, 2});
  // Sum backward: dx[j] = sum over edges out of j; x[2] feeds 0 twice and 2 once.
  const Tensor dout = Tensor::from_vector<float>({1, 10, 100, 1000, 5, 50}, Shape{3, 2});
  CHECK(go::tensor::aggregate_backward(dout, g, Reduce::sum).to_vector() ==
        std::vector<float>{5, 50, 1, 10, 7, 70});
}

TEST_CASE("Csr construction, validation and transpose", "[aggregate][csr]") {
  SECTION("from_edges sorts stably by destination") {
    const std::vector<std::int32_t> dst{2, 0, 2, 1, 0, 2}, src{5, 4, 3, 2, 1, 0};
    const Csr g = Csr::from_edges(4, 6, dst, src);
    CHECK(g.row_ptr.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 2, 3, 6, 6});
    CHECK(g.col_idx.to_vector<std::int32_t>() == std::vector<std::int32_t>{4, 1, 2, 5, 3, 0});
    CHECK(g.degree(2) == 3);
    CHECK(g.degree(3) == 0);
    g.validate();
    const std::vector<std::int64_t> dst64{2, 0}, src64{1, 1};
    CHECK(Csr::from_edges(3, 2, dst64, src64).col_idx.to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 1});
  }
  SECTION("from_edges rejects bad edges") {
    const std::vector<std::int32_t> a{0, 1}, b{0, 7}, c{0};
    CHECK_THROWS_AS(Csr::from_edges(2, 3, a, b), go::Error);   // source 7 >= 3
    CHECK_THROWS_AS(Csr::from_edges(1, 8, a, b), go::Error);   // destination 1 >= 1
    CHECK_THROWS_AS(Csr::from_edges(2, 8, a, c), go::Error);   // sizes differ
    CHECK_THROWS_WITH(Csr::from_edges(2, 3, a, b), Catch::Contains("edge 1") && Catch::Contains("source 7"));
  }
  SECTION("validate names the bad offset or index") {
    Csr g = Csr::from_edges(3, 4, std::vector<std::int32_t>{0, 1, 1, 2}, std::vector<std::int32_t>{3, 2, 1, 0});
    g.validate();
    Csr bad = g;
    bad.row_ptr = g.row_ptr.clone();
    bad.row_ptr.data<std::int64_t>()[1] = 3;  // 0, 3, 3, 4 is fine; make it decrease:
    bad.row_ptr.data<std::int64_t>()[2] = 2;
    CHECK_THROWS_WITH(bad.validate(), Catch::Contains("row_ptr decreases at row 1"));
    bad.row_ptr = g.row_ptr.clone();
    bad.row_ptr.data<std::int64_t>()[0] = 1;
    CHECK_THROWS_WITH(bad.validate(), Catch::Contains("row_ptr[0]"));
    bad.row_ptr = g.row_ptr.clone();
    bad.row_ptr.data<std::int64_t>()[3] = 5;
    CHECK_THROWS_WITH(bad.validate(), Catch::Contains("row_ptr[3]"));
    bad.row_ptr = Tensor::zeros(Shape{3}, go::DType::i64);  // n_dst + 1 = 4 expected
    CHECK_THROWS_AS(bad.validate(), go::Error);
    bad.row_ptr = g.row_ptr.clone();
    bad.col_idx = g.col_idx.clone();
    bad.col_idx.data<std::int32_t>()[2] = 4;
    CHECK_THROWS_WITH(bad.validate(), Catch::Contains("col_idx[2] = 4"));
    bad.col_idx.data<std::int32_t>()[2] = -1;
    CHECK_THROWS_WITH(bad.validate(), Catch::Contains("col_idx[2] = -1"));
    CHECK_THROWS_AS(CsrPair(bad), go::Error);
    bad.col_idx = Tensor::zeros(Shape{4}, go::DType::i64);  // wrong dtype
    CHECK_THROWS_WITH(bad.validate(), Catch::Contains("col_idx must be an i32"));
  }
  SECTION("transpose: edges reversed, rows ascending, round trip") {
    Rng rng(3);
    const Edges e = random_edges(rng, 50, 70, 4.0, true);
    const Csr g = Csr::from_edges(e.n_dst, e.n_src, e.dst, e.src);
    const Csr t = g.transpose();
    t.validate();
    REQUIRE(t.n_dst == 70);
    REQUIRE(t.n_src == 50);
    REQUIRE(t.nnz() == g.nnz());
    // Same multiset of (dst, src) pairs.
    std::vector<std::pair<int, int>> a, b;
    for (std::int64_t i = 0; i < g.n_dst; ++i)
      for (std::int64_t k = g.row_ptr.data<std::int64_t>()[i]; k < g.row_ptr.data<std::int64_t>()[i + 1]; ++k)
        a.emplace_back(static_cast<int>(i), g.col_idx.data<std::int32_t>()[k]);
    for (std::int64_t j = 0; j < t.n_dst; ++j) {
      const auto* rp = t.row_ptr.data<std::int64_t>();
      const auto* ci = t.col_idx.data<std::int32_t>();
      for (std::int64_t k = rp[j]; k < rp[j + 1]; ++k) {
        b.emplace_back(ci[k], static_cast<int>(j));
        if (k > rp[j]) REQUIRE(ci[k - 1] <= ci[k]);
      }
    }
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    REQUIRE(a == b);
    // t has sorted rows, so transposing twice gives it back; g's rows are in edge-list
    // order, so tt equals g with each row sorted.
    const Csr tt = t.transpose();
    CHECK(tt.transpose() == t);
    Csr sorted = g;
    sorted.col_idx = g.col_idx.clone();
    for (std::int64_t i = 0; i < g.n_dst; ++i)
      std::sort(sorted.col_idx.data<std::int32_t>() + g.row_ptr.data<std::int64_t>()[i],
                sorted.col_idx.data<std::int32_t>() + g.row_ptr.data<std::int64_t>()[i + 1]);
    CHECK(tt == sorted);
    CHECK(!(tt == t));
  }
}

TEST_CASE("aggregate adapters reject bad inputs with the shapes in the message", "[aggregate]") {
  Rng rng(1);
  const CsrPair g = make_pair(random_edges(rng, 6, 5, 2.0, false));
  CHECK_THROWS_WITH(go::tensor::aggregate(Tensor::zeros(Shape{4, 3}), g.fwd, Reduce::sum),
                    Catch::Contains("[4, 3]") && Catch::Contains("n_src = 5"));
  CHECK_THROWS_WITH(go::tensor::aggregate(Tensor::zeros(Shape{5, 3}, go::DType::i32), g.fwd, Reduce::sum),
                    Catch::Contains("f32"));
  CHECK_THROWS_AS(go::tensor::aggregate(Tensor::zeros(Shape{5}), g.fwd, Reduce::mean), go::Error);
  Tensor out = Tensor::zeros(Shape{6, 2});
  CHECK_THROWS_WITH(go::tensor::aggregate_into(Tensor::zeros(Shape{5, 3}), g.fwd, Reduce::sum, out, nullptr),
                    Catch::Contains("out") && Catch::Contains("[6, 2]"));
  Tensor out3 = Tensor::zeros(Shape{6, 3});
  CHECK_THROWS_WITH(go::tensor::aggregate_into(Tensor::zeros(Shape{5, 3}), g.fwd, Reduce::max, out3, nullptr),
                    Catch::Contains("argmax"));
  CHECK_THROWS_WITH(go::tensor::aggregate_backward(Tensor::zeros(Shape{5, 3}), g, Reduce::sum),
                    Catch::Contains("n_dst = 6"));
  CHECK_THROWS_WITH(go::tensor::aggregate_backward(Tensor::zeros(Shape{6, 3}), g, Reduce::max, Tensor()),
                    Catch::Contains("argmax"));
  CsrPair swapped{g};
  std::swap(swapped.fwd, swapped.bwd);
  swapped.bwd = make_pair(random_edges(rng, 3, 3, 1.0, false)).fwd;
  CHECK_THROWS_WITH(go::tensor::aggregate_backward(Tensor::zeros(Shape{5, 3}), swapped, Reduce::sum),
                    Catch::Contains("transpose"));
}

TEST_CASE("aggregate autograd op: finite-difference gradients", "[aggregate][grad]") {
  // A small graph with duplicates, a self-loop, an empty row and a source without out-edges.
  Edges e{6, 7, {}, {}};
  for (auto [i, j] : std::vector<std::pair<int, int>>{
           {0, 1}, {0, 2}, {0, 2}, {1, 1}, {1, 4}, {1, 5}, {1, 0}, {3, 3}, {3, 6}, {4, 0}, {5, 2}, {5, 4}, {5, 5}})
    e.add(i, j);  // row 2 has no in-edges; x[2] feeds row 0 twice; 1 <- 1 and 5 <- 5 are self-loops
  e.n_src = 8;    // source 7 has no out-edges: its gradient must be 0
  const CsrPair g = make_pair(e);
  const std::int64_t d = 5;
  for (Reduce r : {Reduce::sum, Reduce::mean}) {
    INFO("reduce " << name(r));
    Rng rng(21);
    const Tensor x = Tensor::uniform(Shape{8, d}, rng, -1.f, 1.f);
    go::test::check_gradients([&](const std::vector<go::Variable>& v) { return go::aggregate(v[0], g, r); }, {x});
  }
  {
    // Max: distinct values 0.1 apart, so a step of 1e-3 never reorders two of them.
    Rng rng(22);
    std::vector<float> vals(8 * d);
    for (std::size_t k = 0; k < vals.size(); ++k) vals[k] = 0.1f * static_cast<float>(k) - 2.f;
    for (std::size_t k = vals.size(); k > 1; --k) std::swap(vals[k - 1], vals[rng.uniform_int(k)]);
    const Tensor x = Tensor::from_vector(vals, Shape{8, d});
    go::test::GradCheckOptions opt;
    opt.eps = 1e-3;
    go::test::check_gradients(
        [&](const std::vector<go::Variable>& v) { return go::aggregate(v[0], g, Reduce::max); }, {x}, opt);
  }
}

TEST_CASE("aggregate autograd op: accumulation and no-grad", "[aggregate][grad]") {
  Rng rng(8);
  const Edges e = random_edges(rng, 30, 20, 3.0, true);
  const CsrPair g = make_pair(e);
  const Tensor xv = Tensor::uniform(Shape{20, 4}, rng, -1.f, 1.f);
  const Tensor seed = Tensor::uniform(Shape{30, 4}, rng, -1.f, 1.f);
  for (Reduce r : kAll) {
    INFO("reduce " << name(r));
    go::Variable x(xv.clone(), true);
    go::Variable y = go::aggregate(x, g, r);
    REQUIRE(y.requires_grad());
    y.backward(seed);
    const Tensor once = x.grad().clone();
    Tensor am;
    go::tensor::aggregate(xv, g.fwd, r, &am);
    go::test::require_close(once, go::tensor::aggregate_backward(seed, g, r, am), 0, 0, "first backward");
    // A second use of x accumulates into the same gradient.
    go::Variable y2 = go::aggregate(x, g, r);
    y2.backward(seed);
    Tensor twice = once.clone();
    for (std::int64_t k = 0; k < twice.numel(); ++k) twice.f32()[k] *= 2.f;
    go::test::require_close(x.grad(), twice, 1e-6, 1e-6, "accumulated gradient");
    // Without requires_grad nothing is recorded.
    go::Variable c(xv.clone(), false);
    CHECK(!go::aggregate(c, g, r).requires_grad());
  }
}

}  // namespace test_aggregate
