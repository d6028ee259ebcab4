#pragma once
// The workload zoo: the recurrent models, rnnlm<L> and gnmt<L> (see go/graph/zoo.hpp for their
// sizes and defaults), built from one LSTM cell.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "go/graph/graph.hpp"
#include "go/graph/op_kind.hpp"
#include "go/graph/zoo/common.hpp"

namespace go::detail::zoo {

// One LSTM step (TF BasicLSTMCell in a DropoutWrapper, forget bias 1, gates fused into one matmul):
// returns {h, c}. With `mask`, finished sequences keep their state (dynamic_rnn with lengths); the
// last step masks no cell state nobody reads (every forward output feeds the loss, see below).
inline std::pair<T, T> lstm_cell(Net& n, const std::string& p, const T& x, const T& h, const T& c, const T& w,
                                 const T& bias, const T* mask, bool last = false) {
  T xd = n.dropout(p + "/dropout", x);
  T xh = n.concat(p + "/concat", {xd, h}, -1);
  T gates = n.matmul(p + "/gates", xh, w, &bias);
  auto g = n.split(p + "/split", gates, 4);
  T i = n.ew(p + "/input_gate", OpKind::sigmoid, {g[0]}, 4);
  T j = n.ew(p + "/candidate", OpKind::tanh, {g[1]}, 4);
  T fb = n.ew(p + "/forget_bias", OpKind::add, {g[2]});
  T f = n.ew(p + "/forget_gate", OpKind::sigmoid, {fb}, 4);
  T o = n.ew(p + "/output_gate", OpKind::sigmoid, {g[3]}, 4);
  T fc = n.ew(p + "/forget", OpKind::mul, {c, f});
  T ij = n.ew(p + "/write", OpKind::mul, {i, j});
  T c2 = n.add(p + "/cell", fc, ij);
  T tc = n.ew(p + "/cell_tanh", OpKind::tanh, {c2}, 4);
  T h2 = n.ew(p + "/hidden", OpKind::mul, {tc, o});
  if (mask) {
    h2 = n.ew(p + "/mask_hidden", OpKind::elementwise, {h2, h, *mask});
    if (!last) c2 = n.ew(p + "/mask_cell", OpKind::elementwise, {c2, c, *mask});
  }
  return {h2, c2};
}

// Names: embedding/..., lstm<l>/..., softmax/...
inline OpGraph rnnlm(const Sizes& z) {
  const std::int64_t B = z.batch, L = z.number, S = z.seq, H = z.hidden, V = z.vocab;
  Net n(z.name, B, z.max_ops);
  T tokens = n.input("embedding/tokens", {S, B});
  T emb = n.variable("embedding/table", {V, H});
  std::vector<T> w, bias, h, c;
  for (std::int64_t l = 0; l < L; ++l) {
    const std::string p = "lstm" + str(l);
    w.push_back(n.variable(p + "/kernel", {2 * H, 4 * H}));
    bias.push_back(n.variable(p + "/bias", {4 * H}));
    h.push_back(n.input(p + "/h0", {B, H}));
    c.push_back(n.input(p + "/c0", {B, H}));
  }
  T proj = n.variable("softmax/kernel", {H, V});
  T proj_b = n.variable("softmax/bias", {V});
  T labels = n.input("softmax/labels", {S, B});
  // one lookup for the whole sequence, unstacked into steps; one softmax over the stacked outputs
  auto xs = n.unstack("embedding/unstack", n.op1("embedding/lookup", OpKind::gather, {emb, tokens}, {S, B, H}, 0));
  for (std::int64_t t = 0; t < S; ++t) {
    T x = xs[at(t)];
    for (std::int64_t l = 0; l < L; ++l) {
      auto [h2, c2] = lstm_cell(n, "lstm" + str(l) + "/t" + str(t), x, h[at(l)], c[at(l)], w[at(l)], bias[at(l)], nullptr);
      h[at(l)] = h2;
      c[at(l)] = c2;
      x = h2;
    }
    xs[at(t)] = x;
  }
  T out = n.dropout("softmax/dropout", n.stack("softmax/stack", xs));
  T logits = n.matmul("softmax/logits", out, proj, &proj_b);
  n.sum("softmax/loss", {n.xent("softmax/xent", logits, labels)});
  return n.build();
}

// Names: encoder/{embedding,l0_fw,l0_bw,l<i>,memory}/..., decoder/{embedding,attention,l<i>,softmax}/...
inline OpGraph gnmt(const Sizes& z) {
  const std::int64_t B = z.batch, L = z.number, S = z.seq, H = z.hidden, V = z.vocab;
  Net n(z.name, B, z.max_ops);
  T src = n.input("encoder/embedding/source", {S, B});
  T src_mask = n.input("encoder/embedding/source_mask", {B, S});
  T emb_src = n.variable("encoder/embedding/table", {V, H});
  auto xs = n.unstack("encoder/embedding/unstack",
                      n.op1("encoder/embedding/lookup", OpKind::gather, {emb_src, src}, {S, B, H}, 0));
  auto run_layer = [&](const std::string& p, const std::vector<T>& in, bool reverse, std::int64_t in_width) {
    T w = n.variable(p + "/kernel", {in_width + H, 4 * H});
    T bb = n.variable(p + "/bias", {4 * H});
    T h = n.input(p + "/h0", {B, H}), c = n.input(p + "/c0", {B, H});
    std::vector<T> out(in.size());
    for (std::size_t k = 0; k < in.size(); ++k) {
      const std::size_t t = reverse ? in.size() - 1 - k : k;
      auto [h2, c2] = lstm_cell(n, p + "/t" + std::to_string(t), in[t], h, c, w, bb, &src_mask, k + 1 == in.size());
      h = h2;
      c = c2;
      out[t] = h2;
    }
    return out;
  };
  // encoder: bidirectional layer 0, layer 1 reads both directions, residual connections from layer 2
  auto fw = run_layer("encoder/l0_fw", xs, false, H);
  auto bw = run_layer("encoder/l0_bw", xs, true, H);
  std::vector<T> enc(at(S));
  for (std::int64_t t = 0; t < S; ++t)
    enc[at(t)] = n.concat("encoder/l0/t" + str(t) + "/bidir", {fw[at(t)], bw[at(t)]}, -1);
  if (L >= 2) enc = run_layer("encoder/l1", enc, false, 2 * H);
  for (std::int64_t l = 2; l < L; ++l) {
    auto next = run_layer("encoder/l" + str(l), enc, false, H);
    for (std::int64_t t = 0; t < S; ++t)
      next[at(t)] = n.add("encoder/l" + str(l) + "/t" + str(t) + "/residual", next[at(t)], enc[at(t)]);
    enc = std::move(next);
  }
  T memory = n.concat("encoder/memory", enc, 0);  // [S*B, W] stacked over time
  const std::int64_t mw = memory.shape.back();   // 2H when L == 1, else H
  memory.shape = {S, B, mw};
  // normalized Bahdanau attention, queried by the bottom decoder layer (GNMT)
  T wm = n.variable("decoder/attention/memory_kernel", {mw, H});
  T wq = n.variable("decoder/attention/query_kernel", {H, H});
  T v = n.variable("decoder/attention/v", {H + 1});  // v and its norm scale g
  T keys = n.matmul("decoder/attention/keys", memory, wm);  // [S, B, H]
  T tgt = n.input("decoder/embedding/target", {S, B});
  T tgt_mask = n.input("decoder/embedding/target_mask", {B, S});
  T emb_tgt = n.variable("decoder/embedding/table", {V, H});
  std::vector<T> dw, db, h, c;
  for (std::int64_t l = 0; l < L; ++l) {
    const std::string p = "decoder/l" + str(l);
    dw.push_back(n.variable(p + "/kernel", {H + mw + H, 4 * H}));  // [input, context, h]
    db.push_back(n.variable(p + "/bias", {4 * H}));
    h.push_back(n.input(p + "/h0", {B, H}));
    c.push_back(n.input(p + "/c0", {B, H}));
  }
  T proj = n.variable("decoder/softmax/kernel", {H, V});
  T labels = n.input("decoder/softmax/labels", {S, B});
  T context = n.input("decoder/attention/context0", {B, mw});
  auto ys = n.unstack("decoder/embedding/unstack",
                      n.op1("decoder/embedding/lookup", OpKind::gather, {emb_tgt, tgt}, {S, B, H}, 0));
  for (std::int64_t t = 0; t < S; ++t) {
    const std::string ts = "/t" + str(t);
    T x = ys[at(t)];
    T in0 = n.concat("decoder/l0" + ts + "/with_context", {x, context}, -1);
    auto [h0, c0] = lstm_cell(n, "decoder/l0" + ts, in0, h[0], c[0], dw[0], db[0], &tgt_mask, t + 1 == S);
    h[0] = h0;
    c[0] = c0;
    const std::string ap = "decoder/attention" + ts;
    const double sbh = static_cast<double>(S * B * H);
    T q = n.matmul(ap + "/query", h0, wq);
    T e = n.op1(ap + "/add_keys", OpKind::add, {keys, q}, {S, B, H}, sbh);
    T th = n.ew(ap + "/tanh", OpKind::tanh, {e}, 4);
    T sv = n.op1(ap + "/scale_v", OpKind::mul, {th, v}, {S, B, H}, sbh);
    T score = n.op1(ap + "/score", OpKind::reduce, {sv}, {B, S}, sbh);
    T masked = n.ew(ap + "/mask", OpKind::elementwise, {score, src_mask});
    T probs = n.ew(ap + "/softmax", OpKind::softmax, {masked}, 5);
    context = n.op1(ap + "/context", OpKind::matmul, {probs, memory}, {B, mw}, 2.0 * static_cast<double>(S * B * mw));
    x = h0;
    for (std::int64_t l = 1; l < L; ++l) {
      const std::string p = "decoder/l" + str(l) + ts;
      T in = n.concat(p + "/with_context", {x, context}, -1);
      auto [h2, c2] = lstm_cell(n, p, in, h[at(l)], c[at(l)], dw[at(l)], db[at(l)], &tgt_mask, t + 1 == S);
      h[at(l)] = h2;
      c[at(l)] = c2;
      x = l >= 2 ? n.add(p + "/residual", h2, x) : h2;
    }
    ys[at(t)] = x;
  }
  // tensorflow/nmt: the output projection and the loss run once over the stacked decoder outputs
  T logits = n.matmul("decoder/softmax/logits", n.stack("decoder/softmax/stack", ys), proj);
  T xe = n.xent("decoder/softmax/xent", logits, labels);
  n.sum("decoder/softmax/loss", {n.ew("decoder/softmax/weights", OpKind::mul, {xe, tgt_mask})});
  return n.build();
}

}  // namespace go::detail::zoo
