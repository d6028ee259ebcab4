#pragma once
// Fitting a plan into device memory: op sets moved off the device that overflows most, onto the
// devices with the most room, until the plan fits. Where memory is tight a heuristic plan that
// would be fast often overflows one device by a little: on gnmt8 at 121 steps (80,588 ops, 8
// V100s) human's device 0 holds the embeddings, the bidirectional layer, the attention and decoder
// layer 0 and peaks at 23.6 GB of 17.2 (with XLA-like fusion), so every human candidate of GO's
// anchor is out of memory while it would run in 1,403 ms against the anchor's 2,149; moving about a
// third of device 0's saved activations to another device gives a plan that fits in about 1,500
// (bench/README.md, "Plans fitted to memory"). A search that moves a few ops at a time does not
// get there: each small move leaves the plan out of memory, and GO's samples and annealing stay
// with plans that fit.
//
// What moves: op sets of forward ops with their training ops (forward_owner over the forward ops in
// depth-first order, pipeline_order: a contiguous run of that order is whole steps of a chain, so a
// moved set hands off at its two ends), those of one device and in one window of that order. A
// round takes the device whose peak exceeds its capacity most (relative to it), weighs its owners
// by the bytes that stay alive (parameters and optimizer state, forward outputs, which training
// keeps for the backward pass), and sizes the window to what must leave: the peak's excess over
// `headroom` of the capacity, in those bytes (x their total / the peak), plus 10%. Up to `windows`
// windows spread evenly over the device's owners (overlapping by at least half), each sent to each
// of the `targets` other devices with the most free memory, are simulated whole; fusion groups a
// move splits are dissolved (their ops run unfused), priorities are kept. The round keeps the
// fastest trial that fits as the answer so far; the next round moves on from the fastest trial that
// halves the memory excess (memory_excess) while that is `gain` faster than the answer, or, while
// none fits, from the one with the least excess while it is a tenth less than before; `rounds`
// rounds at most. Those bytes can be a small part of a device's peak: on a placement that scatters
// a training graph's ops, most of it is tensors received from other devices (HEFT's with XLA-like
// fusion on gnmt8 at 121 steps, 8 V100s: device 5 peaks at 18.5 GB, its forward outputs are 3.0 GB
// and what it receives 16.9 GB), so such windows move too little or, made larger, too much. Where
// those rounds end with nothing that fits, `more_rounds` further rounds (off by default) weigh each
// owner with the tensors its ops receive too (each once, at its first reader on the device) and try
// windows of several sizes side by side (more_sizes x the computed one), going on under the same rule.
// Deterministic: trials are taken in their fixed order, whatever order they were simulated in.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "go/core/parallel.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/zoo.hpp"
#include "go/sim/cluster.hpp"
#include "go/sim/plan.hpp"
#include "go/sim/simulator.hpp"

namespace go {

struct MemoryFitOptions {
  int rounds = 4;          // moves at most (each a round of trials)
  int windows = 6;         // windows of the overflowing device's owners tried per round
  int targets = 2;         // devices with the most free memory each window is tried on
  double headroom = 0.97;  // a window is sized to bring the device's peak to this share of its capacity
  double gain = 0.02;      // a plan that does not fit goes on to another round only this much faster than the best that does
  // Where those rounds end with nothing that fits: up to `more_rounds` more from where they ended,
  // the owners weighed with the tensors they receive too, with windows of each of these sizes (x
  // the computed one) side by side. Off by default (GO's anchor); PlaceOptions::fit_memory turns it on.
  int more_rounds = 0;
  std::vector<double> more_sizes{0.5, 1.0, 2.0};
  // A plan whose whole step is not below this (seconds) is not worth fitting: fit_memory returns
  // it after the first simulation (a moved plan is rarely faster than the plan it came from).
  double worth_below = std::numeric_limits<double>::infinity();
};

struct MemoryFit {
  Plan plan;           // the fitted plan, or the best found (the given plan when nothing helped)
  SimResult result;    // its whole simulation
  int simulations = 0; // of moved plans (the overload on a Simulator counts the given plan's too)
  int moves = 0;       // op sets moved
  bool fits() const { return result.valid && std::isfinite(result.step_time); }
};

// `whole`: the plan's simulation, whole (not stopped at the first overflow). `simulate(plans,
// results)` simulates each plan whole into results[i], in any order and on any threads.
template <class SimulateAll>
MemoryFit fit_memory(const OpGraph& g, const Cluster& c, Plan plan, SimResult whole, SimulateAll&& simulate,
                     const MemoryFitOptions& o = {}) {
  MemoryFit out;
  out.plan = std::move(plan);
  out.result = std::move(whole);
  const auto n = static_cast<std::size_t>(g.num_ops());
  if (out.plan.device.empty()) out.plan.device.assign(n, 0);
  if (out.fits() || out.result.status != SimStatus::out_of_memory || !(out.result.step_time < o.worth_below))
    return out;
  const std::int32_t D = c.num_devices();
  const std::vector<OpId> order = pipeline_order(g);
  if (order.empty()) return out;
  const std::vector<std::int32_t> owner = forward_owner(g, order);  // in [0, order.size())
  auto cap = [&](std::int32_t d) { return static_cast<double>(c.spec(d).memory_bytes); };
  auto key_less = [&](const SimResult& a, const SimResult& b) {
    const bool fa = a.valid && std::isfinite(a.step_time), fb = b.valid && std::isfinite(b.step_time);
    if (fa != fb) return fa;
    if (fa) return a.step_time < b.step_time;
    const double ea = memory_excess(a, c), eb = memory_excess(b, c);
    return ea != eb ? ea < eb : a.step_time < b.step_time;
  };
  std::vector<Plan> trials;
  std::vector<SimResult> results;
  // `cur`: the plan the next round moves from (out of memory); `out`: the fastest that fits so far
  // (`found`), else at the end `cur`
  MemoryFit cur = out;
  bool found = false;
  const std::vector<double> one_size{1.0};
  for (int round = 0; round < o.rounds + o.more_rounds; ++round) {
    if (round == o.rounds && found) break;
    const std::vector<double>& sizes = round < o.rounds ? one_size : o.more_sizes;
    const SimResult& r = cur.result;
    if (r.status != SimStatus::out_of_memory || r.peak_memory.size() != static_cast<std::size_t>(D)) break;
    std::int32_t d = -1;
    double worst = 1.0;
    for (std::int32_t k = 0; k < D; ++k) {
      const double share = cap(k) > 0 ? static_cast<double>(r.peak_memory[static_cast<std::size_t>(k)]) / cap(k) : 0.0;
      if (share > worst) worst = share, d = k;
    }
    if (d < 0) break;
    // the owners on d, in depth-first order, with the bytes of theirs that stay alive on d; in the
    // further rounds also the tensors d receives from other devices, each at its first reader
    std::unordered_map<std::int32_t, double> weight_of;
    std::vector<std::int32_t> owners;
    double total = 0;
    std::vector<char> received(round < o.rounds ? 0 : static_cast<std::size_t>(g.num_tensors()), 0);
    for (OpId v = 0; v < g.num_ops(); ++v) {
      if (cur.plan.device[static_cast<std::size_t>(v)] != d) continue;
      const Op& op = g.op(v);
      double w = static_cast<double>(op.param_bytes + (op.role == OpRole::forward ? op.output_bytes : 0));
      if (!received.empty())
        for (TensorId t : g.inputs(v)) {
          const TensorInfo& ti = g.tensor(t);
          if (ti.producer < 0 || cur.plan.device[static_cast<std::size_t>(ti.producer)] == d) continue;
          if (received[static_cast<std::size_t>(t)]) continue;
          received[static_cast<std::size_t>(t)] = 1;
          w += static_cast<double>(ti.bytes);
        }
      const std::int32_t a = owner[static_cast<std::size_t>(v)];
      auto [it, fresh] = weight_of.try_emplace(a, 0.0);
      if (fresh) owners.push_back(a);
      it->second += w;
      total += w;
    }
    if (owners.size() < 2 || !(total > 0)) break;
    std::sort(owners.begin(), owners.end());
    std::vector<double> cum(owners.size() + 1, 0.0);
    for (std::size_t j = 0; j < owners.size(); ++j) cum[j + 1] = cum[j] + weight_of[owners[j]];
    const double peak = static_cast<double>(r.peak_memory[static_cast<std::size_t>(d)]);
    const double need = std::min(total, 1.1 * (peak - o.headroom * cap(d)) * total / peak);
    std::vector<std::pair<double, std::int32_t>> room;  // (-free bytes, device)
    for (std::int32_t k = 0; k < D; ++k) {
      const double free = o.headroom * cap(k) - static_cast<double>(r.peak_memory[static_cast<std::size_t>(k)]);
      if (k != d && free > 0) room.emplace_back(-free, k);
    }
    std::sort(room.begin(), room.end());
    if (room.size() > static_cast<std::size_t>(std::max(0, o.targets))) room.resize(static_cast<std::size_t>(std::max(0, o.targets)));
    if (room.empty()) break;
    // windows [a, b) of owners: starts spread evenly over [0, total - need], each long enough; in
    // the further rounds, for each size of more_sizes
    std::vector<std::pair<std::size_t, std::size_t>> spans;
    for (const double size : sizes) {
      const double want_bytes = std::min(total, size * need);
      const int want = std::max(1, std::min(o.windows, 1 + static_cast<int>(std::ceil(2 * (total - want_bytes) / std::max(want_bytes, 1.0)))));
      for (int j = 0; j < want; ++j) {
        const double s = want == 1 ? 0.0 : (total - want_bytes) * j / (want - 1);
        std::size_t a = static_cast<std::size_t>(std::upper_bound(cum.begin(), cum.end(), s) - cum.begin());
        a = a > 0 ? a - 1 : 0;
        a = std::min(a, owners.size() - 1);
        std::size_t b = a + 1;
        while (b < owners.size() && cum[b] - cum[a] < want_bytes) ++b;
        if (a == 0 && b == owners.size()) b = owners.size() - 1;  // never the whole device: that only relabels it
        if (std::find(spans.begin(), spans.end(), std::pair{a, b}) == spans.end()) spans.emplace_back(a, b);
      }
    }
    trials.clear();
    std::vector<char> moved(order.size(), 0);
    for (const auto& [a, b] : spans)
      for (const auto& [neg_free, t] : room) {
        std::fill(moved.begin(), moved.end(), 0);
        for (std::size_t j = a; j < b; ++j) moved[static_cast<std::size_t>(owners[j])] = 1;
        Plan q = cur.plan;
        for (std::size_t v = 0; v < n; ++v)
          if (q.device[v] == d && moved[static_cast<std::size_t>(owner[v])]) q.device[v] = t;
        dissolve_split_fusion(q);
        trials.push_back(std::move(q));
      }
    if (trials.empty()) break;  // (no window sizes given)
    results.assign(trials.size(), SimResult{});
    simulate(std::span<const Plan>(trials), std::span<SimResult>(results));
    out.simulations += static_cast<int>(trials.size());
    // the fastest trial that fits is the answer so far; the fastest that at least halves the excess
    // goes on to the next round while it is faster than that answer
    const double excess = memory_excess(cur.result, c);
    std::size_t next = trials.size();
    for (std::size_t j = 0; j < trials.size(); ++j) {
      const SimResult& x = results[j];
      if (x.valid && std::isfinite(x.step_time)) {
        if (!found || x.step_time < out.result.step_time) {
          found = true;
          out.plan = trials[j];
          out.result = x;
          out.moves = cur.moves + 1;
        }
      } else if (x.status == SimStatus::out_of_memory && memory_excess(x, c) <= 0.5 * excess &&
                 (next == trials.size() || x.step_time < results[next].step_time)) {
        next = j;
      }
    }
    if (!found) {  // none fits: go on from the least excess, while it falls by a tenth or more
      std::size_t least = 0;
      for (std::size_t j = 1; j < trials.size(); ++j)
        if (key_less(results[j], results[least])) least = j;
      if (!(memory_excess(results[least], c) < 0.9 * excess)) {
        if (round >= o.rounds || o.more_rounds <= 0) break;
        round = o.rounds - 1;  // on to the further rounds, from the same plan
        continue;
      }
      next = least;
    } else if (next == trials.size() || !(results[next].step_time < (1 - o.gain) * out.result.step_time)) {
      break;
    }
    cur.plan = std::move(trials[next]);
    cur.result = std::move(results[next]);
    ++cur.moves;
  }
  if (!found) {  // the least excess reached
    out.plan = std::move(cur.plan);
    out.result = std::move(cur.result);
    out.moves = cur.moves;
  }
  return out;
}

namespace detail {
// fit_memory on a Simulator: the given plan simulated whole in `first`, then fitted with `all`.
template <class SimulateAll>
MemoryFit fit_memory_simulated(const Simulator& sim, Plan plan, SimWorkspace& first, SimulateAll&& all,
                               const MemoryFitOptions& o) {
  SimResult whole = sim.simulate(plan, first);
  MemoryFit f = fit_memory(sim.graph(), sim.cluster(), std::move(plan), std::move(whole), all, o);
  ++f.simulations;
  return f;
}
}  // namespace detail

// The same, simulated one plan after another in `ws` (whole: its stop-on-overflow is off meanwhile),
// the given plan first (counted in MemoryFit::simulations).
inline MemoryFit fit_memory(const Simulator& sim, Plan plan, SimWorkspace& ws, const MemoryFitOptions& o = {}) {
  const bool stop = ws.stop_on_oom();
  ws.set_stop_on_oom(false);
  auto all = [&](std::span<const Plan> plans, std::span<SimResult> out) {
    for (std::size_t i = 0; i < plans.size(); ++i) out[i] = sim.simulate(plans[i], ws);
  };
  MemoryFit f = detail::fit_memory_simulated(sim, std::move(plan), ws, all, o);
  ws.set_stop_on_oom(stop);
  return f;
}

// The same with each round's trials simulated side by side on `threads` threads (0: the
// hardware's), a workspace each: the result does not depend on the thread count (trials are taken
// in their fixed order).
inline MemoryFit fit_memory(const Simulator& sim, Plan plan, int threads, const MemoryFitOptions& o = {}) {
  std::vector<SimWorkspace> ws;
  ws.reserve(static_cast<std::size_t>(item_threads(threads, std::numeric_limits<std::size_t>::max())));  // never moved
  auto workspaces = [&](std::size_t items) {
    const int n = item_threads(threads, items);
    while (ws.size() < static_cast<std::size_t>(n)) {
      ws.push_back(sim.make_workspace());
      ws.back().set_stop_on_oom(false);
    }
    return n;
  };
  auto all = [&](std::span<const Plan> plans, std::span<SimResult> out) {
    parallel_items(0, plans.size(), workspaces(plans.size()), "fitting a plan to memory",
                   [&](int tid, std::size_t i) { out[i] = sim.simulate(plans[i], ws[static_cast<std::size_t>(tid)]); });
  };
  workspaces(1);
  return detail::fit_memory_simulated(sim, std::move(plan), ws[0], all, o);
}

}  // namespace go
