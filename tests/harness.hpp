#pragma once
// The one generic op harness: every op is checked against a naive reference
// and its gradient against central finite differences.
//
// The op's output is reduced to a scalar loss = sum(out * w) with a fixed random
// w, so every output element contributes, and the loss is summed in double
// outside the op so that rounding in the reduction does not swamp the finite
// differences. The analytic gradient comes from backward(seed = w).
#include <catch2/catch.hpp>
#include <omp.h>

#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "go/autograd/variable.hpp"
#include "go/core/tensor.hpp"

namespace go::test {

// Restores the OpenMP thread count when a test leaves, failed or not.
struct ThreadsGuard {
  int saved = omp_get_max_threads();
  ~ThreadsGuard() { omp_set_num_threads(saved); }
};

inline Tensor random_tensor(const Shape& shape, Rng& rng, float lo = -1.f, float hi = 1.f) {
  return Tensor::uniform(shape, rng, lo, hi);
}

// |got - want| <= atol + rtol * |want| elementwise; reports the first mismatch.
inline void require_close(const Tensor& got, const Tensor& want, double rtol, double atol, const std::string& what) {
  INFO(what);
  REQUIRE(got.shape() == want.shape());
  const float* g = got.f32();
  const float* w = want.f32();
  for (std::int64_t i = 0; i < got.numel(); ++i) {
    const double diff = std::abs(static_cast<double>(g[i]) - w[i]);
    if (!(diff <= atol + rtol * std::abs(static_cast<double>(w[i])))) {
      std::ostringstream os;
      os << what << ": element " << i << " of " << got.shape().to_string() << " is " << g[i] << ", expected "
         << w[i];
      FAIL(os.str());
    }
  }
}

struct GradCheckOptions {
  double eps = 1e-3;        // finite-difference step
  double rtol = 2e-2;       // per element
  double atol = 2e-3;       // per element
  double norm_rtol = 1e-2;  // ||analytic - numeric|| / ||numeric|| over each input
  std::uint64_t seed = 1234;
};

using OpFn = std::function<Variable(const std::vector<Variable>&)>;

// Checks d loss / d input for every input listed in `check` (all when empty).
inline void check_gradients(const OpFn& fn, const std::vector<Tensor>& inputs, const GradCheckOptions& opt = {},
                            std::vector<bool> check = {}) {
  if (check.empty()) check.assign(inputs.size(), true);
  REQUIRE(check.size() == inputs.size());

  std::vector<Variable> vars;
  for (std::size_t i = 0; i < inputs.size(); ++i) vars.emplace_back(inputs[i].clone(), static_cast<bool>(check[i]));
  Variable out = fn(vars);
  Rng rng(opt.seed);
  const Tensor w = Tensor::uniform(out.shape(), rng, -1.f, 1.f);
  auto loss_of = [&](const Tensor& o) {
    REQUIRE(o.shape() == w.shape());
    double s = 0;
    for (std::int64_t i = 0; i < o.numel(); ++i) s += static_cast<double>(o.f32()[i]) * w.f32()[i];
    return s;
  };
  if (out.requires_grad()) out.backward(w);

  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (!check[k]) continue;
    const Tensor analytic = vars[k].grad();
    Tensor numeric = Tensor::zeros(inputs[k].shape());
    std::vector<Variable> probe;
    for (std::size_t i = 0; i < inputs.size(); ++i) probe.emplace_back(inputs[i].clone(), false);
    float* x = probe[k].value().f32();
    for (std::int64_t i = 0; i < numeric.numel(); ++i) {
      const float x0 = x[i];
      x[i] = static_cast<float>(x0 + opt.eps);
      const double up = loss_of(fn(probe).value());
      x[i] = static_cast<float>(x0 - opt.eps);
      const double down = loss_of(fn(probe).value());
      x[i] = x0;
      numeric.f32()[i] = static_cast<float>((up - down) / (2 * opt.eps));
    }
    double num2 = 0, diff2 = 0;
    for (std::int64_t i = 0; i < numeric.numel(); ++i) {
      const double d = static_cast<double>(analytic.f32()[i]) - numeric.f32()[i];
      diff2 += d * d;
      num2 += static_cast<double>(numeric.f32()[i]) * numeric.f32()[i];
    }
    INFO("input " << k << " of shape " << inputs[k].shape().to_string() << ": ||analytic - numeric|| = "
                  << std::sqrt(diff2) << ", ||numeric|| = " << std::sqrt(num2));
    CHECK(std::sqrt(diff2) <= opt.norm_rtol * std::sqrt(num2) + opt.atol);
    require_close(analytic, numeric, opt.rtol, opt.atol, "gradient of input " + std::to_string(k));
  }
}

}  // namespace go::test
