#pragma once
// The workload zoo: Transformer-XL, transformer_xl<L> (see go/graph/zoo.hpp for its sizes and
// defaults).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "go/graph/graph.hpp"
#include "go/graph/op_kind.hpp"
#include "go/graph/zoo/common.hpp"

namespace go::detail::zoo {

// Names: embedding/..., layer<l>/..., softmax/...
inline OpGraph transformer_xl(const Sizes& z) {
  const std::int64_t B = z.batch, L = z.number, S = z.seq, D = z.hidden, G = z.segments, V = z.vocab;
  const std::int64_t heads = std::max<std::int64_t>(1, D / 64), F = 4 * D, K = 2 * S;  // keys: memory + segment
  Net n(z.name, B, z.max_ops);
  T emb = n.variable("embedding/table", {V, D});
  T pos_seq = n.input("embedding/positions", {K});
  T pos_emb = n.op1("embedding/sinusoid", OpKind::elementwise, {pos_seq}, {K, D}, 4.0 * static_cast<double>(K * D));
  struct Layer {
    T qkv, r_net, r_w_bias, r_r_bias, out, ln1, ff1, ff1_b, ff2, ff2_b, ln2, mem0;
  };
  std::vector<Layer> ws;
  for (std::int64_t l = 0; l < L; ++l) {
    const std::string p = "layer" + str(l);
    ws.push_back(Layer{n.variable(p + "/qkv", {D, 3 * D}), n.variable(p + "/r_net", {D, D}),
                       n.variable(p + "/r_w_bias", {D}), n.variable(p + "/r_r_bias", {D}),
                       n.variable(p + "/out", {D, D}), n.variable(p + "/ln1", {2 * D}), n.variable(p + "/ff1", {D, F}),
                       n.variable(p + "/ff1_bias", {F}), n.variable(p + "/ff2", {F, D}),
                       n.variable(p + "/ff2_bias", {D}), n.variable(p + "/ln2", {2 * D}),
                       n.input(p + "/memory0", {B, S, D})});
  }
  T proj = n.variable("softmax/kernel", {D, V});
  T proj_b = n.variable("softmax/bias", {V});
  std::vector<T> mem;
  for (const Layer& w : ws) mem.push_back(w.mem0);
  const double att = 2.0 * static_cast<double>(B * S * K * D);
  T tokens = n.input("embedding/tokens", {G, B, S});
  auto embedded = n.unstack("embedding/unstack", n.op1("embedding/lookup", OpKind::gather, {emb, tokens}, {G, B, S, D}, 0));
  auto labels = n.unstack("softmax/labels", n.input("softmax/targets", {G, B, S}));
  std::vector<T> losses;
  for (std::int64_t g = 0; g < G; ++g) {
    const std::string sg = "/seg" + str(g);
    T h = n.dropout("embedding" + sg + "/dropout", embedded[at(g)]);
    T r = n.dropout("embedding" + sg + "/pos_dropout", pos_emb);
    for (std::int64_t l = 0; l < L; ++l) {
      const std::string p = "layer" + str(l) + sg;
      const Layer& w = ws[at(l)];
      T ctx = n.concat(p + "/with_memory", {mem[at(l)], h}, 1);  // [B, 2S, D]
      T qkv = n.matmul(p + "/qkv", ctx, w.qkv);
      auto parts = n.split(p + "/split_qkv", qkv, 3);
      T q = n.slice(p + "/query", parts[0], {B, S, D});  // queries: the segment's own positions
      T rk = n.matmul(p + "/r_head_k", r, w.r_net);
      T rwq = n.op1(p + "/rw_query", OpKind::add, {q, w.r_w_bias}, q.shape, numel(q.shape));
      T ac = n.op1(p + "/content_score", OpKind::matmul, {rwq, parts[1]}, {B, heads, S, K}, att);
      T rrq = n.op1(p + "/rr_query", OpKind::add, {q, w.r_r_bias}, q.shape, numel(q.shape));
      T bd = n.op1(p + "/position_score", OpKind::matmul, {rrq, rk}, {B, heads, S, K}, att);
      T bds = n.slice(p + "/rel_shift", bd, bd.shape);
      T sc = n.add(p + "/score", ac, bds);
      T scaled = n.ew(p + "/scale", OpKind::mul, {sc});
      T masked = n.ew(p + "/mask", OpKind::elementwise, {scaled});
      T prob = n.ew(p + "/softmax", OpKind::softmax, {masked}, 5);
      T pd = n.dropout(p + "/attention_dropout", prob);
      T av = n.op1(p + "/attend", OpKind::matmul, {pd, parts[2]}, {B, S, D}, att);
      T o = n.matmul(p + "/out", av, w.out);
      T od = n.dropout(p + "/out_dropout", o);
      T n1 = n.layer_norm(p + "/ln1", n.add(p + "/residual1", od, h), w.ln1);
      T f1 = n.matmul(p + "/ff1", n1, w.ff1, &w.ff1_b);
      T a1 = n.dropout(p + "/ff_dropout1", n.relu(p + "/relu", f1));
      T f2 = n.dropout(p + "/ff_dropout2", n.matmul(p + "/ff2", a1, w.ff2, &w.ff2_b));
      T n2 = n.layer_norm(p + "/ln2", n.add(p + "/residual2", f2, n1), w.ln2);
      mem[at(l)] = h;  // the next segment's memory: this segment's input to the layer
      h = n2;
    }
    T hd = n.dropout("softmax" + sg + "/dropout", h);
    T logits = n.matmul("softmax" + sg + "/logits", hd, proj, &proj_b);
    losses.push_back(n.xent("softmax" + sg + "/xent", logits, labels[at(g)]));
  }
  n.sum("softmax/loss", losses);
  return n.build();
}

}  // namespace go::detail::zoo
