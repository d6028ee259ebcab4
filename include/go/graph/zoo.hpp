#pragma once
// The workload zoo: generators of op-level forward graphs of the paper's recurrent, attention and
// convolutional workloads, built from first principles (shapes, FLOPs, weights) the way TensorFlow
// lays them out: recurrent layers unrolled over time, one op per gate/elementwise step, and weights
// shared across time steps held by `constant` variable ops (param_bytes = the weight) that every
// step reads, so a placement pays to move weights away from their variable. Sizes are options, so
// graphs scale to tens of thousands of ops (make_training_graph roughly triples them).
//
//   rnnlm           embedding + L-layer LSTM language model unrolled over seq steps + softmax
//   gnmt            encoder (bidirectional first layer, residual stacks) + attention decoder
//   transformer_xl  L layers over `segments` segments with a cached memory segment per layer
//   wavenet         stacks of dilated causal gated convolutions with residual and skip paths
//
// load_graph("zoo:<name>") builds one with its defaults.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "go/core/error.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/op_kind.hpp"

namespace go {

struct ZooOptions {
  std::int64_t batch = 0;     // 0: the model's default
  std::int64_t layers = 0;    // recurrent/attention layers, or WaveNet stacks
  std::int64_t seq = 0;       // unrolled time steps, or tokens per segment
  std::int64_t hidden = 0;    // hidden / model width
  std::int64_t segments = 0;  // Transformer-XL segments
};

inline std::vector<std::string> zoo_names() { return {"rnnlm", "gnmt", "transformer_xl", "wavenet"}; }

namespace detail::zoo {

using Shape = std::vector<std::int64_t>;
struct T {  // a tensor handle: (op index, output), its shape
  OpId op = -1;
  std::int32_t out = 0;
  Shape shape;
};

inline double numel(const Shape& s) {
  double n = 1;
  for (auto d : s) n *= static_cast<double>(d);
  return n;
}

class Net {
 public:
  explicit Net(std::string name) {
    GraphInfo info;
    info.name = name;
    info.source = "zoo:" + name;
    info.format = "zoo";
    b_ = GraphBuilder(std::move(info));
  }
  GraphInfo& info() { return b_.info(); }

  std::vector<T> op(const std::string& name, OpKind kind, const std::vector<T>& ins, const std::vector<Shape>& outs,
                    double flops, std::int64_t param_bytes = 0) {
    OpSpec s;
    s.name = name;
    s.kind = kind;
    s.flops = flops;
    s.param_bytes = param_bytes;
    for (const T& t : ins) s.inputs.push_back(TensorRef{t.op, t.out});
    for (const Shape& sh : outs) {
      TensorSpec ts;
      ts.shape = sh;
      s.outputs.push_back(ts);
    }
    const OpId id = b_.add_op(std::move(s));
    std::vector<T> r;
    for (std::size_t k = 0; k < outs.size(); ++k) r.push_back(T{id, static_cast<std::int32_t>(k), outs[k]});
    return r;
  }
  T op1(const std::string& name, OpKind kind, const std::vector<T>& ins, Shape out, double flops, std::int64_t pb = 0) {
    return op(name, kind, ins, {std::move(out)}, flops, pb)[0];
  }
  T input(const std::string& name, Shape s) { return op1(name, OpKind::input, {}, std::move(s), 0); }
  // A weight variable: owns the parameter, its output is the weight tensor.
  T variable(const std::string& name, Shape s) {
    const auto bytes = static_cast<std::int64_t>(numel(s)) * 4;
    return op1(name, OpKind::constant, {}, std::move(s), 0, bytes);
  }
  // y = x W (+ b) for x [..., K], W [K, N]
  T matmul(const std::string& name, const T& x, const T& w, const T* bias = nullptr) {
    Shape out = x.shape;
    out.back() = w.shape.back();
    std::vector<T> ins{x, w};
    if (bias) ins.push_back(*bias);
    const double flops = 2 * numel(out) * static_cast<double>(x.shape.back()) + (bias ? numel(out) : 0);
    return op1(name, OpKind::matmul, ins, out, flops);
  }
  T ew(const std::string& name, OpKind kind, const std::vector<T>& ins, double per_elem = 1) {
    return op1(name, kind, ins, ins[0].shape, per_elem * numel(ins[0].shape));
  }
  T concat(const std::string& name, const std::vector<T>& ins, int axis) {
    Shape out = ins[0].shape;
    const auto a = static_cast<std::size_t>(axis < 0 ? axis + static_cast<int>(out.size()) : axis);
    out[a] = 0;
    for (const T& t : ins) out[a] += t.shape[a];
    return op1(name, OpKind::concat, ins, out, 0);
  }
  std::vector<T> split(const std::string& name, const T& x, int parts) {
    Shape s = x.shape;
    s.back() /= parts;
    return op(name, OpKind::split, {x}, std::vector<Shape>(static_cast<std::size_t>(parts), s), 0);
  }
  T layer_norm(const std::string& name, const T& x, const T& gamma) {
    return op1(name, OpKind::layer_norm, {x, gamma}, x.shape, 8 * numel(x.shape));
  }
  // One LSTM cell step (fused gate matmul, TF BasicLSTMCell): returns {h, c}.
  std::pair<T, T> lstm_cell(const std::string& p, const T& x, const T& h, const T& c, const T& w, const T& bias) {
    T xh = concat(p + "/concat", {x, h}, -1);
    T gates = matmul(p + "/gates", xh, w, &bias);
    auto g = split(p + "/split", gates, 4);
    T i = ew(p + "/input_gate", OpKind::sigmoid, {g[0]}, 4);
    T j = ew(p + "/candidate", OpKind::tanh, {g[1]}, 4);
    T f = ew(p + "/forget_gate", OpKind::sigmoid, {g[2]}, 4);
    T o = ew(p + "/output_gate", OpKind::sigmoid, {g[3]}, 4);
    T fc = ew(p + "/forget", OpKind::mul, {f, c});
    T ij = ew(p + "/write", OpKind::mul, {i, j});
    T c2 = ew(p + "/cell", OpKind::add, {fc, ij});
    T tc = ew(p + "/cell_tanh", OpKind::tanh, {c2}, 4);
    T h2 = ew(p + "/hidden", OpKind::mul, {o, tc});
    return {h2, c2};
  }
  OpGraph build() { return b_.build(); }

 private:
  GraphBuilder b_;
};

inline std::int64_t pick(std::int64_t v, std::int64_t def) { return v > 0 ? v : def; }

inline OpGraph rnnlm(const ZooOptions& o) {
  const auto B = pick(o.batch, 64), L = pick(o.layers, 2), S = pick(o.seq, 40), H = pick(o.hidden, 1024);
  const std::int64_t V = 32000;
  Net n("rnnlm");
  n.info().batch = B;
  T tokens = n.input("tokens", {S, B});
  T emb = n.variable("embedding", {V, H});
  std::vector<T> w, bias;
  for (std::int64_t l = 0; l < L; ++l) {
    w.push_back(n.variable("lstm" + std::to_string(l) + "/kernel", {2 * H, 4 * H}));
    bias.push_back(n.variable("lstm" + std::to_string(l) + "/bias", {4 * H}));
  }
  T proj = n.variable("softmax/kernel", {H, V});
  T proj_b = n.variable("softmax/bias", {V});
  std::vector<T> h, c;
  for (std::int64_t l = 0; l < L; ++l) {
    h.push_back(n.input("h0_" + std::to_string(l), {B, H}));
    c.push_back(n.input("c0_" + std::to_string(l), {B, H}));
  }
  std::vector<T> losses;
  for (std::int64_t t = 0; t < S; ++t) {
    const std::string ts = "t" + std::to_string(t);
    T x = n.op1(ts + "/embed", OpKind::gather, {emb, tokens}, {B, H}, 0);
    for (std::int64_t l = 0; l < L; ++l) {
      auto [h2, c2] = n.lstm_cell(ts + "/lstm" + std::to_string(l), x, h[static_cast<std::size_t>(l)],
                                  c[static_cast<std::size_t>(l)], w[static_cast<std::size_t>(l)], bias[static_cast<std::size_t>(l)]);
      h[static_cast<std::size_t>(l)] = h2;
      c[static_cast<std::size_t>(l)] = c2;
      x = h2;
    }
    T logits = n.matmul(ts + "/logits", x, proj, &proj_b);
    losses.push_back(n.op1(ts + "/softmax_xent", OpKind::softmax, {logits}, {B}, 5 * numel(logits.shape)));
  }
  n.op1("loss_sum", OpKind::add, losses, {}, static_cast<double>(S * B));
  return n.build();
}

inline OpGraph gnmt(const ZooOptions& o) {
  const auto B = pick(o.batch, 128), L = pick(o.layers, 4), S = pick(o.seq, 40), H = pick(o.hidden, 1024);
  const std::int64_t V = 32000;
  Net n("gnmt");
  n.info().batch = B;
  T src = n.input("source", {S, B});
  T tgt = n.input("target", {S, B});
  T emb_src = n.variable("encoder/embedding", {V, H});
  T emb_tgt = n.variable("decoder/embedding", {V, H});
  auto zeros = [&](const std::string& name) { return n.input(name, {B, H}); };
  // encoder: layer 0 bidirectional (forward + backward over time), then unidirectional residual layers
  std::vector<T> xs;
  for (std::int64_t t = 0; t < S; ++t)
    xs.push_back(n.op1("encoder/t" + std::to_string(t) + "/embed", OpKind::gather, {emb_src, src}, {B, H}, 0));
  auto run_layer = [&](const std::string& p, const std::vector<T>& in, bool reverse, std::int64_t in_width) {
    T w = n.variable(p + "/kernel", {in_width + H, 4 * H});
    T bb = n.variable(p + "/bias", {4 * H});
    T h = zeros(p + "/h0"), c = zeros(p + "/c0");
    std::vector<T> out(in.size());
    for (std::size_t k = 0; k < in.size(); ++k) {
      const std::size_t t = reverse ? in.size() - 1 - k : k;
      auto [h2, c2] = n.lstm_cell(p + "/t" + std::to_string(t), in[t], h, c, w, bb);
      h = h2;
      c = c2;
      out[t] = h2;
    }
    return out;
  };
  auto fw = run_layer("encoder/l0_fw", xs, false, H);
  auto bw = run_layer("encoder/l0_bw", xs, true, H);
  std::vector<T> enc(static_cast<std::size_t>(S));
  for (std::int64_t t = 0; t < S; ++t)
    enc[static_cast<std::size_t>(t)] = n.concat("encoder/l0/t" + std::to_string(t) + "/bidir",
                                                {fw[static_cast<std::size_t>(t)], bw[static_cast<std::size_t>(t)]}, -1);
  enc = run_layer("encoder/l1", enc, false, 2 * H);
  for (std::int64_t l = 2; l < L; ++l) {
    auto next = run_layer("encoder/l" + std::to_string(l), enc, false, H);
    for (std::int64_t t = 0; t < S; ++t)
      next[static_cast<std::size_t>(t)] = n.ew("encoder/l" + std::to_string(l) + "/t" + std::to_string(t) + "/residual",
                                               OpKind::add, {next[static_cast<std::size_t>(t)], enc[static_cast<std::size_t>(t)]});
    enc = std::move(next);
  }
  T memory = n.concat("encoder/memory", enc, 0);  // [S*B, H] stacked over time
  memory.shape = {S, B, H};
  // decoder with Bahdanau-style attention fed from the first layer
  T wq = n.variable("decoder/attention/query", {H, H});
  std::vector<T> dw, db;
  for (std::int64_t l = 0; l < L; ++l) {
    dw.push_back(n.variable("decoder/l" + std::to_string(l) + "/kernel", {3 * H, 4 * H}));  // [x, context, h]
    db.push_back(n.variable("decoder/l" + std::to_string(l) + "/bias", {4 * H}));
  }
  T proj = n.variable("decoder/softmax/kernel", {H, V});
  std::vector<T> h, c;
  for (std::int64_t l = 0; l < L; ++l) {
    h.push_back(zeros("decoder/l" + std::to_string(l) + "/h0"));
    c.push_back(zeros("decoder/l" + std::to_string(l) + "/c0"));
  }
  std::vector<T> losses;
  for (std::int64_t t = 0; t < S; ++t) {
    const std::string p = "decoder/t" + std::to_string(t);
    T x = n.op1(p + "/embed", OpKind::gather, {emb_tgt, tgt}, {B, H}, 0);
    T q = n.matmul(p + "/attention/query", h[0], wq);
    T scores = n.op1(p + "/attention/scores", OpKind::matmul, {q, memory}, {B, S}, 2.0 * static_cast<double>(B * S * H));
    T probs = n.ew(p + "/attention/softmax", OpKind::softmax, {scores}, 5);
    T context = n.op1(p + "/attention/context", OpKind::matmul, {probs, memory}, {B, H}, 2.0 * static_cast<double>(B * S * H));
    for (std::int64_t l = 0; l < L; ++l) {
      T in = n.concat(p + "/l" + std::to_string(l) + "/with_context", {x, context}, -1);
      auto [h2, c2] = n.lstm_cell(p + "/l" + std::to_string(l), in, h[static_cast<std::size_t>(l)],
                                  c[static_cast<std::size_t>(l)], dw[static_cast<std::size_t>(l)], db[static_cast<std::size_t>(l)]);
      h[static_cast<std::size_t>(l)] = h2;
      c[static_cast<std::size_t>(l)] = c2;
      x = l >= 2 ? n.ew(p + "/l" + std::to_string(l) + "/residual", OpKind::add, {h2, x}) : h2;
    }
    T logits = n.matmul(p + "/logits", x, proj);
    losses.push_back(n.op1(p + "/softmax_xent", OpKind::softmax, {logits}, {B}, 5 * numel(logits.shape)));
  }
  n.op1("loss_sum", OpKind::add, losses, {}, static_cast<double>(S * B));
  return n.build();
}

inline OpGraph transformer_xl(const ZooOptions& o) {
  const auto B = pick(o.batch, 16), L = pick(o.layers, 16), S = pick(o.seq, 128), D = pick(o.hidden, 512);
  const auto G = pick(o.segments, 4);
  const std::int64_t heads = 8, F = 4 * D, V = 32000;
  Net n("transformer_xl");
  n.info().batch = B;
  T emb = n.variable("embedding", {V, D});
  struct Layer {
    T wqkv, wo, w1, w2, ln1, ln2;
  };
  std::vector<Layer> ws;
  for (std::int64_t l = 0; l < L; ++l) {
    const std::string p = "layer" + std::to_string(l);
    ws.push_back(Layer{n.variable(p + "/qkv", {D, 3 * D}), n.variable(p + "/out", {D, D}), n.variable(p + "/ff1", {D, F}),
                       n.variable(p + "/ff2", {F, D}), n.variable(p + "/ln1", {2 * D}), n.variable(p + "/ln2", {2 * D})});
  }
  T proj = n.variable("softmax/kernel", {D, V});
  std::vector<T> mem;  // per layer: the previous segment's input to that layer
  std::vector<T> losses;
  for (std::int64_t g = 0; g < G; ++g) {
    const std::string sp = "seg" + std::to_string(g);
    T tokens = n.input(sp + "/tokens", {B, S});
    T h = n.op1(sp + "/embed", OpKind::gather, {emb, tokens}, {B, S, D}, 0);
    for (std::int64_t l = 0; l < L; ++l) {
      const std::string p = sp + "/layer" + std::to_string(l);
      const Layer& w = ws[static_cast<std::size_t>(l)];
      const bool has_mem = g > 0;
      T ctx = has_mem ? n.concat(p + "/with_memory", {mem[static_cast<std::size_t>(l)], h}, 1) : h;
      const std::int64_t K = has_mem ? 2 * S : S;
      T qkv = n.matmul(p + "/qkv", ctx, w.wqkv);
      auto parts = n.split(p + "/split_qkv", qkv, 3);
      const double att = 2.0 * static_cast<double>(B * S * K * D);
      T scores = n.op1(p + "/scores", OpKind::matmul, {parts[0], parts[1]}, {B, heads, S, K}, att);
      T probs = n.ew(p + "/softmax", OpKind::softmax, {scores}, 5);
      T av = n.op1(p + "/attend", OpKind::matmul, {probs, parts[2]}, {B, S, D}, att);
      T o1 = n.matmul(p + "/out", av, w.wo);
      T r1 = n.ew(p + "/residual1", OpKind::add, {o1, h});
      T n1 = n.layer_norm(p + "/ln1", r1, w.ln1);
      T f1 = n.matmul(p + "/ff1", n1, w.w1);
      T a1 = n.ew(p + "/relu", OpKind::relu, {f1});
      T f2 = n.matmul(p + "/ff2", a1, w.w2);
      T r2 = n.ew(p + "/residual2", OpKind::add, {f2, n1});
      T n2 = n.layer_norm(p + "/ln2", r2, w.ln2);
      if (mem.size() <= static_cast<std::size_t>(l)) mem.push_back(h);
      else mem[static_cast<std::size_t>(l)] = h;
      h = n2;
    }
    T logits = n.matmul(sp + "/logits", h, proj);
    losses.push_back(n.op1(sp + "/softmax_xent", OpKind::softmax, {logits}, {B, S}, 5 * numel(logits.shape)));
  }
  n.op1("loss_sum", OpKind::add, losses, {}, static_cast<double>(G * B * S));
  return n.build();
}

inline OpGraph wavenet(const ZooOptions& o) {
  const auto B = pick(o.batch, 8), stacks = pick(o.layers, 4), S = pick(o.seq, 16000), C = pick(o.hidden, 64);
  const std::int64_t dilations = 10, skip_c = 256, q = 256;
  Net n("wavenet");
  n.info().batch = B;
  T x = n.input("audio", {B, q, S});
  auto conv = [&](const std::string& name, const T& in, std::int64_t cout, std::int64_t k) {
    const std::int64_t cin = in.shape[1];
    T w = n.variable(name + "/kernel", {cout, cin, k});
    Shape out{in.shape[0], cout, in.shape[2]};
    return n.op1(name, OpKind::conv, {in, w}, out, 2 * numel(out) * static_cast<double>(cin * k));
  };
  T h = conv("causal_conv", x, C, 2);
  T skip_sum;
  bool have_skip = false;
  for (std::int64_t s = 0; s < stacks; ++s)
    for (std::int64_t d = 0; d < dilations; ++d) {
      const std::string p = "stack" + std::to_string(s) + "/dilation" + std::to_string(1 << d);
      T filt = conv(p + "/filter", h, C, 2);
      T gate = conv(p + "/gate", h, C, 2);
      T tf = n.ew(p + "/tanh", OpKind::tanh, {filt}, 4);
      T sg = n.ew(p + "/sigmoid", OpKind::sigmoid, {gate}, 4);
      T z = n.ew(p + "/gated", OpKind::mul, {tf, sg});
      T res = conv(p + "/residual", z, C, 1);
      T skip = conv(p + "/skip", z, skip_c, 1);
      h = n.ew(p + "/residual_add", OpKind::add, {res, h});
      skip_sum = have_skip ? n.ew(p + "/skip_add", OpKind::add, {skip_sum, skip}) : skip;
      have_skip = true;
    }
  T r1 = n.ew("head/relu1", OpKind::relu, {skip_sum});
  T c1 = conv("head/conv1", r1, skip_c, 1);
  T r2 = n.ew("head/relu2", OpKind::relu, {c1});
  T c2 = conv("head/conv2", r2, q, 1);
  n.ew("head/softmax", OpKind::softmax, {c2}, 5);
  return n.build();
}

}  // namespace detail::zoo

// Builds zoo workload `name` (see zoo_names()); an unknown name is a go::Error listing the known ones.
inline OpGraph make_zoo_graph(std::string_view name, const ZooOptions& opts = {}) {
  if (name == "rnnlm") return detail::zoo::rnnlm(opts);
  if (name == "gnmt") return detail::zoo::gnmt(opts);
  if (name == "transformer_xl") return detail::zoo::transformer_xl(opts);
  if (name == "wavenet") return detail::zoo::wavenet(opts);
  std::string known;
  for (const auto& n : zoo_names()) known += (known.empty() ? "" : ", ") + n;
  GO_FAIL("zoo:", name, ": unknown zoo workload (known: ", known, ")");
}

}  // namespace go
