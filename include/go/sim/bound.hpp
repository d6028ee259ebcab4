#pragma once
// Lower bounds on the simulated step time of every plan of a graph on a cluster: how far any method's
// plan can at most be from the best possible one, for graphs too large for `exact`.
//
// Each bound is max(longest path, total work / devices) over per-op floors; transfers, memory and
// launch overheads (but those of the units the valid bound knows below) are left out, so the bounds
// hold for any placement, priorities and channel model.
//   unfused: the floor of an op is its time go::op_time on the fastest device kind of the cluster;
//            it bounds every plan without fusion groups.
//   fused:   the floor is what the op adds to any fusion group it can be in
//            (go/sim/simulator/semantics.hpp, "Fusion"): a roofline op its FLOPs /
//            (peak * efficiency), a measured library kernel its time less one launch, every other
//            op (measured loop ops, views, inputs) nothing. A group costs at least the sum of its
//            members' floors, a group's members on a path run one after the other inside it, and a
//            path never re-enters a group (groups are convex), so the bound holds for every plan,
//            fused or not, whatever fusion rules allow. It is loose where a graph's time is memory
//            traffic (fusing can remove only part of it).
//   valid:   the fused floor, raised where go's fusion rules (go/graph/fusion_rules.hpp) decide
//            alone: an op that never joins a group (an alone op, a library kernel of the backward
//            pass) runs as its own unit, so its floor is its whole unfused time; a forward library
//            kernel is in a group with no other library kernel, whose time is at least its
//            measured time (a roofline one: one launch + its FLOPs / (peak * efficiency)) plus the
//            other members' floors. It bounds every plan the simulator runs with its fusion rules
//            checked (SimOptions::check_fusion_rules, the default): those are the valid plans.
//            On a graph costed by the roofline alone (no measured times, or CostSource::roofline),
//            the valid bound is also at least the same max over a second set of floors, built from
//            the traffic the rules force: a tensor whose producer and reader can never share a
//            group (fusion_pair_possible: e.g. a matmul gradient and the dropout mask applied to
//            it, a reduction and its reader, a weight and the op reading it) is read from device
//            memory by every group holding such a reader, and written by its producer's; a group
//            without a library kernel takes at least its external bytes / (bandwidth * bandwidth
//            efficiency), a group with one at least its launch + its FLOP time. So a loop op's
//            floor is those bytes (a read shared by k such readers: 1/k each, one group reading
//            it once; its parameters; outputs nobody reads), at that rate, and where it is an
//            epilogue kind, which may sit in a library kernel's group, the smaller of that and its
//            FLOP time; library, alone and backward library ops keep their floors above. Every
//            group then costs at least the sum of its members' floors (a lone op too: its own
//            bytes at its kind's rate, never below that of the bandwidth). On GNMT and
//            Transformer-XL's training graphs the loop ops between gradient kernels are this.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "go/graph/cost.hpp"
#include "go/graph/fusion_rules.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/op_kind.hpp"
#include "go/sim/cluster.hpp"

namespace go {

struct StepTimeBound {
  double unfused = 0;       // no plan without fusion simulates faster (seconds)
  double fused = 0;         // no plan at all simulates faster
  double valid = 0;         // no plan within the fusion rules simulates faster
  double unfused_path = 0;  // the two terms of each bound
  double unfused_work = 0;
  double fused_path = 0;
  double fused_work = 0;
  double valid_path = 0;
  double valid_work = 0;
  double valid_compute = 0;  // the valid bound from the first floors alone
  double valid_traffic = 0;  // from the traffic floors (0 on a graph with measured times); valid is the larger
};

// What op `o` adds at least to the time of any unit it runs in on `spec` (the fused floor above).
inline double fused_op_floor(const Op& o, const DeviceSpec& spec, CostSource src = CostSource::measured) {
  const bool timed = src == CostSource::measured && o.has_time();
  if (timed) return fusion_class(o) == FusionClass::library ? std::max(0.0, o.time - spec.launch_overhead) : 0.0;
  if (is_free_op(o.kind)) return 0.0;
  const double eff = spec.compute_efficiency[op_kind_index(o.kind)];
  return o.flops / (spec.peak_flops * (eff > 0 ? eff : 1.0));
}

// The same, under the fusion rules (the valid floor above).
inline double valid_op_floor(const Op& o, const DeviceSpec& spec, CostSource src = CostSource::measured) {
  if (is_free_op(o.kind)) return 0.0;
  if (fusion_never_grouped(o)) return op_time(o, spec, src);
  if (fusion_class(o) == FusionClass::library)  // measured: its whole time; roofline: its group's launch + its FLOPs
    return src == CostSource::measured && o.has_time() ? o.time : spec.launch_overhead + fused_op_floor(o, spec, src);
  return fused_op_floor(o, spec, src);
}

// Per op, the bytes the fusion rules make it move in every valid plan (the valid bound's second
// floors above): reads of tensors from producers it can never share a group with (a share of
// those shared by several such readers), writes of tensors some reader of which can never share
// its group or that nobody reads, and its parameters.
inline std::vector<double> forced_bytes(const OpGraph& g) {
  const auto n = static_cast<std::size_t>(g.num_ops());
  std::vector<double> bytes(n, 0.0);
  std::vector<std::int32_t> readers(g.tensors().size(), 0), apart(g.tensors().size(), 0);
  auto distinct_inputs = [&](OpId v, auto&& f) {  // each tensor v reads, once
    const auto ins = g.inputs(v);
    for (std::size_t k = 0; k < ins.size(); ++k)
      if (std::find(ins.begin(), ins.begin() + static_cast<std::ptrdiff_t>(k), ins[k]) == ins.begin() + static_cast<std::ptrdiff_t>(k))
        f(ins[k]);
  };
  auto never_with_producer = [&](OpId v, TensorId t) {
    const OpId p = g.tensor(t).producer;
    return p < 0 || !fusion_pair_possible(g, v, p);
  };
  for (OpId v = 0; v < g.num_ops(); ++v)
    distinct_inputs(v, [&](TensorId t) {
      ++readers[static_cast<std::size_t>(t)];
      if (never_with_producer(v, t)) ++apart[static_cast<std::size_t>(t)];
    });
  for (OpId v = 0; v < g.num_ops(); ++v) {
    double& b = bytes[static_cast<std::size_t>(v)];
    b += static_cast<double>(g.op(v).param_bytes);
    distinct_inputs(v, [&](TensorId t) {
      if (never_with_producer(v, t))
        b += static_cast<double>(g.tensor(t).bytes) / static_cast<double>(apart[static_cast<std::size_t>(t)]);
    });
    const Op& o = g.op(v);
    for (TensorId t = o.first_output; t < o.first_output + o.num_outputs; ++t) {
      const auto ti = static_cast<std::size_t>(t);
      if (readers[ti] == 0 || apart[ti] > 0) b += static_cast<double>(g.tensor(t).bytes);
    }
  }
  return bytes;
}

// The longest path over per-op floors, with a launch for each kernel of its own that the fusion
// rules make the path run (the valid bounds' path term). A path's ops between two ops that no
// group holds (sources, alone ops, backward library kernels) or a forward library kernel share no
// group with the ops beyond them (groups are convex and hold no such op, or only that kernel), and
// a loop op that no library kernel's group may hold (a roofline loop or reduction op of a
// non-epilogue kind: rule 3c) runs in a loop kernel, one launch; so each stretch of the path
// between such ops that holds one of those loop ops runs at least one launch its floors do not
// count (a library kernel's floor holds its own). `loop_kernel[v]`: v is such a loop op;
// `alone[v]`: no group holds v (fusion_never_grouped); `library[v]`: v is a forward library kernel.
inline double path_with_loop_launches(const OpGraph& g, std::span<const double> floors,
                                      const std::vector<std::uint8_t>& loop_kernel,
                                      const std::vector<std::uint8_t>& alone, const std::vector<std::uint8_t>& library,
                                      double launch) {
  const auto n = static_cast<std::size_t>(g.num_ops());
  // per op, the longest path ending there with its stretch (0) not yet in a loop kernel, (1) in one,
  // (2) just after a library kernel (its epilogue ops may be in that kernel)
  constexpr double kNone = -1.0;
  std::vector<double> best(3 * n, kNone);
  double longest = 0;
  for (OpId v : g.topo_order()) {
    const auto i = static_cast<std::size_t>(v);
    double in[3] = {kNone, kNone, kNone};
    if (g.pred(v).empty()) in[0] = 0;
    for (OpId u : g.pred(v))
      for (int s = 0; s < 3; ++s) in[s] = std::max(in[s], best[3 * static_cast<std::size_t>(u) + static_cast<std::size_t>(s)]);
    for (int s = 0; s < 3; ++s) {
      if (in[s] < 0) continue;
      int out = s;
      double t = in[s] + floors[i];
      if (alone[i]) out = 0;
      else if (library[i]) out = 2;
      else if (loop_kernel[i]) {
        if (s != 1) t += launch;
        out = 1;
      }
      best[3 * i + static_cast<std::size_t>(out)] = std::max(best[3 * i + static_cast<std::size_t>(out)], t);
      longest = std::max(longest, t);
    }
  }
  return longest;
}

inline StepTimeBound step_time_lower_bound(const OpGraph& g, const Cluster& c, CostSource src = CostSource::measured) {
  StepTimeBound b;
  const auto n = static_cast<std::size_t>(g.num_ops());
  if (n == 0 || c.num_devices() == 0) return b;
  // the traffic floors hold where every group streams at the bandwidth: no measured member sets its rate
  const bool traffic = src == CostSource::roofline || !has_measured_times(g);
  const std::vector<double> forced = traffic ? forced_bytes(g) : std::vector<double>{};
  std::vector<double> unfused(n), fused(n), valid(n), moved(traffic ? n : 0);
  for (const Op& o : g.ops()) {
    const auto i = static_cast<std::size_t>(o.id);
    for (std::int32_t d = 0; d < c.num_devices(); ++d) {
      const DeviceSpec& spec = c.spec(d);
      const double u = op_time(o, spec, src), f = fused_op_floor(o, spec, src), v = valid_op_floor(o, spec, src);
      unfused[i] = d == 0 ? u : std::min(unfused[i], u);
      fused[i] = d == 0 ? f : std::min(fused[i], f);
      valid[i] = d == 0 ? v : std::min(valid[i], v);
      if (!traffic) continue;
      double m = v;
      if (const FusionClass k = fusion_class(o); !is_free_op(o.kind) && (k == FusionClass::loop || k == FusionClass::reduction)) {
        const double rate = spec.mem_bandwidth * spec.bandwidth_efficiency *
                            std::max(1.0, spec.memory_efficiency[op_kind_index(o.kind)]);
        m = forced[i] / rate;
        if (fusion_epilogue_kind(o.kind)) m = std::min(m, f);
      }
      moved[i] = d == 0 ? m : std::min(moved[i], m);
    }
  }
  double su = 0, sf = 0, sv = 0, sm = 0;
  for (std::size_t i = 0; i < n; ++i) su += unfused[i], sf += fused[i], sv += valid[i];
  for (double m : moved) sm += m;
  const double nd = static_cast<double>(c.num_devices());
  // the ops that split a path's stretches, and the loop ops that run in loop kernels of their own
  std::vector<std::uint8_t> loop_kernel(n, 0), alone(n, 0), library(n, 0);
  double launch = c.spec(0).launch_overhead;
  for (std::int32_t d = 1; d < c.num_devices(); ++d) launch = std::min(launch, c.spec(d).launch_overhead);
  for (const Op& o : g.ops()) {
    const auto i = static_cast<std::size_t>(o.id);
    const FusionClass k = fusion_class(o);
    alone[i] = fusion_never_grouped(o);
    library[i] = k == FusionClass::library && o.role == OpRole::forward;
    loop_kernel[i] = (k == FusionClass::loop || k == FusionClass::reduction) && !fusion_epilogue_kind(o.kind) &&
                     !is_free_op(o.kind) && !(src == CostSource::measured && o.has_time());
  }
  b.unfused_path = critical_path(g, unfused).time;
  b.fused_path = critical_path(g, fused).time;
  b.valid_path = path_with_loop_launches(g, valid, loop_kernel, alone, library, launch);
  b.unfused_work = su / nd;
  b.fused_work = sf / nd;
  b.valid_work = sv / nd;
  b.unfused = std::max(b.unfused_path, b.unfused_work);
  b.fused = std::max(b.fused_path, b.fused_work);
  b.valid = b.valid_compute = std::max(b.valid_path, b.valid_work);
  if (traffic) {  // the traffic floors' bound, where it is the larger
    const double path = path_with_loop_launches(g, moved, loop_kernel, alone, library, launch), work = sm / nd;
    b.valid_traffic = std::max(path, work);
    if (b.valid_traffic > b.valid) {
      b.valid_path = path;
      b.valid_work = work;
      b.valid = std::max(path, work);
    }
  }
  return b;
}

}  // namespace go
