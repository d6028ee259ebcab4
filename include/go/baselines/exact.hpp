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
// exact_solve throws a go::Error saying so. The solver is compiled once into libgo
// (src/baselines/exact.cpp; the model: exact/problem.hpp, exact/milp.hpp).
#include <cstdint>
#include <string>

#include "go/baselines/common.hpp"
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
  // Seconds of CBC (wall clock); <= 0: 60. CBC checks its clock between steps of its search (a root
  // pass of cuts, a node), so a solve can end a step late: 0.3-2.7 s over a 5 s limit on a
  // 151-op ResNet-18 training graph, 2 devices, on a slow 2-core machine.
  double time_limit = 60;
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

// Solves the placement + schedule MILP of the header comment: first without the memory rows (its
// optimum is then a lower bound on every unfused plan), and when that plan runs out of memory in the
// simulator, again with them, for the time left or half the limit, whichever is longer. Throws
// go::Error when CBC is not compiled in, the graph has more than kExactMaxOps ops, or no placement
// fits the devices' memory under the static estimate.
ExactSolution exact_solve(const OpGraph& g, const Cluster& c, const ExactOptions& opts = {});

// The `exact` place() method: exact_solve with PlaceOptions::time_limit (0: 60 s); the note gives
// the proof or the gap, the MILP objective and the simulated step time of the plan.
Plan exact_plan(const OpGraph& g, const Cluster& c, const PlaceOptions& o, std::string* note = nullptr);

}  // namespace go
