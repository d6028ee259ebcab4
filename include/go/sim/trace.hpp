#pragma once
// Chrome trace of the last simulation (Trace Event Format: open in chrome://tracing or
// ui.perfetto.dev). Process "devices" has one track per device compute stream; process "links" one
// track per ordered device pair that carried data. Units are complete ("X") events named after
// their op (a fusion group after its first op, "+k fused" appended), with as arguments the op's
// kind, "index" (its OpId: its entry in the plan's arrays and in the graph's op order, as the
// Python module's Graph.names), "op" (its source_id: its id in the file it came from, or the one
// the training expansion gave it; ops are in topological order, so it is not the index) and fusion
// group; transfers are named after the tensor ("producer:output") with its bytes and its
// producer's index. Zero-length units (inputs, views) are left out. When the workspace recorded
// memory (SimWorkspace::set_record_memory), each device also gets a "memory <device>" counter track.
// Times are in microseconds, as the format wants.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "go/core/error.hpp"
#include "go/core/file.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/op_kind.hpp"
#include "go/sim/plan.hpp"
#include "go/sim/simulator.hpp"

namespace go {

// `plan` and `ws` must be the plan and workspace of the last sim.simulate() call.
inline nlohmann::json chrome_trace(const Simulator& sim, const Plan& plan, const SimWorkspace& ws) {
  using nlohmann::json;
  const OpGraph& g = sim.graph();
  const Cluster& c = sim.cluster();
  const std::int32_t nd = c.num_devices();
  json events = json::array();
  auto meta = [&](int pid, int tid, const char* what, const std::string& name) {
    json e{{"ph", "M"}, {"pid", pid}, {"name", what}, {"args", {{"name", name}}}};
    if (tid >= 0) e["tid"] = tid;
    events.push_back(std::move(e));
  };
  meta(0, -1, "process_name", "devices");
  meta(1, -1, "process_name", "links");
  for (std::int32_t d = 0; d < nd; ++d) {
    meta(0, d, "thread_name", c.devices[static_cast<std::size_t>(d)].name + " (" + c.spec(d).name + ")");
    events.push_back({{"ph", "M"}, {"pid", 0}, {"tid", d}, {"name", "thread_sort_index"}, {"args", {{"sort_index", d}}}});
  }
  // units
  std::vector<std::int32_t> size(static_cast<std::size_t>(g.num_ops()), 0);
  for (OpId i = 0; i < g.num_ops(); ++i) ++size[static_cast<std::size_t>(ws.unit_of(i))];
  for (OpId i = 0; i < g.num_ops(); ++i) {
    if (ws.unit_of(i) != i) continue;
    const double s = ws.start_time(i), f = ws.finish_time(i);
    if (s < 0 || f <= s) continue;
    const Op& o = g.op(i);
    std::string name = g.name(i);
    const std::int32_t k = size[static_cast<std::size_t>(i)];
    if (k > 1) name += " +" + std::to_string(k - 1) + " fused";
    json args{{"index", i}, {"op", o.source_id}, {"kind", std::string(op_kind_name(o.kind))}};
    if (plan.has_fusion() && plan.fusion[static_cast<std::size_t>(i)] >= 0) args["group"] = plan.fusion[static_cast<std::size_t>(i)];
    if (plan.has_priority()) args["priority"] = plan.priority[static_cast<std::size_t>(i)];
    events.push_back({{"ph", "X"},
                      {"pid", 0},
                      {"tid", plan.device_of(i)},
                      {"name", std::move(name)},
                      {"cat", std::string(op_kind_name(o.kind))},
                      {"ts", s * 1e6},
                      {"dur", (f - s) * 1e6},
                      {"args", std::move(args)}});
  }
  // transfers
  std::vector<char> link_used(static_cast<std::size_t>(nd) * static_cast<std::size_t>(nd), 0);
  for (const TransferRecord& x : ws.transfers()) {
    const std::int32_t tid = x.src * nd + x.dst;
    if (!link_used[static_cast<std::size_t>(tid)]) {
      link_used[static_cast<std::size_t>(tid)] = 1;
      meta(1, tid, "thread_name",
           c.devices[static_cast<std::size_t>(x.src)].name + " -> " + c.devices[static_cast<std::size_t>(x.dst)].name);
    }
    const TensorInfo& t = g.tensor(x.tensor);
    events.push_back({{"ph", "X"},
                      {"pid", 1},
                      {"tid", tid},
                      {"name", g.name(t.producer) + ":" + std::to_string(t.output_index)},
                      {"cat", "transfer"},
                      {"ts", x.start * 1e6},
                      {"dur", (x.end - x.start) * 1e6},
                      {"args", {{"bytes", x.bytes}, {"producer", t.producer}}}});
  }
  // memory counters
  for (const MemoryEvent& m : ws.memory_events())
    events.push_back({{"ph", "C"},
                      {"pid", 0},
                      {"name", "memory " + c.devices[static_cast<std::size_t>(m.device)].name},
                      {"ts", m.time * 1e6},
                      {"args", {{"bytes", m.usage}}}});
  json j;
  j["traceEvents"] = std::move(events);
  j["displayTimeUnit"] = "ms";
  const SimResult& r = ws.result();
  j["otherData"] = {{"cluster", c.name},
                    {"graph", g.info().name.empty() ? g.info().source : g.info().name},
                    {"step_time_ms", r.step_time * 1e3},
                    {"valid", r.valid}};
  return j;
}

inline void write_chrome_trace(const std::string& path, const Simulator& sim, const Plan& plan, const SimWorkspace& ws) {
  write_file_atomic(path, chrome_trace(sim, plan, ws).dump() + "\n");
}

}  // namespace go
