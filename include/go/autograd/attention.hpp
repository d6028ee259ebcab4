#pragma once
// Segment-recurrent multi-head attention (Transformer-XL style) on tensors and
// as an autograd op. The kernels and the visibility rule are described in
// go/kernels/attention.hpp: rows are cut into segments of seg_len rows; a query
// of the segment [b, e) sees the keys [max(0, b - mem_len), e) (with causal,
// only keys <= its own row); the cached rows before b are stop-gradient.
//
//   Tensor level:   seg_attention_forward(q, k, v, params)  -> {out, lse}
//                   seg_attention_backward(q, k, v, out, lse, dout, params) -> {dq, dk, dv}
//   Autograd level: seg_attention(q, k, v, params) -> Variable [n, heads * head_dim]
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "go/autograd/variable.hpp"
#include "go/core/error.hpp"
#include "go/core/tensor.hpp"
#include "go/kernels/attention.hpp"

namespace go {

namespace detail {

inline void check_attention_operand(const Tensor& t, const char* name) {
  GO_CHECK(t.defined(), "seg_attention: ", name, " is an undefined tensor");
  GO_CHECK(t.dtype() == DType::f32, "seg_attention: ", name, " must be f32, got ", t.describe());
  GO_CHECK(t.device().is_cpu(), "seg_attention: ", name, " must be on the CPU, got ", t.describe());
  GO_CHECK(t.rank() == 2, "seg_attention: ", name, " must be a matrix [n, heads * head_dim], got shape ",
           t.shape().to_string());
}

// Checks q, k, v against the parameters and returns them with n filled in.
inline kernels::SegAttention check_seg_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                                 const kernels::SegAttention& params) {
  check_attention_operand(q, "q");
  check_attention_operand(k, "k");
  check_attention_operand(v, "v");
  GO_CHECK(q.shape() == k.shape() && q.shape() == v.shape(), "seg_attention: q ", q.shape().to_string(), ", k ",
           k.shape().to_string(), " and v ", v.shape().to_string(), " must have the same shape");
  GO_CHECK(params.heads >= 1 && params.head_dim >= 1, "seg_attention: heads = ", params.heads,
           " and head_dim = ", params.head_dim, " must be >= 1");
  GO_CHECK(q.dim(1) == static_cast<std::int64_t>(params.heads) * params.head_dim, "seg_attention: q ",
           q.shape().to_string(), " has ", q.dim(1), " columns, expected heads * head_dim = ", params.heads, " * ",
           params.head_dim, " = ", static_cast<std::int64_t>(params.heads) * params.head_dim);
  GO_CHECK(params.seg_len >= 1, "seg_attention: seg_len = ", params.seg_len, " must be >= 1 (q ", q.shape().to_string(),
           ")");
  GO_CHECK(params.mem_len >= 0, "seg_attention: mem_len = ", params.mem_len, " must be >= 0");
  GO_CHECK(params.n == 0 || params.n == q.dim(0), "seg_attention: params.n = ", params.n, " but q ",
           q.shape().to_string(), " has ", q.dim(0), " rows");
  kernels::SegAttention p = params;
  p.n = q.dim(0);
  return p;
}

}  // namespace detail

struct SegAttentionOutput {
  Tensor out;  // [n, heads * head_dim]
  Tensor lse;  // [heads, n], log-sum-exp of each query's scaled scores
};

struct SegAttentionGrads {
  Tensor dq, dk, dv;  // each [n, heads * head_dim]
};

inline SegAttentionOutput seg_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                                const kernels::SegAttention& params) {
  const kernels::SegAttention p = detail::check_seg_attention(q, k, v, params);
  SegAttentionOutput r{Tensor::empty(q.shape()), Tensor::empty(Shape{p.heads, p.n})};
  kernels::seg_attention_forward(p, q.f32(), k.f32(), v.f32(), r.out.f32(), r.lse.f32());
  return r;
}

inline SegAttentionGrads seg_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                                const Tensor& lse, const Tensor& dout,
                                                const kernels::SegAttention& params) {
  const kernels::SegAttention p = detail::check_seg_attention(q, k, v, params);
  GO_CHECK(out.defined() && out.dtype() == DType::f32 && out.shape() == q.shape(), "seg_attention backward: out ",
           out.defined() ? out.describe() : std::string("(undefined)"), " must be f32 of q's shape ",
           q.shape().to_string());
  GO_CHECK(dout.defined() && dout.dtype() == DType::f32 && dout.shape() == q.shape(), "seg_attention backward: dout ",
           dout.defined() ? dout.describe() : std::string("(undefined)"), " must be f32 of q's shape ",
           q.shape().to_string());
  GO_CHECK(lse.defined() && lse.dtype() == DType::f32 && lse.shape() == Shape({p.heads, p.n}),
           "seg_attention backward: lse ", lse.defined() ? lse.describe() : std::string("(undefined)"),
           " must be f32 of shape [", p.heads, ", ", p.n, "]");
  SegAttentionGrads g{Tensor::empty(q.shape()), Tensor::empty(q.shape()), Tensor::empty(q.shape())};
  kernels::seg_attention_backward(p, q.f32(), k.f32(), v.f32(), out.f32(), lse.f32(), dout.f32(), g.dq.f32(),
                                  g.dk.f32(), g.dv.f32());
  return g;
}

// Autograd op: out = SegAttention(q, k, v), n taken from q's rows. The backward
// recomputes the probabilities from the saved lse (no score matrix is stored)
// and, when q, k and v are distinct variables without a gradient yet, writes
// dq, dk and dv straight into their gradient buffers (no copies).
inline Variable seg_attention(const Variable& q, const Variable& k, const Variable& v,
                              const kernels::SegAttention& params) {
  const kernels::SegAttention p = detail::check_seg_attention(q.value(), k.value(), v.value(), params);
  SegAttentionOutput fwd = seg_attention_forward(q.value(), k.value(), v.value(), p);
  Tensor out = fwd.out;
  Tensor lse = std::move(fwd.lse);
  return Variable::make(std::move(fwd.out), {q, k, v}, [p, out, lse](std::vector<Variable>& in, const Tensor& grad) {
    const bool distinct = in[0].id() != in[1].id() && in[0].id() != in[2].id() && in[1].id() != in[2].id();
    bool direct = distinct;
    for (int i = 0; i < 3 && direct; ++i) direct = in[i].requires_grad() && !in[i].has_grad();
    if (!direct) {
      const SegAttentionGrads g = seg_attention_backward(in[0].value(), in[1].value(), in[2].value(), out, lse, grad, p);
      if (in[0].requires_grad()) in[0].add_grad(g.dq);
      if (in[1].requires_grad()) in[1].add_grad(g.dk);
      if (in[2].requires_grad()) in[2].add_grad(g.dv);
      return;
    }
    bool acc = false;
    float* dq = in[0].grad_slot(acc).f32();
    float* dk = in[1].grad_slot(acc).f32();
    float* dv = in[2].grad_slot(acc).f32();
    kernels::seg_attention_backward(p, in[0].value().f32(), in[1].value().f32(), in[2].value().f32(), out.f32(),
                                    lse.f32(), grad.f32(), dq, dk, dv);
  });
}

}  // namespace go
