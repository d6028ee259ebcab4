#pragma once
// The `exact` method: the optimal placement + schedule of a small graph (<= kExactMaxOps ops) under
// the simulator's op costs and transfer channels, by mixed-integer programming with CBC (COIN-OR
// branch and cut), or the best plan CBC finds within the time limit and its gap to CBC's bound.
//
// Model (exact/milp.hpp). A unit is an op, or a colocation group (one device for all its ops).
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
//             (same device) and an ordering binary o: S_u + p_u <= S_v + M_uv (1 - o) + M_uv (1 - s)
//             and the converse, with C <= H, the step time of the best simulated plan, and every
//             S_v within [head_v, H - tail_v] (the longest paths before and from v, cheapest op
//             times, no transfers), so M_uv = u's latest end - v's earliest start
//   channels  for the transfer jobs (tensor t of producer v, destination device d) of a set grown
//             lazily (below): start R >= S_v + p_v (requested when v completes), active
//             a >= x[w][d] - x[v][d] for each reader w of t, duration D = transfer_time(dev(v), d) a,
//             S_w >= R + D - M (1 - x[w][d]). For a pair of jobs that can hold a common channel
//             (Cluster::channels: duplex, the same sender or the same destination; shared, any common
//             end; sender, the same sender) h >= "both active on a common channel" (from a and x) and
//             an ordering binary o: R_1 + D_1 <= R_2 + M (1 - o) + M (1 - h) and the converse. Pairs
//             come as pairs of tensors, with a job pair for every two destinations. Tensors of two
//             producers share one o for all their job pairs, the channels' request order:
//             S_v1 + p_v1 <= S_v2 + p_v2 + M (1 - o) and the converse (fixed when a path orders the
//             producers). Two tensors of one producer go in tensor order (o fixed), one tensor to
//             two devices in the order of their first readers (op ids), as the simulator sends them.
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
// Times are scaled so that H is 1000 (CBC's tolerances are absolute); M is H.
// Starts: the default plan and the heft, m-etf, m-sct and m-topo plans (that fit the memory rows,
// when they are in), simulated; the best one's simulated run is CBC's MIP start (a feasible point,
// see below) and gives H. When it already meets the lower bound max(critical path, total work /
// devices) of the cheapest device times, it is returned without CBC.
// Plan: each op's device; priorities from the start times (earlier first; at one instant zero-time
// ops first, then topological order); no fusion.
// Solve loop (contention added lazily, as the pairs of all jobs would be too many rows): solve;
// simulate the plan; when it simulates above the objective, every transfer that waited for a channel
// in that run adds its tensor pair with each transfer holding a common channel while it waited, and
// so do the plan's transfers that would overlap on a common channel if each left at its request in
// the MILP's schedule. Whole tensor pairs, as a pair for the two destinations where they met lets
// the next solve move the readers to other (often identical) devices and meet there again, one
// round per relabelling. The MILP is solved again, from the best simulated run so far, in the time left. It stops when the
// plan simulates to the objective ("converged"), when a run adds no pair, or at the time limit.
// The plan returned is the best simulated one of the loop (and the starts).
//
// Where the plan can still simulate above the objective (the note then gives both, "not
// converged"; the objective, proven or not, stays a lower bound, the plan's time an upper bound):
//   - list scheduling: the simulator starts the highest-priority ready op whenever a device is
//     idle; a model schedule that keeps a device idle to wait for a more urgent op is replayed with a
//     lower-priority ready op started in the gap, which can move later ops (no pair to add);
//   - ties: transfers requested at one instant by ops on two devices go in the order of those
//     devices in the simulator, in either order in the model;
//   - the time limit: pairs not yet added;
//   - fusion is not modelled (the plan has none).
// The other way round, the model is a relaxation of the simulator: the simulated start times (and
// transfer times) of any unfused plan that keeps colocation groups together satisfy every
// constraint above but memory, whatever the set of channel pairs (list scheduling only delays ops;
// one producer's tensors to one consumer leave one after the other; each channel serves transfers
// one at a time in request order, a tensor once per device), so the optimum of a solve without
// memory rows, or CBC's bound when it is not proven (the largest over the loop:
// ExactSolution::lower_bound, "lower bound" in the note), is at most the simulated step time of
// every such plan. Fused plans (anneal, go) can go below it: a fused kernel pays one launch and less
// memory traffic than its ops apart.
//
// CBC is compiled in when GO_WITH_CBC is defined (cmake/baselines.cmake finds it); otherwise
// exact_solve throws a go::Error saying so.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "go/baselines/common.hpp"
#include "go/baselines/exact/milp.hpp"
#include "go/baselines/exact/problem.hpp"
#include "go/baselines/human.hpp"
#include "go/baselines/list_scheduling.hpp"
#include "go/core/error.hpp"
#include "go/graph/graph.hpp"
#include "go/sim/cluster.hpp"
#include "go/sim/plan.hpp"
#include "go/sim/simulator.hpp"

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
  SimOptions sim;          // the cost source of the op times (and of the simulations)
};

struct ExactSolution {
  Plan plan;
  double objective = 0;   // MILP makespan (of the last solve), seconds; the model's optimum when proven
  double simulated = 0;   // the plan's simulated step time, seconds (== objective when converged)
  double bound = 0;       // CBC's lower bound on the optimum, seconds (== objective when proven)
  bool optimal = false;   // proven optimal (under the model)
  bool converged = false; // the plan simulates to the objective
  bool used_cbc = false;  // false: a start met the lower bound, or the graph was trivial
  bool memory_modelled = false;  // the memory rows were in the MILP (else they could not bind)
  std::int32_t rounds = 0;       // MILP solves of the loop
  std::int32_t channel_pairs = 0;  // transfer pairs with channel rows at the end
  double lower_bound = 0;  // the memory-free MILP's optimum or bound: at most every unfused plan's simulated step time
  double seconds = 0;     // wall time of the whole method
  std::string note;       // "optimal (proven)" or "gap x% to bound y ms after t s", with the objective
};

namespace detail::exact {

#if defined(GO_WITH_CBC)
// One solve loop (with or without the memory rows) within `seconds`.
inline ExactSolution solve_model(const Problem& pb, bool with_memory, double seconds, std::chrono::steady_clock::time_point t0) {
  const OpGraph& g = pb.g;
  const Cluster& c = pb.c;
  ExactSolution out;
  const auto t_solve = std::chrono::steady_clock::now();
  const auto n = static_cast<std::size_t>(pb.n);
  const auto K = static_cast<std::size_t>(pb.k);
  const bool sym = pb.k > 1 && pb.symmetric();
  const Simulator sim(g, c, pb.so);
  SimWorkspace ws = sim.make_workspace();
  auto devices = [&](const Plan& p) {
    std::vector<std::int32_t> d(n);
    for (std::size_t v = 0; v < n; ++v) d[v] = p.device_of(static_cast<OpId>(v));
    return d;
  };

  // starts
  std::vector<Plan> starts{default_plan(g), heft_plan(g, c), m_etf_plan(g, c), m_sct_plan(g, c), m_topo_plan(g, c)};
  Replay best;
  for (Plan& p : starts) {
    p.fusion.clear();
    if (!check_plan(g, p, pb.k, true, false).empty() || (with_memory && !pb.fits(devices(p)))) continue;
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
    Replay r = replay(pb, sim, ws, std::move(p));
    if (r.ran && r.step < best.step) best = std::move(r);
  }
  const bool have = best.ran;
  const double lb = pb.lower_bound();
  auto plan_of = [&](const std::vector<std::int32_t>& dev, const std::vector<double>& start, double objective) {
    Plan plan;
    plan.device = dev;
    std::vector<OpId> order(n);
    std::iota(order.begin(), order.end(), 0);
    // start times rounded to 1e-9 of the makespan, so that solver noise does not reorder equal starts
    const double q = std::max(objective, 1e-12) * 1e-9;
    auto key = [&](OpId v) {
      return std::make_tuple(std::llround(start[static_cast<std::size_t>(v)] / q), pb.p(v, dev[static_cast<std::size_t>(v)]) > 0,
                             g.topo_position(v));
    };
    std::sort(order.begin(), order.end(), [&](OpId a, OpId b) { return key(a) < key(b); });
    plan.priority = detail::base::priorities_from_order(pb.n, order);
    return plan;
  };
  auto finish = [&](const Replay& r, double objective, double bound, bool optimal, bool converged, const std::string& how) {
    out.plan = r.plan;
    out.simulated = r.step;
    out.objective = objective;
    out.bound = optimal ? std::min(objective, bound) : bound;
    out.optimal = optimal;
    out.converged = converged;
    out.seconds = detail::base::seconds_since(t0);
    out.note = how + "; MILP makespan " + fmt_ms(objective) + (out.memory_modelled ? " (memory rows included)" : "");
    if (out.used_cbc) {
      char b[160];
      if (converged)
        std::snprintf(b, sizeof b, "; the plan simulates to it (converged: %d rounds, %d channel pairs)", out.rounds, out.channel_pairs);
      else
        std::snprintf(b, sizeof b, "; not converged (%d rounds, %d channel pairs): the best plan simulates to %s (+%.1f%%)", out.rounds,
                      out.channel_pairs, fmt_ms(r.step).c_str(), 100 * (r.step / objective - 1));
      out.note += b;
    }
    return out;
  };
  if (have && (pb.k == 1 || best.step <= lb * (1 + 1e-9)))
    return finish(best, best.step, lb, true, true, "optimal (proven: a heuristic start meets the lower bound)");

  // An upper bound on the optimum: the best start, else every op after the other with every
  // transfer at its slowest.
  double H = 0;
  if (have) H = best.step;
  else {
    for (OpId v = 0; v < pb.n; ++v) H += *std::max_element(pb.cost[static_cast<std::size_t>(v)].begin(), pb.cost[static_cast<std::size_t>(v)].end());
    for (const Dep& e : pb.deps) {
      double w = 0;
      for (std::int32_t a = 0; a < pb.k; ++a)
        for (std::int32_t b = 0; b < pb.k; ++b) w = std::max(w, pb.delay(e, a, b));
      H += w;
    }
    for (const Problem::Xfer& x : pb.xfers)
      for (std::int32_t a = 0; a < pb.k; ++a)
        for (std::int32_t b = 0; b < pb.k; ++b)
          if (a != b) H += c.transfer_time(a, b, x.bytes);
  }
  out.used_cbc = true;
  Contention ct;
  double bound = lb, objective = 0;
  bool proven = false, converged = false;
  const double tol = 1e-6;
  for (;;) {
    const double left = seconds - detail::base::seconds_since(t_solve);
    const Milp milp(pb, with_memory, sym, H, ct);
    out.memory_modelled = milp.memory_modelled();
    const auto start = have ? milp.start_from(best) : std::pair<std::vector<int>, std::vector<double>>{};
    const MilpResult r = milp.solve(left, have ? &start : nullptr);
    ++out.rounds;
    out.channel_pairs = static_cast<std::int32_t>(ct.pairs.size());
    if (!r.have) {
      if (r.infeasible)
        GO_FAIL("exact: no placement fits the devices' memory (static estimate: parameters + outputs + scratch + received tensors per device)");
      GO_CHECK(have, "exact: CBC found no placement that fits the devices' memory within ", seconds, " s");
      if (out.rounds == 1) {  // nothing better than the best start
        bound = std::max(bound, r.bound);
        objective = best.step;
      }
      break;
    }
    bound = std::max(bound, r.bound);
    objective = r.objective;
    proven = r.proven;
    const Replay rep = replay(pb, sim, ws, plan_of(r.dev, r.start, r.objective));
    converged = rep.ran && rep.step <= r.objective * (1 + tol);
    if (rep.ran && (converged || rep.step < best.step)) best = rep;
    if (converged || !proven || detail::base::seconds_since(t_solve) >= seconds - 0.5) break;
    // pairs: each transfer that waited for a channel, with those holding a common one meanwhile
    bool added = false;
    const Replay& q = rep;
    for (const Replay::Transfer& w : q.transfers) {
      if (w.start <= w.request + tol * q.step) continue;
      for (const Replay::Transfer& h : q.transfers)
        if (&h != &w && h.start < w.start && h.end > w.request && share_channel(c.channels, w.src, w.dst, h.src, h.dst))
          added |= ct.add_tensors(w.x, h.x, pb.k);
    }
    // and, ahead of the simulator, the MILP plan's transfers that overlap on a common channel when
    // each leaves at its request (fewer rounds)
    struct Active {
      std::int32_t x, src, dst;
      double request, end;
    };
    std::vector<Active> act;
    for (std::size_t xi = 0; xi < pb.xfers.size(); ++xi) {
      const Problem::Xfer& xf = pb.xfers[xi];
      const auto u = static_cast<std::size_t>(xf.u);
      const std::int32_t s = r.dev[u];
      std::vector<char> sent(K, 0);
      for (OpId w : xf.readers) {
        const std::int32_t d = r.dev[static_cast<std::size_t>(w)];
        if (d == s || sent[static_cast<std::size_t>(d)]) continue;
        sent[static_cast<std::size_t>(d)] = 1;
        const double req = r.start[u] + pb.p(xf.u, s);
        act.push_back({static_cast<std::int32_t>(xi), s, d, req, req + c.transfer_time(s, d, xf.bytes)});
      }
    }
    for (std::size_t i = 0; i < act.size(); ++i)
      for (std::size_t j = i + 1; j < act.size(); ++j)
        if (act[i].request < act[j].end - tol * r.objective && act[j].request < act[i].end - tol * r.objective &&
            share_channel(c.channels, act[i].src, act[i].dst, act[j].src, act[j].dst))
          added |= ct.add_tensors(act[i].x, act[j].x, pb.k);
    if (!added) break;
  }
  out.channel_pairs = static_cast<std::int32_t>(ct.pairs.size());
  objective = std::max(objective, bound);
  char how[128];
  if (proven) std::snprintf(how, sizeof how, "optimal (proven)");
  else
    std::snprintf(how, sizeof how, "gap %.1f%% to bound %s after %.0f s", 100 * (objective - bound) / objective, fmt_ms(bound).c_str(),
                  detail::base::seconds_since(t0));
  return finish(best, objective, bound, proven, converged, how);
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
  s.simulated = sim.simulate(s.plan).step_time;
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
