#pragma once
// Decoding the policy's actions into a valid decision for every op.
//
// Decision holds flat per-OpId vectors: device, priority level, fusion group
// (-1 = unfused; otherwise the OpId of the group's first op in topological order).
//
// Rules, applied in this order:
//   1. device[op] = the sampled device of op's row. With `colocate`, every op of a colocation
//      group moves to the device of the group's first op in topological order.
//   2. priority[op] = the sampled level (higher runs first among ready ops).
//   3. Fusion, ops visited in topological order. An op v whose action is "fuse into producer"
//      joins the group of its producer p (the producer of its first data input; for an op with
//      only control inputs, its first predecessor) when
//        a. p is on v's device (after rule 1), and
//        b. the merge keeps the graph of groups acyclic: every other predecessor w of v is in
//           p's group already, or w's group is not reachable from p's group. Reachability is
//           searched over groups, through ops earlier than v in topological order, visiting at
//           most `search_budget` edges; when the budget runs out the merge is refused.
//      Otherwise v stays in a group of its own. Since every op joins a group only through an
//      edge from a member, each group is connected, sits on one device and is convex (a path
//      that left the group and re-entered it would be a cycle among groups), which is what
//      go/sim/plan.hpp's check_plan() requires. Groups of one op are reported as -1.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "go/core/error.hpp"
#include "go/graph/graph.hpp"
#include "go/policy/features.hpp"
#include "go/policy/policy.hpp"
#include "go/sim/plan.hpp"

namespace go::policy {

struct Decision {
  std::vector<std::int32_t> device;        // per OpId
  std::vector<std::int32_t> priority;      // per OpId, in [0, P)
  std::vector<std::int32_t> fusion_group;  // per OpId, -1 unfused
  std::int32_t num_devices = 0;
  // statistics of rule 3
  std::int64_t fuse_requested = 0;     // ops whose action was "fuse into producer"
  std::int64_t fused = 0;              // ... that joined their producer's group
  std::int64_t refused_device = 0;     // ... refused because the producer is on another device
  std::int64_t refused_cycle = 0;      // ... refused because the merge would create a cycle (or budget)
  std::int64_t num_groups = 0;         // groups of two ops or more
};

struct DecodeOptions {
  bool colocate = true;
  std::int64_t search_budget = 4096;
};

// The op that "fuse into producer" merges v into: the producer of v's first data input; for an op
// with only control inputs, its first predecessor; -1 for an op without predecessors.
inline OpId fusion_producer(const OpGraph& g, OpId v) {
  auto ins = g.inputs(v);
  if (!ins.empty()) return g.tensor(ins[0]).producer;
  auto ps = g.pred(v);
  return ps.empty() ? OpId(-1) : ps[0];
}

// The actions (rows in pg's order) that describe a plan: its devices, its priorities as levels
// (each must be an integer in [0, priority_levels); a plan without priorities gives level 0
// everywhere, which the simulator runs first-ready-first-run like no priorities), and "fuse into
// producer" wherever an op shares a fusion group with its fusion_producer(). decode() of these
// actions gives back the plan's devices and priorities; its fusion groups are the plan's wherever
// every group is a chain of such producer links (true of the groups decode() itself builds).
inline Actions actions_from_plan(const OpGraph& g, const PolicyGraph& pg, const Plan& p, int priority_levels) {
  const std::int32_t n = g.num_ops();
  GO_CHECK(pg.num_nodes == n, g.where(), "actions_from_plan: the policy graph has ", pg.num_nodes,
           " rows but the graph has ", n, " ops");
  check_plan_sizes(p, n, "actions_from_plan: ");
  Actions a{Tensor::zeros(Shape{n}, DType::i32), Tensor::zeros(Shape{n}, DType::i32), Tensor::zeros(Shape{n}, DType::i32)};
  std::int32_t* ad = a.device.data<std::int32_t>();
  std::int32_t* ap = a.priority.data<std::int32_t>();
  std::int32_t* af = a.fuse.data<std::int32_t>();
  for (OpId v = 0; v < n; ++v) {
    const auto i = static_cast<std::size_t>(v);
    const std::int32_t r = pg.row_of[i];
    ad[r] = p.device.empty() ? 0 : p.device[i];
    if (!p.priority.empty()) {
      const float level = p.priority[i];
      GO_CHECK(level >= 0.f && level < static_cast<float>(priority_levels) && level == std::floor(level),
               "actions_from_plan: priority ", level, " of ", g.label(v), " is not a level in [0, ", priority_levels,
               ")");
      ap[r] = static_cast<std::int32_t>(level);
    }
    if (!p.fusion.empty() && p.fusion[i] >= 0) {
      const OpId q = fusion_producer(g, v);
      af[r] = q >= 0 && p.fusion[static_cast<std::size_t>(q)] == p.fusion[i] ? 1 : 0;
    }
  }
  return a;
}

inline Decision decode(const OpGraph& g, const PolicyGraph& pg, const Actions& a, int num_devices,
                       const DecodeOptions& opt = {}) {
  const std::int32_t n = g.num_ops();
  GO_CHECK(pg.num_nodes == n, g.where(), "decode: the policy graph has ", pg.num_nodes, " rows but the graph has ", n,
           " ops");
  GO_CHECK(num_devices >= 1, "decode: num_devices ", num_devices, " must be >= 1");
  auto check = [&](const Tensor& t, const char* what) {
    GO_CHECK(t.defined() && t.dtype() == DType::i32 && t.numel() == n, "decode: ", what, " actions ",
             t.defined() ? t.describe() : std::string("(undefined)"), " must be i32 [", n, "]");
  };
  check(a.device, "device");
  check(a.priority, "priority");
  check(a.fuse, "fusion");
  const std::int32_t* ad = a.device.data<std::int32_t>();
  const std::int32_t* ap = a.priority.data<std::int32_t>();
  const std::int32_t* af = a.fuse.data<std::int32_t>();
  Decision d;
  d.num_devices = num_devices;
  const auto N = static_cast<std::size_t>(n);
  d.device.resize(N);
  d.priority.resize(N);
  d.fusion_group.assign(N, -1);
  for (std::int32_t i = 0; i < n; ++i) {
    const std::int32_t r = pg.row_of[static_cast<std::size_t>(i)];
    GO_CHECK(ad[r] >= 0 && ad[r] < num_devices, "decode: device action ", ad[r], " of ", g.label(i),
             " out of range [0, ", num_devices, ")");
    GO_CHECK(ap[r] >= 0, "decode: negative priority action ", ap[r], " of ", g.label(i));
    d.device[static_cast<std::size_t>(i)] = ad[r];
    d.priority[static_cast<std::size_t>(i)] = ap[r];
  }
  const auto topo = g.topo_order();
  if (opt.colocate) {
    std::unordered_map<std::int32_t, std::int32_t> dev;
    for (OpId v : topo) {
      const std::int32_t c = g.op(v).colocation;
      if (c < 0) continue;
      auto [it, fresh] = dev.emplace(c, d.device[static_cast<std::size_t>(v)]);
      if (!fresh) d.device[static_cast<std::size_t>(v)] = it->second;
    }
  }

  // Fusion: unit[v] = leader of v's group; members[leader] lists the group.
  std::vector<OpId> unit(N);
  for (std::int32_t i = 0; i < n; ++i) unit[static_cast<std::size_t>(i)] = i;
  std::vector<std::vector<OpId>> members(N);
  std::vector<std::int32_t> stamp(N, -1);  // per unit: the search (== v) that visited it
  std::vector<std::int32_t> target(N, -1); // per unit: the search for which it is a target
  std::vector<OpId> queue;
  auto u = [&](OpId x) { return unit[static_cast<std::size_t>(x)]; };
  for (OpId v : topo) {
    if (af[pg.row_of[static_cast<std::size_t>(v)]] != 1) continue;
    ++d.fuse_requested;
    const OpId p = fusion_producer(g, v);
    if (p < 0) continue;  // masked by the policy; nothing to fuse into
    if (d.device[static_cast<std::size_t>(p)] != d.device[static_cast<std::size_t>(v)]) {
      ++d.refused_device;
      continue;
    }
    const OpId G = u(p);
    const std::int32_t pos_v = g.topo_position(v);
    // Units of the other predecessors: each must not be reachable from G.
    bool need_search = false;
    for (OpId w : g.pred(v))
      if (u(w) != G) {
        target[static_cast<std::size_t>(u(w))] = v;
        need_search = true;
      }
    bool ok = true;
    if (need_search) {
      queue.clear();
      queue.push_back(G);
      stamp[static_cast<std::size_t>(G)] = v;
      std::int64_t budget = opt.search_budget;
      for (std::size_t h = 0; h < queue.size() && ok; ++h) {
        const OpId U = queue[h];
        auto visit_members = [&](OpId m) {
          for (OpId s : g.succ(m)) {
            if (--budget < 0) {
              ok = false;
              return;
            }
            if (g.topo_position(s) >= pos_v) continue;  // later ops cannot lead back before v
            const OpId S = u(s);
            if (S == U || stamp[static_cast<std::size_t>(S)] == v) continue;
            if (target[static_cast<std::size_t>(S)] == v) {
              ok = false;
              return;
            }
            stamp[static_cast<std::size_t>(S)] = v;
            queue.push_back(S);
          }
        };
        if (members[static_cast<std::size_t>(U)].empty()) visit_members(U);
        else
          for (OpId m : members[static_cast<std::size_t>(U)]) {
            visit_members(m);
            if (!ok) break;
          }
      }
    }
    if (!ok) {
      ++d.refused_cycle;
      continue;
    }
    auto& mem = members[static_cast<std::size_t>(G)];
    if (mem.empty()) mem.push_back(G);
    mem.push_back(v);
    unit[static_cast<std::size_t>(v)] = G;
    ++d.fused;
  }
  for (std::int32_t i = 0; i < n; ++i) {
    const auto& mem = members[static_cast<std::size_t>(i)];
    if (mem.size() < 2) continue;
    ++d.num_groups;
    for (OpId m : mem) d.fusion_group[static_cast<std::size_t>(m)] = i;
  }
  return d;
}

}  // namespace go::policy
