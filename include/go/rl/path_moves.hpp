#pragma once
// Critical-path moves: a hill-climb over a plan's actions that changes only what the plan's
// critical path (go/sim/critical_path.hpp) says holds its step.
//
// Why: the block moves of fine-tuning (annealing's move: a random run of rows on one device) and
// the policy's per-row draws change ops wherever they are, while the step time is set by one path
// through the schedule. On that path a unit that waited for its device's previous unit, or for a
// transfer, is where a change can shorten the step; the other units are either off the path or
// held by their own data. So each proposal picks such a unit of the current plan's path, uniformly:
//   - held by its device (the previous unit on it ran first): with probability 1/4 its priority
//     level rises by one, with 1/4 the blocking unit's falls by one (both within [0, levels)), and
//     with 1/2 it moves to another device;
//   - held by a transfer: it moves to another device (uniform among the others).
// A unit is a fusion group: every member's row changes, and a move takes the members' colocation
// groups along (decode puts a colocation group on its first op's device). A proposal is decoded
// and simulated; it is kept when it fits and is faster, and then the path is read again from the
// same simulation (no second run). Random over a seeded stream, so one start and one stream give
// one climb whatever the thread count. Measured in bench/README.md "Critical-path moves in
// fine-tuning".
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "go/core/rng.hpp"
#include "go/graph/graph.hpp"
#include "go/policy/features.hpp"
#include "go/policy/policy.hpp"
#include "go/sim/critical_path.hpp"
#include "go/sim/plan.hpp"
#include "go/sim/simulator.hpp"

namespace go::rl {

struct PathClimb {
  policy::Actions actions;  // where the climb ended (the start's when nothing was faster)
  Plan plan;                // their decoded plan
  double step_time = std::numeric_limits<double>::infinity();
  int accepted = 0;         // proposals kept
  // (valid, step time) of every simulation, in order: proposals only (the start is the caller's)
  std::vector<std::pair<bool, double>> simulated;
};

namespace detail {

// Fusion group id -> its members.
inline std::unordered_map<std::int32_t, std::vector<OpId>> fusion_members(const Plan& p) {
  std::unordered_map<std::int32_t, std::vector<OpId>> groups;
  for (std::size_t v = 0; v < p.fusion.size(); ++v)
    if (p.fusion[v] >= 0) groups[p.fusion[v]].push_back(static_cast<OpId>(v));
  return groups;
}

}  // namespace detail

// Climbs from `start` (actions whose decoded plan is `start_plan`, simulated to `start_time` with
// `start_path` its critical path) for `simulations` proposals, each decoded by `decode` and
// simulated in `ws`. `levels`: the policy's priority levels. Ends early when the current path has
// no unit held by its device or a transfer (a chain of data alone: nothing here can shorten it).
inline PathClimb climb_critical_path(const Simulator& sim, const policy::PolicyGraph& pg, SimWorkspace& ws,
                                     const policy::Actions& start, const Plan& start_plan, double start_time,
                                     const StepPath& start_path, int simulations, int levels, Rng rng,
                                     const std::function<Plan(const policy::Actions&)>& decode) {
  const OpGraph& g = sim.graph();
  const int num_devices = sim.cluster().num_devices();
  PathClimb out;
  out.actions = start.clone();
  out.plan = start_plan;
  out.step_time = start_time;
  if (simulations <= 0 || !std::isfinite(start_time) || num_devices < 1) return out;
  // colocation group -> its ops (a move takes the whole group: decode follows its first op)
  std::unordered_map<std::int32_t, std::vector<OpId>> colocated;
  for (OpId v = 0; v < g.num_ops(); ++v)
    if (g.op(v).colocation >= 0) colocated[g.op(v).colocation].push_back(v);
  StepPath path = start_path;
  auto members = detail::fusion_members(out.plan);
  std::vector<std::size_t> held;  // indices into path.units of units held by their device or a transfer
  auto read_path = [&] {
    held.clear();
    for (std::size_t k = 0; k < path.units.size(); ++k)
      if (path.units[k].link == PathLink::device || path.units[k].link == PathLink::transfer) held.push_back(k);
  };
  read_path();
  std::int32_t* dev = out.actions.device.data<std::int32_t>();
  std::int32_t* lev = out.actions.priority.data<std::int32_t>();
  std::vector<std::pair<std::int32_t, std::int32_t>> changed;  // (row, old value) of the proposal
  std::vector<OpId> unit_ops;
  auto ops_of = [&](OpId u) {
    unit_ops.clear();
    const std::int32_t f = out.plan.has_fusion() ? out.plan.fusion[static_cast<std::size_t>(u)] : -1;
    if (auto it = members.find(f); f >= 0 && it != members.end()) unit_ops = it->second;
    else unit_ops.push_back(u);
  };
  // attempts that propose nothing (a level already at its bound) draw again, a bounded number of times
  for (int made = 0, idle = 0; made < simulations && !held.empty() && idle < 4 * simulations;) {
    const std::size_t k = held[static_cast<std::size_t>(rng.uniform_int(held.size()))];
    const StepPath::Unit& unit = path.units[k];
    const double x = rng.uniform_double();
    changed.clear();
    std::int32_t* target = dev;
    if (unit.link == PathLink::device && x < 0.5) {  // priority: the unit up, or its blocker down
      const bool up = x < 0.25 || k + 1 >= path.units.size();
      ops_of(up ? unit.unit : path.units[k + 1].unit);
      target = lev;
      for (OpId v : unit_ops) {
        const std::int32_t r = pg.row_of[static_cast<std::size_t>(v)];
        const std::int32_t to = lev[r] + (up ? 1 : -1);
        if (to >= 0 && to < levels) {
          changed.emplace_back(r, lev[r]);
          lev[r] = to;
        }
      }
    } else if (num_devices > 1) {  // the unit (and its colocation groups) to another device
      ops_of(unit.unit);
      const std::int32_t from = out.plan.device_of(unit.unit);
      auto to = static_cast<std::int32_t>(rng.uniform_int(static_cast<std::uint64_t>(num_devices - 1)));
      if (to >= from) ++to;
      auto move = [&](OpId v) {
        const std::int32_t r = pg.row_of[static_cast<std::size_t>(v)];
        if (dev[r] != to) {
          changed.emplace_back(r, dev[r]);
          dev[r] = to;
        }
      };
      for (OpId v : unit_ops) {
        move(v);
        if (const std::int32_t c = g.op(v).colocation; c >= 0)
          for (OpId w : colocated[c]) move(w);
      }
    }
    if (changed.empty()) {
      ++idle;
      continue;
    }
    ++made;
    Plan p = decode(out.actions);
    const SimResult r = sim.simulate(p, ws);
    out.simulated.emplace_back(r.valid, r.step_time);
    if (r.valid && std::isfinite(r.step_time) && r.step_time < out.step_time) {
      out.step_time = r.step_time;
      out.plan = std::move(p);
      ++out.accepted;
      path = step_critical_path(sim, out.plan, ws);
      members = detail::fusion_members(out.plan);
      read_path();
    } else {
      for (auto it = changed.rbegin(); it != changed.rend(); ++it) target[it->first] = it->second;
    }
  }
  return out;
}

}  // namespace go::rl
