// GraphBuilder::build (go/graph/graph.hpp), compiled once into libgo.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "go/core/error.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/op_kind.hpp"

namespace go {

OpGraph GraphBuilder::build() {
  OpGraph g;
  g.info_ = std::move(info_);
  info_ = {};
  std::vector<OpSpec> specs = std::move(specs_);
  specs_.clear();
  const std::string at = (g.info_.source.empty() ? std::string("graph") : g.info_.source) + ": ";
  GO_CHECK(detail::valid_utf8(g.info_.name), at, "the graph's name is not valid UTF-8");
  const std::size_t n = specs.size();
  auto lab = [&](std::size_t i) {
    return detail::op_label(specs[i].name, specs[i].id >= 0 ? specs[i].id : static_cast<std::int64_t>(i));
  };

  // Byte fields are bounded one by one and in total (kMaxBytes, kMaxGraphBytes) so that no sum over
  // the graph can overflow; each addition is at most 2^50, the total at most 2^56 before it.
  std::int64_t graph_bytes = 0;
  auto check_bytes = [&](std::int64_t v, std::size_t i, const char* what, bool counted) {
    GO_CHECK(v >= 0, at, lab(i), " has negative ", what, " ", v);
    GO_CHECK(v <= kMaxBytes, at, lab(i), " has ", what, " ", v, ", more than the ", kMaxBytes,
             " B (1 PiB) one tensor may hold");
    if (!counted) return;
    graph_bytes += v;
    GO_CHECK(graph_bytes <= kMaxGraphBytes, at, "the graph's parameters, outputs and scratch add up to more than ",
             kMaxGraphBytes, " B (64 PiB) at ", lab(i), "; byte counts this large cannot be simulated");
  };

  // ---- ids -> dense indices ----
  bool identity_ids = true;
  for (std::size_t i = 0; i < n; ++i)
    if (specs[i].id != -1 && specs[i].id != static_cast<std::int64_t>(i)) {
      identity_ids = false;
      break;
    }
  std::unordered_map<std::int64_t, OpId> id_map;
  if (!identity_ids) {
    id_map.reserve(n * 2);
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t id = specs[i].id >= 0 ? specs[i].id : static_cast<std::int64_t>(i);
      GO_CHECK(specs[i].id >= -1, at, lab(i), " has a negative id");
      auto [it, fresh] = id_map.emplace(id, static_cast<OpId>(i));
      GO_CHECK(fresh, at, "duplicate op id ", id, ": ", lab(static_cast<std::size_t>(it->second)), " and ", lab(i));
    }
  }
  auto resolve = [&](std::int64_t id, std::size_t user, const char* what) -> OpId {
    if (identity_ids) {
      GO_CHECK(id >= 0 && id < static_cast<std::int64_t>(n), at, lab(user), " references unknown op id ", id,
               " (", what, ")");
      return static_cast<OpId>(id);
    }
    auto it = id_map.find(id);
    GO_CHECK(it != id_map.end(), at, lab(user), " references unknown op id ", id, " (", what, ")");
    return it->second;
  };

  // ---- ops, outputs, params ----
  g.ops_.resize(n);
  g.names_.resize(n);
  g.param_offsets_.assign(n + 1, 0);
  std::size_t n_tensors = 0;
  for (auto& s : specs) n_tensors += s.outputs.size();
  g.tensors_.reserve(n_tensors);
  for (std::size_t i = 0; i < n; ++i) {
    OpSpec& s = specs[i];
    Op& o = g.ops_[i];
    o.id = static_cast<OpId>(i);
    o.kind = s.kind;
    o.role = s.role;
    o.source_id = s.id >= 0 ? s.id : static_cast<std::int64_t>(i);
    GO_CHECK(std::isfinite(s.flops) && s.flops >= 0 && s.flops <= kMaxOpFlops, at, lab(i),
             " has negative or invalid flops ", s.flops, " (at most ", kMaxOpFlops, ")");
    check_bytes(s.param_bytes, i, "param_bytes", s.params.empty());
    check_bytes(s.temp_bytes, i, "temp_bytes", true);
    GO_CHECK(s.time == kNoTime || (std::isfinite(s.time) && s.time >= 0 && s.time <= kMaxOpSeconds), at, lab(i),
             " has negative or invalid time ", s.time, " s (at most ", kMaxOpSeconds, ")");
    GO_CHECK(s.backward_time == kNoTime ||
                 (std::isfinite(s.backward_time) && s.backward_time >= 0 && s.backward_time <= kMaxOpSeconds),
             at, lab(i), " has negative or invalid backward time ", s.backward_time, " s (at most ", kMaxOpSeconds, ")");
    GO_CHECK(s.colocation >= -1, at, lab(i), " has negative colocation group ", s.colocation);
    o.flops = s.flops;
    o.temp_bytes = s.temp_bytes;
    o.time = s.time;
    o.backward_time = s.backward_time;
    o.colocation = s.colocation;
    o.first_output = static_cast<TensorId>(g.tensors_.size());
    o.num_outputs = static_cast<std::int32_t>(s.outputs.size());
    std::int64_t out_bytes = 0;
    for (std::size_t k = 0; k < s.outputs.size(); ++k) {
      const TensorSpec& ts = s.outputs[k];
      TensorInfo t;
      t.producer = static_cast<OpId>(i);
      t.output_index = static_cast<std::int32_t>(k);
      t.dtype = ts.dtype;
      if (ts.shape_known) {
        GO_CHECK(ts.shape.size() <= 127, at, lab(i), " output ", k, " has rank ", ts.shape.size(), " (max 127)");
        for (auto d : ts.shape) GO_CHECK(d >= 0, at, lab(i), " output ", k, " has negative dimension ", d);
        t.rank = static_cast<std::int8_t>(ts.shape.size());
        t.dims_offset = static_cast<std::int32_t>(g.dims_.size());
        g.dims_.insert(g.dims_.end(), ts.shape.begin(), ts.shape.end());
      }
      if (ts.bytes) {
        GO_CHECK(*ts.bytes >= 0, at, lab(i), " output ", k, " has negative size ", *ts.bytes, " bytes");
        check_bytes(*ts.bytes, i, "output bytes", true);
        t.bytes = *ts.bytes;
      } else if (ts.shape_known) {
        auto b = detail::checked_bytes(ts.shape, elem_size(ts.dtype));
        GO_CHECK(b.has_value() && *b <= kMaxBytes, at, lab(i), " output ", k, " is too large to count its bytes (",
                 "more than ", kMaxBytes, " B)");
        check_bytes(*b, i, "output bytes", true);
        t.bytes = *b;
      }
      out_bytes += t.bytes;
      g.tensors_.push_back(t);
    }
    o.output_bytes = out_bytes;
    // parameters
    std::int64_t pb = 0;
    if (s.params.empty()) {
      if (s.param_bytes > 0) g.params_.push_back(ParamInfo{s.name, s.param_bytes, static_cast<OpId>(i)});
      pb = s.param_bytes;
    } else {
      for (auto& p : s.params) {
        GO_CHECK(p.bytes >= 0, at, lab(i), " has parameter '", p.name, "' of negative size ", p.bytes);
        check_bytes(p.bytes, i, "parameter bytes", true);
        GO_CHECK(detail::valid_utf8(p.name), at, lab(i), " has a parameter whose name is not valid UTF-8");
        pb += p.bytes;
        g.params_.push_back(ParamInfo{std::move(p.name), p.bytes, static_cast<OpId>(i)});
      }
      GO_CHECK(s.param_bytes == 0 || s.param_bytes == pb, at, lab(i), " has param_bytes ", s.param_bytes,
               " but its parameters add up to ", pb);
    }
    o.param_bytes = pb;
    g.param_offsets_[i + 1] = static_cast<std::int64_t>(g.params_.size());
    GO_CHECK(detail::valid_utf8(s.name), at, lab(i), " has a name that is not valid UTF-8");
    g.names_[i] = s.name;
  }

  // ---- inputs and edges ----
  g.input_offsets_.assign(n + 1, 0);
  std::size_t n_inputs = 0;
  for (auto& s : specs) n_inputs += s.inputs.size();
  g.input_tensors_.reserve(n_inputs);
  g.input_producers_.reserve(n_inputs);
  // Edge list grouped by destination (in-CSR order).
  std::vector<OpId> e_src;
  std::vector<TensorId> e_tensor;
  e_src.reserve(n_inputs);
  e_tensor.reserve(n_inputs);
  g.in_offsets_.assign(n + 1, 0);
  for (std::size_t v = 0; v < n; ++v) {
    const OpSpec& s = specs[v];
    const std::size_t first_edge = e_src.size();
    auto has_edge = [&](OpId u, TensorId t) {
      for (std::size_t e = first_edge; e < e_src.size(); ++e)
        if (e_src[e] == u && (e_tensor[e] == t || t == -1)) return true;
      return false;
    };
    for (const TensorRef& r : s.inputs) {
      const OpId u = resolve(r.op, v, "data input");
      const Op& uo = g.ops_[static_cast<std::size_t>(u)];
      GO_CHECK(r.output >= 0 && r.output < uo.num_outputs, at, lab(v), " reads output ", r.output, " of ",
               lab(static_cast<std::size_t>(u)), ", which has ", uo.num_outputs, " output(s)");
      GO_CHECK(u != static_cast<OpId>(v), at, "cycle through ", lab(v), ": it reads its own output");
      const TensorId t = uo.first_output + r.output;
      g.input_tensors_.push_back(t);
      g.input_producers_.push_back(u);
      if (!has_edge(u, t)) {
        e_src.push_back(u);
        e_tensor.push_back(t);
        g.ops_[v].input_bytes += g.tensors_[static_cast<std::size_t>(t)].bytes;
      }
    }
    g.input_offsets_[v + 1] = static_cast<std::int64_t>(g.input_tensors_.size());
    for (std::int64_t cid : s.control_inputs) {
      const OpId u = resolve(cid, v, "control input");
      GO_CHECK(u != static_cast<OpId>(v), at, "cycle through ", lab(v), ": it depends on itself");
      if (!has_edge(u, -1)) {
        e_src.push_back(u);
        e_tensor.push_back(-1);
      }
    }
    g.in_offsets_[v + 1] = static_cast<std::int64_t>(e_src.size());
  }
  g.in_ops_ = std::move(e_src);
  g.in_tensors_ = std::move(e_tensor);

  std::vector<std::int32_t> indeg = g.index_edges();
  if (g.topo_order_.size() != n) {
    auto cyc = detail::find_cycle(g.in_offsets_, g.in_ops_, indeg);
    std::string path;
    for (std::size_t k = 0; k < cyc.size() && k < 9; ++k) {
      if (k) path += " -> ";
      path += "'" + g.names_[static_cast<std::size_t>(cyc[k])] + "'";
    }
    if (cyc.size() > 9) path += " -> ...";
    GO_FAIL(at, "cycle through ", lab(static_cast<std::size_t>(cyc.empty() ? 0 : cyc[0])), ": ", path);
  }
  g.topo_pos_.assign(n, 0);
  for (std::size_t k = 0; k < n; ++k) g.topo_pos_[static_cast<std::size_t>(g.topo_order_[k])] = static_cast<std::int32_t>(k);
  return g;
}

std::vector<std::int32_t> OpGraph::index_edges() {
  const std::size_t n = ops_.size(), m = in_ops_.size();
  // ---- out-CSR by counting sort on the source ----
  out_offsets_.assign(n + 1, 0);
  for (OpId u : in_ops_) ++out_offsets_[static_cast<std::size_t>(u) + 1];
  for (std::size_t i = 0; i < n; ++i) out_offsets_[i + 1] += out_offsets_[i];
  out_ops_.resize(m);
  out_tensors_.resize(m);
  {
    std::vector<std::int64_t> fill(out_offsets_.begin(), out_offsets_.end() - 1);
    for (std::size_t v = 0; v < n; ++v)
      for (auto e = in_offsets_[v]; e < in_offsets_[v + 1]; ++e) {
        const auto u = static_cast<std::size_t>(in_ops_[static_cast<std::size_t>(e)]);
        const auto slot = static_cast<std::size_t>(fill[u]++);
        out_ops_[slot] = static_cast<OpId>(v);
        out_tensors_[slot] = in_tensors_[static_cast<std::size_t>(e)];
      }
  }
  // ---- topological order (Kahn, FIFO seeded in id order); short of n ops on a cycle, whose
  // ops' remaining in-degrees are returned ----
  std::vector<std::int32_t> indeg(n);
  for (std::size_t v = 0; v < n; ++v) indeg[v] = static_cast<std::int32_t>(in_offsets_[v + 1] - in_offsets_[v]);
  topo_order_.clear();
  topo_order_.reserve(n);
  for (std::size_t v = 0; v < n; ++v)
    if (indeg[v] == 0) topo_order_.push_back(static_cast<OpId>(v));
  for (std::size_t head = 0; head < topo_order_.size(); ++head) {
    const auto u = static_cast<std::size_t>(topo_order_[head]);
    for (auto e = out_offsets_[u]; e < out_offsets_[u + 1]; ++e) {
      const auto w = static_cast<std::size_t>(out_ops_[static_cast<std::size_t>(e)]);
      if (--indeg[w] == 0) topo_order_.push_back(static_cast<OpId>(w));
    }
  }
  if (topo_order_.size() == n) return {};
  return indeg;
}

OpGraph OpGraph::topological_skeleton() const {
  OpGraph c;
  const std::size_t n = ops_.size();
  c.ops_.resize(n);
  c.names_.resize(n);
  c.param_offsets_.assign(n + 1, 0);
  c.tensors_.resize(tensors_.size());
  std::vector<TensorId> renamed(tensors_.size());  // tensor -> the copy's
  TensorId next = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const Op& o = ops_[static_cast<std::size_t>(topo_order_[i])];
    Op& q = c.ops_[i];
    q.id = static_cast<OpId>(i);
    q.kind = o.kind;
    q.role = o.role;
    q.source_id = static_cast<std::int64_t>(i);
    q.first_output = next;
    q.num_outputs = o.num_outputs;
    for (std::int32_t k = 0; k < o.num_outputs; ++k) {
      const TensorInfo& from = tensors_[static_cast<std::size_t>(o.first_output + k)];
      TensorInfo& t = c.tensors_[static_cast<std::size_t>(next)];
      t.producer = static_cast<OpId>(i);
      t.output_index = k;
      t.dtype = from.dtype;
      t.bytes = from.bytes;
      q.output_bytes += t.bytes;
      renamed[static_cast<std::size_t>(o.first_output + k)] = next++;
    }
  }
  // Each op's inputs and in-edges in their order: GraphBuilder::build would make the same lists
  // from the same operands (data edges deduplicated in operand order, then control edges).
  c.input_offsets_.assign(n + 1, 0);
  c.input_tensors_.reserve(input_tensors_.size());
  c.input_producers_.reserve(input_producers_.size());
  c.in_offsets_.assign(n + 1, 0);
  c.in_ops_.reserve(in_ops_.size());
  c.in_tensors_.reserve(in_tensors_.size());
  for (std::size_t i = 0; i < n; ++i) {
    const auto v = static_cast<std::size_t>(topo_order_[i]);
    for (auto e = input_offsets_[v]; e < input_offsets_[v + 1]; ++e) {
      c.input_tensors_.push_back(renamed[static_cast<std::size_t>(input_tensors_[static_cast<std::size_t>(e)])]);
      c.input_producers_.push_back(topo_pos_[static_cast<std::size_t>(input_producers_[static_cast<std::size_t>(e)])]);
    }
    c.input_offsets_[i + 1] = static_cast<std::int64_t>(c.input_tensors_.size());
    for (auto e = in_offsets_[v]; e < in_offsets_[v + 1]; ++e) {
      const TensorId t = in_tensors_[static_cast<std::size_t>(e)];
      c.in_ops_.push_back(topo_pos_[static_cast<std::size_t>(in_ops_[static_cast<std::size_t>(e)])]);
      c.in_tensors_.push_back(t < 0 ? -1 : renamed[static_cast<std::size_t>(t)]);
      if (t >= 0) c.ops_[i].input_bytes += tensors_[static_cast<std::size_t>(t)].bytes;
    }
    c.in_offsets_[i + 1] = static_cast<std::int64_t>(c.in_ops_.size());
  }
  c.index_edges();  // no cycle: every edge goes forward in the original's order
  c.topo_pos_.assign(n, 0);
  for (std::size_t k = 0; k < n; ++k) c.topo_pos_[static_cast<std::size_t>(c.topo_order_[k])] = static_cast<std::int32_t>(k);
  return c;
}

}  // namespace go
