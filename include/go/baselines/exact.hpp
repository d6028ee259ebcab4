#pragma once
// The `exact` method: the optimal placement + schedule of a small graph (<= kExactMaxOps ops) under
// the simulator's op costs, by mixed-integer programming with CBC (COIN-OR branch and cut), or the
// best plan CBC finds within the time limit and its gap to CBC's lower bound.
//
// Model. A unit is an op, or a colocation group (one device for all its ops).
//   x[u][d]   binary: unit u on device d; sum_d x[u][d] = 1
//   S_v       start of op v; p_v = sum_d Simulator::op_cost(v, d) x[v][d], the simulator's own op time
//   C         the makespan, minimized: C >= S_v + p_v for every op without successors, and
//             C >= sum_v p_v x[v][d] per device (valid; it tightens CBC's bound)
//   precedence  S_w >= S_v + p_v + delay(v, w) for every (producer v, consumer w) pair, where
//             delay is the time to move what w reads from v over an idle link: the sum over the
//             distinct tensors of Cluster::transfer_time (the simulator sends them one after the other
//             on the sender's channel), the link latency alone for a control edge, 0 on one device.
//             When that time is the same for every device pair: delay = T y, y >= x[v][d] - x[w][d];
//             else delay >= T(d1, d2) (x[v][d1] + x[w][d2] - 1) for every ordered pair d1 != d2.
//   no overlap  for every two ops that no path orders (reachability) and not both of zero time
//             (the simulator runs zero-time ops on the device's stream too): s >= x[u][d] + x[v][d] - 1
//             (same device) and an ordering binary o: S_u + p_u <= S_v + M (1 - o) + M (1 - s) and
//             S_v + p_v <= S_u + M o + M (1 - s), M = the makespan of the best start (C <= M)
//   memory    per device: the list schedulers' static estimate (detail::base::op_footprint:
//             parameters + outputs + scratch, all for the whole step) of its ops, plus the bytes of
//             every tensor it receives from another device (r >= x[consumer][d] - x[producer][d]),
//             within DeviceSpec::memory_bytes. Conservative: a plan within it never runs out of memory
//             in the simulator, which frees activations and scratch earlier, but on training graphs
//             it can forbid plans that fit (one device for all). So the MILP is first solved without
//             these rows, and again with them only when its plan runs out of memory in the simulator
//             (the note says so); they are left out, too, when the whole graph with every tensor
//             copied to every device fits the smallest device.
//   symmetry  when the devices are identical (spec, memory, every link alike), devices are numbered
//             in the order of their first unit (by topological position).
// Times are scaled so the best start's makespan is 1000 (CBC's tolerances are absolute).
// Starts: the default plan and the heft, m-etf, m-sct and m-topo plans, each scheduled under the model
// (ops in priority order, each as early as the model allows); the best one (that fits the memory rows,
// when they are in) is CBC's MIP start and gives M. When it already meets the lower bound max(critical path, total work /
// devices) of the cheapest device times, it is returned without CBC.
// Second solve: among plans no longer than the first solve's, the fewest transfers (the sum of
// their model times), from the first plan, for at most 20% of the time (the makespan objective is
// indifferent to transfers off the critical path, and the simulator queues them on the links).
// Plan: each op's device; priorities from the start times (earlier first; at one instant zero-time
// ops first, then topological order); no fusion.
//
// Where the simulated step time can differ from the MILP objective (the note gives both):
//   - link contention: the model charges every transfer as if its link were idle; the simulator
//     serializes transfers on the devices' channels (Cluster::channels), so transfers that overlap in
//     the model (one op's output to two devices, two producers sending to one device) queue;
//   - several tensors from one producer to one device read by different consumers queue on the
//     channel too (the model sums only those one consumer reads);
//   - list scheduling: the simulator starts the highest-priority ready op whenever a device is
//     idle; a model schedule that keeps a device idle to wait for a more urgent op is replayed with a
//     lower-priority ready op started in the gap, which can move later ops;
//   - fusion is not modelled (the plan has none).
// On graphs without cross-device transfers on the critical schedule and with non-delay optimal
// schedules (e.g. independent ops, chains, one device) the plan simulates to the objective.
// The other way round, the model is a relaxation of the simulator: the simulated start times of any
// unfused plan that keeps colocation groups together satisfy every constraint above but memory
// (contention and list scheduling only delay ops; one producer's tensors to one consumer leave one
// after the other), so the optimum of the solve without memory rows, or CBC's bound when it is not
// proven (ExactSolution::lower_bound, "lower bound" in the note), is at most the simulated step
// time of every such plan. Fused plans (anneal, go) can go below it: a fused kernel pays one launch
// and less memory traffic than its ops apart.
//
// CBC is compiled in when GO_WITH_CBC is defined (cmake/baselines.cmake finds it); otherwise
// exact_solve throws a go::Error saying so.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <numeric>
#include <queue>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "go/baselines/common.hpp"
#include "go/baselines/human.hpp"
#include "go/baselines/list_scheduling.hpp"
#include "go/core/error.hpp"
#include "go/graph/graph.hpp"
#include "go/sim/cluster.hpp"
#include "go/sim/plan.hpp"
#include "go/sim/simulator.hpp"

#if defined(GO_WITH_CBC)
#include <Cbc_C_Interface.h>
#endif

namespace go {

inline constexpr bool exact_available() {
#if defined(GO_WITH_CBC)
  return true;
#else
  return false;
#endif
}

inline constexpr std::int32_t kExactMaxOps = 200;

struct ExactOptions {
  double time_limit = 60;  // seconds of CBC (wall clock); <= 0: 60
  SimOptions sim;          // the cost source of the op times (and of the final simulation)
};

struct ExactSolution {
  Plan plan;
  double objective = 0;   // MILP makespan of the plan, seconds
  double bound = 0;       // CBC's lower bound on the optimum, seconds (== objective when proven)
  bool optimal = false;   // proven optimal (under the model)
  bool used_cbc = false;  // false: a start met the lower bound, or the graph was trivial
  bool memory_modelled = false;  // the memory rows were in the MILP (else they could not bind)
  double lower_bound = 0;  // the memory-free MILP's optimum or bound: at most every unfused plan's simulated step time
  double seconds = 0;     // wall time of the whole method
  std::string note;       // "optimal (proven)" or "gap x% to bound y ms after t s", with the objective
};

namespace detail::exact {

// What a consumer reads from one producer.
struct Dep {
  OpId u = -1, v = -1;
  std::vector<double> bytes;  // distinct data tensors
  bool control_only = true;
};

struct Problem {
  const OpGraph& g;
  const Cluster& c;
  std::int32_t n = 0, k = 0;
  std::vector<std::vector<double>> cost;  // [v][d], seconds
  std::vector<Dep> deps;
  std::vector<std::int32_t> unit;         // per op
  std::int32_t num_units = 0;
  std::vector<std::int32_t> unit_order;   // units by their first op's topological position
  std::vector<std::vector<std::uint64_t>> reach;  // reach[v] bit w: a path v -> w

  Problem(const OpGraph& graph, const Cluster& cluster, const SimOptions& so) : g(graph), c(cluster) {
    n = g.num_ops();
    k = c.num_devices();
    const Simulator sim(g, c, so);
    cost.assign(static_cast<std::size_t>(n), std::vector<double>(static_cast<std::size_t>(k)));
    for (OpId v = 0; v < n; ++v)
      for (std::int32_t d = 0; d < k; ++d) cost[static_cast<std::size_t>(v)][static_cast<std::size_t>(d)] = sim.op_cost(v, d);
    for (OpId v = 0; v < n; ++v) {
      std::unordered_map<OpId, std::size_t> at;
      std::vector<TensorId> seen;
      const auto pred = g.pred(v);
      const auto pt = g.pred_tensors(v);
      for (std::size_t e = 0; e < pred.size(); ++e) {
        auto [it, fresh] = at.emplace(pred[e], deps.size());
        if (fresh) deps.push_back({pred[e], v, {}, true});
        Dep& dp = deps[it->second];
        if (pt[e] < 0 || std::find(seen.begin(), seen.end(), pt[e]) != seen.end()) continue;
        seen.push_back(pt[e]);
        dp.bytes.push_back(base::edge_bytes(g, pt[e]));
        dp.control_only = false;
      }
    }
    unit.assign(static_cast<std::size_t>(n), -1);
    std::unordered_map<std::int32_t, std::int32_t> group;
    for (OpId v : g.topo_order()) {
      const std::int32_t cg = g.op(v).colocation;
      std::int32_t u = -1;
      if (cg >= 0) {
        auto [it, fresh] = group.emplace(cg, num_units);
        u = it->second;
        if (fresh) ++num_units;
      } else {
        u = num_units++;
      }
      if (static_cast<std::size_t>(u) == unit_order.size()) unit_order.push_back(u);
      unit[static_cast<std::size_t>(v)] = u;
    }
    const std::size_t words = (static_cast<std::size_t>(n) + 63) / 64;
    reach.assign(static_cast<std::size_t>(n), std::vector<std::uint64_t>(words, 0));
    const auto topo = g.topo_order();
    for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
      auto& r = reach[static_cast<std::size_t>(*it)];
      for (OpId w : g.succ(*it)) {
        r[static_cast<std::size_t>(w) / 64] |= std::uint64_t{1} << (static_cast<std::size_t>(w) % 64);
        const auto& rw = reach[static_cast<std::size_t>(w)];
        for (std::size_t i = 0; i < words; ++i) r[i] |= rw[i];
      }
    }
  }

  bool reaches(OpId a, OpId b) const {
    return (reach[static_cast<std::size_t>(a)][static_cast<std::size_t>(b) / 64] >> (static_cast<std::size_t>(b) % 64)) & 1;
  }
  double p(OpId v, std::int32_t d) const { return cost[static_cast<std::size_t>(v)][static_cast<std::size_t>(d)]; }
  double pmin(OpId v) const { return *std::min_element(cost[static_cast<std::size_t>(v)].begin(), cost[static_cast<std::size_t>(v)].end()); }
  bool zero_time(OpId v) const {
    return *std::max_element(cost[static_cast<std::size_t>(v)].begin(), cost[static_cast<std::size_t>(v)].end()) <= 0;
  }
  double delay(const Dep& e, std::int32_t d1, std::int32_t d2) const {
    if (d1 == d2) return 0.0;
    if (e.control_only) return c.link_latency(d1, d2);
    double t = 0;
    for (double b : e.bytes) t += c.transfer_time(d1, d2, b);
    return t;
  }
  // Identical devices: same costs, memory and links everywhere, so any relabelling is a solution.
  bool symmetric() const {
    for (std::int32_t d = 1; d < k; ++d) {
      if (c.spec(d).memory_bytes != c.spec(0).memory_bytes) return false;
      for (OpId v = 0; v < n; ++v)
        if (p(v, d) != p(v, 0)) return false;
    }
    for (std::int32_t a = 0; a < k; ++a)
      for (std::int32_t b = 0; b < k; ++b)
        if (a != b && (c.link_latency(a, b) != c.link_latency(0, 1) || c.link_bandwidth(a, b) != c.link_bandwidth(0, 1))) return false;
    return true;
  }
  // Static bytes per device of a placement (ops' footprints + received tensors).
  std::vector<double> memory(const std::vector<std::int32_t>& dev) const {
    std::vector<double> m(static_cast<std::size_t>(k), 0.0);
    for (OpId v = 0; v < n; ++v) m[static_cast<std::size_t>(dev[static_cast<std::size_t>(v)])] += static_cast<double>(base::op_footprint(g.op(v)));
    for (TensorId t = 0; t < g.num_tensors(); ++t) {
      const OpId u = g.tensor(t).producer;
      std::vector<char> got(static_cast<std::size_t>(k), 0);
      const auto succ = g.succ(u);
      const auto st = g.succ_tensors(u);
      for (std::size_t e = 0; e < succ.size(); ++e) {
        const std::int32_t d = dev[static_cast<std::size_t>(succ[e])];
        if (st[e] == t && d != dev[static_cast<std::size_t>(u)] && !got[static_cast<std::size_t>(d)]) {
          got[static_cast<std::size_t>(d)] = 1;
          m[static_cast<std::size_t>(d)] += static_cast<double>(g.tensor(t).bytes);
        }
      }
    }
    return m;
  }
  bool fits(const std::vector<std::int32_t>& dev) const {
    const auto m = memory(dev);
    for (std::int32_t d = 0; d < k; ++d)
      if (m[static_cast<std::size_t>(d)] > static_cast<double>(c.spec(d).memory_bytes)) return false;
    return true;
  }
  // max(critical path, total work / devices), each op at its cheapest device time, no transfers.
  double lower_bound() const {
    std::vector<double> f(static_cast<std::size_t>(n), 0.0);
    double cp = 0, work = 0;
    for (OpId v : g.topo_order()) {
      double s = 0;
      for (OpId u : g.pred(v)) s = std::max(s, f[static_cast<std::size_t>(u)]);
      f[static_cast<std::size_t>(v)] = s + pmin(v);
      cp = std::max(cp, f[static_cast<std::size_t>(v)]);
      work += pmin(v);
    }
    return std::max(cp, work / k);
  }
};

// A plan scheduled under the model: ops in priority order (highest first among the ready ones,
// ties by topological position), each at the earliest time its inputs have arrived and its device
// is free. Feasible for the MILP (each device's ops follow each other).
struct Schedule {
  std::vector<std::int32_t> dev;
  std::vector<double> start;
  std::vector<std::int32_t> seq;  // position of the op on its device
  double makespan = 0;
};

inline Schedule model_schedule(const Problem& pb, const Plan& plan) {
  const auto n = static_cast<std::size_t>(pb.n);
  Schedule s;
  s.dev.resize(n);
  for (std::size_t v = 0; v < n; ++v) s.dev[v] = plan.device_of(static_cast<OpId>(v));
  s.start.assign(n, 0.0);
  s.seq.assign(n, 0);
  std::vector<double> finish(n, 0.0), avail(static_cast<std::size_t>(pb.k), 0.0);
  std::vector<std::int32_t> count(static_cast<std::size_t>(pb.k), 0), missing(n);
  std::vector<std::vector<std::size_t>> in(n), out(n);  // deps entering / leaving each op
  for (std::size_t i = 0; i < pb.deps.size(); ++i) {
    in[static_cast<std::size_t>(pb.deps[i].v)].push_back(i);
    out[static_cast<std::size_t>(pb.deps[i].u)].push_back(i);
  }
  using Item = std::pair<float, std::int32_t>;  // (priority, -topological position): largest first
  std::priority_queue<Item> ready;
  auto push = [&](OpId v) {
    ready.emplace(plan.has_priority() ? plan.priority[static_cast<std::size_t>(v)] : 0.0f, -pb.g.topo_position(v));
  };
  for (std::size_t v = 0; v < n; ++v) {
    missing[v] = static_cast<std::int32_t>(in[v].size());
    if (missing[v] == 0) push(static_cast<OpId>(v));
  }
  while (!ready.empty()) {
    const OpId v = pb.g.topo_order()[static_cast<std::size_t>(-ready.top().second)];
    ready.pop();
    const auto vi = static_cast<std::size_t>(v);
    const std::int32_t d = s.dev[vi];
    double t = avail[static_cast<std::size_t>(d)];
    for (std::size_t i : in[vi]) {
      const Dep& e = pb.deps[i];
      t = std::max(t, finish[static_cast<std::size_t>(e.u)] + pb.delay(e, s.dev[static_cast<std::size_t>(e.u)], d));
    }
    s.start[vi] = t;
    finish[vi] = t + pb.p(v, d);
    avail[static_cast<std::size_t>(d)] = finish[vi];
    s.seq[vi] = count[static_cast<std::size_t>(d)]++;
    s.makespan = std::max(s.makespan, finish[vi]);
    for (std::size_t i : out[vi])
      if (--missing[static_cast<std::size_t>(pb.deps[i].v)] == 0) push(pb.deps[i].v);
  }
  return s;
}

inline std::string fmt_ms(double seconds) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6g ms", seconds * 1e3);
  return b;
}

#if defined(GO_WITH_CBC)
// One MILP solve (with or without the memory rows) within `seconds`.
inline ExactSolution solve_model(const Problem& pb, bool with_memory, double seconds, std::chrono::steady_clock::time_point t0) {
  const OpGraph& g = pb.g;
  const Cluster& c = pb.c;
  ExactSolution out;
  const auto n = static_cast<std::size_t>(pb.n);
  const auto K = static_cast<std::size_t>(pb.k);
  const bool sym = pb.k > 1 && pb.symmetric();

  // starts
  std::vector<Plan> starts{default_plan(g), heft_plan(g, c), m_etf_plan(g, c), m_sct_plan(g, c), m_topo_plan(g, c)};
  Schedule best;
  bool have = false;
  for (Plan& p : starts) {
    if (!check_plan(g, p, pb.k, true, false).empty() || (with_memory && !pb.fits([&] {
          std::vector<std::int32_t> d(n);
          for (std::size_t v = 0; v < n; ++v) d[v] = p.device_of(static_cast<OpId>(v));
          return d;
        }())))
      continue;
    if (sym) {  // devices renumbered in the order of their first unit
      std::vector<std::int32_t> map(K, -1);
      std::int32_t next = 0;
      std::vector<OpId> first(static_cast<std::size_t>(pb.num_units), -1);
      for (OpId v : g.topo_order())
        if (first[static_cast<std::size_t>(pb.unit[static_cast<std::size_t>(v)])] < 0) first[static_cast<std::size_t>(pb.unit[static_cast<std::size_t>(v)])] = v;
      for (OpId v : first) {
        auto& m = map[static_cast<std::size_t>(p.device_of(v))];
        if (m < 0) m = next++;
      }
      for (auto& m : map)
        if (m < 0) m = next++;
      p.device.resize(n);
      for (auto& d : p.device) d = map[static_cast<std::size_t>(d)];
    }
    Schedule s = model_schedule(pb, p);
    if (!have || s.makespan < best.makespan) {
      best = std::move(s);
      have = true;
    }
  }
  const double lb = pb.lower_bound();
  auto finish = [&](const std::vector<std::int32_t>& dev, const std::vector<double>& start, double objective, double bound,
                    bool optimal, const std::string& how) {
    out.plan.device = dev;
    std::vector<OpId> order(n);
    std::iota(order.begin(), order.end(), 0);
    // start times rounded to 1e-9 of the makespan, so that solver noise does not reorder equal starts
    const double q = std::max(objective, 1e-12) * 1e-9;
    auto key = [&](OpId v) {
      return std::make_tuple(std::llround(start[static_cast<std::size_t>(v)] / q), pb.p(v, dev[static_cast<std::size_t>(v)]) > 0,
                             g.topo_position(v));
    };
    std::sort(order.begin(), order.end(), [&](OpId a, OpId b) { return key(a) < key(b); });
    out.plan.priority = detail::base::priorities_from_order(pb.n, order);
    out.objective = objective;
    out.bound = optimal ? std::min(objective, bound) : bound;
    out.optimal = optimal;
    out.seconds = detail::base::seconds_since(t0);
    out.note = how + "; MILP makespan " + fmt_ms(objective) + (out.memory_modelled ? " (memory rows included)" : "");
    return out;
  };
  if (have && (pb.k == 1 || best.makespan <= lb * (1 + 1e-9)))
    return finish(best.dev, best.start, best.makespan, lb, true, "optimal (proven: a heuristic start meets the lower bound)");

  // ---- the MILP ----
  // An upper bound on the optimum: the best start, else every op after the other with every
  // transfer at its slowest.
  double H = 0;
  if (have) H = best.makespan;
  else {
    for (OpId v = 0; v < pb.n; ++v) H += *std::max_element(pb.cost[static_cast<std::size_t>(v)].begin(), pb.cost[static_cast<std::size_t>(v)].end());
    for (const Dep& e : pb.deps) {
      double w = 0;
      for (std::int32_t a = 0; a < pb.k; ++a)
        for (std::int32_t b = 0; b < pb.k; ++b) w = std::max(w, pb.delay(e, a, b));
      H += w;
    }
  }
  if (H <= 0) H = 1e-9;
  const double scale = 1000.0 / H;  // model time units per second
  const double M = 1000.0;

  std::vector<double> collb, colub, obj;
  std::vector<char> integer;
  auto col = [&](double lb_, double ub_, bool is_int, double o = 0) {
    collb.push_back(lb_);
    colub.push_back(ub_);
    obj.push_back(o);
    integer.push_back(is_int ? 1 : 0);
    return static_cast<int>(collb.size() - 1);
  };
  struct Row {
    std::vector<int> idx;
    std::vector<double> val;
    double lo, hi;
  };
  std::vector<Row> rows;
  const double inf = std::numeric_limits<double>::infinity();
  auto row = [&](Row r) { rows.push_back(std::move(r)); };

  const int Ccol = col(0, M, false, 1.0);
  std::vector<int> xbase(static_cast<std::size_t>(pb.num_units));
  for (std::int32_t u = 0; u < pb.num_units; ++u) {
    xbase[static_cast<std::size_t>(u)] = static_cast<int>(collb.size());
    Row r{{}, {}, 1, 1};
    for (std::int32_t d = 0; d < pb.k; ++d) {
      r.idx.push_back(col(0, 1, true));
      r.val.push_back(1);
    }
    row(std::move(r));
  }
  auto x = [&](OpId v, std::int32_t d) { return xbase[static_cast<std::size_t>(pb.unit[static_cast<std::size_t>(v)])] + d; };
  std::vector<int> S(n);
  for (std::size_t v = 0; v < n; ++v) S[v] = col(0, M, false);
  // adds p_v (scaled) with sign `sign` to row r; returns the constant part
  auto add_p = [&](Row& r, OpId v, double sign) {
    const auto& cv = pb.cost[static_cast<std::size_t>(v)];
    if (std::all_of(cv.begin(), cv.end(), [&](double t) { return t == cv[0]; })) return sign * cv[0] * scale;
    for (std::int32_t d = 0; d < pb.k; ++d)
      if (cv[static_cast<std::size_t>(d)] != 0) {
        r.idx.push_back(x(v, d));
        r.val.push_back(sign * cv[static_cast<std::size_t>(d)] * scale);
      }
    return 0.0;
  };
  // makespan: sinks and device loads
  for (OpId v = 0; v < pb.n; ++v)
    if (g.out_degree(v) == 0) {
      Row r{{Ccol, S[static_cast<std::size_t>(v)]}, {1, -1}, 0, inf};
      r.lo = -add_p(r, v, -1);
      row(std::move(r));
    }
  if (pb.k > 1)
    for (std::int32_t d = 0; d < pb.k; ++d) {
      Row r{{Ccol}, {1}, 0, inf};
      for (OpId v = 0; v < pb.n; ++v)
        if (pb.p(v, d) > 0) {
          r.idx.push_back(x(v, d));
          r.val.push_back(-pb.p(v, d) * scale);
        }
      row(std::move(r));
    }
  // precedence with transfer delays
  struct DelayVar {
    int col = -1;
    bool uniform = true;
    double T = 0;  // uniform: the delay when split
  };
  std::vector<DelayVar> dvar(pb.deps.size());
  for (std::size_t i = 0; i < pb.deps.size(); ++i) {
    const Dep& e = pb.deps[i];
    Row r{{S[static_cast<std::size_t>(e.v)], S[static_cast<std::size_t>(e.u)]}, {1, -1}, 0, inf};
    r.lo = -add_p(r, e.u, -1);
    const bool same_unit = pb.unit[static_cast<std::size_t>(e.u)] == pb.unit[static_cast<std::size_t>(e.v)];
    if (pb.k > 1 && !same_unit) {
      DelayVar& dv = dvar[i];
      double tmax = 0, tmin = inf;
      for (std::int32_t a = 0; a < pb.k; ++a)
        for (std::int32_t b = 0; b < pb.k; ++b)
          if (a != b) {
            tmax = std::max(tmax, pb.delay(e, a, b));
            tmin = std::min(tmin, pb.delay(e, a, b));
          }
      if (tmax > 0) {
        dv.uniform = tmax - tmin <= 1e-12 * tmax;
        dv.T = tmax;
        if (dv.uniform) {  // delay = T y, y >= x[u][d] - x[v][d]
          dv.col = col(0, 1, false);
          for (std::int32_t d = 0; d < pb.k; ++d) row({{dv.col, x(e.u, d), x(e.v, d)}, {1, -1, 1}, 0, inf});
          r.idx.push_back(dv.col);
          r.val.push_back(-tmax * scale);
        } else {  // delay >= T(a, b) (x[u][a] + x[v][b] - 1)
          dv.col = col(0, M, false);
          for (std::int32_t a = 0; a < pb.k; ++a)
            for (std::int32_t b = 0; b < pb.k; ++b) {
              const double t = pb.delay(e, a, b) * scale;
              if (a != b && t > 0) row({{dv.col, x(e.u, a), x(e.v, b)}, {1, -t, -t}, -t, inf});
            }
          r.idx.push_back(dv.col);
          r.val.push_back(-1);
        }
      }
    }
    row(std::move(r));
  }
  // no overlap of unordered ops on one device
  struct Pair {
    OpId u, v;
    int o, s;  // ordering binary; same-device variable (-1: same unit, always together)
  };
  std::vector<Pair> pairs;
  for (OpId u = 0; u < pb.n; ++u)
    for (OpId v = u + 1; v < pb.n; ++v) {
      if (pb.reaches(u, v) || pb.reaches(v, u) || (pb.zero_time(u) && pb.zero_time(v))) continue;
      Pair pr{u, v, col(0, 1, true), -1};
      if (pb.unit[static_cast<std::size_t>(u)] != pb.unit[static_cast<std::size_t>(v)]) {
        if (pb.k == 1) pr.s = -1;
        else {
          pr.s = col(0, 1, false);
          for (std::int32_t d = 0; d < pb.k; ++d) row({{pr.s, x(u, d), x(v, d)}, {1, -1, -1}, -1, inf});
        }
      }
      // S_u + p_u - S_v + M o + M s <= 2M ; S_v + p_v - S_u - M o + M s <= M  (s == 1 when fixed)
      Row a{{S[static_cast<std::size_t>(u)], S[static_cast<std::size_t>(v)], pr.o}, {1, -1, M}, -inf, 2 * M};
      Row b{{S[static_cast<std::size_t>(v)], S[static_cast<std::size_t>(u)], pr.o}, {1, -1, -M}, -inf, M};
      if (pr.s >= 0) {
        a.idx.push_back(pr.s);
        a.val.push_back(M);
        b.idx.push_back(pr.s);
        b.val.push_back(M);
      } else {
        a.hi -= M;
        b.hi -= M;
      }
      a.hi -= add_p(a, u, 1);
      b.hi -= add_p(b, v, 1);
      row(std::move(a));
      row(std::move(b));
      pairs.push_back(pr);
    }
  // memory
  {
    double total = 0, tensors = 0, smallest = inf;
    for (const Op& o : g.ops()) total += static_cast<double>(detail::base::op_footprint(o));
    for (const TensorInfo& t : g.tensors()) tensors += static_cast<double>(t.bytes);
    for (std::int32_t d = 0; d < pb.k; ++d) smallest = std::min(smallest, static_cast<double>(c.spec(d).memory_bytes));
    out.memory_modelled = with_memory && total + (pb.k - 1) * tensors > smallest;
    if (out.memory_modelled) {
      std::vector<Row> mem(K);
      for (std::int32_t d = 0; d < pb.k; ++d) {
        const double cap = static_cast<double>(c.spec(d).memory_bytes);
        Row& r = mem[static_cast<std::size_t>(d)];
        r.lo = -inf;
        r.hi = 1;
        for (OpId v = 0; v < pb.n; ++v)
          if (detail::base::op_footprint(g.op(v)) > 0) {
            r.idx.push_back(x(v, d));
            r.val.push_back(static_cast<double>(detail::base::op_footprint(g.op(v))) / cap);
          }
      }
      for (TensorId t = 0; t < g.num_tensors(); ++t) {
        const TensorInfo& ti = g.tensor(t);
        if (ti.bytes <= 0) continue;
        std::vector<OpId> cons;
        const auto succ = g.succ(ti.producer);
        const auto st = g.succ_tensors(ti.producer);
        for (std::size_t e = 0; e < succ.size(); ++e)
          if (st[e] == t && pb.unit[static_cast<std::size_t>(succ[e])] != pb.unit[static_cast<std::size_t>(ti.producer)] &&
              std::find(cons.begin(), cons.end(), succ[e]) == cons.end())
            cons.push_back(succ[e]);
        if (cons.empty()) continue;
        for (std::int32_t d = 0; d < pb.k; ++d) {
          const int r = col(0, 1, false);
          for (OpId w : cons) row({{r, x(w, d), x(ti.producer, d)}, {1, -1, 1}, 0, inf});
          mem[static_cast<std::size_t>(d)].idx.push_back(r);
          mem[static_cast<std::size_t>(d)].val.push_back(static_cast<double>(ti.bytes) / static_cast<double>(c.spec(d).memory_bytes));
        }
      }
      for (Row& r : mem) row(std::move(r));
    }
  }
  // symmetry: unit j (in topological order of first ops) on device d >= 1 only if an earlier unit is on d - 1
  if (sym)
    for (std::size_t j = 0; j < pb.unit_order.size(); ++j)
      for (std::int32_t d = 1; d < pb.k; ++d) {
        Row r{{xbase[static_cast<std::size_t>(pb.unit_order[j])] + d}, {1}, -inf, 0};
        for (std::size_t i = 0; i < j; ++i) {
          r.idx.push_back(xbase[static_cast<std::size_t>(pb.unit_order[i])] + d - 1);
          r.val.push_back(-1);
        }
        row(std::move(r));
      }

  // CSC
  const int ncols = static_cast<int>(collb.size()), nrows = static_cast<int>(rows.size());
  std::vector<CoinBigIndex> start(static_cast<std::size_t>(ncols) + 1, 0);
  for (const Row& r : rows)
    for (int j : r.idx) ++start[static_cast<std::size_t>(j) + 1];
  for (int j = 0; j < ncols; ++j) start[static_cast<std::size_t>(j) + 1] += start[static_cast<std::size_t>(j)];
  std::vector<int> index(static_cast<std::size_t>(start.back()));
  std::vector<double> value(index.size());
  std::vector<CoinBigIndex> fill(start.begin(), start.end() - 1);
  std::vector<double> rowlb(static_cast<std::size_t>(nrows)), rowub(static_cast<std::size_t>(nrows));
  for (int i = 0; i < nrows; ++i) {
    const Row& r = rows[static_cast<std::size_t>(i)];
    rowlb[static_cast<std::size_t>(i)] = r.lo == -inf ? -std::numeric_limits<double>::max() : r.lo;
    rowub[static_cast<std::size_t>(i)] = r.hi == inf ? std::numeric_limits<double>::max() : r.hi;
    for (std::size_t e = 0; e < r.idx.size(); ++e) {
      const auto at = static_cast<std::size_t>(fill[static_cast<std::size_t>(r.idx[e])]++);
      index[at] = i;
      value[at] = r.val[e];
    }
  }
  using CbcPtr = std::unique_ptr<Cbc_Model, void (*)(Cbc_Model*)>;
  auto load = [&](const std::vector<double>& objective, const std::vector<double>& upper, double secs) {
    CbcPtr p(Cbc_newModel(), Cbc_deleteModel);
    Cbc_loadProblem(p.get(), ncols, nrows, start.data(), index.data(), value.data(), collb.data(), upper.data(),
                    objective.data(), rowlb.data(), rowub.data());
    for (int j = 0; j < ncols; ++j)
      if (integer[static_cast<std::size_t>(j)]) Cbc_setInteger(p.get(), j);
    Cbc_setObjSense(p.get(), 1);
    const std::string sec = std::to_string(std::max(1.0, secs));
    Cbc_setParameter(p.get(), "log", "0");
    Cbc_setParameter(p.get(), "timeMode", "elapsed");
    Cbc_setParameter(p.get(), "sec", sec.c_str());
    Cbc_setParameter(p.get(), "threads", "0");
    return p;
  };
  // phase 1 (the makespan) gets 80% of the time, phase 2 (fewest transfers at that makespan) at most 20%
  const auto t_solve = std::chrono::steady_clock::now();
  CbcPtr model = load(obj, colub, 0.8 * seconds);
  Cbc_Model* m = model.get();
  if (have) {
    std::vector<int> idx;
    std::vector<double> val;
    for (std::int32_t u = 0; u < pb.num_units; ++u)
      for (std::int32_t d = 0; d < pb.k; ++d) idx.push_back(xbase[static_cast<std::size_t>(u)] + d), val.push_back(0);
    for (std::size_t v = 0; v < n; ++v) val[static_cast<std::size_t>(x(static_cast<OpId>(v), best.dev[v]) - xbase[0])] = 1;
    for (const Pair& pr : pairs) {
      idx.push_back(pr.o);
      const bool together = best.dev[static_cast<std::size_t>(pr.u)] == best.dev[static_cast<std::size_t>(pr.v)];
      val.push_back(together && best.seq[static_cast<std::size_t>(pr.u)] < best.seq[static_cast<std::size_t>(pr.v)] ? 1 : 0);
    }
    Cbc_setMIPStartI(m, static_cast<int>(idx.size()), idx.data(), val.data());
  }
  Cbc_solve(m);
  out.used_cbc = true;
  const double* sol = Cbc_bestSolution(m);
  if (Cbc_isProvenInfeasible(m) && !sol)
    GO_FAIL("exact: no placement fits the devices' memory (static estimate: parameters + outputs + scratch + received tensors per device)");
  const double bound = std::max(lb, Cbc_getBestPossibleObjValue(m) / scale);
  const double secs = detail::base::seconds_since(t0);
  char gap[96];
  if (!sol) {
    GO_CHECK(have, "exact: CBC found no placement that fits the devices' memory within ", seconds, " s");
    std::snprintf(gap, sizeof gap, "gap %.1f%% to bound %s after %.0f s (CBC found nothing better than the best heuristic start)",
                  100 * (best.makespan - bound) / best.makespan, fmt_ms(bound).c_str(), secs);
    return finish(best.dev, best.start, best.makespan, bound, false, gap);
  }
  std::vector<double> best_sol(sol, sol + ncols);
  const double first = best_sol[static_cast<std::size_t>(Ccol)] / scale;
  const bool optimal = Cbc_isProvenOptimal(m) || first <= bound * (1 + 1e-9);
  // Phase 2: among plans no longer than this one, the fewest transfers (sum of their model times):
  // the makespan objective is indifferent to transfers off the critical path, and the simulator
  // queues them on the links.
  std::vector<double> tobj(static_cast<std::size_t>(ncols), 0.0);
  double moved = 0;
  for (const DelayVar& dv : dvar)
    if (dv.col >= 0) {
      tobj[static_cast<std::size_t>(dv.col)] = dv.uniform ? dv.T * scale : 1.0;
      moved += best_sol[static_cast<std::size_t>(dv.col)] * tobj[static_cast<std::size_t>(dv.col)];
    }
  if (moved > 1e-9) {
    tobj[static_cast<std::size_t>(Ccol)] = 1e-3;
    std::vector<double> upper = colub;
    upper[static_cast<std::size_t>(Ccol)] = best_sol[static_cast<std::size_t>(Ccol)] + 1e-6;
    CbcPtr second = load(tobj, upper, std::min(0.2 * seconds, seconds - detail::base::seconds_since(t_solve)));
    std::vector<int> idx;
    std::vector<double> val;
    for (int j = 0; j < ncols; ++j)
      if (integer[static_cast<std::size_t>(j)]) {
        idx.push_back(j);
        val.push_back(std::round(best_sol[static_cast<std::size_t>(j)]));
      }
    Cbc_setMIPStartI(second.get(), static_cast<int>(idx.size()), idx.data(), val.data());
    Cbc_solve(second.get());
    if (const double* s2 = Cbc_bestSolution(second.get()); s2 && s2[Ccol] <= best_sol[static_cast<std::size_t>(Ccol)] + 1e-6)
      best_sol.assign(s2, s2 + ncols);
  }
  std::vector<std::int32_t> dev(n);
  std::vector<double> st(n);
  for (std::size_t v = 0; v < n; ++v) {
    std::int32_t bd = 0;
    for (std::int32_t d = 1; d < pb.k; ++d)
      if (best_sol[static_cast<std::size_t>(x(static_cast<OpId>(v), d))] > best_sol[static_cast<std::size_t>(x(static_cast<OpId>(v), bd))]) bd = d;
    dev[v] = bd;
    st[v] = best_sol[static_cast<std::size_t>(S[v])] / scale;
  }
  const double objective = best_sol[static_cast<std::size_t>(Ccol)] / scale;
  if (optimal) return finish(dev, st, objective, first, true, "optimal (proven)");
  std::snprintf(gap, sizeof gap, "gap %.1f%% to bound %s after %.0f s", 100 * (objective - bound) / objective, fmt_ms(bound).c_str(),
                detail::base::seconds_since(t0));
  return finish(dev, st, objective, bound, false, gap);
}
#endif

}  // namespace detail::exact

// Solves the placement + schedule MILP of the header comment: first without the memory rows (its
// optimum is then a lower bound on every unfused plan), and when that plan runs out of memory in the
// simulator, again with them, for the time left or half the limit, whichever is longer. Throws
// go::Error when CBC is not compiled in, the graph has more than kExactMaxOps ops, or no placement
// fits the devices' memory under the static estimate.
inline ExactSolution exact_solve(const OpGraph& g, const Cluster& c, const ExactOptions& opts = {}) {
  using namespace detail::exact;
  const auto t0 = std::chrono::steady_clock::now();
#if !defined(GO_WITH_CBC)
  (void)g;
  (void)c;
  (void)opts;
  (void)t0;
  GO_FAIL("exact: CBC was not found when go was built; install it (apt-get install coinor-libcbc-dev) and rebuild");
#else
  GO_CHECK(g.num_ops() <= kExactMaxOps, "exact: ", g.num_ops(), " ops; the MILP handles small graphs (<= ", kExactMaxOps,
           " ops); coarsen the graph first");
  c.validate();
  const double limit = opts.time_limit > 0 ? opts.time_limit : 60.0;
  if (g.num_ops() == 0) {
    ExactSolution out;
    out.optimal = true;
    out.note = "optimal (proven): empty graph; lower bound 0 ms";
    return out;
  }
  const Problem pb(g, c, opts.sim);
  ExactSolution s = solve_model(pb, false, limit, t0);
  const double lower = s.bound;
  const Simulator sim(g, c, opts.sim);
  if (sim.simulate(s.plan).status == SimStatus::out_of_memory) {
    s = solve_model(pb, true, std::max(limit - detail::base::seconds_since(t0), limit / 2), t0);
    s.note = "the optimum without memory limits runs out of memory; under the static memory estimate: " + s.note;
  }
  s.lower_bound = lower;
  s.note += "; lower bound " + fmt_ms(lower);
  s.seconds = detail::base::seconds_since(t0);
  return s;
#endif
}

// The `exact` place() method: exact_solve with PlaceOptions::time_limit (0: 60 s); the note gives
// the proof or the gap, the MILP objective and the simulated step time of the plan.
inline Plan exact_plan(const OpGraph& g, const Cluster& c, const PlaceOptions& o, std::string* note = nullptr) {
  ExactOptions eo;
  eo.time_limit = o.time_limit;
  eo.sim = o.sim;
  ExactSolution s = exact_solve(g, c, eo);
  if (note) {
    PlaceResult r;
    evaluate_plan(g, c, s.plan, r, o.sim);
    *note = s.note + "; simulated " + (r.valid ? detail::exact::fmt_ms(r.step_time) : std::string("out of memory"));
  }
  return std::move(s.plan);
}

}  // namespace go
