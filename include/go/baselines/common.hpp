#pragma once
// Shared pieces of the baseline optimizers (include/go/baselines): options, the result type, the
// static memory estimate the memory-constrained heuristics use, list-schedule -> priorities, and
// the final evaluation of a plan by the Simulator.
//
// Every optimizer returns a Plan (sim/plan.hpp). Its final step time always comes from the
// Simulator (one simulated step), so every method is measured by the same model; a plan that is
// out of memory comes back with valid = false and the simulator's reason in `reason`.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "go/core/error.hpp"
#include "go/graph/cost.hpp"
#include "go/graph/graph.hpp"
#include "go/sim/cluster.hpp"
#include "go/sim/plan.hpp"
#include "go/sim/simulator.hpp"

namespace go {

// What to do about fusion after placement.
enum class FusionMode : std::uint8_t {
  none,  // no fusion groups
  xla,   // greedy producer-consumer fusion (baselines/fusion.hpp), applied to any placement
};

inline FusionMode parse_fusion_mode(std::string_view s) {
  if (s == "none") return FusionMode::none;
  if (s == "xla") return FusionMode::xla;
  GO_FAIL("unknown fusion mode '", s, "' (known: none, xla)");
}
inline constexpr std::string_view fusion_mode_name(FusionMode f) { return f == FusionMode::xla ? "xla" : "none"; }

// After each update (round) of a method that runs in updates (anchor-search, go, go-one): how far
// it is, for progress lines (PlaceOptions::on_update).
struct UpdateProgress {
  std::int64_t update = 0;   // updates (rounds) done
  std::int64_t updates = 0;  // asked; 0 where the time limit alone ends them (go-one with a limit)
  double best_step_time = std::numeric_limits<double>::infinity();  // s: the best valid plan so far
  double seconds = 0;        // since the method started
  double time_limit = 0;     // PlaceOptions::time_limit (0: none)
};

struct PlaceOptions {
  std::uint64_t seed = 0;           // every random choice (random, anneal, METIS) derives from it
  std::int64_t budget = 1000;       // random/anneal: simulate() calls, the final evaluation excluded
  FusionMode fusion = FusionMode::none;
  std::string expert_split;         // human: a dnn-partitioning expert split to use (default: found
                                    // next to the graph file, see baselines/human.hpp)
  SimOptions sim;                   // options of every simulation
  // go (the RL method, go/rl/place_go.hpp): the pre-trained policy file ("" = the shipped one) and
  // the PPO updates of fine-tuning on this graph (0 = zero-shot, -1 = the method's default).
  std::string policy;
  std::int64_t finetune = -1;
  // anneal, anchor-search, go, go-one: wall-clock seconds of the whole optimization (0: no limit; go-one then
  // trains for as many updates as go), so that methods can be compared at equal time.
  double time_limit = 0;
  // anchor-search, go, go-one: fine-tuning stops after this many updates (rounds) in a row that
  // found no faster plan (0: never; the updates asked, or the time limit, end it).
  std::int64_t patience = 0;
  // best-heuristic, anneal-anchor, anchor-search and the go methods: the orders of one priority level's ops GO's
  // anchor tries (go/rl/config.hpp kAnchorTieOrders; "" = kAnchorTies, its default).
  std::string anchor_ties;
  // ... and the placements it starts from (kAnchorPlacements, its default: "").
  std::string anchor_placements;
  // Every method: a plan that runs out of memory is fitted to it (go/baselines/memory_fit.hpp: op
  // sets moved off the devices that overflow, split fusion groups unfused), as GO's anchor does with
  // its candidates. Off by default: a method's own plan is what the literature's rule gives.
  bool fit_memory = false;
  // anchor-search, go, go-one: called after each update (round), on the calling thread; the other
  // methods never call it.
  std::function<void(const UpdateProgress&)> on_update;
};

struct PlaceResult {
  std::string method;
  Plan plan;
  bool valid = false;
  SimStatus status = SimStatus::ok;
  double step_time = std::numeric_limits<double>::infinity();  // seconds, simulated
  std::string reason;               // why the plan is invalid ("" when valid)
  std::vector<std::int64_t> peak_memory;  // bytes per device
  std::int32_t problem_device = -1;       // out of memory: the first device that overflowed
  std::int64_t problem_bytes = 0;         // out of memory: the bytes it needed
  double optimize_seconds = 0;      // wall time of the optimizer (the final simulation excluded)
  std::int64_t simulations = 0;     // simulate() calls the optimizer made
  std::string note;                 // what the method did that the reader should know
};

namespace detail::base {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Baechi's static memory of an op: persistent (parameters and optimizer state) + its outputs +
// its temporary memory. A placement that keeps every device's sum under its capacity never runs
// out of memory in the simulator (which frees activations after their last consumer), so the
// estimate is conservative.
inline std::int64_t op_footprint(const Op& o) { return o.param_bytes + o.output_bytes + o.temp_bytes; }

// Data bytes on the edge (pred k of op v): the tensor's bytes, 0 for a control edge.
inline double edge_bytes(const OpGraph& g, TensorId t) {
  return t < 0 ? 0.0 : static_cast<double>(g.tensor(t).bytes);
}

// Priorities from a list schedule: the op scheduled first gets the highest priority.
inline std::vector<float> priorities_from_order(std::int32_t n, const std::vector<OpId>& order) {
  std::vector<float> p(static_cast<std::size_t>(n), 0.0f);
  for (std::size_t k = 0; k < order.size(); ++k)
    p[static_cast<std::size_t>(order[k])] = static_cast<float>(order.size() - k);
  return p;
}

// Colocation groups: the device the group's first placed member got (-1: none yet).
struct Colocation {
  std::vector<std::int32_t> device;  // per group id
  explicit Colocation(const OpGraph& g) {
    std::int32_t m = -1;
    for (const Op& o : g.ops()) m = std::max(m, o.colocation);
    device.assign(static_cast<std::size_t>(m + 1), -1);
  }
  std::int32_t forced(const Op& o) const { return o.colocation < 0 ? -1 : device[static_cast<std::size_t>(o.colocation)]; }
  void set(const Op& o, std::int32_t d) {
    if (o.colocation >= 0 && device[static_cast<std::size_t>(o.colocation)] < 0)
      device[static_cast<std::size_t>(o.colocation)] = d;
  }
};

// Op time per device kind: times[d][i]. Devices with the same spec name share a row.
inline std::vector<std::vector<double>> op_times_per_device(const OpGraph& g, const Cluster& c) {
  std::vector<std::vector<double>> t(static_cast<std::size_t>(c.num_devices()));
  for (std::int32_t d = 0; d < c.num_devices(); ++d) {
    for (std::int32_t e = 0; e < d; ++e)
      if (c.spec(e).name == c.spec(d).name && c.spec(e).peak_flops == c.spec(d).peak_flops &&
          c.spec(e).mem_bandwidth == c.spec(d).mem_bandwidth && c.spec(e).launch_overhead == c.spec(d).launch_overhead) {
        t[static_cast<std::size_t>(d)] = t[static_cast<std::size_t>(e)];
        break;
      }
    if (t[static_cast<std::size_t>(d)].empty()) t[static_cast<std::size_t>(d)] = op_times(g, c.spec(d));
  }
  return t;
}

}  // namespace detail::base

// The result fields of `r` (valid, status, step_time, reason, peak_memory) from a simulation of its plan.
inline void record_simulation(const OpGraph& g, const Cluster& c, const SimResult& s, PlaceResult& r) {
  r.valid = s.valid;
  r.status = s.status;
  r.step_time = s.step_time;
  r.peak_memory = s.peak_memory;
  r.problem_device = s.status == SimStatus::out_of_memory ? s.problem_device : -1;
  r.problem_bytes = s.status == SimStatus::out_of_memory ? s.problem_bytes : 0;
  r.reason = s.valid ? std::string() : sim_reason(s, g, c);
}

// Simulates `plan` once and records it in `r` (record_simulation).
inline void evaluate_plan(const OpGraph& g, const Cluster& c, const Plan& plan, PlaceResult& r, const SimOptions& so = {}) {
  Simulator sim(g, c, so);
  SimWorkspace ws = sim.make_workspace();
  record_simulation(g, c, sim.simulate(plan, ws), r);
}

}  // namespace go
