#pragma once
// Cost model: the time of an op on a device by a roofline with per-kind efficiency, overridden by a
// measured time when the graph has one; graph statistics and the critical path.
#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "go/core/error.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/op_kind.hpp"

namespace go {

// Fraction of peak FLOP/s an op kind reaches in practice (dense conv/matmul kernels run close to
// peak, everything else is bandwidth-bound long before its FLOPs matter).
inline std::array<double, kNumOpKinds> default_compute_efficiency() {
  std::array<double, kNumOpKinds> e{};
  e.fill(0.25);
  e[op_kind_index(OpKind::conv)] = 0.6;
  e[op_kind_index(OpKind::matmul)] = 0.7;
  e[op_kind_index(OpKind::rnn)] = 0.4;
  return e;
}

struct DeviceSpec {
  std::string name = "v100";
  double peak_flops = 15.7e12;          // FLOP/s (fp32)
  double mem_bandwidth = 900e9;         // bytes/s
  double launch_overhead = 5e-6;        // seconds per kernel launch
  std::int64_t memory_bytes = 16LL << 30;
  double bandwidth_efficiency = 0.8;    // fraction of mem_bandwidth reached by streaming kernels
  std::array<double, kNumOpKinds> compute_efficiency = default_compute_efficiency();

  static DeviceSpec v100() { return {}; }
  static DeviceSpec p100() {
    DeviceSpec d;
    d.name = "p100";
    d.peak_flops = 9.3e12;
    d.mem_bandwidth = 732e9;
    d.memory_bytes = 16LL << 30;
    return d;
  }
  static DeviceSpec k80() {  // one GK210 die of a K80, as in Placeto's simulator
    DeviceSpec d;
    d.name = "k80";
    d.peak_flops = 4.37e12;
    d.mem_bandwidth = 240e9;
    d.launch_overhead = 5.7e-6;
    d.memory_bytes = 12LL << 30;
    return d;
  }
  static DeviceSpec a100() {
    DeviceSpec d;
    d.name = "a100";
    d.peak_flops = 19.5e12;
    d.mem_bandwidth = 1555e9;
    d.memory_bytes = 40LL << 30;
    return d;
  }
  static DeviceSpec h100() {
    DeviceSpec d;
    d.name = "h100";
    d.peak_flops = 51.2e12;
    d.mem_bandwidth = 2.0e12;
    d.memory_bytes = 80LL << 30;
    return d;
  }
  static DeviceSpec preset(std::string_view name) {
    if (name == "v100") return v100();
    if (name == "p100") return p100();
    if (name == "k80") return k80();
    if (name == "a100") return a100();
    if (name == "h100") return h100();
    GO_FAIL("unknown device preset '", name, "' (known: v100, p100, k80, a100, h100)");
  }
};

// Seconds the op takes on `spec`: its measured time when it has one; zero for inputs, constants and
// views; otherwise launch overhead + max(FLOPs / (peak * efficiency), bytes / (bandwidth * efficiency))
// with bytes = distinct inputs + outputs + parameters.
inline double op_time(const Op& op, const DeviceSpec& spec) {
  if (op.has_time()) return op.time;
  if (is_free_op(op.kind)) return 0.0;
  const double eff = spec.compute_efficiency[op_kind_index(op.kind)];
  const double compute = op.flops / (spec.peak_flops * (eff > 0 ? eff : 1.0));
  const double bytes = static_cast<double>(op.input_bytes + op.output_bytes + op.param_bytes);
  const double memory = bytes / (spec.mem_bandwidth * spec.bandwidth_efficiency);
  return spec.launch_overhead + std::max(compute, memory);
}

// op_time of every op, indexed by OpId.
inline std::vector<double> op_times(const OpGraph& g, const DeviceSpec& spec) {
  std::vector<double> t(static_cast<std::size_t>(g.num_ops()));
  for (const Op& o : g.ops()) t[static_cast<std::size_t>(o.id)] = op_time(o, spec);
  return t;
}

struct CriticalPath {
  double time = 0;           // seconds, sum of op times along the path (transfers not counted)
  std::vector<OpId> ops;     // the path, first op first
};

// Longest path through the DAG weighted by per-op times (indexed by OpId).
inline CriticalPath critical_path(const OpGraph& g, std::span<const double> times) {
  const auto n = static_cast<std::size_t>(g.num_ops());
  GO_CHECK(times.size() == n, g.where(), "critical_path: ", times.size(), " times for ", n, " ops");
  CriticalPath cp;
  if (n == 0) return cp;
  std::vector<double> finish(n, 0.0);
  std::vector<OpId> parent(n, -1);
  for (OpId v : g.topo_order()) {
    double start = 0;
    OpId best = -1;
    for (OpId u : g.pred(v))
      if (best < 0 || finish[static_cast<std::size_t>(u)] > start) {
        start = finish[static_cast<std::size_t>(u)];
        best = u;
      }
    finish[static_cast<std::size_t>(v)] = start + times[static_cast<std::size_t>(v)];
    parent[static_cast<std::size_t>(v)] = best;
  }
  OpId end = static_cast<OpId>(std::max_element(finish.begin(), finish.end()) - finish.begin());
  cp.time = finish[static_cast<std::size_t>(end)];
  for (OpId v = end; v >= 0; v = parent[static_cast<std::size_t>(v)]) cp.ops.push_back(v);
  std::reverse(cp.ops.begin(), cp.ops.end());
  return cp;
}

struct GraphStats {
  std::int32_t nodes = 0;
  std::int64_t edges = 0;
  double flops = 0;                      // total floating-point operations
  std::int64_t param_bytes = 0;
  std::int64_t activation_bytes = 0;     // bytes of all op outputs (every tensor the graph produces)
  std::int64_t temp_bytes = 0;
  std::int32_t measured_ops = 0;         // ops with a measured time
  std::array<std::int32_t, kNumOpKinds> kind_counts{};
  double total_time = 0;                 // sum of op times on the device (one-device step time lower bound)
  CriticalPath critical;                 // on the device
};

inline GraphStats graph_stats(const OpGraph& g, const DeviceSpec& spec = {}) {
  GraphStats s;
  s.nodes = g.num_ops();
  s.edges = g.num_edges();
  for (const Op& o : g.ops()) {
    s.flops += o.flops;
    s.param_bytes += o.param_bytes;
    s.activation_bytes += o.output_bytes;
    s.temp_bytes += o.temp_bytes;
    s.measured_ops += o.has_time() ? 1 : 0;
    ++s.kind_counts[op_kind_index(o.kind)];
  }
  auto t = op_times(g, spec);
  for (double x : t) s.total_time += x;
  s.critical = critical_path(g, t);
  return s;
}

}  // namespace go
