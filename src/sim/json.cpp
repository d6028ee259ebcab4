// go-cluster and go-plan JSON (go/sim/cluster.hpp, go/sim/plan.hpp): reading with one-line errors
// that say which file and which field, and writing. Compiled once into libgo, so the headers need
// only nlohmann/json_fwd.hpp.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "go/core/error.hpp"
#include "go/core/file.hpp"
#include "go/core/hash.hpp"
#include "go/core/json_field.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/op_kind.hpp"
#include "go/sim/cluster.hpp"
#include "go/sim/plan.hpp"

namespace go {

namespace {

struct SimJson {
  std::string at;  // "<source>: "

  [[noreturn]] void fail(const std::string& ctx, const std::string& what) const { GO_FAIL(at, ctx, what); }

  double number(const nlohmann::json& j, const std::string& ctx) const {
    if (!j.is_number()) fail(ctx, "must be a number");
    const double v = j.get<double>();
    if (!std::isfinite(v)) fail(ctx, "must be finite");
    return v;
  }
  double number(const nlohmann::json& obj, const char* key, const std::string& ctx, double def) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return def;
    return number(*it, ctx + "\"" + key + "\" ");
  }
  std::int64_t integer(const nlohmann::json& j, const std::string& ctx) const {
    if (j.is_number_integer()) return j.get<std::int64_t>();
    if (j.is_number_float()) {
      const double v = j.get<double>();
      if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9e18) return static_cast<std::int64_t>(v);
    }
    fail(ctx, "must be an integer");
  }
  std::int64_t integer(const nlohmann::json& obj, const char* key, const std::string& ctx, std::int64_t def) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return def;
    return integer(*it, ctx + "\"" + key + "\" ");
  }
  std::string string(const nlohmann::json& obj, const char* key, const std::string& ctx, std::string def) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return def;
    if (!it->is_string()) fail(ctx, std::string("\"") + key + "\" must be a string");
    return it->get<std::string>();
  }
};

// `in_list`: one device of a "devices" array (it has a "name"), else the {"count": n, ...} form.
DeviceSpec sim_device_from_json(const nlohmann::json& j, const SimJson& r, const std::string& ctx, bool in_list) {
  if (!j.is_object()) r.fail(ctx, "must be an object");
  check_known_keys(j,
                   {"name", "count", "type", "peak_flops", "mem_bandwidth", "launch_overhead", "memory_bytes",
                    "bandwidth_efficiency", "compute_efficiency", "memory_efficiency"},
                   r.at + ctx);
  if (in_list && j.contains("count"))
    r.fail(ctx, "\"count\" belongs to the form \"devices\": {\"count\": n, ...}, not to a device of a list");
  if (!in_list && j.contains("name"))
    r.fail(ctx, "\"name\" names one device of a list; the form {\"count\": n, ...} names its devices gpu0, gpu1, ...");
  const std::string type = r.string(j, "type", ctx, "v100");
  DeviceSpec s;
  try {
    s = DeviceSpec::preset(type);
  } catch (const Error& e) {
    r.fail(ctx, e.what());
  }
  s.peak_flops = r.number(j, "peak_flops", ctx, s.peak_flops);
  s.mem_bandwidth = r.number(j, "mem_bandwidth", ctx, s.mem_bandwidth);
  s.launch_overhead = r.number(j, "launch_overhead", ctx, s.launch_overhead);
  s.memory_bytes = r.integer(j, "memory_bytes", ctx, s.memory_bytes);
  s.bandwidth_efficiency = r.number(j, "bandwidth_efficiency", ctx, s.bandwidth_efficiency);
  for (auto [key, arr] : {std::pair{"compute_efficiency", &s.compute_efficiency}, std::pair{"memory_efficiency", &s.memory_efficiency}}) {
    auto ce = j.find(key);
    if (ce == j.end() || ce->is_null()) continue;
    const std::string q = std::string("\"") + key + "\"";
    if (!ce->is_object()) r.fail(ctx, q + " must be an object of op kind -> fraction");
    for (auto it = ce->begin(); it != ce->end(); ++it) {
      auto k = parse_op_kind(it.key());
      if (!k) r.fail(ctx, q + " names unknown op kind '" + it.key() + "'");
      (*arr)[op_kind_index(*k)] = r.number(it.value(), ctx + q + "." + it.key() + " ");
    }
  }
  return s;
}

// A link parameter: a number (every pair) or an n x n matrix.
void sim_link_values(const nlohmann::json& j, std::size_t n, std::vector<double>& out, const SimJson& r,
                            const std::string& ctx) {
  out.assign(n * n, 0.0);
  if (j.is_number()) {
    out.assign(n * n, r.number(j, ctx));
    return;
  }
  if (!j.is_array() || j.size() != n) r.fail(ctx, "must be a number or a " + std::to_string(n) + " x " + std::to_string(n) + " matrix");
  for (std::size_t i = 0; i < n; ++i) {
    const auto& row = j[i];
    if (!row.is_array() || row.size() != n)
      r.fail(ctx, "row " + std::to_string(i) + " must have " + std::to_string(n) + " entries");
    for (std::size_t k = 0; k < n; ++k) {
      if (i == k && row[k].is_null()) continue;
      out[i * n + k] = r.number(row[k], ctx + "[" + std::to_string(i) + "][" + std::to_string(k) + "] ");
    }
  }
}



std::unordered_map<std::int64_t, OpId> sim_source_ids(const OpGraph& g, const std::string& at) {
  std::unordered_map<std::int64_t, OpId> m;
  m.reserve(static_cast<std::size_t>(g.num_ops()) * 2);
  for (const Op& o : g.ops()) {
    auto [it, fresh] = m.emplace(o.source_id, o.id);
    GO_CHECK(fresh, at, "the graph has two ops with source id ", o.source_id, " (", g.label(it->second), " and ",
             g.label(o.id), "): cannot map a placement by id");
  }
  return m;
}

// Per-device lists of source ids -> Plan::device.
Plan sim_plan_from_lists(const std::vector<std::vector<std::int64_t>>& lists, const OpGraph& g,
                                const std::string& at, const char* what) {
  const auto ids = sim_source_ids(g, at);
  Plan p;
  p.device.assign(static_cast<std::size_t>(g.num_ops()), -1);
  for (std::size_t d = 0; d < lists.size(); ++d)
    for (std::int64_t id : lists[d]) {
      auto it = ids.find(id);
      GO_CHECK(it != ids.end(), at, what, " ", d, " lists node id ", id, ", which is not in the graph");
      std::int32_t& slot = p.device[static_cast<std::size_t>(it->second)];
      GO_CHECK(slot < 0, at, g.label(it->second), " is listed twice (", what, " ", slot, " and ", d, ")");
      slot = static_cast<std::int32_t>(d);
    }
  for (OpId i = 0; i < g.num_ops(); ++i)
    GO_CHECK(p.device[static_cast<std::size_t>(i)] >= 0, at, g.label(i), " is not placed on any ", what);
  return p;
}

std::vector<std::int64_t> sim_id_list(const nlohmann::json& j, const SimJson& r, const std::string& ctx) {
  if (!j.is_array()) r.fail(ctx, "must be an array of node ids");
  std::vector<std::int64_t> v;
  v.reserve(j.size());
  for (const auto& x : j) v.push_back(r.integer(x, ctx));
  return v;
}


}  // namespace

Cluster cluster_from_json(const nlohmann::json& j, const std::string& source) {
  SimJson r{source + ": "};
  if (!j.is_object()) r.fail("", "a cluster must be a JSON object");
  // "calibration": the record gopt calibrate writes beside a fitted device, for the reader of the file
  check_known_keys(j, {"format", "version", "name", "devices", "channels", "links", "calibration"}, r.at);
  const std::string fmt = r.string(j, "format", "", "go-cluster");
  if (fmt != "go-cluster") r.fail("", "\"format\" is '" + fmt + "', expected 'go-cluster'");
  const std::int64_t version = r.integer(j, "version", "", 1);
  if (version != 1) r.fail("", "unsupported cluster version " + std::to_string(version));
  Cluster c;
  c.name = r.string(j, "name", "", std::filesystem::path(source).stem().string());
  auto dit = j.find("devices");
  if (dit == j.end()) r.fail("", "missing \"devices\"");
  if (dit->is_object()) {
    const std::int64_t count = r.integer(*dit, "count", "devices: ", 0);
    if (count < 1 || count > 4096) r.fail("devices: ", "\"count\" must be in [1, 4096], got " + std::to_string(count));
    const DeviceSpec s = sim_device_from_json(*dit, r, "devices: ", false);
    detail::sim_name_devices(c, s, static_cast<std::int32_t>(count));
  } else if (dit->is_array()) {
    if (dit->empty()) r.fail("", "\"devices\" is empty");
    if (dit->size() > 4096) r.fail("", "more than 4096 devices");
    for (std::size_t i = 0; i < dit->size(); ++i) {
      const std::string ctx = "device " + std::to_string(i) + ": ";
      ClusterDevice d;
      d.spec = sim_device_from_json((*dit)[i], r, ctx, true);
      d.name = r.string((*dit)[i], "name", ctx, "gpu" + std::to_string(i));
      c.devices.push_back(std::move(d));
    }
  } else {
    r.fail("", "\"devices\" must be an object {\"count\", \"type\", ...} or an array of devices");
  }
  const std::size_t n = c.devices.size();
  const std::string ch = r.string(j, "channels", "", "duplex");
  if (ch == "duplex") c.channels = ChannelModel::duplex;
  else if (ch == "shared") c.channels = ChannelModel::shared;
  else if (ch == "sender") c.channels = ChannelModel::sender;
  else r.fail("", "\"channels\" is '" + ch + "', expected duplex, shared or sender");
  auto lit = j.find("links");
  if (lit == j.end() || !lit->is_object()) r.fail("", "missing \"links\" object");
  const nlohmann::json& L = *lit;
  check_known_keys(L, {"topology", "bandwidth", "latency", "group_size", "intra", "inter"}, r.at + "links: ");
  const std::string topo = r.string(L, "topology", "links: ", "");
  if (topo.empty()) {
    auto bw = L.find("bandwidth"), lat = L.find("latency");
    if (bw == L.end()) r.fail("links: ", "missing \"bandwidth\"");
    sim_link_values(*bw, n, c.bandwidth, r, "links: \"bandwidth\" ");
    if (lat == L.end()) c.latency.assign(n * n, 0.0);
    else sim_link_values(*lat, n, c.latency, r, "links: \"latency\" ");
  } else if (topo == "groups") {
    const std::int64_t gs = r.integer(L, "group_size", "links: ", 0);
    if (gs < 1) r.fail("links: ", "\"group_size\" must be positive");
    auto intra = L.find("intra"), inter = L.find("inter");
    if (intra == L.end() || !intra->is_object() || inter == L.end() || !inter->is_object())
      r.fail("links: ", "topology 'groups' needs \"intra\" and \"inter\" objects with bandwidth and latency");
    check_known_keys(*intra, {"bandwidth", "latency"}, r.at + "links: intra: ");
    check_known_keys(*inter, {"bandwidth", "latency"}, r.at + "links: inter: ");
    const double ib = r.number(*intra, "bandwidth", "links: intra: ", 0), il = r.number(*intra, "latency", "links: intra: ", 0);
    const double xb = r.number(*inter, "bandwidth", "links: inter: ", 0), xl = r.number(*inter, "latency", "links: inter: ", 0);
    Cluster g = Cluster::grouped(c.name, c.devices[0].spec, static_cast<std::int32_t>(n), static_cast<std::int32_t>(gs),
                                 ib, il, xb, xl);
    c.bandwidth = std::move(g.bandwidth);
    c.latency = std::move(g.latency);
  } else {
    r.fail("links: ", "unknown \"topology\" '" + topo + "' (expected 'groups', or give bandwidth/latency)");
  }
  for (std::size_t i = 0; i < n; ++i) {  // diagonal: never used, keep it valid
    c.bandwidth[i * n + i] = std::numeric_limits<double>::infinity();
    c.latency[i * n + i] = 0.0;
  }
  c.validate(r.at);
  return c;
}

// A device's fields as a go-cluster device object reads them (every field, so it round-trips).
nlohmann::json device_to_json(const DeviceSpec& s) {
  nlohmann::json jd;
  jd["type"] = s.name;
  jd["peak_flops"] = s.peak_flops;
  jd["mem_bandwidth"] = s.mem_bandwidth;
  jd["memory_bytes"] = s.memory_bytes;
  jd["launch_overhead"] = s.launch_overhead;
  jd["bandwidth_efficiency"] = s.bandwidth_efficiency;
  nlohmann::json ce = nlohmann::json::object();
  for (std::size_t k = 0; k < kNumOpKinds; ++k) ce[std::string(kOpKindNames[k])] = s.compute_efficiency[k];
  jd["compute_efficiency"] = std::move(ce);
  nlohmann::json me = nlohmann::json::object();
  for (std::size_t k = 0; k < kNumOpKinds; ++k) me[std::string(kOpKindNames[k])] = s.memory_efficiency[k];
  jd["memory_efficiency"] = std::move(me);
  return jd;
}

nlohmann::json cluster_to_json(const Cluster& c) {
  using nlohmann::json;
  json j;
  j["format"] = "go-cluster";
  j["version"] = 1;
  j["name"] = c.name;
  j["channels"] = std::string(channel_model_name(c.channels));
  json devs = json::array();
  for (const ClusterDevice& d : c.devices) {
    json jd = device_to_json(d.spec);
    jd["name"] = d.name;
    devs.push_back(std::move(jd));
  }
  j["devices"] = std::move(devs);
  const std::size_t n = c.devices.size();
  json bw = json::array(), lat = json::array();
  for (std::size_t i = 0; i < n; ++i) {
    json rb = json::array(), rl = json::array();
    for (std::size_t k = 0; k < n; ++k) {
      if (i == k) {
        rb.push_back(nullptr);
        rl.push_back(nullptr);
      } else {
        rb.push_back(c.bandwidth[i * n + k]);
        rl.push_back(c.latency[i * n + k]);
      }
    }
    bw.push_back(std::move(rb));
    lat.push_back(std::move(rl));
  }
  j["links"] = {{"bandwidth", std::move(bw)}, {"latency", std::move(lat)}};
  return j;
}

std::uint64_t cluster_fingerprint(const Cluster& c) {
  nlohmann::json j = cluster_to_json(c);
  j.erase("name");
  for (auto& d : j["devices"]) d.erase("name");
  const std::string text = j.dump();
  return fnv1a64(text.data(), text.size());
}

Cluster parse_cluster(std::string_view text, const std::string& source) {
  return cluster_from_json(parse_json_document(text, source, /*comments=*/true), source);
}

void save_cluster(const Cluster& c, const std::string& path) {
  write_file_atomic(path, cluster_to_json(c).dump(1) + "\n");
}

nlohmann::json plan_to_json(const Plan& p, const OpGraph& g) {
  check_plan_sizes(p, g.num_ops());
  nlohmann::json j;
  j["format"] = "go-plan";
  j["version"] = 1;
  j["graph"] = g.info().name.empty() ? g.info().source : g.info().name;
  j["num_ops"] = g.num_ops();
  if (p.device.empty()) j["device"] = std::vector<std::int32_t>(static_cast<std::size_t>(g.num_ops()), 0);
  else j["device"] = p.device;
  if (!p.priority.empty()) j["priority"] = p.priority;
  if (!p.fusion.empty()) j["fusion"] = p.fusion;
  return j;
}

// The human-expert split format of msr-fiddle/dnn-partitioning.
Plan plan_from_expert_split(const nlohmann::json& j, const OpGraph& g, const std::string& source) {
  SimJson r{source + ": "};
  if (!j.is_object()) r.fail("", "an expert split must be a JSON object");
  auto f = j.find("fpgas");
  if (f == j.end() || !f->is_array()) r.fail("", "missing \"fpgas\" array");
  std::vector<std::vector<std::int64_t>> lists;
  for (std::size_t d = 0; d < f->size(); ++d) {
    const std::string ctx = "fpgas[" + std::to_string(d) + "]: ";
    if (!(*f)[d].is_object()) r.fail(ctx, "must be an object with \"nodes\"");
    auto nodes = (*f)[d].find("nodes");
    if (nodes == (*f)[d].end()) r.fail(ctx, "missing \"nodes\"");
    lists.push_back(sim_id_list(*nodes, r, ctx + "\"nodes\" "));
  }
  auto c = j.find("cpus");
  if (c != j.end() && c->is_array())
    for (std::size_t k = 0; k < c->size(); ++k) {
      auto nodes = (*c)[k].find("nodes");
      if (nodes != (*c)[k].end() && nodes->is_array() && !nodes->empty())
        r.fail("cpus[" + std::to_string(k) + "]: ", "places " + std::to_string(nodes->size()) +
                                                    " node(s) on a CPU; CPU placement is not modelled");
    }
  return sim_plan_from_lists(lists, g, r.at, "device");
}

Plan plan_from_json(const nlohmann::json& j, const OpGraph& g, const std::string& source) {
  SimJson r{source + ": "};
  if (!j.is_object()) r.fail("", "a plan must be a JSON object");
  if (j.contains("fpgas")) return plan_from_expert_split(j, g, source);
  check_known_keys(j, {"format", "version", "graph", "num_ops", "device", "device_ops", "priority", "fusion"}, r.at);
  const std::string fmt = r.string(j, "format", "", "go-plan");
  if (fmt != "go-plan") r.fail("", "\"format\" is '" + fmt + "', expected 'go-plan'");
  const std::int64_t version = r.integer(j, "version", "", 1);
  if (version != 1) r.fail("", "unsupported plan version " + std::to_string(version));
  const auto n = static_cast<std::size_t>(g.num_ops());
  const std::int64_t num_ops = r.integer(j, "num_ops", "", static_cast<std::int64_t>(n));
  if (num_ops != static_cast<std::int64_t>(n))
    r.fail("", "the plan is for " + std::to_string(num_ops) + " ops but the graph has " + std::to_string(n));
  // a document that sets none of them is another file given as a plan, not the default plan
  if (!j.contains("device") && !j.contains("device_ops") && !j.contains("priority") && !j.contains("fusion"))
    r.fail("", "the plan sets nothing: give \"device\" (or \"device_ops\"), \"priority\" or \"fusion\" "
               "(every op on device 0 is {\"device\": [0, 0, ...]})");
  Plan p;
  auto dl = j.find("device_ops");
  auto dv = j.find("device");
  if (dl != j.end() && dv != j.end()) r.fail("", "give either \"device\" or \"device_ops\", not both");
  if (dl != j.end()) {
    if (!dl->is_array()) r.fail("", "\"device_ops\" must be an array of per-device id lists");
    std::vector<std::vector<std::int64_t>> lists;
    for (std::size_t d = 0; d < dl->size(); ++d)
      lists.push_back(sim_id_list((*dl)[d], r, "device_ops[" + std::to_string(d) + "] "));
    p.device = sim_plan_from_lists(lists, g, r.at, "device").device;
  } else if (dv != j.end()) {
    if (!dv->is_array() || dv->size() != n)
      r.fail("", "\"device\" must be an array of " + std::to_string(n) + " device indices");
    p.device.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t d = r.integer((*dv)[i], "device[" + std::to_string(i) + "] ");
      if (d < 0 || d > 1 << 20) r.fail("", "device[" + std::to_string(i) + "] is " + std::to_string(d));
      p.device[i] = static_cast<std::int32_t>(d);
    }
  }
  if (auto pr = j.find("priority"); pr != j.end() && !pr->is_null()) {
    if (!pr->is_array() || pr->size() != n) r.fail("", "\"priority\" must be an array of " + std::to_string(n) + " numbers");
    p.priority.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      const double v = r.number((*pr)[i], "priority[" + std::to_string(i) + "] ");
      if (!(std::abs(v) <= static_cast<double>(std::numeric_limits<float>::max())))
        r.fail("", "priority[" + std::to_string(i) + "] is outside the float range");
      p.priority[i] = static_cast<float>(v);
    }
  }
  if (auto fu = j.find("fusion"); fu != j.end() && !fu->is_null()) {
    if (!fu->is_array() || fu->size() != n) r.fail("", "\"fusion\" must be an array of " + std::to_string(n) + " group ids");
    p.fusion.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t f = r.integer((*fu)[i], "fusion[" + std::to_string(i) + "] ");
      if (f < -1 || f >= static_cast<std::int64_t>(n))
        r.fail("", "fusion[" + std::to_string(i) + "] is " + std::to_string(f) + " (valid: -1, or 0 to " +
                       std::to_string(n - 1) + ")");
      p.fusion[i] = static_cast<std::int32_t>(f);
    }
  }
  return p;
}

Plan parse_plan(std::string_view text, const OpGraph& g, const std::string& source) {
  return plan_from_json(parse_json_document(text, source, /*comments=*/true), g, source);
}

void save_plan(const Plan& p, const OpGraph& g, const std::string& path) {
  write_file_atomic(path, plan_to_json(p, g).dump() + "\n");
}

}  // namespace go
