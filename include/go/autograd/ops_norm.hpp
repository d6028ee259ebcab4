#pragma once
// Row-wise normalizations: layer norm, softmax, log-softmax.
#include <vector>

#include "go/autograd/variable.hpp"
#include "go/kernels/rowwise.hpp"

namespace go {

// Layer normalization over the last axis, with optional affine gamma/beta ([cols] or [1, cols]).
inline Variable layer_norm(const Variable& x, const Variable& gamma, const Variable& beta, float eps = 1e-5f) {
  const Tensor& v = x.value();
  GO_CHECK(v.dtype() == DType::f32 && v.rank() >= 1, "layer_norm needs an f32 tensor, got ", v.describe());
  const std::int64_t R = v.rows(), C = v.cols();
  const bool affine = gamma.defined();
  if (affine)
    GO_CHECK(gamma.numel() == C && beta.defined() && beta.numel() == C, "layer_norm: gamma ",
             gamma.shape().to_string(), " and beta ", beta.defined() ? beta.shape().to_string() : "(none)",
             " must have ", C, " elements to match ", v.shape().to_string());
  Tensor y = Tensor::empty(v.shape()), mu = Tensor::empty(Shape{R}), rs = Tensor::empty(Shape{R});
  kernels::layer_norm_forward(v.f32(), affine ? gamma.value().f32() : nullptr, affine ? beta.value().f32() : nullptr,
                              y.f32(), mu.f32(), rs.f32(), R, C, eps);
  std::vector<Variable> inputs{x};
  if (affine) inputs.insert(inputs.end(), {gamma, beta});
  return Variable::make(std::move(y), std::move(inputs), [mu, rs, affine](std::vector<Variable>& in, const Tensor& g) {
    const Tensor& v = in[0].value();
    const std::int64_t R = v.rows(), C = v.cols();
    Tensor dx = Tensor::empty(v.shape());
    Tensor dgamma, dbeta;
    if (affine) {
      dgamma = Tensor::zeros(in[1].shape());
      dbeta = Tensor::zeros(in[2].shape());
    }
    kernels::layer_norm_backward(v.f32(), affine ? in[1].value().f32() : nullptr, mu.f32(), rs.f32(), g.f32(),
                                 dx.f32(), affine ? dgamma.f32() : nullptr, affine ? dbeta.f32() : nullptr, R, C);
    in[0].add_grad(dx);
    if (affine) {
      in[1].add_grad(dgamma);
      in[2].add_grad(dbeta);
    }
  });
}
inline Variable layer_norm(const Variable& x, float eps = 1e-5f) { return layer_norm(x, Variable(), Variable(), eps); }

namespace detail {
inline Variable softmax_op(const Variable& x, bool log) {
  const Tensor& v = x.value();
  GO_CHECK(v.dtype() == DType::f32 && v.rank() >= 1, log ? "log_softmax" : "softmax", " needs an f32 tensor, got ",
           v.describe());
  Tensor y = Tensor::empty(v.shape());
  kernels::softmax_forward(v.f32(), y.f32(), v.rows(), v.cols(), log);
  return Variable::make(y, {x}, [y, log](std::vector<Variable>& in, const Tensor& g) {
    Tensor dx = Tensor::empty(y.shape());
    kernels::softmax_backward(y.f32(), g.f32(), dx.f32(), y.rows(), y.cols(), log);
    in[0].add_grad(dx);
  });
}
}  // namespace detail

// Softmax over each row (the last axis).
inline Variable softmax(const Variable& x) { return detail::softmax_op(x, false); }
inline Variable log_softmax(const Variable& x) { return detail::softmax_op(x, true); }

}  // namespace go
