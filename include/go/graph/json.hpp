#pragma once
// The go graph JSON format ("go-graph", version 1): save_json(graph, path) then load_json(path)
// gives the same graph. `//` and `/* */` comments are allowed, so an example can annotate itself.
// Keys outside the ones below are errors (a misspelled "input" must not read as "no inputs"), as
// are keys given twice in one object and output "bytes" that contradict a given shape.
//
// {
//   "format": "go-graph", "version": 1,          // required: identifies the format
//   "name": "tiny",                              // optional graph metadata (GraphInfo)
//   "batch": 32, "num_devices": 0, "device_memory": 0, "num_cpus": 0, "training": false,
//   "ops": [                                     // required, one object per op
//     { "id": 0,                                 // optional, default: position; unique; edges refer to it
//       "name": "x",                             // optional, default "op<id>"
//       "kind": "input",                         // optional, an OpKind name (op_kind.hpp), default "other"
//       "role": "forward",                       // optional: forward | backward | update
//       "flops": 0,                              // optional floating-point operations (2 per MAC)
//       "param_bytes": 0,                        // optional, or "params": [{"name": "w", "bytes": 4096}]
//       "temp_bytes": 0,                         // optional scratch bytes
//       "time": 0.0012,                          // optional measured seconds (absent or null: none)
//       "backward_time": 0.0024,                 // optional measured seconds of the gradient op
//       "colocation": 3,                         // optional colocation group (absent, null or -1: none)
//       "outputs": [ { "shape": [32, 3, 224, 224],   // null or absent: unknown shape
//                      "dtype": "f32",           // optional ElemType name, default f32
//                      "bytes": 19267584 } ],    // optional, default numel * element size
//       "inputs": [ [3, 0], 5 ],                 // data inputs: [op id, output index] or op id (output 0)
//       "control_inputs": [ 2 ] }                // ops that must finish first (no data)
//   ]
// }
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "go/core/error.hpp"
#include "go/core/json_field.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/io.hpp"
#include "go/graph/op_kind.hpp"

namespace go {

inline nlohmann::json graph_to_json(const OpGraph& g) {
  using nlohmann::json;
  json j;
  const GraphInfo& info = g.info();
  j["format"] = "go-graph";
  j["version"] = 1;
  j["name"] = info.name;
  j["batch"] = info.batch;
  j["num_devices"] = info.num_devices;
  j["device_memory"] = info.device_memory;
  j["num_cpus"] = info.num_cpus;
  j["training"] = info.training;
  json ops = json::array();
  for (const Op& o : g.ops()) {
    json jo;
    jo["id"] = o.source_id;
    jo["name"] = g.name(o.id);
    jo["kind"] = std::string(op_kind_name(o.kind));
    if (o.role != OpRole::forward) jo["role"] = std::string(op_role_name(o.role));
    jo["flops"] = o.flops;
    if (o.temp_bytes) jo["temp_bytes"] = o.temp_bytes;
    if (o.has_time()) jo["time"] = o.time;
    if (o.has_backward_time()) jo["backward_time"] = o.backward_time;
    if (o.colocation >= 0) jo["colocation"] = o.colocation;
    auto params = g.op_params(o.id);
    if (!params.empty()) {
      json jp = json::array();
      for (const auto& p : params) jp.push_back({{"name", p.name}, {"bytes", p.bytes}});
      jo["params"] = std::move(jp);
    }
    json outs = json::array();
    for (TensorId t = o.first_output; t < o.first_output + o.num_outputs; ++t) {
      const TensorInfo& ti = g.tensor(t);
      json jt;
      if (ti.rank >= 0) {
        json shape = json::array();
        for (auto d : g.shape(t)) shape.push_back(d);
        jt["shape"] = std::move(shape);
      } else {
        jt["shape"] = nullptr;
      }
      jt["dtype"] = std::string(elem_type_name(ti.dtype));
      jt["bytes"] = ti.bytes;
      outs.push_back(std::move(jt));
    }
    jo["outputs"] = std::move(outs);
    json ins = json::array();
    for (TensorId t : g.inputs(o.id)) {
      const TensorInfo& ti = g.tensor(t);
      ins.push_back(json::array({g.op(ti.producer).source_id, ti.output_index}));
    }
    jo["inputs"] = std::move(ins);
    json ctrl = json::array();
    auto preds = g.pred(o.id);
    auto ptens = g.pred_tensors(o.id);
    for (std::size_t k = 0; k < preds.size(); ++k)
      if (ptens[k] < 0) ctrl.push_back(g.op(preds[k]).source_id);
    if (!ctrl.empty()) jo["control_inputs"] = std::move(ctrl);
    ops.push_back(std::move(jo));
  }
  j["ops"] = std::move(ops);
  return j;
}

inline std::string save_json_string(const OpGraph& g, int indent = 1) { return graph_to_json(g).dump(indent); }

// Written atomically (a temporary file, then rename).
inline void save_json(const OpGraph& g, const std::string& path) { write_file_atomic(path, save_json_string(g) + "\n"); }

namespace detail {

struct JsonReader {
  const std::string& at;  // "<source>: "

  [[noreturn]] void fail(const std::string& ctx, const std::string& what) const { GO_FAIL(at, ctx, what); }

  double number(const nlohmann::json& j, const char* key, const std::string& ctx, double def) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return def;
    if (!it->is_number()) fail(ctx, std::string("field '") + key + "' must be a number");
    const double v = it->get<double>();
    if (!std::isfinite(v)) fail(ctx, std::string("field '") + key + "' is not finite");
    return v;
  }
  static bool to_int64(const nlohmann::json& v, std::int64_t& out) {
    if (v.is_number_integer()) {
      if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        return false;
      out = v.get<std::int64_t>();
      return true;
    }
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e18) return false;
      out = static_cast<std::int64_t>(d);
      return true;
    }
    return false;
  }
  std::int64_t integer(const nlohmann::json& v, const std::string& ctx, const char* what) const {
    std::int64_t out = 0;
    if (!to_int64(v, out)) fail(ctx, std::string(what) + " must be an integer");
    return out;
  }
  std::int64_t integer(const nlohmann::json& j, const char* key, const std::string& ctx, std::int64_t def) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return def;
    return integer(*it, ctx, (std::string("field '") + key + "'").c_str());
  }
  std::string string(const nlohmann::json& j, const char* key, const std::string& ctx, std::string def) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return def;
    if (!it->is_string()) fail(ctx, std::string("field '") + key + "' must be a string");
    return it->get<std::string>();
  }
  bool boolean(const nlohmann::json& j, const char* key, const std::string& ctx, bool def) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return def;
    if (!it->is_boolean()) fail(ctx, std::string("field '") + key + "' must be true or false");
    return it->get<bool>();
  }
  const nlohmann::json* array(const nlohmann::json& j, const char* key, const std::string& ctx) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return nullptr;
    if (!it->is_array()) fail(ctx, std::string("field '") + key + "' must be an array");
    return &*it;
  }
};

inline nlohmann::json parse_json_text(std::string_view text, const std::string& source) {
  return parse_json_document(text, source, /*comments=*/true);
}

}  // namespace detail

// Builds a graph from a parsed go-graph document; errors name `source`.
inline OpGraph graph_from_json(const nlohmann::json& j, const std::string& source) {
  const std::string at = source + ": ";
  detail::JsonReader r{at};
  GO_CHECK(j.is_object(), at, "a go-graph document must be a JSON object");
  check_known_keys(j, {"format", "version", "name", "batch", "num_devices", "device_memory", "num_cpus", "training", "ops"},
                   at);
  const std::string format = r.string(j, "format", "", "");
  GO_CHECK(format == "go-graph", at, "not a go-graph document (\"format\" is '", format, "', expected 'go-graph')");
  const std::int64_t version = r.integer(j, "version", "", 1);
  GO_CHECK(version == 1, at, "unsupported go-graph version ", version);
  GraphInfo info;
  info.source = source;
  info.format = "json";
  info.name = r.string(j, "name", "", "");
  info.batch = r.integer(j, "batch", "", 0);
  info.num_devices = static_cast<std::int32_t>(r.integer(j, "num_devices", "", 0));
  info.device_memory = r.integer(j, "device_memory", "", 0);
  info.num_cpus = static_cast<std::int32_t>(r.integer(j, "num_cpus", "", 0));
  info.training = r.boolean(j, "training", "", false);
  GO_CHECK(info.batch >= 0 && info.num_devices >= 0 && info.device_memory >= 0 && info.num_cpus >= 0, at,
           "negative batch, num_devices, device_memory or num_cpus");
  const nlohmann::json* ops = r.array(j, "ops", "");
  GO_CHECK(ops != nullptr, at, "missing \"ops\" array");
  GraphBuilder b(std::move(info));
  b.reserve(ops->size());
  std::size_t index = 0;
  for (const auto& jo : *ops) {
    std::string ctx = "op #" + std::to_string(index) + ": ";
    if (!jo.is_object()) r.fail(ctx, "must be an object");
    OpSpec s;
    s.id = r.integer(jo, "id", ctx, static_cast<std::int64_t>(index));
    if (s.id < 0) r.fail(ctx, "negative id " + std::to_string(s.id));
    s.name = r.string(jo, "name", ctx, "op" + std::to_string(s.id));
    ctx = detail::op_label(s.name, s.id) + ": ";
    check_known_keys(jo,
                     {"id", "name", "kind", "role", "flops", "param_bytes", "params", "temp_bytes", "time",
                      "backward_time", "colocation", "outputs", "inputs", "control_inputs"},
                     at + ctx);
    const std::string kind = r.string(jo, "kind", ctx, "other");
    auto k = parse_op_kind(kind);
    if (!k) r.fail(ctx, "unknown kind '" + kind + "'");
    s.kind = *k;
    const std::string role = r.string(jo, "role", ctx, "forward");
    auto ro = parse_op_role(role);
    if (!ro) r.fail(ctx, "unknown role '" + role + "'");
    s.role = *ro;
    s.flops = r.number(jo, "flops", ctx, 0.0);
    s.param_bytes = r.integer(jo, "param_bytes", ctx, 0);
    s.temp_bytes = r.integer(jo, "temp_bytes", ctx, 0);
    s.time = r.number(jo, "time", ctx, kNoTime);
    s.backward_time = r.number(jo, "backward_time", ctx, kNoTime);
    // a negative time is an error, not "absent"
    if (jo.contains("time") && !jo["time"].is_null() && s.time < 0)
      r.fail(ctx, "has negative time " + std::to_string(s.time));
    if (jo.contains("backward_time") && !jo["backward_time"].is_null() && s.backward_time < 0)
      r.fail(ctx, "has negative backward_time " + std::to_string(s.backward_time));
    const std::int64_t coloc = r.integer(jo, "colocation", ctx, -1);
    if (coloc < -1 || coloc > std::numeric_limits<std::int32_t>::max())
      r.fail(ctx, "colocation group " + std::to_string(coloc) + " out of range");
    s.colocation = static_cast<std::int32_t>(coloc);
    if (const auto* params = r.array(jo, "params", ctx))
      for (const auto& p : *params) {
        if (!p.is_object()) r.fail(ctx, "each of \"params\" must be an object");
        check_known_keys(p, {"name", "bytes"}, at + ctx + "a parameter: ");
        s.params.push_back(ParamSpec{r.string(p, "name", ctx, s.name), r.integer(p, "bytes", ctx, 0)});
      }
    if (const auto* outs = r.array(jo, "outputs", ctx))
      for (const auto& jt : *outs) {
        if (!jt.is_object()) r.fail(ctx, "each of \"outputs\" must be an object");
        check_known_keys(jt, {"shape", "dtype", "bytes"}, at + ctx + "an output: ");
        TensorSpec t;
        auto sh = jt.find("shape");
        if (sh == jt.end() || sh->is_null()) {
          t.shape_known = false;
        } else {
          if (!sh->is_array()) r.fail(ctx, "output \"shape\" must be an array of integers");
          for (const auto& d : *sh) t.shape.push_back(r.integer(d, ctx, "a shape dimension"));
        }
        const std::string dt = r.string(jt, "dtype", ctx, "f32");
        auto et = parse_elem_type(dt);
        if (!et) r.fail(ctx, "unknown dtype '" + dt + "'");
        t.dtype = *et;
        auto by = jt.find("bytes");
        if (by != jt.end() && !by->is_null()) t.bytes = r.integer(*by, ctx, "output \"bytes\"");
        if (t.bytes && t.shape_known && *t.bytes >= 0) {
          // both given: they must agree, or the simulator would move one size and the report show another
          const auto from_shape = detail::checked_bytes(t.shape, elem_size(t.dtype));
          if (from_shape && *from_shape != *t.bytes)
            r.fail(ctx, "output " + std::to_string(s.outputs.size()) + " has \"bytes\" " + std::to_string(*t.bytes) +
                            " but its shape and dtype " + dt + " hold " + std::to_string(*from_shape) +
                            " bytes; give one of the two, or make them agree");
        }
        s.outputs.push_back(std::move(t));
      }
    if (const auto* ins = r.array(jo, "inputs", ctx))
      for (const auto& ji : *ins) {
        TensorRef ref;
        if (ji.is_array()) {
          if (ji.size() != 2) r.fail(ctx, "an input must be [op id, output index] or an op id");
          ref.op = r.integer(ji[0], ctx, "an input's op id");
          const std::int64_t out = r.integer(ji[1], ctx, "an input's output index");
          if (out < 0 || out > std::numeric_limits<std::int32_t>::max())
            r.fail(ctx, "input output index " + std::to_string(out) + " out of range");
          ref.output = static_cast<std::int32_t>(out);
        } else {
          ref.op = r.integer(ji, ctx, "an input");
        }
        s.inputs.push_back(ref);
      }
    if (const auto* ctrl = r.array(jo, "control_inputs", ctx))
      for (const auto& jc : *ctrl) s.control_inputs.push_back(r.integer(jc, ctx, "a control input"));
    b.add_op(std::move(s));
    ++index;
  }
  return b.build();
}

inline OpGraph parse_json_graph(std::string_view text, const std::string& source) {
  return graph_from_json(detail::parse_json_text(text, source), source);
}

inline OpGraph load_json(const std::string& path) { return parse_json_graph(detail::read_file(path), path); }

}  // namespace go
