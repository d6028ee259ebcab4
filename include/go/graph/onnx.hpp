#pragma once
// ONNX importer (libonnx protobuf classes). One op per ONNX node plus one `input` op per data input.
//
// Shapes come from value_info, graph inputs/outputs and initializers; a node output without a
// recorded type is inferred for the common operators (Conv, pooling, Gemm/MatMul, broadcasting
// elementwise ops, Concat, Flatten, Reshape, Transpose, reductions, Gather, Slice, Split, Pad, LSTM,
// GRU, ...), else its shape stays unknown (0 bytes, FLOPs from what is known).
// Shape computations done at run time (Shape -> Gather -> Concat -> Reshape, as exporters emit
// for x.shape) are folded at import time (onnx_fold.hpp, onnx_proto.hpp has the protobuf helpers);
// folded nodes stay as ops with 0 FLOPs, like Shape and Constant.
//
// Parameters. Initializers are parameters. Models exported without weights carry them as graph
// inputs: a graph input is a parameter unless it is the first graph input or one of its uses
// (following Identity/Transpose/Cast/Reshape/Unsqueeze chains) is a data operand (weight operands:
// Conv/ConvTranspose/Gemm 1-2, MatMul 1, normalization scale/bias/statistics, RNN weights, Gather 0,
// PRelu 1, Sub/Div 1; either operand of the commutative Add/Mul/Sum/Max/Min/Mean, which exporters
// emit in both orders, is no evidence either way). An Identity of a parameter is a parameter of its own (exporters
// de-duplicate equal weights behind Identity nodes) and produces no op. Each parameter belongs to
// the first op that reads it (its param_bytes); later readers read it for free, like a variable.
//
// FLOPs (2 per multiply-accumulate): Conv 2*out*Cin/g*prod(k) (+out for a bias); ConvTranspose
// 2*in*Cout/g*prod(k); Gemm/MatMul 2*out*K (+out for Gemm's C); BatchNormalization 2/elem;
// LayerNormalization 8/elem; Relu/Clip/LeakyRelu 1, Sigmoid/Tanh/Erf 4, Gelu 8 per elem; binary
// elementwise 1 per output elem per extra operand; Max/AveragePool out*prod(kernel); global pooling
// and reductions 1 per input elem; Softmax 5/elem; LSTM seq*batch*dirs*(8H(I+H)+20H), GRU
// seq*batch*dirs*(6H(I+H)+16H); Gather, Concat, Slice, Split, Pad, Transpose and shape ops 0.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "go/core/error.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/io.hpp"
#include "go/graph/onnx_fold.hpp"
#include "go/graph/onnx_proto.hpp"
#include "go/graph/op_kind.hpp"

namespace go {

struct OnnxOptions {
  // Value used for symbolic dimensions (dim_param, e.g. a dynamic batch).
  std::int64_t symbolic_dim = 1;
};

namespace detail::onnx_import {

namespace pb = ::ONNX_NAMESPACE;

// Spatial output sizes of a convolution or pooling window.
inline std::optional<std::vector<std::int64_t>> window_out(const pb::NodeProto& n, const std::vector<std::int64_t>& in,
                                                           const std::vector<std::int64_t>& kernel, bool ceil_mode) {
  const std::size_t sp = kernel.size();
  if (in.size() != sp + 2) return std::nullopt;
  auto strides = attr_ints(n, "strides");
  auto dil = attr_ints(n, "dilations");
  auto pads = attr_ints(n, "pads");
  const std::string auto_pad = attr_string(n, "auto_pad");
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < sp; ++i) {
    const std::int64_t s = i < strides.size() ? strides[i] : 1;
    const std::int64_t d = i < dil.size() ? dil[i] : 1;
    const std::int64_t x = in[2 + i];
    if (s <= 0 || d <= 0 || kernel[i] <= 0 || x < 0) return std::nullopt;
    std::int64_t eff = 0;
    if (__builtin_mul_overflow(kernel[i] - 1, d, &eff) || eff > (std::int64_t(1) << 40)) return std::nullopt;
    eff += 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      out.push_back(x / s + (x % s != 0));
      continue;
    }
    std::int64_t pb_ = 0, pe = 0;
    if (auto_pad != "VALID" && pads.size() == 2 * sp) {
      pb_ = pads[i];
      pe = pads[i + sp];
    }
    // In 128 bits: pads come straight from the file and may be anything.
    const __int128 wide = static_cast<__int128>(x) + pb_ + pe - eff;
    if (wide < 0 || wide > (static_cast<__int128>(1) << 62)) return std::nullopt;
    const auto span = static_cast<std::int64_t>(wide);
    out.push_back((ceil_mode ? span / s + (span % s != 0) : span / s) + 1);
  }
  return out;
}

class Importer {
 public:
  Importer(const pb::ModelProto& model, std::string source, const OnnxOptions& opts)
      : g_(model.graph()), source_(std::move(source)), at_(source_ + ": "), opts_(opts) {}

  OpGraph run();

 private:
  TType type_of(const pb::TypeProto& tp, const std::string& name) const {
    TType t;
    if (!tp.has_tensor_type()) return t;
    const auto& tt = tp.tensor_type();
    t.dtype = elem_type_of(tt.elem_type());
    if (!tt.has_shape()) return t;
    t.known = true;
    for (const auto& d : tt.shape().dim()) {
      if (d.has_dim_value()) {
        GO_CHECK(d.dim_value() >= 0, at_, "tensor '", name, "' has negative dimension ", d.dim_value());
        t.dims.push_back(d.dim_value());
      } else {
        t.dims.push_back(opts_.symbolic_dim);
      }
    }
    return t;
  }
  TType type_of(const pb::TensorProto& tp) const {
    TType t;
    t.dtype = elem_type_of(tp.data_type());
    t.known = true;
    for (auto d : tp.dims()) {
      GO_CHECK(d >= 0, at_, "initializer '", tp.name(), "' has negative dimension ", d);
      t.dims.push_back(d);
    }
    return t;
  }
  std::string node_label(int i) const {
    const auto& n = g_.node(i);
    return "node '" + node_name(i) + "' (" + n.op_type() + ")";
  }
  std::string node_name(int i) const {
    const auto& n = g_.node(i);
    return n.name().empty() ? n.op_type() + "_" + std::to_string(i) : n.name();
  }
  const std::vector<std::int64_t>* const_of(const std::string& name) const {
    auto it = consts_.find(name);
    return it == consts_.end() ? nullptr : &it->second;
  }
  std::vector<TType> infer(const pb::NodeProto& n, const std::vector<const TType*>& in) const;
  void fold_constants(const pb::NodeProto& n, const std::vector<const TType*>& in);
  double flops(const pb::NodeProto& n, OpKind kind, const std::vector<const TType*>& in,
               const std::vector<TType>& out) const;
  bool is_weight_slot(const pb::NodeProto& n, int slot) const;

  const pb::GraphProto& g_;
  std::string source_;
  std::string at_;
  OnnxOptions opts_;
  std::unordered_map<std::string, TType> types_;
  std::unordered_map<std::string, std::vector<std::int64_t>> consts_;  // integer values of folded_, for infer
  std::unordered_map<std::string, Folded> folded_;                      // tensors known at import time
};

inline bool Importer::is_weight_slot(const pb::NodeProto& n, int slot) const {
  const std::string& t = n.op_type();
  if (t == "Conv" || t == "ConvTranspose" || t == "Gemm") return slot == 1 || slot == 2;
  if (t == "MatMul" || t == "PRelu" || t == "Add" || t == "Sub" || t == "Mul" || t == "Div") return slot == 1;
  if (t == "BatchNormalization") return slot >= 1 && slot <= 4;
  if (t == "LayerNormalization" || t == "InstanceNormalization" || t == "GroupNormalization") return slot >= 1;
  if (t == "LSTM" || t == "GRU" || t == "RNN") return slot >= 1 && slot != 4;
  if (t == "Gather") return slot == 0;
  return false;
}

inline std::vector<TType> Importer::infer(const pb::NodeProto& n, const std::vector<const TType*>& in) const {
  const std::string& t = n.op_type();
  const int nout = n.output_size();
  std::vector<TType> out(static_cast<std::size_t>(std::max(nout, 0)));
  if (nout == 0) return out;
  TType& o = out[0];
  o.dtype = (!in.empty() && in[0]) ? in[0]->dtype : ElemType::f32;
  auto set = [&](std::vector<std::int64_t> dims) {
    o.known = true;
    o.dims = std::move(dims);
  };
  const TType* x = (!in.empty()) ? in[0] : nullptr;
  const bool xk = x && x->known;
  const OpKind kind = onnx_op_kind(t);

  if (t == "Constant") {
    if (const auto* a = attr(n, "value"); a && a->has_t()) {
      o = type_of(a->t());
    } else if (const auto* ai = attr(n, "value_ints")) {
      o.dtype = ElemType::i64;
      set({static_cast<std::int64_t>(ai->ints_size())});
    } else if (attr(n, "value_int")) {
      o.dtype = ElemType::i64;
      set({});
    } else if (attr(n, "value_float")) {
      set({});
    }
    return out;
  }
  if (t == "Shape") {
    o.dtype = ElemType::i64;
    if (!xk) return out;
    const auto r = static_cast<std::int64_t>(x->dims.size());
    std::int64_t s = attr_int(n, "start", 0), e = attr_int(n, "end", r);
    if (s < 0) s += r;
    if (e < 0) e += r;
    s = std::clamp<std::int64_t>(s, 0, r);
    set({std::clamp<std::int64_t>(e, s, r) - s});
    return out;
  }
  if (t == "ConstantOfShape") {
    o.dtype = ElemType::f32;
    if (const auto* a = attr(n, "value"); a && a->has_t()) o.dtype = elem_type_of(a->t().data_type());
    if (const auto* c = n.input_size() > 0 ? const_of(n.input(0)) : nullptr) set(*c);
    for (auto d : o.dims)
      if (d < 0) o = TType{};
    return out;
  }
  if (t == "Expand" || t == "Tile") {
    const auto* c = n.input_size() > 1 ? const_of(n.input(1)) : nullptr;
    if (!xk || !c) return out;
    TType target;
    target.known = true;
    target.dims = *c;
    if (t == "Expand") {
      if (auto b = broadcast({x, &target})) set(*b);
      return out;
    }
    if (c->size() != x->dims.size()) return out;
    std::vector<std::int64_t> d(x->dims.size());
    for (std::size_t i = 0; i < d.size(); ++i)
      if ((*c)[i] < 0 || __builtin_mul_overflow(x->dims[i], (*c)[i], &d[i])) return out;
    set(std::move(d));
    return out;
  }
  if (t == "ScatterND" || t == "ScatterElements" || t == "Scatter") {
    if (xk) set(x->dims);
    return out;
  }
  if (t == "Size") {
    o.dtype = ElemType::i64;
    set({});
    return out;
  }
  if (t == "Cast") {
    o.dtype = elem_type_of(static_cast<int>(attr_int(n, "to", 1)));
    if (xk) set(x->dims);
    return out;
  }
  if (t == "Conv" || t == "ConvTranspose") {
    if (!all_known(in, 2) || x->dims.size() < 3 || in[1]->dims.size() != x->dims.size()) return out;
    const TType& w = *in[1];
    std::vector<std::int64_t> kernel(w.dims.begin() + 2, w.dims.end());
    if (auto ks = attr_ints(n, "kernel_shape"); ks.size() == kernel.size()) kernel = ks;
    if (t == "Conv") {
      auto sp = window_out(n, x->dims, kernel, false);
      if (!sp) return out;
      std::vector<std::int64_t> d{x->dims[0], w.dims[0]};
      d.insert(d.end(), sp->begin(), sp->end());
      set(std::move(d));
    } else {
      const std::int64_t group = std::max<std::int64_t>(1, attr_int(n, "group", 1));
      auto strides = attr_ints(n, "strides");
      auto dil = attr_ints(n, "dilations");
      auto pads = attr_ints(n, "pads");
      auto opad = attr_ints(n, "output_padding");
      std::int64_t channels = 0;
      if (__builtin_mul_overflow(w.dims[1], group, &channels)) return out;
      std::vector<std::int64_t> d{x->dims[0], channels};
      const std::size_t sp = kernel.size();
      for (std::size_t i = 0; i < sp; ++i) {
        const std::int64_t s = i < strides.size() ? strides[i] : 1, dl = i < dil.size() ? dil[i] : 1;
        const __int128 p = pads.size() == 2 * sp ? static_cast<__int128>(pads[i]) + pads[i + sp] : 0;
        const __int128 wide = static_cast<__int128>(s) * (x->dims[2 + i] - 1) + (i < opad.size() ? opad[i] : 0) +
                              static_cast<__int128>(kernel[i] - 1) * dl + 1 - p;
        if (wide < 0 || wide > (static_cast<__int128>(1) << 62)) return out;
        const auto v = static_cast<std::int64_t>(wide);
        if (v < 0) return out;
        d.push_back(v);
      }
      set(std::move(d));
    }
    return out;
  }
  if (t == "MaxPool" || t == "AveragePool" || t == "LpPool") {
    if (!xk || x->dims.size() < 3) return out;
    auto kernel = attr_ints(n, "kernel_shape");
    if (kernel.size() + 2 != x->dims.size()) return out;
    auto sp = window_out(n, x->dims, kernel, attr_int(n, "ceil_mode", 0) != 0);
    if (!sp) return out;
    std::vector<std::int64_t> d{x->dims[0], x->dims[1]};
    d.insert(d.end(), sp->begin(), sp->end());
    set(d);
    if (nout > 1) {  // MaxPool indices
      out[1].dtype = ElemType::i64;
      out[1].known = true;
      out[1].dims = d;
    }
    return out;
  }
  if (kind == OpKind::global_pool) {
    if (!xk || x->dims.size() < 2) return out;
    std::vector<std::int64_t> d{x->dims[0], x->dims[1]};
    d.resize(x->dims.size(), 1);
    set(std::move(d));
    return out;
  }
  if (t == "Gemm") {
    if (!all_known(in, 2) || x->dims.size() != 2 || in[1]->dims.size() != 2) return out;
    const bool ta = attr_int(n, "transA", 0) != 0, tb = attr_int(n, "transB", 0) != 0;
    set({ta ? x->dims[1] : x->dims[0], tb ? in[1]->dims[0] : in[1]->dims[1]});
    return out;
  }
  if (t == "MatMul" || t == "MatMulInteger") {
    if (!all_known(in, 2) || x->dims.empty() || in[1]->dims.empty()) return out;
    std::vector<std::int64_t> a = x->dims, b = in[1]->dims;
    const bool a1 = a.size() == 1, b1 = b.size() == 1;
    if (a1) a.insert(a.begin(), 1);
    if (b1) b.push_back(1);
    TType ab, bb;
    ab.known = bb.known = true;
    ab.dims.assign(a.begin(), a.end() - 2);
    bb.dims.assign(b.begin(), b.end() - 2);
    auto batch = broadcast({&ab, &bb});
    if (!batch) return out;
    std::vector<std::int64_t> d = *batch;
    if (!a1) d.push_back(a[a.size() - 2]);
    if (!b1) d.push_back(b.back());
    set(std::move(d));
    return out;
  }
  if (t == "Flatten") {
    if (!xk) return out;
    std::int64_t axis = attr_int(n, "axis", 1);
    const auto r = static_cast<std::int64_t>(x->dims.size());
    if (axis < 0) axis += r;
    if (axis < 0 || axis > r) return out;
    std::int64_t a = 1, b = 1;
    for (std::int64_t i = 0; i < r; ++i)
      if (__builtin_mul_overflow(i < axis ? a : b, x->dims[static_cast<std::size_t>(i)], i < axis ? &a : &b)) return out;
    set({a, b});
    return out;
  }
  if (t == "Concat") {
    std::int64_t axis = attr_int(n, "axis", 0);
    if (!xk) return out;
    const auto r = static_cast<std::int64_t>(x->dims.size());
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r) return out;
    std::vector<std::int64_t> d = x->dims;
    d[static_cast<std::size_t>(axis)] = 0;
    for (const TType* p : in) {
      if (!p) continue;
      if (!p->known || p->dims.size() != x->dims.size()) return out;
      d[static_cast<std::size_t>(axis)] += p->dims[static_cast<std::size_t>(axis)];
    }
    set(std::move(d));
    return out;
  }
  if (t == "Transpose") {
    if (!xk) return out;
    auto perm = attr_ints(n, "perm");
    const std::size_t r = x->dims.size();
    std::vector<std::int64_t> d(r);
    for (std::size_t i = 0; i < r; ++i) {
      const std::int64_t p = perm.empty() ? static_cast<std::int64_t>(r - 1 - i) : (i < perm.size() ? perm[i] : -1);
      if (p < 0 || p >= static_cast<std::int64_t>(r)) return out;
      d[i] = x->dims[static_cast<std::size_t>(p)];
    }
    set(std::move(d));
    return out;
  }
  if (t == "Reshape") {
    const auto* shape = n.input_size() > 1 ? const_of(n.input(1)) : nullptr;
    if (!xk || !shape) return out;
    std::vector<std::int64_t> d;
    std::int64_t known = 1, infer_at = -1;
    for (std::size_t i = 0; i < shape->size(); ++i) {
      std::int64_t v = (*shape)[i];
      if (v == 0 && attr_int(n, "allowzero", 0) == 0) {
        if (i >= x->dims.size()) return out;
        v = x->dims[i];
      }
      if (v == -1) {
        if (infer_at >= 0) return out;
        infer_at = static_cast<std::int64_t>(i);
        d.push_back(1);
        continue;
      }
      if (v < 0 || __builtin_mul_overflow(known, v, &known)) return out;
      d.push_back(v);
    }
    const double total = x->numel();
    if (infer_at >= 0) {
      if (known == 0) return out;
      d[static_cast<std::size_t>(infer_at)] = static_cast<std::int64_t>(total) / known;
    }
    set(std::move(d));
    return out;
  }
  if (t == "Unsqueeze" || t == "Squeeze") {
    if (!xk) return out;
    std::vector<std::int64_t> axes = attr_ints(n, "axes");
    if (axes.empty() && n.input_size() > 1)
      if (const auto* c = const_of(n.input(1))) axes = *c;
    std::vector<std::int64_t> d = x->dims;
    if (t == "Squeeze") {
      const auto r = static_cast<std::int64_t>(d.size());
      std::vector<bool> drop(d.size(), false);
      if (axes.empty())
        for (std::size_t i = 0; i < d.size(); ++i) drop[i] = d[i] == 1;
      for (auto a : axes) {
        if (a < 0) a += r;
        if (a < 0 || a >= r) return out;
        drop[static_cast<std::size_t>(a)] = true;
      }
      std::vector<std::int64_t> e;
      for (std::size_t i = 0; i < d.size(); ++i)
        if (!drop[i]) e.push_back(d[i]);
      set(std::move(e));
    } else {
      const auto r = static_cast<std::int64_t>(d.size() + axes.size());
      for (auto& a : axes) {
        if (a < 0) a += r;
        if (a < 0 || a >= r) return out;
      }
      std::sort(axes.begin(), axes.end());
      for (auto a : axes) d.insert(d.begin() + a, 1);
      set(std::move(d));
    }
    return out;
  }
  if (t == "Gather") {
    if (!all_known(in, 2)) return out;
    std::int64_t axis = attr_int(n, "axis", 0);
    const auto r = static_cast<std::int64_t>(x->dims.size());
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r) return out;
    std::vector<std::int64_t> d(x->dims.begin(), x->dims.begin() + axis);
    d.insert(d.end(), in[1]->dims.begin(), in[1]->dims.end());
    d.insert(d.end(), x->dims.begin() + axis + 1, x->dims.end());
    set(std::move(d));
    return out;
  }
  if (kind == OpKind::reduce) {
    if (!xk) return out;
    std::vector<std::int64_t> axes = attr_ints(n, "axes");
    if (axes.empty() && n.input_size() > 1)
      if (const auto* c = const_of(n.input(1))) axes = *c;
    const bool keep = attr_int(n, "keepdims", 1) != 0;
    const auto r = static_cast<std::int64_t>(x->dims.size());
    std::vector<bool> red(x->dims.size(), axes.empty());
    if (t == "ArgMax" || t == "ArgMin") {
      red.assign(x->dims.size(), false);
      std::int64_t a = attr_int(n, "axis", 0);
      if (a < 0) a += r;
      if (a < 0 || a >= r) return out;
      red[static_cast<std::size_t>(a)] = true;
      o.dtype = ElemType::i64;
    }
    for (auto a : axes) {
      if (a < 0) a += r;
      if (a < 0 || a >= r) return out;
      red[static_cast<std::size_t>(a)] = true;
    }
    std::vector<std::int64_t> d;
    for (std::size_t i = 0; i < x->dims.size(); ++i)
      if (!red[i]) d.push_back(x->dims[i]);
      else if (keep) d.push_back(1);
    set(std::move(d));
    return out;
  }
  if (t == "Slice") {
    if (!xk) return out;
    std::vector<std::int64_t> starts, ends, axes, steps;
    if (n.input_size() >= 3) {
      const auto* s = const_of(n.input(1));
      const auto* e = const_of(n.input(2));
      if (!s || !e) return out;
      starts = *s;
      ends = *e;
      if (n.input_size() > 3 && !n.input(3).empty()) {
        const auto* a = const_of(n.input(3));
        if (!a) return out;
        axes = *a;
      }
      if (n.input_size() > 4 && !n.input(4).empty()) {
        const auto* st = const_of(n.input(4));
        if (!st) return out;
        steps = *st;
      }
    } else {
      starts = attr_ints(n, "starts");
      ends = attr_ints(n, "ends");
      axes = attr_ints(n, "axes");
    }
    if (starts.size() != ends.size()) return out;
    std::vector<std::int64_t> d = x->dims;
    const auto r = static_cast<std::int64_t>(d.size());
    for (std::size_t i = 0; i < starts.size(); ++i) {
      std::int64_t a = i < axes.size() ? axes[i] : static_cast<std::int64_t>(i);
      if (a < 0) a += r;
      if (a < 0 || a >= r) return out;
      const std::int64_t dim = d[static_cast<std::size_t>(a)];
      const std::int64_t step = i < steps.size() ? steps[i] : 1;
      if (step == 0) return out;
      auto clampi = [&](std::int64_t v, std::int64_t lo, std::int64_t hi) {
        if (v < 0) v += dim;
        return std::clamp(v, lo, hi);
      };
      std::int64_t len;
      if (step > 0) {
        const std::int64_t s = clampi(starts[i], 0, dim), e = clampi(ends[i], 0, dim);
        len = e > s ? (e - s + step - 1) / step : 0;
      } else {
        const std::int64_t s = clampi(starts[i], -1, dim - 1), e = clampi(ends[i], -1, dim - 1);
        len = s > e ? (s - e - step - 1) / (-step) : 0;
      }
      d[static_cast<std::size_t>(a)] = len;
    }
    set(std::move(d));
    return out;
  }
  if (t == "Split") {
    if (!xk) return out;
    std::int64_t axis = attr_int(n, "axis", 0);
    const auto r = static_cast<std::int64_t>(x->dims.size());
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r) return out;
    std::vector<std::int64_t> split = attr_ints(n, "split");
    if (split.empty() && n.input_size() > 1 && !n.input(1).empty())
      if (const auto* c = const_of(n.input(1))) split = *c;
    const std::int64_t dim = x->dims[static_cast<std::size_t>(axis)];
    if (split.empty()) {
      const std::int64_t k = nout, each = (dim + k - 1) / k;
      for (std::int64_t i = 0; i < k; ++i) split.push_back(std::max<std::int64_t>(0, std::min(each, dim - i * each)));
    }
    if (static_cast<int>(split.size()) != nout) return out;
    for (int i = 0; i < nout; ++i) {
      if (split[static_cast<std::size_t>(i)] < 0) return out;
      out[static_cast<std::size_t>(i)].dtype = x->dtype;
      out[static_cast<std::size_t>(i)].known = true;
      out[static_cast<std::size_t>(i)].dims = x->dims;
      out[static_cast<std::size_t>(i)].dims[static_cast<std::size_t>(axis)] = split[static_cast<std::size_t>(i)];
    }
    return out;
  }
  if (t == "Pad") {
    if (!xk) return out;
    std::vector<std::int64_t> pads = attr_ints(n, "pads");
    if (pads.empty() && n.input_size() > 1)
      if (const auto* c = const_of(n.input(1))) pads = *c;
    const std::size_t r = x->dims.size();
    if (pads.size() != 2 * r) return out;
    std::vector<std::int64_t> d = x->dims;
    for (std::size_t i = 0; i < r; ++i) {
      d[i] += pads[i] + pads[i + r];
      if (d[i] < 0) return out;
    }
    set(std::move(d));
    return out;
  }
  if (t == "LSTM" || t == "GRU" || t == "RNN") {
    if (!xk || x->dims.size() != 3) return out;
    const std::int64_t h = attr_int(n, "hidden_size", -1);
    if (h <= 0) return out;
    const std::int64_t dirs = attr_string(n, "direction") == "bidirectional" ? 2 : 1;
    const bool batch_first = attr_int(n, "layout", 0) != 0;
    const std::int64_t seq = batch_first ? x->dims[1] : x->dims[0], batch = batch_first ? x->dims[0] : x->dims[1];
    set(batch_first ? std::vector<std::int64_t>{batch, seq, dirs, h} : std::vector<std::int64_t>{seq, dirs, batch, h});
    for (int i = 1; i < nout; ++i) {
      out[static_cast<std::size_t>(i)].dtype = x->dtype;
      out[static_cast<std::size_t>(i)].known = true;
      out[static_cast<std::size_t>(i)].dims = batch_first ? std::vector<std::int64_t>{batch, dirs, h}
                                                          : std::vector<std::int64_t>{dirs, batch, h};
    }
    return out;
  }
  if (t == "Where") {
    if (auto b = broadcast(in)) set(*b);
    if (in.size() > 1 && in[1]) o.dtype = in[1]->dtype;
    return out;
  }
  if (kind == OpKind::add || kind == OpKind::sub || kind == OpKind::mul || kind == OpKind::div || t == "Pow" ||
      t == "Max" || t == "Min" || t == "Mean" || t == "Equal" || t == "Less" || t == "Greater" || t == "And" ||
      t == "Or" || t == "PRelu" || t == "Mod" || t == "LessOrEqual" || t == "GreaterOrEqual" || t == "Xor") {
    if (auto b = broadcast(in)) set(*b);
    if (t == "Equal" || t == "Less" || t == "Greater" || t == "And" || t == "Or" || t == "LessOrEqual" ||
        t == "GreaterOrEqual" || t == "Xor")
      o.dtype = ElemType::boolean;
    return out;
  }
  // Same shape as the first input: activations, normalizations, softmax, dropout, unary math.
  if (kind == OpKind::relu || kind == OpKind::sigmoid || kind == OpKind::tanh || kind == OpKind::gelu ||
      kind == OpKind::batch_norm || kind == OpKind::layer_norm || kind == OpKind::softmax ||
      kind == OpKind::dropout || t == "Identity" || kind == OpKind::elementwise) {
    if (t == "Expand" || t == "Tile" || t == "Range" || t == "Resize" || t == "Upsample") return out;
    if (xk) set(x->dims);
    for (int i = 1; i < nout; ++i)
      if (t == "Dropout" && xk) {  // mask
        out[static_cast<std::size_t>(i)].dtype = ElemType::boolean;
        out[static_cast<std::size_t>(i)].known = true;
        out[static_cast<std::size_t>(i)].dims = x->dims;
      }
    return out;
  }
  return out;
}

inline void Importer::fold_constants(const pb::NodeProto& n, const std::vector<const TType*>& in) {
  if (n.output_size() != 1 || n.output(0).empty()) return;
  std::vector<const Folded*> vals;
  for (const auto& name : n.input()) {
    auto it = name.empty() ? folded_.end() : folded_.find(name);
    vals.push_back(it == folded_.end() ? nullptr : &it->second);
  }
  auto ot = types_.find(n.output(0));
  auto v = fold_node(n, vals, in, ot == types_.end() ? nullptr : &ot->second);
  if (!v) return;
  if (ot == types_.end() || !ot->second.known) {  // e.g. Range, whose shape is its value
    TType& ty = types_[n.output(0)];
    ty.known = true;
    ty.dims = v->dims;
    if (ot == types_.end()) ty.dtype = v->real ? ElemType::f32 : ElemType::i64;
  }
  if (!v->real) consts_[n.output(0)] = v->i;
  folded_[n.output(0)] = std::move(*v);
}

inline double Importer::flops(const pb::NodeProto& n, OpKind kind, const std::vector<const TType*>& in,
                              const std::vector<TType>& out) const {
  const std::string& t = n.op_type();
  const double y = out.empty() ? 0.0 : out[0].numel();
  const double x = (!in.empty() && in[0]) ? in[0]->numel() : 0.0;
  auto has_input = [&](int i) { return n.input_size() > i && !n.input(i).empty(); };
  switch (kind) {
    case OpKind::conv: {
      if (in.size() < 2 || !in[1] || !in[1]->known || in[1]->dims.size() < 2) return 0;
      double per = 1;  // prod(W.dims[1:])
      for (std::size_t i = 1; i < in[1]->dims.size(); ++i) per *= static_cast<double>(in[1]->dims[i]);
      if (t == "ConvTranspose") return 2.0 * x * per + (has_input(2) ? y : 0.0);
      return 2.0 * y * per + (has_input(2) ? y : 0.0);
    }
    case OpKind::matmul: {
      if (in.size() < 2 || !in[0] || !in[0]->known || in[0]->dims.empty()) return 0;
      double k;
      if (t == "Gemm") {
        if (in[0]->dims.size() != 2) return 0;
        k = static_cast<double>(attr_int(n, "transA", 0) ? in[0]->dims[0] : in[0]->dims[1]);
        return 2.0 * y * k + (has_input(2) ? y : 0.0);
      }
      k = static_cast<double>(in[0]->dims.back());
      return 2.0 * y * k;
    }
    case OpKind::batch_norm: return 2.0 * y;
    case OpKind::layer_norm: return 8.0 * y;
    case OpKind::relu: return y;
    case OpKind::sigmoid:
    case OpKind::tanh: return 4.0 * y;
    case OpKind::gelu: return 8.0 * y;
    case OpKind::elementwise:
      if (t == "Erf") return 4.0 * y;
      if (t == "Expand" || t == "Tile" || t == "Range" || t == "Cast") return 0.0;
      return y * std::max(1, static_cast<int>(in.size()) - (t == "Where" ? 2 : 1));
    case OpKind::add:
    case OpKind::sub:
    case OpKind::mul:
    case OpKind::div: return y * std::max(1, static_cast<int>(in.size()) - 1);
    case OpKind::max_pool:
    case OpKind::avg_pool: {
      double k = 1;
      for (auto d : attr_ints(n, "kernel_shape")) k *= static_cast<double>(d);
      return y * k;
    }
    case OpKind::global_pool:
    case OpKind::reduce: return x;
    case OpKind::softmax: return 5.0 * y;
    case OpKind::dropout: return y;
    case OpKind::rnn: {
      if (in.size() < 2 || !in[0] || !in[0]->known || in[0]->dims.size() != 3) return 0;
      const double h = static_cast<double>(attr_int(n, "hidden_size", 0));
      const bool batch_first = attr_int(n, "layout", 0) != 0;
      const double seq = static_cast<double>(in[0]->dims[batch_first ? 1 : 0]);
      const double batch = static_cast<double>(in[0]->dims[batch_first ? 0 : 1]);
      const double inp = static_cast<double>(in[0]->dims[2]);
      const double dirs = attr_string(n, "direction") == "bidirectional" ? 2.0 : 1.0;
      double per;
      if (t == "LSTM") per = 8.0 * h * (inp + h) + 20.0 * h;
      else if (t == "GRU") per = 6.0 * h * (inp + h) + 16.0 * h;
      else per = 2.0 * h * (inp + h) + 4.0 * h;
      return seq * batch * dirs * per;
    }
    default: return 0.0;
  }
}

inline OpGraph Importer::run() {
  const int n_nodes = g_.node_size();
  GO_CHECK(n_nodes > 0 || g_.input_size() > 0, at_, "ONNX model has an empty graph (no nodes)");
  // ---- types of named tensors ----
  std::unordered_set<std::string> initializers;
  for (const auto& t : g_.initializer()) {
    types_[t.name()] = type_of(t);
    initializers.insert(t.name());
    if (auto v = fold_tensor(t)) {
      if (!v->real) consts_[t.name()] = v->i;
      folded_[t.name()] = std::move(*v);
    }
  }
  for (const auto& vi : g_.input()) types_[vi.name()] = type_of(vi.type(), vi.name());
  for (const auto& vi : g_.value_info()) types_[vi.name()] = type_of(vi.type(), vi.name());
  for (const auto& vi : g_.output()) types_[vi.name()] = type_of(vi.type(), vi.name());

  // ---- producers and consumers by name ----
  std::unordered_map<std::string, std::pair<int, int>> producer;  // tensor -> (node, output)
  for (int i = 0; i < n_nodes; ++i) {
    const auto& nd = g_.node(i);
    for (int k = 0; k < nd.output_size(); ++k) {
      if (nd.output(k).empty()) continue;
      auto [it, fresh] = producer.emplace(nd.output(k), std::make_pair(i, k));
      GO_CHECK(fresh, at_, "tensor '", nd.output(k), "' is produced twice: by ", node_label(it->second.first), " and ",
               node_label(i));
      GO_CHECK(!initializers.count(nd.output(k)), at_, node_label(i), " overwrites initializer '", nd.output(k), "'");
    }
  }
  std::unordered_map<std::string, std::vector<std::pair<int, int>>> consumers;  // tensor -> (node, slot)
  for (int i = 0; i < n_nodes; ++i) {
    const auto& nd = g_.node(i);
    for (int k = 0; k < nd.input_size(); ++k)
      if (!nd.input(k).empty()) consumers[nd.input(k)].emplace_back(i, k);
  }

  // ---- classify graph inputs: data or parameter ----
  std::unordered_set<std::string> graph_inputs;
  std::vector<std::string> data_inputs;
  std::unordered_set<std::string> param_like(initializers.begin(), initializers.end());
  auto has_data_use = [&](const std::string& root) {
    std::vector<std::string> stack{root};
    std::unordered_set<std::string> seen{root};
    while (!stack.empty()) {
      std::string name = std::move(stack.back());
      stack.pop_back();
      auto it = consumers.find(name);
      if (it == consumers.end()) continue;
      for (auto [ni, slot] : it->second) {
        const auto& nd = g_.node(ni);
        const std::string& t = nd.op_type();
        if (t == "Identity" || t == "Transpose" || t == "Cast" || t == "Reshape" || t == "Unsqueeze" ||
            t == "Squeeze") {
          if (slot == 0 && nd.output_size() > 0 && seen.insert(nd.output(0)).second) stack.push_back(nd.output(0));
          continue;
        }
        // commutative ops (Add(bias, x), Mul(scale, x)) say nothing about which operand is data
        if (t == "Add" || t == "Mul" || t == "Sum" || t == "Max" || t == "Min" || t == "Mean") continue;
        if (!is_weight_slot(nd, slot)) return true;
      }
    }
    return false;
  };
  for (int i = 0; i < g_.input_size(); ++i) {
    const std::string& name = g_.input(i).name();
    graph_inputs.insert(name);
    if (initializers.count(name)) continue;
    GO_CHECK(!producer.count(name), at_, "graph input '", name, "' is also produced by ",
             node_label(producer[name].first));
    if (data_inputs.empty() || has_data_use(name)) data_inputs.push_back(name);
    else param_like.insert(name);
  }

  // ---- node order for inference: Kahn over tensor dependencies (cyclic nodes last) ----
  std::vector<int> order;
  order.reserve(static_cast<std::size_t>(n_nodes));
  {
    std::vector<int> pending(static_cast<std::size_t>(n_nodes), 0);
    std::vector<std::vector<int>> next(static_cast<std::size_t>(n_nodes));
    for (int i = 0; i < n_nodes; ++i) {
      const auto& nd = g_.node(i);
      for (int k = 0; k < nd.input_size(); ++k) {
        auto it = producer.find(nd.input(k));
        if (it != producer.end()) {
          ++pending[static_cast<std::size_t>(i)];
          next[static_cast<std::size_t>(it->second.first)].push_back(i);
        }
      }
    }
    for (int i = 0; i < n_nodes; ++i)
      if (pending[static_cast<std::size_t>(i)] == 0) order.push_back(i);
    for (std::size_t h = 0; h < order.size(); ++h)
      for (int w : next[static_cast<std::size_t>(order[h])])
        if (--pending[static_cast<std::size_t>(w)] == 0) order.push_back(w);
    for (int i = 0; i < n_nodes; ++i)
      if (pending[static_cast<std::size_t>(i)] > 0) order.push_back(i);
  }

  // ---- infer missing types, fold small integer constants, fold Identity of parameters ----
  std::vector<bool> skip(static_cast<std::size_t>(n_nodes), false);
  const TType unknown;
  auto input_types = [&](const pb::NodeProto& nd) {
    std::vector<const TType*> in;
    in.reserve(static_cast<std::size_t>(nd.input_size()));
    for (const auto& name : nd.input()) {
      if (name.empty()) {
        in.push_back(nullptr);
        continue;
      }
      auto it = types_.find(name);
      in.push_back(it == types_.end() ? &unknown : &it->second);
    }
    return in;
  };
  std::vector<std::vector<TType>> out_types(static_cast<std::size_t>(n_nodes));
  for (int i : order) {
    const auto& nd = g_.node(i);
    auto in = input_types(nd);
    bool missing = false;
    for (const auto& o : nd.output())
      if (!o.empty() && (!types_.count(o) || !types_[o].known)) missing = true;
    if (missing) {
      auto inferred = infer(nd, in);
      for (int k = 0; k < nd.output_size(); ++k) {
        const std::string& o = nd.output(k);
        if (o.empty()) continue;
        auto it = types_.find(o);
        if (it == types_.end() || !it->second.known) {
          TType ty = inferred[static_cast<std::size_t>(k)];
          if (it != types_.end() && !ty.known) ty.dtype = it->second.dtype;
          types_[o] = std::move(ty);
        }
      }
      in = input_types(nd);  // rehash may have moved entries
    }
    fold_constants(nd, in);
    if (nd.op_type() == "Identity" && nd.input_size() == 1 && nd.output_size() == 1 && param_like.count(nd.input(0))) {
      param_like.insert(nd.output(0));
      skip[static_cast<std::size_t>(i)] = true;
    }
  }

  // ---- ops ----
  GraphInfo info;
  info.source = source_;
  info.format = "onnx";
  info.name = g_.name();
  GraphBuilder b(info);
  b.reserve(data_inputs.size() + static_cast<std::size_t>(n_nodes));
  std::unordered_map<std::string, std::pair<OpId, std::int32_t>> ref;  // tensor -> (op, output)
  auto tensor_spec = [&](const std::string& name) {
    TensorSpec ts;
    auto it = types_.find(name);
    if (it == types_.end() || !it->second.known) {
      ts.shape_known = false;
      if (it != types_.end()) ts.dtype = it->second.dtype;
      return ts;
    }
    ts.dtype = it->second.dtype;
    ts.shape = it->second.dims;
    return ts;
  };
  for (const auto& name : data_inputs) {
    OpSpec s;
    s.name = name;
    s.kind = OpKind::input;
    s.outputs.push_back(tensor_spec(name));
    ref[name] = {b.add_op(std::move(s)), 0};
  }
  if (!data_inputs.empty()) {
    auto it = types_.find(data_inputs.front());
    if (it != types_.end() && it->second.known && !it->second.dims.empty()) info.batch = it->second.dims[0];
  }
  // node index -> op id (skipped nodes get -1); ops are added in file order
  std::vector<OpId> op_of(static_cast<std::size_t>(n_nodes), -1);
  for (int i = 0; i < n_nodes; ++i) {
    if (skip[static_cast<std::size_t>(i)]) continue;
    const auto& nd = g_.node(i);
    OpSpec s;
    s.name = node_name(i);
    s.kind = onnx_op_kind(nd.op_type());
    for (int k = 0; k < nd.output_size(); ++k) s.outputs.push_back(tensor_spec(nd.output(k)));
    op_of[static_cast<std::size_t>(i)] = static_cast<OpId>(b.size());
    for (int k = 0; k < nd.output_size(); ++k)
      if (!nd.output(k).empty()) ref[nd.output(k)] = {static_cast<OpId>(b.size()), k};
    b.add_op(std::move(s));
  }
  // inputs, parameters (owned by the first reader in inference order) and FLOPs
  std::unordered_set<std::string> owned;
  for (int i : order) {
    if (skip[static_cast<std::size_t>(i)]) continue;
    const auto& nd = g_.node(i);
    OpSpec& s = b.spec(op_of[static_cast<std::size_t>(i)]);
    for (int k = 0; k < nd.input_size(); ++k) {
      const std::string& name = nd.input(k);
      if (name.empty()) continue;
      if (param_like.count(name)) {
        if (owned.insert(name).second) {
          auto it = types_.find(name);
          std::int64_t bytes = 0;
          if (it != types_.end() && it->second.known) {
            auto by = detail::checked_bytes(it->second.dims, elem_size(it->second.dtype));
            GO_CHECK(by.has_value(), at_, "parameter '", name, "' is too large");
            bytes = *by;
          }
          s.params.push_back(ParamSpec{name, bytes});
        }
        continue;
      }
      auto r = ref.find(name);
      GO_CHECK(r != ref.end(), at_, node_label(i), " reads unknown tensor '", name, "'");
      s.inputs.push_back(TensorRef{r->second.first, r->second.second});
    }
    std::vector<TType> outs;
    for (const auto& o : nd.output()) {
      auto it = types_.find(o);
      outs.push_back(it == types_.end() ? TType{} : it->second);
    }
    // folded nodes compute shapes at import time, not work at run time (like Shape and Constant)
    const bool folded = nd.output_size() == 1 && folded_.count(nd.output(0));
    s.flops = folded ? 0.0 : flops(nd, s.kind, input_types(nd), outs);
  }
  b.info().batch = info.batch;
  return b.build();
}

}  // namespace detail::onnx_import

// Parses ONNX protobuf bytes; errors name `source`.
inline OpGraph parse_onnx(std::string_view bytes, const std::string& source, const OnnxOptions& opts = {}) {
  namespace pb = ::ONNX_NAMESPACE;
  GO_CHECK(!bytes.empty(), source, ": empty file");
  GO_CHECK(bytes.size() < static_cast<std::size_t>(INT_MAX), source, ": ONNX file larger than 2 GiB");
  pb::ModelProto model;
  google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
  google::protobuf::io::CodedInputStream in(&raw);
  in.SetTotalBytesLimit(INT_MAX);
  const bool ok = model.ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
  GO_CHECK(ok, source, ": not a valid ONNX model (protobuf parse failed: truncated or corrupt file)");
  GO_CHECK(model.has_graph() && model.ir_version() > 0, source,
           ": not an ONNX model (no graph or IR version in the protobuf message)");
  return detail::onnx_import::Importer(model, source, opts).run();
}

inline OpGraph load_onnx(const std::string& path, const OnnxOptions& opts = {}) {
  return parse_onnx(detail::read_file(path), path, opts);
}

}  // namespace go
