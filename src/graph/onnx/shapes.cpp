// Shape inference of the ONNX importer: output types of a node whose file records none.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "importer.hpp"

namespace go::detail::onnx_import {

namespace {

// Spatial output sizes of a convolution or pooling window.
std::optional<std::vector<std::int64_t>> window_out(const pb::NodeProto& n, const std::vector<std::int64_t>& in,
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

// Operators whose output is their operands broadcast together (numpy-style, multidirectional).
bool broadcasting_op(const std::string& t, OpKind kind) {
  return kind == OpKind::add || kind == OpKind::sub || kind == OpKind::mul || kind == OpKind::div || t == "Pow" ||
         t == "Max" || t == "Min" || t == "Mean" || t == "Equal" || t == "Less" || t == "Greater" || t == "And" ||
         t == "Or" || t == "PRelu" || t == "Mod" || t == "LessOrEqual" || t == "GreaterOrEqual" || t == "Xor" ||
         t == "Where";
}

std::string dims_text(const std::vector<std::int64_t>& d) {
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

}  // namespace

std::vector<TType> Importer::infer(const pb::NodeProto& n, const std::vector<const TType*>& in) const {
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
    const auto axis = fold_axis(attr_int(n, "axis", 1), x->dims.size(), true);
    if (!axis) return out;
    std::int64_t a = 1, b = 1;
    for (std::size_t i = 0; i < x->dims.size(); ++i)
      if (__builtin_mul_overflow(i < *axis ? a : b, x->dims[i], i < *axis ? &a : &b)) return out;
    set({a, b});
    return out;
  }
  if (t == "Concat") {
    if (!xk) return out;
    const auto axis = fold_axis(attr_int(n, "axis", 0), x->dims.size());
    if (!axis) return out;
    std::vector<std::int64_t> d = x->dims;
    d[*axis] = 0;
    for (const TType* p : in) {
      if (!p) continue;
      if (!p->known || p->dims.size() != x->dims.size()) return out;
      d[*axis] += p->dims[*axis];
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
      std::vector<bool> drop(d.size(), false);
      if (axes.empty())
        for (std::size_t i = 0; i < d.size(); ++i) drop[i] = d[i] == 1;
      for (auto a : axes) {
        const auto k = fold_axis(a, d.size());
        if (!k) return out;
        drop[*k] = true;
      }
      std::vector<std::int64_t> e;
      for (std::size_t i = 0; i < d.size(); ++i)
        if (!drop[i]) e.push_back(d[i]);
      set(std::move(e));
    } else {
      for (auto& a : axes) {
        const auto k = fold_axis(a, d.size() + axes.size());
        if (!k) return out;
        a = static_cast<std::int64_t>(*k);
      }
      std::sort(axes.begin(), axes.end());
      for (auto a : axes) d.insert(d.begin() + a, 1);
      set(std::move(d));
    }
    return out;
  }
  if (t == "Gather") {
    if (!all_known(in, 2)) return out;
    const auto axis = fold_axis(attr_int(n, "axis", 0), x->dims.size());
    if (!axis) return out;
    const auto at = x->dims.begin() + static_cast<std::ptrdiff_t>(*axis);
    std::vector<std::int64_t> d(x->dims.begin(), at);
    d.insert(d.end(), in[1]->dims.begin(), in[1]->dims.end());
    d.insert(d.end(), at + 1, x->dims.end());
    set(std::move(d));
    return out;
  }
  if (kind == OpKind::reduce) {
    if (!xk) return out;
    std::vector<std::int64_t> axes = attr_ints(n, "axes");
    if (axes.empty() && n.input_size() > 1)
      if (const auto* c = const_of(n.input(1))) axes = *c;
    const bool keep = attr_int(n, "keepdims", 1) != 0;
    std::vector<bool> red(x->dims.size(), axes.empty());
    if (t == "ArgMax" || t == "ArgMin") {
      red.assign(x->dims.size(), false);
      const auto k = fold_axis(attr_int(n, "axis", 0), x->dims.size());
      if (!k) return out;
      red[*k] = true;
      o.dtype = ElemType::i64;
    }
    for (auto a : axes) {
      const auto k = fold_axis(a, x->dims.size());
      if (!k) return out;
      red[*k] = true;
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
    for (std::size_t i = 0; i < starts.size(); ++i) {
      const auto a = fold_axis(i < axes.size() ? axes[i] : static_cast<std::int64_t>(i), d.size());
      if (!a) return out;
      const std::int64_t dim = d[*a];
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
      d[*a] = len;
    }
    set(std::move(d));
    return out;
  }
  if (t == "Split") {
    if (!xk) return out;
    const auto axis = fold_axis(attr_int(n, "axis", 0), x->dims.size());
    if (!axis) return out;
    std::vector<std::int64_t> split = attr_ints(n, "split");
    if (split.empty() && n.input_size() > 1 && !n.input(1).empty())
      if (const auto* c = const_of(n.input(1))) split = *c;
    const std::int64_t dim = x->dims[*axis];
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
      out[static_cast<std::size_t>(i)].dims[*axis] = split[static_cast<std::size_t>(i)];
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
  if (broadcasting_op(t, kind)) {  // (Where is above)
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

void Importer::check_shapes_flow(int i, const std::vector<const TType*>& in,
                                 std::unordered_map<std::string, int>& origin) const {
  const auto& nd = g_.node(i);
  bool out_unknown = false;
  for (const auto& o : nd.output()) {
    auto it = types_.find(o);
    out_unknown = out_unknown || (!o.empty() && (it == types_.end() || !it->second.known));
  }
  if (!out_unknown) return;
  int from = -2;  // the unknown input's origin: a node, -1 for a graph input or initializer
  std::string from_tensor;
  for (int k = 0; k < nd.input_size() && from == -2; ++k)
    // a tensor nothing produces is left to the "unknown tensor" error of the graph's building
    if (in[static_cast<std::size_t>(k)] != nullptr && !in[static_cast<std::size_t>(k)]->known &&
        types_.count(nd.input(k))) {
      from_tensor = nd.input(k);
      auto it = origin.find(from_tensor);
      from = it == origin.end() ? -1 : it->second;
    }
  if (from == -2) {
    for (const auto& o : nd.output()) origin.emplace(o, i);
    return;
  }
  const auto& src = from >= 0 ? g_.node(from) : nd;
  const std::string where =
      from >= 0 ? node_label(from) + (src.domain().empty() ? "" : " of domain '" + src.domain() + "'") +
                      ", whose output shape go cannot infer (an operator it does not know, or attributes it cannot "
                      "apply) and the file does not record"
                : "tensor '" + from_tensor + "', which has no recorded shape";
  GO_FAIL(at_, node_label(i), " reads '", from_tensor, "' of unknown shape: the shapes stop at ", where,
          "; the FLOPs and bytes of the ops after it would all count as 0. Record the shapes in the file "
          "(value_info; onnx.shape_inference.infer_shapes does it for standard operators)");
}

void Importer::check_operands(int i, const std::vector<const TType*>& in, const std::vector<TType>& inferred,
                              bool symbolic_inputs) const {
  const auto& nd = g_.node(i);
  const std::string& t = nd.op_type();
  auto operand = [&](std::size_t k) {
    return "'" + nd.input(static_cast<int>(k)) + "' " + dims_text(in[k]->dims);
  };
  auto fail = [&](const std::string& what) {
    GO_FAIL(at_, node_label(i), ": ", what, "; the file's shapes contradict each other (re-export the model, or "
            "run onnx.shape_inference.infer_shapes on it to see where)");
  };
  if ((t == "Conv" || t == "ConvTranspose") && all_known(in, 2)) {
    const auto& x = in[0]->dims;
    const auto& w = in[1]->dims;
    if (x.size() < 3) fail("its input " + operand(0) + " has rank " + std::to_string(x.size()) + ", not [N, C, spatial...]");
    if (w.size() != x.size())
      fail("its weight " + operand(1) + " has rank " + std::to_string(w.size()) + " for an input of rank " +
           std::to_string(x.size()));
    const std::int64_t group = attr_int(nd, "group", 1);
    if (group < 1) fail("group " + std::to_string(group) + " is not a positive count");
    const __int128 takes = t == "Conv" ? static_cast<__int128>(w[1]) * group : w[0];
    if (takes != x[1] && in[0]->concrete(1) && in[1]->concrete(t == "Conv" ? 1 : 0))
      fail("its input " + operand(0) + " has " + std::to_string(x[1]) + " channels but its weight " + operand(1) +
           " takes " + (takes > std::numeric_limits<std::int64_t>::max() ? std::string("more than 2^63")
                                                                            : std::to_string(static_cast<std::int64_t>(takes))) +
           " (group " + std::to_string(group) + ")");
    if (t == "Conv" && w[0] % group != 0 && in[1]->concrete(0))
      fail("its weight " + operand(1) + " has " + std::to_string(w[0]) + " output channels, not a multiple of group " +
           std::to_string(group));
  }
  if (t == "Gemm" && all_known(in, 2)) {
    const auto& a = in[0]->dims;
    const auto& b = in[1]->dims;
    if (a.size() != 2 || b.size() != 2) fail("its operands " + operand(0) + " and " + operand(1) + " are not matrices");
    const std::size_t ia = attr_int(nd, "transA", 0) ? 0 : 1, ib = attr_int(nd, "transB", 0) ? 1 : 0;
    const std::int64_t ka = a[ia], kb = b[ib];
    if (ka != kb && in[0]->concrete(ia) && in[1]->concrete(ib))
      fail("its operands " + operand(0) + " and " + operand(1) + " have inner sizes " + std::to_string(ka) + " and " +
           std::to_string(kb) + " (transA " + std::to_string(attr_int(nd, "transA", 0)) + ", transB " +
           std::to_string(attr_int(nd, "transB", 0)) + ")");
  }
  if (t == "MatMul" && all_known(in, 2) && !in[0]->dims.empty() && !in[1]->dims.empty()) {
    const auto& a = in[0]->dims;
    const auto& b = in[1]->dims;
    const std::size_t ib = b.size() == 1 ? 0 : b.size() - 2;
    const std::int64_t ka = a.back(), kb = b[ib];
    if (ka != kb && in[0]->concrete(a.size() - 1) && in[1]->concrete(ib))
      fail("its operands " + operand(0) + " and " + operand(1) + " have inner sizes " + std::to_string(ka) + " and " +
           std::to_string(kb));
  }
  if (broadcasting_op(t, onnx_op_kind(t)) && !broadcast(in)) {
    bool all = true;  // every operand known, none with a size standing in for a symbolic one
    for (const TType* p : in) all = all && (!p || (p->known && p->symbolic_dims == 0));
    if (all) {
      std::string ops;
      for (std::size_t k = 0; k < in.size(); ++k)
        if (in[k]) ops += (ops.empty() ? "" : " and ") + operand(k);
      fail("its operands " + ops + " do not broadcast");
    }
  }
  for (int k = 0; k < nd.output_size() && !symbolic_inputs; ++k) {
    const std::string& name = nd.output(k);
    auto it = name.empty() ? types_.end() : types_.find(name);
    const TType& got = inferred[static_cast<std::size_t>(k)];
    if (it == types_.end() || !it->second.known || it->second.symbolic || !got.known || got.dims == it->second.dims)
      continue;
    fail("the file records output '" + name + "' as " + dims_text(it->second.dims) + " but its inputs give " +
         dims_text(got.dims));
  }
}

}  // namespace go::detail::onnx_import
