#pragma once
// The `default` and `human` baselines.
//   default: every op on device 0, first ready first run, no fusion (TensorFlow's default).
//   human:   the human-expert placement, by the first rule that applies:
//     1. PlaceOptions::expert_split names a dnn-partitioning expert split (or a go-plan file): it;
//     2. a zoo graph (forward or training; GraphInfo::name is a zoo workload): zoo_human_placement;
//     3. a dnn-partitioning graph whose expert split lies next to it in the msr-fiddle layout
//        (<root>/{throughput,latency}-inputs/<Layer|Operator>Graphs/<stem>.json ->
//        <root>/human-experts/<stem>_expert.json) and uses at most the cluster's devices: the split;
//     4. any other graph: default_human_placement (forward ops by topological depth, cut into k
//        contiguous blocks of equal estimated compute; backward and update ops follow their forward
//        op), the documented generic rule; where those blocks do not fit memory, blocks that also
//        balance memory (detail::base::blocks_that_fit, as pipeline).
//   Colocation groups are then enforced (go::colocate). The result's note says which rule applied.
//   pipeline: forward ops in depth-first topological order cut into k stages of equal compute,
//     training ops with their forward op (go/graph/zoo/placement.hpp, pipeline_placement). Where
//     those stages do not fit memory (simulated), stages of equal compute-and-memory weight are
//     tried (detail::base::blocks_that_fit below) and the fastest that fits is the plan.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "go/baselines/common.hpp"
#include "go/core/error.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/zoo.hpp"
#include "go/sim/cluster.hpp"
#include "go/sim/plan.hpp"
#include "go/sim/simulator.hpp"

namespace go {

inline Plan default_plan(const OpGraph& g) { return Plan::single_device(g.num_ops(), 0); }

namespace detail::base {

// Contiguous blocks of `order` (forward ops), one per device, training ops with their forward op,
// that fit memory where they can. The blocks of equal compute when they fit (simulated by `sim`);
// else blocks cut by the weight a*compute/total + (1-a)*memory/total of each forward op (memory:
// Baechi's static footprint of the op and of every training op that follows it, so a block's
// parameters, optimizer state and saved activations), a = 3/4, 1/2, 1/4, 0, and the fastest of
// those that fits; when none does, the blocks of equal compute (out of memory). Why not memory
// alone: the blocks of a training graph hold very unequal activations (the first block's live
// longest), and equal memory alone can leave one device most of the compute. `sim`: the graph's
// simulator on c, or null to build one with `so` (only when there is something to check). `how`
// says which blocks were chosen and why.
inline Plan blocks_that_fit(const OpGraph& g, const Cluster& c, const Simulator* sim, const SimOptions& so,
                            const std::vector<OpId>& order, std::string& how) {
  const int k = c.num_devices();
  const std::vector<double> time = detail::zoo::v100_times(g, order);
  auto plan_of = [&](const std::vector<double>& w) {
    Plan p;
    p.device = detail::zoo::cut_weighted_order(g, k, order, w);
    colocate(g, p);
    return p;
  };
  Plan compute = plan_of(time);
  how = "balanced by compute";
  if (k < 2 || order.empty()) return compute;
  std::optional<Simulator> own;
  if (!sim) sim = &own.emplace(g, c, so);
  SimWorkspace ws = sim->make_workspace();
  ws.set_stop_on_oom(true);  // whether a plan fits, the step time of one that does, the first overflow
  const SimResult& r0 = sim->simulate(compute, ws);
  if (r0.valid || r0.status != SimStatus::out_of_memory) return compute;
  const std::string why = sim_reason(r0, g, c);
  std::vector<double> mem(order.size(), 0.0);
  const std::vector<std::int32_t> owner = forward_owner(g, order);
  for (const Op& o : g.ops()) mem[static_cast<std::size_t>(owner[static_cast<std::size_t>(o.id)])] += static_cast<double>(op_footprint(o));
  double total_t = 0, total_m = 0;
  for (double t : time) total_t += t;
  for (double m : mem) total_m += m;
  Plan best;
  double best_time = 0, best_a = 0;
  for (const double a : {0.75, 0.5, 0.25, 0.0}) {
    std::vector<double> w(order.size());
    for (std::size_t i = 0; i < order.size(); ++i)
      w[i] = (total_t > 0 ? a * time[i] / total_t : 0.0) + (total_m > 0 ? (1 - a) * mem[i] / total_m : 0.0);
    Plan p = plan_of(w);
    const SimResult& r = sim->simulate(p, ws);
    if (r.valid && (best.device.empty() || r.step_time < best_time)) {
      best_time = r.step_time;
      best_a = a;
      best = std::move(p);
    }
  }
  if (best.device.empty()) {
    how = "balanced by compute; none balancing memory too fits either (" + why + ")";
    return compute;
  }
  how = "balancing " + std::to_string(static_cast<int>(100 * best_a)) + "% compute + " +
        std::to_string(static_cast<int>(100 * (1 - best_a))) + "% memory (those balanced by compute do not fit: " + why + ")";
  return best;
}

}  // namespace detail::base

// Pipeline stages (pipeline_order's blocks) that fit memory where they can (blocks_that_fit above,
// with its `sim` and `so`). `note` (optional) says which stages were chosen and why.
inline Plan pipeline_plan(const OpGraph& g, const Cluster& c, const Simulator* sim, const SimOptions& so,
                          std::string* note) {
  std::string how;
  Plan p = detail::base::blocks_that_fit(g, c, sim, so, pipeline_order(g), how);
  if (note) *note = "stages " + how;
  return p;
}
inline Plan pipeline_plan(const OpGraph& g, const Cluster& c, const Simulator& sim, std::string* note = nullptr) {
  return pipeline_plan(g, c, &sim, {}, note);
}
inline Plan pipeline_plan(const OpGraph& g, const Cluster& c, const SimOptions& so = {}, std::string* note = nullptr) {
  return pipeline_plan(g, c, nullptr, so, note);
}

// The expert split next to a dnn-partitioning graph file, or "" when there is none.
inline std::string find_expert_split(const OpGraph& g) {
  namespace fs = std::filesystem;
  if (g.info().format != "dnn-partitioning" || g.info().source.empty()) return {};
  std::error_code ec;
  const fs::path src(g.info().source);
  const fs::path root = src.parent_path().parent_path().parent_path();
  const fs::path cand = root / "human-experts" / (src.stem().string() + "_expert.json");
  if (fs::is_regular_file(cand, ec)) return cand.string();
  return {};
}

// `sim` (optional): the graph's simulator on c, for the generic rule's memory check (else it builds
// one with `so`, as pipeline_plan does).
inline Plan human_plan(const OpGraph& g, const Cluster& c, const std::string& expert_split = {},
                       std::string* note = nullptr, const Simulator* sim = nullptr, const SimOptions& so = {}) {
  const std::int32_t k = c.num_devices();
  auto say = [&](const std::string& s) {
    if (note) *note = s;
  };
  Plan p;
  if (!expert_split.empty()) {
    p = load_plan(expert_split, g);
    say("expert split " + expert_split);
  } else {
    const auto names = zoo_names();
    if (std::find(names.begin(), names.end(), g.info().name) != names.end()) {
      p.device = zoo_human_placement(g, k);
      say("zoo human-expert placement");
    } else {
      bool done = false;
      const std::string split = find_expert_split(g);
      if (!split.empty()) {
        try {
          Plan e = load_plan(split, g);
          std::int32_t used = 0;
          for (std::int32_t d : e.device) used = std::max(used, d + 1);
          if (used <= k) {
            p = std::move(e);
            say("expert split " + std::filesystem::path(split).filename().string());
            done = true;
          } else {
            say("expert split " + std::filesystem::path(split).filename().string() + " uses " + std::to_string(used) +
                " devices; generic rule (contiguous blocks by topological depth)");
          }
        } catch (const Error& err) {
          say(std::string("expert split unusable (") + err.what() + "); generic rule");
        }
      }
      if (!done) {
        std::string how;
        p = detail::base::blocks_that_fit(g, c, sim, so, default_human_order(g), how);
        if (split.empty()) say("generic rule: contiguous blocks by topological depth, " + how);
      }
    }
  }
  for (std::int32_t d : p.device)  // the file the devices came from, where one was named
    GO_CHECK(d >= 0 && d < k, expert_split.empty() ? g.where() : expert_split + ": ", "human placement uses device ", d,
             " but the cluster has ", k, " device(s)");
  colocate(g, p);
  return p;
}

}  // namespace go
