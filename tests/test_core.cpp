#include <catch2/catch.hpp>

#include <set>

#include "go/core/core.hpp"

namespace test_core {
using namespace go;

TEST_CASE("tensor: factories, views and checks", "[core]") {
  Tensor z = Tensor::zeros(Shape{3, 4});
  REQUIRE(z.numel() == 12);
  REQUIRE(z.rows() == 3);
  REQUIRE(z.cols() == 4);
  for (float x : z.to_vector()) REQUIRE(x == 0.f);

  Tensor t = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, Shape{3, 2});
  REQUIRE(t.at(2, 1) == 6.f);
  Tensor r = t.slice_rows(1, 3);
  REQUIRE(r.shape() == Shape{2, 2});
  REQUIRE(r.at(0, 0) == 3.f);
  REQUIRE(r.shares_storage(t));
  r.at(0, 0) = 30.f;  // a view writes through
  REQUIRE(t.at(1, 0) == 30.f);
  Tensor c = t.clone();
  c.at(0, 0) = -1.f;
  REQUIRE(t.at(0, 0) == 1.f);

  Tensor e = t.slice_rows(3, 3);
  REQUIRE(e.numel() == 0);
  REQUIRE(e.defined());
  REQUIRE(Tensor::zeros(Shape{0, 5}).numel() == 0);
  REQUIRE_FALSE(Tensor().defined());

  REQUIRE(t.reshape(Shape{6}).at(5) == 6.f);
  REQUIRE_THROWS_WITH(t.reshape(Shape{4}), Catch::Contains("[3, 2]") && Catch::Contains("[4]"));
  REQUIRE_THROWS_WITH(t.slice_rows(2, 4), Catch::Contains("out of range"));
  REQUIRE_THROWS_WITH(t.data<std::int32_t>(), Catch::Contains("f32") && Catch::Contains("i32"));
  REQUIRE_THROWS_WITH(Tensor::from_vector<float>({1, 2, 3}, Shape{2, 2}), Catch::Contains("[2, 2]"));
  REQUIRE_THROWS_AS(Shape({-1, 2}), Error);

  Tensor i = Tensor::from_vector<std::int64_t>({7, 8, 9});
  REQUIRE(i.dtype() == DType::i64);
  REQUIRE(i.data<std::int64_t>()[2] == 9);
  REQUIRE(i.nbytes() == 24);
}

TEST_CASE("rng: seeded streams are reproducible and well distributed", "[core]") {
  Rng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const auto x = a.next_u64();
    REQUIRE(x == b.next_u64());
    differs = differs || x != c.next_u64();
  }
  REQUIRE(differs);

  // Uniform mean and variance, normal moments, uniform_int coverage.
  Rng r(7);
  const int n = 200000;
  double s = 0, s2 = 0, ns = 0, ns2 = 0;
  std::vector<int> counts(10, 0);
  for (int i = 0; i < n; ++i) {
    const double u = r.uniform();
    REQUIRE(u >= 0.0);
    REQUIRE(u < 1.0);
    s += u;
    s2 += u * u;
    const double z = r.normal();
    ns += z;
    ns2 += z * z;
    counts[r.uniform_int(10)]++;
  }
  CHECK(s / n == Approx(0.5).margin(0.005));
  CHECK(s2 / n - (s / n) * (s / n) == Approx(1.0 / 12).margin(0.002));
  CHECK(ns / n == Approx(0.0).margin(0.01));
  CHECK(ns2 / n == Approx(1.0).margin(0.02));
  for (int k : counts) CHECK(k == Approx(n / 10).epsilon(0.05));

  // Forked streams are reproducible and distinct from one another.
  Rng base(5);
  Rng f1 = base.fork(1), f1b = base.fork(1), f2 = base.fork(2);
  const auto v1 = f1.next_u64();
  REQUIRE(v1 == f1b.next_u64());
  REQUIRE(v1 != f2.next_u64());
}

TEST_CASE("rng: fixed seed gives a fixed sequence across builds", "[core]") {
  // Pinned values: a change here breaks every recorded experiment's reproducibility.
  // (Cross-checked against an independent xoshiro256** + splitmix64 implementation.)
  Rng r(0);
  REQUIRE(r.next_u64() == 11091344671253066420ull);
  REQUIRE(r.next_u64() == 13793997310169335082ull);
  Rng q(12345);
  REQUIRE(q.normal() == Approx(0.526515782).epsilon(1e-6));
  std::set<std::uint64_t> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(r.next_u64());
  REQUIRE(seen.size() == 1000);
}

}  // namespace test_core
