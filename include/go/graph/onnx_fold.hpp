#pragma once
// Import-time constant folding of the ONNX importer's shape computations.
//
// Exporters compute shapes at run time when a model reads x.shape: torchvision's Swin pads each
// stage to a multiple of the window with Shape -> Gather -> Mod/Sub -> Concat -> Pad and views it
// with Shape -> Gather -> Div -> Concat -> Reshape; PyTorch's multi-head attention does the same
// for the heads. Without the values of those small tensors the Reshape/Pad/Expand shapes
// downstream, and so the MatMul shapes and FLOPs, stay unknown. fold_node evaluates one node whose
// inputs are known small tensors (integers, bools, and floats that shape arithmetic passes
// through: Cast -> Div -> Floor -> Cast) and gives its value and shape; the importer keeps folded
// nodes as zero-FLOP ops, like Shape and Constant. Anything not foldable (unknown input, a result
// over kMaxFoldValues elements, int64 overflow, a malformed attribute) returns nullopt and leaves
// the shape to ordinary inference.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "go/graph/onnx_proto.hpp"

namespace go::detail::onnx_import {

inline constexpr std::size_t kMaxFoldValues = 1 << 16;

// A tensor whose value is known at import time, row-major.
struct Folded {
  std::vector<std::int64_t> dims;
  bool real = false;              // floating-point values in f, else integers (and bools) in i
  std::vector<std::int64_t> i;
  std::vector<double> f;

  std::size_t size() const { return real ? f.size() : i.size(); }
  double at(std::size_t k) const { return real ? f[k] : static_cast<double>(i[k]); }
};

inline bool is_real_type(int onnx_type) {
  return onnx_type == pb::TensorProto_DataType_FLOAT || onnx_type == pb::TensorProto_DataType_DOUBLE ||
         onnx_type == pb::TensorProto_DataType_FLOAT16 || onnx_type == pb::TensorProto_DataType_BFLOAT16;
}

// Number of elements of dims, when every dimension is non-negative and the count is foldable.
inline std::optional<std::size_t> fold_numel(const std::vector<std::int64_t>& dims) {
  std::size_t n = 1;
  for (auto d : dims) {
    if (d < 0) return std::nullopt;
    if (d == 0) return 0;
    if (n > kMaxFoldValues / static_cast<std::size_t>(d)) return std::nullopt;
    n *= static_cast<std::size_t>(d);
  }
  return n;
}

// The value of a TensorProto (a Constant's attribute or an initializer) when stored in a form we read.
inline std::optional<Folded> fold_tensor(const pb::TensorProto& t) {
  Folded r;
  r.dims.assign(t.dims().begin(), t.dims().end());
  const auto n = fold_numel(r.dims);
  if (!n) return std::nullopt;
  if (t.data_type() == pb::TensorProto_DataType_FLOAT || t.data_type() == pb::TensorProto_DataType_DOUBLE) {
    r.real = true;
    if (t.data_type() == pb::TensorProto_DataType_FLOAT) {
      if (t.float_data_size() > 0) r.f.assign(t.float_data().begin(), t.float_data().end());
      else if (t.raw_data().size() == *n * 4 && *n > 0) {  // memcpy's pointers must not be null, even for 0 bytes
        std::vector<float> w(*n);
        std::memcpy(w.data(), t.raw_data().data(), t.raw_data().size());
        r.f.assign(w.begin(), w.end());
      }
    } else {
      if (t.double_data_size() > 0) r.f.assign(t.double_data().begin(), t.double_data().end());
      else if (t.raw_data().size() == *n * 8 && *n > 0) {
        r.f.resize(*n);
        std::memcpy(r.f.data(), t.raw_data().data(), t.raw_data().size());
      }
    }
  } else if (t.data_type() == pb::TensorProto_DataType_BOOL || t.data_type() == pb::TensorProto_DataType_UINT8 ||
             t.data_type() == pb::TensorProto_DataType_INT8) {
    if (t.int32_data_size() > 0) r.i.assign(t.int32_data().begin(), t.int32_data().end());
    else if (t.raw_data().size() == *n)
      for (unsigned char c : t.raw_data())
        r.i.push_back(t.data_type() == pb::TensorProto_DataType_INT8 ? static_cast<signed char>(c) : c);
  } else {
    auto v = tensor_ints(t);
    if (!v) return std::nullopt;
    r.i = std::move(*v);
  }
  if (r.size() != *n) return std::nullopt;  // no data (a weightless export) or the wrong amount
  return r;
}

// Row-major strides of dims.
inline std::vector<std::size_t> fold_strides(const std::vector<std::int64_t>& dims) {
  std::vector<std::size_t> s(dims.size(), 1);
  for (std::size_t k = dims.size(); k-- > 1;) s[k - 1] = s[k] * static_cast<std::size_t>(dims[k]);
  return s;
}

// Offset into a tensor of shape `dims` broadcast to `out` for the output's flat index `flat`.
inline std::size_t broadcast_offset(std::size_t flat, const std::vector<std::int64_t>& out,
                                    const std::vector<std::int64_t>& dims) {
  std::size_t off = 0, stride = 1;
  for (std::size_t k = out.size(), j = dims.size(); k-- > 0;) {
    const auto od = static_cast<std::size_t>(out[k]);
    const std::size_t idx = flat % od;
    flat /= od;
    if (j > 0) {
      --j;
      const auto d = static_cast<std::size_t>(dims[j]);
      if (d != 1) off += idx * stride;
      stride *= d;
    }
  }
  return off;
}

inline std::optional<std::vector<std::int64_t>> broadcast_dims(const std::vector<const Folded*>& in) {
  std::vector<TType> ts(in.size());
  std::vector<const TType*> ps;
  for (std::size_t k = 0; k < in.size(); ++k) {
    ts[k].known = true;
    ts[k].dims = in[k]->dims;
    ps.push_back(&ts[k]);
  }
  return broadcast(ps);
}

inline std::optional<std::int64_t> to_int(double x) {
  if (!std::isfinite(x) || std::fabs(x) > 9.0e18) return std::nullopt;
  return static_cast<std::int64_t>(x);  // truncation, as Cast does
}

// Elementwise n-ary op with numpy broadcasting. `fi` computes on integers (nullopt: not foldable),
// `ff` on reals; reals are used when any input is real, unless `ints_only`.
template <class FI, class FF>
std::optional<Folded> fold_elementwise(const std::vector<const Folded*>& in, bool real_result_if_real, FI fi, FF ff) {
  auto dims = broadcast_dims(in);
  if (!dims) return std::nullopt;
  const auto n = fold_numel(*dims);
  if (!n) return std::nullopt;
  bool real = false;
  for (const Folded* p : in) real = real || p->real;
  Folded r;
  r.dims = *dims;
  r.real = real && real_result_if_real;
  std::vector<std::int64_t> iv(in.size());
  std::vector<double> fv(in.size());
  for (std::size_t e = 0; e < *n; ++e) {
    for (std::size_t k = 0; k < in.size(); ++k) {
      const std::size_t off = broadcast_offset(e, *dims, in[k]->dims);
      if (real) fv[k] = in[k]->at(off);
      else iv[k] = in[k]->i[off];
    }
    if (real) {
      const double x = ff(fv);
      if (r.real) r.f.push_back(x);
      else r.i.push_back(static_cast<std::int64_t>(x != 0.0));  // comparisons give bools
    } else {
      auto x = fi(iv);
      if (!x) return std::nullopt;
      r.i.push_back(*x);
    }
  }
  return r;
}

// Normalizes axis a of a rank-r tensor (negative counts from the end); nullopt when out of range.
// end_ok admits a == r, as Flatten's axis, which splits after the last dimension.
inline std::optional<std::size_t> fold_axis(std::int64_t a, std::size_t r, bool end_ok = false) {
  const auto rr = static_cast<std::int64_t>(r);
  if (a < 0) a += rr;
  if (a < 0 || a > rr || (a == rr && !end_ok)) return std::nullopt;
  return static_cast<std::size_t>(a);
}

// Picks elements of x at the given flat offsets into a new tensor of shape dims.
inline Folded fold_pick(const Folded& x, std::vector<std::int64_t> dims, const std::vector<std::size_t>& offs) {
  Folded r;
  r.dims = std::move(dims);
  r.real = x.real;
  for (auto o : offs) {
    if (x.real) r.f.push_back(x.f[o]);
    else r.i.push_back(x.i[o]);
  }
  return r;
}

// Evaluates node n. in[k] is input k's value (nullptr when unknown); types[k] its type (for Shape,
// whose input need not be known); out_type the output's type as recorded or inferred.
inline std::optional<Folded> fold_node(const pb::NodeProto& n, const std::vector<const Folded*>& in,
                                       const std::vector<const TType*>& types, const TType* out_type) {
  const std::string& t = n.op_type();
  if (n.output_size() != 1) return std::nullopt;
  auto all_in = [&](std::size_t count) {
    if (in.size() < count) return false;
    for (std::size_t k = 0; k < count; ++k)
      if (!in[k]) return false;
    return true;
  };
  const Folded* x = in.empty() ? nullptr : in[0];

  if (t == "Constant") {
    if (const auto* a = attr(n, "value"); a && a->has_t()) return fold_tensor(a->t());
    if (const auto* a = attr(n, "value_ints")) {
      Folded r;
      r.i.assign(a->ints().begin(), a->ints().end());
      r.dims = {static_cast<std::int64_t>(r.i.size())};
      return r;
    }
    if (const auto* a = attr(n, "value_int")) return Folded{{}, false, {a->i()}, {}};
    if (const auto* a = attr(n, "value_float")) return Folded{{}, true, {}, {a->f()}};
    return std::nullopt;
  }
  if (t == "Shape" || t == "Size") {
    if (types.empty() || !types[0] || !types[0]->known) return std::nullopt;
    const auto& d = types[0]->dims;
    if (t == "Size") {
      std::int64_t p = 1;
      for (auto v : d)
        if (__builtin_mul_overflow(p, v, &p)) return std::nullopt;
      return Folded{{}, false, {p}, {}};
    }
    const auto r = static_cast<std::int64_t>(d.size());
    std::int64_t s = attr_int(n, "start", 0), e = attr_int(n, "end", r);
    if (s < 0) s += r;
    if (e < 0) e += r;
    s = std::clamp<std::int64_t>(s, 0, r);
    e = std::clamp<std::int64_t>(e, s, r);
    Folded f;
    f.i.assign(d.begin() + s, d.begin() + e);
    f.dims = {e - s};
    return f;
  }
  if (t == "ConstantOfShape") {
    if (!x || x->real || x->dims.size() > 1) return std::nullopt;
    const auto numel = fold_numel(x->i);
    if (!numel) return std::nullopt;
    Folded fill{{}, true, {}, {0.0}};  // default: float 0
    if (const auto* a = attr(n, "value"); a && a->has_t()) {
      auto v = fold_tensor(a->t());
      if (!v || v->size() != 1) return std::nullopt;
      fill = *v;
    }
    Folded r;
    r.dims = x->i;
    r.real = fill.real;
    if (r.real) r.f.assign(*numel, fill.f[0]);
    else r.i.assign(*numel, fill.i[0]);
    return r;
  }
  if (!x) return std::nullopt;  // everything below needs its first input's value

  if (t == "Identity") return *x;
  if (t == "Cast") {
    const int to = static_cast<int>(attr_int(n, "to", pb::TensorProto_DataType_FLOAT));
    Folded r;
    r.dims = x->dims;
    r.real = is_real_type(to);
    if (r.real) {
      for (std::size_t k = 0; k < x->size(); ++k) r.f.push_back(x->at(k));
    } else if (to == pb::TensorProto_DataType_BOOL) {
      for (std::size_t k = 0; k < x->size(); ++k) r.i.push_back(x->at(k) != 0.0);
    } else if (x->real) {
      for (double v : x->f) {
        auto c = to_int(v);
        if (!c) return std::nullopt;
        r.i.push_back(*c);
      }
    } else {
      r.i = x->i;
    }
    return r;
  }
  if (t == "Unsqueeze" || t == "Squeeze" || t == "Reshape" || t == "Flatten") {
    // same values, the shape that inference gave the output
    if (!out_type || !out_type->known) return std::nullopt;
    const auto numel = fold_numel(out_type->dims);
    if (!numel || *numel != x->size()) return std::nullopt;
    Folded r = *x;
    r.dims = out_type->dims;
    return r;
  }
  if (t == "Neg" || t == "Abs" || t == "Floor" || t == "Ceil" || t == "Not" || t == "Sqrt") {
    if (t == "Sqrt" && !x->real) return std::nullopt;
    return fold_elementwise(
        {x}, t != "Not",
        [&](const std::vector<std::int64_t>& v) -> std::optional<std::int64_t> {
          if (t == "Not") return v[0] == 0;
          if ((t == "Neg" || t == "Abs") && v[0] == std::numeric_limits<std::int64_t>::min()) return std::nullopt;
          if (t == "Neg") return -v[0];
          if (t == "Abs") return v[0] < 0 ? -v[0] : v[0];
          return v[0];  // Floor/Ceil of an integer
        },
        [&](const std::vector<double>& v) {
          if (t == "Neg") return -v[0];
          if (t == "Abs") return std::fabs(v[0]);
          if (t == "Floor") return std::floor(v[0]);
          if (t == "Ceil") return std::ceil(v[0]);
          if (t == "Sqrt") return std::sqrt(v[0]);
          return static_cast<double>(v[0] == 0.0);
        });
  }
  if (t == "Add" || t == "Sub" || t == "Mul" || t == "Div" || t == "Mod" || t == "Min" || t == "Max") {
    if (!all_in(static_cast<std::size_t>(n.input_size())) || n.input_size() < 1) return std::nullopt;
    if ((t != "Min" && t != "Max") && n.input_size() != 2) return std::nullopt;
    const bool fmod = attr_int(n, "fmod", 0) != 0;
    return fold_elementwise(
        in, true,
        [&](const std::vector<std::int64_t>& v) -> std::optional<std::int64_t> {
          std::int64_t r = v[0];
          for (std::size_t k = 1; k < v.size(); ++k) {
            const std::int64_t y = v[k];
            if (t == "Add") {
              if (__builtin_add_overflow(r, y, &r)) return std::nullopt;
            } else if (t == "Sub") {
              if (__builtin_sub_overflow(r, y, &r)) return std::nullopt;
            } else if (t == "Mul") {
              if (__builtin_mul_overflow(r, y, &r)) return std::nullopt;
            } else if (t == "Min") {
              r = std::min(r, y);
            } else if (t == "Max") {
              r = std::max(r, y);
            } else {
              if (y == 0 || (y == -1 && r == std::numeric_limits<std::int64_t>::min())) return std::nullopt;
              if (t == "Div") r /= y;  // integer Div truncates
              else {
                std::int64_t m = r % y;  // Mod takes the divisor's sign unless fmod
                if (!fmod && m != 0 && ((m < 0) != (y < 0))) m += y;
                r = m;
              }
            }
          }
          return r;
        },
        [&](const std::vector<double>& v) {
          double r = v[0];
          for (std::size_t k = 1; k < v.size(); ++k) {
            const double y = v[k];
            if (t == "Add") r += y;
            else if (t == "Sub") r -= y;
            else if (t == "Mul") r *= y;
            else if (t == "Div") r /= y;
            else if (t == "Min") r = std::min(r, y);
            else if (t == "Max") r = std::max(r, y);
            else r = fmod ? std::fmod(r, y) : r - y * std::floor(r / y);
          }
          return r;
        });
  }
  if (t == "Equal" || t == "Less" || t == "Greater" || t == "LessOrEqual" || t == "GreaterOrEqual" || t == "And" ||
      t == "Or" || t == "Xor") {
    if (n.input_size() != 2 || !all_in(2)) return std::nullopt;
    auto cmp = [&](double a, double b) -> std::int64_t {
      if (t == "Equal") return a == b;
      if (t == "Less") return a < b;
      if (t == "Greater") return a > b;
      if (t == "LessOrEqual") return a <= b;
      if (t == "GreaterOrEqual") return a >= b;
      if (t == "And") return a != 0 && b != 0;
      if (t == "Or") return a != 0 || b != 0;
      return (a != 0) != (b != 0);
    };
    return fold_elementwise(
        in, false,
        [&](const std::vector<std::int64_t>& v) -> std::optional<std::int64_t> {
          if (t == "Equal") return v[0] == v[1];
          if (t == "Less") return v[0] < v[1];
          if (t == "Greater") return v[0] > v[1];
          if (t == "LessOrEqual") return v[0] <= v[1];
          if (t == "GreaterOrEqual") return v[0] >= v[1];
          return cmp(static_cast<double>(v[0]), static_cast<double>(v[1]));
        },
        [&](const std::vector<double>& v) { return static_cast<double>(cmp(v[0], v[1])); });
  }
  if (t == "Where") {
    if (n.input_size() != 3 || !all_in(3) || x->real) return std::nullopt;
    return fold_elementwise(
        in, true, [](const std::vector<std::int64_t>& v) -> std::optional<std::int64_t> { return v[0] ? v[1] : v[2]; },
        [](const std::vector<double>& v) { return v[0] != 0.0 ? v[1] : v[2]; });
  }
  if (t == "Expand") {
    if (!all_in(2) || in[1]->real || in[1]->dims.size() != 1) return std::nullopt;
    Folded shape;  // a zero tensor of the target shape, broadcast against x
    shape.dims = in[1]->i;
    const auto numel = fold_numel(shape.dims);
    if (!numel) return std::nullopt;
    shape.i.assign(*numel, 0);
    return fold_elementwise(
        {x, &shape}, true, [](const std::vector<std::int64_t>& v) -> std::optional<std::int64_t> { return v[0]; },
        [](const std::vector<double>& v) { return v[0]; });
  }
  if (t == "Range") {
    if (!all_in(3) || x->size() != 1 || in[1]->size() != 1 || in[2]->size() != 1) return std::nullopt;
    const bool real = x->real || in[1]->real || in[2]->real;
    const double s = x->at(0), l = in[1]->at(0), d = in[2]->at(0);
    if (d == 0.0 || !std::isfinite(s) || !std::isfinite(l) || !std::isfinite(d)) return std::nullopt;
    const double count = std::max(0.0, std::ceil((l - s) / d));
    if (count > static_cast<double>(kMaxFoldValues)) return std::nullopt;
    Folded r;
    r.real = real;
    r.dims = {static_cast<std::int64_t>(count)};
    for (std::int64_t k = 0; k < r.dims[0]; ++k) {
      if (real) r.f.push_back(s + static_cast<double>(k) * d);
      else r.i.push_back(x->i[0] + k * in[2]->i[0]);
    }
    return r;
  }
  if (t == "Concat") {
    if (!all_in(static_cast<std::size_t>(n.input_size()))) return std::nullopt;
    const std::size_t r = x->dims.size();
    const auto axis = fold_axis(attr_int(n, "axis", 0), r);
    if (!axis) return std::nullopt;
    bool real = false;
    std::vector<std::int64_t> dims = x->dims;
    dims[*axis] = 0;
    for (const Folded* p : in) {
      if (p->dims.size() != r) return std::nullopt;
      for (std::size_t k = 0; k < r; ++k)
        if (k != *axis && p->dims[k] != x->dims[k]) return std::nullopt;
      dims[*axis] += p->dims[*axis];
      real = real || p->real;
    }
    Folded out;
    out.dims = dims;
    out.real = real;
    std::size_t outer = 1;
    for (std::size_t k = 0; k < *axis; ++k) outer *= static_cast<std::size_t>(dims[k]);
    for (std::size_t o = 0; o < outer; ++o)
      for (const Folded* p : in) {
        const std::size_t chunk = outer == 0 ? 0 : p->size() / outer;
        for (std::size_t k = o * chunk; k < (o + 1) * chunk; ++k) {
          if (real) out.f.push_back(p->at(k));
          else out.i.push_back(p->i[k]);
        }
      }
    return out;
  }
  if (t == "Gather") {
    if (!all_in(2) || in[1]->real || x->dims.empty()) return std::nullopt;
    const auto axis = fold_axis(attr_int(n, "axis", 0), x->dims.size());
    if (!axis) return std::nullopt;
    const std::int64_t dim = x->dims[*axis];
    std::vector<std::int64_t> dims(x->dims.begin(), x->dims.begin() + static_cast<std::ptrdiff_t>(*axis));
    dims.insert(dims.end(), in[1]->dims.begin(), in[1]->dims.end());
    dims.insert(dims.end(), x->dims.begin() + static_cast<std::ptrdiff_t>(*axis) + 1, x->dims.end());
    if (!fold_numel(dims)) return std::nullopt;
    const auto st = fold_strides(x->dims);
    std::size_t outer = 1, inner = st[*axis];
    for (std::size_t k = 0; k < *axis; ++k) outer *= static_cast<std::size_t>(x->dims[k]);
    std::vector<std::size_t> offs;
    for (std::size_t o = 0; o < outer; ++o)
      for (auto idx : in[1]->i) {
        if (idx < 0) idx += dim;
        if (idx < 0 || idx >= dim) return std::nullopt;
        for (std::size_t k = 0; k < inner; ++k)
          offs.push_back(o * static_cast<std::size_t>(dim) * inner + static_cast<std::size_t>(idx) * inner + k);
      }
    return fold_pick(*x, std::move(dims), offs);
  }
  if (t == "Transpose") {
    const std::size_t r = x->dims.size();
    auto perm = attr_ints(n, "perm");
    if (perm.empty())
      for (std::size_t k = 0; k < r; ++k) perm.push_back(static_cast<std::int64_t>(r - 1 - k));
    if (perm.size() != r) return std::nullopt;
    std::vector<std::int64_t> dims(r);
    std::vector<bool> used(r, false);
    for (std::size_t k = 0; k < r; ++k) {
      if (perm[k] < 0 || perm[k] >= static_cast<std::int64_t>(r) || used[static_cast<std::size_t>(perm[k])])
        return std::nullopt;
      used[static_cast<std::size_t>(perm[k])] = true;
      dims[k] = x->dims[static_cast<std::size_t>(perm[k])];
    }
    const auto st = fold_strides(x->dims);
    std::vector<std::size_t> offs;
    for (std::size_t e = 0; e < x->size(); ++e) {
      std::size_t rem = e, off = 0;
      for (std::size_t k = r; k-- > 0;) {
        const auto d = static_cast<std::size_t>(dims[k]);
        off += (rem % d) * st[static_cast<std::size_t>(perm[k])];
        rem /= d;
      }
      offs.push_back(off);
    }
    return fold_pick(*x, std::move(dims), offs);
  }
  if (t == "Slice") {
    if (n.input_size() < 3 || !all_in(3)) return std::nullopt;  // opset 10+: starts/ends/axes/steps inputs
    auto ints_of = [&](int k) -> const std::vector<std::int64_t>* {
      if (n.input_size() <= k || n.input(k).empty()) return nullptr;
      return (in[static_cast<std::size_t>(k)] && !in[static_cast<std::size_t>(k)]->real)
                 ? &in[static_cast<std::size_t>(k)]->i
                 : nullptr;
    };
    const auto* starts = ints_of(1);
    const auto* ends = ints_of(2);
    const auto* axes = ints_of(3);
    const auto* steps = ints_of(4);
    if (!starts || !ends || starts->size() != ends->size()) return std::nullopt;
    if ((n.input_size() > 3 && !n.input(3).empty() && !axes) || (n.input_size() > 4 && !n.input(4).empty() && !steps))
      return std::nullopt;
    const std::size_t r = x->dims.size();
    std::vector<std::int64_t> begin(r, 0), step(r, 1), dims = x->dims;
    for (std::size_t k = 0; k < starts->size(); ++k) {
      const auto a = fold_axis(axes ? (k < axes->size() ? (*axes)[k] : -1 - static_cast<std::int64_t>(r))
                                    : static_cast<std::int64_t>(k),
                               r);
      const std::int64_t s = steps ? (k < steps->size() ? (*steps)[k] : 0) : 1;
      if (!a || s == 0 || s == std::numeric_limits<std::int64_t>::min()) return std::nullopt;
      const std::int64_t dim = x->dims[*a];
      auto clampi = [&](std::int64_t v, std::int64_t lo, std::int64_t hi) {
        if (v < 0) v = v < -dim ? -1 - dim : v + dim;  // no overflow for v near INT64_MIN
        return std::clamp(v, lo, hi);
      };
      std::int64_t b, len;
      if (s > 0) {
        b = clampi((*starts)[k], 0, dim);
        const std::int64_t e = clampi((*ends)[k], 0, dim);
        len = e > b ? (e - b - 1) / s + 1 : 0;
      } else {
        b = clampi((*starts)[k], -1, dim - 1);
        const std::int64_t e = clampi((*ends)[k], -1, dim - 1);
        len = b > e ? (b - e - 1) / (-s) + 1 : 0;
      }
      begin[*a] = b;
      step[*a] = s;
      dims[*a] = len;
    }
    const auto numel = fold_numel(dims);
    if (!numel) return std::nullopt;
    const auto st = fold_strides(x->dims);
    std::vector<std::size_t> offs;
    for (std::size_t e = 0; e < *numel; ++e) {
      std::size_t rem = e;
      std::int64_t off = 0;
      for (std::size_t k = r; k-- > 0;) {
        const auto d = static_cast<std::size_t>(dims[k]);
        off += (begin[k] + static_cast<std::int64_t>(rem % d) * step[k]) * static_cast<std::int64_t>(st[k]);
        rem /= d;
      }
      offs.push_back(static_cast<std::size_t>(off));
    }
    return fold_pick(*x, std::move(dims), offs);
  }
  return std::nullopt;
}

}  // namespace go::detail::onnx_import
