#pragma once
// Per-element math shared by the CPU loops and the CUDA kernels.
#include <cmath>
#include <cstdint>

#include "go/core/host_device.hpp"

namespace go::kernels {

enum class Unary : std::uint8_t { relu, gelu, tanh, sigmoid, exp, log, neg, abs, sqrt, square };

GO_HOST_DEVICE float sigmoid_f(float x) {
  // Split by sign so exp never overflows.
  if (x >= 0.f) return 1.f / (1.f + expf(-x));
  const float e = expf(x);
  return e / (1.f + e);
}

// Exact GELU (erf form), as PyTorch's default.
GO_HOST_DEVICE float gelu_f(float x) { return 0.5f * x * (1.f + erff(x * 0.70710678118654752f)); }
GO_HOST_DEVICE float gelu_df(float x) {
  const float cdf = 0.5f * (1.f + erff(x * 0.70710678118654752f));
  const float pdf = 0.39894228040143268f * expf(-0.5f * x * x);
  return cdf + x * pdf;
}

GO_HOST_DEVICE float unary_f(Unary op, float x) {
  switch (op) {
    case Unary::relu: return x > 0.f ? x : 0.f;
    case Unary::gelu: return gelu_f(x);
    case Unary::tanh: return tanhf(x);
    case Unary::sigmoid: return sigmoid_f(x);
    case Unary::exp: return expf(x);
    case Unary::log: return logf(x);
    case Unary::neg: return -x;
    case Unary::abs: return fabsf(x);
    case Unary::sqrt: return sqrtf(x);
    case Unary::square: return x * x;
  }
  return x;
}

// d unary_f / dx, given the input x and the output y = unary_f(x).
// relu and abs use the subgradient 0 at 0.
GO_HOST_DEVICE float unary_df(Unary op, float x, float y) {
  switch (op) {
    case Unary::relu: return x > 0.f ? 1.f : 0.f;
    case Unary::gelu: return gelu_df(x);
    case Unary::tanh: return 1.f - y * y;
    case Unary::sigmoid: return y * (1.f - y);
    case Unary::exp: return y;
    case Unary::log: return 1.f / x;
    case Unary::neg: return -1.f;
    case Unary::abs: return x > 0.f ? 1.f : (x < 0.f ? -1.f : 0.f);
    case Unary::sqrt: return 0.5f / y;
    case Unary::square: return 2.f * x;
  }
  return 0.f;
}

// One Adam step for one parameter element (decoupled weight decay when wd > 0, AdamW).
// bc1 = 1 - beta1^t, bc2 = 1 - beta2^t.
GO_HOST_DEVICE void adam_update(float& p, float g, float& m, float& v, float lr, float beta1, float beta2, float eps,
                                float wd, float bc1, float bc2) {
  m = beta1 * m + (1.f - beta1) * g;
  v = beta2 * v + (1.f - beta2) * g * g;
  const float mhat = m / bc1;
  const float vhat = v / bc2;
  p -= lr * (mhat / (sqrtf(vhat) + eps) + wd * p);
}

}  // namespace go::kernels
