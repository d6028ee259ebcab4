// exact_solve and exact_plan (go/baselines/exact.hpp), compiled once into libgo.
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
#include "go/baselines/exact.hpp"

namespace go {

namespace detail::exact {

#if defined(GO_WITH_CBC)
// One solve loop (with or without the memory rows) within `seconds`.
ExactSolution solve_model(const Problem& pb, bool with_memory, double seconds, std::chrono::steady_clock::time_point t0) {
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
    if (converged || !proven || detail::base::seconds_since(t_solve) >= seconds - 1.0) break;  // CBC gets >= 1 s
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


ExactSolution exact_solve(const OpGraph& g, const Cluster& c, const ExactOptions& opts) {
  using namespace detail::exact;
  const auto t0 = std::chrono::steady_clock::now();
#if !defined(GO_WITH_CBC)
  (void)g;
  (void)c;
  (void)opts;
  (void)t0;
  GO_FAIL("exact: CBC was not found when go was built; install it (apt-get install coinor-libcbc-dev) and rebuild");
#else
  GO_CHECK(g.num_ops() <= kExactMaxOps, "exact: ", g.num_ops(), " ops; the MILP is solved for graphs of at most ",
           kExactMaxOps, " ops (use best-heuristic, anneal or go for larger ones)");
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

Plan exact_plan(const OpGraph& g, const Cluster& c, const PlaceOptions& o, std::string* note) {
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
