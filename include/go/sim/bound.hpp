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
#include <algorithm>
#include <cstddef>
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
  const FusionClass c = fusion_class(o);
  if (c == FusionClass::source || c == FusionClass::alone || (c == FusionClass::library && o.role != OpRole::forward))
    return op_time(o, spec, src);
  if (c == FusionClass::library)  // measured: its whole time; roofline: its group's launch + its FLOPs
    return src == CostSource::measured && o.has_time() ? o.time : spec.launch_overhead + fused_op_floor(o, spec, src);
  return fused_op_floor(o, spec, src);
}

inline StepTimeBound step_time_lower_bound(const OpGraph& g, const Cluster& c, CostSource src = CostSource::measured) {
  StepTimeBound b;
  const auto n = static_cast<std::size_t>(g.num_ops());
  if (n == 0 || c.num_devices() == 0) return b;
  std::vector<double> unfused(n), fused(n), valid(n);
  for (const Op& o : g.ops()) {
    const auto i = static_cast<std::size_t>(o.id);
    for (std::int32_t d = 0; d < c.num_devices(); ++d) {
      const double u = op_time(o, c.spec(d), src), f = fused_op_floor(o, c.spec(d), src),
                   v = valid_op_floor(o, c.spec(d), src);
      unfused[i] = d == 0 ? u : std::min(unfused[i], u);
      fused[i] = d == 0 ? f : std::min(fused[i], f);
      valid[i] = d == 0 ? v : std::min(valid[i], v);
    }
  }
  double su = 0, sf = 0, sv = 0;
  for (std::size_t i = 0; i < n; ++i) su += unfused[i], sf += fused[i], sv += valid[i];
  const double nd = static_cast<double>(c.num_devices());
  b.unfused_path = critical_path(g, unfused).time;
  b.fused_path = critical_path(g, fused).time;
  b.valid_path = critical_path(g, valid).time;
  b.unfused_work = su / nd;
  b.fused_work = sf / nd;
  b.valid_work = sv / nd;
  b.unfused = std::max(b.unfused_path, b.unfused_work);
  b.fused = std::max(b.fused_path, b.fused_work);
  b.valid = std::max(b.valid_path, b.valid_work);
  return b;
}

}  // namespace go
