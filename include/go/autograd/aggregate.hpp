#pragma once
// Sparse neighbour aggregation (GraphSAGE's sum / mean / max aggregators):
// tensor adapters over the raw kernels (go/kernels/aggregate.hpp), and the
// autograd op.
//
//   out[i, :] = reduce over the in-neighbours j of i (edges of g.fwd) of x[j, :]
//
// The adapters (namespace go::tensor) check dtypes and shapes (O(1) per call; the
// graph itself is validated once when its CsrPair is built) and come in two forms:
// writing into caller-owned tensors (*_into, no allocation, for hot loops) and
// returning new ones.
#include <string>
#include <utility>
#include <vector>

#include "go/autograd/variable.hpp"
#include "go/core/csr.hpp"
#include "go/core/error.hpp"
#include "go/core/tensor.hpp"
#include "go/kernels/aggregate.hpp"

namespace go {

inline const char* reduce_name(kernels::Reduce r) {
  switch (r) {
    case kernels::Reduce::sum: return "sum";
    case kernels::Reduce::mean: return "mean";
    case kernels::Reduce::max: return "max";
  }
  return "?";
}

namespace detail {
inline void check_aggregate_matrix(const Tensor& t, std::int64_t rows, std::int64_t d, const char* what,
                                   const char* rows_name, DType dtype = DType::f32) {
  GO_CHECK(t.defined(), "aggregate: ", what, " is undefined");
  GO_CHECK(t.dtype() == dtype && t.rank() == 2 && t.dim(0) == rows && t.dim(1) == d, "aggregate: ", what,
           " must be ", dtype_name(dtype), " [", rows_name, ", d] = [", rows, ", ", d, "], got ", t.describe());
}
inline void check_aggregate_input(const Tensor& x, const Csr& g) {
  g.check_layout();
  GO_CHECK(x.defined(), "aggregate: x is undefined");
  GO_CHECK(x.dtype() == DType::f32 && x.rank() == 2, "aggregate: x must be an f32 matrix [n_src, d], got ",
           x.describe());
  GO_CHECK(x.dim(0) == g.n_src, "aggregate: x has ", x.dim(0), " rows (shape ", x.shape().to_string(),
           ") but the graph has n_src = ", g.n_src, " source nodes");
}
}  // namespace detail

namespace tensor {

// out = aggregate(x) over g, written into out [n_dst, d]; for max, argmax [n_dst, d] (i32)
// receives the source of each maximum (-1 for a node without neighbours).
inline void aggregate_into(const Tensor& x, const Csr& g, kernels::Reduce r, Tensor& out, Tensor* argmax) {
  detail::check_aggregate_input(x, g);
  const std::int64_t d = x.dim(1);
  detail::check_aggregate_matrix(out, g.n_dst, d, "out", "n_dst");
  GO_CHECK(!out.shares_storage(x), "aggregate: out must not share storage with x");
  std::int32_t* am = nullptr;
  if (r == kernels::Reduce::max) {
    GO_CHECK(argmax != nullptr, "aggregate: max needs an argmax tensor");
    detail::check_aggregate_matrix(*argmax, g.n_dst, d, "argmax", "n_dst", DType::i32);
    am = argmax->data<std::int32_t>();
  }
  kernels::csr_aggregate_forward(r, g.row_ptr.data<std::int64_t>(), g.col_idx.data<std::int32_t>(), g.n_dst,
                                 x.f32(), d, out.f32(), am);
}

// Allocating form: returns out [n_dst, d]; for max, *argmax is (re)allocated when given.
inline Tensor aggregate(const Tensor& x, const Csr& g, kernels::Reduce r, Tensor* argmax = nullptr) {
  detail::check_aggregate_input(x, g);
  Tensor out = Tensor::empty(Shape{g.n_dst, x.dim(1)});
  Tensor local;
  if (r == kernels::Reduce::max) {
    Tensor& am = argmax ? *argmax : local;
    am = Tensor::empty(Shape{g.n_dst, x.dim(1)}, DType::i32);
    aggregate_into(x, g, r, out, &am);
  } else {
    aggregate_into(x, g, r, out, nullptr);
  }
  return out;
}

// dx [n_src, d] = the gradient of aggregate(x) over g.fwd given dout [n_dst, d]; reads
// g.bwd (and g.fwd's degrees for mean); argmax is the forward's for max (ignored otherwise).
inline void aggregate_backward_into(const Tensor& dout, const CsrPair& g, kernels::Reduce r, const Tensor& argmax,
                                    Tensor& dx) {
  g.fwd.check_layout();
  g.bwd.check_layout();
  GO_CHECK(g.bwd.n_dst == g.fwd.n_src && g.bwd.n_src == g.fwd.n_dst && g.bwd.nnz() == g.fwd.nnz(),
           "aggregate: the backward CSR (", g.bwd.n_dst, " rows over ", g.bwd.n_src, " nodes, ", g.bwd.nnz(),
           " edges) is not the transpose of the forward CSR (", g.fwd.n_dst, " rows over ", g.fwd.n_src,
           " nodes, ", g.fwd.nnz(), " edges)");
  GO_CHECK(dout.defined() && dout.dtype() == DType::f32 && dout.rank() == 2 && dout.dim(0) == g.fwd.n_dst,
           "aggregate backward: dout must be f32 [n_dst, d] with n_dst = ", g.fwd.n_dst, ", got ",
           dout.defined() ? dout.describe() : std::string("undefined"));
  const std::int64_t d = dout.dim(1);
  detail::check_aggregate_matrix(dx, g.fwd.n_src, d, "dx", "n_src");
  GO_CHECK(!dx.shares_storage(dout), "aggregate backward: dx must not share storage with dout");
  const std::int32_t* am = nullptr;
  if (r == kernels::Reduce::max) {
    detail::check_aggregate_matrix(argmax, g.fwd.n_dst, d, "argmax", "n_dst", DType::i32);
    am = argmax.data<std::int32_t>();
  }
  kernels::csr_aggregate_backward(r, g.fwd.row_ptr.data<std::int64_t>(), g.bwd.row_ptr.data<std::int64_t>(),
                                  g.bwd.col_idx.data<std::int32_t>(), g.fwd.n_src, g.fwd.n_dst, dout.f32(), d,
                                  am, dx.f32());
}

inline Tensor aggregate_backward(const Tensor& dout, const CsrPair& g, kernels::Reduce r,
                                 const Tensor& argmax = Tensor()) {
  GO_CHECK(dout.defined() && dout.rank() == 2, "aggregate backward: dout must be a matrix [n_dst, d], got ",
           dout.defined() ? dout.describe() : std::string("undefined"));
  Tensor dx = Tensor::empty(Shape{g.fwd.n_src, dout.dim(1)});
  aggregate_backward_into(dout, g, r, argmax, dx);
  return dx;
}

}  // namespace tensor

// The autograd op: x [n_src, d] -> [n_dst, d]. The recorded backward shares the
// graph's tensors (no copy) and, for max, keeps the argmax. The gradient is
// written straight into x's gradient buffer when x has none yet.
inline Variable aggregate(const Variable& x, const CsrPair& g, kernels::Reduce r) {
  Tensor argmax;
  Tensor out = tensor::aggregate(x.value(), g.fwd, r, r == kernels::Reduce::max ? &argmax : nullptr);
  return Variable::make(std::move(out), {x}, [g, r, argmax](std::vector<Variable>& in, const Tensor& grad_out) {
    if (!in[0].requires_grad()) return;
    bool accumulate = false;
    Tensor& slot = in[0].grad_slot(accumulate);
    if (!accumulate) tensor::aggregate_backward_into(grad_out, g, r, argmax, slot);
    else in[0].add_grad(tensor::aggregate_backward(grad_out, g, r, argmax));
  });
}

}  // namespace go
