#pragma once
// Device relabelling: a plan with the op sets of two devices exchanged whole (priorities and fusion
// groups kept). Where links differ by pair (v100x8, the DGX-1 hybrid cube-mesh: NVLink inside each
// quad and between GPU i and i + 4, PCIe between the others), which device holds which op set
// decides which hand-offs take the slow links, and a search that moves a few ops at a time (GO's
// samples and block moves, annealing) does not get there (moving one op set whole is many moves,
// each worse on the way). Human's layer i on device i mod 8 sends layer 3's output from GPU 3 to
// GPU 4 over PCIe; the anchor's best plan of gnmt8 (human + XLA-like fusion, 547.76 ms) takes
// 413.87 ms relabelled. GO's fine-tuning ends with relabel_devices on its best plan (bench/README.md,
// "Device relabelling").
//
// relabel_for_transfers (no simulation): the relabelling that moves the plan's transfers over the
// fastest links, by their time on idle links; GO's anchor tries it on its best candidates
// (go/rl/anchor.hpp, `relabel`). relabel_devices (simulated): a hill-climb over the swaps (a, b),
// a < b, in order, taking each that makes the plan faster (a valid plan with a lower step time),
// until a whole pass takes none. A swap of two interchangeable devices (interchangeable_devices:
// the same spec and the same links to and from every other device) is skipped: it relabels the
// plan onto an identical cluster. So on a cluster of identical devices linked alike (v100x2,
// v100x4) neither does anything.
#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "go/baselines/best_trace.hpp"
#include "go/graph/graph.hpp"
#include "go/sim/cluster.hpp"
#include "go/sim/plan.hpp"
#include "go/sim/simulator.hpp"

namespace go {

// Whether exchanging devices a and b maps the cluster onto itself.
inline bool interchangeable_devices(const Cluster& c, std::int32_t a, std::int32_t b) {
  if (a == b) return true;
  if (!(c.spec(a) == c.spec(b))) return false;
  if (c.link_bandwidth(a, b) != c.link_bandwidth(b, a) || c.link_latency(a, b) != c.link_latency(b, a)) return false;
  for (std::int32_t x = 0; x < c.num_devices(); ++x) {
    if (x == a || x == b) continue;
    if (c.link_bandwidth(a, x) != c.link_bandwidth(b, x) || c.link_latency(a, x) != c.link_latency(b, x) ||
        c.link_bandwidth(x, a) != c.link_bandwidth(x, b) || c.link_latency(x, a) != c.link_latency(x, b))
      return false;
  }
  return true;
}

// The relabelling of `device`'s devices with the least transfer time on idle links: the sum, over
// the transfers the simulator makes (each output tensor once to each other device that reads it),
// of latency + bytes / bandwidth of the pair it crosses. Exhaustive over the permutations up to 8
// devices (8! = 40,320 sums of 56 pairs each, milliseconds), a hill-climb over swaps beyond; a tie
// keeps the permutation found first (the identity before any other). Only devices of the same spec
// trade op sets. Device d becomes to[d]; the identity when no relabelling moves less, or when every
// pair of devices is interchangeable.
inline std::vector<std::int32_t> relabel_for_transfers(const OpGraph& g, const Cluster& c,
                                                       std::span<const std::int32_t> device) {
  const std::int32_t n = c.num_devices();
  std::vector<std::int32_t> to(static_cast<std::size_t>(n));
  for (std::int32_t d = 0; d < n; ++d) to[static_cast<std::size_t>(d)] = d;
  bool symmetric = true;
  for (std::int32_t a = 0; a < n && symmetric; ++a)
    for (std::int32_t b = a + 1; b < n && symmetric; ++b) symmetric = interchangeable_devices(c, a, b);
  if (device.empty() || symmetric) return to;
  const auto nn = static_cast<std::size_t>(n);
  std::vector<double> bytes(nn * nn, 0.0), count(nn * nn, 0.0);
  for_each_transfer(g, device, [&](OpId v, std::int32_t d, TensorId t) {
    const std::size_t i = static_cast<std::size_t>(device[static_cast<std::size_t>(v)]) * nn + static_cast<std::size_t>(d);
    bytes[i] += static_cast<double>(g.tensor(t).bytes);
    count[i] += 1;
  });
  std::vector<std::pair<std::size_t, std::pair<std::int32_t, std::int32_t>>> pairs;  // pairs with traffic
  for (std::int32_t a = 0; a < n; ++a)
    for (std::int32_t b = 0; b < n; ++b)
      if (const std::size_t i = static_cast<std::size_t>(a) * nn + static_cast<std::size_t>(b); count[i] > 0)
        pairs.push_back({i, {a, b}});
  auto cost = [&](const std::vector<std::int32_t>& t) {
    double sum = 0;
    for (const auto& [i, ab] : pairs) {
      const std::int32_t x = t[static_cast<std::size_t>(ab.first)], y = t[static_cast<std::size_t>(ab.second)];
      sum += count[i] * c.link_latency(x, y) + bytes[i] / c.link_bandwidth(x, y);
    }
    return sum;
  };
  // devices of one spec only: the sum counts no compute, so no op set moves to a slower device
  auto same_specs = [&](const std::vector<std::int32_t>& t) {
    for (std::int32_t d = 0; d < n; ++d)
      if (!(c.spec(d) == c.spec(t[static_cast<std::size_t>(d)]))) return false;
    return true;
  };
  double best = cost(to);
  if (n <= 8) {
    std::vector<std::int32_t> t = to;
    while (std::next_permutation(t.begin(), t.end()))
      if (const double x = cost(t); x < best && same_specs(t)) {
        best = x;
        to = t;
      }
    return to;
  }
  for (bool improved = true; improved;) {
    improved = false;
    for (std::int32_t a = 0; a < n; ++a)
      for (std::int32_t b = a + 1; b < n; ++b) {
        std::vector<std::int32_t> t = to;
        std::swap(t[static_cast<std::size_t>(a)], t[static_cast<std::size_t>(b)]);
        if (const double x = cost(t); x < best && same_specs(t)) {
          best = x;
          to = std::move(t);
          improved = true;
        }
      }
  }
  return to;
}

struct Relabelled {
  Plan plan;                    // the input plan when no swap helped
  double step_time = 0;         // its step time (the input's when no swap helped)
  std::vector<std::int32_t> to;  // device d of the input is device to[d] of `plan`
  std::int64_t simulations = 0;
};

// `step_time`: the plan's own (already simulated). Every simulation is added to `trace` when given.
inline Relabelled relabel_devices(const Simulator& sim, const Plan& plan, double step_time, SimWorkspace& ws,
                                  BestTrace* trace = nullptr) {
  const Cluster& c = sim.cluster();
  const std::int32_t n = c.num_devices();
  Relabelled out{plan, step_time, {}, 0};
  for (std::int32_t d = 0; d < n; ++d) out.to.push_back(d);
  if (plan.device.empty() || n < 2) return out;
  std::vector<std::pair<std::int32_t, std::int32_t>> swaps;
  for (std::int32_t a = 0; a < n; ++a)
    for (std::int32_t b = a + 1; b < n; ++b)
      if (!interchangeable_devices(c, a, b)) swaps.emplace_back(a, b);
  Plan trial = plan;
  for (bool improved = !swaps.empty(); improved;) {
    improved = false;
    for (const auto& [a, b] : swaps) {
      for (std::size_t i = 0; i < plan.device.size(); ++i) {
        const std::int32_t d = out.plan.device[i];
        trial.device[i] = d == a ? b : d == b ? a : d;
      }
      const SimResult& r = sim.simulate(trial, ws);
      ++out.simulations;
      if (trace) trace->add(r.valid, r.step_time);
      if (!r.valid || !(r.step_time < out.step_time)) continue;
      out.step_time = r.step_time;
      std::swap(out.plan.device, trial.device);
      for (std::int32_t& t : out.to) t = t == a ? b : t == b ? a : t;
      improved = true;
    }
  }
  return out;
}

}  // namespace go
