#pragma once
// PipeDream profiler graphs (msr-fiddle/pipedream profiler/*/profiles/<model>/graph.txt):
//   nodeK -- <PyTorch module repr> -- forward_compute_time=F, backward_compute_time=B, activation_size=A, parameter_size=P
//   <TAB>nodeI -- nodeJ
// Times are milliseconds (kept as Op::time / Op::backward_time in seconds), sizes bytes; a
// multi-output node's activation_size is "[a; b; c]" (one output tensor each, and a consumer
// `__getitem__(k)` reads output k). Input nodes are zero-cost (some carry data-loading time).
// FLOPs are estimated from the module repr and the activation size (fp32) for Conv2d, Linear,
// LSTM, pooling and elementwise layers; the measured times are what the cost model uses.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "go/core/error.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/io.hpp"
#include "go/graph/op_kind.hpp"

namespace go {
namespace detail {

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

// A finite number; one too small for a double (1e-400) reads as 0, as in Python, and one too large
// (1e400) is no number.
inline bool parse_double(std::string_view s, double& out) {
  s = trim(s);
  if (s.empty()) return false;
  if (s.front() == '+') s.remove_prefix(1);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec == std::errc::result_out_of_range && p == s.data() + s.size()) {
    out = std::strtod(std::string(s).c_str(), nullptr);  // underflow gives 0 or a subnormal, overflow inf
    return std::isfinite(out);
  }
  return ec == std::errc() && p == s.data() + s.size() && std::isfinite(out);
}

inline bool parse_int64(std::string_view s, std::int64_t& out) {
  s = trim(s);
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

// Integer value of `key=` in a module repr ("groups=32"), or of the n-th positional integer.
inline std::int64_t repr_int(std::string_view repr, std::string_view key, std::int64_t def) {
  auto pos = repr.find(key);
  if (pos == std::string_view::npos) return def;
  pos += key.size();
  while (pos < repr.size() && (repr[pos] == '(' || repr[pos] == ' ')) ++pos;
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(repr.data() + pos, repr.data() + repr.size(), v);
  return ec == std::errc() ? v : def;
}
// Product of a "kernel_size=(3, 3)" or "kernel_size=3" value (a square kernel when scalar), in
// double: it only scales a FLOP estimate, and a file's sizes can be any 64-bit numbers.
inline double repr_kernel_area(std::string_view repr, double def) {
  auto pos = repr.find("kernel_size=");
  if (pos == std::string_view::npos) return def;
  pos += 12;
  if (pos < repr.size() && repr[pos] == '(') {
    std::int64_t a = 1, b = 1;
    auto e = repr.find(')', pos);
    auto inner = repr.substr(pos + 1, e == std::string_view::npos ? std::string_view::npos : e - pos - 1);
    auto comma = inner.find(',');
    if (!parse_int64(inner.substr(0, comma), a)) return def;
    if (comma != std::string_view::npos && !parse_int64(inner.substr(comma + 1), b)) return def;
    return static_cast<double>(a) * static_cast<double>(b);  // negative: the parser's flops check names the line
  }
  const std::int64_t k = repr_int(repr, "kernel_size=", -1);
  return k > 0 ? static_cast<double>(k) * static_cast<double>(k) : def;
}
inline std::vector<std::int64_t> repr_positional(std::string_view repr) {
  std::vector<std::int64_t> v;
  auto open = repr.find('(');
  if (open == std::string_view::npos) return v;
  std::string_view rest = repr.substr(open + 1);
  while (!rest.empty()) {
    auto comma = rest.find_first_of(",)");
    std::string_view tok = trim(rest.substr(0, comma));
    std::int64_t x = 0;
    if (tok.find('=') != std::string_view::npos || !parse_int64(tok, x)) break;
    v.push_back(x);
    if (comma == std::string_view::npos || rest[comma] == ')') break;
    rest.remove_prefix(comma + 1);
  }
  return v;
}

inline OpKind pipedream_kind(std::string_view repr) {
  std::string_view head = repr.substr(0, repr.find('('));
  head = trim(head);
  auto starts = [&](std::string_view p) { return head.substr(0, p.size()) == p; };
  if (starts("Input")) return OpKind::input;
  if (starts("Conv")) return OpKind::conv;
  if (head == "Linear" || head == "Classifier") return OpKind::matmul;
  if (head == "ReLU" || head == "ReLU6" || head == "LeakyReLU" || head == "Threshold") return OpKind::relu;
  if (head == "Sigmoid") return OpKind::sigmoid;
  if (head == "Tanh") return OpKind::tanh;
  if (starts("BatchNorm")) return OpKind::batch_norm;
  if (head == "LayerNorm") return OpKind::layer_norm;
  if (starts("MaxPool")) return OpKind::max_pool;
  if (starts("AdaptiveAvgPool") || starts("AdaptiveMaxPool")) return OpKind::global_pool;
  if (starts("AvgPool")) return OpKind::avg_pool;
  if (starts("Dropout")) return OpKind::dropout;
  if (head.find("LSTM") != std::string_view::npos || head.find("GRU") != std::string_view::npos ||
      head == "RNN" || head == "RecurrentAttention")
    return OpKind::rnn;
  if (head == "Embedding") return OpKind::gather;
  if (head == "Concat" || head == "cat") return OpKind::concat;
  if (head == "Add" || head == "__add__") return OpKind::add;
  if (head == "Mul" || head == "__mul__") return OpKind::mul;
  if (head == "View" || head == "Size" || head == "__getitem__" || head == "Flatten" || head == "hidden")
    return OpKind::reshape;
  if (head == "Softmax" || head == "LogSoftmax") return OpKind::softmax;
  return OpKind::other;
}

// FLOPs estimate for one PipeDream layer from its repr and output elements (fp32 activations).
inline double pipedream_flops(OpKind kind, std::string_view repr, double out_elems) {
  switch (kind) {
    case OpKind::conv: {
      auto pos = repr_positional(repr);
      if (pos.size() < 1) return 0;
      const double groups = static_cast<double>(std::max<std::int64_t>(1, repr_int(repr, "groups=", 1)));
      const double k = repr_kernel_area(repr, 1);
      return 2.0 * out_elems * static_cast<double>(pos[0]) / groups * k;
    }
    case OpKind::matmul: {
      constexpr std::int64_t kAbsent = std::numeric_limits<std::int64_t>::min();
      std::int64_t in = repr_int(repr, "in_features=", kAbsent);
      if (in != kAbsent && in < 0) return -1.0;  // negative: the parser's flops check names the line
      if (in == kAbsent) {
        auto pos = repr_positional(repr);
        in = pos.empty() ? 0 : pos[0];
      }
      return 2.0 * out_elems * static_cast<double>(in);
    }
    case OpKind::rnn: {
      auto pos = repr_positional(repr);
      if (pos.size() < 2 || pos[1] <= 0 || repr.find("bidir") != std::string_view::npos) return 0;
      const double in = static_cast<double>(pos[0]), h = static_cast<double>(pos[1]);
      const double steps = out_elems / h;  // seq * batch
      const double gates = repr.find("GRU") != std::string_view::npos ? 3.0 : 4.0;
      return steps * (2.0 * gates * h * (in + h) + 12.0 * h);
    }
    case OpKind::max_pool:
    case OpKind::avg_pool: return out_elems * repr_kernel_area(repr, 1);
    case OpKind::batch_norm: return 2.0 * out_elems;
    case OpKind::relu:
    case OpKind::add:
    case OpKind::mul:
    case OpKind::dropout: return out_elems;
    case OpKind::sigmoid:
    case OpKind::tanh: return 4.0 * out_elems;
    case OpKind::softmax: return 5.0 * out_elems;
    default: return 0;
  }
}

}  // namespace detail

inline OpGraph parse_pipedream(std::string_view text, const std::string& source) {
  text = detail::without_bom(text);
  const std::string at = source + ":";
  GraphInfo info;
  info.source = source;
  info.format = "pipedream";
  GraphBuilder b(info);
  struct Edge {
    std::int64_t src, dst;
    std::size_t line;
  };
  std::vector<Edge> edges;
  std::unordered_map<std::int64_t, OpId> by_id;
  std::vector<std::string> reprs;
  auto node_id = [&](std::string_view tok, std::size_t line) -> std::int64_t {
    tok = detail::trim(tok);
    std::int64_t id = -1;
    GO_CHECK(tok.substr(0, 4) == "node" && detail::parse_int64(tok.substr(4), id) && id >= 0, at, line,
             ": expected a node name 'nodeN', got '", tok, "'");
    return id;
  };
  std::size_t line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto nl = text.find('\n', pos);
    std::string_view raw = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line_no;
    std::string_view line = detail::trim(raw);
    if (line.empty()) continue;
    const bool is_edge = raw.front() == '\t' || raw.front() == ' ';
    if (is_edge) {
      auto sep = line.find(" -- ");
      GO_CHECK(sep != std::string_view::npos, at, line_no, ": malformed edge line (expected 'nodeI -- nodeJ')");
      edges.push_back(Edge{node_id(line.substr(0, sep), line_no), node_id(line.substr(sep + 4), line_no), line_no});
      continue;
    }
    auto first = line.find(" -- ");
    auto last = line.rfind(" -- ");
    GO_CHECK(first != std::string_view::npos && last != first, at, line_no,
             ": malformed node line (expected 'nodeK -- <module> -- key=value, ...')");
    OpSpec s;
    s.id = node_id(line.substr(0, first), line_no);
    s.name = std::string(detail::trim(line.substr(0, first)));
    std::string_view repr = detail::trim(line.substr(first + 4, last - first - 4));
    std::string_view attrs = line.substr(last + 4);
    s.kind = detail::pipedream_kind(repr);
    bool have_f = false, have_b = false, have_a = false, have_p = false;
    double fwd = 0, bwd = 0, psize = 0;
    std::vector<double> acts;
    while (!attrs.empty()) {
      // split on ", " outside brackets
      std::size_t end = 0;
      int depth = 0;
      for (; end < attrs.size(); ++end) {
        if (attrs[end] == '[') ++depth;
        else if (attrs[end] == ']') --depth;
        else if (attrs[end] == ',' && depth == 0) break;
      }
      std::string_view kv = detail::trim(attrs.substr(0, end));
      attrs = end < attrs.size() ? attrs.substr(end + 1) : std::string_view{};
      if (kv.empty()) continue;
      auto eq = kv.find('=');
      GO_CHECK(eq != std::string_view::npos, at, line_no, ": malformed attribute '", kv, "' of ", s.name);
      std::string_view key = detail::trim(kv.substr(0, eq)), val = detail::trim(kv.substr(eq + 1));
      auto num = [&](double& out) {
        GO_CHECK(detail::parse_double(val, out), at, line_no, ": ", s.name, ": ", key, " is not a finite number: '", val,
                 "'");
      };
      const bool again = (key == "forward_compute_time" && have_f) || (key == "backward_compute_time" && have_b) ||
                         (key == "parameter_size" && have_p) || (key == "activation_size" && have_a);
      GO_CHECK(!again, at, line_no, ": ", s.name, ": ", key, " is given twice");
      if (key == "forward_compute_time") {
        num(fwd);
        have_f = true;
      } else if (key == "backward_compute_time") {
        num(bwd);
        have_b = true;
      } else if (key == "parameter_size") {
        num(psize);
        have_p = true;
      } else if (key == "activation_size") {
        have_a = true;
        if (!val.empty() && val.front() == '[') {
          GO_CHECK(val.back() == ']', at, line_no, ": ", s.name, ": unterminated activation_size list");
          std::string_view inner = val.substr(1, val.size() - 2);
          while (true) {
            auto semi = inner.find(';');
            double x = 0;
            std::string_view tok = inner.substr(0, semi);
            GO_CHECK(detail::parse_double(tok, x), at, line_no, ": ", s.name, ": activation_size entry is not a finite number: '",
                     detail::trim(tok), "'");
            acts.push_back(x);
            if (semi == std::string_view::npos) break;
            inner.remove_prefix(semi + 1);
          }
        } else {
          double x = 0;
          num(x);
          acts.push_back(x);
        }
      } else {
        GO_FAIL(at, line_no, ": ", s.name, ": unknown attribute '", key,
                "' (known: forward_compute_time, backward_compute_time, activation_size, parameter_size)");
      }
    }
    GO_CHECK(have_f && have_b && have_a && have_p, at, line_no, ": ", s.name,
             " lacks forward_compute_time, backward_compute_time, activation_size or parameter_size");
    // The graph's own limits (graph.hpp), checked here too so that the error names the line.
    GO_CHECK(fwd >= 0 && bwd >= 0, at, line_no, ": ", detail::op_label(s.name, s.id), " has a negative compute time");
    GO_CHECK(fwd <= kMaxOpSeconds * 1e3 && bwd <= kMaxOpSeconds * 1e3, at, line_no, ": ",
             detail::op_label(s.name, s.id), " has a compute time of more than a day (at most ",
             static_cast<std::int64_t>(kMaxOpSeconds * 1e3), " ms)");
    GO_CHECK(psize >= 0 && psize <= static_cast<double>(kMaxBytes), at, line_no, ": ", detail::op_label(s.name, s.id),
             " has negative or invalid parameter_size ", psize, " (at most 2^50 bytes)");
    // Input nodes carry data-loading time: zero-cost.
    s.time = s.kind == OpKind::input ? 0.0 : fwd * 1e-3;
    s.backward_time = s.kind == OpKind::input ? 0.0 : bwd * 1e-3;
    s.param_bytes = static_cast<std::int64_t>(psize);
    double out_elems = 0;
    for (double a : acts) {
      GO_CHECK(a >= 0 && a <= static_cast<double>(kMaxBytes), at, line_no, ": ", detail::op_label(s.name, s.id),
               " has negative or invalid activation_size ", a, " (at most 2^50 bytes)");
      TensorSpec t;
      t.shape_known = false;
      t.bytes = static_cast<std::int64_t>(a);
      s.outputs.push_back(t);
    }
    if (!acts.empty()) out_elems = acts[0] / 4.0;
    s.flops = detail::pipedream_flops(s.kind, repr, out_elems);
    GO_CHECK(s.flops >= 0 && s.flops <= kMaxOpFlops, at, line_no, ": ", detail::op_label(s.name, s.id),
             " has negative or invalid flops ", s.flops, " estimated from its module (", repr, "; at most ", kMaxOpFlops,
             ")");
    auto [it, fresh] = by_id.emplace(s.id, static_cast<OpId>(b.size()));
    GO_CHECK(fresh, at, line_no, ": duplicate op id ", s.id, ": node", s.id, " is declared twice");
    reprs.emplace_back(repr);
    b.add_op(std::move(s));
  }
  GO_CHECK(b.size() > 0, at, " no nodes (not a PipeDream graph.txt?)");
  for (const Edge& e : edges) {
    auto dst = by_id.find(e.dst);
    GO_CHECK(dst != by_id.end(), at, e.line, ": edge node", e.src, " -- node", e.dst, " references unknown op node", e.dst);
    auto src = by_id.find(e.src);
    GO_CHECK(src != by_id.end(), at, e.line, ": edge node", e.src, " -- node", e.dst, " references unknown op node", e.src);
    OpSpec& d = b.spec(dst->second);
    const OpSpec& sspec = b.spec(src->second);
    std::int32_t out = 0;
    const std::string& drepr = reprs[static_cast<std::size_t>(dst->second)];
    if (drepr.rfind("__getitem__(", 0) == 0) {
      const std::int64_t k = detail::repr_int(drepr, "__getitem__(", 0);
      if (k >= 0 && k < static_cast<std::int64_t>(sspec.outputs.size())) out = static_cast<std::int32_t>(k);
    }
    if (sspec.outputs.empty()) {
      d.control_inputs.push_back(e.src);
    } else {
      d.inputs.push_back(TensorRef{e.src, out});
    }
  }
  return b.build();
}

inline OpGraph load_pipedream(const std::string& path) { return parse_pipedream(detail::read_file(path), path); }

}  // namespace go
