#pragma once
// Lower bounds on the simulated step time of every plan of a graph on a cluster: how far any method's
// plan can at most be from the best possible one, for graphs too large for `exact`.
//
// Each bound is max(longest path, total work / devices) over per-op floors; transfers, memory and
// launch overheads are left out, so the bounds hold for any placement, priorities and channel model.
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
  double unfused_path = 0;  // the two terms of each bound
  double unfused_work = 0;
  double fused_path = 0;
  double fused_work = 0;
};

// What op `o` adds at least to the time of any unit it runs in on `spec` (the fused floor above).
inline double fused_op_floor(const Op& o, const DeviceSpec& spec, CostSource src = CostSource::measured) {
  const bool timed = src == CostSource::measured && o.has_time();
  if (timed) return fusion_class(o) == FusionClass::library ? std::max(0.0, o.time - spec.launch_overhead) : 0.0;
  if (is_free_op(o.kind)) return 0.0;
  const double eff = spec.compute_efficiency[op_kind_index(o.kind)];
  return o.flops / (spec.peak_flops * (eff > 0 ? eff : 1.0));
}

inline StepTimeBound step_time_lower_bound(const OpGraph& g, const Cluster& c, CostSource src = CostSource::measured) {
  StepTimeBound b;
  const auto n = static_cast<std::size_t>(g.num_ops());
  if (n == 0 || c.num_devices() == 0) return b;
  std::vector<double> unfused(n), fused(n);
  for (const Op& o : g.ops()) {
    const auto i = static_cast<std::size_t>(o.id);
    for (std::int32_t d = 0; d < c.num_devices(); ++d) {
      const double u = op_time(o, c.spec(d), src), f = fused_op_floor(o, c.spec(d), src);
      unfused[i] = d == 0 ? u : std::min(unfused[i], u);
      fused[i] = d == 0 ? f : std::min(fused[i], f);
    }
  }
  double su = 0, sf = 0;
  for (std::size_t i = 0; i < n; ++i) su += unfused[i], sf += fused[i];
  const double nd = static_cast<double>(c.num_devices());
  b.unfused_path = critical_path(g, unfused).time;
  b.fused_path = critical_path(g, fused).time;
  b.unfused_work = su / nd;
  b.fused_work = sf / nd;
  b.unfused = std::max(b.unfused_path, b.unfused_work);
  b.fused = std::max(b.fused_path, b.fused_work);
  return b;
}

}  // namespace go
