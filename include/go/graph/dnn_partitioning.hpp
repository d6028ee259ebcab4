#pragma once
// Graphs of Tarnawski et al. (NeurIPS 2020), msr-fiddle/dnn-partitioning:
//   { "maxSizePerFPGA": bytes, "maxFPGAs": n, "maxCPUs": n,
//     "nodes": [{id, name, supportedOnFpga, cpuLatency, fpgaLatency, isBackwardNode, colorClass, size}],
//     "edges": [{sourceId, destId, cost, size}] }
// Mapping: fpgaLatency (ms, the accelerator time) -> Op::time in seconds; size (bytes resident on the
// accelerator: weights, or weights + output for layer graphs) -> param_bytes, so a device's memory is
// the sum of its ops' sizes as in the paper's model; colorClass -> colocation (null: none);
// isBackwardNode -> role backward (and GraphInfo::training); maxFPGAs / maxSizePerFPGA / maxCPUs -> GraphInfo. Each distinct
// edge size leaving a node is one output tensor of that many bytes. Op kinds come from the operator
// names (ONNX op types such as "Conv12", "ReluGrad_3"); layer graphs ("node5") are kind other.
#include <cctype>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "go/core/error.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/io.hpp"
#include "go/graph/json.hpp"
#include "go/graph/op_kind.hpp"

namespace go {
namespace detail {

// "gpu_0/ConvGrad_12" -> conv; "AdamOptimizer_fc.weight" -> update; "Relu3" -> relu.
inline OpKind kind_from_operator_name(std::string_view name) {
  if (name.rfind("AdamOptimizer", 0) == 0 || name.rfind("SGDOptimizer", 0) == 0) return OpKind::update;
  auto slash = name.rfind('/');
  if (slash != std::string_view::npos) name = name.substr(slash + 1);
  while (!name.empty() && (std::isdigit(static_cast<unsigned char>(name.back())) || name.back() == '_'))
    name.remove_suffix(1);
  for (std::string_view suffix : {std::string_view("Gradient"), std::string_view("Grad")})
    if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix) {
      name.remove_suffix(suffix.size());
      break;
    }
  if (name.rfind("Trainable", 0) == 0) name.remove_prefix(9);
  return onnx_op_kind(name);
}

}  // namespace detail

inline OpGraph graph_from_dnn_partitioning(const nlohmann::json& j, const std::string& source) {
  const std::string at = source + ": ";
  detail::JsonReader r{at};
  GO_CHECK(j.is_object(), at, "a dnn-partitioning graph must be a JSON object");
  GraphInfo info;
  info.source = source;
  info.format = "dnn-partitioning";
  const double max_size = r.number(j, "maxSizePerFPGA", "", 0.0);
  GO_CHECK(max_size >= 0 && max_size < 9e18, at, "negative or invalid maxSizePerFPGA ", max_size);
  info.device_memory = static_cast<std::int64_t>(max_size);
  const std::int64_t fpgas = r.integer(j, "maxFPGAs", "", 0), cpus = r.integer(j, "maxCPUs", "", 0);
  GO_CHECK(fpgas >= 0 && fpgas < (1 << 20) && cpus >= 0 && cpus < (1 << 20), at, "invalid maxFPGAs ", fpgas,
           " or maxCPUs ", cpus);
  info.num_devices = static_cast<std::int32_t>(fpgas);
  info.num_cpus = static_cast<std::int32_t>(cpus);
  const nlohmann::json* nodes = r.array(j, "nodes", "");
  const nlohmann::json* edges = r.array(j, "edges", "");
  GO_CHECK(nodes != nullptr && edges != nullptr, at, "missing \"nodes\" or \"edges\" array");
  GraphBuilder b(std::move(info));
  b.reserve(nodes->size());
  std::unordered_map<std::int64_t, OpId> by_id;
  by_id.reserve(nodes->size() * 2);
  std::size_t index = 0;
  for (const auto& n : *nodes) {
    std::string ctx = "node #" + std::to_string(index++) + ": ";
    if (!n.is_object()) r.fail(ctx, "must be an object");
    auto idit = n.find("id");
    if (idit == n.end()) r.fail(ctx, "missing \"id\"");
    OpSpec s;
    s.id = r.integer(*idit, ctx, "\"id\"");
    if (s.id < 0) r.fail(ctx, "negative id " + std::to_string(s.id));
    s.name = r.string(n, "name", ctx, "node" + std::to_string(s.id));
    ctx = detail::op_label(s.name, s.id) + ": ";
    const double lat = r.number(n, "fpgaLatency", ctx, 0.0);
    if (lat < 0) r.fail(ctx, "negative fpgaLatency " + std::to_string(lat));
    s.time = lat * 1e-3;
    const double size = r.number(n, "size", ctx, 0.0);
    if (size < 0 || size >= 9e18) r.fail(ctx, "negative or invalid size " + std::to_string(size));
    s.param_bytes = static_cast<std::int64_t>(size);
    auto bw = n.find("isBackwardNode");
    if (bw != n.end() && !bw->is_null()) {
      if (!bw->is_boolean() && !bw->is_number()) r.fail(ctx, "\"isBackwardNode\" must be a boolean");
      if (bw->is_boolean() ? bw->get<bool>() : bw->get<double>() != 0) s.role = OpRole::backward;
    }
    const std::int64_t color = r.integer(n, "colorClass", ctx, -1);
    if (color < -1 || color > std::numeric_limits<std::int32_t>::max())
      r.fail(ctx, "colorClass " + std::to_string(color) + " out of range");
    s.colocation = static_cast<std::int32_t>(color);
    s.kind = detail::kind_from_operator_name(s.name);
    if (s.kind == OpKind::update) s.role = OpRole::update;
    auto [it, fresh] = by_id.emplace(s.id, static_cast<OpId>(b.size()));
    if (!fresh)
      GO_FAIL(at, "duplicate op id ", s.id, ": ", detail::op_label(b.spec(it->second).name, s.id), " and ",
              detail::op_label(s.name, s.id));
    b.add_op(std::move(s));
  }
  GO_CHECK(b.size() > 0, at, "no nodes");
  for (std::size_t i = 0; i < b.size(); ++i)
    if (b.spec(static_cast<OpId>(i)).role != OpRole::forward) b.info().training = true;
  // outputs: one tensor per distinct edge size leaving a node, in order of first appearance
  std::vector<std::vector<std::int64_t>> out_sizes(b.size());
  index = 0;
  for (const auto& e : *edges) {
    std::string ctx = "edge #" + std::to_string(index++) + ": ";
    if (!e.is_object()) r.fail(ctx, "must be an object");
    auto si = e.find("sourceId"), di = e.find("destId");
    if (si == e.end() || di == e.end()) r.fail(ctx, "missing \"sourceId\" or \"destId\"");
    const std::int64_t src = r.integer(*si, ctx, "\"sourceId\""), dst = r.integer(*di, ctx, "\"destId\"");
    const double size = r.number(e, "size", ctx, 0.0);
    auto sit = by_id.find(src), dit = by_id.find(dst);
    if (dit == by_id.end()) r.fail(ctx, "edge " + std::to_string(src) + " -> " + std::to_string(dst) + " references unknown op id " + std::to_string(dst));
    if (sit == by_id.end())
      r.fail(ctx, detail::op_label(b.spec(dit->second).name, dst) + " references unknown op id " + std::to_string(src));
    if (size < 0 || size >= 9e18)
      r.fail(ctx, "edge " + detail::op_label(b.spec(sit->second).name, src) + " -> " +
                      detail::op_label(b.spec(dit->second).name, dst) + " has negative or invalid size " +
                      std::to_string(size));
    const auto bytes = static_cast<std::int64_t>(size);
    auto& sizes = out_sizes[static_cast<std::size_t>(sit->second)];
    std::int32_t k = 0;
    while (k < static_cast<std::int32_t>(sizes.size()) && sizes[static_cast<std::size_t>(k)] != bytes) ++k;
    if (k == static_cast<std::int32_t>(sizes.size())) {
      sizes.push_back(bytes);
      TensorSpec t;
      t.shape_known = false;
      t.bytes = bytes;
      b.spec(sit->second).outputs.push_back(t);
    }
    b.spec(dit->second).inputs.push_back(TensorRef{src, k});
  }
  return b.build();
}

inline OpGraph parse_dnn_partitioning(std::string_view text, const std::string& source) {
  return graph_from_dnn_partitioning(detail::parse_json_text(text, source), source);
}

inline OpGraph load_dnn_partitioning(const std::string& path) {
  return parse_dnn_partitioning(detail::read_file(path), path);
}

}  // namespace go
