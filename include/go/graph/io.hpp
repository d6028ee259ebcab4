#pragma once
// File helpers shared by the graph importers, and a structural comparison of two graphs.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "go/core/error.hpp"
#include "go/core/file.hpp"
#include "go/graph/graph.hpp"

namespace go {
namespace detail {

// Reads a whole file; a missing, unreadable, non-regular or empty file is a go::Error naming it.
inline std::string read_file(const std::string& path) {
  std::string data = go::read_file(path);
  GO_CHECK(!data.empty(), path, ": empty file");
  return data;
}

// The text without a leading UTF-8 byte-order mark (spreadsheet exports of CSV profiles, editors on
// Windows): it is no content, and left in it would be part of the first header or node name.
inline std::string_view without_bom(std::string_view text) {
  return text.substr(0, 3) == "\xEF\xBB\xBF" ? text.substr(3) : text;
}

inline std::string file_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

inline bool same_double(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

}  // namespace detail

// "" when a and b hold the same ops, tensors, parameters and edges (sources and formats aside),
// else a description of the first difference.
inline std::string graph_difference(const OpGraph& a, const OpGraph& b) {
  std::ostringstream os;
  if (a.num_ops() != b.num_ops()) return "op count " + std::to_string(a.num_ops()) + " vs " + std::to_string(b.num_ops());
  if (a.num_edges() != b.num_edges())
    return "edge count " + std::to_string(a.num_edges()) + " vs " + std::to_string(b.num_edges());
  if (a.num_tensors() != b.num_tensors()) return "tensor count differs";
  if (a.num_params() != b.num_params()) return "parameter count differs";
  const GraphInfo &ia = a.info(), &ib = b.info();
  if (ia.name != ib.name || ia.batch != ib.batch || ia.num_devices != ib.num_devices ||
      ia.device_memory != ib.device_memory || ia.num_cpus != ib.num_cpus || ia.training != ib.training)
    return "graph info differs";
  for (OpId i = 0; i < a.num_ops(); ++i) {
    const Op &x = a.op(i), &y = b.op(i);
    const std::string l = a.label(i);
    if (a.name(i) != b.name(i)) return l + ": name '" + b.name(i) + "'";
    if (x.kind != y.kind || x.role != y.role || x.colocation != y.colocation || x.source_id != y.source_id)
      return l + ": kind, role, colocation or id differs";
    if (!detail::same_double(x.flops, y.flops)) return l + ": flops differ";
    if (x.param_bytes != y.param_bytes || x.temp_bytes != y.temp_bytes || x.input_bytes != y.input_bytes ||
        x.output_bytes != y.output_bytes)
      return l + ": sizes differ";
    if (!detail::same_double(x.time, y.time) || !detail::same_double(x.backward_time, y.backward_time))
      return l + ": measured times differ";
    if (x.num_outputs != y.num_outputs || x.first_output != y.first_output) return l + ": outputs differ";
    for (TensorId t = x.first_output; t < x.first_output + x.num_outputs; ++t) {
      const TensorInfo &p = a.tensor(t), &q = b.tensor(t);
      if (p.dtype != q.dtype || p.rank != q.rank || p.bytes != q.bytes) return l + ": output tensor differs";
      auto sa = a.shape(t), sb = b.shape(t);
      if (!std::equal(sa.begin(), sa.end(), sb.begin(), sb.end())) return l + ": output shape differs";
    }
    auto ia_ = a.inputs(i), ib_ = b.inputs(i);
    if (!std::equal(ia_.begin(), ia_.end(), ib_.begin(), ib_.end())) return l + ": inputs differ";
    auto sa = a.succ(i), sb = b.succ(i);
    if (!std::equal(sa.begin(), sa.end(), sb.begin(), sb.end())) return l + ": successors differ";
    auto pa = a.pred(i), pb = b.pred(i);
    if (!std::equal(pa.begin(), pa.end(), pb.begin(), pb.end())) return l + ": predecessors differ";
    auto qa = a.op_params(i), qb = b.op_params(i);
    if (qa.size() != qb.size()) return l + ": parameter count differs";
    for (std::size_t k = 0; k < qa.size(); ++k)
      if (qa[k].name != qb[k].name || qa[k].bytes != qb[k].bytes) return l + ": parameter differs";
  }
  return {};
}

}  // namespace go
