#pragma once
// Elementwise and row-wise kernels on raw row-major pointers.
#include <cstdint>

#include "go/kernels/math.hpp"

namespace go::kernels {

// y[i] = f(x[i]).
void unary_forward(Unary op, const float* x, float* y, std::int64_t n);
// dx[i] (+)= dy[i] * f'(x[i]) (accumulates when accumulate is true).
void unary_backward(Unary op, const float* x, const float* y, const float* dy, float* dx, std::int64_t n,
                    bool accumulate);

// Layer normalization over each row of x [rows, cols]:
//   y = (x - mean) * rstd * gamma + beta; mean and rstd ([rows]) are saved.
// gamma and beta may be null (no affine part).
void layer_norm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                        std::int64_t rows, std::int64_t cols, float eps);
// dx is overwritten; dgamma and dbeta (when non-null) are accumulated into.
void layer_norm_backward(const float* x, const float* gamma, const float* mean, const float* rstd, const float* dy,
                         float* dx, float* dgamma, float* dbeta, std::int64_t rows, std::int64_t cols);

// Softmax (or log-softmax) over each row of x [rows, cols].
void softmax_forward(const float* x, float* y, std::int64_t rows, std::int64_t cols, bool log);
// dx (overwritten) from the forward output y and the output gradient dy.
void softmax_backward(const float* y, const float* dy, float* dx, std::int64_t rows, std::int64_t cols, bool log);

// Adam over n elements (see adam_update in math.hpp).
void adam_step(float* param, const float* grad, float* m, float* v, std::int64_t n, float lr, float beta1,
               float beta2, float eps, float weight_decay, float bc1, float bc2);

}  // namespace go::kernels
