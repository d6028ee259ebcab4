#include "go/kernels/rowwise.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace go::kernels {

namespace {
// Below this many elements the OpenMP fork costs more than the loop.
constexpr std::int64_t kParallelGrain = 1 << 15;

template <class F>
void for_each_row(std::int64_t rows, std::int64_t cols, F&& f) {
#pragma omp parallel for schedule(static) if (rows * cols > kParallelGrain)
  for (std::int64_t r = 0; r < rows; ++r) f(r);
}
}  // namespace

void unary_forward(Unary op, const float* x, float* y, std::int64_t n) {
  // A switch outside the loop lets each case vectorize.
  switch (op) {
#define GO_UNARY_CASE(OP)                                               \
  case Unary::OP:                                                       \
    _Pragma("omp parallel for simd if (n > kParallelGrain)")            \
    for (std::int64_t i = 0; i < n; ++i) y[i] = unary_f(Unary::OP, x[i]); \
    break;
    GO_UNARY_CASE(relu)
    GO_UNARY_CASE(gelu)
    GO_UNARY_CASE(tanh)
    GO_UNARY_CASE(sigmoid)
    GO_UNARY_CASE(exp)
    GO_UNARY_CASE(log)
    GO_UNARY_CASE(neg)
    GO_UNARY_CASE(abs)
    GO_UNARY_CASE(sqrt)
    GO_UNARY_CASE(square)
#undef GO_UNARY_CASE
  }
}

void unary_backward(Unary op, const float* x, const float* y, const float* dy, float* dx, std::int64_t n,
                    bool accumulate) {
  if (accumulate) {
#pragma omp parallel for simd if (n > kParallelGrain)
    for (std::int64_t i = 0; i < n; ++i) dx[i] += dy[i] * unary_df(op, x[i], y[i]);
  } else {
#pragma omp parallel for simd if (n > kParallelGrain)
    for (std::int64_t i = 0; i < n; ++i) dx[i] = dy[i] * unary_df(op, x[i], y[i]);
  }
}

void layer_norm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                        std::int64_t rows, std::int64_t cols, float eps) {
  for_each_row(rows, cols, [&](std::int64_t r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    // Two passes (mean, then centred squares): no cancellation, and both vectorize.
    float s = 0.f;
#pragma omp simd reduction(+ : s)
    for (std::int64_t c = 0; c < cols; ++c) s += xr[c];
    const float mu = cols ? s / static_cast<float>(cols) : 0.f;
    float ss = 0.f;
#pragma omp simd reduction(+ : ss)
    for (std::int64_t c = 0; c < cols; ++c) ss += (xr[c] - mu) * (xr[c] - mu);
    const float rs = 1.f / std::sqrt((cols ? ss / static_cast<float>(cols) : 0.f) + eps);
    const float m = mu;
    mean[r] = m;
    rstd[r] = rs;
    if (gamma && beta) {
#pragma omp simd
      for (std::int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - m) * rs * gamma[c] + beta[c];
    } else if (gamma) {
#pragma omp simd
      for (std::int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - m) * rs * gamma[c];
    } else {
#pragma omp simd
      for (std::int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - m) * rs + (beta ? beta[c] : 0.f);
    }
  });
}

void layer_norm_backward(const float* x, const float* gamma, const float* mean, const float* rstd, const float* dy,
                         float* dx, float* dgamma, float* dbeta, std::int64_t rows, std::int64_t cols) {
  // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma. The column sums
  // for dgamma / dbeta go to partials in the same pass (the row is in cache), one per
  // fixed block of rows, merged in block order: the bits do not depend on the thread count.
  const bool want_params = dgamma || dbeta;
  const std::int64_t blocks = rows * cols > kParallelGrain ? std::min<std::int64_t>(64, rows) : 1;
  std::vector<float> part(want_params ? static_cast<std::size_t>(blocks) * 2 * cols : 0, 0.f);
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (std::int64_t b = 0; b < blocks; ++b) {
    float* pg = want_params ? part.data() + static_cast<std::size_t>(b) * 2 * cols : nullptr;
    float* pb = want_params ? pg + cols : nullptr;
    for (std::int64_t r = b * rows / blocks; r < (b + 1) * rows / blocks; ++r) {
      const float* xr = x + r * cols;
      const float* dyr = dy + r * cols;
      float* dxr = dx + r * cols;
      const float m = mean[r], rs = rstd[r];
      float sg = 0.f, sgx = 0.f;
#pragma omp simd reduction(+ : sg, sgx)
      for (std::int64_t c = 0; c < cols; ++c) {
        const float g = dyr[c] * (gamma ? gamma[c] : 1.f);
        sg += g;
        sgx += g * (xr[c] - m) * rs;
      }
      const float mg = cols ? sg / static_cast<float>(cols) : 0.f;
      const float mgx = cols ? sgx / static_cast<float>(cols) : 0.f;
#pragma omp simd
      for (std::int64_t c = 0; c < cols; ++c) {
        const float g = dyr[c] * (gamma ? gamma[c] : 1.f);
        const float xh = (xr[c] - m) * rs;
        dxr[c] = rs * (g - mg - xh * mgx);
      }
      if (want_params) {
#pragma omp simd
        for (std::int64_t c = 0; c < cols; ++c) {
          pg[c] += dyr[c] * (xr[c] - m) * rs;
          pb[c] += dyr[c];
        }
      }
    }
  }
  if (!want_params) return;
  for (std::int64_t b = 0; b < blocks; ++b) {
    const float* pg = part.data() + static_cast<std::size_t>(b) * 2 * cols;
    const float* pb = pg + cols;
    for (std::int64_t c = 0; c < cols; ++c) {
      if (dgamma) dgamma[c] += pg[c];
      if (dbeta) dbeta[c] += pb[c];
    }
  }
}

void softmax_forward(const float* x, float* y, std::int64_t rows, std::int64_t cols, bool log) {
  for_each_row(rows, cols, [&](std::int64_t r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
    for (std::int64_t c = 0; c < cols; ++c) mx = std::max(mx, xr[c]);
    if (mx == -std::numeric_limits<float>::infinity()) mx = 0.f;  // an all -inf row: no inf - inf
    float s = 0.f;
#pragma omp simd reduction(+ : s)
    for (std::int64_t c = 0; c < cols; ++c) {
      const float e = exp_f(xr[c] - mx);
      yr[c] = e;
      s += e;
    }
    if (log) {
      const float lse = mx + std::log(s);
#pragma omp simd
      for (std::int64_t c = 0; c < cols; ++c) yr[c] = xr[c] - lse;
    } else {
      const float inv = 1.f / s;
#pragma omp simd
      for (std::int64_t c = 0; c < cols; ++c) yr[c] *= inv;
    }
  });
}

void softmax_backward(const float* y, const float* dy, float* dx, std::int64_t rows, std::int64_t cols, bool log) {
  for_each_row(rows, cols, [&](std::int64_t r) {
    const float* yr = y + r * cols;
    const float* dyr = dy + r * cols;
    float* dxr = dx + r * cols;
    float s = 0.f;
    if (log) {
      // y = x - lse: dx = dy - softmax * sum(dy).
#pragma omp simd reduction(+ : s)
      for (std::int64_t c = 0; c < cols; ++c) s += dyr[c];
#pragma omp simd
      for (std::int64_t c = 0; c < cols; ++c) dxr[c] = dyr[c] - exp_f(yr[c]) * s;
    } else {
      // dx = y * (dy - sum(dy * y)).
#pragma omp simd reduction(+ : s)
      for (std::int64_t c = 0; c < cols; ++c) s += dyr[c] * yr[c];
#pragma omp simd
      for (std::int64_t c = 0; c < cols; ++c) dxr[c] = yr[c] * (dyr[c] - s);
    }
  });
}

void adam_step(float* param, const float* grad, float* m, float* v, std::int64_t n, float lr, float beta1,
               float beta2, float eps, float weight_decay, float bc1, float bc2) {
#pragma omp parallel for simd if (n > kParallelGrain)
  for (std::int64_t i = 0; i < n; ++i)
    adam_update(param[i], grad[i], m[i], v[i], lr, beta1, beta2, eps, weight_decay, bc1, bc2);
}

}  // namespace go::kernels
