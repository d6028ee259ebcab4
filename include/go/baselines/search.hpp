#pragma once
// Black-box search over placement and priority with the Simulator as the cost function: `random`
// (random search) and `anneal` (simulated annealing). Both reuse one Simulator and one workspace;
// the budget is the number of simulate() calls (GO gets the same budget).
//
// Both start from given plans (place() passes the default plan and the human plan; without any, the
// default plan), each simulated once within the budget, so they never return something worse than
// their starting points, and a plan that fits always beats one that does not.
// Cost of a plan: its step time when valid; out of memory: step time x 2 x (needed / capacity) on
// the first device that overflowed (so plans closer to fitting rank better); any other invalid
// plan (bad device, colocation split): +inf; invalid fusion: an error (below). Comparisons put every plan that fits before every plan that does not, then by cost.
//
// Both work on the depth-first topological order (detail::base::depth_first_topo_order), whose
// contiguous runs keep chains and branches together.
// random: after the starting plans, every sample cuts the topological order into m contiguous
//   blocks (m uniform in [1, k], cut points uniform), gives the blocks distinct random devices, and
//   with probability 1/2 adds random priorities (uniform in [0, 1) per op). Colocation groups are
//   then enforced. The best sample wins.
// anneal: starts from the best starting plan. A move either (p = 0.8) sends a contiguous run of
//   the topological order (start uniform, length log-uniform in [1, n / k]) to a random device
//   (with fusion groups: every op of a group or a colocation group that the run touches, closed
//   under both, so each group stays on one device), or
//   (p = 0.2) perturbs the priorities of such a run by N(0, n/10) (priorities start as
//   n - topological position, which reproduces first-ready order on chains). Metropolis acceptance
//   with a temperature decaying geometrically from 5% to 0.005% of the starting cost over the
//   budget (or over the simulations that fit in a time limit); while the current plan fits, a move
//   to a plan that does not is always rejected.
// Neither changes fusion: random search proposes unfused plans; anneal keeps its starting plan's
//   fusion groups, and when there are any, a device move takes whole groups (above), so no
//   proposal splits a group over devices or breaks the fusion rules (go/graph/fusion_rules.hpp). A
//   starting plan whose fusion is invalid (rules, devices, cycles) is an error.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "go/baselines/common.hpp"
#include "go/core/error.hpp"
#include "go/core/rng.hpp"
#include "go/graph/graph.hpp"
#include "go/sim/cluster.hpp"
#include "go/sim/plan.hpp"
#include "go/sim/simulator.hpp"

namespace go {

namespace detail::base {

struct SearchEval {
  const OpGraph& g;
  const Cluster& c;
  Simulator sim;
  SimWorkspace ws;
  std::int64_t calls = 0;

  SearchEval(const OpGraph& graph, const Cluster& cluster, const SimOptions& so)
      : g(graph), c(cluster), sim(graph, cluster, so), ws(sim.make_workspace()) {}

  struct Score {
    bool valid = false;
    double cost = std::numeric_limits<double>::infinity();
    bool operator<(const Score& o) const { return valid != o.valid ? valid : cost < o.cost; }
  };

  // start: the index of a starting plan, or -1 for a proposal of the search itself (whose fusion
  // is valid by construction: a failure there is a bug).
  Score score(const Plan& p, std::int64_t start = -1) {
    ++calls;
    const SimResult& r = sim.simulate(p, ws);
    if (r.valid) return {true, r.step_time};
    const bool fusion_bad = r.status == SimStatus::bad_fusion_id || r.status == SimStatus::fusion_spans_devices ||
                            r.status == SimStatus::fusion_not_convex || r.status == SimStatus::fusion_cycle ||
                            r.status == SimStatus::fusion_illegal;
    GO_CHECK(!fusion_bad, g.where(), "search: ", start >= 0 ? "starting plan " + std::to_string(start) : "a move",
             " has invalid fusion: ", sim_reason(r, g, c));
    if (r.status == SimStatus::out_of_memory && std::isfinite(r.step_time)) {
      const double cap = static_cast<double>(c.spec(r.problem_device).memory_bytes);
      return {false, r.step_time * 2.0 * std::max(1.0, static_cast<double>(r.problem_bytes) / cap)};
    }
    return {};
  }

  // Simulates the starting plans (at most `budget`; none given: the default plan) and returns the
  // best, with its score in `best`.
  Plan best_start(const std::vector<Plan>& starts, std::int64_t budget, Score& best) {
    Plan out = Plan::single_device(g.num_ops(), 0);
    if (starts.empty()) {
      best = score(out);
      return out;
    }
    for (std::size_t i = 0; i < starts.size() && calls < budget; ++i) {
      const Score s = score(starts[i], static_cast<std::int64_t>(i));
      if (i == 0 || s < best) {
        best = s;
        out = starts[i];
      }
    }
    return out;
  }
};

// Placement units of a fused plan: union of its fusion groups and colocation groups, closed under
// both (unit[v] = a representative op; empty when the plan has no fusion). Moving whole units keeps
// every fusion group on one device.
inline std::vector<OpId> fused_placement_units(const OpGraph& g, const Plan& p) {
  if (p.fusion.empty()) return {};
  const auto n = static_cast<std::size_t>(g.num_ops());
  std::vector<OpId> parent(n);
  for (std::size_t i = 0; i < n; ++i) parent[i] = static_cast<OpId>(i);
  auto find = [&](OpId x) {
    while (parent[static_cast<std::size_t>(x)] != x)
      x = parent[static_cast<std::size_t>(x)] = parent[static_cast<std::size_t>(parent[static_cast<std::size_t>(x)])];
    return x;
  };
  std::unordered_map<std::int64_t, OpId> first;  // fusion id f -> its first op; colocation c -> (-1 - c)
  for (OpId v = 0; v < g.num_ops(); ++v) {
    const std::int32_t f = p.fusion[static_cast<std::size_t>(v)], c = g.op(v).colocation;
    for (std::int64_t key : {f >= 0 ? std::int64_t{f} : std::int64_t{-1}, c >= 0 ? -2 - std::int64_t{c} : std::int64_t{-1}}) {
      if (key == -1) continue;
      auto [it, fresh] = first.emplace(key, v);
      if (!fresh) parent[static_cast<std::size_t>(find(v))] = find(it->second);
    }
  }
  std::vector<OpId> unit(n);
  for (std::size_t i = 0; i < n; ++i) unit[i] = find(static_cast<OpId>(i));
  return unit;
}

}  // namespace detail::base

inline Plan random_search_plan(const OpGraph& g, const Cluster& c, std::int64_t budget, std::uint64_t seed,
                               const SimOptions& so = {}, std::int64_t* calls = nullptr,
                               const std::vector<Plan>& starts = {}) {
  GO_CHECK(budget >= 1, "random: the budget must be at least 1 simulation, got ", budget);
  detail::base::SearchEval ev(g, c, so);
  Rng rng(seed);
  const std::int32_t k = c.num_devices();
  const auto n = static_cast<std::size_t>(g.num_ops());
  const std::vector<OpId> topo = detail::base::depth_first_topo_order(g);
  detail::base::SearchEval::Score best_score;
  Plan best = ev.best_start(starts, budget, best_score);
  Plan cand;
  std::vector<std::size_t> cuts;
  std::vector<std::int32_t> perm(static_cast<std::size_t>(k));
  while (ev.calls < budget) {
    const auto m = static_cast<std::int32_t>(1 + rng.uniform_int(static_cast<std::uint64_t>(k)));
    cuts.clear();
    for (std::int32_t j = 0; j + 1 < m; ++j) cuts.push_back(static_cast<std::size_t>(rng.uniform_int(n + 1)));
    std::sort(cuts.begin(), cuts.end());
    cuts.push_back(n);
    for (std::int32_t d = 0; d < k; ++d) perm[static_cast<std::size_t>(d)] = d;
    for (std::int32_t d = k - 1; d > 0; --d)
      std::swap(perm[static_cast<std::size_t>(d)], perm[static_cast<std::size_t>(rng.uniform_int(static_cast<std::uint64_t>(d) + 1))]);
    cand.device.assign(n, 0);
    std::size_t b = 0;
    for (std::size_t pos = 0; pos < n; ++pos) {
      while (pos >= cuts[b]) ++b;
      cand.device[static_cast<std::size_t>(topo[pos])] = perm[b];
    }
    cand.priority.clear();
    if (rng.uniform() < 0.5f) {
      cand.priority.resize(n);
      for (auto& x : cand.priority) x = rng.uniform();
    }
    colocate(g, cand);
    const auto sc = ev.score(cand);
    if (sc < best_score) {
      best_score = sc;
      best = cand;
    }
  }
  if (calls) *calls = ev.calls;
  return best;
}

// time_limit > 0: also stop once that many seconds have passed; the cooling schedule then spans the
// simulations that fit in it at the starting plans' speed (the result depends on the machine).
inline Plan anneal_plan(const OpGraph& g, const Cluster& c, std::int64_t budget, std::uint64_t seed,
                        const SimOptions& so = {}, std::int64_t* calls = nullptr, const std::vector<Plan>& starts = {},
                        double time_limit = 0) {
  GO_CHECK(budget >= 1, "anneal: the budget must be at least 1 simulation, got ", budget);
  GO_CHECK(time_limit >= 0, "anneal: the time limit must be >= 0 seconds, got ", time_limit);
  const auto clock0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - clock0).count(); };
  detail::base::SearchEval ev(g, c, so);
  Rng rng(seed);
  const std::int32_t k = c.num_devices();
  const auto n = static_cast<std::size_t>(g.num_ops());
  const std::vector<OpId> topo = detail::base::depth_first_topo_order(g);
  detail::base::SearchEval::Score cur_score;
  Plan cur = ev.best_start(starts, budget, cur_score);
  const double cur_cost0 = cur_score.cost;
  Plan best = cur;
  auto best_score = cur_score;
  if (n == 0 || ev.calls >= budget) {
    if (calls) *calls = ev.calls;
    return best;
  }
  const double t0 = std::isfinite(cur_cost0) && cur_cost0 > 0 ? 0.05 * cur_cost0 : 1e-3;
  const double t_end = t0 * 1e-3;
  std::int64_t moves = std::max<std::int64_t>(1, budget - ev.calls);
  if (time_limit > 0) {
    const double per_call = elapsed() / static_cast<double>(std::max<std::int64_t>(1, ev.calls));
    if (per_call > 0) moves = std::min(moves, std::max<std::int64_t>(1, static_cast<std::int64_t>((time_limit - elapsed()) / per_call)));
  }
  const double decay = std::pow(t_end / t0, 1.0 / static_cast<double>(moves));
  double temp = t0;
  const double log_max_len = std::log(static_cast<double>(std::max<std::size_t>(1, n / static_cast<std::size_t>(k))) + 1.0);
  // fused: every op of the units a run touches moves with it
  const std::vector<OpId> unit = detail::base::fused_placement_units(g, cur);
  std::vector<std::vector<OpId>> unit_ops(unit.empty() ? 0 : n);
  for (std::size_t i = 0; i < unit.size(); ++i) unit_ops[static_cast<std::size_t>(unit[i])].push_back(static_cast<OpId>(i));
  std::vector<std::int64_t> moved(unit.size(), -1);  // per unit: the last move that sent it
  std::int64_t move = 0;
  Plan cand;
  while (ev.calls < budget && (time_limit <= 0 || elapsed() < time_limit)) {
    cand = cur;
    const std::size_t start = static_cast<std::size_t>(rng.uniform_int(n));
    const auto draw = static_cast<std::size_t>(std::exp(rng.uniform_double() * log_max_len));
    const std::size_t len = std::min(n - start, std::max<std::size_t>(1, draw));
    if (k > 1 && rng.uniform() < 0.8f) {
      const auto d = static_cast<std::int32_t>(rng.uniform_int(static_cast<std::uint64_t>(k)));
      if (unit.empty()) {
        for (std::size_t p = start; p < start + len; ++p) cand.device[static_cast<std::size_t>(topo[p])] = d;
        colocate(g, cand);
      } else {
        ++move;
        for (std::size_t p = start; p < start + len; ++p) {
          const auto u = static_cast<std::size_t>(unit[static_cast<std::size_t>(topo[p])]);
          if (moved[u] == move) continue;
          moved[u] = move;
          for (OpId v : unit_ops[u]) cand.device[static_cast<std::size_t>(v)] = d;
        }
      }
    } else {
      if (cand.priority.empty()) {
        cand.priority.resize(n);
        for (std::size_t p = 0; p < n; ++p) cand.priority[static_cast<std::size_t>(topo[p])] = static_cast<float>(n - p);
      }
      const float sd = static_cast<float>(n) / 10.0f;
      for (std::size_t p = start; p < start + len; ++p) cand.priority[static_cast<std::size_t>(topo[p])] += rng.normal(0.0f, sd);
    }
    const auto sc = ev.score(cand);
    const bool accept = !(cur_score < sc) ||
                        (sc.valid == cur_score.valid && std::isfinite(sc.cost) &&
                         rng.uniform_double() < std::exp(-(sc.cost - cur_score.cost) / temp));
    if (accept) {
      std::swap(cur, cand);
      cur_score = sc;
      if (cur_score < best_score) {
        best_score = cur_score;
        best = cur;
      }
    }
    temp *= decay;
  }
  if (calls) *calls = ev.calls;
  return best;
}

}  // namespace go
