#pragma once
// The workload zoo: WaveNet, wavenet<S> (see go/graph/zoo.hpp for its sizes and defaults).
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "go/core/error.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/op_kind.hpp"
#include "go/graph/zoo/common.hpp"

namespace go::detail::zoo {

// Names: input/..., stack<s>/layer<i>/..., head/...
inline OpGraph wavenet(const Sizes& z) {
  const std::int64_t B = z.batch, stacks = z.number, per_stack = z.depth, Lc = z.seq, C = z.segments, R = z.hidden,
                     Q = z.vocab, skip_c = 256;
  const std::int64_t max_dilation = std::int64_t{1} << std::min<std::int64_t>(per_stack - 1, 9);
  Net n(z.name, B, z.max_ops);
  GO_CHECK(Lc >= max_dilation, n.where(), "seq (samples per chunk) ", Lc, " must be at least the largest dilation ",
           max_dilation);
  // A causal width-2 convolution of a chunk with `d` samples of history: [B, cin, Lc + d] -> [B, cout, Lc].
  auto conv = [&](const std::string& name, const T& in, const T& w, std::int64_t cin, std::int64_t cout,
                  std::int64_t width) {
    Shape out{B, cout, Lc};
    return n.op1(name, OpKind::conv, {in, w}, out, 2 * numel(out) * static_cast<double>(cin * width));
  };
  // The chunk with its history: zero padding for the first chunk, else the previous chunk's tail.
  auto with_history = [&](const std::string& p, const std::vector<T>& xs, std::int64_t c, std::int64_t d) {
    const T& x = xs[at(c)];
    if (c == 0) return n.op1(p + "/pad", OpKind::pad, {x}, {B, x.shape[1], Lc + d}, 0);
    T halo = n.slice(p + "/halo", xs[at(c - 1)], {B, x.shape[1], d});
    return n.concat(p + "/concat", {halo, x}, 2);
  };
  T w_in = n.variable("input/causal_conv", {R, 2 * Q + 1});
  std::vector<T> audio, h;
  for (std::int64_t c = 0; c < C; ++c) audio.push_back(n.input("input/chunk" + str(c) + "/audio", {B, Q, Lc}));
  for (std::int64_t c = 0; c < C; ++c) {
    const std::string p = "input/chunk" + str(c);
    h.push_back(conv(p + "/causal_conv", with_history(p, audio, c, 1), w_in, Q, R, 2));
  }
  std::vector<T> skip(at(C));
  bool have_skip = false;
  for (std::int64_t s = 0; s < stacks; ++s)
    for (std::int64_t i = 0; i < per_stack; ++i) {
      const std::string lp = "stack" + str(s) + "/layer" + str(i);
      const std::int64_t d = std::int64_t{1} << (i % 10);
      T wf = n.variable(lp + "/filter", {R, 2 * R + 1});
      T wg = n.variable(lp + "/gate", {R, 2 * R + 1});
      const bool last = s + 1 == stacks && i + 1 == per_stack;  // its residual output would feed nothing
      const T wr = last ? T{} : n.variable(lp + "/residual", {R, R + 1});
      T ws = n.variable(lp + "/skip", {skip_c, R + 1});
      std::vector<T> next(at(C));
      for (std::int64_t c = 0; c < C; ++c) {
        const std::string p = lp + "/chunk" + str(c);
        T x = with_history(p, h, c, d);
        T f = n.ew(p + "/tanh", OpKind::tanh, {conv(p + "/filter", x, wf, R, R, 2)}, 4);
        T g = n.ew(p + "/sigmoid", OpKind::sigmoid, {conv(p + "/gate", x, wg, R, R, 2)}, 4);
        T zt = n.ew(p + "/gated", OpKind::mul, {f, g});
        if (!last) next[at(c)] = n.add(p + "/residual_add", conv(p + "/residual", zt, wr, R, R, 1), h[at(c)]);
        T sk = conv(p + "/skip", zt, ws, R, skip_c, 1);
        skip[at(c)] = have_skip ? n.add(p + "/skip_add", skip[at(c)], sk) : sk;
      }
      have_skip = true;
      h = std::move(next);
    }
  T w1 = n.variable("head/conv1", {skip_c, skip_c + 1});
  T w2 = n.variable("head/conv2", {Q, skip_c + 1});
  std::vector<T> losses;
  for (std::int64_t c = 0; c < C; ++c) {
    const std::string p = "head/chunk" + str(c);
    T r1 = n.relu(p + "/relu1", skip[at(c)]);
    T r2 = n.relu(p + "/relu2", conv(p + "/conv1", r1, w1, skip_c, skip_c, 1));
    T logits = conv(p + "/conv2", r2, w2, skip_c, Q, 1);
    logits.shape = {B, Lc, Q};  // classes last for the loss
    T labels = n.input(p + "/labels", {B, Lc});
    losses.push_back(n.xent(p + "/xent", logits, labels));
  }
  n.sum("head/loss", losses);
  return n.build();
}

}  // namespace go::detail::zoo
