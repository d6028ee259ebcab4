#pragma once
// The critical path of the last simulation: where a plan's step time goes (go::critical_path in
// go/graph/cost.hpp is another thing: the graph's longest path by op times, with no schedule).
//
// From the unit (an op, or a fusion group) that finished last, the walk goes back through what let
// each unit start when it did: the later of its last data input's arrival (its producer's finish
// on the same device, or the end of that tensor's transfer to this device) and its device's
// previous unit's finish (device order; a tie counts as the data's). Units of no time (inputs,
// views) are passed through (they wait for their device too): they add no compute and are not
// listed. The path's time then splits exactly into compute (its units' times), transfers on it,
// the time those tensors waited for a busy link (their transfer started after their producer
// finished), and gaps (a unit starting after what let it): the four add up to the last unit's
// finish, the step time. Each step goes back to an earlier unit or a data predecessor, so the walk
// ends; it reads the workspace's schedule, no simulation.
// A path of device-order links on a device busy nearly all the step says its work is the limit;
// data links, transfers and link waits say the dependency chain and its hand-offs are.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "go/graph/graph.hpp"
#include "go/graph/op_kind.hpp"
#include "go/sim/plan.hpp"
#include "go/sim/simulator.hpp"

namespace go {

// How a unit on the path was let start.
enum class PathLink : std::uint8_t {
  start,     // nothing: it started first (or at the step's start)
  data,      // a data input produced on its device
  transfer,  // a data input's transfer from another device
  device,    // its device's previous unit
};

constexpr std::string_view path_link_name(PathLink l) {
  constexpr std::string_view names[] = {"start", "data", "transfer", "device"};
  return names[static_cast<std::size_t>(l)];
}

struct StepPath {
  struct Unit {
    OpId unit = -1;       // SimWorkspace::unit_of: the op, or the first op of its fusion group
    double start = 0, finish = 0;
    double ready = 0;     // when what let it start (`link`) was there: start >= ready
    PathLink link = PathLink::start;
  };
  std::vector<Unit> units;  // the path's units of nonzero time, the last first
  double end = 0;           // the last unit's finish (seconds)
  double compute = 0, transfers = 0, link_wait = 0, gaps = 0;  // seconds; they add up to `end`
  // how many of `units` were let start by `l`
  std::int64_t links(PathLink l) const {
    return std::count_if(units.begin(), units.end(), [l](const Unit& u) { return u.link == l; });
  }
  std::vector<double> compute_by_device;                 // seconds of `compute` per device
  std::array<double, kNumOpKinds> compute_by_kind{};     // per kind of the unit's (first) op
};

// The critical path of the last sim.simulate(plan, ws). Empty when the plan could not run (no
// finite step time) or nothing ran.
inline StepPath step_critical_path(const Simulator& sim, const Plan& plan, const SimWorkspace& ws) {
  const OpGraph& g = sim.graph();
  const auto n = static_cast<std::size_t>(g.num_ops());
  StepPath cp;
  cp.compute_by_device.assign(static_cast<std::size_t>(sim.cluster().num_devices()), 0.0);
  if (!std::isfinite(ws.result().step_time)) return cp;
  // members of each unit, and each device's units of nonzero time by start
  std::vector<std::vector<OpId>> members(n);
  std::vector<std::vector<OpId>> on_device(static_cast<std::size_t>(sim.cluster().num_devices()));
  OpId last = -1;
  for (OpId v = 0; v < g.num_ops(); ++v) {
    const OpId u = ws.unit_of(v);
    if (ws.start_time(v) < 0) continue;
    members[static_cast<std::size_t>(u)].push_back(v);
    if (u != v) continue;
    if (ws.finish_time(v) > ws.start_time(v)) on_device[static_cast<std::size_t>(plan.device_of(v))].push_back(v);
    if (last < 0 || ws.finish_time(v) > ws.finish_time(last)) last = v;
  }
  if (last < 0) return cp;
  for (auto& d : on_device)
    std::sort(d.begin(), d.end(), [&](OpId a, OpId b) { return ws.start_time(a) < ws.start_time(b); });
  // each tensor's transfers: (destination, record index)
  std::unordered_map<TensorId, std::vector<std::pair<std::int32_t, std::size_t>>> sent;
  const auto xfers = ws.transfers();
  for (std::size_t k = 0; k < xfers.size(); ++k) sent[xfers[k].tensor].emplace_back(xfers[k].dst, k);
  cp.end = ws.finish_time(last);
  constexpr double kTie = 1e-12;  // seconds
  for (OpId u = last; u >= 0;) {
    const double start = ws.start_time(u), finish = ws.finish_time(u);
    const std::int32_t dev = plan.device_of(u);
    const bool timed = finish > start;
    // the data input that arrived last
    double data = -std::numeric_limits<double>::infinity();
    OpId from = -1;
    const TransferRecord* via = nullptr;
    for (OpId v : members[static_cast<std::size_t>(u)]) {
      const auto preds = g.pred(v);
      const auto tensors = g.pred_tensors(v);
      for (std::size_t k = 0; k < preds.size(); ++k) {
        const OpId p = preds[k];
        if (tensors[k] < 0 || ws.unit_of(p) == u || ws.start_time(p) < 0) continue;
        double t = ws.finish_time(p);
        const TransferRecord* x = nullptr;
        if (plan.device_of(p) != dev)
          if (auto it = sent.find(tensors[k]); it != sent.end())
            for (const auto& [dst, i] : it->second)
              if (dst == dev) x = &xfers[i];
        if (x) t = x->end;
        if (t > data) {
          data = t;
          from = ws.unit_of(p);
          via = x;
        }
      }
    }
    // the device's previous unit of nonzero time (a device runs one unit at a time: the last one
    // started before this one, unless it is still running). Units of no time go through their
    // device's queue too: a view can wait for its device.
    OpId prev = -1;
    {
      const auto& d = on_device[static_cast<std::size_t>(dev)];
      auto it = std::lower_bound(d.begin(), d.end(), start, [&](OpId a, double s) { return ws.start_time(a) < s; });
      while (it != d.begin() && prev < 0)
        if (--it; ws.finish_time(*it) <= start + kTie) prev = *it;
    }
    StepPath::Unit step{u, start, finish, 0.0, PathLink::start};
    if (timed) {
      cp.compute += finish - start;
      cp.compute_by_device[static_cast<std::size_t>(dev)] += finish - start;
      cp.compute_by_kind[static_cast<std::size_t>(g.op(u).kind)] += finish - start;
    }
    OpId next = -1;
    if (prev >= 0 && ws.finish_time(prev) > data + kTie) {
      step.link = PathLink::device;
      step.ready = ws.finish_time(prev);
      next = prev;
    } else if (from >= 0) {
      step.link = via ? PathLink::transfer : PathLink::data;
      step.ready = data;
      if (via) {
        cp.transfers += via->end - via->start;
        cp.link_wait += via->start - ws.finish_time(from);
      }
      next = from;
    }
    cp.gaps += start - step.ready;
    if (timed) cp.units.push_back(step);
    u = next;
  }
  return cp;
}

}  // namespace go
