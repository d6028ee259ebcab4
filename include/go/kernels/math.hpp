#pragma once
// Per-element math shared by the CPU loops and the CUDA kernels.
#include <cmath>
#include <cstdint>

#include "go/core/host_device.hpp"

namespace go::kernels {

enum class Unary : std::uint8_t { relu, gelu, tanh, sigmoid, exp, log, neg, abs, sqrt, square };

GO_HOST_DEVICE float bits_to_float(std::int32_t b) {
#if defined(__CUDA_ARCH__)
  return __int_as_float(b);
#else
  return __builtin_bit_cast(float, b);  // memcpy here would block vectorization
#endif
}

// exp, erf and tanh without libm calls, so that CPU loops over them vectorize
// (libm's expf/erff/tanhf are scalar calls). Errors are checked against libm in tests/test_ops.cpp.
GO_HOST_DEVICE float exp_f(float x) {
  // Written without branches or floorf so that loops over it vectorize.
  const bool underflow = !(x > -87.33f);  // below FLT_MIN's exponent, also -inf and NaN (masked entries)
  x = x < 88.72f ? x : 88.72f;
  x = underflow ? 0.f : x;
  // round(x / ln 2): adding 1.5 * 2^23 drops the fraction.
  const float k = (x * 1.44269504088896341f + 12582912.f) - 12582912.f;
  // r = x - k ln 2 in two parts (Cody-Waite), exact enough for |k| <= 128.
  const float r = (x - k * 0.693359375f) - k * -2.12194440e-4f;
  // Cephes expf minimax polynomial on [-ln2 / 2, ln2 / 2].
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  // 2^k in two factors so that k = 128 (x near 88.72) does not overflow the exponent field.
  const std::int32_t ki = static_cast<std::int32_t>(k);
  const std::int32_t k1 = ki >> 1, k2 = ki - k1;
  const float y = p * bits_to_float((k1 + 127) << 23) * bits_to_float((k2 + 127) << 23);
  return underflow ? 0.f : y;
}

GO_HOST_DEVICE float sigmoid_f(float x) {
  // Split by sign so the exponential never overflows.
  const float e = exp_f(-fabsf(x));
  const float r = 1.f / (1.f + e);
  return x >= 0.f ? r : e * r;
}

GO_HOST_DEVICE float tanh_f(float x) {
  const float a = fabsf(x);
  // Near 0, 1 - 2 / (e^2a + 1) cancels: use the series there (both computed, then selected, to vectorize).
  const float a2 = x * x;
  const float series = x * (1.f - a2 * (1.f / 3.f - a2 * (2.f / 15.f)));
  const float r = 1.f - 2.f / (exp_f(2.f * a) + 1.f);
  return a < 0.04f ? series : (x < 0.f ? -r : r);
}

// A rational approximation, erf(x) = x P(x^2) / Q(x^2) on |x| < 3.8325, +-1 beyond (where erf
// rounds to +-1 in float): no exponential and one division, so the policy's GELU (whose backward
// recomputes it) costs half of the earlier series + Abramowitz & Stegun 7.1.26 form. P and Q
// (degrees 6 and 4) were fitted for the least relative error over [0, 3.92] (5e-8 in double);
// evaluated in float, 4.3e-7 at most (tests/test_ops.cpp). Branch-free, to vectorize.
GO_HOST_DEVICE float erf_f(float x) {
  const float a = fabsf(x);
  const float c0 = x > 3.92f ? 3.92f : x;
  const float c = c0 < -3.92f ? -3.92f : c0;
  const float t = c * c;
  float p = 1.991870116e-08f;
  p = p * t - 1.957486718e-06f;
  p = p * t + 1.418401526e-04f;
  p = p * t + 3.701770477e-03f;
  p = p * t + 5.057426729e-02f;
  p = p * t + 1.999325879e-01f;
  p = p * t + 1.128379110e+00f;
  float q = 9.560301795e-04f;
  q = q * t + 1.435372954e-02f;
  q = q * t + 1.150016059e-01f;
  q = q * t + 5.105173046e-01f;
  q = q * t + 1.f;
  const float r = c * p / q;
  return a >= 3.8325f ? (x < 0.f ? -1.f : 1.f) : r;
}

// Exact GELU (erf form), as PyTorch's default, and its derivative. Both read e = erf(x / sqrt(2))
// (gelu_erf): a pass that needs both computes e once (gelu_of, gelu_df_of), with the same bits.
GO_HOST_DEVICE float gelu_erf(float x) { return erf_f(x * 0.70710678118654752f); }
GO_HOST_DEVICE float gelu_of(float x, float e) { return 0.5f * x * (1.f + e); }
GO_HOST_DEVICE float gelu_df_of(float x, float e) {
  const float cdf = 0.5f * (1.f + e);
  const float pdf = 0.39894228040143268f * exp_f(-0.5f * x * x);
  return cdf + x * pdf;
}
GO_HOST_DEVICE float gelu_f(float x) { return gelu_of(x, gelu_erf(x)); }
GO_HOST_DEVICE float gelu_df(float x) { return gelu_df_of(x, gelu_erf(x)); }

GO_HOST_DEVICE float unary_f(Unary op, float x) {
  switch (op) {
    case Unary::relu: return x > 0.f ? x : 0.f;
    case Unary::gelu: return gelu_f(x);
    case Unary::tanh: return tanh_f(x);
    case Unary::sigmoid: return sigmoid_f(x);
    case Unary::exp: return exp_f(x);
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
