#pragma once
// OpGraph: the dataflow-graph IR every later layer (features, simulator, baselines) reads.
//
// Layout, chosen for a simulator that walks the graph millions of times and graphs of 80,000+ ops:
//   - ops are dense indices 0..n-1 (OpId); an op's original id from its file is `source_id`;
//   - tensors are dense indices (TensorId); an op's outputs are a contiguous run of tensors;
//   - adjacency is CSR in both directions (offset + index arrays), each edge carrying the tensor it
//     moves (-1 for a control dependency); parallel data edges between two ops are kept, one per
//     tensor, so transfer volumes add up;
//   - the topological order and each op's position in it are computed once, at build time.
// Graphs are immutable once built; GraphBuilder validates everything on build() and every error is
// a go::Error whose one-line message starts with the graph's source (its file) and names the op.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "go/core/error.hpp"
#include "go/core/hash.hpp"
#include "go/graph/op_kind.hpp"

namespace go {

using OpId = std::int32_t;
using TensorId = std::int32_t;

// "No measured time" marker for Op::time / Op::backward_time.
inline constexpr double kNoTime = -1.0;
// Per-op limits far above any real op (a day of one kernel, 1e30 FLOPs), so that sums over a graph
// (critical paths, ranks, step times) stay finite; go::Cluster bounds the rates the same way.
inline constexpr double kMaxOpSeconds = 86400.0;
inline constexpr double kMaxOpFlops = 1e30;
// Byte counts: one field (a parameter, an output, an op's scratch) at most 2^50 B (1 PiB), all of a
// graph's bytes together at most 2^56 B, so that every sum the simulator and the reports form
// (per-device peaks, optimizer state on top of the weights, totals) stays far inside int64.
inline constexpr std::int64_t kMaxBytes = std::int64_t{1} << 50;
inline constexpr std::int64_t kMaxGraphBytes = std::int64_t{1} << 56;

// The most ops of a graph generated from a few numbers (a zoo workload's sizes, the layer count of
// a NeuSight profile): larger ones are errors before they are built. The paper's largest training
// graph has about 80,000 ops; a count of 10^6 copies or steps would otherwise build for minutes
// and fill the memory before anything could say why.
inline constexpr std::int64_t kMaxGeneratedOps = 2'000'000;

// Where a graph came from and what it was profiled for.
struct GraphInfo {
  std::string name;                 // model name ("resnet50")
  std::string source;               // file it was read from; prefixes every error message
  std::string format;               // "onnx", "json", "pipedream", "dnn-partitioning", "builder"
  std::int64_t batch = 0;           // batch size of the data inputs, 0 when unknown
  std::int32_t num_devices = 0;     // accelerators the profile targets (dnn-partitioning maxFPGAs)
  std::int64_t device_memory = 0;   // bytes per accelerator (dnn-partitioning maxSizePerFPGA)
  std::int32_t num_cpus = 0;        // dnn-partitioning maxCPUs
  bool training = false;            // the graph holds backward and update ops
};

// An output tensor of an op.
struct TensorInfo {
  OpId producer = -1;
  std::int32_t output_index = 0;
  ElemType dtype = ElemType::f32;
  std::int8_t rank = -1;            // -1: shape unknown
  std::int32_t dims_offset = 0;     // into the graph's dims array
  std::int64_t bytes = 0;
};

// One op. Cost fields are per execution of the op (the whole batch).
struct Op {
  OpId id = 0;                      // dense index == position in OpGraph::ops()
  OpKind kind = OpKind::other;
  OpRole role = OpRole::forward;
  std::int32_t colocation = -1;     // colocation group, -1 none
  TensorId first_output = 0;        // outputs are tensors [first_output, first_output + num_outputs)
  std::int32_t num_outputs = 0;
  double flops = 0;                 // floating-point operations (2 per multiply-accumulate)
  std::int64_t param_bytes = 0;     // resident parameters (weights) owned by this op
  std::int64_t temp_bytes = 0;      // scratch memory while the op runs
  std::int64_t input_bytes = 0;     // bytes of the distinct tensors it reads (derived)
  std::int64_t output_bytes = 0;    // bytes of the tensors it writes (derived)
  double time = kNoTime;            // measured time in seconds, kNoTime when absent
  double backward_time = kNoTime;   // measured time of its gradient op (PipeDream), seconds
  std::int64_t source_id = 0;       // id in the file it came from

  bool has_time() const { return time >= 0; }
  bool has_backward_time() const { return backward_time >= 0; }
};

// A parameter (weight tensor); every op's param_bytes is the sum of its parameters.
struct ParamInfo {
  std::string name;
  std::int64_t bytes = 0;
  OpId op = -1;                     // the op that owns (reads) it
};

// ---- builder input ---------------------------------------------------------
struct TensorSpec {
  std::vector<std::int64_t> shape;  // dims (all >= 0); ignored when !shape_known
  bool shape_known = true;
  ElemType dtype = ElemType::f32;
  std::optional<std::int64_t> bytes;  // default: numel * element size (0 when the shape is unknown)
};

// A data input: output `output` of the op whose id (as given to the builder) is `op`.
struct TensorRef {
  std::int64_t op = -1;
  std::int32_t output = 0;
};

struct ParamSpec {
  std::string name;
  std::int64_t bytes = 0;
};

struct OpSpec {
  std::int64_t id = -1;             // the op's id in its source; -1: its insertion position
  std::string name;
  OpKind kind = OpKind::other;
  OpRole role = OpRole::forward;
  double flops = 0;
  std::int64_t param_bytes = 0;     // used when params is empty (one parameter named after the op)
  std::int64_t temp_bytes = 0;
  double time = kNoTime;
  double backward_time = kNoTime;
  std::int32_t colocation = -1;
  std::vector<TensorSpec> outputs;
  std::vector<TensorRef> inputs;    // data inputs, in operand order
  std::vector<std::int64_t> control_inputs;  // ops that must finish first, no data
  std::vector<ParamSpec> params;
};

class GraphBuilder;

class OpGraph {
 public:
  OpGraph() = default;

  const GraphInfo& info() const { return info_; }
  GraphInfo& mutable_info() { return info_; }

  std::int32_t num_ops() const { return static_cast<std::int32_t>(ops_.size()); }
  std::int64_t num_edges() const { return static_cast<std::int64_t>(out_ops_.size()); }
  std::int32_t num_tensors() const { return static_cast<std::int32_t>(tensors_.size()); }
  std::int32_t num_params() const { return static_cast<std::int32_t>(params_.size()); }

  const Op& op(OpId i) const { return ops_[static_cast<std::size_t>(i)]; }
  std::span<const Op> ops() const { return ops_; }
  const std::string& name(OpId i) const { return names_[static_cast<std::size_t>(i)]; }

  const TensorInfo& tensor(TensorId t) const { return tensors_[static_cast<std::size_t>(t)]; }
  std::span<const TensorInfo> tensors() const { return tensors_; }
  std::span<const TensorInfo> outputs(OpId i) const {
    const Op& o = op(i);
    return std::span<const TensorInfo>(tensors_).subspan(static_cast<std::size_t>(o.first_output),
                                                         static_cast<std::size_t>(o.num_outputs));
  }
  // Dims of a tensor (empty for a scalar or an unknown shape: check TensorInfo::rank).
  std::span<const std::int64_t> shape(TensorId t) const {
    const TensorInfo& ti = tensor(t);
    if (ti.rank <= 0) return {};
    return std::span<const std::int64_t>(dims_).subspan(static_cast<std::size_t>(ti.dims_offset),
                                                        static_cast<std::size_t>(ti.rank));
  }
  std::int64_t numel(TensorId t) const {
    std::int64_t n = 1;
    for (auto d : shape(t)) n *= d;
    return tensor(t).rank < 0 ? 0 : n;
  }

  // Data inputs of an op in operand order (a tensor read twice appears twice).
  std::span<const TensorId> inputs(OpId i) const { return range(input_offsets_, input_tensors_, i); }
  // The producer of each of inputs(i), in the same order: the decoders that visit every op's
  // producers read them here, not through tensor(t), whose records lie scattered.
  std::span<const OpId> input_producers(OpId i) const { return range(input_offsets_, input_producers_, i); }

  // CSR adjacency. succ(i)[k] is reached by an edge carrying succ_tensors(i)[k] (-1: control edge).
  std::span<const OpId> succ(OpId i) const { return range(out_offsets_, out_ops_, i); }
  std::span<const TensorId> succ_tensors(OpId i) const { return range(out_offsets_, out_tensors_, i); }
  std::span<const OpId> pred(OpId i) const { return range(in_offsets_, in_ops_, i); }
  std::span<const TensorId> pred_tensors(OpId i) const { return range(in_offsets_, in_tensors_, i); }
  std::int32_t out_degree(OpId i) const { return static_cast<std::int32_t>(succ(i).size()); }
  std::int32_t in_degree(OpId i) const { return static_cast<std::int32_t>(pred(i).size()); }
  // Raw CSR arrays (offsets have num_ops() + 1 entries).
  std::span<const std::int64_t> out_offsets() const { return out_offsets_; }
  std::span<const OpId> out_ops() const { return out_ops_; }
  std::span<const std::int64_t> in_offsets() const { return in_offsets_; }
  std::span<const OpId> in_ops() const { return in_ops_; }
  std::span<const TensorId> in_tensors() const { return in_tensors_; }
  std::span<const TensorId> out_tensors() const { return out_tensors_; }

  // Topological order (Kahn's algorithm, ties broken by id) and each op's position in it.
  std::span<const OpId> topo_order() const { return topo_order_; }
  std::int32_t topo_position(OpId i) const { return topo_pos_[static_cast<std::size_t>(i)]; }

  std::span<const ParamInfo> params() const { return params_; }
  std::span<const ParamInfo> op_params(OpId i) const { return range(param_offsets_, params_, i); }

  // First op with this name.
  std::optional<OpId> find(std::string_view name) const {
    for (std::size_t i = 0; i < names_.size(); ++i)
      if (names_[i] == name) return static_cast<OpId>(i);
    return std::nullopt;
  }

  // Re-checks every invariant (sizes, CSR consistency, topological order); throws go::Error naming
  // the offending op. build() already guarantees them; this is for graphs assembled by hand elsewhere.
  void validate() const;

  // What fusion reads of the graph with its ops renumbered in topological order (op i of the copy
  // is topo_order()[i]): kinds, roles, outputs with their dtypes and bytes, data inputs in operand
  // order and control edges; no names, shapes, parameters or costs. The copy's topological order
  // is the identity. The same graph as GraphBuilder would build from those specs, made from this
  // one's arrays in O(ops + edges) (go/graph/fusion_rules.hpp, topological_fusion_copy).
  OpGraph topological_skeleton() const;

  // "<source>: " for error messages.
  std::string where() const { return (info_.source.empty() ? std::string("graph") : info_.source) + ": "; }
  // "op 'conv1' (id 7)" with the op's id in its source.
  std::string label(OpId i) const {
    return "op '" + name(i) + "' (id " + std::to_string(op(i).source_id) + ")";
  }

 private:
  friend class GraphBuilder;
  // The out-edges from the in-edges (counting sort on the source) and the topological order (Kahn,
  // FIFO seeded in id order). Returns the in-degrees left where the order is short of the ops (a
  // cycle), else nothing.
  std::vector<std::int32_t> index_edges();
  template <class T>
  static std::span<const T> range(const std::vector<std::int64_t>& off, const std::vector<T>& v, OpId i) {
    auto b = static_cast<std::size_t>(off[static_cast<std::size_t>(i)]);
    auto e = static_cast<std::size_t>(off[static_cast<std::size_t>(i) + 1]);
    return std::span<const T>(v.data() + b, e - b);
  }

  GraphInfo info_;
  std::vector<Op> ops_;
  std::vector<std::string> names_;
  std::vector<TensorInfo> tensors_;
  std::vector<std::int64_t> dims_;
  std::vector<std::int64_t> input_offsets_{0};
  std::vector<TensorId> input_tensors_;
  std::vector<OpId> input_producers_;  // per entry of input_tensors_
  std::vector<std::int64_t> out_offsets_{0};
  std::vector<OpId> out_ops_;
  std::vector<TensorId> out_tensors_;
  std::vector<std::int64_t> in_offsets_{0};
  std::vector<OpId> in_ops_;
  std::vector<TensorId> in_tensors_;
  std::vector<OpId> topo_order_;
  std::vector<std::int32_t> topo_pos_;
  std::vector<std::int64_t> param_offsets_{0};
  std::vector<ParamInfo> params_;
};

namespace detail {
// Names end up in JSON (graph files, gopt info --json), which must be UTF-8.
inline bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (std::size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return false;
    i += len;
  }
  return true;
}

inline std::string op_label(const std::string& name, std::int64_t id) {
  return "op '" + name + "' (id " + std::to_string(id) + ")";
}

// numel * elem_size with overflow checks; returns nullopt on overflow.
inline std::optional<std::int64_t> checked_bytes(std::span<const std::int64_t> dims, std::int64_t esize) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max() / 16;
  std::int64_t n = esize;
  for (auto d : dims) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > kMax / d) return std::nullopt;
    n *= d;
  }
  return n;
}

// Finds a cycle among ops not yet emitted by Kahn's algorithm (remaining[i] != 0) and returns it
// as op ids (first == last).
inline std::vector<OpId> find_cycle(std::span<const std::int64_t> in_off, std::span<const OpId> in_ops,
                                    const std::vector<std::int32_t>& remaining) {
  const auto n = static_cast<OpId>(remaining.size());
  OpId start = -1;
  for (OpId i = 0; i < n; ++i)
    if (remaining[static_cast<std::size_t>(i)] > 0) {
      start = i;
      break;
    }
  if (start < 0) return {};
  // Walk backwards through remaining predecessors; every remaining op has one, so we revisit an op.
  std::vector<std::int32_t> seen(static_cast<std::size_t>(n), -1);
  std::vector<OpId> path;
  OpId cur = start;
  while (seen[static_cast<std::size_t>(cur)] < 0) {
    seen[static_cast<std::size_t>(cur)] = static_cast<std::int32_t>(path.size());
    path.push_back(cur);
    OpId next = -1;
    for (auto e = in_off[static_cast<std::size_t>(cur)]; e < in_off[static_cast<std::size_t>(cur) + 1]; ++e) {
      OpId p = in_ops[static_cast<std::size_t>(e)];
      if (remaining[static_cast<std::size_t>(p)] > 0) {
        next = p;
        break;
      }
    }
    if (next < 0) return {cur, cur};  // cannot happen for a true remainder; be safe
    cur = next;
  }
  std::vector<OpId> cyc(path.begin() + seen[static_cast<std::size_t>(cur)], path.end());
  std::reverse(cyc.begin(), cyc.end());  // predecessor walk -> forward order
  cyc.push_back(cyc.front());
  return cyc;
}

}  // namespace detail

// Collects ops, then build() resolves ids, checks everything and lays out the CSR graph.
class GraphBuilder {
 public:
  explicit GraphBuilder(GraphInfo info = {}) : info_(std::move(info)) {
    if (info_.format.empty()) info_.format = "builder";
  }

  void reserve(std::size_t n) { specs_.reserve(n); }
  std::size_t size() const { return specs_.size(); }
  GraphInfo& info() { return info_; }

  // Adds an op; returns its dense index (its OpId in the built graph).
  OpId add_op(OpSpec spec) {
    GO_CHECK(specs_.size() < static_cast<std::size_t>(std::numeric_limits<OpId>::max()), where(),
             "too many ops");
    specs_.push_back(std::move(spec));
    return static_cast<OpId>(specs_.size() - 1);
  }
  OpSpec& spec(OpId i) { return specs_[static_cast<std::size_t>(i)]; }

  // Validates and builds. The builder is left empty.
  OpGraph build();

 private:
  std::string where() const { return (info_.source.empty() ? std::string("graph") : info_.source) + ": "; }
  std::string label(std::size_t i) const {
    const OpSpec& s = specs_[i];
    return detail::op_label(s.name, s.id >= 0 ? s.id : static_cast<std::int64_t>(i));
  }

  GraphInfo info_;
  std::vector<OpSpec> specs_;
};

inline void OpGraph::validate() const {
  const std::string at = where();
  const auto n = static_cast<std::size_t>(num_ops());
  GO_CHECK(names_.size() == n && topo_order_.size() == n && topo_pos_.size() == n, at, "inconsistent graph arrays");
  GO_CHECK(out_offsets_.size() == n + 1 && in_offsets_.size() == n + 1 && input_offsets_.size() == n + 1 &&
               param_offsets_.size() == n + 1,
           at, "inconsistent CSR offsets");
  GO_CHECK(out_ops_.size() == in_ops_.size(), at, "out-edges and in-edges differ in number");
  GO_CHECK(input_producers_.size() == input_tensors_.size(), at, "inconsistent input arrays");
  std::vector<std::int32_t> ids_seen(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const Op& o = ops_[i];
    const auto id = static_cast<OpId>(i);
    GO_CHECK(o.id == id, at, label(id), " is stored at index ", i);
    GO_CHECK(std::isfinite(o.flops) && o.flops >= 0 && o.flops <= kMaxOpFlops, at, label(id),
             " has negative or invalid flops ", o.flops, " (at most ", kMaxOpFlops, ")");
    GO_CHECK(o.param_bytes >= 0 && o.param_bytes <= kMaxGraphBytes, at, label(id), " has negative or invalid param_bytes ",
             o.param_bytes);
    GO_CHECK(o.temp_bytes >= 0 && o.temp_bytes <= kMaxBytes, at, label(id), " has negative or invalid temp_bytes ",
             o.temp_bytes);
    GO_CHECK(o.time == kNoTime || (o.time >= 0 && o.time <= kMaxOpSeconds), at, label(id), " has negative or invalid time ",
             o.time, " (at most ", kMaxOpSeconds, " s)");
    GO_CHECK(o.first_output >= 0 && o.num_outputs >= 0 &&
                 static_cast<std::size_t>(o.first_output) + static_cast<std::size_t>(o.num_outputs) <= tensors_.size(),
             at, label(id), " has outputs out of range");
    for (const auto& t : outputs(id))
      GO_CHECK(t.bytes >= 0 && t.bytes <= kMaxBytes, at, label(id), " has an output of negative or invalid size ", t.bytes);
    for (auto e = out_offsets_[i]; e < out_offsets_[i + 1]; ++e) {
      const OpId w = out_ops_[static_cast<std::size_t>(e)];
      GO_CHECK(w >= 0 && static_cast<std::size_t>(w) < n, at, label(id), " has an edge to unknown op index ", w);
      GO_CHECK(topo_pos_[i] < topo_pos_[static_cast<std::size_t>(w)], at, "cycle or bad order through ", label(id),
               " -> ", label(w));
    }
    for (auto e = in_offsets_[i]; e < in_offsets_[i + 1]; ++e) {
      const OpId u = in_ops_[static_cast<std::size_t>(e)];
      GO_CHECK(u >= 0 && static_cast<std::size_t>(u) < n, at, label(id), " has an edge from unknown op index ", u);
      const TensorId t = in_tensors_[static_cast<std::size_t>(e)];
      GO_CHECK(t == -1 || (t >= 0 && static_cast<std::size_t>(t) < tensors_.size() &&
                           tensors_[static_cast<std::size_t>(t)].producer == u),
               at, label(id), " has an edge whose tensor does not come from ", label(u));
    }
    const auto tp = static_cast<std::size_t>(topo_order_[i]);
    GO_CHECK(tp < n && ids_seen[tp]++ == 0, at, "topological order repeats or misses ops");
  }
}

// A checksum of what a simulation of `g` reads: per op its kind, role, FLOPs, byte counts, measured
// times, colocation group, output sizes and predecessors. Two graphs of one name and op count that
// differ in a size (another hidden width, batch or file) differ here; a checkpoint keeps it so that
// a resumed run cannot continue on another graph.
inline std::uint64_t graph_fingerprint(const OpGraph& g) {
  std::uint64_t h = kFnvOffset;
  auto mix = [&h](const auto& v) { h = fnv1a64(&v, sizeof v, h); };
  mix(g.num_ops());
  for (const Op& o : g.ops()) {
    mix(static_cast<std::uint8_t>(o.kind));
    mix(static_cast<std::uint8_t>(o.role));
    mix(o.flops);
    mix(o.param_bytes);
    mix(o.temp_bytes);
    mix(o.time);
    mix(o.backward_time);
    mix(o.colocation);
    mix(o.num_outputs);
    for (const TensorInfo& t : g.outputs(o.id)) mix(t.bytes);
    const auto preds = g.pred(o.id);
    mix(preds.size());
    for (OpId p : preds) mix(p);
  }
  return h;
}

// The TensorSpec that recreates tensor `t` of `g` (dtype, bytes, shape when known).
inline TensorSpec tensor_spec(const OpGraph& g, TensorId t) {
  const TensorInfo& ti = g.tensor(t);
  TensorSpec ts;
  ts.dtype = ti.dtype;
  ts.bytes = ti.bytes;
  ts.shape_known = ti.rank >= 0;
  auto sh = g.shape(t);
  ts.shape.assign(sh.begin(), sh.end());
  return ts;
}

// The OpSpec that rebuilds op `i` of `g` (ids, inputs and control inputs refer to source ids), for
// transformations that copy a graph into a GraphBuilder.
inline OpSpec op_spec(const OpGraph& g, OpId i) {
  const Op& o = g.op(i);
  OpSpec s;
  s.id = o.source_id;
  s.name = g.name(i);
  s.kind = o.kind;
  s.role = o.role;
  s.flops = o.flops;
  s.temp_bytes = o.temp_bytes;
  s.time = o.time;
  s.backward_time = o.backward_time;
  s.colocation = o.colocation;
  for (TensorId t = o.first_output; t < o.first_output + o.num_outputs; ++t) s.outputs.push_back(tensor_spec(g, t));
  for (TensorId t : g.inputs(i)) {
    const TensorInfo& ti = g.tensor(t);
    s.inputs.push_back(TensorRef{g.op(ti.producer).source_id, ti.output_index});
  }
  auto preds = g.pred(i);
  auto tens = g.pred_tensors(i);
  for (std::size_t k = 0; k < preds.size(); ++k)
    if (tens[k] < 0) s.control_inputs.push_back(g.op(preds[k]).source_id);
  for (const ParamInfo& p : g.op_params(i)) s.params.push_back(ParamSpec{p.name, p.bytes});
  return s;
}

// A depth-first topological order: Kahn's algorithm with a stack (the op made ready last runs
// next; ops ready at the start in id order, the lowest id first). It keeps chains and branches
// together, unlike OpGraph::topo_order (Kahn with a queue by id, which interleaves independent
// chains), so contiguous runs of it are meaningful placement blocks.
// `sources_first`: graph inputs and constants (weights) come first, in id order, and the search
// starts from the ops they make ready. Why: a weight made before its layer is otherwise reached
// only after every input made before it, so on a graph of independent streams through shared
// layers (WaveNet's time chunks, a segment of Transformer-XL) the search advances every stream one
// layer at a time; taking the weights as given, it runs one stream through every layer (and, on
// the way back, its gradients) before the next.
inline std::vector<OpId> depth_first_topo_order(const OpGraph& g, bool sources_first = false) {
  const auto n = static_cast<std::size_t>(g.num_ops());
  std::vector<std::int32_t> missing(n);
  std::vector<OpId> stack, order;
  order.reserve(n);
  auto source = [&](std::size_t v) {
    const OpKind k = g.op(static_cast<OpId>(v)).kind;
    return k == OpKind::input || k == OpKind::constant;
  };
  for (std::size_t v = 0; v < n; ++v) missing[v] = g.in_degree(static_cast<OpId>(v));
  if (sources_first) {
    for (std::size_t v = 0; v < n; ++v)
      if (missing[v] == 0 && source(v)) {
        order.push_back(static_cast<OpId>(v));
        missing[v] = -1;  // placed: not searched from
      }
    for (std::size_t k = 0; k < order.size(); ++k)
      for (OpId w : g.succ(order[k])) --missing[static_cast<std::size_t>(w)];
  }
  for (std::size_t v = n; v-- > 0;)
    if (missing[v] == 0) stack.push_back(static_cast<OpId>(v));
  while (!stack.empty()) {
    const OpId v = stack.back();
    stack.pop_back();
    order.push_back(v);
    const auto succ = g.succ(v);
    for (auto it = succ.rbegin(); it != succ.rend(); ++it)
      if (--missing[static_cast<std::size_t>(*it)] == 0) stack.push_back(*it);
  }
  GO_CHECK(order.size() == n, g.where(), "depth_first_topo_order: the graph has a cycle");
  return order;
}

}  // namespace go

namespace go {

// Program order: the order in which an eager framework would issue the ops of one step. Forward
// ops in depth_first_topo_order (a model's code runs one block to its end before the next); then
// backward and update ops in the mirror of the forward ops they differentiate (autodiff walks the
// forward tape backwards): a gradient op takes the latest forward activation it reads, a gradient
// sum or update that reads no forward activation takes the earliest key of its producers (it runs
// right after the last of them); ties in depth-first order. Schedulers use it to break ties: on
// wide graphs (many independent segments or time steps) first-ready order interleaves every
// branch, so a device finishes its first block only at the end and the next device waits.
inline std::vector<OpId> program_order(const OpGraph& g) {
  const auto n = static_cast<std::size_t>(g.num_ops());
  const std::vector<OpId> dfs = depth_first_topo_order(g);
  std::vector<std::int64_t> pos(n), key(n, -1);
  for (std::size_t i = 0; i < n; ++i) pos[static_cast<std::size_t>(dfs[i])] = static_cast<std::int64_t>(i);
  std::vector<OpId> seq, later;
  seq.reserve(n);
  for (OpId v : dfs) {
    const auto i = static_cast<std::size_t>(v);
    const Op& o = g.op(v);
    if (o.role == OpRole::forward) {
      key[i] = pos[i];
      seq.push_back(v);
      continue;
    }
    std::int64_t act = -1, prod = std::numeric_limits<std::int64_t>::max();
    for (OpId u : g.pred(v)) {
      const Op& p = g.op(u);
      if (p.role == OpRole::forward) {
        if (p.kind != OpKind::constant && p.kind != OpKind::input) act = std::max(act, pos[static_cast<std::size_t>(u)]);
      } else {
        prod = std::min(prod, key[static_cast<std::size_t>(u)]);
      }
    }
    key[i] = act >= 0 ? act : (prod != std::numeric_limits<std::int64_t>::max() ? prod : -1);
    later.push_back(v);
  }
  std::stable_sort(later.begin(), later.end(), [&](OpId a, OpId b) {
    return key[static_cast<std::size_t>(a)] > key[static_cast<std::size_t>(b)];
  });
  seq.insert(seq.end(), later.begin(), later.end());
  return seq;
}

}  // namespace go
