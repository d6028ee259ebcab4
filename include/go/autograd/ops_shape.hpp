#pragma once
// Shape ops: reshape, concat and slice along either axis of a matrix, gather
// rows by index, embedding lookup.
#include <cstring>
#include <string>
#include <vector>

#include "go/autograd/variable.hpp"

namespace go {

inline Variable reshape(const Variable& x, const Shape& shape) {
  Tensor y = x.value().reshape(shape);
  return Variable::make(std::move(y), {x}, [](std::vector<Variable>& in, const Tensor& g) {
    in[0].add_grad(g.reshape(in[0].shape()));
  });
}

namespace detail {
inline void check_matrix(const Tensor& t, const char* op) {
  GO_CHECK(t.rank() == 2 && t.dtype() == DType::f32, op, " needs f32 matrices, got ", t.describe());
}
// Copies a block of rows x cols between row-major matrices with their row strides.
inline void copy_block(const float* src, std::int64_t src_ld, float* dst, std::int64_t dst_ld, std::int64_t rows,
                       std::int64_t cols) {
  if (cols == 0) return;
  for (std::int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * dst_ld, src + r * src_ld, cols * sizeof(float));
}
}  // namespace detail

// Concatenation of matrices along axis 0 (stack rows) or 1 (side by side).
inline Variable concat(const std::vector<Variable>& xs, int axis) {
  GO_CHECK(!xs.empty(), "concat of no tensors");
  GO_CHECK(axis == 0 || axis == 1, "concat: axis ", axis, " must be 0 or 1");
  std::int64_t rows = axis == 0 ? 0 : xs[0].dim(0), cols = axis == 1 ? 0 : xs[0].dim(1);
  for (const auto& x : xs) {
    detail::check_matrix(x.value(), "concat");
    const bool fits = axis == 0 ? x.dim(1) == cols : x.dim(0) == rows;
    GO_CHECK(fits, "concat along axis ", axis, ": ", x.shape().to_string(), " does not match ",
             xs[0].shape().to_string());
    (axis == 0 ? rows : cols) += x.dim(axis);
  }
  Tensor out = Tensor::empty(Shape{rows, cols});
  std::int64_t off = 0;
  for (const auto& x : xs) {
    const Tensor& v = x.value();
    if (axis == 0) detail::copy_block(v.f32(), cols, out.f32() + off * cols, cols, v.dim(0), cols);
    else detail::copy_block(v.f32(), v.dim(1), out.f32() + off, cols, rows, v.dim(1));
    off += axis == 0 ? v.dim(0) : v.dim(1);
  }
  return Variable::make(std::move(out), xs, [axis](std::vector<Variable>& in, const Tensor& g) {
    const std::int64_t cols = g.dim(1);
    std::int64_t off = 0;
    for (auto& x : in) {
      const std::int64_t r = x.dim(0), c = x.dim(1);
      if (x.requires_grad()) {
        Tensor d = Tensor::empty(x.shape());
        if (axis == 0) detail::copy_block(g.f32() + off * cols, cols, d.f32(), c, r, c);
        else detail::copy_block(g.f32() + off, cols, d.f32(), c, r, c);
        x.add_grad(d);
      }
      off += axis == 0 ? r : c;
    }
  });
}

// Rows (axis 0) or columns (axis 1) [begin, end) of a matrix, as a copy.
inline Variable slice(const Variable& x, int axis, std::int64_t begin, std::int64_t end) {
  detail::check_matrix(x.value(), "slice");
  GO_CHECK(axis == 0 || axis == 1, "slice: axis ", axis, " must be 0 or 1");
  const std::int64_t R = x.dim(0), C = x.dim(1), len = axis == 0 ? R : C;
  GO_CHECK(0 <= begin && begin <= end && end <= len, "slice [", begin, ", ", end, ") along axis ", axis,
           " out of range for ", x.shape().to_string());
  const std::int64_t r = axis == 0 ? end - begin : R, c = axis == 1 ? end - begin : C;
  Tensor out = Tensor::empty(Shape{r, c});
  const float* src = x.value().f32() + (axis == 0 ? begin * C : begin);
  detail::copy_block(src, C, out.f32(), c, r, c);
  return Variable::make(std::move(out), {x}, [axis, begin](std::vector<Variable>& in, const Tensor& g) {
    const std::int64_t C = in[0].dim(1);
    Tensor d = Tensor::zeros(in[0].shape());
    detail::copy_block(g.f32(), g.dim(1), d.f32() + (axis == 0 ? begin * C : begin), C, g.dim(0), g.dim(1));
    in[0].add_grad(d);
  });
}

// out[i, :] = x[index[i], :]; index is an i32 tensor of any shape (flattened).
// The gradient scatter-adds, so repeated indices accumulate.
inline Variable gather_rows(const Variable& x, const Tensor& index) {
  detail::check_matrix(x.value(), "gather_rows");
  GO_CHECK(index.dtype() == DType::i32, "gather_rows: index must be i32, got ", index.describe());
  const std::int64_t n = index.numel(), R = x.dim(0), C = x.dim(1);
  const std::int32_t* idx = index.data<std::int32_t>();
  for (std::int64_t i = 0; i < n; ++i)
    GO_CHECK(idx[i] >= 0 && idx[i] < R, "gather_rows: index ", idx[i], " at position ", i,
             " out of range for ", x.shape().to_string());
  Tensor out = Tensor::empty(Shape{n, C});
  const float* px = x.value().f32();
#pragma omp parallel for if (n * C > (1 << 15))
  for (std::int64_t i = 0; i < n; ++i) std::memcpy(out.f32() + i * C, px + idx[i] * C, C * sizeof(float));
  return Variable::make(std::move(out), {x}, [index](std::vector<Variable>& in, const Tensor& g) {
    const std::int64_t C = in[0].dim(1);
    Tensor d = Tensor::zeros(in[0].shape());
    const std::int32_t* idx = index.data<std::int32_t>();
    // Serial over rows (indices may repeat), vectorized along the row.
    for (std::int64_t i = 0; i < index.numel(); ++i) {
      float* dr = d.f32() + idx[i] * C;
      const float* gr = g.f32() + i * C;
#pragma omp simd
      for (std::int64_t c = 0; c < C; ++c) dr[c] += gr[c];
    }
    in[0].add_grad(d);
  });
}

// Embedding lookup: rows of a [vocabulary, dim] table, one per id.
inline Variable embedding(const Variable& table, const Tensor& ids) { return gather_rows(table, ids); }

}  // namespace go
