#pragma once
// Sums and means: of all elements (a scalar), per row (axis 1, [rows, 1]) or
// per column (axis 0, [1, cols]). Partial sums are in double so that long
// reductions (80,000 nodes) keep float precision.
#include <algorithm>
#include <vector>

#include "go/autograd/variable.hpp"

namespace go {

namespace detail {
inline Variable reduce_op(const Variable& x, int axis, bool mean) {
  const Tensor& v = x.value();
  GO_CHECK(v.dtype() == DType::f32, "sum/mean need an f32 tensor, got ", v.describe());
  GO_CHECK(axis >= -1 && axis <= 1, "sum/mean: axis ", axis, " must be -1 (all), 0 (per column) or 1 (per row)");
  const std::int64_t R = v.rows(), C = v.cols();
  const float* p = v.f32();
  Tensor out;
  if (axis == -1) {
    double s = 0;
    for (std::int64_t i = 0; i < v.numel(); ++i) s += p[i];
    if (mean) s = v.numel() ? s / v.numel() : 0.0;
    out = Tensor::scalar(static_cast<float>(s));
  } else if (axis == 1) {
    out = Tensor::empty(Shape{R, 1});
#pragma omp parallel for if (R * C > (1 << 15))
    for (std::int64_t r = 0; r < R; ++r) {
      double s = 0;
      for (std::int64_t c = 0; c < C; ++c) s += p[r * C + c];
      out.f32()[r] = static_cast<float>(mean ? (C ? s / C : 0.0) : s);
    }
  } else {
    // Per-column sums: partials per fixed block of rows, merged in block order, so the
    // result does not depend on the thread count.
    const std::int64_t blocks = R * C > (1 << 15) ? std::min<std::int64_t>(64, R) : 1;
    std::vector<double> part(static_cast<std::size_t>(blocks * C), 0.0);
#pragma omp parallel for schedule(static) if (blocks > 1)
    for (std::int64_t b = 0; b < blocks; ++b) {
      double* pb = part.data() + b * C;
      for (std::int64_t r = b * R / blocks; r < (b + 1) * R / blocks; ++r)
        for (std::int64_t c = 0; c < C; ++c) pb[c] += p[r * C + c];
    }
    std::vector<double> acc(static_cast<std::size_t>(C), 0.0);
    for (std::int64_t b = 0; b < blocks; ++b)
      for (std::int64_t c = 0; c < C; ++c) acc[c] += part[b * C + c];
    out = Tensor::empty(Shape{1, C});
    for (std::int64_t c = 0; c < C; ++c) out.f32()[c] = static_cast<float>(mean ? (R ? acc[c] / R : 0.0) : acc[c]);
  }
  return Variable::make(std::move(out), {x}, [axis, mean](std::vector<Variable>& in, const Tensor& g) {
    const Tensor& v = in[0].value();
    const std::int64_t R = v.rows(), C = v.cols();
    Tensor d = Tensor::empty(v.shape());
    float* pd = d.f32();
    const float* pg = g.f32();
    const float k = !mean ? 1.f : axis == -1 ? 1.f / std::max<std::int64_t>(v.numel(), 1)
                                 : axis == 1  ? 1.f / std::max<std::int64_t>(C, 1)
                                              : 1.f / std::max<std::int64_t>(R, 1);
#pragma omp parallel for if (R * C > (1 << 15))
    for (std::int64_t r = 0; r < R; ++r)
      for (std::int64_t c = 0; c < C; ++c)
        pd[r * C + c] = k * (axis == -1 ? pg[0] : axis == 1 ? pg[r] : pg[c]);
    in[0].add_grad(d);
  });
}
}  // namespace detail

// Sum of all elements (a scalar), or along axis: 1 per row -> [rows, 1], 0 per column -> [1, cols].
inline Variable sum(const Variable& x, int axis = -1) { return detail::reduce_op(x, axis, false); }
// Mean likewise; an empty reduction gives 0.
inline Variable mean(const Variable& x, int axis = -1) { return detail::reduce_op(x, axis, true); }

}  // namespace go
