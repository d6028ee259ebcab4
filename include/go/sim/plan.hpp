#pragma once
// Plan: what an optimizer decides for every op of a graph, as flat per-OpId vectors so a policy's
// outputs fill it without conversion:
//   device[i]   int32, the device index in the cluster (empty vector: every op on device 0);
//   priority[i] float, scheduling priority, higher runs first among the ops ready on a device
//               (empty: first ready, first run, TensorFlow's executor order);
//   fusion[i]   int32, fusion group id in [0, num_ops), -1 = unfused (empty: no fusion). Ops sharing
//               an id run as one kernel (see simulator/semantics.hpp, "Fusion").
// A plan is valid for a graph and a cluster when every device is in range, every fusion group sits
// on one device, every fusion group is a kernel a compiler builds (go/graph/fusion_rules.hpp; when
// asked, on by default) and the fusion groups leave the graph acyclic (each group convex: no path
// leaves a group and re-enters it, and no two groups depend on each other), and, when asked, every
// colocation group sits on one device. check_plan() says why not; the simulator reports the same
// problems in its result without throwing.
//
// JSON ("go-plan", version 1):
//   { "format": "go-plan", "version": 1, "graph": "<graph name>", "num_ops": N,
//     "device": [N ints], "priority": [N numbers] (optional), "fusion": [N ints] (optional) }
// indexed by OpId (the position of the op in the graph). Two other placements load as plans:
//   "device_ops": [[source ids on device 0], [source ids on device 1], ...]   (ids as in the graph file)
//   the human-expert splits of msr-fiddle/dnn-partitioning (real-data/.../human-experts/*.json):
//     { "fpgas": [{"nodes": [ids]}, ...], "cpus": [{"nodes": []}], "maxLoad": ... }
//     fpgas[k] becomes device k; node ids are the graph file's node ids (OpGraph source_id); every
//     op must be listed exactly once, and CPU placements are not modelled (they must be empty).
// In a go-plan, a key outside these is an error ("devices" for "device" must not place every op on
// device 0), and so is a key given twice, and a document with none of "device", "device_ops",
// "priority" and "fusion" (another JSON file given as a plan would otherwise be the default plan).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "go/core/error.hpp"
#include "go/core/file.hpp"
#include "go/graph/fusion_rules.hpp"
#include "go/graph/graph.hpp"
#include "go/sim/cluster.hpp"

namespace go {

struct Plan {
  std::vector<std::int32_t> device;
  std::vector<float> priority;
  std::vector<std::int32_t> fusion;

  bool has_priority() const { return !priority.empty(); }
  bool has_fusion() const { return !fusion.empty(); }
  std::int32_t device_of(OpId i) const { return device.empty() ? 0 : device[static_cast<std::size_t>(i)]; }

  // Every op on `device`, no priorities, no fusion.
  static Plan single_device(std::int32_t num_ops, std::int32_t device = 0) {
    Plan p;
    p.device.assign(static_cast<std::size_t>(num_ops), device);
    return p;
  }
};

// Calls f(op, destination device, tensor) for each transfer of a placement (`device`, one entry per
// op) as the simulator makes them (go/sim/simulator/semantics.hpp, "Transfers"): each output
// tensor of an op once to every other device that reads it over a data edge.
template <class F>
void for_each_transfer(const OpGraph& g, std::span<const std::int32_t> device, F&& f) {
  std::vector<std::pair<TensorId, std::int32_t>> sent;  // (tensor, device) pairs of one op
  for (OpId v = 0; v < g.num_ops(); ++v) {
    const std::int32_t own = device[static_cast<std::size_t>(v)];
    const auto succ = g.succ(v);
    const auto tensors = g.succ_tensors(v);
    sent.clear();
    for (std::size_t k = 0; k < succ.size(); ++k) {
      const std::int32_t d = device[static_cast<std::size_t>(succ[k])];
      const std::pair<TensorId, std::int32_t> td{tensors[k], d};
      if (tensors[k] < 0 || d == own || std::find(sent.begin(), sent.end(), td) != sent.end()) continue;
      sent.push_back(td);
      f(v, d, tensors[k]);
    }
  }
}

// Throws go::Error when a non-empty vector of the plan does not have one entry per op.
inline void check_plan_sizes(const Plan& p, std::int32_t num_ops, const std::string& where = "plan: ") {
  const auto n = static_cast<std::size_t>(num_ops);
  GO_CHECK(p.device.empty() || p.device.size() == n, where, "plan has ", p.device.size(),
           " device entries for a graph of ", n, " ops");
  GO_CHECK(p.priority.empty() || p.priority.size() == n, where, "plan has ", p.priority.size(),
           " priority entries for a graph of ", n, " ops");
  GO_CHECK(p.fusion.empty() || p.fusion.size() == n, where, "plan has ", p.fusion.size(),
           " fusion entries for a graph of ", n, " ops");
}

// "" when the plan is valid for the graph on `num_devices` devices, else the first problem in one
// line. Allocates; the simulator performs the same checks, in the same order, without allocating.
inline std::string check_plan(const OpGraph& g, const Plan& p, std::int32_t num_devices, bool check_colocation = true,
                              bool check_fusion_rules = true) {
  check_plan_sizes(p, g.num_ops());
  const auto n = static_cast<std::size_t>(g.num_ops());
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t d = p.device_of(static_cast<OpId>(i));
    if (d < 0 || d >= num_devices)
      return g.label(static_cast<OpId>(i)) + " is placed on device " + std::to_string(d) + " but the cluster has " +
             std::to_string(num_devices) + " device(s)";
    if (!p.priority.empty() && !std::isfinite(p.priority[i]))
      return g.label(static_cast<OpId>(i)) + " has a non-finite priority";
  }
  if (check_colocation) {
    std::unordered_map<std::int32_t, OpId> first;
    for (std::size_t i = 0; i < n; ++i) {
      const std::int32_t c = g.op(static_cast<OpId>(i)).colocation;
      if (c < 0) continue;
      auto [it, fresh] = first.emplace(c, static_cast<OpId>(i));
      if (!fresh && p.device_of(it->second) != p.device_of(static_cast<OpId>(i)))
        return "colocation group " + std::to_string(c) + " spans devices " + std::to_string(p.device_of(it->second)) +
               " and " + std::to_string(p.device_of(static_cast<OpId>(i))) + ": " + g.label(it->second) + " and " +
               g.label(static_cast<OpId>(i));
    }
  }
  if (p.fusion.empty()) return {};
  // groups: range, one device each
  std::vector<OpId> leader(n, -1);  // per group id: first member in topological order
  for (OpId v : g.topo_order()) {
    const std::int32_t f = p.fusion[static_cast<std::size_t>(v)];
    if (f < -1 || f >= static_cast<std::int32_t>(n))
      return g.label(v) + " has fusion group " + std::to_string(f) + " (valid: -1, or 0 to " + std::to_string(n - 1) + ")";
    if (f < 0) continue;
    OpId& l = leader[static_cast<std::size_t>(f)];
    if (l < 0) l = v;
    else if (p.device_of(l) != p.device_of(v))
      return "fusion group " + std::to_string(f) + " spans devices " + std::to_string(p.device_of(l)) + " and " +
             std::to_string(p.device_of(v)) + ": " + g.label(l) + " and " + g.label(v);
  }
  auto unit = [&](OpId v) {
    const std::int32_t f = p.fusion[static_cast<std::size_t>(v)];
    return f < 0 ? v : leader[static_cast<std::size_t>(f)];
  };
  std::vector<std::vector<OpId>> members(n);
  for (OpId v : g.topo_order()) members[static_cast<std::size_t>(unit(v))].push_back(v);
  // kernels a compiler builds; groups in the order the simulator meets them (by their second op in
  // topological order), so both name the same group
  if (check_fusion_rules) {
    const std::vector<FusionTraits> traits = fusion_traits(g);
    const auto view = fusion_view(g, traits);
    std::vector<std::uint32_t> stamp(static_cast<std::size_t>(g.num_tensors()), 0);
    std::uint32_t tag = 0;
    for (OpId v : g.topo_order()) {
      const OpId l = unit(v);
      const auto& mem = members[static_cast<std::size_t>(l)];
      if (l == v || mem[1] != v) continue;
      auto in = [&](OpId u) { return unit(u) == l; };
      FusionProblem fp = check_fusion_group(view, mem, in);
      if (!fp) fp = fusion_operand_budget(fusion_operands(view, mem, in, stamp.data(), ++tag), l);
      if (fp) return "fusion group " + std::to_string(p.fusion[static_cast<std::size_t>(l)]) + " " + fusion_problem_text(g, fp);
    }
  }
  // acyclic quotient graph (Kahn over units)
  std::vector<std::int32_t> indeg(n, 0);
  for (std::size_t v = 0; v < n; ++v)
    for (OpId u : g.pred(static_cast<OpId>(v)))
      if (unit(u) != unit(static_cast<OpId>(v))) ++indeg[static_cast<std::size_t>(unit(static_cast<OpId>(v)))];
  std::vector<OpId> queue;
  std::size_t units = 0;
  for (std::size_t v = 0; v < n; ++v)
    if (unit(static_cast<OpId>(v)) == static_cast<OpId>(v)) {
      ++units;
      if (indeg[v] == 0) queue.push_back(static_cast<OpId>(v));
    }
  for (std::size_t h = 0; h < queue.size(); ++h)
    for (OpId m : members[static_cast<std::size_t>(queue[h])])
      for (OpId w : g.succ(m))
        if (unit(w) != queue[h] && --indeg[static_cast<std::size_t>(unit(w))] == 0) queue.push_back(unit(w));
  if (queue.size() == units) return {};
  // Find a cycle among the stuck units: walk to a stuck predecessor unit until one repeats.
  OpId cur = -1;
  for (std::size_t v = 0; v < n && cur < 0; ++v)
    if (unit(static_cast<OpId>(v)) == static_cast<OpId>(v) && indeg[v] > 0) cur = static_cast<OpId>(v);
  std::vector<std::int32_t> seen(n, -1);
  std::vector<OpId> path;
  while (seen[static_cast<std::size_t>(cur)] < 0) {
    seen[static_cast<std::size_t>(cur)] = static_cast<std::int32_t>(path.size());
    path.push_back(cur);
    OpId next = -1;
    for (OpId m : members[static_cast<std::size_t>(cur)]) {
      for (OpId u : g.pred(m))
        if (unit(u) != cur && indeg[static_cast<std::size_t>(unit(u))] > 0) {
          next = unit(u);
          break;
        }
      if (next >= 0) break;
    }
    cur = next;
  }
  std::vector<OpId> cyc(path.begin() + seen[static_cast<std::size_t>(cur)], path.end());
  std::vector<std::int32_t> groups;
  OpId outside = -1;
  for (OpId u : cyc) {
    const std::int32_t f = p.fusion[static_cast<std::size_t>(u)];
    if (f >= 0 && members[static_cast<std::size_t>(u)].size() > 1) groups.push_back(f);
    else outside = u;
  }
  std::sort(groups.begin(), groups.end());
  if (groups.size() == 1)
    return "fusion group " + std::to_string(groups[0]) + " is not convex: a path leaves it and re-enters it through " +
           g.label(outside);
  return "fusion groups " + std::to_string(groups[0]) + " and " + std::to_string(groups[1]) +
         " depend on each other (fusing them would create a cycle)";
}

// Moves every op of a colocation group to the device of the group's first op (in topological
// order), so a policy that places ops independently yields a plan that respects colocation.
inline void colocate(const OpGraph& g, Plan& p) {
  if (p.device.empty()) return;
  check_plan_sizes(p, g.num_ops());
  std::unordered_map<std::int32_t, std::int32_t> dev;
  for (OpId v : g.topo_order()) {
    const std::int32_t c = g.op(v).colocation;
    if (c < 0) continue;
    auto [it, fresh] = dev.emplace(c, p.device[static_cast<std::size_t>(v)]);
    if (!fresh) p.device[static_cast<std::size_t>(v)] = it->second;
  }
}

// Unfuses every fusion group whose ops are on more than one device (all of its ops), the groups a
// device move split: a group must run on one device (check_plan), and what is left of a legal
// group on either side need not be a legal kernel (fusion_rules.hpp) or convex.
inline void dissolve_split_fusion(Plan& p) {
  if (p.fusion.empty()) return;
  const std::size_t n = p.fusion.size();
  std::vector<std::int32_t> dev(n, -1);  // per group id: its first op's device, -2 once split
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t f = p.fusion[i];
    if (f < 0 || static_cast<std::size_t>(f) >= n) continue;  // out of range: check_plan says so
    std::int32_t& d = dev[static_cast<std::size_t>(f)];
    const std::int32_t own = p.device.empty() ? 0 : p.device[i];
    if (d == -1) d = own;
    else if (d != own) d = -2;
  }
  for (std::int32_t& f : p.fusion)
    if (f >= 0 && static_cast<std::size_t>(f) < n && dev[static_cast<std::size_t>(f)] == -2) f = -1;
}

// Reading and writing go-plan JSON and the other placement formats above (src/sim/json.cpp):
// errors name `source` and the field.
nlohmann::json plan_to_json(const Plan& p, const OpGraph& g);
// The human-expert split format of msr-fiddle/dnn-partitioning.
Plan plan_from_expert_split(const nlohmann::json& j, const OpGraph& g, const std::string& source);
Plan plan_from_json(const nlohmann::json& j, const OpGraph& g, const std::string& source);
Plan parse_plan(std::string_view text, const OpGraph& g, const std::string& source);
void save_plan(const Plan& p, const OpGraph& g, const std::string& path);

inline Plan load_plan(const std::string& path, const OpGraph& g) { return parse_plan(read_file(path), g, path); }

}  // namespace go
