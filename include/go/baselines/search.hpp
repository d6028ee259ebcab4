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
// Both work on the depth-first topological order (depth_first_topo_order), whose
// contiguous runs keep chains and branches together.
// random: after the starting plans, every sample cuts the topological order into m contiguous
//   blocks (m uniform in [1, k], cut points uniform), gives the blocks distinct random devices, and
//   with probability 1/2 adds random priorities (uniform in [0, 1) per op). Colocation groups are
//   then enforced. The best sample wins.
// anneal: starts from the best starting plan and searches placement, priorities and fusion. A move
//   (with k > 1 devices; on one device only the last two) either
//   (p = 0.6) sends a contiguous run of the topological order (start uniform, length log-uniform in
//   [1, n / k]) to a random device, colocation groups following, or
//   (p = 0.2) perturbs the priorities of such a run by N(0, n/10) (priorities start as
//   n - topological position, which reproduces first-ready order on chains), or
//   (p = 0.2) sets or clears, with equal odds, the fusion flags of every data input of such a run
//   (a graph where no edge may fuse gets no fusion moves: p = 0.8 and 0.2 for the first two).
//   Fusion is a flag per data edge (FusionEdges, go/baselines/fusion.hpp; the starting plan's groups
//   give the first flags) and is rebuilt after every device or fusion move: edges whose ends share
//   a device merge where the fusion rules (go/graph/fusion_rules.hpp) allow, so every proposal is a
//   legal plan, and a device move that separates a group's ops splits it. Metropolis acceptance
//   with a temperature decaying geometrically from 5% to 0.005% of the starting cost over the
//   budget (or over the simulations that fit in a time limit); while the current plan fits, a move
//   to a plan that does not is always rejected.
// random proposes unfused plans. A starting plan whose fusion is invalid (rules, devices, cycles)
//   is an error.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "go/baselines/best_trace.hpp"
#include "go/baselines/common.hpp"
#include "go/baselines/fusion.hpp"
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
  BestTrace* trace = nullptr;  // optional: records every simulation

  SearchEval(const OpGraph& graph, const Cluster& cluster, const SimOptions& so, BestTrace* tr = nullptr)
      : g(graph), c(cluster), sim(graph, cluster, so), ws(sim.make_workspace()), trace(tr) {}

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
    if (trace) trace->add(r.valid, r.step_time);
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

}  // namespace detail::base

inline Plan random_search_plan(const OpGraph& g, const Cluster& c, std::int64_t budget, std::uint64_t seed,
                               const SimOptions& so = {}, std::int64_t* calls = nullptr,
                               const std::vector<Plan>& starts = {}) {
  GO_CHECK(budget >= 1, "random: the budget must be at least 1 simulation, got ", budget);
  detail::base::SearchEval ev(g, c, so);
  Rng rng(seed);
  const std::int32_t k = c.num_devices();
  const auto n = static_cast<std::size_t>(g.num_ops());
  const std::vector<OpId> topo = depth_first_topo_order(g);
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
// trace (optional): records every simulation (go/baselines/best_trace.hpp).
inline Plan anneal_plan(const OpGraph& g, const Cluster& c, std::int64_t budget, std::uint64_t seed,
                        const SimOptions& so = {}, std::int64_t* calls = nullptr, const std::vector<Plan>& starts = {},
                        double time_limit = 0, BestTrace* trace = nullptr) {
  GO_CHECK(budget >= 1, "anneal: the budget must be at least 1 simulation, got ", budget);
  GO_CHECK(time_limit >= 0, "anneal: the time limit must be >= 0 seconds, got ", time_limit);
  const auto clock0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - clock0).count(); };
  detail::base::SearchEval ev(g, c, so, trace);
  Rng rng(seed);
  const std::int32_t k = c.num_devices();
  const auto n = static_cast<std::size_t>(g.num_ops());
  const std::vector<OpId> topo = depth_first_topo_order(g);
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
  const FusionEdges edges(g, true);
  std::vector<std::uint8_t> cur_flags = edges.flags_of(g, cur), cand_flags;
  bool fusible = false;  // without an edge that may fuse, fusion moves would only waste simulations
  for (OpId v = 0; v < g.num_ops() && !fusible; ++v)
    for (TensorId t : g.inputs(v)) fusible = fusible || fusion_pair_possible(g, v, g.tensor(t).producer);
  const float p_device = fusible ? 0.6f : 0.8f, p_priority = fusible ? 0.8f : 1.0f;
  // A tenth of the priorities' spread (n for the topological priorities made below): a start plan
  // with priorities on another scale (GO's anchor: levels 0-7 plus a program-order tie) must not
  // have every moved op thrown to the front or the back of its device's queue.
  float priority_sd = static_cast<float>(n) / 10.0f;
  if (!cur.priority.empty()) {
    const auto [lo, hi] = std::minmax_element(cur.priority.begin(), cur.priority.end());
    if (*hi > *lo) priority_sd = (*hi - *lo) / 10.0f;
  }
  Plan cand;
  while (ev.calls < budget && (time_limit <= 0 || elapsed() < time_limit)) {
    cand = cur;
    cand_flags = cur_flags;
    const std::size_t start = static_cast<std::size_t>(rng.uniform_int(n));
    const auto draw = static_cast<std::size_t>(std::exp(rng.uniform_double() * log_max_len));
    const std::size_t len = std::min(n - start, std::max<std::size_t>(1, draw));
    const float kind = k > 1 ? rng.uniform() : fusible ? 0.6f + 0.4f * rng.uniform() : 0.8f;
    if (kind < p_device) {
      const auto d = static_cast<std::int32_t>(rng.uniform_int(static_cast<std::uint64_t>(k)));
      for (std::size_t p = start; p < start + len; ++p) cand.device[static_cast<std::size_t>(topo[p])] = d;
      colocate(g, cand);
      edges.apply(g, cand, &cand_flags);
    } else if (kind < p_priority) {
      if (cand.priority.empty()) {
        cand.priority.resize(n);
        for (std::size_t p = 0; p < n; ++p) cand.priority[static_cast<std::size_t>(topo[p])] = static_cast<float>(n - p);
      }
      for (std::size_t p = start; p < start + len; ++p) cand.priority[static_cast<std::size_t>(topo[p])] += rng.normal(0.0f, priority_sd);
    } else {
      const std::uint8_t on = rng.uniform() < 0.5f ? 1 : 0;
      for (std::size_t p = start; p < start + len; ++p) {
        const auto v = static_cast<std::size_t>(topo[p]);
        std::fill(cand_flags.begin() + edges.base[v], cand_flags.begin() + edges.base[v + 1], on);
      }
      edges.apply(g, cand, &cand_flags);
    }
    const auto sc = ev.score(cand);
    const bool accept = !(cur_score < sc) ||
                        (sc.valid == cur_score.valid && std::isfinite(sc.cost) &&
                         rng.uniform_double() < std::exp(-(sc.cost - cur_score.cost) / temp));
    if (accept) {
      std::swap(cur, cand);
      std::swap(cur_flags, cand_flags);
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
