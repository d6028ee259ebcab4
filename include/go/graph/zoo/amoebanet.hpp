#pragma once
// The workload zoo: AmoebaNet-A, amoebanet (see go/graph/zoo.hpp for its sizes and defaults).
//
// AMOEBANET-A CELLS (hidden states 0 = this cell's input after relu/1x1/bn, 1 = the previous cell's
// output matched to it; each of the 5 blocks adds op(left) + op(right) as a new state; the cell
// output concatenates the states no block used, reduced to the output size where they differ):
//   normal:    (avg3 s0, max3 s0) (sep3 s1, id s1) (id s0, avg3 s1) (sep3 s0, sep5 s2) (avg3 s5, sep3 s0)
//   reduction: (sep3 s1, avg3 s0) (max3 s0, sep7 s2) (max3 s1, max3 s0) (sep3 s4, 1x7_7x1 s0)
//              (avg3 s1, sep7 s0)          (ops on states 0 and 1 stride 2 in a reduction cell)
//   sepK = 2 x (relu, KxK depthwise, 1x1 pointwise, batchnorm); 1x7_7x1 = bottleneck to F/4,
//   1x7 and 7x1 convs, back to F; pools are 3x3 SAME (+1x1 conv when the width differs).
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "go/graph/graph.hpp"
#include "go/graph/op_kind.hpp"
#include "go/graph/zoo/common.hpp"

namespace go::detail::zoo {

enum class CellOp { avg3, max3, sep3, sep5, sep7, none, conv1x7_7x1 };
struct CellSpec {
  std::array<CellOp, 10> ops;
  std::array<int, 10> inputs;  // hidden state each op reads
  std::array<int, 7> used;     // states some block reads (the others make the cell output)
};
// tensorflow/tpu models/official/amoeba_net/model_specs.py, 'amoeba_net_a'.
inline constexpr CellSpec kAmoebaNormal{
    {CellOp::avg3, CellOp::max3, CellOp::sep3, CellOp::none, CellOp::none, CellOp::avg3, CellOp::sep3, CellOp::sep5,
     CellOp::avg3, CellOp::sep3},
    {0, 0, 1, 1, 0, 1, 0, 2, 5, 0},
    {1, 0, 1, 0, 0, 1, 0}};
inline constexpr CellSpec kAmoebaReduction{
    {CellOp::sep3, CellOp::avg3, CellOp::max3, CellOp::sep7, CellOp::max3, CellOp::max3, CellOp::sep3,
     CellOp::conv1x7_7x1, CellOp::avg3, CellOp::sep7},
    {1, 0, 0, 2, 1, 0, 4, 0, 1, 0},
    {1, 1, 0, 0, 0, 0, 0}};

// Names: stem/..., stem_cell<i>/..., cell<i>/..., reduction_cell<i>/..., aux/..., head/...; inside a
// cell: base/..., comb<b>/{left,right,add}/..., output/...
inline OpGraph amoebanet(const Sizes& z) {
  const std::int64_t B = z.batch, S = z.image, F = z.hidden, N = z.depth, V = z.vocab;
  Net n(z.name, B, z.max_ops);
  auto bn = [&](const std::string& p, const T& x) { return n.batch_norm(p, x); };
  auto conv1x1 = [&](const std::string& p, const T& x, std::int64_t c, std::int64_t s = 1) {
    return n.conv(p, x, c, 1, 1, s, s, -1, -1);
  };
  auto factorized_reduction = [&](const std::string& p, const T& x, std::int64_t c, std::int64_t stride) {
    if (stride == 1) return bn(p + "/bn", conv1x1(p + "/conv", x, c));
    T p1 = n.pool(p + "/path1/pool", OpKind::avg_pool, x, 1, 2, 0);
    p1 = conv1x1(p + "/path1/conv", p1, c / 2);
    T p2 = n.op1(p + "/path2/pad", OpKind::pad, {x}, {B, x.shape[1], x.shape[2] + 1, x.shape[3] + 1}, 0);
    p2 = n.slice(p + "/path2/shift", p2, x.shape);
    p2 = n.pool(p + "/path2/pool", OpKind::avg_pool, p2, 1, 2, 0);
    p2 = conv1x1(p + "/path2/conv", p2, c - c / 2);
    return bn(p + "/bn", n.concat(p + "/concat", {p1, p2}, 1));
  };
  auto apply = [&](const std::string& p, T x, CellOp op, std::int64_t stride, std::int64_t fs) {
    const std::int64_t cin = x.shape[1];
    switch (op) {
      case CellOp::sep3:
      case CellOp::sep5:
      case CellOp::sep7: {
        const std::int64_t k = op == CellOp::sep3 ? 3 : op == CellOp::sep5 ? 5 : 7;
        for (int l = 1; l <= 2; ++l) {
          const std::string q = p + "/sep" + std::to_string(l);
          x = n.relu(q + "/relu", x);
          x = n.conv(q + "/depthwise", x, x.shape[1], k, k, stride, stride, -1, -1, x.shape[1]);
          x = bn(q + "/bn", conv1x1(q + "/pointwise", x, fs));
          stride = 1;
        }
        break;
      }
      case CellOp::avg3:
      case CellOp::max3:
        x = n.pool(p + "/pool", op == CellOp::avg3 ? OpKind::avg_pool : OpKind::max_pool, x, 3, stride, -1);
        if (cin != fs) x = bn(p + "/bn", conv1x1(p + "/1x1", x, fs));
        break;
      case CellOp::none:
        if (stride > 1 || cin != fs) x = bn(p + "/bn", conv1x1(p + "/1x1", n.relu(p + "/relu", x), fs, stride));
        return x;  // no drop-path on identities
      case CellOp::conv1x7_7x1: {  // bottleneck to F/4 (none when F/4 < 1)
        const std::int64_t r = fs / 4 >= 1 ? fs / 4 : fs;
        if (r != fs) x = bn(p + "/pre_bn", conv1x1(p + "/pre_1x1", n.relu(p + "/relu", x), r));
        x = bn(p + "/bn_1x7", n.conv(p + "/1x7", n.relu(p + "/relu_1x7", x), r, 1, 7, 1, stride, -1, -1));
        x = bn(p + "/bn_7x1", n.conv(p + "/7x1", n.relu(p + "/relu_7x1", x), r, 7, 1, stride, 1, -1, -1));
        if (r != fs) x = bn(p + "/post_bn", conv1x1(p + "/post_1x1", n.relu(p + "/relu_post", x), fs));
        break;
      }
    }
    return n.dropout(p + "/drop_path", x);
  };
  auto cell = [&](const std::string& p, const CellSpec& spec, const T& in, const std::optional<T>& prev_layer,
                  std::int64_t fs, std::int64_t stride) {
    T prev = prev_layer ? *prev_layer : in;
    if (prev_layer && prev.shape[2] != in.shape[2])
      prev = factorized_reduction(p + "/base/prev_reduce", n.relu(p + "/base/prev_relu", prev), fs, 2);
    else if (prev_layer && prev.shape[1] != fs)
      prev = bn(p + "/base/prev_bn", conv1x1(p + "/base/prev_1x1", n.relu(p + "/base/prev_relu", prev), fs));
    T cur = bn(p + "/base/bn", conv1x1(p + "/base/1x1", n.relu(p + "/base/relu", in), fs));
    std::vector<T> states{cur, prev};
    for (int b = 0; b < 5; ++b) {
      const std::string q = p + "/comb" + std::to_string(b);
      const int li = spec.inputs[at(2 * b)], ri = spec.inputs[at(2 * b + 1)];
      T left = apply(q + "/left", states[at(li)], spec.ops[at(2 * b)], li < 2 ? stride : 1, fs);
      T right = apply(q + "/right", states[at(ri)], spec.ops[at(2 * b + 1)], ri < 2 ? stride : 1, fs);
      states.push_back(n.add(q + "/add", left, right));
    }
    const T last = states.back();
    std::vector<T> outs;
    for (std::size_t i = 0; i < states.size(); ++i) {
      if (spec.used[i]) continue;
      T s = states[i];
      if (s.shape[1] != last.shape[1] || s.shape[2] != last.shape[2])
        s = factorized_reduction(p + "/output/reduce" + std::to_string(i), s, last.shape[1],
                                 s.shape[2] != last.shape[2] ? 2 : 1);
      outs.push_back(s);
    }
    return n.concat(p + "/output/concat", outs, 1);
  };
  T x = n.input("stem/images", {B, 3, S, S});
  T labels = n.input("head/labels", {B});
  x = bn("stem/conv0/bn", n.conv("stem/conv0/conv", x, 32, 3, 3, 2, 2, 0, 0));
  std::vector<std::optional<T>> outs{std::nullopt, x};
  double scaling = 0.25;  // two stem reduction cells at F/4 and F/2
  for (int c = 0; c < 2; ++c) {
    x = cell("stem_cell" + std::to_string(c), kAmoebaReduction, x, outs[outs.size() - 2],
             static_cast<std::int64_t>(static_cast<double>(F) * scaling), 2);
    outs.push_back(x);
    scaling *= 2;
  }
  const std::int64_t cells = 3 * N, red1 = cells / 3, red2 = 2 * cells / 3;
  std::optional<T> aux_loss;
  scaling = 1.0;
  for (std::int64_t c = 0; c < cells; ++c) {
    if (c == red1 || c == red2) {
      scaling *= 2;
      x = cell("reduction_cell" + str(c == red1 ? 0 : 1), kAmoebaReduction, x, outs[outs.size() - 2],
               static_cast<std::int64_t>(static_cast<double>(F) * scaling), 2);
      outs.push_back(x);
    }
    x = cell("cell" + str(c), kAmoebaNormal, x, outs[outs.size() - 2],
             static_cast<std::int64_t>(static_cast<double>(F) * scaling), 1);
    outs.push_back(x);
    if (c == red2 - 1) {  // auxiliary head before the second reduction
      T a = n.pool("aux/pool", OpKind::avg_pool, n.relu("aux/relu", x), 5, 3, 0);
      a = n.relu("aux/relu0", bn("aux/bn0", conv1x1("aux/proj", a, 128)));
      a = n.relu("aux/relu1", bn("aux/bn1", n.conv("aux/conv", a, 768, a.shape[2], a.shape[3], 1, 1, 0, 0)));
      a = n.fc("aux/fc", n.global_pool("aux/flatten", a), V);
      aux_loss = n.xent("aux/xent", a, labels);
    }
  }
  T y = n.global_pool("head/global_pool", n.relu("head/relu", x));
  y = n.fc("head/fc", n.dropout("head/dropout", y), V);
  std::vector<T> losses{n.xent("head/xent", y, labels)};
  if (aux_loss) losses.push_back(*aux_loss);
  n.sum("head/loss", losses);
  return n.build();
}

}  // namespace go::detail::zoo
