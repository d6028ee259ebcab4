#pragma once
// Fused autograd ops for the layers in go/nn: each records one node where the
// generic ops would record several, and writes gradients straight into the
// inputs' gradient buffers. On an 80,000-row graph every unfused elementwise op
// costs a full [n, d] pass and allocation in both directions, so these are what
// the policy network is built from.
//
//   linear({x_0, .., x_k}, W, b, act, r) y = act(sum_i x_i W_i + b) (+ r); W is one [sum_i in_i, out]
//                                       matrix whose row blocks W_i multiply the x_i (GraphSAGE's
//                                       concat(h, up, down) W without materializing the concat);
//                                       r, a residual added without an activation
//   mlp_gelu(x, W1, b1, W2, b2, r, g, b) gelu(x' W1 + b1) W2 + b2 (+ r), x' = x or LN(x; g, b), keeping
//                                       only the pre-activation (gelu and LN recomputed in backward)
//   ln_linear(x, g, b, W, bias)         LN(x; g, b) W + bias without keeping LN(x)
//   add_same(a, b)                      a + b for two tensors of one shape
//   mul_row(x, g)                       x * g with g one row [1, d] (or [d]) broadcast over the rows
//   add_embedding(x, table, ids)        x + table[ids] (an embedding added to every row)
//   column_sum_into(g, rows, cols, out, accumulate)   helper: out[c] (+)= sum_r g[r, c]
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "go/autograd/attention.hpp"
#include "go/autograd/variable.hpp"
#include "go/core/error.hpp"
#include "go/core/tensor.hpp"
#include "go/kernels/gemm.hpp"
#include "go/kernels/math.hpp"
#include "go/kernels/rowwise.hpp"

namespace go::nn {

enum class Activation : std::uint8_t { none, relu, gelu };

inline const char* activation_name(Activation a) {
  switch (a) {
    case Activation::none: return "none";
    case Activation::relu: return "relu";
    case Activation::gelu: return "gelu";
  }
  return "?";
}

namespace detail {

// out[c] (+)= sum_r term(r, c), each column summed over the rows in order (threads split the
// columns, never the rows): the bits do not depend on the thread count
// (tests/test_reliability.cpp) and equal a plain sequential loop.
template <class Term>
void column_reduce_into(std::int64_t rows, std::int64_t cols, float* out, bool accumulate, Term term) {
  constexpr std::int64_t kBlock = 16;  // columns per task: one cache line of floats
  const std::int64_t blocks = (cols + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 16) && blocks > 1)
  for (std::int64_t cb = 0; cb < blocks; ++cb) {
    const std::int64_t c0 = cb * kBlock, nc = std::min(kBlock, cols - c0);
    float acc[kBlock] = {};
    for (std::int64_t r = 0; r < rows; ++r) {
#pragma omp simd
      for (std::int64_t j = 0; j < nc; ++j) acc[j] += term(r, c0 + j);
    }
    for (std::int64_t j = 0; j < nc; ++j) out[c0 + j] = (accumulate ? out[c0 + j] : 0.f) + acc[j];
  }
}

// out[c] (+)= sum_r g[r, c].
inline void column_sum_into(const float* g, std::int64_t rows, std::int64_t cols, float* out, bool accumulate) {
  column_reduce_into(rows, cols, out, accumulate, [g, cols](std::int64_t r, std::int64_t c) { return g[r * cols + c]; });
}

inline void check_f32_matrix(const Tensor& t, const char* op, const char* what) {
  GO_CHECK(t.defined() && t.dtype() == DType::f32 && t.rank() == 2, op, ": ", what, " must be an f32 matrix, got ",
           t.defined() ? t.describe() : std::string("an undefined tensor"));
}

}  // namespace detail

namespace detail {
// dst (+)= src, elementwise; dst freshly allocated when !accumulate.
inline void write_or_add(float* dst, const float* src, std::int64_t m, bool accumulate) {
  if (!accumulate) {
    if (m) std::memcpy(dst, src, static_cast<std::size_t>(m) * sizeof(float));
    return;
  }
#pragma omp parallel for simd if (m > (1 << 16))
  for (std::int64_t i = 0; i < m; ++i) dst[i] += src[i];
}
}  // namespace detail

// y = act(sum_i xs[i] W_i + b). xs[i]: [n, in_i]; W: [sum in_i, out]; b: [1, out] or [out], or
// undefined for no bias. Saves the pre-activation only for gelu (relu's derivative reads y).
inline Variable linear(const std::vector<Variable>& xs, const Variable& W, const Variable& b,
                       Activation act = Activation::none, const Variable& residual = Variable()) {
  GO_CHECK(!xs.empty(), "nn::linear: no inputs");
  detail::check_f32_matrix(W.value(), "nn::linear", "the weight");
  const std::int64_t n = xs[0].value().rank() >= 1 ? xs[0].dim(0) : 0, out = W.dim(1);
  std::int64_t in_total = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    detail::check_f32_matrix(xs[i].value(), "nn::linear", "an input");
    GO_CHECK(xs[i].dim(0) == n, "nn::linear: input ", i, " ", xs[i].shape().to_string(), " has ", xs[i].dim(0),
             " rows, input 0 ", xs[0].shape().to_string(), " has ", n);
    in_total += xs[i].dim(1);
  }
  GO_CHECK(in_total == W.dim(0), "nn::linear: the inputs have ", in_total, " columns in all but the weight is ",
           W.shape().to_string());
  const bool has_bias = b.defined();
  if (has_bias)
    GO_CHECK(b.value().dtype() == DType::f32 && b.numel() == out, "nn::linear: bias ", b.shape().to_string(),
             " must have ", out, " elements to match the weight ", W.shape().to_string());

  const bool has_res = residual.defined();
  if (has_res)
    GO_CHECK(act == Activation::none && residual.value().dtype() == DType::f32 &&
                 residual.shape() == Shape({n, out}),
             "nn::linear: a residual ", residual.shape().to_string(), " must be f32 [", n, ", ", out,
             "] and comes without an activation (got ", activation_name(act), ")");
  Tensor y = Tensor::empty(Shape{n, out});
  if (has_res && n * out > 0)
    std::memcpy(y.f32(), residual.value().f32(), static_cast<std::size_t>(n * out) * sizeof(float));
  {
    std::int64_t off = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const std::int64_t k = xs[i].dim(1);
      kernels::gemm(false, false, n, out, k, 1.f, xs[i].value().f32(), k, W.value().f32() + off * out, out,
                    i == 0 && !has_res ? 0.f : 1.f, y.f32(), out);
      off += k;
    }
    if (in_total == 0 && !has_res && n * out > 0)
      std::memset(y.f32(), 0, static_cast<std::size_t>(n * out) * sizeof(float));
  }
  Tensor pre;  // gelu's input, kept for its derivative
  if (act == Activation::gelu) pre = Tensor::empty(Shape{n, out});
  if (has_bias || act != Activation::none) {
    const float* pb = has_bias ? b.value().f32() : nullptr;
    float* py = y.f32();
    float* pp = pre.defined() ? pre.f32() : nullptr;
#pragma omp parallel for if (n * out > (1 << 15))
    for (std::int64_t r = 0; r < n; ++r) {
      float* yr = py + r * out;
      if (act == Activation::gelu) {
        float* prr = pp + r * out;
#pragma omp simd
        for (std::int64_t c = 0; c < out; ++c) {
          const float z = yr[c] + (pb ? pb[c] : 0.f);
          prr[c] = z;
          yr[c] = kernels::gelu_f(z);
        }
      } else if (act == Activation::relu) {
#pragma omp simd
        for (std::int64_t c = 0; c < out; ++c) {
          const float z = yr[c] + (pb ? pb[c] : 0.f);
          yr[c] = z > 0.f ? z : 0.f;
        }
      } else {
#pragma omp simd
        for (std::int64_t c = 0; c < out; ++c) yr[c] += pb[c];
      }
    }
  }

  std::vector<Variable> inputs = xs;
  inputs.push_back(W);
  if (has_bias) inputs.push_back(b);
  if (has_res) inputs.push_back(residual);
  const std::size_t nx = xs.size();
  Tensor y_saved = act == Activation::relu ? y : Tensor();
  return Variable::make(std::move(y), std::move(inputs),
                        [nx, act, has_bias, has_res, pre, y_saved](std::vector<Variable>& in, const Tensor& g) {
                          if (has_res && in.back().requires_grad()) {
                            bool acc = false;
                            Tensor& dr = in.back().grad_slot(acc);
                            detail::write_or_add(dr.f32(), g.f32(), g.numel(), acc);
                          }
                          const std::int64_t n = g.dim(0), out = g.dim(1);
                          // d pre-activation
                          Tensor dpre = g;
                          if (act != Activation::none) {
                            dpre = Tensor::empty(g.shape());
                            const float* pg = g.f32();
                            float* pd = dpre.f32();
                            const std::int64_t m = n * out;
                            if (act == Activation::relu) {
                              const float* py = y_saved.f32();
#pragma omp parallel for simd if (m > (1 << 15))
                              for (std::int64_t i = 0; i < m; ++i) pd[i] = py[i] > 0.f ? pg[i] : 0.f;
                            } else {
                              const float* pp = pre.f32();
#pragma omp parallel for simd if (m > (1 << 15))
                              for (std::int64_t i = 0; i < m; ++i) pd[i] = pg[i] * kernels::gelu_df(pp[i]);
                            }
                          }
                          const float* pd = dpre.f32();
                          Variable& W = in[nx];
                          if (has_bias && in[nx + 1].requires_grad()) {
                            bool acc = false;
                            Tensor& db = in[nx + 1].grad_slot(acc);
                            detail::column_sum_into(pd, n, out, db.f32(), acc);
                          }
                          std::int64_t off = 0;
                          float* dW = nullptr;
                          bool acc_w = false;
                          if (W.requires_grad()) dW = W.grad_slot(acc_w).f32();
                          const float* pw = W.value().f32();
                          for (std::size_t i = 0; i < nx; ++i) {
                            const std::int64_t k = in[i].dim(1);
                            if (dW)  // dW_i = x_i^T dpre
                              kernels::gemm(true, false, k, out, n, 1.f, in[i].value().f32(), k, pd, out,
                                            acc_w ? 1.f : 0.f, dW + off * out, out);
                            if (in[i].requires_grad()) {  // dx_i = dpre W_i^T
                              bool acc = false;
                              float* dx = in[i].grad_slot(acc).f32();
                              kernels::gemm(false, true, n, k, out, 1.f, pd, out, pw + off * out, out,
                                            acc ? 1.f : 0.f, dx, k);
                            }
                            off += k;
                          }
                        });
}

inline Variable linear(const Variable& x, const Variable& W, const Variable& b, Activation act = Activation::none,
                       const Variable& residual = Variable()) {
  return linear(std::vector<Variable>{x}, W, b, act, residual);
}

namespace detail {

// Layer norm over the rows of x [n, c] into z (mean and rstd [n] saved), the same kernel and
// epsilon as go::layer_norm; recomputing it gives bit-identical z.
inline void layer_norm_into(const Tensor& x, const Variable& gamma, const Variable& beta, float eps, float* z,
                            float* mean, float* rstd) {
  kernels::layer_norm_forward(x.f32(), gamma.value().f32(), beta.value().f32(), z, mean, rstd, x.dim(0), x.dim(1), eps);
}

inline void check_norm_params(const Variable& gamma, const Variable& beta, std::int64_t cols, const char* op) {
  GO_CHECK(gamma.defined() && beta.defined() && gamma.value().dtype() == DType::f32 &&
               beta.value().dtype() == DType::f32 && gamma.numel() == cols && beta.numel() == cols,
           op, ": layer-norm gain ", gamma.defined() ? gamma.shape().to_string() : "(undefined)", " and bias ",
           beta.defined() ? beta.shape().to_string() : "(undefined)", " must have ", cols, " elements");
}

// d x (+)= layer-norm backward of dz; accumulates d gamma, d beta into their gradient buffers
// (the kernel skips them when null).
inline void layer_norm_backward_into(Variable& x, Variable& gamma, Variable& beta, const Tensor& mean,
                                     const Tensor& rstd, const float* dz) {
  const std::int64_t n = x.dim(0), c = x.dim(1);
  float* dgamma = nullptr;
  float* dbeta = nullptr;
  if (gamma.requires_grad()) {
    bool acc = false;
    Tensor& t = gamma.grad_slot(acc);
    if (!acc) t.fill(0.f);
    dgamma = t.f32();
  }
  if (beta.requires_grad()) {
    bool acc = false;
    Tensor& t = beta.grad_slot(acc);
    if (!acc) t.fill(0.f);
    dbeta = t.f32();
  }
  if (!x.requires_grad()) {
    Tensor dx = Tensor::empty(x.shape());
    kernels::layer_norm_backward(x.value().f32(), gamma.value().f32(), mean.f32(), rstd.f32(), dz, dx.f32(), dgamma,
                                 dbeta, n, c);
    return;
  }
  bool acc = false;
  Tensor& gx = x.grad_slot(acc);
  if (!acc) {
    kernels::layer_norm_backward(x.value().f32(), gamma.value().f32(), mean.f32(), rstd.f32(), dz, gx.f32(), dgamma,
                                 dbeta, n, c);
  } else {
    Tensor dx = Tensor::empty(x.shape());
    kernels::layer_norm_backward(x.value().f32(), gamma.value().f32(), mean.f32(), rstd.f32(), dz, dx.f32(), dgamma,
                                 dbeta, n, c);
    write_or_add(gx.f32(), dx.f32(), dx.numel(), true);
  }
}

}  // namespace detail

// y = LN(x) W + b, LN with gain gamma and bias beta over the last axis (eps 1e-5, as
// go::layer_norm). The normalized input is not kept: the backward recomputes it from x and the
// saved row statistics.
inline Variable ln_linear(const Variable& x, const Variable& gamma, const Variable& beta, const Variable& W,
                          const Variable& b, float eps = 1e-5f) {
  detail::check_f32_matrix(x.value(), "nn::ln_linear", "x");
  detail::check_f32_matrix(W.value(), "nn::ln_linear", "the weight");
  const std::int64_t n = x.dim(0), in = x.dim(1), out = W.dim(1);
  detail::check_norm_params(gamma, beta, in, "nn::ln_linear");
  GO_CHECK(W.dim(0) == in && (!b.defined() || b.numel() == out), "nn::ln_linear: x ", x.shape().to_string(),
           ", weight ", W.shape().to_string(), " and bias ", b.defined() ? b.shape().to_string() : "(none)",
           " do not match");
  Tensor mean = Tensor::empty(Shape{n}), rstd = Tensor::empty(Shape{n});
  Tensor z = Tensor::empty(Shape{n, in});
  detail::layer_norm_into(x.value(), gamma, beta, eps, z.f32(), mean.f32(), rstd.f32());
  Tensor yv;
  {
    NoGradGuard no_graph;
    yv = linear(Variable(z), W, b).value();
  }
  z = Tensor();
  std::vector<Variable> inputs{x, gamma, beta, W};
  const bool has_bias = b.defined();
  if (has_bias) inputs.push_back(b);
  return Variable::make(std::move(yv), std::move(inputs),
                        [mean, rstd, eps, has_bias](std::vector<Variable>& in, const Tensor& g) {
                          const std::int64_t n = g.dim(0), out = g.dim(1), c = in[0].dim(1);
                          Tensor z = Tensor::empty(Shape{n, c});
                          Tensor m2 = Tensor::empty(Shape{n}), r2 = Tensor::empty(Shape{n});
                          detail::layer_norm_into(in[0].value(), in[1], in[2], eps, z.f32(), m2.f32(), r2.f32());
                          if (has_bias && in[4].requires_grad()) {
                            bool acc = false;
                            float* slot = in[4].grad_slot(acc).f32();  // before reading acc (argument order is unspecified)
                            detail::column_sum_into(g.f32(), n, out, slot, acc);
                          }
                          if (in[3].requires_grad()) {
                            bool acc = false;
                            float* dW = in[3].grad_slot(acc).f32();
                            kernels::gemm(true, false, c, out, n, 1.f, z.f32(), c, g.f32(), out, acc ? 1.f : 0.f, dW,
                                          out);
                          }
                          if (in[0].requires_grad() || in[1].requires_grad() || in[2].requires_grad()) {
                            // dz = g W^T over z's buffer
                            kernels::gemm(false, true, n, c, out, 1.f, g.f32(), out, in[3].value().f32(), out, 0.f,
                                          z.f32(), c);
                            detail::layer_norm_backward_into(in[0], in[1], in[2], mean, rstd, z.f32());
                          }
                        });
}

// The transformer feed-forward y = gelu(x' W1 + b1) W2 + b2 (+ residual) as one node, x' = x or,
// with ln_gamma / ln_beta, LN(x) (pre-norm). It keeps only the pre-activation [n, hidden] (and
// LN's row statistics): gelu, and LN(x), are recomputed in the backward pass.
inline Variable mlp_gelu(const Variable& x, const Variable& W1, const Variable& b1, const Variable& W2,
                         const Variable& b2, const Variable& residual = Variable(),
                         const Variable& ln_gamma = Variable(), const Variable& ln_beta = Variable(),
                         float eps = 1e-5f) {
  detail::check_f32_matrix(x.value(), "nn::mlp_gelu", "x");
  detail::check_f32_matrix(W1.value(), "nn::mlp_gelu", "W1");
  detail::check_f32_matrix(W2.value(), "nn::mlp_gelu", "W2");
  const std::int64_t n = x.dim(0), in = x.dim(1), hid = W1.dim(1), out = W2.dim(1);
  GO_CHECK(W1.dim(0) == in && W2.dim(0) == hid && b1.numel() == hid && b2.numel() == out, "nn::mlp_gelu: x ",
           x.shape().to_string(), ", W1 ", W1.shape().to_string(), ", b1 ", b1.shape().to_string(), ", W2 ",
           W2.shape().to_string(), ", b2 ", b2.shape().to_string(), " do not chain");
  const bool has_res = residual.defined(), has_ln = ln_gamma.defined();
  if (has_res)
    GO_CHECK(residual.value().dtype() == DType::f32 && residual.shape() == Shape({n, out}), "nn::mlp_gelu: residual ",
             residual.shape().to_string(), " must be f32 [", n, ", ", out, "]");
  Tensor mean, rstd;
  Tensor xin = x.value();
  if (has_ln) {
    detail::check_norm_params(ln_gamma, ln_beta, in, "nn::mlp_gelu");
    mean = Tensor::empty(Shape{n});
    rstd = Tensor::empty(Shape{n});
    xin = Tensor::empty(Shape{n, in});
    detail::layer_norm_into(x.value(), ln_gamma, ln_beta, eps, xin.f32(), mean.f32(), rstd.f32());
  }
  // The pre-activation is kept only when the result will be back-propagated.
  bool recorded = false;
  if (grad_enabled())
    for (const Variable* v : {&x, &W1, &b1, &W2, &b2, &residual, &ln_gamma, &ln_beta})
      recorded = recorded || v->requires_grad();
  Tensor pre = recorded ? Tensor::empty(Shape{n, hid}) : Tensor();
  Tensor y = Tensor::empty(Shape{n, out});
  if (has_res && n * out > 0)
    std::memcpy(y.f32(), residual.value().f32(), static_cast<std::size_t>(n * out) * sizeof(float));
  kernels::feed_forward(n, in, hid, out, xin.f32(), W1.value().f32(), b1.value().f32(), W2.value().f32(),
                        b2.value().f32(), recorded ? pre.f32() : nullptr, y.f32(), has_res);
  xin = Tensor();
  std::vector<Variable> inputs{x, W1, b1, W2, b2};
  const std::size_t res_at = inputs.size();
  if (has_res) inputs.push_back(residual);
  const std::size_t ln_at = inputs.size();
  if (has_ln) inputs.insert(inputs.end(), {ln_gamma, ln_beta});
  return Variable::make(std::move(y), std::move(inputs), [pre, has_res, has_ln, res_at, ln_at, mean, rstd, eps](
                                                             std::vector<Variable>& in, const Tensor& g) {
    const std::int64_t n = g.dim(0), out = g.dim(1), hid = pre.dim(1), xin = in[0].dim(1);
    if (has_res && in[res_at].requires_grad()) {
      bool acc = false;
      Tensor& dr = in[res_at].grad_slot(acc);
      detail::write_or_add(dr.f32(), g.f32(), g.numel(), acc);
    }
    // LN(x), gelu and gelu' recomputed tile by tile, the products on each tile with its rows in
    // cache (kernels::feed_forward_backward): no [n, hid] buffer is written
    auto slot = [](Variable& v, bool& acc) -> float* { return v.requires_grad() ? v.grad_slot(acc).f32() : nullptr; };
    kernels::FeedForwardGrads grads;
    grads.dw1 = slot(in[1], grads.accumulate_dw1);
    grads.db1 = slot(in[2], grads.accumulate_db1);
    grads.dw2 = slot(in[3], grads.accumulate_dw2);
    grads.db2 = slot(in[4], grads.accumulate_db2);
    grads.dx = slot(in[0], grads.accumulate_dx);
    kernels::FeedForwardNorm norm{};
    if (has_ln) {
      grads.dgamma = slot(in[ln_at], grads.accumulate_dgamma);
      grads.dbeta = slot(in[ln_at + 1], grads.accumulate_dbeta);
      norm = {in[ln_at].value().f32(), in[ln_at + 1].value().f32(), mean.f32(), rstd.f32(), eps};
    }
    kernels::feed_forward_backward(n, xin, hid, out, in[0].value().f32(), has_ln ? &norm : nullptr,
                                   in[1].value().f32(), in[3].value().f32(), pre.f32(), g.f32(), grads);
  });
}

// a + b, same shape (the residual connection).
inline Variable add_same(const Variable& a, const Variable& b) {
  GO_CHECK(a.value().dtype() == DType::f32 && b.value().dtype() == DType::f32 && a.shape() == b.shape(),
           "nn::add_same: shapes ", a.shape().to_string(), " and ", b.shape().to_string(), " must be equal (f32)");
  Tensor y = Tensor::empty(a.shape());
  const float* pa = a.value().f32();
  const float* pb = b.value().f32();
  float* py = y.f32();
  const std::int64_t m = y.numel();
#pragma omp parallel for simd if (m > (1 << 16))
  for (std::int64_t i = 0; i < m; ++i) py[i] = pa[i] + pb[i];
  return Variable::make(std::move(y), {a, b}, [](std::vector<Variable>& in, const Tensor& g) {
    for (auto& v : in) {
      if (!v.requires_grad()) continue;
      bool acc = false;
      Tensor& d = v.grad_slot(acc);
      detail::write_or_add(d.f32(), g.f32(), g.numel(), acc);
    }
  });
}

// x [n, d] * gate [1, d] (or [d]) broadcast over the rows.
inline Variable mul_row(const Variable& x, const Variable& gate) {
  detail::check_f32_matrix(x.value(), "nn::mul_row", "x");
  const std::int64_t n = x.dim(0), d = x.dim(1);
  GO_CHECK(gate.value().dtype() == DType::f32 && gate.numel() == d && gate.value().rows() == 1, "nn::mul_row: gate ",
           gate.shape().to_string(), " must be one row of ", d, " elements to scale x ", x.shape().to_string());
  Tensor y = Tensor::empty(x.shape());
  const float* px = x.value().f32();
  const float* pg = gate.value().f32();
  float* py = y.f32();
#pragma omp parallel for if (n * d > (1 << 15))
  for (std::int64_t r = 0; r < n; ++r) {
#pragma omp simd
    for (std::int64_t c = 0; c < d; ++c) py[r * d + c] = px[r * d + c] * pg[c];
  }
  return Variable::make(std::move(y), {x, gate}, [](std::vector<Variable>& in, const Tensor& g) {
    const std::int64_t n = g.dim(0), d = g.dim(1);
    const float* px = in[0].value().f32();
    const float* pgate = in[1].value().f32();
    const float* pg = g.f32();
    if (in[0].requires_grad()) {
      bool acc = false;
      float* dx = in[0].grad_slot(acc).f32();
#pragma omp parallel for if (n * d > (1 << 15))
      for (std::int64_t r = 0; r < n; ++r) {
#pragma omp simd
        for (std::int64_t c = 0; c < d; ++c) dx[r * d + c] = (acc ? dx[r * d + c] : 0.f) + pg[r * d + c] * pgate[c];
      }
    }
    if (in[1].requires_grad()) {
      bool acc = false;
      float* dg = in[1].grad_slot(acc).f32();
      detail::column_reduce_into(n, d, dg, acc, [pg, px, d](std::int64_t r, std::int64_t c) { return pg[r * d + c] * px[r * d + c]; });
    }
  });
}

// x [n, d] + table[ids[r]] for every row r; ids i32 [n], each in [0, table rows).
inline Variable add_embedding(const Variable& x, const Variable& table, const Tensor& ids) {
  detail::check_f32_matrix(x.value(), "nn::add_embedding", "x");
  detail::check_f32_matrix(table.value(), "nn::add_embedding", "the table");
  const std::int64_t n = x.dim(0), d = x.dim(1), V = table.dim(0);
  GO_CHECK(table.dim(1) == d, "nn::add_embedding: table ", table.shape().to_string(), " must have the ", d,
           " columns of x ", x.shape().to_string());
  GO_CHECK(ids.defined() && ids.dtype() == DType::i32 && ids.numel() == n, "nn::add_embedding: ids ",
           ids.defined() ? ids.describe() : std::string("(undefined)"), " must be i32 with one id per row of x ",
           x.shape().to_string());
  const std::int32_t* id = ids.data<std::int32_t>();
  for (std::int64_t r = 0; r < n; ++r)
    GO_CHECK(id[r] >= 0 && id[r] < V, "nn::add_embedding: id ", id[r], " of row ", r, " out of range for table ",
             table.shape().to_string());
  Tensor y = Tensor::empty(x.shape());
  const float* px = x.value().f32();
  const float* pt = table.value().f32();
  float* py = y.f32();
#pragma omp parallel for if (n * d > (1 << 15))
  for (std::int64_t r = 0; r < n; ++r) {
    const float* tr = pt + static_cast<std::int64_t>(id[r]) * d;
#pragma omp simd
    for (std::int64_t c = 0; c < d; ++c) py[r * d + c] = px[r * d + c] + tr[c];
  }
  return Variable::make(std::move(y), {x, table}, [ids](std::vector<Variable>& in, const Tensor& g) {
    const std::int64_t n = g.dim(0), d = g.dim(1);
    const float* pg = g.f32();
    if (in[0].requires_grad()) {
      bool acc = false;
      float* slot = in[0].grad_slot(acc).f32();  // before reading acc (argument order is unspecified)
      detail::write_or_add(slot, pg, n * d, acc);
    }
    if (in[1].requires_grad()) {
      bool acc = false;
      Tensor& dt = in[1].grad_slot(acc);
      float* pt = dt.f32();
      const std::int64_t V = dt.dim(0);
      if (!acc) std::memset(pt, 0, static_cast<std::size_t>(V * d) * sizeof(float));
      const std::int32_t* id = ids.data<std::int32_t>();
      // Rows of the table are few: one thread per block of columns keeps the sums race-free.
#pragma omp parallel for if (n * d > (1 << 16))
      for (std::int64_t c0 = 0; c0 < d; c0 += 16) {
        const std::int64_t c1 = std::min(d, c0 + 16);
        for (std::int64_t r = 0; r < n; ++r) {
          float* tr = pt + static_cast<std::int64_t>(id[r]) * d;
          const float* gr = pg + r * d;
          for (std::int64_t c = c0; c < c1; ++c) tr[c] += gr[c];
        }
      }
    }
  });
}

// y = relu(x W + b + table[ids]): a layer over numeric features plus an embedding of a
// categorical one (the policy's input layer), keeping only y.
inline Variable linear_embedding_relu(const Variable& x, const Variable& W, const Variable& b, const Variable& table,
                                      const Tensor& ids) {
  Tensor y;
  {
    NoGradGuard no_graph;
    y = add_embedding(linear(x, W, b), table, ids).value();
  }
  {
    float* py = y.f32();
    const std::int64_t m = y.numel();
#pragma omp parallel for simd if (m > (1 << 16))
    for (std::int64_t i = 0; i < m; ++i) py[i] = py[i] > 0.f ? py[i] : 0.f;
  }
  Tensor ys = y;
  return Variable::make(std::move(y), {x, W, b, table}, [ys, ids](std::vector<Variable>& in, const Tensor& g) {
    const std::int64_t n = g.dim(0), d = g.dim(1), m = n * d;
    Tensor dpre = Tensor::empty(g.shape());
    float* pd = dpre.f32();
    const float* pg = g.f32();
    const float* py = ys.f32();
#pragma omp parallel for simd if (m > (1 << 16))
    for (std::int64_t i = 0; i < m; ++i) pd[i] = py[i] > 0.f ? pg[i] : 0.f;
    const std::int64_t k = in[0].dim(1);
    if (in[2].requires_grad()) {
      bool acc = false;
      float* slot = in[2].grad_slot(acc).f32();  // before reading acc (argument order is unspecified)
      detail::column_sum_into(pd, n, d, slot, acc);
    }
    if (in[1].requires_grad()) {  // dW = x^T dpre
      bool acc = false;
      float* slot = in[1].grad_slot(acc).f32();  // before reading acc (argument order is unspecified)
      kernels::gemm(true, false, k, d, n, 1.f, in[0].value().f32(), k, pd, d, acc ? 1.f : 0.f, slot, d);
    }
    if (in[0].requires_grad()) {  // dx = dpre W^T
      bool acc = false;
      float* dx = in[0].grad_slot(acc).f32();
      kernels::gemm(false, true, n, k, d, 1.f, pd, d, in[1].value().f32(), d, acc ? 1.f : 0.f, dx, k);
    }
    if (in[3].requires_grad()) {  // scatter-add into the table's rows, columns split among threads
      bool acc = false;
      Tensor& dt = in[3].grad_slot(acc);
      float* pt = dt.f32();
      if (!acc) std::memset(pt, 0, static_cast<std::size_t>(dt.numel()) * sizeof(float));
      const std::int32_t* id = ids.data<std::int32_t>();
#pragma omp parallel for if (m > (1 << 16))
      for (std::int64_t c0 = 0; c0 < d; c0 += 16) {
        const std::int64_t c1 = std::min(d, c0 + 16);
        for (std::int64_t r = 0; r < n; ++r) {
          float* tr = pt + static_cast<std::int64_t>(id[r]) * d;
          const float* gr = pd + r * d;
          for (std::int64_t c = c0; c < c1; ++c) tr[c] += gr[c];
        }
      }
    }
  });
}

}  // namespace go::nn
