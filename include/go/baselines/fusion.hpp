#pragma once
// `--fusion xla`: greedy producer-consumer fusion in the style of XLA's instruction fusion, applied
// to any placement. It fuses all that the fusion rules (go/graph/fusion_rules.hpp) allow, greedily:
// ops in topological order; each loop or reduction op v tries to join the group of each of its
// data producers on its device, in operand order (a group of one op is the op), and joins when
// FusionGroups::merge accepts: the union is a legal kernel and the groups stay acyclic. So a
// convolution or a matmul takes its epilogue (bias add, activation), elementwise chains and
// residual adds fuse with any number of computed inputs, a reduction ends its group, and gradient
// library kernels stay alone. The result is valid by construction (each merge keeps every group
// legal, convex and on one device).
// What XLA does and this does not: it visits consumers from the root backwards and may duplicate a
// cheap producer into several consumers; it also runs multi-output (sibling) and horizontal fusion.
#include <cstdint>
#include <vector>

#include "go/core/error.hpp"
#include "go/graph/fusion_rules.hpp"
#include "go/graph/graph.hpp"
#include "go/sim/plan.hpp"

namespace go {

// Fills plan.fusion by the rule above (replacing any fusion it had; no group: empty). Returns the
// number of groups of two or more ops.
inline std::int32_t apply_xla_fusion(const OpGraph& g, Plan& plan, std::int64_t search_budget = 4096) {
  check_plan_sizes(plan, g.num_ops());
  FusionGroups groups(g, search_budget);
  for (OpId v : g.topo_order()) {
    if (!fusion_joins_producer(g.op(v).kind, g.op(v).role)) continue;
    for (TensorId t : g.inputs(v)) {
      const OpId u = g.tensor(t).producer;
      if (plan.device_of(u) != plan.device_of(v) || !fusion_pair_possible(g, v, u)) continue;
      groups.merge(u, v);
    }
  }
  const auto n = groups.num_groups();
  if (n == 0) plan.fusion.clear();
  else plan.fusion = groups.fusion();
  return static_cast<std::int32_t>(n);
}

}  // namespace go
