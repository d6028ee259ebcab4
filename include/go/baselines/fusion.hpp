#pragma once
// `--fusion xla`: greedy producer-consumer fusion in the style of XLA's instruction fusion, applied
// to any placement.
// Rule: in topological order, an op v joins the fusion group of its producer u when
//   - v is a fusible kind (op_kind_fusible, go/graph/op_kind.hpp: elementwise math, activations,
//     dropout, normalizations, softmax, reductions, views: what XLA fuses into loop / input fusions), and
//   - u is v's only predecessor that has predecessors itself (any other inputs of v are graph
//     sources: inputs, constants, variables), u is not a source and u is on v's device.
// The group of u is u's own group when it has one, else a new group rooted at u (so a matmul or a
// convolution becomes the root of its epilogue: bias-add, activation, dropout, ...).
// Why the result is always valid: every member but the root has exactly one non-source
// predecessor, inside its group, so a path can re-enter a group only through its root, which no
// path from inside the group reaches (the root precedes every member) -> each group is convex; a
// cycle between groups would need each group's root to reach the next one's, a cycle in the DAG;
// sources are never fused and have no incoming edges, so they sit on no cycle.
#include <cstdint>
#include <vector>

#include "go/core/error.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/op_kind.hpp"
#include "go/sim/plan.hpp"

namespace go {

inline bool xla_fusible(OpKind k) { return op_kind_fusible(k); }

// Fills plan.fusion by the rule above (replacing any fusion it had). Returns the number of groups.
inline std::int32_t apply_xla_fusion(const OpGraph& g, Plan& plan) {
  check_plan_sizes(plan, g.num_ops());
  const auto n = static_cast<std::size_t>(g.num_ops());
  plan.fusion.assign(n, -1);
  std::int32_t groups = 0;
  for (OpId v : g.topo_order()) {
    if (g.in_degree(v) == 0 || !xla_fusible(g.op(v).kind)) continue;
    OpId u = -1;
    bool ok = true;
    for (OpId p : g.pred(v)) {
      if (g.in_degree(p) == 0) continue;
      if (u >= 0 && p != u) {
        ok = false;
        break;
      }
      u = p;
    }
    if (!ok || u < 0 || plan.device_of(u) != plan.device_of(v)) continue;
    std::int32_t& fu = plan.fusion[static_cast<std::size_t>(u)];
    if (fu < 0) {
      fu = u;
      ++groups;
    }
    plan.fusion[static_cast<std::size_t>(v)] = fu;
  }
  if (groups == 0) plan.fusion.clear();
  return groups;
}

}  // namespace go
