#pragma once
// One entry point for every placement optimizer, and the registry of their names:
//   go::PlaceResult r = go::place("m-etf", graph, cluster, go::PlaceOptions{});
//   r.plan (device, priority, fusion), r.valid / r.step_time / r.reason from one simulated step,
//   r.optimize_seconds (wall time of the optimizer, fusion included, the final simulation excluded).
// Built-in methods (see each header for its exact rule):
//   default  every op on device 0, first ready first run, no fusion          (human.hpp)
//   human    zoo / dnn-partitioning expert placement, else the generic rule   (human.hpp)
//   pipeline contiguous stages of the depth-first topological order           (human.hpp)
//   metis    METIS k-way, compute + memory balanced, edge bytes cut           (metis.hpp)
//   heft     HEFT list scheduling with communication costs                    (list_scheduling.hpp)
//   m-topo, m-etf, m-sct   Baechi's memory-constrained placers                (list_scheduling.hpp)
//   random, anneal         search with the simulator, budget in simulations,  (search.hpp)
//                          starting from the default and the human plans (anneal: also with
//                          XLA-like fusion, and it searches fusion itself)
//   exact    optimal placement + schedule by a MILP (CBC), <= 200 ops        (exact.hpp)
// PlaceOptions::fusion = xla then adds greedy producer-consumer fusion (fusion.hpp) to the plan of
// every method that does not choose fusion itself (all but anneal and the RL methods), and
// PlaceOptions::fit_memory fits a plan that runs out of memory to it (memory_fit.hpp).
// Other optimizers (the RL `go` method) join with register_place_method(); a later registration
// under an existing name replaces it. The registry is process-wide and not synchronised: register
// before placing from several threads.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "go/baselines/common.hpp"
#include "go/baselines/exact.hpp"
#include "go/baselines/fusion.hpp"
#include "go/baselines/human.hpp"
#include "go/baselines/list_scheduling.hpp"
#include "go/baselines/memory_fit.hpp"
#include "go/baselines/metis.hpp"
#include "go/baselines/search.hpp"
#include "go/core/error.hpp"
#include "go/graph/graph.hpp"
#include "go/sim/cluster.hpp"
#include "go/sim/plan.hpp"
#include "go/sim/simulator.hpp"

namespace go {

// An optimizer: returns a plan for the graph on the cluster; may set out.note and out.simulations.
using PlaceFn = std::function<Plan(const OpGraph&, const Cluster&, const PlaceOptions&, PlaceResult& out)>;

// The PlaceOptions a method may read besides seed, sim and fit_memory (which place() applies to
// every method): a front end says when an option it was given goes unused (gopt place and eval,
// gopt.place; unused_option_note below).
enum class PlaceOption : std::uint8_t { budget, time_limit, fusion, expert, policy, finetune, anchor, patience, progress };

struct PlaceMethod {
  std::string name;
  std::string help;  // one line
  PlaceFn fn;
  // Re-run with device budgets adjusted to the simulated peaks while the plan is out of memory (see
  // place()); for methods that read DeviceSpec::memory_bytes as their budget.
  bool memory_feedback = false;
  // The method chooses fusion itself (the RL method): its plan's fusion is kept as it is, and
  // PlaceOptions::fusion (none/xla) does not apply.
  bool decides_fusion = false;
  // Which of those it reads (anchor: anchor_ties and anchor_placements; fusion: every method that
  // does not decide fusion). With its initializer a registration may leave it out without a warning.
  std::vector<PlaceOption> reads = {};
  bool reads_option(PlaceOption o) const {
    return o == PlaceOption::fusion ? !decides_fusion : std::find(reads.begin(), reads.end(), o) != reads.end();
  }
};

namespace detail::base {

// Starting plans of random and anneal: the default plan and the human plan.
inline std::vector<Plan> search_starts(const OpGraph& g, const Cluster& c, const PlaceOptions& o) {
  return {default_plan(g), human_plan(g, c, o.expert_split, nullptr, nullptr, o.sim)};
}

// Starting plans of anneal, which searches fusion too: those of random, then each with XLA-like
// fusion where that fuses anything.
inline std::vector<Plan> anneal_starts(const OpGraph& g, const Cluster& c, const PlaceOptions& o) {
  std::vector<Plan> s = search_starts(g, c, o);
  for (std::size_t i = 0, m = s.size(); i < m; ++i) {
    Plan f = s[i];
    if (apply_xla_fusion(g, f) > 0) s.push_back(std::move(f));
  }
  return s;
}

// The built-in methods of the header comment, in that order. Compiled once into libgo
// (src/baselines/place.cpp), so that a program calling place() does not compile every method.
std::vector<PlaceMethod> builtin_methods();

inline std::vector<PlaceMethod>& registry() {
  static std::vector<PlaceMethod> r = builtin_methods();
  return r;
}

}  // namespace detail::base

inline void register_place_method(PlaceMethod m) {
  GO_CHECK(!m.name.empty() && m.fn, "register_place_method: a method needs a name and a function");
  auto& r = detail::base::registry();
  for (auto& x : r)
    if (x.name == m.name) {
      x = std::move(m);
      return;
    }
  r.push_back(std::move(m));
}

inline const std::vector<PlaceMethod>& place_methods() { return detail::base::registry(); }

// "" when one of `methods` reads option `o` (or one of them is not registered, or there are none:
// place() or the caller says so), else "<what> is not used by <methods> (it is read by <the
// registered methods that do>); ignored".
inline std::string unused_option_note(const std::vector<std::string>& methods, PlaceOption o, const std::string& what) {
  if (methods.empty()) return {};
  std::string names, readers;
  for (const std::string& n : methods) {
    const auto& r = place_methods();
    const auto it = std::find_if(r.begin(), r.end(), [&](const PlaceMethod& m) { return m.name == n; });
    if (it == r.end() || it->reads_option(o)) return {};
    names += (names.empty() ? "" : ", ") + n;
  }
  for (const PlaceMethod& m : place_methods())
    if (m.reads_option(o)) readers += (readers.empty() ? "" : ", ") + m.name;
  return what + " is not used by " + (methods.size() > 1 ? "any of " : "") + names + " (it is read by " + readers +
         "); ignored";
}

inline std::vector<std::string> place_method_names() {
  std::vector<std::string> v;
  for (const auto& m : place_methods()) v.push_back(m.name);
  return v;
}

inline std::string place_method_list() {
  std::string s;
  for (const auto& m : place_methods()) s += (s.empty() ? "" : ", ") + m.name;
  return s;
}

inline const PlaceMethod& find_place_method(const std::string& name) {
  for (const auto& m : place_methods())
    if (m.name == name) return m;
  GO_FAIL("unknown method '", name, "' (known: ", place_method_list(), ")");
}

// Methods with memory_feedback read DeviceSpec::memory_bytes as the budget of Baechi's static memory
// estimate (detail::base::op_footprint: parameters + outputs + temporary bytes, for the whole
// step). On large training graphs that estimate exceeds the whole cluster's memory although the
// graph fits (the simulator frees activations), so every budget overflows and the estimate stops
// steering placement. place() then scales the budgets up together to 1.05 x the estimate of the
// whole graph: the estimate spreads memory in proportion to capacity and the simulator (with the
// memory feedback below) decides whether the plan fits.
inline void scale_budgets_to_estimate(const OpGraph& g, Cluster& c) {
  double total = 0, sum = 0;
  for (const Op& o : g.ops()) total += static_cast<double>(detail::base::op_footprint(o));
  for (const auto& d : c.devices) sum += static_cast<double>(d.spec.memory_bytes);
  const double scale = 1.05 * total / sum;
  if (scale <= 1.0) return;
  for (auto& d : c.devices) d.spec.memory_bytes = static_cast<std::int64_t>(static_cast<double>(d.spec.memory_bytes) * scale);
}

// Runs optimizer `method`, applies the fusion option, and simulates the plan once. A plan that does
// not fit comes back with valid = false, status out_of_memory and the simulator's reason; a plan
// the simulator rejects for another reason is a bug of the method and throws.
// Memory feedback (methods with memory_feedback: heft, m-topo, m-etf, m-sct): their static memory
// estimate (parameters + every output for the whole step) differs from what the simulator keeps
// live, so a plan may still run a device out of memory. Their budgets are first scaled by
// scale_budgets_to_estimate(); when the simulated plan is out of memory, the method runs again with
// every device's budget multiplied by 0.97 x capacity / simulated peak, clamped to [0.5, 1.25]:
// devices over capacity shrink, devices with room grow and take what the others shed (the budgets
// act as relative shares once the estimate exceeds them, as m-TOPO's caps do; shrinking only the
// overflowing device left m-ETF oscillating between the two devices of gnmt8 x2). Up to 16 re-runs;
// they (each one simulation) count in optimize_seconds and simulations, and the note says how many
// were made. The first plan that fits is returned, else the attempt whose worst device is least
// over its capacity. On a single device there is nothing to adjust: no re-runs.
// With PlaceOptions::fit_memory, a plan still out of memory on more than one device then goes
// through fit_memory() (where its first 4 rounds end with nothing that fits, 12 further rounds that
// also weigh the tensors each op receives, with windows of several sizes), its trials on the
// hardware's threads: the fitted plan is returned where one fits (its simulations count in
// optimize_seconds and simulations, the note says how many op sets moved), else the plan as it
// was, the note saying that none fits.
inline PlaceResult place(const std::string& method, const OpGraph& g, const Cluster& c, const PlaceOptions& opts = {});

// PlaceOptions::fit_memory's step, for any simulated plan (gopt.fit_memory in Python): where r's plan
// is out of memory on a cluster of several devices, fit_memory() with the further rounds (received
// tensors, several window sizes), its trials on the hardware's threads. A fitted plan replaces r's
// (its whole simulation recorded); the simulations and the time count in r, and the note says how
// many op sets moved, or that none fits (r then as it was).
inline void fit_result_to_memory(const OpGraph& g, const Cluster& c, const SimOptions& so, PlaceResult& r) {
  if (!r.valid && r.status != SimStatus::out_of_memory) {  // moving ops cannot mend a bad device or a cycle
    r.note += (r.note.empty() ? "" : "; ") + std::string("not fitted to memory: the plan is invalid for another reason (") +
              r.reason + ")";
    return;
  }
  if (r.status != SimStatus::out_of_memory || c.num_devices() < 2) return;
  const auto t1 = std::chrono::steady_clock::now();
  const Simulator sim(g, c, so);
  // a baseline's plan is fitted once, so it may take more simulations than GO's anchor spends on
  // its candidate (bench/README.md, "Plans fitted to memory")
  MemoryFitOptions mo;
  mo.more_rounds = 12;
  MemoryFit f = fit_memory(sim, r.plan, 0, mo);
  r.simulations += f.simulations;
  r.optimize_seconds += detail::base::seconds_since(t1);
  std::string what = "fitted to memory: ";
  if (f.fits()) {
    what += std::to_string(f.moves) + " op set(s) moved off the devices that overflow";
    r.plan = std::move(f.plan);
    record_simulation(g, c, f.result, r);  // fit_memory's whole simulation of it, with `so`
  } else {
    what += "no plan found that fits; the plan is returned as it was";
  }
  r.note += (r.note.empty() ? "" : "; ") + what + " (" + std::to_string(f.simulations) + " simulations)";
}

inline PlaceResult place(const std::string& method, const OpGraph& g, const Cluster& c, const PlaceOptions& opts) {
  // SimOptions::cost = roofline: the methods' own cost estimates (op_times, anchors, features) see
  // the graph without measured times too, as the simulator does.
  if (opts.sim.cost == CostSource::roofline && has_measured_times(g)) return place(method, without_measured_times(g), c, opts);
  constexpr int kMaxRetries = 16;
  const PlaceMethod& m = find_place_method(method);
  c.validate();
  PlaceResult r;
  r.method = method;
  const auto t0 = std::chrono::steady_clock::now();
  Cluster work = c;
  if (m.memory_feedback) scale_budgets_to_estimate(g, work);
  // on one device no budget changes the plan
  const bool feedback = m.memory_feedback && c.num_devices() > 1;
  int retries = 0;
  PlaceResult best;  // the attempt least over capacity, while none fits
  double best_over = std::numeric_limits<double>::infinity();
  for (;;) {
    r.note.clear();
    r.plan = m.fn(g, work, opts, r);
    if (m.decides_fusion) {
    } else if (opts.fusion == FusionMode::xla) apply_xla_fusion(g, r.plan);
    else r.plan.fusion.clear();
    // earlier attempts and their simulations are part of the optimization; this attempt's is not
    r.optimize_seconds = detail::base::seconds_since(t0);
    const std::string bad = check_plan(g, r.plan, c.num_devices(), opts.sim.check_colocation, opts.sim.check_fusion_rules);
    GO_CHECK(bad.empty(), g.where(), method, " produced an invalid plan: ", bad);
    evaluate_plan(g, c, r.plan, r, opts.sim);
    GO_CHECK(r.valid || r.status == SimStatus::out_of_memory, g.where(), method, " produced an invalid plan: ", r.reason);
    const bool last = r.valid || !feedback || retries == kMaxRetries;
    if (!r.valid && feedback) {
      double over = 0;
      for (std::int32_t d = 0; d < c.num_devices(); ++d)
        over = std::max(over, static_cast<double>(r.peak_memory[static_cast<std::size_t>(d)]) / static_cast<double>(c.spec(d).memory_bytes));
      if (over < best_over) {
        best_over = over;
        best = r;
      }
      if (last) {
        const double t = r.optimize_seconds;
        r = std::move(best);
        r.optimize_seconds = t;
      }
    }
    if (last) {
      if (retries > 0) {
        r.simulations += retries;
        r.note += std::string(r.note.empty() ? "" : "; ") + "memory feedback: " + std::to_string(retries) +
                  " re-run(s) with adjusted device budgets" + (r.valid ? "" : ", none fits; the attempt least over capacity is returned");
      }
      if (opts.fit_memory) fit_result_to_memory(g, c, opts.sim, r);
      return r;
    }
    for (std::int32_t d = 0; d < c.num_devices(); ++d) {
      auto& spec = work.devices[static_cast<std::size_t>(d)].spec;
      const double cap = static_cast<double>(c.spec(d).memory_bytes);
      const double peak = std::max(1.0, static_cast<double>(r.peak_memory[static_cast<std::size_t>(d)]));
      const double f = std::clamp(0.97 * cap / peak, 0.5, 1.25);
      spec.memory_bytes = std::max<std::int64_t>(1, static_cast<std::int64_t>(static_cast<double>(spec.memory_bytes) * f));
    }
    ++retries;
  }
}

}  // namespace go
