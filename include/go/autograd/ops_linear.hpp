#pragma once
// Matrix product with transpose flags.
#include "go/autograd/variable.hpp"
#include "go/kernels/gemm.hpp"

namespace go {

namespace tensor {
// op(a) * op(b) for row-major matrices; op(x) = x or x^T.
inline Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false) {
  GO_CHECK(a.rank() == 2 && b.rank() == 2 && a.dtype() == DType::f32 && b.dtype() == DType::f32,
           "matmul needs two f32 matrices, got ", a.describe(), " and ", b.describe());
  const std::int64_t m = trans_a ? a.dim(1) : a.dim(0), k = trans_a ? a.dim(0) : a.dim(1);
  const std::int64_t kb = trans_b ? b.dim(1) : b.dim(0), n = trans_b ? b.dim(0) : b.dim(1);
  GO_CHECK(k == kb, "matmul: inner dimensions differ: ", a.shape().to_string(), trans_a ? "^T" : "", " x ",
           b.shape().to_string(), trans_b ? "^T" : "");
  Tensor c = Tensor::empty(Shape{m, n});
  kernels::gemm(trans_a, trans_b, m, n, k, 1.f, a.f32(), a.dim(1), b.f32(), b.dim(1), 0.f, c.f32(), n);
  return c;
}
}  // namespace tensor

// C = op(A) op(B). Gradients: d op(A) = dC op(B)^T, d op(B) = op(A)^T dC, each
// written straight into the gradient buffer by one GEMM (beta = 1 to accumulate).
inline Variable matmul(const Variable& a, const Variable& b, bool trans_a = false, bool trans_b = false) {
  Tensor c = tensor::matmul(a.value(), b.value(), trans_a, trans_b);
  return Variable::make(std::move(c), {a, b}, [trans_a, trans_b](std::vector<Variable>& in, const Tensor& dc) {
    const Tensor& A = in[0].value();
    const Tensor& B = in[1].value();
    const std::int64_t m = dc.dim(0), n = dc.dim(1), k = trans_a ? A.dim(0) : A.dim(1);
    const float* pa = A.f32();
    const float* pb = B.f32();
    const float* pc = dc.f32();
    const std::int64_t lda = A.dim(1), ldb = B.dim(1);
    if (in[0].requires_grad()) {
      bool acc = false;
      float* g = in[0].grad_slot(acc).f32();
      const float beta = acc ? 1.f : 0.f;
      if (!trans_a)  // dA [m,k] = dC op(B)^T
        kernels::gemm(false, !trans_b, m, k, n, 1.f, pc, n, pb, ldb, beta, g, k);
      else  // A stored [k,m]: dA = op(B) dC^T
        kernels::gemm(trans_b, true, k, m, n, 1.f, pb, ldb, pc, n, beta, g, m);
    }
    if (in[1].requires_grad()) {
      bool acc = false;
      float* g = in[1].grad_slot(acc).f32();
      const float beta = acc ? 1.f : 0.f;
      if (!trans_b)  // dB [k,n] = op(A)^T dC
        kernels::gemm(!trans_a, false, k, n, m, 1.f, pa, lda, pc, n, beta, g, n);
      else  // B stored [n,k]: dB = dC^T op(A)
        kernels::gemm(true, trans_a, n, k, m, 1.f, pc, n, pa, lda, beta, g, k);
    }
  });
}

}  // namespace go
