#pragma once
// NeuSight profiles (github.com/sitar-lab/NeuSight, scripts/asplos/label/<GPU>/<model>-<inf|train>-
// <seqlen>-<batch>.csv): a torch.fx node table of a HuggingFace model traced with ONE transformer
// layer, with each node's measured time on that GPU in ms. Columns used (found by name, any order):
// op, target, Name, _input_nodes ("{a: None, b: None}"), meta (the nn_module_stack), input_shapes,
// output_shape, dtype, fw_latency, and for training profiles bw_latency and acc_latency.
//
// MEASURED TIMES. Op::time = fw_latency; a training profile (some bw_latency > 0) also sets
// Op::backward_time = bw_latency + acc_latency (the gradient kernels and the accumulation of the
// weight gradient), which make_training_graph (`--training`) gives the op's gradient op; it adds no
// optimizer update ops to these graphs (format "neusight"): NeuSight's measured step has none. ms -> s.
//
// THE WHOLE MODEL. The traced layer is the set of nodes whose module path (an entry of meta's
// nn_module_stack, or the target of a call_module / get_attr node) has a component `0` after a
// container (`bert.encoder.layer.0`, `transformer.h.0`, `model.decoder.layers.0`). It is repeated
// `num_layers` times: the option, else "num_layer" of the sibling `<same name>.json`. Nodes before
// the layer are kept once, as are nodes after it (those that depend on it). Copy i reads what layer 0
// reads, except that it reads copy i-1's output in place of the layer's hidden input; the rest of
// the model reads the last copy's output. The hidden output is the one layer node read by a node
// after the layer other than the fx `output` node (or the one node `output` reads when nothing else
// does); the hidden input is the latest node before the layer that the layer reads and whose shape
// is the hidden output's (the attention mask and other such inputs are shared by every copy). Layer
// nodes read only by `output` (key/value caches) are read from every copy. Copy i renames
// `<container>.0` to `<container>.i` in names and parameter names
// (`bert_encoder_layer_3_attention_self_query`) and prefixes the other names of its nodes with
// `<container>.i/` (`transformer.h.3/view_2`). A table with no layer node, or one that also holds
// `<container>.1` (traced whole, like switchxl4), is taken as it is. load_graph accepts the option as
// a path suffix: `bert_large-train-512-2.csv:layers=4`.
//
// OP KINDS AND COSTS (FLOPs and bytes from output_shape / input_shapes and dtype, for the roofline
// and the simulator's transfers; the measured times are what the cost model uses):
//   placeholder -> input; get_attr -> constant (a floating-point one is a parameter: param_bytes);
//   Linear / addmm / matmul / bmm / mm / baddbmm -> matmul (2 x output x K, + output for the bias);
//   LayerNorm -> layer_norm; softmax; (New)GELU(Activation) -> gelu; ReLU, Tanh, Sigmoid; Dropout;
//   Embedding -> gather (its table a parameter: rows from the model config's vocab_size,
//   max_position_embeddings / n_positions or type_vocab_size when `../../model_configs/<model>.json`
//   exists, else the number of indices); add, sub, mul, truediv; split -> split, cat -> concat;
//   view / reshape / permute / transpose / expand / unsqueeze and every node whose result is not a
//   tensor (size, getattr, getitem of sizes, finfo) -> reshape, a view that moves no data;
//   contiguous -> transpose (the copy that a permute defers); getitem of a tensor -> slice; in an
//   inference profile dropout, split and getitem of a tensor are views (reshape) instead; casts,
//   masks, comparisons, pow, where, full/ones/arange -> elementwise, but a cast to the dtype and
//   shape its input already has -> reshape (PyTorch returns the input); anything else -> other.
//   The fx `output` node is kept as a zero-time reshape that reads the model's results.
// Errors (missing column, bad number or shape, unknown or duplicate node, cycle, no nodes, no layer
// count) are go::Error with one line that starts with the file.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "go/core/error.hpp"
#include "go/core/file.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/io.hpp"
#include "go/graph/json.hpp"
#include "go/graph/op_kind.hpp"
#include "go/graph/pipedream.hpp"

namespace go {

struct NeuSightOptions {
  std::int32_t num_layers = 0;  // > 0: repeat the traced layer this often; 0: the sibling JSON's num_layer
};

namespace detail {
namespace neusight {

// CSV records (RFC 4180 quoting; CRLF or LF); `line` is the 1-based line where a record starts.
struct Record {
  std::vector<std::string> fields;
  std::size_t line = 0;
};

inline std::vector<Record> parse_csv(std::string_view text, const std::string& at) {
  std::vector<Record> rows;
  std::size_t i = 0, line = 1;
  while (i < text.size()) {
    Record r;
    r.line = line;
    std::string field;
    bool quoted = false, done = false;
    while (!done) {
      if (i >= text.size()) {
        GO_CHECK(!quoted, at, r.line, ": unterminated quoted field");
        r.fields.push_back(std::move(field));
        break;
      }
      const char c = text[i++];
      if (quoted) {
        if (c == '"') {
          if (i < text.size() && text[i] == '"') field.push_back(text[i++]);
          else quoted = false;
        } else {
          if (c == '\n') ++line;
          field.push_back(c);
        }
      } else if (c == '"') {
        quoted = true;
      } else if (c == ',') {
        r.fields.push_back(std::move(field));
        field.clear();
      } else if (c == '\n' || c == '\r') {
        if (c == '\r' && i < text.size() && text[i] == '\n') ++i;
        ++line;
        r.fields.push_back(std::move(field));
        done = true;
      } else {
        field.push_back(c);
      }
    }
    if (r.fields.size() == 1 && trim(r.fields[0]).empty()) continue;  // blank line
    rows.push_back(std::move(r));
  }
  return rows;
}

// "(2, 512, 1024)", "[2, 512]", "(1,)", "()" -> dims; nullopt when malformed.
inline std::optional<std::vector<std::int64_t>> parse_dims(std::string_view s) {
  s = trim(s);
  if (s.size() < 2 || !((s.front() == '(' && s.back() == ')') || (s.front() == '[' && s.back() == ']')))
    return std::nullopt;
  s = s.substr(1, s.size() - 2);
  std::vector<std::int64_t> dims;
  while (!trim(s).empty()) {
    const auto comma = s.find(',');
    std::int64_t d = 0;
    if (!parse_int64(s.substr(0, comma), d) || d < 0) return std::nullopt;
    dims.push_back(d);
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return dims;
}

// "[[2, 512], [1]]" -> one dims list per input; nullopt when malformed.
inline std::optional<std::vector<std::vector<std::int64_t>>> parse_dims_list(std::string_view s) {
  s = trim(s);
  if (s.size() < 2 || s.front() != '[' || s.back() != ']') return std::nullopt;
  s = s.substr(1, s.size() - 2);
  std::vector<std::vector<std::int64_t>> out;
  while (!trim(s).empty()) {
    const auto open = s.find('['), close = s.find(']');
    if (open == std::string_view::npos || close == std::string_view::npos || close < open ||
        !trim(s.substr(0, open)).empty())
      return std::nullopt;
    auto d = parse_dims(s.substr(open, close - open + 1));
    if (!d) return std::nullopt;
    out.push_back(std::move(*d));
    s.remove_prefix(close + 1);
    s = trim(s);
    if (!s.empty()) {
      if (s.front() != ',') return std::nullopt;
      s.remove_prefix(1);
    }
  }
  return out;
}

// "{a: None, b: None}" -> {"a", "b"}; nullopt when malformed.
inline std::optional<std::vector<std::string>> parse_input_nodes(std::string_view s) {
  s = trim(s);
  if (s.size() < 2 || s.front() != '{' || s.back() != '}') return std::nullopt;
  s = s.substr(1, s.size() - 2);
  std::vector<std::string> names;
  while (!trim(s).empty()) {
    const auto comma = s.find(',');
    std::string_view item = trim(s.substr(0, comma));
    const auto colon = item.find(':');
    std::string_view name = trim(item.substr(0, colon));
    if (name.empty()) return std::nullopt;
    names.emplace_back(name);
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return names;
}

inline ElemType torch_dtype(std::string_view s) {
  if (s == "torch.float32" || s == "torch.float") return ElemType::f32;
  if (s == "torch.float16" || s == "torch.half") return ElemType::f16;
  if (s == "torch.bfloat16") return ElemType::bf16;
  if (s == "torch.float64" || s == "torch.double") return ElemType::f64;
  if (s == "torch.int64" || s == "torch.long") return ElemType::i64;
  if (s == "torch.int32" || s == "torch.int") return ElemType::i32;
  if (s == "torch.int16") return ElemType::i16;
  if (s == "torch.int8") return ElemType::i8;
  if (s == "torch.uint8") return ElemType::u8;
  if (s == "torch.bool") return ElemType::boolean;
  return ElemType::other;
}
inline bool is_float(ElemType t) {
  return t == ElemType::f32 || t == ElemType::f16 || t == ElemType::bf16 || t == ElemType::f64;
}

// What a node calls: the module class of a call_module ("Linear"), the function or method name
// otherwise ("<built-in method matmul of type object at 0x..>" -> "matmul").
inline std::string callee(std::string_view op, std::string_view target, std::string_view meta) {
  if (op == "call_module") {
    const auto cls = meta.rfind("<class '");
    if (cls == std::string_view::npos) return {};
    std::string_view c = meta.substr(cls + 8);
    c = c.substr(0, c.find('\''));
    return std::string(c.substr(c.rfind('.') + 1));
  }
  if (op != "call_function") return std::string(target);
  for (std::string_view p : {"<built-in function ", "<built-in method ", "<function ", "<class '"}) {
    if (target.substr(0, p.size()) != p) continue;
    std::string_view r = target.substr(p.size());
    r = r.substr(0, r.find_first_of(" >'"));
    return std::string(r.substr(r.rfind('.') + 1));
  }
  return std::string(target);
}

// fx callees that convert a tensor's dtype (fx_kind: elementwise).
inline bool is_cast(std::string_view f) {
  for (std::string_view c : {"to", "type", "type_as", "long", "bool", "float", "half", "int"})
    if (f == c) return true;
  return false;
}

inline OpKind fx_kind(std::string_view op, std::string_view f, bool tensor_out) {
  if (op == "placeholder") return OpKind::input;
  if (op == "get_attr") return OpKind::constant;
  if (op == "output") return OpKind::reshape;
  auto any = [&](std::initializer_list<std::string_view> names) {
    return std::find(names.begin(), names.end(), f) != names.end();
  };
  if (any({"split", "chunk", "unbind"})) return OpKind::split;
  if (!tensor_out) return OpKind::reshape;  // sizes, dtypes, tuples: Python values, no kernel
  if (any({"Linear", "linear", "addmm", "matmul", "bmm", "mm", "baddbmm", "einsum"})) return OpKind::matmul;
  if (any({"LayerNorm", "layer_norm", "GroupNorm", "group_norm"})) return OpKind::layer_norm;
  if (any({"softmax", "Softmax", "log_softmax", "LogSoftmax"})) return OpKind::softmax;
  if (any({"gelu", "GELU", "NewGELUActivation", "GELUActivation", "FastGELUActivation"})) return OpKind::gelu;
  if (any({"relu", "ReLU"})) return OpKind::relu;
  if (any({"tanh", "Tanh"})) return OpKind::tanh;
  if (any({"sigmoid", "Sigmoid"})) return OpKind::sigmoid;
  if (any({"dropout", "Dropout"})) return OpKind::dropout;
  if (any({"embedding", "Embedding"})) return OpKind::gather;
  if (any({"add", "iadd", "radd"})) return OpKind::add;
  if (any({"sub", "rsub", "isub"})) return OpKind::sub;
  if (any({"mul", "imul"})) return OpKind::mul;
  if (any({"truediv", "div", "floordiv"})) return OpKind::div;
  if (any({"cat", "concat"})) return OpKind::concat;
  if (any({"view", "reshape", "permute", "transpose", "expand", "unsqueeze", "squeeze", "flatten", "t"}))
    return OpKind::reshape;
  if (f == "contiguous") return OpKind::transpose;
  if (f == "getitem") return OpKind::slice;
  if (any({"sum", "mean", "amax", "amin"})) return OpKind::reduce;
  if (is_cast(f) ||
      any({"masked_fill", "masked_fill_", "where", "eq", "ne", "lt", "gt", "le", "ge", "max", "min", "cumsum", "pow",
           "sqrt", "rsqrt", "exp", "neg", "ones", "zeros", "full", "arange", "tensor", "ones_like", "zeros_like",
           "full_like", "clone"}))
    return OpKind::elementwise;
  return OpKind::other;
}

inline double numel(const std::vector<std::int64_t>& d) {
  double n = 1;
  for (auto x : d) n *= static_cast<double>(x);
  return n;
}

// FLOPs of one node from its output and input shapes (cf. the ONNX importer's table).
inline double fx_flops(OpKind kind, std::string_view f, const std::vector<std::int64_t>& out,
                       const std::vector<std::vector<std::int64_t>>& in) {
  const double y = numel(out);
  switch (kind) {
    case OpKind::matmul: {
      // addmm(bias, a, b) and baddbmm read the matrix second; the rest first.
      const bool has_bias = f == "Linear" || f == "linear" || f == "addmm" || f == "baddbmm";
      const std::size_t a = (f == "addmm" || f == "baddbmm") ? 1 : 0;
      if (in.size() <= a || in[a].empty()) return 0;
      return 2.0 * y * static_cast<double>(in[a].back()) + (has_bias ? y : 0.0);
    }
    case OpKind::layer_norm:
    case OpKind::gelu: return 8.0 * y;
    case OpKind::softmax: return 5.0 * y;
    case OpKind::tanh:
    case OpKind::sigmoid: return 4.0 * y;
    case OpKind::relu:
    case OpKind::dropout:
    case OpKind::add:
    case OpKind::sub:
    case OpKind::mul:
    case OpKind::div:
    case OpKind::elementwise:
    case OpKind::reduce: return y;
    default: return 0.0;
  }
}

// Index of `<container>.0` in a module path: the component "0" and what precedes it.
inline std::optional<std::string> layer_container(std::string_view path) {
  std::size_t pos = 0;
  while ((pos = path.find(".0", pos)) != std::string_view::npos) {
    const std::size_t end = pos + 2;
    if (end == path.size() || path[end] == '.') return std::string(path.substr(0, pos));
    pos = end;
  }
  return std::nullopt;
}

// The module paths of a node: nn_module_stack entries "('a.b', <class ...>)" and a module/attr target.
inline std::vector<std::string_view> module_paths(std::string_view op, std::string_view target, std::string_view meta) {
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  while ((pos = meta.find("('", pos)) != std::string_view::npos) {
    pos += 2;
    const auto end = meta.find('\'', pos);
    if (end == std::string_view::npos) break;
    out.push_back(meta.substr(pos, end - pos));
    pos = end;
  }
  if (op == "call_module" || op == "get_attr") out.push_back(target);
  return out;
}

inline std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  if (from.empty()) return s;
  for (std::size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
  return s;
}

// Rows of an Embedding table from the model config next to the profiles, if any.
inline std::optional<std::int64_t> embedding_rows(const nlohmann::json& config, std::string_view module) {
  if (!config.is_object()) return std::nullopt;
  std::vector<const char*> keys;
  if (module.find("position") != std::string_view::npos || module.find("wpe") != std::string_view::npos)
    keys = {"max_position_embeddings", "n_positions"};
  else if (module.find("token_type") != std::string_view::npos)
    keys = {"type_vocab_size"};
  else
    keys = {"vocab_size"};
  for (const char* k : keys)
    if (config.contains(k) && config[k].is_number_integer() && config[k].get<std::int64_t>() > 0)
      return config[k].get<std::int64_t>();
  return std::nullopt;
}

struct Node {
  std::string op, target, name, callee;
  std::vector<std::string> input_names;
  std::vector<std::int32_t> inputs;  // row indices, distinct
  std::vector<std::vector<std::int64_t>> in_shapes;
  std::vector<std::int64_t> out_shape;
  bool tensor_out = false;
  ElemType dtype = ElemType::f32;
  double fw = 0, bw = 0;
  std::size_t line = 0;
  bool in_layer = false;
};

}  // namespace neusight
}  // namespace detail

inline bool looks_like_neusight(std::string_view data) {
  data = detail::without_bom(data);
  const std::string_view header = detail::trim(data.substr(0, data.find('\n')));
  return header.substr(0, 3) == "op," && header.find("_input_nodes") != std::string_view::npos &&
         header.find("fw_latency") != std::string_view::npos;
}

// Parses a NeuSight CSV; `source` (its path) names it in errors and locates the sibling JSON and
// the model config.
inline OpGraph parse_neusight(std::string_view text, const std::string& source, const NeuSightOptions& opts = {}) {
  namespace ns = detail::neusight;
  namespace fs = std::filesystem;
  text = detail::without_bom(text);
  const std::string at = source + ":";
  GO_CHECK(!detail::trim(text).empty(), source, ": empty file");
  std::vector<ns::Record> rows = ns::parse_csv(text, at);
  GO_CHECK(!rows.empty(), source, ": empty file");

  // ---- columns ----
  const std::vector<std::string>& header = rows[0].fields;
  auto column = [&](std::string_view name, bool required) -> std::int32_t {
    for (std::size_t i = 0; i < header.size(); ++i)
      if (detail::trim(header[i]) == name) return static_cast<std::int32_t>(i);
    GO_CHECK(!required, source, ": not a NeuSight profile: the header lacks the column '", name, "'");
    return -1;
  };
  const std::int32_t c_op = column("op", true), c_target = column("target", true), c_name = column("Name", true),
                     c_in = column("_input_nodes", true), c_meta = column("meta", true),
                     c_ishape = column("input_shapes", true), c_oshape = column("output_shape", true),
                     c_dtype = column("dtype", true), c_fw = column("fw_latency", true),
                     c_bw = column("bw_latency", false), c_acc = column("acc_latency", false);
  GO_CHECK(rows.size() > 1, source, ": no nodes (a header and no rows)");

  // ---- nodes ----
  std::vector<ns::Node> nodes;
  std::unordered_map<std::string, std::int32_t> by_name;
  bool training = false;
  for (std::size_t r = 1; r < rows.size(); ++r) {
    const ns::Record& rec = rows[r];
    GO_CHECK(rec.fields.size() == header.size(), at, rec.line, ": ", rec.fields.size(), " fields, the header has ",
             header.size());
    auto f = [&](std::int32_t c) { return std::string_view(rec.fields[static_cast<std::size_t>(c)]); };
    ns::Node n;
    n.line = rec.line;
    n.op = std::string(detail::trim(f(c_op)));
    n.target = std::string(detail::trim(f(c_target)));
    n.name = std::string(detail::trim(f(c_name)));
    GO_CHECK(!n.name.empty(), at, rec.line, ": a node without a Name");
    GO_CHECK(n.op == "placeholder" || n.op == "get_attr" || n.op == "call_function" || n.op == "call_method" ||
                 n.op == "call_module" || n.op == "output",
             at, rec.line, ": node '", n.name, "' has unknown op '", n.op, "'");
    auto ins = ns::parse_input_nodes(f(c_in));
    GO_CHECK(ins.has_value(), at, rec.line, ": node '", n.name, "': malformed _input_nodes '", f(c_in), "'");
    n.input_names = std::move(*ins);
    auto ish = ns::parse_dims_list(f(c_ishape));
    GO_CHECK(ish.has_value(), at, rec.line, ": node '", n.name, "': malformed input_shapes '", f(c_ishape), "'");
    n.in_shapes = std::move(*ish);
    const std::string_view dt = detail::trim(f(c_dtype));
    n.tensor_out = !dt.empty();
    n.dtype = ns::torch_dtype(dt);
    if (n.tensor_out) {
      auto osh = ns::parse_dims(f(c_oshape));
      GO_CHECK(osh.has_value(), at, rec.line, ": node '", n.name, "': malformed output_shape '", f(c_oshape), "'");
      n.out_shape = std::move(*osh);
    }
    auto ms = [&](std::int32_t c, const char* what) {
      if (c < 0) return 0.0;
      double v = 0;
      GO_CHECK(detail::parse_double(f(c), v) && v >= 0, at, rec.line, ": node '", n.name, "': ", what,
               " is not a non-negative number: '", f(c), "'");
      return v;
    };
    n.fw = ms(c_fw, "fw_latency");
    n.bw = ms(c_bw, "bw_latency") + ms(c_acc, "acc_latency");
    training = training || ms(c_bw, "bw_latency") > 0;
    n.callee = ns::callee(n.op, n.target, f(c_meta));
    auto [it, fresh] = by_name.emplace(n.name, static_cast<std::int32_t>(nodes.size()));
    GO_CHECK(fresh, at, rec.line, ": duplicate node name '", n.name, "'");
    nodes.push_back(std::move(n));
  }
  const auto n_nodes = static_cast<std::int32_t>(nodes.size());
  for (auto& n : nodes)
    for (const std::string& in : n.input_names) {
      auto it = by_name.find(in);
      GO_CHECK(it != by_name.end(), at, n.line, ": node '", n.name, "' reads unknown node '", in, "'");
      if (std::find(n.inputs.begin(), n.inputs.end(), it->second) == n.inputs.end()) n.inputs.push_back(it->second);
    }

  // ---- topological order (file order when the file is in order) ----
  std::vector<std::int32_t> order, pending(static_cast<std::size_t>(n_nodes));
  std::vector<std::vector<std::int32_t>> users(static_cast<std::size_t>(n_nodes));
  for (std::int32_t v = 0; v < n_nodes; ++v) {
    pending[static_cast<std::size_t>(v)] = static_cast<std::int32_t>(nodes[static_cast<std::size_t>(v)].inputs.size());
    for (std::int32_t u : nodes[static_cast<std::size_t>(v)].inputs) users[static_cast<std::size_t>(u)].push_back(v);
  }
  {
    std::vector<std::int32_t> ready;  // min-heap by row
    for (std::int32_t v = 0; v < n_nodes; ++v)
      if (pending[static_cast<std::size_t>(v)] == 0) ready.push_back(v);
    std::make_heap(ready.begin(), ready.end(), std::greater<>());
    while (!ready.empty()) {
      std::pop_heap(ready.begin(), ready.end(), std::greater<>());
      const std::int32_t v = ready.back();
      ready.pop_back();
      order.push_back(v);
      for (std::int32_t w : users[static_cast<std::size_t>(v)])
        if (--pending[static_cast<std::size_t>(w)] == 0) {
          ready.push_back(w);
          std::push_heap(ready.begin(), ready.end(), std::greater<>());
        }
    }
  }
  if (static_cast<std::int32_t>(order.size()) != n_nodes)
    for (std::int32_t v = 0; v < n_nodes; ++v)
      GO_CHECK(pending[static_cast<std::size_t>(v)] == 0, source, ": the node graph has a cycle through node '",
               nodes[static_cast<std::size_t>(v)].name, "' (line ", nodes[static_cast<std::size_t>(v)].line, ")");

  // ---- the traced layer ----
  std::string container;  // "bert.encoder.layer"
  {
    for (std::size_t r = 1; r < rows.size(); ++r) {
      auto& n = nodes[r - 1];
      for (std::string_view p :
           ns::module_paths(n.op, n.target, rows[r].fields[static_cast<std::size_t>(c_meta)])) {
        auto c = ns::layer_container(p);
        if (!c) continue;
        if (container.empty()) container = *c;
        if (*c == container) n.in_layer = true;
      }
    }
  }
  bool traced_whole = container.empty();
  if (!traced_whole) {
    const std::string one = container + ".1";
    for (std::size_t r = 1; r < rows.size() && !traced_whole; ++r) {
      const std::string_view meta = rows[r].fields[static_cast<std::size_t>(c_meta)];
      const auto p = meta.find(one);
      traced_whole = p != std::string_view::npos && p + one.size() < meta.size() &&
                     (meta[p + one.size()] == '.' || meta[p + one.size()] == '\'');
    }
    if (traced_whole)
      for (auto& n : nodes) n.in_layer = false;
  }

  // ---- the layer count ----
  std::int32_t layers = opts.num_layers;
  GO_CHECK(layers >= 0, source, ": negative layer count ", layers);
  const fs::path sibling = fs::path(source).replace_extension(".json");
  if (layers == 0 && !traced_whole) {
    GO_CHECK(fs::is_regular_file(sibling), source, ": no layer count: ", sibling.string(),
             " does not exist (give one with ", source, ":layers=N)");
    const nlohmann::json j = detail::parse_json_text(go::read_file(sibling.string()), sibling.string());
    GO_CHECK(j.is_object() && j.contains("num_layer") && j["num_layer"].is_number_integer() &&
                 j["num_layer"].get<std::int64_t>() > 0 && j["num_layer"].get<std::int64_t>() < (1 << 20),
             sibling.string(), ": \"num_layer\" is missing or not a positive integer");
    layers = static_cast<std::int32_t>(j["num_layer"].get<std::int64_t>());
  }
  GO_CHECK(!traced_whole || layers <= 1, source, ": ", layers,
           " layers asked for, but the table has no single traced layer (no module path '<container>.0', or it "
           "also holds '<container>.1')");
  if (traced_whole) layers = 1;

  // ---- model config (embedding tables) ----
  const std::string stem = fs::path(source).stem().string();
  const std::string model = stem.substr(0, stem.find('-'));
  nlohmann::json config;
  {
    const fs::path cfg = fs::path(source).parent_path() / ".." / ".." / "model_configs" / (model + ".json");
    if (!model.empty() && fs::is_regular_file(cfg)) config = detail::parse_json_text(go::read_file(cfg.string()), cfg.string());
  }

  // ---- pre / layer / post, hidden input and output ----
  enum class Part : std::uint8_t { pre, layer, post };
  std::vector<Part> part(static_cast<std::size_t>(n_nodes), Part::pre);
  for (std::int32_t v : order) {
    auto& n = nodes[static_cast<std::size_t>(v)];
    if (n.in_layer) {
      part[static_cast<std::size_t>(v)] = Part::layer;
      continue;
    }
    for (std::int32_t u : n.inputs)
      if (part[static_cast<std::size_t>(u)] != Part::pre) part[static_cast<std::size_t>(v)] = Part::post;
  }
  {
    std::int64_t in_layer = 0;
    for (const Part p : part) in_layer += p == Part::layer ? 1 : 0;
    const std::int64_t ops = n_nodes + (layers - 1) * in_layer;
    GO_CHECK(ops <= kMaxGeneratedOps, source, ": ", layers, " copies of its ", in_layer, "-node layer make ", ops,
             " ops, more than ", kMaxGeneratedOps, "; ask for fewer layers");
  }
  std::int32_t hidden_out = -1, hidden_in = -1;
  std::vector<char> side_out(static_cast<std::size_t>(n_nodes), 0);
  if (!traced_whole) {
    for (std::int32_t v = 0; v < n_nodes; ++v) {
      const auto& n = nodes[static_cast<std::size_t>(v)];
      for (std::int32_t u : n.inputs) {
        const auto pu = part[static_cast<std::size_t>(u)], pv = part[static_cast<std::size_t>(v)];
        GO_CHECK(!(pv == Part::layer && pu == Part::post), source, ": layer node '", n.name, "' reads '",
                 nodes[static_cast<std::size_t>(u)].name, "', which is computed after the layer");
        if (pu != Part::layer || pv != Part::post) continue;
        if (n.op == "output") {
          side_out[static_cast<std::size_t>(u)] = 1;
        } else {
          GO_CHECK(hidden_out < 0 || hidden_out == u, source, ": the layer has two outputs read by the rest of the model ('",
                   nodes[static_cast<std::size_t>(hidden_out)].name, "' and '", nodes[static_cast<std::size_t>(u)].name,
                   "'); cannot chain copies of it");
          hidden_out = u;
        }
      }
    }
    if (hidden_out < 0) {  // only `output` reads the layer: its output is the one node it reads
      std::int32_t count = 0;
      for (std::int32_t v = 0; v < n_nodes; ++v)
        if (side_out[static_cast<std::size_t>(v)]) hidden_out = v, ++count;
      GO_CHECK(count <= 1, source, ": the layer has ", count, " outputs and no node after it but `output` reads it; ",
               "cannot tell which one the next layer reads");
    }
    GO_CHECK(hidden_out >= 0, source, ": no node after the layer reads it; cannot find the layer's output");
    side_out[static_cast<std::size_t>(hidden_out)] = 0;
    const auto& ho = nodes[static_cast<std::size_t>(hidden_out)];
    for (std::int32_t v = 0; v < n_nodes; ++v) {
      if (part[static_cast<std::size_t>(v)] != Part::layer) continue;
      for (std::int32_t u : nodes[static_cast<std::size_t>(v)].inputs) {
        const auto& un = nodes[static_cast<std::size_t>(u)];
        if (part[static_cast<std::size_t>(u)] == Part::pre && un.tensor_out && un.out_shape == ho.out_shape)
          hidden_in = std::max(hidden_in, u);
      }
    }
    GO_CHECK(hidden_in >= 0, source, ": no node before the layer has the shape of its output '", ho.name,
             "'; cannot chain copies of it");
  }

  // ---- op specs ----
  GraphInfo info;
  info.source = source;
  info.format = "neusight";
  info.name = model.empty() ? stem : model;
  for (const auto& n : nodes)
    if (n.op == "placeholder" && !n.out_shape.empty()) {
      info.batch = n.out_shape[0];
      break;
    }
  GraphBuilder b(info);
  // new op id of (row, copy): pre/post nodes have one, layer nodes one per copy
  std::vector<std::vector<std::int64_t>> id(static_cast<std::size_t>(n_nodes));
  const std::string token0 = ns::replace_all(container, ".", "_") + "_0_";
  auto add = [&](std::int32_t v, std::int32_t copy) {
    const ns::Node& n = nodes[static_cast<std::size_t>(v)];
    const bool in_layer = part[static_cast<std::size_t>(v)] == Part::layer;
    OpSpec s;
    s.id = static_cast<std::int64_t>(b.size());
    s.name = n.name;
    std::string param_name = n.target;
    if (in_layer && layers > 1) {
      const std::string c = std::to_string(copy);
      const std::string token = ns::replace_all(container, ".", "_") + "_" + c + "_";
      s.name = n.name.find(token0) != std::string::npos ? ns::replace_all(n.name, token0, token)
                                                         : container + "." + c + "/" + n.name;
      param_name = ns::replace_all(param_name, container + ".0.", container + "." + c + ".");
      if (param_name == container + ".0") param_name = container + "." + c;
    }
    s.kind = ns::fx_kind(n.op, n.callee, n.tensor_out);
    // In inference, dropout is the identity and split / getitem (the models index with slices) return
    // views: no data moves. Training keeps their kinds: the dropout mask is a kernel, and the gradients
    // of split and getitem (cat, scatter into zeros) are copies.
    if (!training && (s.kind == OpKind::dropout || s.kind == OpKind::split || s.kind == OpKind::slice))
      s.kind = OpKind::reshape;
    // A cast to the dtype its input already has returns the input (PyTorch's `to`, `type`, `float`
    // ... make no copy then): GPT-2's attention casts its batch x heads x seq^2 scores twice per
    // layer this way, 11 us measured, which the roofline counted as two full passes over them.
    if (s.kind == OpKind::elementwise && ns::is_cast(n.callee) && n.tensor_out && !n.inputs.empty()) {
      const ns::Node& src = nodes[static_cast<std::size_t>(n.inputs[0])];
      if (src.tensor_out && src.dtype == n.dtype && src.out_shape == n.out_shape) s.kind = OpKind::reshape;
    }
    s.time = n.fw * 1e-3;
    if (training) s.backward_time = n.bw * 1e-3;
    TensorSpec t;
    // A split's tuple holds float views (it carries gradients); other Python values are integers.
    t.dtype = n.tensor_out ? n.dtype : n.callee == "split" || n.callee == "chunk" || n.callee == "unbind" ? ElemType::f32 : ElemType::i64;
    if (n.tensor_out) {
      t.shape = n.out_shape;
    } else {
      t.shape_known = false;
      std::int64_t bytes = 0;  // a Python value; a split's tuple holds views of its input
      if (s.kind == OpKind::split && !n.in_shapes.empty())
        bytes = static_cast<std::int64_t>(ns::numel(n.in_shapes[0])) * elem_size(ElemType::f32);
      t.bytes = bytes;
    }
    s.outputs.push_back(std::move(t));
    s.flops = n.tensor_out ? ns::fx_flops(s.kind, n.callee, n.out_shape, n.in_shapes) : 0.0;
    // parameters
    const std::int64_t es = elem_size(n.tensor_out ? n.dtype : ElemType::f32);
    const std::int64_t width = n.out_shape.empty() ? 0 : n.out_shape.back();
    std::int64_t pbytes = 0;
    if (n.op == "get_attr" && n.tensor_out && ns::is_float(n.dtype)) {
      pbytes = static_cast<std::int64_t>(ns::numel(n.out_shape)) * es;
    } else if (n.op == "call_module" && n.tensor_out) {
      if (n.callee == "Linear" && !n.in_shapes.empty() && !n.in_shapes[0].empty())
        pbytes = (n.in_shapes[0].back() + 1) * width * es;
      else if (n.callee == "LayerNorm")
        pbytes = 2 * width * es;
      else if (n.callee == "Embedding") {
        auto rows_cfg = ns::embedding_rows(config, n.target);
        const std::int64_t rows_n =
            rows_cfg ? *rows_cfg : (n.in_shapes.empty() ? 0 : static_cast<std::int64_t>(ns::numel(n.in_shapes[0])));
        pbytes = rows_n * width * es;
      }
    }
    if (pbytes > 0) s.params.push_back(ParamSpec{param_name, pbytes});
    // inputs
    for (std::int32_t u : n.inputs) {
      const auto pu = part[static_cast<std::size_t>(u)];
      std::int64_t src;
      if (pu == Part::layer) {
        const std::int32_t k = in_layer ? copy : (side_out[static_cast<std::size_t>(u)] ? -1 : layers - 1);
        if (k < 0) {  // `output` reads a cache tensor from every copy
          for (std::int64_t x : id[static_cast<std::size_t>(u)]) s.inputs.push_back(TensorRef{x, 0});
          continue;
        }
        src = id[static_cast<std::size_t>(u)][static_cast<std::size_t>(k)];
      } else if (in_layer && copy > 0 && u == hidden_in) {
        src = id[static_cast<std::size_t>(hidden_out)][static_cast<std::size_t>(copy - 1)];
      } else {
        src = id[static_cast<std::size_t>(u)][0];
      }
      s.inputs.push_back(TensorRef{src, 0});
    }
    id[static_cast<std::size_t>(v)].push_back(s.id);
    b.add_op(std::move(s));
  };
  for (std::int32_t v : order)
    if (part[static_cast<std::size_t>(v)] == Part::pre) add(v, 0);
  for (std::int32_t copy = 0; copy < layers; ++copy)
    for (std::int32_t v : order)
      if (part[static_cast<std::size_t>(v)] == Part::layer) add(v, copy);
  for (std::int32_t v : order)
    if (part[static_cast<std::size_t>(v)] == Part::post) add(v, 0);
  return b.build();
}

inline OpGraph load_neusight(const std::string& path, const NeuSightOptions& opts = {}) {
  return parse_neusight(detail::read_file(path), path, opts);
}

}  // namespace go
