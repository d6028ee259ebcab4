// Every dense autograd op through the generic harness: forward against a naive
// reference written here, gradient against central finite differences.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cmath>
#include <span>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

#include <omp.h>

#include "go/autograd/autograd.hpp"
#include "go/kernels/gemm.hpp"
#include "go/kernels/rowwise.hpp"
#include "harness.hpp"

namespace test_ops {
using namespace go;
using go::test::check_gradients;
using go::test::random_tensor;
using go::test::require_close;

namespace {

// Naive elementwise reference over the broadcast grid of two matrices.
template <class F>
Tensor ref_binary(const Tensor& a, const Tensor& b, std::int64_t R, std::int64_t C, F f) {
  Tensor out = Tensor::empty(Shape{R, C});
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t c = 0; c < C; ++c) {
      const float x = a.f32()[(a.rows() == 1 ? 0 : r) * a.cols() + (a.cols() == 1 ? 0 : c)];
      const float y = b.f32()[(b.rows() == 1 ? 0 : r) * b.cols() + (b.cols() == 1 ? 0 : c)];
      out.f32()[r * C + c] = f(x, y);
    }
  return out;
}

Tensor ref_matmul(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  const std::int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1), n = tb ? b.dim(0) : b.dim(1);
  REQUIRE(k == (tb ? b.dim(1) : b.dim(0)));
  Tensor c = Tensor::empty(Shape{m, n});
  // Raw indexing: at()'s bounds checks made this reference most of the gemm test's time.
  const float *pa = a.f32(), *pb = b.f32();
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::int64_t p = 0; p < k; ++p)
        s += static_cast<double>(ta ? pa[p * m + i] : pa[i * k + p]) * (tb ? pb[j * k + p] : pb[p * n + j]);
      c.f32()[i * n + j] = static_cast<float>(s);
    }
  return c;
}

Variable V(const Tensor& t) { return Variable(t, false); }

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         (a.numel() == 0 || std::memcmp(a.f32(), b.f32(), static_cast<std::size_t>(a.numel()) * sizeof(float)) == 0);
}

}  // namespace

TEST_CASE("matmul: all transpose flags, reference and gradient", "[ops]") {
  Rng rng(1);
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const std::int64_t m = 5, k = 7, n = 3;
      Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, rng);
      Tensor b = random_tensor(tb ? Shape{n, k} : Shape{k, n}, rng);
      INFO("trans_a=" << ta << " trans_b=" << tb);
      require_close(matmul(V(a), V(b), ta, tb).value(), ref_matmul(a, b, ta, tb), 1e-5, 1e-5, "matmul");
      check_gradients([&](const std::vector<Variable>& x) { return matmul(x[0], x[1], ta, tb); }, {a, b});
    }
  // Large enough for oneDNN's blocked paths; compared with the Eigen product.
  Tensor a = random_tensor(Shape{130, 257}, rng), b = random_tensor(Shape{257, 67}, rng);
  require_close(tensor::matmul(a, b), ref_matmul(a, b, false, false), 1e-4, 1e-4, "matmul large");
  Tensor ce = Tensor::empty(Shape{130, 67});
  kernels::gemm_eigen(false, false, 130, 67, 257, 1.f, a.f32(), 257, b.f32(), 67, 0.f, ce.f32(), 67);
  require_close(ce, ref_matmul(a, b, false, false), 1e-4, 1e-4, "gemm_eigen");
  // Degenerate shapes.
  REQUIRE(tensor::matmul(Tensor::zeros(Shape{0, 4}), Tensor::zeros(Shape{4, 3})).shape() == Shape{0, 3});
  Tensor k0 = tensor::matmul(Tensor::zeros(Shape{2, 0}), Tensor::zeros(Shape{0, 3}));
  for (float v : k0.to_vector()) REQUIRE(v == 0.f);
  REQUIRE_THROWS_WITH(tensor::matmul(a, a), Catch::Contains("[130, 257]"));
}

TEST_CASE("gemm: products split into row tiles and k-chunks match the naive product", "[ops]") {
  // go::kernels::gemm splits by shape alone: 1000 x 40 x 128 runs as 3 row tiles, 20 x 16 x 8192
  // as 4 chunks of k summed in order, 48 x 40 x 12000 as 2 row tiles x 5 chunks. Every transpose,
  // padded strides, alpha and beta; with beta = 0 a NaN already in C must not survive.
  struct Case {
    std::int64_t m, n, k;
  };
  Rng rng(11);
  for (const Case c : {Case{1000, 40, 128}, Case{20, 16, 8192}, Case{48, 40, 12000}})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (const float beta : {0.f, 0.25f}) {
          INFO("m=" << c.m << " n=" << c.n << " k=" << c.k << " trans_a=" << ta << " trans_b=" << tb << " beta=" << beta);
          const Tensor a = random_tensor(ta ? Shape{c.k, c.m} : Shape{c.m, c.k}, rng);
          const Tensor b = random_tensor(tb ? Shape{c.n, c.k} : Shape{c.k, c.n}, rng);
          const Tensor c0 = random_tensor(Shape{c.m, c.n}, rng);
          // Padded copies: every row stride 3 longer than the row.
          auto padded = [](const Tensor& t) {
            Tensor p = Tensor::full(Shape{t.dim(0), t.dim(1) + 3}, 7.f);
            for (std::int64_t i = 0; i < t.dim(0); ++i)
              for (std::int64_t j = 0; j < t.dim(1); ++j) p.at(i, j) = t.at(i, j);
            return p;
          };
          const Tensor ap = padded(a), bp = padded(b);
          Tensor cp = padded(c0);
          if (beta == 0.f)
            for (std::int64_t i = 0; i < c.m; ++i) cp.at(i, 0) = std::numeric_limits<float>::quiet_NaN();
          kernels::gemm(ta, tb, c.m, c.n, c.k, 0.5f, ap.f32(), ap.dim(1), bp.f32(), bp.dim(1), beta, cp.f32(),
                        cp.dim(1));
          const Tensor ab = ref_matmul(a, b, ta, tb);
          Tensor want = Tensor::empty(Shape{c.m, c.n}), got = Tensor::empty(Shape{c.m, c.n});
          for (std::int64_t i = 0; i < c.m; ++i)
            for (std::int64_t j = 0; j < c.n; ++j) {
              want.at(i, j) = 0.5f * ab.at(i, j) + beta * c0.at(i, j);
              got.at(i, j) = cp.at(i, j);
            }
          require_close(got, want, 1e-4, 2e-3, "gemm");
          for (std::int64_t i = 0; i < c.m; ++i)  // the padding is untouched
            for (std::int64_t j = c.n; j < c.n + 3; ++j) REQUIRE(cp.at(i, j) == 7.f);
        }
}

TEST_CASE("feed_forward: gelu(x W1 + b1) W2 + b2 over row tiles, against the steps and a naive reference",
          "[ops]") {
  // 1000 x 64 -> 256 -> 64 runs as gemm's row tiles of 144 rows (both products cut rows alike),
  // 300 x 64 -> 256 -> 32 does not (its products cut 144 and 272 rows): the steps in turn.
  struct Case {
    std::int64_t m, in, hid, out;
  };
  Rng rng(5);
  const int saved = omp_get_max_threads();
  for (const Case c : {Case{1000, 64, 256, 64}, Case{300, 64, 256, 32}, Case{1, 8, 16, 8}, Case{0, 8, 16, 8}})
    for (const bool keep_pre : {true, false})
      for (const bool accumulate : {false, true}) {
        INFO("m=" << c.m << " in=" << c.in << " hid=" << c.hid << " out=" << c.out << " pre=" << keep_pre
                  << " accumulate=" << accumulate);
        const Tensor x = random_tensor(Shape{c.m, c.in}, rng), w1 = random_tensor(Shape{c.in, c.hid}, rng),
                     b1 = random_tensor(Shape{1, c.hid}, rng), w2 = random_tensor(Shape{c.hid, c.out}, rng),
                     b2 = random_tensor(Shape{1, c.out}, rng), y0 = random_tensor(Shape{c.m, c.out}, rng);
        auto run = [&](int threads, Tensor* pre) {
          omp_set_num_threads(threads);
          Tensor y = y0.clone();
          kernels::feed_forward(c.m, c.in, c.hid, c.out, x.f32(), w1.f32(), b1.f32(), w2.f32(), b2.f32(),
                                pre ? pre->f32() : nullptr, y.f32(), accumulate);
          omp_set_num_threads(saved);
          return y;
        };
        Tensor pre = Tensor::full(Shape{c.m, c.hid}, 9.f);
        const Tensor y = run(2, keep_pre ? &pre : nullptr);
        CHECK(same_bits(run(1, nullptr), y));  // the same bits whatever the threads, with or without pre
        if (c.m == 0) continue;
        // the pre-activation is the product's bits plus the bias
        Tensor xw = Tensor::empty(Shape{c.m, c.hid});
        kernels::gemm(false, false, c.m, c.hid, c.in, 1.f, x.f32(), c.in, w1.f32(), c.hid, 0.f, xw.f32(), c.hid);
        if (keep_pre) {
          std::int64_t differ = 0;
          for (std::int64_t i = 0; i < c.m; ++i)
            for (std::int64_t j = 0; j < c.hid; ++j) differ += pre.at(i, j) != xw.at(i, j) + b1.f32()[j];
          REQUIRE(differ == 0);
        }
        // y against a double-precision reference: gelu of the naive product, then the second product
        Tensor want = Tensor::empty(Shape{c.m, c.out});
        const Tensor h = ref_matmul(x, w1, false, false);
        std::vector<double> act(static_cast<std::size_t>(c.m * c.hid));
        for (std::int64_t i = 0; i < c.m; ++i)
          for (std::int64_t p = 0; p < c.hid; ++p) {
            const double z = static_cast<double>(h.at(i, p)) + b1.f32()[p];
            act[static_cast<std::size_t>(i * c.hid + p)] = 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0)));
          }
        for (std::int64_t i = 0; i < c.m; ++i)
          for (std::int64_t j = 0; j < c.out; ++j) {
            double s = b2.f32()[j] + (accumulate ? y0.at(i, j) : 0.0);
            for (std::int64_t p = 0; p < c.hid; ++p) s += act[static_cast<std::size_t>(i * c.hid + p)] * w2.f32()[p * c.out + j];
            want.at(i, j) = static_cast<float>(s);
          }
        require_close(y, want, 1e-4, 1e-4, "feed_forward");
      }
}

TEST_CASE("feed_forward_backward: every gradient by tiles and chunks, against a double-precision reference",
          "[ops]") {
  // 8200 x 16 -> 32 -> 8: 33 tiles of 256 rows in 16 chunks; 3000 x 64 -> 256 -> 64: 24 tiles of 128
  // rows in 5 chunks (at least 512 rows each); 1000 x 24 -> 40 -> 16 and 100 x 8 -> 16 -> 8: one
  // chunk (below 1024 rows), in tiles of 512 rows whose products are gemm's.
  struct Case {
    std::int64_t m, in, hid, out;
    std::int64_t chunks;
  };
  Rng rng(8);
  const int saved = omp_get_max_threads();
  for (const Case c : {Case{8200, 16, 32, 8, 16}, Case{3000, 64, 256, 64, 5}, Case{1000, 24, 40, 16, 1},
                       Case{100, 8, 16, 8, 1}})
    for (const bool ln : {true, false}) {
      INFO("m=" << c.m << " in=" << c.in << " hid=" << c.hid << " out=" << c.out << " ln=" << ln);
      REQUIRE(kernels::feed_forward_backward_plan(c.m, c.in, c.hid, c.out).chunks == c.chunks);
      const Tensor x = random_tensor(Shape{c.m, c.in}, rng, -2.f, 2.f), w1 = random_tensor(Shape{c.in, c.hid}, rng),
                   b1 = random_tensor(Shape{1, c.hid}, rng), w2 = random_tensor(Shape{c.hid, c.out}, rng),
                   b2 = random_tensor(Shape{1, c.out}, rng), dy = random_tensor(Shape{c.m, c.out}, rng),
                   gamma = random_tensor(Shape{c.in}, rng, 0.5f, 1.5f), beta = random_tensor(Shape{c.in}, rng);
      // the forward's pre-activation and row statistics, as nn::mlp_gelu keeps them
      Tensor xn = x.clone(), mean = Tensor::empty(Shape{c.m}), rstd = Tensor::empty(Shape{c.m});
      if (ln)
        kernels::layer_norm_forward(x.f32(), gamma.f32(), beta.f32(), xn.f32(), mean.f32(), rstd.f32(), c.m, c.in,
                                    1e-5f);
      Tensor pre = Tensor::empty(Shape{c.m, c.hid}), y = Tensor::empty(Shape{c.m, c.out});
      kernels::feed_forward(c.m, c.in, c.hid, c.out, xn.f32(), w1.f32(), b1.f32(), w2.f32(), b2.f32(), pre.f32(),
                            y.f32(), false);
      const kernels::FeedForwardNorm norm{gamma.f32(), beta.f32(), mean.f32(), rstd.f32(), 1e-5f};
      struct Out {
        Tensor dx, dw1, db1, dw2, db2, dgamma, dbeta;
      };
      auto run = [&](int threads, bool accumulate, const Out* start) {
        Out o = start ? Out{start->dx.clone(), start->dw1.clone(), start->db1.clone(), start->dw2.clone(),
                            start->db2.clone(), start->dgamma.clone(), start->dbeta.clone()}
                      : Out{Tensor::full(Shape{c.m, c.in}, 9.f), Tensor::full(Shape{c.in, c.hid}, 9.f),
                            Tensor::full(Shape{c.hid}, 9.f), Tensor::full(Shape{c.hid, c.out}, 9.f),
                            Tensor::full(Shape{c.out}, 9.f), Tensor::full(Shape{c.in}, 9.f),
                            Tensor::full(Shape{c.in}, 9.f)};
        kernels::FeedForwardGrads g;
        g.dx = o.dx.f32();
        g.dw1 = o.dw1.f32();
        g.db1 = o.db1.f32();
        g.dw2 = o.dw2.f32();
        g.db2 = o.db2.f32();
        g.dgamma = o.dgamma.f32();
        g.dbeta = o.dbeta.f32();
        g.accumulate_dx = g.accumulate_dw1 = g.accumulate_db1 = g.accumulate_dw2 = g.accumulate_db2 =
            g.accumulate_dgamma = g.accumulate_dbeta = accumulate;
        omp_set_num_threads(threads);
        kernels::feed_forward_backward(c.m, c.in, c.hid, c.out, x.f32(), ln ? &norm : nullptr, w1.f32(), w2.f32(),
                                       pre.f32(), dy.f32(), g);
        omp_set_num_threads(saved);
        return o;
      };
      const Out got = run(2, false, nullptr);
      // the same bits on one thread; accumulating adds the same values to what was there
      const Out one = run(1, false, nullptr);
      const Out acc = run(2, true, &got);
      for (auto [a, b, z] : {std::tuple{&got.dx, &one.dx, &acc.dx}, std::tuple{&got.dw1, &one.dw1, &acc.dw1},
                             std::tuple{&got.db1, &one.db1, &acc.db1}, std::tuple{&got.dw2, &one.dw2, &acc.dw2},
                             std::tuple{&got.db2, &one.db2, &acc.db2}}) {
        CHECK(same_bits(*a, *b));
        std::int64_t differ = 0;
        for (std::int64_t i = 0; i < a->numel(); ++i) differ += z->f32()[i] != a->f32()[i] + a->f32()[i];
        CHECK(differ == 0);
      }
      if (ln) {
        CHECK(same_bits(got.dgamma, one.dgamma));
        CHECK(same_bits(got.dbeta, one.dbeta));
      } else {  // no norm: its outputs are not touched
        CHECK(got.dgamma.f32()[0] == 9.f);
        CHECK(got.dbeta.f32()[0] == 9.f);
      }
      // the reference, in double from x: LN, the products, gelu and gelu' by their definitions
      const std::int64_t m = c.m, in = c.in, hid = c.hid, out = c.out;
      std::vector<double> z(static_cast<std::size_t>(m * in)), xh(z.size()), rs(static_cast<std::size_t>(m));
      for (std::int64_t r = 0; r < m; ++r) {
        double mu = 0, var = 0;
        for (std::int64_t k = 0; k < in; ++k) mu += x.f32()[r * in + k];
        mu /= static_cast<double>(in);
        for (std::int64_t k = 0; k < in; ++k) var += (x.f32()[r * in + k] - mu) * (x.f32()[r * in + k] - mu);
        rs[static_cast<std::size_t>(r)] = 1.0 / std::sqrt(var / static_cast<double>(in) + 1e-5);
        for (std::int64_t k = 0; k < in; ++k) {
          const std::size_t i = static_cast<std::size_t>(r * in + k);
          xh[i] = (x.f32()[i] - mu) * rs[static_cast<std::size_t>(r)];
          z[i] = ln ? xh[i] * gamma.f32()[k] + beta.f32()[k] : x.f32()[i];
        }
      }
      std::vector<double> dw1(static_cast<std::size_t>(in * hid), 0), db1(static_cast<std::size_t>(hid), 0),
          dw2(static_cast<std::size_t>(hid * out), 0), db2(static_cast<std::size_t>(out), 0),
          dz(static_cast<std::size_t>(m * in), 0), dgm(static_cast<std::size_t>(in), 0),
          dbt(static_cast<std::size_t>(in), 0), dx(static_cast<std::size_t>(m * in), 0),
          act(static_cast<std::size_t>(hid)), dpre(static_cast<std::size_t>(hid));
      const double kPi = 3.14159265358979323846;
      for (std::int64_t r = 0; r < m; ++r) {
        for (std::int64_t p = 0; p < hid; ++p) {
          double h = b1.f32()[p];
          for (std::int64_t k = 0; k < in; ++k) h += z[static_cast<std::size_t>(r * in + k)] * w1.f32()[k * hid + p];
          act[static_cast<std::size_t>(p)] = 0.5 * h * (1.0 + std::erf(h / std::sqrt(2.0)));
          const double dg = 0.5 * (1.0 + std::erf(h / std::sqrt(2.0))) + h * std::exp(-0.5 * h * h) / std::sqrt(2 * kPi);
          double da = 0;
          for (std::int64_t j = 0; j < out; ++j) da += dy.f32()[r * out + j] * w2.f32()[p * out + j];
          dpre[static_cast<std::size_t>(p)] = da * dg;
          db1[static_cast<std::size_t>(p)] += dpre[static_cast<std::size_t>(p)];
          for (std::int64_t j = 0; j < out; ++j)
            dw2[static_cast<std::size_t>(p * out + j)] += act[static_cast<std::size_t>(p)] * dy.f32()[r * out + j];
        }
        for (std::int64_t j = 0; j < out; ++j) db2[static_cast<std::size_t>(j)] += dy.f32()[r * out + j];
        for (std::int64_t k = 0; k < in; ++k) {
          double s = 0;
          for (std::int64_t p = 0; p < hid; ++p) {
            dw1[static_cast<std::size_t>(k * hid + p)] += z[static_cast<std::size_t>(r * in + k)] * dpre[static_cast<std::size_t>(p)];
            s += dpre[static_cast<std::size_t>(p)] * w1.f32()[k * hid + p];
          }
          dz[static_cast<std::size_t>(r * in + k)] = s;
        }
        if (!ln) {
          for (std::int64_t k = 0; k < in; ++k) dx[static_cast<std::size_t>(r * in + k)] = dz[static_cast<std::size_t>(r * in + k)];
          continue;
        }
        double sg = 0, sgx = 0;
        for (std::int64_t k = 0; k < in; ++k) {
          const std::size_t i = static_cast<std::size_t>(r * in + k);
          const double gk = dz[i] * gamma.f32()[k];
          sg += gk;
          sgx += gk * xh[i];
          dgm[static_cast<std::size_t>(k)] += dz[i] * xh[i];
          dbt[static_cast<std::size_t>(k)] += dz[i];
        }
        for (std::int64_t k = 0; k < in; ++k) {
          const std::size_t i = static_cast<std::size_t>(r * in + k);
          dx[i] = rs[static_cast<std::size_t>(r)] *
                  (dz[i] * gamma.f32()[k] - sg / static_cast<double>(in) - xh[i] * sgx / static_cast<double>(in));
        }
      }
      auto to_tensor = [](const std::vector<double>& v, Shape s) {
        Tensor t = Tensor::empty(s);
        for (std::size_t i = 0; i < v.size(); ++i) t.f32()[i] = static_cast<float>(v[i]);
        return t;
      };
      require_close(got.dx, to_tensor(dx, Shape{m, in}), 2e-4, 2e-3, "dx");
      require_close(got.dw1, to_tensor(dw1, Shape{in, hid}), 2e-4, 2e-3, "dW1");
      require_close(got.db1, to_tensor(db1, Shape{hid}), 2e-4, 2e-3, "db1");
      require_close(got.dw2, to_tensor(dw2, Shape{hid, out}), 2e-4, 2e-3, "dW2");
      require_close(got.db2, to_tensor(db2, Shape{out}), 2e-4, 2e-3, "db2");
      if (ln) {
        require_close(got.dgamma, to_tensor(dgm, Shape{in}), 2e-4, 2e-3, "dgamma");
        require_close(got.dbeta, to_tensor(dbt, Shape{in}), 2e-4, 2e-3, "dbeta");
      }
    }
}

TEST_CASE("matmul: gradient accumulates when a variable is used twice", "[ops]") {
  Rng rng(2);
  Tensor a = random_tensor(Shape{4, 4}, rng);
  check_gradients([](const std::vector<Variable>& x) { return matmul(x[0], x[0], false, true); }, {a});
}

TEST_CASE("binary ops with broadcasting: reference and gradient", "[ops]") {
  Rng rng(3);
  struct Case {
    Shape a, b;
    std::int64_t R, C;
  };
  const std::vector<Case> cases = {{{4, 5}, {4, 5}, 4, 5}, {{4, 5}, {1, 5}, 4, 5}, {{4, 5}, {5}, 4, 5},
                                   {{4, 5}, {4, 1}, 4, 5}, {{4, 5}, {}, 4, 5},     {{1, 5}, {4, 5}, 4, 5},
                                   {{4, 1}, {1, 5}, 4, 5}};
  for (const auto& cs : cases) {
    Tensor a = random_tensor(cs.a, rng), b = random_tensor(cs.b, rng, 0.5f, 1.5f);  // b away from 0 for div
    INFO("a " << cs.a.to_string() << " b " << cs.b.to_string());
    auto fwd = [&](auto op, auto ref) {
      Tensor got = op(V(a), V(b)).value();
      REQUIRE(got.numel() == cs.R * cs.C);
      require_close(got.reshape(Shape{cs.R, cs.C}), ref_binary(a, b, cs.R, cs.C, ref), 1e-6, 1e-6, "forward");
    };
    fwd([](auto x, auto y) { return add(x, y); }, [](float x, float y) { return x + y; });
    fwd([](auto x, auto y) { return sub(x, y); }, [](float x, float y) { return x - y; });
    fwd([](auto x, auto y) { return mul(x, y); }, [](float x, float y) { return x * y; });
    fwd([](auto x, auto y) { return div(x, y); }, [](float x, float y) { return x / y; });
    fwd([](auto x, auto y) { return minimum(x, y); }, [](float x, float y) { return std::min(x, y); });
    fwd([](auto x, auto y) { return maximum(x, y); }, [](float x, float y) { return std::max(x, y); });
    check_gradients([](const std::vector<Variable>& x) { return x[0] + x[1]; }, {a, b});
    check_gradients([](const std::vector<Variable>& x) { return x[0] - x[1]; }, {a, b});
    check_gradients([](const std::vector<Variable>& x) { return x[0] * x[1]; }, {a, b});
    check_gradients([](const std::vector<Variable>& x) { return x[0] / x[1]; }, {a, b});
    // minimum/maximum: a in [-1, 1], b in [0.5, 1.5]: ties have probability 0, and
    // the finite-difference step is far below the typical gap.
    check_gradients([](const std::vector<Variable>& x) { return minimum(x[0], x[1]); }, {a, b});
    check_gradients([](const std::vector<Variable>& x) { return maximum(x[0], x[1]); }, {a, b});
  }
  REQUIRE_THROWS_WITH(add(V(Tensor::zeros(Shape{4, 5})), V(Tensor::zeros(Shape{3, 5}))),
                      Catch::Contains("[4, 5]") && Catch::Contains("[3, 5]"));
}

TEST_CASE("unary ops: reference and gradient, including relu's kink", "[ops]") {
  Rng rng(4);
  Tensor x = random_tensor(Shape{6, 7}, rng, -2.f, 2.f);
  // Keep inputs away from relu/abs kinks by more than the finite-difference step.
  for (std::int64_t i = 0; i < x.numel(); ++i)
    if (std::abs(x.f32()[i]) < 0.05f) x.f32()[i] = 0.3f;
  Tensor pos = random_tensor(Shape{6, 7}, rng, 0.2f, 3.f);
  struct U {
    const char* name;
    Variable (*op)(const Variable&);
    double (*ref)(double);
    bool positive;
  };
  const std::vector<U> ops = {
      {"relu", relu, [](double v) { return v > 0 ? v : 0.0; }, false},
      {"gelu", gelu, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }, false},
      {"tanh", go::tanh, [](double v) { return std::tanh(v); }, false},
      {"sigmoid", sigmoid, [](double v) { return 1 / (1 + std::exp(-v)); }, false},
      {"exp", go::exp, [](double v) { return std::exp(v); }, false},
      {"abs", go::abs, [](double v) { return std::abs(v); }, false},
      {"square", square, [](double v) { return v * v; }, false},
      {"log", go::log, [](double v) { return std::log(v); }, true},
      {"sqrt", go::sqrt, [](double v) { return std::sqrt(v); }, true},
  };
  for (const auto& u : ops) {
    INFO(u.name);
    const Tensor& in = u.positive ? pos : x;
    Tensor want = Tensor::empty(in.shape());
    for (std::int64_t i = 0; i < in.numel(); ++i) want.f32()[i] = static_cast<float>(u.ref(in.f32()[i]));
    require_close(u.op(V(in)).value(), want, 1e-5, 1e-6, u.name);
    check_gradients([&](const std::vector<Variable>& v) { return u.op(v[0]); }, {in});
  }
  // At exactly 0 relu uses the subgradient 0.
  Variable z(Tensor::from_vector<float>({0.f, 1.f, -1.f}), true);
  relu(z).backward(Tensor::ones(Shape{3}));
  REQUIRE(z.grad().to_vector() == std::vector<float>{0.f, 1.f, 0.f});
  // sigmoid is stable at extreme inputs.
  Tensor ext = Tensor::from_vector<float>({-200.f, 200.f});
  Tensor s = sigmoid(V(ext)).value();
  REQUIRE(s.at(0) == 0.f);
  REQUIRE(s.at(1) == 1.f);
}

TEST_CASE("scale, add_scalar, clamp and where", "[ops]") {
  Rng rng(5);
  Tensor x = random_tensor(Shape{5, 4}, rng, -2.f, 2.f);
  for (std::int64_t i = 0; i < x.numel(); ++i)  // away from the clamp bounds
    if (std::abs(std::abs(x.f32()[i]) - 0.8f) < 0.05f) x.f32()[i] = 0.f;
  Tensor sc = scale(V(x), -2.5f).value();
  Tensor cl = clamp(V(x), -0.8f, 0.8f).value();
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    REQUIRE(sc.f32()[i] == Approx(-2.5f * x.f32()[i]));
    REQUIRE(cl.f32()[i] == std::min(0.8f, std::max(-0.8f, x.f32()[i])));
  }
  check_gradients([](const std::vector<Variable>& v) { return scale(v[0], -2.5f); }, {x});
  check_gradients([](const std::vector<Variable>& v) { return add_scalar(v[0], 3.f); }, {x});
  check_gradients([](const std::vector<Variable>& v) { return clamp(v[0], -0.8f, 0.8f); }, {x});

  Tensor y = random_tensor(Shape{5, 4}, rng);
  Tensor cond = Tensor::empty(Shape{5, 4});
  for (std::int64_t i = 0; i < cond.numel(); ++i) cond.f32()[i] = (i % 3 == 0) ? 1.f : 0.f;
  Tensor w = where(cond, V(x), V(y)).value();
  for (std::int64_t i = 0; i < w.numel(); ++i) REQUIRE(w.f32()[i] == (i % 3 == 0 ? x.f32()[i] : y.f32()[i]));
  check_gradients([&](const std::vector<Variable>& v) { return where(cond, v[0], v[1]); }, {x, y});
  REQUIRE_THROWS_AS(clamp(V(x), 1.f, -1.f), Error);
}

TEST_CASE("PPO's clipped surrogate composes and differentiates", "[ops]") {
  // loss = -mean(min(r * A, clamp(r, 0.8, 1.2) * A)), r = exp(logp - logp_old).
  Rng rng(6);
  Tensor logp = random_tensor(Shape{8, 1}, rng, -0.5f, 0.5f);
  Tensor old = random_tensor(Shape{8, 1}, rng, -0.5f, 0.5f);
  Tensor adv = random_tensor(Shape{8, 1}, rng);
  auto surrogate = [&](const std::vector<Variable>& v) {
    Variable ratio = go::exp(v[0] - Variable(old));
    Variable a(adv);
    return scale(mean(minimum(ratio * a, clamp(ratio, 0.8f, 1.2f) * a)), -1.f);
  };
  // Move ratios off the clip boundaries.
  for (std::int64_t i = 0; i < 8; ++i) {
    const float r = std::exp(logp.f32()[i] - old.f32()[i]);
    if (std::abs(r - 0.8f) < 0.02f || std::abs(r - 1.2f) < 0.02f) logp.f32()[i] = old.f32()[i];
  }
  double want = 0;
  for (std::int64_t i = 0; i < 8; ++i) {
    const double r = std::exp(static_cast<double>(logp.f32()[i]) - old.f32()[i]);
    const double c = std::min(1.2, std::max(0.8, r));
    want += std::min(r * adv.f32()[i], c * adv.f32()[i]);
  }
  REQUIRE(surrogate({V(logp)}).item() == Approx(-want / 8).epsilon(1e-5));
  check_gradients(surrogate, {logp});
}

TEST_CASE("sum and mean: all, per row, per column", "[ops]") {
  Rng rng(7);
  Tensor x = random_tensor(Shape{6, 9}, rng);
  double all = 0;
  std::vector<double> rows(6, 0), cols(9, 0);
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 9; ++c) {
      all += x.at(r, c);
      rows[r] += x.at(r, c);
      cols[c] += x.at(r, c);
    }
  REQUIRE(sum(V(x)).item() == Approx(all).margin(1e-5));
  REQUIRE(mean(V(x)).item() == Approx(all / 54).margin(1e-6));
  Tensor sr = sum(V(x), 1).value(), mc = mean(V(x), 0).value();
  REQUIRE(sr.shape() == Shape{6, 1});
  REQUIRE(mc.shape() == Shape{1, 9});
  for (int r = 0; r < 6; ++r) REQUIRE(sr.at(r, 0) == Approx(rows[r]).margin(1e-5));
  for (int c = 0; c < 9; ++c) REQUIRE(mc.at(0, c) == Approx(cols[c] / 6).margin(1e-6));
  for (int axis = -1; axis <= 1; ++axis) {
    check_gradients([axis](const std::vector<Variable>& v) { return sum(v[0], axis); }, {x});
    check_gradients([axis](const std::vector<Variable>& v) { return mean(v[0], axis); }, {x});
  }
  // Empty input: sum 0, mean 0 (not NaN).
  REQUIRE(sum(V(Tensor::zeros(Shape{0, 3}))).item() == 0.f);
  REQUIRE(mean(V(Tensor::zeros(Shape{0, 3}))).item() == 0.f);
  // A long reduction keeps precision (double partial sums).
  Tensor big = Tensor::full(Shape{1000000}, 0.1f);
  REQUIRE(sum(V(big)).item() == Approx(100000.0).epsilon(1e-6));
}

TEST_CASE("concat, slice, gather rows and embedding", "[ops]") {
  Rng rng(8);
  Tensor a = random_tensor(Shape{3, 4}, rng), b = random_tensor(Shape{2, 4}, rng), c = random_tensor(Shape{3, 2}, rng);
  Tensor r0 = concat({V(a), V(b)}, 0).value();
  REQUIRE(r0.shape() == Shape{5, 4});
  REQUIRE(r0.at(3, 2) == b.at(0, 2));
  Tensor r1 = concat({V(a), V(c)}, 1).value();
  REQUIRE(r1.shape() == Shape{3, 6});
  REQUIRE(r1.at(2, 5) == c.at(2, 1));
  REQUIRE(r1.at(1, 3) == a.at(1, 3));
  check_gradients([](const std::vector<Variable>& v) { return concat({v[0], v[1]}, 0); }, {a, b});
  check_gradients([](const std::vector<Variable>& v) { return concat({v[0], v[1], v[0]}, 1); }, {a, c});
  REQUIRE_THROWS_WITH(concat({V(a), V(c)}, 0), Catch::Contains("[3, 2]"));

  Tensor s0 = slice(V(a), 0, 1, 3).value(), s1 = slice(V(a), 1, 1, 3).value();
  REQUIRE(s0.shape() == Shape{2, 4});
  REQUIRE(s0.at(1, 3) == a.at(2, 3));
  REQUIRE(s1.shape() == Shape{3, 2});
  REQUIRE(s1.at(2, 1) == a.at(2, 2));
  REQUIRE(slice(V(a), 1, 2, 2).value().shape() == Shape{3, 0});
  check_gradients([](const std::vector<Variable>& v) { return slice(v[0], 0, 1, 3); }, {a});
  check_gradients([](const std::vector<Variable>& v) { return slice(v[0], 1, 1, 4); }, {a});
  REQUIRE_THROWS_WITH(slice(V(a), 1, 2, 5), Catch::Contains("out of range"));

  Tensor idx = Tensor::from_vector<std::int32_t>({2, 0, 2, 1, 2});
  Tensor g = gather_rows(V(a), idx).value();
  REQUIRE(g.shape() == Shape{5, 4});
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 4; ++j) REQUIRE(g.at(i, j) == a.at(idx.data<std::int32_t>()[i], j));
  // Repeated indices accumulate gradient.
  check_gradients([&](const std::vector<Variable>& v) { return gather_rows(v[0], idx); }, {a});
  check_gradients([&](const std::vector<Variable>& v) { return embedding(v[0], idx); }, {a});
  REQUIRE_THROWS_WITH(gather_rows(V(a), Tensor::from_vector<std::int32_t>({3})), Catch::Contains("out of range"));
  REQUIRE(gather_rows(V(a), Tensor::zeros(Shape{0}, DType::i32)).value().shape() == Shape{0, 4});
}

TEST_CASE("layer norm, softmax and log-softmax", "[ops]") {
  Rng rng(9);
  Tensor x = random_tensor(Shape{5, 8}, rng, -3.f, 3.f);
  Tensor gamma = random_tensor(Shape{8}, rng, 0.5f, 1.5f), beta = random_tensor(Shape{8}, rng);
  Tensor y = layer_norm(V(x), V(gamma), V(beta)).value();
  for (int r = 0; r < 5; ++r) {
    double m = 0, v = 0;
    for (int c = 0; c < 8; ++c) m += x.at(r, c);
    m /= 8;
    for (int c = 0; c < 8; ++c) v += (x.at(r, c) - m) * (x.at(r, c) - m);
    v /= 8;
    for (int c = 0; c < 8; ++c)
      REQUIRE(y.at(r, c) == Approx((x.at(r, c) - m) / std::sqrt(v + 1e-5) * gamma.at(c) + beta.at(c)).margin(1e-5));
  }
  check_gradients([](const std::vector<Variable>& v) { return layer_norm(v[0], v[1], v[2]); }, {x, gamma, beta});
  check_gradients([](const std::vector<Variable>& v) { return layer_norm(v[0]); }, {x});

  Tensor sm = softmax(V(x)).value(), lsm = log_softmax(V(x)).value();
  for (int r = 0; r < 5; ++r) {
    double z = 0, mx = -1e30;
    for (int c = 0; c < 8; ++c) mx = std::max<double>(mx, x.at(r, c));
    for (int c = 0; c < 8; ++c) z += std::exp(x.at(r, c) - mx);
    for (int c = 0; c < 8; ++c) {
      REQUIRE(sm.at(r, c) == Approx(std::exp(x.at(r, c) - mx) / z).margin(1e-6));
      REQUIRE(lsm.at(r, c) == Approx(x.at(r, c) - mx - std::log(z)).margin(1e-5));
    }
  }
  check_gradients([](const std::vector<Variable>& v) { return softmax(v[0]); }, {x});
  check_gradients([](const std::vector<Variable>& v) { return log_softmax(v[0]); }, {x});
  // Large logits do not overflow.
  Tensor big = Tensor::from_vector<float>({1000.f, 1000.f, -1000.f}, Shape{1, 3});
  Tensor sb = softmax(V(big)).value();
  REQUIRE(sb.at(0, 0) == Approx(0.5f));
  REQUIRE(sb.at(0, 2) == 0.f);
}

TEST_CASE("categorical: sampling frequencies, log-prob and entropy", "[ops]") {
  Rng rng(10);
  Tensor logits = random_tensor(Shape{4, 5}, rng, -2.f, 2.f);
  // Seeded sampling is reproducible and matches the softmax frequencies.
  Tensor probs = softmax(V(logits)).value();
  Rng s1(3), s2(3);
  REQUIRE(sample_categorical(logits, s1).to_vector<std::int32_t>() ==
          sample_categorical(logits, s2).to_vector<std::int32_t>());
  const int draws = 20000;
  std::vector<std::vector<int>> counts(4, std::vector<int>(5, 0));
  for (int t = 0; t < draws; ++t) {
    Tensor a = sample_categorical(logits, s1);
    for (int i = 0; i < 4; ++i) counts[i][a.data<std::int32_t>()[i]]++;
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) CHECK(counts[i][j] / double(draws) == Approx(probs.at(i, j)).margin(0.015));

  Tensor act = Tensor::from_vector<std::int32_t>({0, 4, 2, 2});
  Tensor lp = categorical_log_prob(V(logits), act).value();
  Tensor ent = categorical_entropy(V(logits)).value();
  for (int i = 0; i < 4; ++i) {
    REQUIRE(lp.at(i) == Approx(std::log(probs.at(i, act.data<std::int32_t>()[i]))).margin(1e-5));
    double h = 0;
    for (int j = 0; j < 5; ++j) h -= probs.at(i, j) * std::log(probs.at(i, j));
    REQUIRE(ent.at(i) == Approx(h).margin(1e-5));
  }
  check_gradients([&](const std::vector<Variable>& v) { return categorical_log_prob(v[0], act); }, {logits});
  check_gradients([](const std::vector<Variable>& v) { return categorical_entropy(v[0]); }, {logits});
  // One log-softmax shared by several action sets: pick_columns gives categorical_log_prob's values,
  // and the picks' gradients add up in the shared input.
  Tensor act2 = Tensor::from_vector<std::int32_t>({3, 3, 0, 1});
  REQUIRE(pick_columns(log_softmax(V(logits)), act).value().to_vector<float>() == lp.to_vector<float>());
  check_gradients([&](const std::vector<Variable>& v) { return pick_columns(v[0], act); }, {logits});
  check_gradients(
      [&](const std::vector<Variable>& v) {
        Variable ls = log_softmax(v[0]);
        return pick_columns(ls, act) * 2.f + pick_columns(ls, act2) - pick_columns(ls, act);
      },
      {logits});
  REQUIRE_THROWS_WITH(pick_columns(V(logits), Tensor::from_vector<std::int32_t>({0, 0, 9, 0})),
                      Catch::Contains("out of range"));
  // Sampling from precomputed probabilities draws what sample_categorical draws.
  Rng s3(99), s4(99);
  REQUIRE(sample_from_probs(categorical_probs(logits), s3).to_vector<std::int32_t>() ==
          sample_categorical(logits, s4).to_vector<std::int32_t>());

  // Greedy picks the maximum; a one-hot distribution always samples its action.
  Tensor peaked = Tensor::from_vector<float>({0.f, 50.f, 0.f, -50.f, -50.f, 10.f}, Shape{2, 3});
  REQUIRE(argmax_rows(peaked).to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 2});
  for (int t = 0; t < 100; ++t) REQUIRE(sample_categorical(peaked, s1).to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 2});
  // Entropy of a uniform row is log(a).
  REQUIRE(categorical_entropy(V(Tensor::zeros(Shape{1, 8}))).value().at(0) == Approx(std::log(8.0)));
  REQUIRE_THROWS_WITH(categorical_log_prob(V(logits), Tensor::from_vector<std::int32_t>({0, 5, 0, 0})),
                      Catch::Contains("out of range"));
}

TEST_CASE("categorical: K draws at once are the K single draws", "[ops]") {
  // sample_from_probs(probs, rngs) against sample_from_probs(probs, rng) per rng: rows with zero
  // probabilities (masked actions, first and last), one-hot rows, one action, no rows, and rows
  // whose sums round below 1 (u can exceed the last cumulative sum: the last action with mass).
  Rng rng(21);
  for (std::int64_t a : {1, 2, 3, 8, 16}) {
    for (std::int64_t n : {0, 1, 7, 300, 3000}) {  // (3,000 rows x 33 draws: blocks side by side)
      Tensor logits = random_tensor(Shape{n, a}, rng, -4.f, 4.f);
      for (std::int64_t i = 0; i < n && a > 1; ++i) {  // (one action always keeps its mass)
        if (i % 5 == 1) logits.f32()[i * a] = -std::numeric_limits<float>::infinity();
        else if (i % 7 == 2) logits.f32()[i * a + a - 1] = -std::numeric_limits<float>::infinity();
      }
      Tensor probs = categorical_probs(logits);
      for (std::int64_t i = 0; i < n; ++i)  // every 11th row: all mass on one action
        if (i % 11 == 3)
          for (std::int64_t j = 0; j < a; ++j) probs.f32()[i * a + j] = j == i % a ? 1.f : 0.f;
      for (std::int64_t i = 0; i < n; ++i)  // every 13th row sums to less than 1
        if (i % 13 == 4)
          for (std::int64_t j = 0; j < a; ++j) probs.f32()[i * a + j] *= 0.5f;
      for (std::size_t K : {std::size_t(1), std::size_t(5), std::size_t(33)}) {
        std::vector<Rng> one, many;
        for (std::size_t k = 0; k < K; ++k) {
          one.push_back(Rng(a * 1000 + n).fork(k));
          many.push_back(Rng(a * 1000 + n).fork(k));
        }
        const std::vector<Tensor> drawn = sample_from_probs(probs, std::span<Rng>(many));
        REQUIRE(drawn.size() == K);
        for (std::size_t k = 0; k < K; ++k) {
          const auto want = sample_from_probs(probs, one[k]).to_vector<std::int32_t>();
          REQUIRE(drawn[k].to_vector<std::int32_t>() == want);
          for (std::int64_t i = 0; i < n; ++i) REQUIRE(probs.f32()[i * a + want[static_cast<std::size_t>(i)]] > 0.f);
        }
        for (std::size_t k = 0; k < K; ++k) REQUIRE(one[k].next_u64() == many[k].next_u64());  // as many draws
      }
    }
  }
}

TEST_CASE("autograd: accumulation, no-grad scope, detach, deep chains", "[autograd]") {
  Variable x(Tensor::from_vector<float>({2.f, 3.f}), true);
  // y = x * x + x: dy/dx = 2x + 1, the shared input receives both contributions.
  Variable y = sum(x * x + x);
  y.backward();
  REQUIRE(x.grad().to_vector() == std::vector<float>{5.f, 7.f});
  // A second backward accumulates into the leaf until zero_grad.
  sum(x * x + x).backward();
  REQUIRE(x.grad().to_vector() == std::vector<float>{10.f, 14.f});
  x.zero_grad();
  REQUIRE(x.grad().to_vector() == std::vector<float>{0.f, 0.f});
  {
    NoGradGuard ng;
    Variable z = x * x;
    REQUIRE_FALSE(z.requires_grad());
  }
  REQUIRE((x * x).requires_grad());
  Variable d = x.detach();
  REQUIRE_FALSE((d * d).requires_grad());
  // backward without a seed needs a scalar.
  REQUIRE_THROWS_WITH((x * x).backward(), Catch::Contains("scalar"));

  // A chain of 20,000 ops (deeper than any recursion could go) differentiates.
  Variable w(Tensor::from_vector<float>({1.f}), true);
  Variable h = w;
  for (int i = 0; i < 20000; ++i) h = add_scalar(h, 0.f);
  sum(scale(h, 3.f)).backward();
  REQUIRE(w.grad().at(0) == 3.f);
}

TEST_CASE("vectorizable math bodies match libm", "[ops][math]") {
  double worst_exp = 0, worst_tanh = 0, worst_erf = 0, worst_sig = 0;
  for (int i = -200000; i <= 200000; ++i) {
    const float x = static_cast<float>(i) * 4.4e-4f;  // [-88, 88]
    if (x > -87.3f && x < 88.7f)
      worst_exp = std::max(worst_exp, std::abs(kernels::exp_f(x) / std::exp(static_cast<double>(x)) - 1.0));
    const float s = x / 8.f;  // [-11, 11]
    worst_tanh = std::max(worst_tanh, std::abs(kernels::tanh_f(s) - std::tanh(static_cast<double>(s))));
    worst_erf = std::max(worst_erf, std::abs(kernels::erf_f(s) - std::erf(static_cast<double>(s))));
    worst_sig = std::max(worst_sig, std::abs(kernels::sigmoid_f(x) - 1.0 / (1.0 + std::exp(-static_cast<double>(x)))));
  }
  CHECK(worst_exp < 4e-7);
  CHECK(worst_tanh < 3e-7);
  CHECK(worst_erf < 4.5e-7);
  CHECK(worst_sig < 3e-7);
  // Near zero tanh keeps relative precision.
  CHECK(kernels::tanh_f(1e-5f) == Approx(1e-5f).epsilon(1e-6));
  // Masked entries: exp(-inf) = 0, no NaN.
  CHECK(kernels::exp_f(-std::numeric_limits<float>::infinity()) == 0.f);
  CHECK(kernels::exp_f(-1000.f) == 0.f);
  CHECK(std::isfinite(kernels::exp_f(88.7f)));
}

TEST_CASE("large inputs take the parallel paths and still match the references", "[ops]") {
  Rng rng(21);
  const std::int64_t R = 700, C = 96;  // above the kernels' parallel grain
  Tensor x = random_tensor(Shape{R, C}, rng, -2.f, 2.f), dy = random_tensor(Shape{R, C}, rng);
  Tensor gamma = random_tensor(Shape{C}, rng, 0.5f, 1.5f), beta = random_tensor(Shape{C}, rng);
  Variable vx(x, true), vg(gamma, true), vb(beta, true);
  Variable y = layer_norm(vx, vg, vb);
  y.backward(dy);
  // Reference in double: forward, then dx, dgamma, dbeta from the closed forms.
  std::vector<double> dg(C, 0), db(C, 0);
  for (std::int64_t r = 0; r < R; ++r) {
    double m = 0, v = 0;
    for (std::int64_t c = 0; c < C; ++c) m += x.at(r, c);
    m /= C;
    for (std::int64_t c = 0; c < C; ++c) v += (x.at(r, c) - m) * (x.at(r, c) - m);
    const double rs = 1 / std::sqrt(v / C + 1e-5);
    double sg = 0, sgx = 0;
    for (std::int64_t c = 0; c < C; ++c) {
      const double xh = (x.at(r, c) - m) * rs, g = dy.at(r, c) * gamma.at(c);
      REQUIRE(y.value().at(r, c) == Approx(xh * gamma.at(c) + beta.at(c)).margin(2e-5));
      sg += g;
      sgx += g * xh;
      dg[c] += dy.at(r, c) * xh;
      db[c] += dy.at(r, c);
    }
    for (std::int64_t c = 0; c < C; ++c) {
      const double xh = (x.at(r, c) - m) * rs, g = dy.at(r, c) * gamma.at(c);
      REQUIRE(vx.grad().at(r, c) == Approx(rs * (g - sg / C - xh * sgx / C)).margin(2e-4));
    }
  }
  for (std::int64_t c = 0; c < C; ++c) {
    REQUIRE(vg.grad().at(c) == Approx(dg[c]).margin(2e-3));
    REQUIRE(vb.grad().at(c) == Approx(db[c]).margin(2e-3));
  }
  // Softmax and gelu over the same large input.
  Tensor sm = softmax(Variable(x)).value(), ge = gelu(Variable(x)).value();
  for (std::int64_t r = 0; r < R; ++r) {
    double z = 0;
    for (std::int64_t c = 0; c < C; ++c) z += std::exp(static_cast<double>(x.at(r, c)));
    for (std::int64_t c = 0; c < C; ++c) {
      REQUIRE(sm.at(r, c) == Approx(std::exp(static_cast<double>(x.at(r, c))) / z).margin(1e-6));
      const double v = x.at(r, c);
      REQUIRE(ge.at(r, c) == Approx(0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))).margin(1e-6));
    }
  }
}

TEST_CASE("host buffers are recycled without sharing live data", "[core]") {
  const Shape big{512, 1024};  // 2 MiB: above the cache's threshold
  const void* first;
  {
    Tensor a = Tensor::full(big, 1.f);
    first = a.raw();
  }
  Tensor b = Tensor::full(big, 2.f);
  CHECK(b.raw() == first);  // the freed block came back
  Tensor c = Tensor::full(big, 3.f);
  REQUIRE(c.raw() != b.raw());  // a live block is never handed out twice
  REQUIRE(b.at(0, 0) == 2.f);
  REQUIRE(c.at(511, 1023) == 3.f);
  release_cached_host_memory();
  REQUIRE(detail::HostBlockCache::instance().cached_bytes() == 0);
}

TEST_CASE("large host buffers start on a huge-page boundary, small ones on a cache line", "[core]") {
  using Cache = detail::HostBlockCache;
  auto offset = [](const Tensor& t, std::size_t a) { return reinterpret_cast<std::uintptr_t>(t.raw()) % a; };
  // 5 MiB + 4 bytes (not a multiple of a huge page), 4 MiB exactly, and just below the threshold
  const Tensor odd = Tensor::full(Shape{5 * 262144 + 1}, 1.5f);
  const Tensor at = Tensor::full(Shape{static_cast<std::int64_t>(Cache::kMinHuge / 4)}, 2.f);
  const Tensor below = Tensor::full(Shape{static_cast<std::int64_t>(Cache::kMinHuge / 4 - 16)}, 3.f);
  const Tensor small = Tensor::full(Shape{3, 5}, 4.f);
  CHECK(offset(odd, Cache::kHugePage) == 0);
  CHECK(offset(at, Cache::kHugePage) == 0);
  CHECK(offset(below, 64) == 0);
  CHECK(offset(small, 64) == 0);
  // the whole buffer is usable and holds what was written (last element of each)
  CHECK(odd.data<float>()[5 * 262144] == 1.5f);
  CHECK(at.data<float>()[Cache::kMinHuge / 4 - 1] == 2.f);
  CHECK(below.data<float>()[Cache::kMinHuge / 4 - 17] == 3.f);
  const void* freed = odd.raw();
  {
    Tensor copy = odd.clone();  // same size: a fresh block while odd lives
    CHECK(copy.raw() != freed);
    CHECK(offset(copy, Cache::kHugePage) == 0);
    CHECK(copy.data<float>()[5 * 262144] == 1.5f);
  }
  release_cached_host_memory();
  CHECK(Cache::instance().cached_bytes() == 0);
}

}  // namespace test_ops
