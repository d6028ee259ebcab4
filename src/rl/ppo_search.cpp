// PpoTrainer's search steps without gradients (go/rl/ppo.hpp): the rounds of anchor-search
// (search_round), the gather moves after the first update or round (gather_best) and the
// critical-path climbs that end an update or a round (climb_paths), compiled once into libgo.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "go/baselines/gather.hpp"
#include "go/baselines/memory_fit.hpp"
#include "go/core/error.hpp"
#include "go/core/parallel.hpp"
#include "go/core/rng.hpp"
#include "go/policy/decode.hpp"
#include "go/rl/path_moves.hpp"
#include "go/rl/ppo.hpp"
#include "go/sim/simulator.hpp"

namespace go::rl {

UpdateStats PpoTrainer::search_round() {
  GO_CHECK(cfg_.block_moves == 1.0, "ppo: a search round makes block moves only (\"block_moves\" 1), the config has ",
           cfg_.block_moves);
  GO_CHECK(cfg_.policy.anchor, "ppo: a search round moves the anchor's plan; the policy config has no anchor");
  GO_CHECK(comm_->size() == 1, "ppo: a search round runs in one process (", comm_->size(), " ranks)");
  const auto t0 = std::chrono::steady_clock::now();
  const std::int64_t u = updates_done_;
  UpdateStats st;
  st.update = u + 1;
  const Rng urng = Rng(cfg_.seed).fork(static_cast<std::uint64_t>(u));
  const std::size_t K = static_cast<std::size_t>(cfg_.samples);
  const std::vector<std::size_t> sel = graphs_of_update(u);
  double sim_seconds = 0;
  for (std::size_t gi : sel) {
    GraphTask& t = *tasks_[gi];
    if (!t.pg.has_anchor()) continue;
    const auto ts = std::chrono::steady_clock::now();
    struct Proposal {
      policy::Actions actions;
      BlockMove move;
      Plan plan;
      SimResult result;
    };
    std::vector<Proposal> props;
    // one device: no block move changes a plan (the climbs still move levels)
    if (t.sim->cluster().num_devices() >= 2) props.resize(K);
    const policy::Actions anchor = anchor_actions(t);
    const int nthreads = item_threads(cfg_.threads, props.size());
    reserve_workspaces(t, nthreads);
    refresh_logs(t);
    parallel_items(0, props.size(), nthreads, "ppo: simulation failed", [&](int tid, std::size_t k) {
      Proposal& p = props[k];
      p.move = draw_block_move(t, urng, gi, k);
      p.actions = block_moved(t, p.move, anchor);
      p.plan = plan_of(t, p.actions, base_log(t, p.move));
      p.result = t.sim->simulate(p.plan, workspace_of(t, tid));
    });
    const double at = t.trace.seconds();
    std::size_t best = props.size();
    double sum_t = 0;
    int nv = 0;
    for (std::size_t k = 0; k < props.size(); ++k) {
      const Proposal& p = props[k];
      const bool valid = p.result.valid && std::isfinite(p.result.step_time);
      ++st.samples;
      record_simulated(t, valid, p.result.step_time, at, p.move, p.actions);
      if (!valid) continue;
      sum_t += p.result.step_time;
      ++nv;
      if (p.result.step_time < t.best_step_time && (best == props.size() || p.result.step_time < props[best].result.step_time))
        best = k;
    }
    if (best < props.size()) {
      Proposal& p = props[best];
      adopt_best(t, p.result.step_time, std::move(p.plan), u + 1,
                 {p.actions.device, p.actions.priority.clone(), p.actions.fuse.clone()});
    }
    if (gi == sel[0]) st.mean_step_time = nv ? sum_t / nv : kInf;
    if (cfg_.gather_moves > 0 && u == 0) gather_best(t, u);
    if (cfg_.path_moves > 0) climb_paths(t, gi, urng, u);
    sim_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - ts).count();
  }
  ++updates_done_;
  st.best_step_time = tasks_[sel[0]]->best_step_time;
  st.best_speedup = best_speedup(sel);
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  st.simulate_seconds = sim_seconds;
  st.samples_per_second = st.seconds > 0 ? static_cast<double>(st.samples) / st.seconds : 0;
  return st;
}

void PpoTrainer::gather_best(GraphTask& t, std::int64_t update) {
  if (!t.pg.has_anchor() || !std::isfinite(t.best_step_time)) return;
  const Simulator& sim = *t.sim;
  const OpGraph& g = sim.graph();
  const Cluster& c = sim.cluster();
  const std::vector<GatherMove> moves = gather_moves(g, c, t.best_plan.device, t.best_step_time, cfg_.gather_moves);
  if (moves.empty()) return;
  // the graph's own workspaces, which simulate a step whole: an overflowing move's peaks say
  // whether it is worth fitting
  const int nthreads = item_threads(cfg_.threads, moves.size());
  reserve_workspaces(t, nthreads);
  auto simulate_all = [&](std::span<const Plan> plans, std::span<SimResult> out) {
    parallel_items(0, plans.size(), item_threads(nthreads, plans.size()), "ppo: a gather move failed",
                   [&](int tid, std::size_t i) { out[i] = sim.simulate(plans[i], workspace_of(t, tid)); });
    for (const SimResult& r : out) t.trace.add(r.valid && std::isfinite(r.step_time), r.step_time);
    t.samples += static_cast<std::int64_t>(out.size());
  };
  std::vector<Plan> plans;
  for (const GatherMove& m : moves) plans.push_back(gathered(g, t.best_plan, m));
  std::vector<SimResult> results(plans.size());
  simulate_all(plans, results);
  const double to_beat = t.best_step_time;
  std::optional<Plan> best;
  double best_time = to_beat;
  MemoryFitOptions mo;
  mo.targets = c.num_devices() - 1;  // the device that takes a window cheaply is not always the emptiest
  mo.worth_below = to_beat;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    SimResult& r = results[i];
    if (!(r.step_time < best_time)) continue;
    if (r.valid) {
      best_time = r.step_time;
      best = plans[i];
    } else if (r.status == SimStatus::out_of_memory) {
      MemoryFit f = fit_memory(g, c, plans[i], r, simulate_all, mo);
      if (f.fits() && f.result.step_time < best_time) {
        best_time = f.result.step_time;
        best = std::move(f.plan);
      }
    }
  }
  if (!best) return;
  // as actions, decoded as every later plan is (fusion groups the moves dissolved may form again)
  policy::Actions a = policy::actions_from_plan(g, t.pg, *best, cfg_.policy.priority_levels);
  refresh_logs(t);
  Plan p = plan_of(t, a);
  const SimResult r = sim.simulate(p, workspace_of(t, 0));
  t.trace.add(r.valid && std::isfinite(r.step_time), r.step_time);
  ++t.samples;
  if (r.valid && std::isfinite(r.step_time) && r.step_time < t.best_step_time)
    adopt_best(t, r.step_time, std::move(p), update + 1, std::move(a));
}

void PpoTrainer::climb_paths(GraphTask& t, std::size_t graph, const Rng& urng, std::int64_t update) {
  if (!t.pg.has_anchor()) return;
  const policy::Actions start = anchor_actions(t);
  const int chains = cfg_.path_chains;
  const int nthreads = item_threads(cfg_.threads, static_cast<std::size_t>(chains));
  reserve_workspaces(t, nthreads);
  refresh_logs(t);
  SimWorkspace& ws0 = workspace_of(t, 0);
  const Plan start_plan = plan_of(t, start);
  const SimResult start_result = t.sim->simulate(start_plan, ws0);
  t.trace.add(start_result.valid, start_result.step_time);
  ++t.samples;
  if (!start_result.valid || !std::isfinite(start_result.step_time)) return;
  const StepPath start_path = step_critical_path(*t.sim, start_plan, ws0);
  std::vector<PathClimb> climbs(static_cast<std::size_t>(chains));
  const auto decode = [&](const policy::Actions& a) { return plan_of(t, a); };
  parallel_items(0, climbs.size(), nthreads, "ppo: critical-path moves failed", [&](int tid, std::size_t c) {
    const Rng r = urng.fork((1ull << 61) | (static_cast<std::uint64_t>(graph) << 32) | c);
    climbs[c] = climb_critical_path(*t.sim, t.pg, workspace_of(t, tid), start, start_plan, start_result.step_time,
                                    start_path, cfg_.path_moves, cfg_.policy.priority_levels, r, decode);
  });
  const double at = t.trace.seconds();
  std::size_t best = 0;
  for (std::size_t c = 0; c < climbs.size(); ++c) {
    for (const auto& [valid, time] : climbs[c].simulated) t.trace.add_at(valid, time, at);
    t.samples += static_cast<std::int64_t>(climbs[c].simulated.size());
    if (climbs[c].step_time < climbs[best].step_time) best = c;
  }
  PathClimb& b = climbs[best];
  if (b.step_time < t.best_step_time) adopt_best(t, b.step_time, std::move(b.plan), update + 1, std::move(b.actions));
}

}  // namespace go::rl
