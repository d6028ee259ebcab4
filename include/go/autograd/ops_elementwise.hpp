#pragma once
// Elementwise ops: unary activations, broadcasting binary arithmetic, scaling,
// clamp / minimum / maximum / where (what PPO's clipped objective needs).
//
// Broadcasting: each operand is viewed as a matrix (rows(), cols()); a rank-1
// tensor is one row. Along each of the two axes the sizes must match or one of
// them must be 1 (a row vector over rows, a column over columns, a scalar
// over both). Gradients are summed back over the broadcast axes.
#include <cmath>
#include <vector>

#include "go/autograd/variable.hpp"
#include "go/kernels/rowwise.hpp"

namespace go {

namespace detail {

struct Broadcast {
  std::int64_t rows = 0, cols = 0;        // output as a matrix
  std::int64_t a_rows, a_cols, b_rows, b_cols;
  Shape shape;                              // output shape
};

inline Broadcast broadcast_shapes(const Tensor& a, const Tensor& b, const char* op) {
  Broadcast bc;
  bc.a_rows = a.rows(), bc.a_cols = a.cols(), bc.b_rows = b.rows(), bc.b_cols = b.cols();
  auto merge = [&](std::int64_t x, std::int64_t y) {
    GO_CHECK(x == y || x == 1 || y == 1, op, ": shapes ", a.shape().to_string(), " and ", b.shape().to_string(),
             " do not broadcast");
    return x == 1 ? y : x;
  };
  bc.rows = merge(bc.a_rows, bc.b_rows);
  bc.cols = merge(bc.a_cols, bc.b_cols);
  if (a.shape() == b.shape()) bc.shape = a.shape();
  else if (a.rank() < 2 && b.rank() < 2) bc.shape = a.numel() >= b.numel() ? a.shape() : b.shape();
  else if (bc.rows * bc.cols == a.numel() && a.rank() >= 2) bc.shape = a.shape();
  else if (bc.rows * bc.cols == b.numel() && b.rank() >= 2) bc.shape = b.shape();
  else bc.shape = Shape{bc.rows, bc.cols};
  return bc;
}

// out[r, c] = f(a[r', c'], b[r'', c'']) with broadcast indices.
template <class F>
void broadcast_apply(const Broadcast& bc, const float* a, const float* b, float* out, F f) {
  const std::int64_t R = bc.rows, C = bc.cols;
  const bool a_full = bc.a_rows == R && bc.a_cols == C, b_full = bc.b_rows == R && bc.b_cols == C;
  if (a_full && b_full) {
    const std::int64_t n = R * C;
#pragma omp parallel for simd if (n > (1 << 15))
    for (std::int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
    return;
  }
#pragma omp parallel for if (R * C > (1 << 15))
  for (std::int64_t r = 0; r < R; ++r) {
    const float* ar = a + (bc.a_rows == 1 ? 0 : r) * bc.a_cols;
    const float* br = b + (bc.b_rows == 1 ? 0 : r) * bc.b_cols;
    float* o = out + r * C;
    const std::int64_t as = bc.a_cols == 1 ? 0 : 1, bs = bc.b_cols == 1 ? 0 : 1;
    for (std::int64_t c = 0; c < C; ++c) o[c] = f(ar[c * as], br[c * bs]);
  }
}

// Sums g [rows, cols] down to [to_rows, to_cols] (each 1 or the full size) and adds into v's gradient.
inline void add_reduced_grad(Variable& v, const Tensor& g, std::int64_t rows, std::int64_t cols) {
  const std::int64_t tr = v.value().rows(), tc = v.value().cols();
  if (tr == rows && tc == cols) {
    v.add_grad(g.reshape(v.shape()));
    return;
  }
  Tensor red = Tensor::zeros(v.shape());
  float* o = red.f32();
  const float* p = g.f32();
  for (std::int64_t r = 0; r < rows; ++r) {
    float* orow = o + (tr == 1 ? 0 : r) * tc;
    const float* prow = p + r * cols;
    if (tc == 1) {
      float s = 0.f;
      for (std::int64_t c = 0; c < cols; ++c) s += prow[c];
      orow[0] += s;
    } else {
      for (std::int64_t c = 0; c < cols; ++c) orow[c] += prow[c];
    }
  }
  v.add_grad(red);
}

// A binary op with partial derivatives da(a, b) and db(a, b).
template <class F, class DA, class DB>
Variable binary_op(const Variable& a, const Variable& b, const char* name, F f, DA da, DB db) {
  GO_CHECK(a.value().dtype() == DType::f32 && b.value().dtype() == DType::f32, name, " needs f32 tensors, got ",
           a.value().describe(), " and ", b.value().describe());
  const Broadcast bc = broadcast_shapes(a.value(), b.value(), name);
  Tensor out = Tensor::empty(bc.shape);
  broadcast_apply(bc, a.value().f32(), b.value().f32(), out.f32(), f);
  return Variable::make(std::move(out), {a, b}, [bc, da, db](std::vector<Variable>& in, const Tensor& g) {
    const float* pa = in[0].value().f32();
    const float* pb = in[1].value().f32();
    const float* pg = g.f32();
    const bool same_var = in[0].id() == in[1].id();
    for (int side = 0; side < 2; ++side) {
      if (!in[side].requires_grad()) continue;
      const Tensor& v = in[side].value();
      // An operand of the output's full shape without a gradient yet gets its
      // gradient written in place; otherwise via a temporary (reduced or added).
      const bool in_place =
          !same_var && !in[side].has_grad() && v.rows() == bc.rows && v.cols() == bc.cols;
      Tensor full;
      bool acc = false;
      if (in_place) full = in[side].grad_slot(acc);
      else full = Tensor::empty(Shape{bc.rows, bc.cols});
      float* pf = full.f32();
      // Evaluate the partial on the broadcast grid, then multiply by g.
      if (side == 0) broadcast_apply(bc, pa, pb, pf, da);
      else broadcast_apply(bc, pa, pb, pf, db);
      const std::int64_t n = bc.rows * bc.cols;
#pragma omp parallel for simd if (n > (1 << 15))
      for (std::int64_t i = 0; i < n; ++i) pf[i] *= pg[i];
      if (!in_place) add_reduced_grad(in[side], full, bc.rows, bc.cols);
    }
  });
}

inline Variable unary_op(const Variable& x, kernels::Unary op) {
  GO_CHECK(x.value().dtype() == DType::f32, "elementwise op needs an f32 tensor, got ", x.value().describe());
  Tensor y = Tensor::empty(x.shape());
  kernels::unary_forward(op, x.value().f32(), y.f32(), y.numel());
  return Variable::make(y, {x}, [op, y](std::vector<Variable>& in, const Tensor& g) {
    bool acc = false;
    Tensor& dx = in[0].grad_slot(acc);
    kernels::unary_backward(op, in[0].value().f32(), y.f32(), g.f32(), dx.f32(), g.numel(), acc);
  });
}

}  // namespace detail

inline Variable add(const Variable& a, const Variable& b) {
  return detail::binary_op(
      a, b, "add", [](float x, float y) { return x + y; }, [](float, float) { return 1.f; },
      [](float, float) { return 1.f; });
}
inline Variable sub(const Variable& a, const Variable& b) {
  return detail::binary_op(
      a, b, "sub", [](float x, float y) { return x - y; }, [](float, float) { return 1.f; },
      [](float, float) { return -1.f; });
}
inline Variable mul(const Variable& a, const Variable& b) {
  return detail::binary_op(
      a, b, "mul", [](float x, float y) { return x * y; }, [](float, float y) { return y; },
      [](float x, float) { return x; });
}
inline Variable div(const Variable& a, const Variable& b) {
  return detail::binary_op(
      a, b, "div", [](float x, float y) { return x / y; }, [](float, float y) { return 1.f / y; },
      [](float x, float y) { return -x / (y * y); });
}
// Ties send half of the gradient to each side.
inline Variable minimum(const Variable& a, const Variable& b) {
  return detail::binary_op(
      a, b, "minimum", [](float x, float y) { return x < y ? x : y; },
      [](float x, float y) { return x < y ? 1.f : (x == y ? 0.5f : 0.f); },
      [](float x, float y) { return y < x ? 1.f : (x == y ? 0.5f : 0.f); });
}
inline Variable maximum(const Variable& a, const Variable& b) {
  return detail::binary_op(
      a, b, "maximum", [](float x, float y) { return x > y ? x : y; },
      [](float x, float y) { return x > y ? 1.f : (x == y ? 0.5f : 0.f); },
      [](float x, float y) { return y > x ? 1.f : (x == y ? 0.5f : 0.f); });
}

inline Variable operator+(const Variable& a, const Variable& b) { return add(a, b); }
inline Variable operator-(const Variable& a, const Variable& b) { return sub(a, b); }
inline Variable operator*(const Variable& a, const Variable& b) { return mul(a, b); }
inline Variable operator/(const Variable& a, const Variable& b) { return div(a, b); }

// y = s * x + t (scalar constants).
inline Variable affine_scalar(const Variable& x, float s, float t) {
  GO_CHECK(x.value().dtype() == DType::f32, "scale needs an f32 tensor, got ", x.value().describe());
  Tensor y = Tensor::empty(x.shape());
  const float* px = x.value().f32();
  float* py = y.f32();
  const std::int64_t n = y.numel();
#pragma omp parallel for simd if (n > (1 << 15))
  for (std::int64_t i = 0; i < n; ++i) py[i] = s * px[i] + t;
  return Variable::make(std::move(y), {x}, [s](std::vector<Variable>& in, const Tensor& g) {
    Tensor d = Tensor::empty(g.shape());
    const float* pg = g.f32();
    float* pd = d.f32();
    const std::int64_t n = g.numel();
#pragma omp parallel for simd if (n > (1 << 15))
    for (std::int64_t i = 0; i < n; ++i) pd[i] = s * pg[i];
    in[0].add_grad(d);
  });
}
inline Variable scale(const Variable& x, float s) { return affine_scalar(x, s, 0.f); }
inline Variable add_scalar(const Variable& x, float t) { return affine_scalar(x, 1.f, t); }
inline Variable operator*(const Variable& x, float s) { return scale(x, s); }
inline Variable operator*(float s, const Variable& x) { return scale(x, s); }
inline Variable operator-(const Variable& x) { return scale(x, -1.f); }

inline Variable relu(const Variable& x) { return detail::unary_op(x, kernels::Unary::relu); }
inline Variable gelu(const Variable& x) { return detail::unary_op(x, kernels::Unary::gelu); }
inline Variable tanh(const Variable& x) { return detail::unary_op(x, kernels::Unary::tanh); }
inline Variable sigmoid(const Variable& x) { return detail::unary_op(x, kernels::Unary::sigmoid); }
inline Variable exp(const Variable& x) { return detail::unary_op(x, kernels::Unary::exp); }
inline Variable log(const Variable& x) { return detail::unary_op(x, kernels::Unary::log); }
inline Variable abs(const Variable& x) { return detail::unary_op(x, kernels::Unary::abs); }
inline Variable sqrt(const Variable& x) { return detail::unary_op(x, kernels::Unary::sqrt); }
inline Variable square(const Variable& x) { return detail::unary_op(x, kernels::Unary::square); }

// Elementwise clamp to [lo, hi]; the gradient passes where lo <= x <= hi.
inline Variable clamp(const Variable& x, float lo, float hi) {
  GO_CHECK(lo <= hi, "clamp: lower bound ", lo, " above upper bound ", hi);
  Tensor y = Tensor::empty(x.shape());
  const float* px = x.value().f32();
  float* py = y.f32();
  for (std::int64_t i = 0; i < y.numel(); ++i) py[i] = px[i] < lo ? lo : (px[i] > hi ? hi : px[i]);
  return Variable::make(std::move(y), {x}, [lo, hi](std::vector<Variable>& in, const Tensor& g) {
    Tensor d = Tensor::empty(g.shape());
    const float* px = in[0].value().f32();
    for (std::int64_t i = 0; i < g.numel(); ++i) d.f32()[i] = (px[i] >= lo && px[i] <= hi) ? g.f32()[i] : 0.f;
    in[0].add_grad(d);
  });
}

// out = cond ? a : b elementwise; cond is an f32 mask (non-zero is true) of the same shape.
inline Variable where(const Tensor& cond, const Variable& a, const Variable& b) {
  GO_CHECK(cond.shape() == a.shape() && a.shape() == b.shape() && cond.dtype() == DType::f32,
           "where: condition ", cond.describe(), " and operands ", a.value().describe(), ", ",
           b.value().describe(), " must be f32 of one shape");
  Tensor y = Tensor::empty(a.shape());
  const float *pc = cond.f32(), *pa = a.value().f32(), *pb = b.value().f32();
  for (std::int64_t i = 0; i < y.numel(); ++i) y.f32()[i] = pc[i] != 0.f ? pa[i] : pb[i];
  return Variable::make(std::move(y), {a, b}, [cond](std::vector<Variable>& in, const Tensor& g) {
    for (int side = 0; side < 2; ++side) {
      if (!in[side].requires_grad()) continue;
      Tensor d = Tensor::empty(g.shape());
      for (std::int64_t i = 0; i < g.numel(); ++i)
        d.f32()[i] = ((cond.f32()[i] != 0.f) == (side == 0)) ? g.f32()[i] : 0.f;
      in[side].add_grad(d);
    }
  });
}

}  // namespace go
