#pragma once
// What a simulation reports (go/sim/simulator.hpp): its options, its result and status, the
// transfers and memory changes a workspace records, how far peaks exceed the devices' memory, and
// sim_reason(), which words an invalid plan's status as check_plan() does. The model behind them:
// simulator/semantics.hpp, "Semantics".
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "go/graph/cost.hpp"
#include "go/graph/fusion_rules.hpp"
#include "go/graph/graph.hpp"
#include "go/sim/cluster.hpp"

namespace go {

struct SimOptions {
  bool check_colocation = true;  // a colocation group spanning devices makes the plan invalid
  // A fusion group breaking go/graph/fusion_rules.hpp makes the plan invalid. Off only to study the
  // fusion cost model on arbitrary convex groups (tests, benchmarks of the mechanics).
  bool check_fusion_rules = true;
  bool stop_on_oom = false;      // stop at the first out-of-memory instead of finishing the step
  // roofline: ignore the graph's measured op times (as if it had none), to judge the cost model.
  CostSource cost = CostSource::measured;
};

enum class SimStatus : std::uint8_t {
  ok,
  bad_device,            // problem_op placed on problem_device, outside the cluster
  bad_priority,          // problem_op has a non-finite priority
  bad_fusion_id,         // problem_op has fusion id problem_group, outside [-1, num_ops)
  fusion_spans_devices,  // problem_group holds problem_op (problem_device) and problem_op2 (problem_device2)
  fusion_not_convex,     // a path leaves problem_group and re-enters it through problem_op
  fusion_cycle,          // problem_group and problem_group2 depend on each other
  fusion_illegal,        // problem_group breaks fusion_rule (go/graph/fusion_rules.hpp) at problem_op (and problem_op2)
  colocation_split,      // colocation group problem_group holds problem_op and problem_op2 on two devices
  out_of_memory,         // problem_device needed problem_bytes at problem_time (while running problem_op)
};

inline constexpr std::string_view sim_status_name(SimStatus s) {
  constexpr std::string_view names[] = {"ok",           "bad_device",        "bad_priority",
                                        "bad_fusion_id", "fusion_spans_devices", "fusion_not_convex",
                                        "fusion_cycle", "fusion_illegal",    "colocation_split",
                                        "out_of_memory"};
  return names[static_cast<std::size_t>(s)];
}

struct SimResult {
  bool valid = true;
  SimStatus status = SimStatus::ok;
  double step_time = 0;                        // seconds (+inf when the plan cannot run at all)
  std::vector<double> busy_time;               // seconds each device computed
  std::vector<std::int64_t> peak_memory;       // bytes per device (resident + live activations)
  std::vector<std::int64_t> resident_memory;   // bytes of parameters per device
  std::int64_t transfer_bytes = 0;             // bytes moved between devices
  std::int64_t transfers = 0;                  // number of tensor transfers
  std::int64_t kernel_launches = 0;            // units that launched a kernel
  std::int64_t units = 0;                      // units run (ops, with a fusion group counted once)
  double memory_traffic = 0;                   // bytes kernels read and wrote in device memory
  // What went wrong (see SimStatus), for sim_reason().
  OpId problem_op = -1, problem_op2 = -1;
  std::int32_t problem_group = -1, problem_group2 = -1;
  std::int32_t problem_device = -1, problem_device2 = -1;
  std::int64_t problem_bytes = 0;
  double problem_time = 0;
  FusionRule fusion_rule = FusionRule::ok;     // fusion_illegal: the rule problem_group breaks

  // Records group `group` (fusion or colocation) split across devices: its ops a and b, placed by
  // `dev` on two different devices (fusion_spans_devices, colocation_split).
  void record_split(std::int32_t group, OpId a, OpId b, const std::int32_t* dev) {
    problem_group = group;
    problem_op = a;
    problem_op2 = b;
    problem_device = dev[a];
    problem_device2 = dev[b];
  }
};

// One transfer of the last simulation.
struct TransferRecord {
  TensorId tensor = -1;
  std::int32_t src = 0, dst = 0;
  double start = 0, end = 0;  // seconds
  std::int64_t bytes = 0;
  OpId producer = -1;
  std::int32_t refs = 0;      // (internal) consumers on dst still to complete
  std::int32_t edge_begin = 0, edge_end = 0;  // (internal) the producer's out-edges of this tensor
  std::uint32_t seq = 0;      // (internal) request order of its end event (its start event: seq - 1)
  bool started = false;       // (internal) its start has been applied
};

// Device memory after a change (recorded when SimWorkspace::set_record_memory(true)).
struct MemoryEvent {
  double time = 0;
  std::int32_t device = 0;
  std::int64_t usage = 0;
};

// How far a result's per-device peaks exceed the devices' capacities: the sum over devices of
// max(0, peak / capacity - 1) (0 when everything fits).
inline double memory_excess(const SimResult& r, const Cluster& c) {
  double e = 0;
  for (std::size_t d = 0; d < r.peak_memory.size() && d < c.devices.size(); ++d) {
    const double cap = static_cast<double>(c.devices[d].spec.memory_bytes);
    if (cap > 0) e += std::max(0.0, static_cast<double>(r.peak_memory[d]) / cap - 1.0);
  }
  return e;
}

// One line saying why the plan is invalid ("" when valid), worded as check_plan() words it.
inline std::string sim_reason(const SimResult& r, const OpGraph& g, const Cluster& c) {
  auto dev_name = [&](std::int32_t d) {
    return std::to_string(d);
  };
  auto gb = [](double b) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f GB", b / 1e9);
    return std::string(buf);
  };
  switch (r.status) {
    case SimStatus::ok: return {};
    case SimStatus::bad_device:
      return g.label(r.problem_op) + " is placed on device " + std::to_string(r.problem_device) +
             " but the cluster has " + std::to_string(c.num_devices()) + " device(s)";
    case SimStatus::bad_priority: return g.label(r.problem_op) + " has a non-finite priority";
    case SimStatus::bad_fusion_id:
      return g.label(r.problem_op) + " has fusion group " + std::to_string(r.problem_group) + " (valid: -1, or 0 to " +
             std::to_string(g.num_ops() - 1) + ")";
    case SimStatus::fusion_spans_devices:
      return "fusion group " + std::to_string(r.problem_group) + " spans devices " + dev_name(r.problem_device) +
             " and " + dev_name(r.problem_device2) + ": " + g.label(r.problem_op) + " and " + g.label(r.problem_op2);
    case SimStatus::fusion_not_convex:
      return "fusion group " + std::to_string(r.problem_group) +
             " is not convex: a path leaves it and re-enters it through " + g.label(r.problem_op);
    case SimStatus::fusion_cycle:
      return "fusion groups " + std::to_string(r.problem_group) + " and " + std::to_string(r.problem_group2) +
             " depend on each other (fusing them would create a cycle)";
    case SimStatus::fusion_illegal:
      return "fusion group " + std::to_string(r.problem_group) + " " +
             fusion_problem_text(g, FusionProblem{r.fusion_rule, r.problem_op, r.problem_op2});
    case SimStatus::colocation_split:
      return "colocation group " + std::to_string(r.problem_group) + " spans devices " + dev_name(r.problem_device) +
             " and " + dev_name(r.problem_device2) + ": " + g.label(r.problem_op) + " and " + g.label(r.problem_op2);
    case SimStatus::out_of_memory: {
      const auto d = static_cast<std::size_t>(r.problem_device);
      char t[64];
      std::snprintf(t, sizeof t, "%.3f ms", r.problem_time * 1e3);
      std::string s = "out of memory on device " + std::to_string(r.problem_device) + " ('" + c.devices[d].name +
                      "'): " + gb(static_cast<double>(r.problem_bytes)) + " needed, capacity " +
                      gb(static_cast<double>(c.devices[d].spec.memory_bytes)) + ", at " + t;
      if (r.problem_op >= 0) s += " (" + g.label(r.problem_op) + ")";
      else s += " (parameters alone)";
      return s;
    }
  }
  return {};
}

}  // namespace go
