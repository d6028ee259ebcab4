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
#include <memory>
#include <vector>

#include "go/core/error.hpp"
#include "go/graph/fusion_groups.hpp"
#include "go/graph/fusion_rules.hpp"
#include "go/graph/graph.hpp"
#include "go/sim/plan.hpp"

namespace go {

// Fusion chosen per data edge: edge e = (the i-th data input of op v) is "fused" when
// flags[base[v] + i] is set. FusionGroups merges the producer's group into v's, in topological
// order, where both ops share a device and fusion_pair_possible allows it, and keeps a merge only
// when the union is legal and acyclic; an unset flag only declines a merge, so a group may still
// hold both ends through other edges. All flags set is the XLA-like heuristic; annealing searches
// the flags (go/baselines/search.hpp).
struct FusionEdges {
  std::vector<std::int64_t> base;  // per op: index of its first data input's flag; base[n] = total
  // With `reused` (annealing: an apply() per proposal): g's FusionIndex made once and the groups
  // kept between calls, where each apply() would otherwise index the graph again and allocate its
  // groups' lists anew. The same groups either way.
  std::shared_ptr<const FusionIndex> index;
  std::shared_ptr<FusionGroupsPool> pool;

  explicit FusionEdges(const OpGraph& g, bool reused = false) : base(static_cast<std::size_t>(g.num_ops()) + 1, 0) {
    for (OpId v = 0; v < g.num_ops(); ++v)
      base[static_cast<std::size_t>(v) + 1] = base[static_cast<std::size_t>(v)] + static_cast<std::int64_t>(g.inputs(v).size());
    if (reused) {
      index = std::make_shared<const FusionIndex>(g);
      pool = std::make_shared<FusionGroupsPool>();
    }
  }
  std::int64_t size() const { return base.back(); }

  // The flags of a plan's fusion: set where an edge's ends share a fusion group.
  std::vector<std::uint8_t> flags_of(const OpGraph& g, const Plan& plan) const {
    std::vector<std::uint8_t> f(static_cast<std::size_t>(size()), 0);
    if (plan.fusion.empty()) return f;
    for (OpId v = 0; v < g.num_ops(); ++v) {
      const std::int32_t fv = plan.fusion[static_cast<std::size_t>(v)];
      if (fv < 0) continue;
      std::int64_t e = base[static_cast<std::size_t>(v)];
      for (OpId u : g.input_producers(v)) f[static_cast<std::size_t>(e++)] = plan.fusion[static_cast<std::size_t>(u)] == fv;
    }
    return f;
  }

  // Fills plan.fusion from the flags (nullptr: every edge) and plan.device; returns the number of
  // groups of two or more ops (none: plan.fusion is emptied).
  std::int32_t apply(const OpGraph& g, Plan& plan, const std::vector<std::uint8_t>* flags,
                     std::int64_t search_budget = 4096) const {
    check_plan_sizes(plan, g.num_ops());
    GO_CHECK(!flags || static_cast<std::int64_t>(flags->size()) == size(), "fusion edges: ", flags ? flags->size() : 0,
             " flags for a graph with ", size(), " data edges");
    const auto lease = FusionGroupsPool::take(pool.get(), g, search_budget, index);
    FusionGroups& groups = *lease;
    for (OpId v : g.topo_order()) {
      if (!fusion_joins_producer(g.op(v).kind, g.op(v).role)) continue;
      std::int64_t e = base[static_cast<std::size_t>(v)];
      for (OpId u : g.input_producers(v)) {
        const bool on = !flags || (*flags)[static_cast<std::size_t>(e)];
        ++e;
        if (!on || plan.device_of(u) != plan.device_of(v) || !fusion_pair_possible(g, v, u)) continue;
        groups.merge(u, v);
      }
    }
    const auto n = groups.num_groups();
    if (n == 0) plan.fusion.clear();
    else plan.fusion = groups.fusion();
    return static_cast<std::int32_t>(n);
  }
};

// Fills plan.fusion by the rule above (replacing any fusion it had; no group: empty). Returns the
// number of groups of two or more ops.
inline std::int32_t apply_xla_fusion(const OpGraph& g, Plan& plan, std::int64_t search_budget = 4096) {
  return FusionEdges(g).apply(g, plan, nullptr, search_budget);
}

}  // namespace go
