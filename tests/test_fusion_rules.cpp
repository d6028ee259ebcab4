// Fusion legality (go/graph/fusion_rules.hpp) and everything that obeys it: hand-built groups for
// each rule, FusionGroups' merges against the whole-group check, the simulator's and check_plan's
// verdict, the XLA-like heuristic, the policy's fusion mask and decode repair, and annealing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "go/baselines/fusion.hpp"
#include "go/baselines/human.hpp"
#include "go/baselines/search.hpp"
#include "go/core/rng.hpp"
#include "go/graph/fusion_groups.hpp"
#include "go/graph/fusion_rules.hpp"
#include "go/graph/load.hpp"
#include "go/graph/training.hpp"
#include "go/policy/decode.hpp"
#include "go/policy/features.hpp"
#include "go/policy/to_plan.hpp"
#include "go/sim/sim.hpp"

namespace test_fusion_rules {
using go::FusionGroups;
using go::FusionProblem;
using go::FusionRule;
using go::OpGraph;
using go::OpId;
using go::OpKind;
using go::OpRole;

namespace {

// The ONNX models: in data/ once the tests define GO_DATA_DIR, ../shared before.
#ifdef GO_DATA_DIR
const std::string kShared = GO_DATA_DIR;
#else
const std::string kShared = GO_SHARED_DIR;
#endif

// Hand-built graphs: every op writes one 4 kB tensor; inputs are ops (output 0).
struct Hand {
  go::GraphBuilder b{[] {
    go::GraphInfo i;
    i.name = "hand";
    i.source = "hand";
    return i;
  }()};
  OpId op(const std::string& name, OpKind kind, std::vector<OpId> ins = {}, OpRole role = OpRole::forward) {
    go::OpSpec s;
    s.name = name;
    s.kind = kind;
    s.role = role;
    s.flops = 1e6;
    go::TensorSpec t;
    t.shape = {1000};
    s.outputs.push_back(t);
    for (OpId u : ins) s.inputs.push_back(go::TensorRef{u, 0});
    return b.add_op(std::move(s));
  }
  OpGraph build() { return b.build(); }
};

// Op i of a random DAG, of the given kind and a random role, writing one tensor: a computed op
// reads 1-3 outputs of the `window` ops before it (ids 0 .. i - 1 are the ops added before it).
go::OpSpec random_op(go::Rng& rng, int i, OpKind kind, int window) {
  go::OpSpec s;
  s.name = "op" + std::to_string(i);
  s.kind = kind;
  s.role = rng.uniform() < 0.3f ? OpRole::backward : OpRole::forward;
  go::TensorSpec t;
  t.shape = {8};
  s.outputs.push_back(t);
  if (i > 0 && s.kind != OpKind::input && s.kind != OpKind::constant) {
    const int k = 1 + static_cast<int>(rng.uniform_int(3));
    for (int j = 0; j < k; ++j) {
      const int lo = std::max(0, i - window);
      s.inputs.push_back(go::TensorRef{lo + static_cast<std::int64_t>(rng.uniform_int(static_cast<std::uint64_t>(i - lo))), 0});
    }
  }
  return s;
}

// A random DAG of n ops of every kind (random_op, op 0 an input), a fraction `control` of the ops
// with inputs also given a control input, added in a random order, so that the ids are far from
// topological (resolved at build).
OpGraph shuffled_random_graph(go::Rng& rng, int n, float control) {
  std::vector<go::OpSpec> specs(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {  // i: the op's place in a topological order; its id in the specs
    go::OpSpec& s = specs[static_cast<std::size_t>(i)];
    s = random_op(rng, i, i == 0 ? OpKind::input : static_cast<OpKind>(rng.uniform_int(go::kNumOpKinds)), 8);
    s.id = i;
    if (control > 0 && !s.inputs.empty() && rng.uniform() < control)
      s.control_inputs.push_back(static_cast<std::int64_t>(rng.uniform_int(static_cast<std::uint64_t>(i))));
  }
  for (int i = n - 1; i > 0; --i)
    std::swap(specs[static_cast<std::size_t>(i)], specs[rng.uniform_int(static_cast<std::uint64_t>(i + 1))]);
  go::GraphBuilder b;
  for (auto& s : specs) b.add_op(std::move(s));
  return b.build();
}

// A random op v, one of its predecessors u and a direction to merge them in (forward: merge(u, v));
// u = -1 where v has no predecessor.
struct RandomEdge {
  OpId u, v;
  bool forward;
};
RandomEdge random_edge(go::Rng& rng, const OpGraph& g) {
  const OpId v = static_cast<OpId>(rng.uniform_int(static_cast<std::uint64_t>(g.num_ops())));
  if (g.in_degree(v) == 0) return {-1, v, false};
  const OpId u = g.pred(v)[rng.uniform_int(static_cast<std::uint64_t>(g.in_degree(v)))];
  return {u, v, rng.uniform() < 0.5f};
}

// The whole-group verdict on `members` (any order): rules 1-4, then 5.
FusionProblem check(const OpGraph& g, std::vector<OpId> members) {
  std::sort(members.begin(), members.end(), [&](OpId a, OpId b) { return g.topo_position(a) < g.topo_position(b); });
  auto in = [&](OpId u) { return std::find(members.begin(), members.end(), u) != members.end(); };
  const auto traits = go::fusion_traits(g);
  const auto view = go::fusion_view(g, traits);
  if (FusionProblem p = go::check_fusion_group(view, members, in)) return p;
  if (members.size() < 2) return {};
  std::vector<std::uint32_t> stamp(static_cast<std::size_t>(g.num_tensors()), 0);
  return go::fusion_operand_budget(go::fusion_operands(view, members, in, stamp.data(), 1u), members[0]);
}

// Builds `members` into one group by FusionGroups merges (each member, in topological order, with
// its predecessors in the group) and returns the first refusal's rule (ok when all merged).
FusionRule merge_rule(const OpGraph& g, std::vector<OpId> members) {
  std::sort(members.begin(), members.end(), [&](OpId a, OpId b) { return g.topo_position(a) < g.topo_position(b); });
  FusionGroups fg(g, 1 << 20);
  for (OpId v : members)
    for (OpId u : g.pred(v))
      if (std::find(members.begin(), members.end(), u) != members.end()) {
        const auto m = fg.merge(u, v);
        if (m == FusionGroups::Merge::refused_rule) return fg.last_problem().rule;
        REQUIRE(m != FusionGroups::Merge::refused_cycle);
      }
  REQUIRE(fg.size(members[0]) == static_cast<std::int32_t>(members.size()));
  return FusionRule::ok;
}

// Both verdicts agree; returns the whole-group one.
FusionProblem verdict(const OpGraph& g, const std::vector<OpId>& members) {
  const FusionProblem p = check(g, members);
  CHECK(merge_rule(g, members) == p.rule);
  return p;
}

// The MobileNet-v2 case that fused "Conv/grad" with the elementwise op reading it, plus a matmul
// with a bias epilogue: dy x act conv/grad act/grad grad_sum mm bias (ids 0-7).
struct ConvGrad {
  OpGraph g;
  OpId dy, x, act, cg, use, acc, mm, bias;
};
ConvGrad conv_grad_graph() {
  Hand h;
  ConvGrad c;
  c.dy = h.op("dy", OpKind::input);
  c.x = h.op("x", OpKind::input);
  c.act = h.op("act", OpKind::relu, {c.x});
  c.cg = h.op("conv/grad", OpKind::conv, {c.dy, c.act}, OpRole::backward);
  c.use = h.op("act/grad", OpKind::relu, {c.cg, c.act}, OpRole::backward);
  c.acc = h.op("grad_sum", OpKind::accumulate, {c.cg, c.dy}, OpRole::backward);
  c.mm = h.op("mm", OpKind::matmul, {c.use});
  c.bias = h.op("bias", OpKind::add, {c.mm});
  c.g = h.build();
  return c;
}

go::Plan fused(const OpGraph& g, const std::vector<std::vector<OpId>>& groups) {
  go::Plan p = go::Plan::single_device(g.num_ops());
  p.fusion.assign(static_cast<std::size_t>(g.num_ops()), -1);
  for (const auto& grp : groups)
    for (OpId v : grp) p.fusion[static_cast<std::size_t>(v)] = grp[0];
  return p;
}

}  // namespace

TEST_CASE("fusion rules: library kernels take a forward epilogue and nothing else", "[fusion]") {
  Hand h;
  const OpId x = h.op("x", OpKind::input);
  const OpId b = h.op("b", OpKind::constant);
  const OpId conv = h.op("conv", OpKind::conv, {x});
  const OpId bias = h.op("bias", OpKind::add, {conv, b});
  const OpId act = h.op("act", OpKind::relu, {bias});
  const OpId sig = h.op("sig", OpKind::sigmoid, {act});
  const OpId swish = h.op("swish", OpKind::mul, {act, sig});   // reads two members: still an epilogue
  const OpId bn = h.op("bn", OpKind::batch_norm, {conv});
  const OpId pre = h.op("pre", OpKind::relu, {x});
  const OpId conv2 = h.op("conv2", OpKind::conv, {pre});
  const OpId detached = h.op("detached", OpKind::relu, {b});
  const OpId mm1 = h.op("mm1", OpKind::matmul, {x, b});
  const OpId mm2 = h.op("mm2", OpKind::matmul, {mm1, b});
  const OpId rnn = h.op("rnn", OpKind::rnn, {x});
  const OpId rnn_act = h.op("rnn_act", OpKind::tanh, {rnn});
  const OpGraph g = h.build();

  // conv + bias add + activation: a cuDNN epilogue
  CHECK_FALSE(verdict(g, {conv, bias, act}));
  CHECK_FALSE(verdict(g, {conv, bias, act, sig, swish}));
  // matmul into matmul
  auto p = verdict(g, {mm1, mm2});
  CHECK(p.rule == FusionRule::two_library_kernels);
  CHECK(p.op == mm1);
  CHECK(p.op2 == mm2);
  // a normalization is not an epilogue (it needs statistics of the whole output)
  p = verdict(g, {conv, bn});
  CHECK(p.rule == FusionRule::not_epilogue_kind);
  CHECK((p.op == bn && p.op2 == conv));
  // no prologue: a library kernel starts its group
  p = verdict(g, {pre, conv2});
  CHECK(p.rule == FusionRule::library_not_root);
  CHECK((p.op == conv2 && p.op2 == pre));
  // an epilogue consumes the kernel's result
  p = check(g, {conv, detached});
  CHECK(p.rule == FusionRule::epilogue_detached);
  CHECK((p.op == detached && p.op2 == conv));
  // sources and alone ops are never members
  p = check(g, {x, conv});
  CHECK((p.rule == FusionRule::never_fused && p.op == x));
  p = verdict(g, {rnn, rnn_act});
  CHECK((p.rule == FusionRule::never_fused && p.op == rnn));
  // one op is no group
  CHECK_FALSE(check(g, {mm1}));
}

TEST_CASE("fusion rules: a convolution gradient runs alone", "[fusion]") {
  const ConvGrad c = conv_grad_graph();
  const OpGraph& g = c.g;
  auto p = verdict(g, {c.cg, c.use});
  CHECK((p.rule == FusionRule::gradient_library && p.op == c.cg));
  p = verdict(g, {c.cg, c.acc});
  CHECK((p.rule == FusionRule::gradient_library && p.op == c.cg));
  CHECK(go::fusion_problem_text(g, p) ==
        "is not a kernel a compiler builds: conv op 'conv/grad' (id 3) is a library kernel of the backward pass, "
        "which runs alone (no epilogue)");
  // the activation's gradient reads the conv gradient and a forward activation: a loop op, it may
  // fuse with other loop ops, just not into the library kernel
  CHECK_FALSE(go::fusion_pair_possible(g, c.use, c.cg));
  CHECK(go::fusion_pair_possible(g, c.use, c.act));
}

TEST_CASE("fusion rules: loop fusion takes any number of computed inputs, a reduction ends it", "[fusion]") {
  Hand h;
  const OpId x = h.op("x", OpKind::input);
  const OpId a = h.op("a", OpKind::relu, {x});
  const OpId c = h.op("c", OpKind::conv, {a});
  const OpId res = h.op("res", OpKind::add, {c, a});  // residual add: two computed inputs
  const OpId out = h.op("out", OpKind::relu, {res});
  const OpId e = h.op("e", OpKind::elementwise, {out});
  const OpId s = h.op("s", OpKind::reduce, {e});
  const OpId d = h.op("d", OpKind::div, {e, s});
  const OpId s2 = h.op("s2", OpKind::reduce, {e});
  const OpId bg = h.op("s/grad", OpKind::reduce, {d}, OpRole::backward);  // a broadcast: a loop op
  const OpId bge = h.op("bg_use", OpKind::mul, {bg, d}, OpRole::backward);
  const OpGraph g = h.build();

  CHECK_FALSE(verdict(g, {res, out}));
  CHECK_FALSE(verdict(g, {res, out, e}));
  // the residual add is no epilogue of the convolution: it reads `a` from outside
  auto p = verdict(g, {c, res});
  CHECK((p.rule == FusionRule::epilogue_reads_outside && p.op == res && p.op2 == a));
  // a reduction may end a group ...
  CHECK_FALSE(verdict(g, {out, e, s}));
  // ... but nothing of its group may read it
  p = verdict(g, {e, s, d});
  CHECK((p.rule == FusionRule::reduction_consumed && p.op == s && p.op2 == d));
  // one reduction per group (sibling reductions are multi-output fusion, not modelled)
  p = verdict(g, {e, s, s2});
  CHECK((p.rule == FusionRule::two_reductions && p.op == s && p.op2 == s2));
  // the backward of a reduction broadcasts: it fuses like any loop op
  CHECK_FALSE(verdict(g, {bg, bge}));
  CHECK_FALSE(verdict(g, {d, bg, bge}));
  // legal by the rules but not convex (a -> c -> res leaves and re-enters): check_plan says so
  CHECK_FALSE(check(g, {a, res}));
  CHECK(go::check_plan(g, fused(g, {{a, res}}), 1) ==
        "fusion group 1 is not convex: a path leaves it and re-enters it through op 'c' (id 2)");
}

TEST_CASE("fusion rules: a group reads and writes at most 96 tensors outside it", "[fusion]") {
  // s_i = s_(i-1) + relu(x_i), i = 1..99 (s_0 = relu(x_0)), then out = relu(s_99). The group of
  // r_0 ... r_k and s_1 ... s_k reads x_0 ... x_k and writes s_k (read by s_(k+1)): k + 2 tensors.
  Hand h;
  std::vector<OpId> r, sum;
  for (int i = 0; i < 100; ++i) {
    r.push_back(h.op("r" + std::to_string(i), OpKind::relu, {h.op("x" + std::to_string(i), OpKind::input)}));
    sum.push_back(i == 0 ? r[0] : h.op("s" + std::to_string(i), OpKind::add, {sum.back(), r.back()}));
  }
  h.op("out", OpKind::relu, {sum.back()});
  const OpGraph g = h.build();
  auto group = [&](int k) {
    std::vector<OpId> m;
    for (int i = 0; i <= k; ++i) m.push_back(r[static_cast<std::size_t>(i)]);
    for (int i = 1; i <= k; ++i) m.push_back(sum[static_cast<std::size_t>(i)]);
    return m;
  };
  const auto traits = go::fusion_traits(g);
  std::vector<std::uint32_t> stamp(static_cast<std::size_t>(g.num_tensors()), 0);
  std::uint32_t tag = 0;
  auto count = [&](const std::vector<OpId>& m) {
    return go::fusion_operands(go::fusion_view(g, traits), m, [&](OpId u) { return std::count(m.begin(), m.end(), u) > 0; },
                               stamp.data(), ++tag);
  };
  CHECK(count(group(94)) == 96);
  CHECK(count(group(95)) == 97);
  CHECK_FALSE(go::fusion_operand_budget(count(group(94)), r[0]));
  CHECK(go::fusion_operand_budget(count(group(95)), r[0]).rule == FusionRule::too_many_operands);
  // FusionGroups stops there (merging in topological order, exact counts only near the budget)
  FusionRule refused = FusionRule::ok;
  FusionGroups fg(g);
  for (int i = 1; i < 100 && refused == FusionRule::ok; ++i)
    for (OpId u : {sum[static_cast<std::size_t>(i) - 1], r[static_cast<std::size_t>(i)]})
      if (fg.merge(u, sum[static_cast<std::size_t>(i)]) == FusionGroups::Merge::refused_rule) {
        refused = fg.last_problem().rule;
        break;
      }
  CHECK(refused == FusionRule::too_many_operands);
  CHECK(fg.size(r[0]) == 95 + 94);  // r_0 ... r_94, s_1 ... s_94
  // the simulator and check_plan say the same
  const go::Plan p = fused(g, {group(95)});
  const std::string why = "fusion group " + std::to_string(r[0]) +
                          " is not a kernel a compiler builds: it reads and writes more than 96 tensors outside it (a "
                          "fused kernel's operands and outputs; its first op is relu op 'r0' (id 1))";
  CHECK(go::check_plan(g, p, 1) == why);
  const go::Simulator sim(g, go::cluster_preset("v100x1"));
  const go::SimResult res = sim.simulate(p);
  CHECK(res.status == go::SimStatus::fusion_illegal);
  CHECK(res.fusion_rule == FusionRule::too_many_operands);
  CHECK(go::sim_reason(res, g, sim.cluster()) == why);
  CHECK(sim.simulate(fused(g, {group(94)})).valid);
  // the XLA-like heuristic fuses up to the budget, then starts a new group
  go::Plan x = go::Plan::single_device(g.num_ops());
  REQUIRE(go::apply_xla_fusion(g, x) >= 2);
  CHECK(go::check_plan(g, x, 1).empty());
  const std::int32_t first = x.fusion[static_cast<std::size_t>(r[0])];
  CHECK(first == r[0]);
  CHECK(x.fusion[static_cast<std::size_t>(sum[94])] == first);
  CHECK(x.fusion[static_cast<std::size_t>(r[94])] == first);
  CHECK(x.fusion[static_cast<std::size_t>(sum[95])] != first);
}

TEST_CASE("fusion rules: the simulator rejects an illegal group with the reason check_plan gives", "[fusion][sim]") {
  const ConvGrad c = conv_grad_graph();
  const OpGraph& g = c.g;
  const OpId cg = c.cg, use = c.use, mm = c.mm, bias = c.bias;
  go::Simulator sim(g, go::cluster_preset("v100x1"));
  go::SimWorkspace ws = sim.make_workspace();
  const go::Plan bad = fused(g, {{cg, use}, {mm, bias}});
  const go::SimResult& r = sim.simulate(bad, ws);
  CHECK_FALSE(r.valid);
  CHECK(r.status == go::SimStatus::fusion_illegal);
  CHECK(r.fusion_rule == FusionRule::gradient_library);
  CHECK(std::isinf(r.step_time));
  const std::string why =
      "fusion group 3 is not a kernel a compiler builds: conv op 'conv/grad' (id 3) is a library kernel of the "
      "backward pass, which runs alone (no epilogue)";
  CHECK(go::sim_reason(r, g, sim.cluster()) == why);
  CHECK(go::check_plan(g, bad, 1) == why);
  CHECK(go::sim_status_name(r.status) == "fusion_illegal");
  // the legal group alone runs, as one kernel: 5 launches for 6 computing ops
  const go::Plan good = fused(g, {{mm, bias}});
  const go::SimResult& ok = sim.simulate(good, ws);
  REQUIRE(ok.valid);
  CHECK(ok.kernel_launches == 5);
  CHECK(go::check_plan(g, good, 1).empty());
  // the rules can be switched off to study the fusion cost model on any convex group
  go::SimOptions off;
  off.check_fusion_rules = false;
  CHECK(go::Simulator(g, go::cluster_preset("v100x1"), off).simulate(bad).valid);
  CHECK(go::check_plan(g, bad, 1, true, false).empty());
}

TEST_CASE("fusion rules: FusionGroups merges agree with the whole-group check on random graphs", "[fusion]") {
  // Random DAGs of every kind and role; random merges along edges. After every merge each group is
  // legal (whole-group check) and the plan acyclic (check_plan); every refusal is right: the union
  // breaks a rule, or applying it makes check_plan (rules off) report a cycle.
  int merged = 0, by_rule = 0, by_cycle = 0;
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    go::Rng rng(seed);
    go::GraphBuilder b;
    const int n = 60;
    for (int i = 0; i < n; ++i) b.add_op(random_op(rng, i, static_cast<OpKind>(rng.uniform_int(go::kNumOpKinds)), 6));
    const OpGraph g = b.build();
    FusionGroups fg(g, 1 << 20);
    for (int t = 0; t < 200; ++t) {
      const OpId v = static_cast<OpId>(rng.uniform_int(static_cast<std::uint64_t>(n)));
      if (g.in_degree(v) == 0) continue;
      const OpId u = g.pred(v)[rng.uniform_int(static_cast<std::uint64_t>(g.in_degree(v)))];
      const OpId gu = fg.group(u), gv = fg.group(v);
      std::vector<OpId> uni;
      for (OpId w = 0; w < n; ++w)
        if (fg.group(w) == gu || fg.group(w) == gv) uni.push_back(w);
      const auto m = fg.merge(u, v);
      if (m == FusionGroups::Merge::same_group) continue;
      if (m == FusionGroups::Merge::merged) {
        ++merged;
        continue;
      }
      if (m == FusionGroups::Merge::refused_rule) {
        ++by_rule;
        CHECK(check(g, uni));  // (its first problem may differ: the merge looks at the new side first)
        CHECK(fg.last_problem());
        continue;
      }
      ++by_cycle;
      CHECK_FALSE(check(g, uni));  // a legal union, refused for the cycle it closes
      go::Plan q = go::Plan::single_device(g.num_ops());
      q.fusion = fg.fusion();
      for (OpId w : uni) q.fusion[static_cast<std::size_t>(w)] = uni[0];
      const std::string why = go::check_plan(g, q, 1, true, false);
      CHECK((why.find("not convex") != std::string::npos || why.find("depend on each other") != std::string::npos));
    }
    go::Plan p = go::Plan::single_device(g.num_ops());
    p.fusion = fg.fusion();
    CHECK(go::check_plan(g, p, 1) == "");
    CHECK(go::Simulator(g, go::cluster_preset("v100x1")).simulate(p).valid);
  }
  CHECK(merged > 200);
  CHECK(by_rule > 200);
  CHECK(by_cycle > 5);
}

TEST_CASE("fusion rules: the cycle search's budget counts every edge out of the groups it reaches", "[fusion]") {
  // FusionGroups walks each group's outside successors only, and charges the budget for all of its
  // members' edges when it reaches the group. Reference: the search as documented, every member's
  // every successor in turn, one unit of budget each, over groups read back with group(). Random
  // DAGs of elementwise ops (so few merges break a rule), merges of random edges in any order,
  // budgets from 1 edge up, so that many searches run out: the same answer every time.
  int searched_out = 0, cycles = 0, merged = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    go::Rng rng(seed + 1000);
    Hand h;
    const int n = 50;
    const OpKind kinds[] = {OpKind::relu, OpKind::add, OpKind::mul, OpKind::tanh};
    std::vector<OpId> ops;
    for (int i = 0; i < n; ++i) {
      std::vector<OpId> ins;
      if (i > 0) {
        const int k = 1 + static_cast<int>(rng.uniform_int(3));
        for (int j = 0; j < k; ++j) {
          const int lo = std::max(0, i - 8);
          ins.push_back(ops[static_cast<std::size_t>(lo + static_cast<int>(rng.uniform_int(static_cast<std::uint64_t>(i - lo))))]);
        }
      }
      ops.push_back(h.op("v" + std::to_string(i), i == 0 ? OpKind::input : kinds[rng.uniform_int(4)], ins));
    }
    const OpGraph g = h.build();
    const std::int64_t budget = 1 + static_cast<std::int64_t>(rng.uniform_int(40));
    FusionGroups fg(g, budget);
    // the documented search from group X to group Y on the groups as they are now
    auto reference = [&](OpId X, OpId Y, bool& out_of_budget) {
      std::vector<std::vector<OpId>> members(static_cast<std::size_t>(n));
      std::vector<std::int32_t> minpos(static_cast<std::size_t>(n), n), maxpos(static_cast<std::size_t>(n), -1);
      std::int32_t grouped_end = -1;
      for (OpId w = 0; w < n; ++w) {
        const auto r = static_cast<std::size_t>(fg.group(w));
        members[r].push_back(w);
        minpos[r] = std::min(minpos[r], g.topo_position(w));
        maxpos[r] = std::max(maxpos[r], g.topo_position(w));
      }
      for (OpId w = 0; w < n; ++w)
        if (fg.size(w) >= 2) grouped_end = std::max(grouped_end, g.topo_position(w));
      const std::int32_t limit = std::max(maxpos[static_cast<std::size_t>(Y)], grouped_end);
      if (minpos[static_cast<std::size_t>(X)] > limit) return false;
      if (members[static_cast<std::size_t>(Y)].size() <= 8) {
        bool third = false;
        for (OpId m : members[static_cast<std::size_t>(Y)])
          for (OpId u : g.pred(m)) third = third || (fg.group(u) != X && fg.group(u) != Y);
        if (!third) return false;
      }
      std::vector<char> seen(static_cast<std::size_t>(n), 0);
      std::vector<OpId> queue{X};
      std::int64_t left = budget;
      for (std::size_t i = 0; i < queue.size(); ++i) {
        const OpId U = queue[i];
        for (OpId m : members[static_cast<std::size_t>(U)])
          for (OpId s : g.succ(m)) {
            if (--left < 0) {
              out_of_budget = true;
              return true;
            }
            const OpId S = fg.group(s);
            if (S == U || S == X) continue;
            if (S == Y) {
              if (U == X) continue;
              return true;
            }
            if (g.topo_position(s) > limit || seen[static_cast<std::size_t>(S)]) continue;
            seen[static_cast<std::size_t>(S)] = 1;
            queue.push_back(S);
          }
      }
      return false;
    };
    for (int t = 0; t < 150; ++t) {
      const OpId v = static_cast<OpId>(1 + rng.uniform_int(static_cast<std::uint64_t>(n - 1)));
      const OpId u = g.pred(v)[rng.uniform_int(static_cast<std::uint64_t>(g.in_degree(v)))];
      const OpId A = fg.group(u), B = fg.group(v);
      bool out = false;
      const bool cycle = A != B && (reference(A, B, out) || reference(B, A, out));
      const auto m = fg.merge(u, v);
      if (A == B) {
        CHECK(m == FusionGroups::Merge::same_group);
        continue;
      }
      if (m == FusionGroups::Merge::refused_rule) continue;  // refused before any search
      CHECK((m == FusionGroups::Merge::refused_cycle) == cycle);
      searched_out += cycle && out ? 1 : 0;
      cycles += cycle ? 1 : 0;
      merged += m == FusionGroups::Merge::merged ? 1 : 0;
    }
  }
  CHECK(searched_out > 20);
  CHECK(cycles > searched_out + 20);
  CHECK(merged > 500);
}

TEST_CASE("fusion rules: merging on the graph renumbered in topological order gives the same groups", "[fusion]") {
  // A FusionIndex made with `relabel` describes the graph renumbered in topological order (its
  // copy `topo`), and a FusionGroups on that copy merges there, as decode does. Reference: a
  // FusionGroups on the graph as given. Random DAGs of every kind and role whose ops are added in
  // a random order (so ids are far from topological), random merges along edges in any order,
  // budgets small enough for searches to run out: every merge's answer and reason, and every op's
  // group, size and leader, mapped back, must be the same.
  int merged = 0, by_rule = 0, by_cycle = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    go::Rng rng(seed + 2000);
    const int n = 70;
    const OpGraph g = shuffled_random_graph(rng, n, 0.1f);
    auto index = std::make_shared<const go::FusionIndex>(g, true, true);
    REQUIRE(index->topo);  // the ids are not topological: the copy is made
    CHECK(go::ids_topological(*index->topo));
    const OpGraph& copy = *index->topo;
    const std::int64_t budget = seed % 4 == 0 ? (1 << 20) : 1 + static_cast<std::int64_t>(rng.uniform_int(40));
    FusionGroups plain(g, budget), relabelled(copy, budget, index);
    FusionGroups refuses(g, budget, index);  // the index describes the copy: g gets an index of its own
    auto pos = [&](OpId v) { return g.topo_position(v); };
    auto op = [&](OpId i) { return i < 0 ? i : g.topo_order()[static_cast<std::size_t>(i)]; };
    for (int t = 0; t < 250; ++t) {
      const auto [u, v, forward] = random_edge(rng, g);
      if (u < 0) continue;
      const auto m = forward ? plain.merge(u, v) : plain.merge(v, u);
      const auto r = forward ? relabelled.merge(pos(u), pos(v)) : relabelled.merge(pos(v), pos(u));
      REQUIRE(r == m);
      REQUIRE((forward ? refuses.merge(u, v) : refuses.merge(v, u)) == m);
      if (m == FusionGroups::Merge::refused_rule) {
        ++by_rule;
        CHECK(relabelled.last_problem().rule == plain.last_problem().rule);
        CHECK(op(relabelled.last_problem().op) == plain.last_problem().op);
        CHECK(op(relabelled.last_problem().op2) == plain.last_problem().op2);
      }
      by_cycle += m == FusionGroups::Merge::refused_cycle ? 1 : 0;
      merged += m == FusionGroups::Merge::merged ? 1 : 0;
      for (OpId w = 0; w < n; ++w) {
        REQUIRE(op(relabelled.group(pos(w))) == plain.group(w));
        REQUIRE(relabelled.size(pos(w)) == plain.size(w));
        REQUIRE(op(relabelled.leader(pos(w))) == plain.leader(w));
      }
    }
    const auto fr = relabelled.fusion();
    std::vector<std::int32_t> mapped(static_cast<std::size_t>(n), -1);
    for (OpId i = 0; i < n; ++i) mapped[static_cast<std::size_t>(op(i))] = op(fr[static_cast<std::size_t>(i)]);
    CHECK(mapped == plain.fusion());
    CHECK(refuses.fusion() == plain.fusion());
    CHECK(relabelled.num_groups() == plain.num_groups());
  }
  CHECK(merged > 300);
  CHECK(by_rule > 300);
  CHECK(by_cycle > 20);
}

TEST_CASE("fusion rules: FusionGroups reset and reused merge as new ones, the pool keeps one per index and budget",
          "[fusion]") {
  // One FusionGroups on the index's graph, reset between rounds (the state decode's pool hands
  // out), against a new one each round: every merge's answer, reason and operand bound, and every
  // op's group, size and leader, must be the same. Random DAGs with ids far from topological,
  // random merges in both directions, budgets small enough for searches to run out.
  int merged = 0, refused = 0;
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    go::Rng rng(seed + 3000);
    const int n = 80;
    const OpGraph g = shuffled_random_graph(rng, n, 0.f);
    auto index = std::make_shared<const go::FusionIndex>(g, true, true);
    const OpGraph& copy = *index->topo;
    const std::int64_t budget = seed % 3 == 0 ? (1 << 20) : 1 + static_cast<std::int64_t>(rng.uniform_int(40));
    FusionGroups reused(copy, budget, index);
    for (int round = 0; round < 6; ++round) {
      INFO("seed " << seed << ", round " << round);
      if (round > 0) reused.reset(copy);
      FusionGroups fresh(copy, budget, index);
      for (OpId w = 0; w < n; ++w) {
        REQUIRE(reused.group(w) == w);
        REQUIRE(reused.size(w) == 1);
      }
      for (int t = 0; t < 200; ++t) {
        const auto [u, v, forward] = random_edge(rng, copy);
        if (u < 0) continue;
        const auto m = forward ? fresh.merge(u, v) : fresh.merge(v, u);
        REQUIRE((forward ? reused.merge(u, v) : reused.merge(v, u)) == m);
        if (m == FusionGroups::Merge::merged) {
          ++merged;
          REQUIRE(reused.last_union_bound() == fresh.last_union_bound());
          REQUIRE(reused.last_union_exact() == fresh.last_union_exact());
        } else if (m == FusionGroups::Merge::refused_rule) {
          ++refused;
          REQUIRE(reused.last_problem().rule == fresh.last_problem().rule);
          REQUIRE(reused.last_problem().op == fresh.last_problem().op);
        }
      }
      for (OpId w = 0; w < n; ++w) {
        REQUIRE(reused.group(w) == fresh.group(w));
        REQUIRE(reused.size(w) == fresh.size(w));
        REQUIRE(reused.leader(w) == fresh.leader(w));
      }
      CHECK(reused.fusion() == fresh.fusion());
    }
    // groups that work from an index of their own (here g, which the index does not describe) cannot be reset
    FusionGroups own(g, budget, index);
    CHECK_THROWS_WITH(own.reset(g), Catch::Contains("not made on this graph's fusion index"));

    go::FusionGroupsPool pool;
    const FusionGroups* first = nullptr;
    {
      const auto a = go::FusionGroupsPool::take(&pool, copy, budget, index);
      first = &*a;
      const auto b2 = go::FusionGroupsPool::take(&pool, copy, budget, index);  // two at once: two objects
      CHECK(&*b2 != first);
      a->merge(copy.pred(n - 1).empty() ? 0 : copy.pred(n - 1)[0], n - 1);
    }
    CHECK(pool.kept() == 2);
    {
      const auto a = go::FusionGroupsPool::take(&pool, copy, budget, index);
      CHECK(pool.kept() == 1);
      for (OpId w = 0; w < n; ++w) REQUIRE(a->size(w) == 1);  // reset on the way out
      const auto other = go::FusionGroupsPool::take(&pool, copy, budget + 1, index);  // another budget: a new one
      CHECK(pool.kept() == 1);
      const auto lone = go::FusionGroupsPool::take(&pool, g, budget, index);  // not on the index: never kept
      CHECK(pool.kept() == 1);
    }
    CHECK(pool.kept() == 3);
    const auto none = go::FusionGroupsPool::take(nullptr, copy, budget, index);  // no pool: a new one
    CHECK(pool.kept() == 3);
  }
  CHECK(merged > 400);
  CHECK(refused > 200);
}

// The renumbered copy as GraphBuilder builds it from specs (the code before
// OpGraph::topological_skeleton): the reference that the skeleton must equal array for array.
OpGraph skeleton_by_builder(const OpGraph& g) {
  go::GraphBuilder b;
  for (OpId v : g.topo_order()) {
    go::OpSpec s;
    s.kind = g.op(v).kind;
    s.role = g.op(v).role;
    for (const go::TensorInfo& t : g.outputs(v)) {
      go::TensorSpec ts;
      ts.shape_known = false;
      ts.dtype = t.dtype;
      ts.bytes = t.bytes;
      s.outputs.push_back(std::move(ts));
    }
    for (go::TensorId t : g.inputs(v))
      s.inputs.push_back(go::TensorRef{g.topo_position(g.tensor(t).producer), g.tensor(t).output_index});
    const auto preds = g.pred(v);
    const auto tensors = g.pred_tensors(v);
    for (std::size_t k = 0; k < preds.size(); ++k)
      if (tensors[k] < 0) s.control_inputs.push_back(g.topo_position(preds[k]));
    b.add_op(std::move(s));
  }
  return b.build();
}

void require_same_graph(const OpGraph& a, const OpGraph& b) {
  REQUIRE(a.num_ops() == b.num_ops());
  REQUIRE(a.num_tensors() == b.num_tensors());
  REQUIRE(a.num_edges() == b.num_edges());
  REQUIRE(a.num_params() == b.num_params());
  auto same = [](auto x, auto y) { return std::equal(x.begin(), x.end(), y.begin(), y.end()); };
  for (OpId v = 0; v < a.num_ops(); ++v) {
    INFO("op " << v);
    const go::Op &x = a.op(v), &y = b.op(v);
    REQUIRE(x.id == y.id);
    REQUIRE(x.kind == y.kind);
    REQUIRE(x.role == y.role);
    REQUIRE(x.colocation == y.colocation);
    REQUIRE(x.first_output == y.first_output);
    REQUIRE(x.num_outputs == y.num_outputs);
    REQUIRE(x.flops == y.flops);
    REQUIRE(x.param_bytes == y.param_bytes);
    REQUIRE(x.temp_bytes == y.temp_bytes);
    REQUIRE(x.input_bytes == y.input_bytes);
    REQUIRE(x.output_bytes == y.output_bytes);
    REQUIRE(x.time == y.time);
    REQUIRE(x.backward_time == y.backward_time);
    REQUIRE(x.source_id == y.source_id);
    REQUIRE(a.name(v) == b.name(v));
    REQUIRE(same(a.inputs(v), b.inputs(v)));
    REQUIRE(same(a.input_producers(v), b.input_producers(v)));
    REQUIRE(same(a.succ(v), b.succ(v)));
    REQUIRE(same(a.succ_tensors(v), b.succ_tensors(v)));
    REQUIRE(same(a.pred(v), b.pred(v)));
    REQUIRE(same(a.pred_tensors(v), b.pred_tensors(v)));
    REQUIRE(a.op_params(v).empty() == b.op_params(v).empty());
    REQUIRE(a.topo_position(v) == b.topo_position(v));
  }
  for (go::TensorId t = 0; t < a.num_tensors(); ++t) {
    const go::TensorInfo &x = a.tensor(t), &y = b.tensor(t);
    REQUIRE(x.producer == y.producer);
    REQUIRE(x.output_index == y.output_index);
    REQUIRE(x.dtype == y.dtype);
    REQUIRE(x.rank == y.rank);
    REQUIRE(x.bytes == y.bytes);
  }
  REQUIRE(same(a.topo_order(), b.topo_order()));
  REQUIRE(a.info().name == b.info().name);
  REQUIRE(a.info().source == b.info().source);
  REQUIRE(a.info().training == b.info().training);
}

TEST_CASE("graph: the topological skeleton is the graph GraphBuilder builds from the same specs", "[fusion][graph]") {
  // Random DAGs added in a random order: ops of 0-3 outputs, inputs read twice, control edges
  // from ops that also send data (GraphBuilder keeps the data edge only) and from others.
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    go::Rng rng(seed + 7000);
    const int n = seed == 1 ? 1 : 1 + static_cast<int>(rng.uniform_int(120));
    std::vector<go::OpSpec> specs(static_cast<std::size_t>(n));
    std::vector<int> outputs(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      go::OpSpec& s = specs[static_cast<std::size_t>(i)];
      s.id = i;
      s.name = "op" + std::to_string(i);
      s.kind = static_cast<OpKind>(rng.uniform_int(go::kNumOpKinds));
      s.role = rng.uniform() < 0.3f ? OpRole::backward : OpRole::forward;
      s.flops = 1e3 * i;
      outputs[static_cast<std::size_t>(i)] = static_cast<int>(rng.uniform_int(4));
      for (int k = 0; k < outputs[static_cast<std::size_t>(i)]; ++k) {
        go::TensorSpec t;
        t.shape = {1 + static_cast<std::int64_t>(rng.uniform_int(64))};
        t.dtype = rng.uniform() < 0.5f ? go::ElemType::f32 : go::ElemType::f16;
        s.outputs.push_back(t);
      }
      for (int j = 0; i > 0 && j < static_cast<int>(rng.uniform_int(5)); ++j) {
        const int u = static_cast<int>(rng.uniform_int(static_cast<std::uint64_t>(i)));
        if (outputs[static_cast<std::size_t>(u)] > 0 && rng.uniform() < 0.8f) {
          const auto k = static_cast<std::int32_t>(rng.uniform_int(static_cast<std::uint64_t>(outputs[static_cast<std::size_t>(u)])));
          s.inputs.push_back(go::TensorRef{u, k});
          if (rng.uniform() < 0.2f) s.inputs.push_back(go::TensorRef{u, k});  // read twice
        } else {
          s.control_inputs.push_back(u);
        }
      }
      if (!s.inputs.empty() && rng.uniform() < 0.2f) s.control_inputs.push_back(s.inputs[0].op);  // also a data producer
    }
    for (int i = n - 1; i > 0; --i)
      std::swap(specs[static_cast<std::size_t>(i)], specs[rng.uniform_int(static_cast<std::uint64_t>(i + 1))]);
    go::GraphBuilder b;
    for (auto& s : specs) b.add_op(std::move(s));
    const OpGraph g = b.build();
    INFO("seed " << seed << ", " << n << " ops");
    const OpGraph copy = g.topological_skeleton();
    require_same_graph(copy, skeleton_by_builder(g));
    CHECK(go::ids_topological(copy));
    CHECK(copy.topological_skeleton().num_edges() == g.num_edges());
  }
  // real graphs: a zoo training graph and an ONNX export, as decode meets them
  for (const std::string& spec : {std::string("zoo:transformer_xl2"), kShared + "/models/inception_v3.onnx"}) {
    INFO(spec);
    const OpGraph g = go::make_training_graph(go::load_graph(spec));
    REQUIRE_FALSE(go::ids_topological(g));
    require_same_graph(g.topological_skeleton(), skeleton_by_builder(g));
  }
  require_same_graph(OpGraph().topological_skeleton(), skeleton_by_builder(OpGraph()));  // empty
}

TEST_CASE("fusion rules: an op whose producers are all in the group joins it without a search", "[fusion]") {
  // a1 -> a2 -> a3 -> v, each a also read by an op of its own (o1, o2, o3). With a search budget of
  // 2 edges, the search from {a1, a2, a3} for a path to v through another group would run out at
  // o1 and o2 and refuse the merge; v's only producer is in the group, so no such path exists and
  // no search is made.
  Hand h;
  const OpId x = h.op("x", OpKind::input);
  const OpId a1 = h.op("a1", OpKind::relu, {x});
  h.op("o1", OpKind::sigmoid, {a1});
  const OpId a2 = h.op("a2", OpKind::relu, {a1});
  h.op("o2", OpKind::sigmoid, {a2});
  const OpId a3 = h.op("a3", OpKind::relu, {a2});
  h.op("o3", OpKind::sigmoid, {a3});
  const OpId v = h.op("v", OpKind::tanh, {a3});
  const OpGraph g = h.build();
  FusionGroups fg(g, 2);
  CHECK(fg.merge(a1, a2) == FusionGroups::Merge::merged);
  CHECK(fg.merge(a2, a3) == FusionGroups::Merge::merged);
  CHECK(fg.merge(a3, v) == FusionGroups::Merge::merged);
  CHECK(fg.size(v) == 4);
  // a real path through another group is still found: p -> q -> r and p -> r; r's producer q is
  // outside {p}, so merging r into p's group is searched, and refused
  Hand k;
  const OpId y = k.op("y", OpKind::input);
  const OpId p = k.op("p", OpKind::relu, {y});
  const OpId q = k.op("q", OpKind::softmax, {p});
  const OpId r = k.op("r", OpKind::add, {p, q});
  const OpGraph g2 = k.build();
  FusionGroups f2(g2, 1 << 20);
  CHECK(f2.merge(p, r) == FusionGroups::Merge::refused_cycle);
}

TEST_CASE("fusion rules: the operand budget where a group grows one op at a time", "[fusion]") {
  // a0 = relu(x0), a_i = add(a_{i-1}, x_i), each x_i an input of its own; with `shared`, every a_i
  // also reads one more input w (100 readers: the count is then redone from the groups' members,
  // not updated from the joining op's tensors). {a0..ak} reads x0..xk (and w) and writes a_k for
  // a_{k+1}: k + 2 operands (k + 3), so merging a_k is refused first at k = 95 (94), as the
  // whole-group check says.
  for (const bool shared : {false, true}) {
    Hand h;
    const OpId w = h.op("w", OpKind::input);
    std::vector<OpId> a;
    for (int i = 0; i < 100; ++i) {
      const OpId x = h.op("x" + std::to_string(i), OpKind::input);
      std::vector<OpId> ins = i == 0 ? std::vector<OpId>{x} : std::vector<OpId>{a.back(), x};
      if (shared) ins.push_back(w);
      a.push_back(h.op("a" + std::to_string(i), i == 0 ? OpKind::relu : OpKind::add, ins));
    }
    const OpGraph g = h.build();
    FusionGroups fg(g, 1 << 20);
    int refused_at = -1;
    for (int k = 1; k < 100 && refused_at < 0; ++k) {
      const auto m = fg.merge(a[static_cast<std::size_t>(k - 1)], a[static_cast<std::size_t>(k)]);
      if (m == FusionGroups::Merge::refused_rule) {
        refused_at = k;
        CHECK(fg.last_problem().rule == FusionRule::too_many_operands);
      } else {
        REQUIRE(m == FusionGroups::Merge::merged);
      }
    }
    CHECK(refused_at == (shared ? 94 : 95));
    const std::vector<OpId> fits(a.begin(), a.begin() + refused_at), over(a.begin(), a.begin() + refused_at + 1);
    CHECK(!check(g, fits));
    CHECK(check(g, over).rule == FusionRule::too_many_operands);
  }
}

TEST_CASE("xla fusion: fuses residual adds and bias epilogues, leaves convolutions before a norm alone",
          "[fusion][baselines]") {
  Hand h;
  const OpId x = h.op("x", OpKind::input);
  const OpId c1 = h.op("c1", OpKind::conv, {x});
  const OpId bn1 = h.op("bn1", OpKind::batch_norm, {c1});
  const OpId r1 = h.op("r1", OpKind::relu, {bn1});
  const OpId c2 = h.op("c2", OpKind::conv, {r1});
  const OpId bn2 = h.op("bn2", OpKind::batch_norm, {c2});
  const OpId add = h.op("add", OpKind::add, {bn2, r1});
  const OpId r2 = h.op("r2", OpKind::relu, {add});
  const OpId pool = h.op("pool", OpKind::global_pool, {r2});
  const OpId w = h.op("w", OpKind::constant);
  const OpId fc = h.op("fc", OpKind::matmul, {pool, w});
  const OpId bias = h.op("bias", OpKind::add, {fc, w});
  h.op("loss", OpKind::softmax, {bias});
  const OpGraph g = h.build();
  go::Plan p = go::Plan::single_device(g.num_ops());
  CHECK(go::apply_xla_fusion(g, p) == 3);
  // {bn1, r1}; {bn2, add, r2, pool}: the residual add joins bn2's group (joining r1's too would
  // close a cycle through c2), the global pool ends it; {fc, bias}: a bias epilogue; the softmax
  // cannot follow the matmul's epilogue, so it stays alone; convolutions before a norm stay alone
  const std::vector<std::int32_t> want = {-1, -1, bn1, bn1, -1, bn2, bn2, bn2, bn2, -1, fc, fc, -1};
  CHECK(p.fusion == want);
  CHECK(go::check_plan(g, p, 1).empty());
  const go::Simulator sim(g, go::cluster_preset("v100x1"));
  CHECK(sim.simulate(p).step_time < sim.simulate(go::Plan::single_device(g.num_ops())).step_time);
  // on two devices the add's producers are split: it fuses only with what shares its device
  go::Plan two = go::Plan::single_device(g.num_ops());
  two.device[static_cast<std::size_t>(bn2)] = 1;
  go::apply_xla_fusion(g, two);
  CHECK(two.fusion[static_cast<std::size_t>(bn2)] == -1);
  CHECK(two.fusion[static_cast<std::size_t>(add)] == add);
  CHECK(two.fusion[static_cast<std::size_t>(pool)] == add);
}

TEST_CASE("xla fusion on real training graphs: legal, adds with two computed inputs join a producer, no gradient "
          "kernel fused", "[fusion][baselines]") {
  // Before the rules, an op joined its producer only when it had one computed input, so no add of
  // two computed tensors (a residual add, a sum of branches) ever did. In the ONNX exports the
  // batch norms are folded into the convolutions, so their residual adds read a convolution
  // (no epilogue: the other input is computed) and a tensor from before it (a cycle): they stay
  // alone there, or start the group of the relu after them.
  const std::vector<std::string> graphs = {"zoo:transformer_xl2:segments=2", "zoo:wavenet2:segments=1", "zoo:amoebanet:depth=2",
                                           kShared + "/models/resnet18.onnx", kShared + "/models/mobilenet_v2.onnx"};
  for (const auto& name : graphs) {
    INFO(name);
    const OpGraph g = go::make_training_graph(go::load_graph(name));
    go::Plan p = go::Plan::single_device(g.num_ops());
    REQUIRE(go::apply_xla_fusion(g, p) > 0);
    CHECK(go::check_plan(g, p, 1).empty());
    int adds = 0, joined = 0;
    for (const go::Op& o : g.ops()) {
      const auto f = p.fusion[static_cast<std::size_t>(o.id)];
      if (go::fusion_class(o) == go::FusionClass::library && o.role != OpRole::forward) CHECK(f < 0);
      if (o.kind != OpKind::add) continue;
      int computed = 0;
      bool with_producer = false;
      for (OpId u : g.pred(o.id)) {
        computed += go::fusion_class(g.op(u)) != go::FusionClass::source ? 1 : 0;
        with_producer = with_producer || (f >= 0 && p.fusion[static_cast<std::size_t>(u)] == f);
      }
      if (computed < 2) continue;
      ++adds;
      joined += with_producer ? 1 : 0;
    }
    INFO(joined << " of " << adds << " adds of two computed tensors joined a producer's group");
    CHECK(adds > 0);
    if (name.find("zoo:") == 0) CHECK(joined > adds / 4);
    const go::Simulator sim(g, go::cluster_preset("v100x4"));
    const go::SimResult r = sim.simulate(p);
    CHECK((r.valid || r.status == go::SimStatus::out_of_memory));
    CHECK(r.kernel_launches < sim.simulate(go::Plan::single_device(g.num_ops())).kernel_launches);
  }
}

TEST_CASE("fusion edges: all flags are the XLA-like heuristic, a plan's flags rebuild its groups, random flags stay legal"
          " and reused groups give the same",
          "[fusion][baselines]") {
  const OpGraph g = go::make_training_graph(go::load_graph("zoo:transformer_xl2:segments=2"));
  const go::FusionEdges edges(g);
  std::int64_t data_inputs = 0;
  for (const go::Op& o : g.ops()) data_inputs += static_cast<std::int64_t>(g.inputs(o.id).size());
  CHECK(edges.size() == data_inputs);
  go::Plan xla = go::human_plan(g, go::cluster_preset("v100x4"));
  REQUIRE(go::apply_xla_fusion(g, xla) > 0);
  // every flag set, or the flags of the XLA plan's own groups: the same groups
  std::vector<std::uint8_t> all(static_cast<std::size_t>(edges.size()), 1);
  go::Plan p = xla;
  p.fusion.clear();
  edges.apply(g, p, &all);
  CHECK(p.fusion == xla.fusion);
  const std::vector<std::uint8_t> own = edges.flags_of(g, xla);
  CHECK(std::count(own.begin(), own.end(), 1) > 0);
  CHECK(std::count(own.begin(), own.end(), 1) < edges.size());
  p.fusion.clear();
  edges.apply(g, p, &own);
  CHECK(p.fusion == xla.fusion);
  // no flag: no group
  std::vector<std::uint8_t> none(static_cast<std::size_t>(edges.size()), 0);
  CHECK(edges.apply(g, p, &none) == 0);
  CHECK(p.fusion.empty());
  // random flags on random devices: legal plans (rules, one device per group, acyclic)
  go::Rng rng(7);
  const go::FusionEdges reused(g, true);
  for (int trial = 0; trial < 5; ++trial) {
    go::Plan q = xla;
    for (auto& d : q.device) d = rng.uniform() < 0.1f ? static_cast<std::int32_t>(rng.uniform_int(4)) : d;
    go::colocate(g, q);
    std::vector<std::uint8_t> f(static_cast<std::size_t>(edges.size()));
    for (auto& x : f) x = rng.uniform() < 0.5f ? 1 : 0;
    go::Plan r = q;
    edges.apply(g, q, &f);
    CHECK(go::check_plan(g, q, 4) == "");
    // annealing's FusionEdges (the graph indexed once, its groups reset and reused): the same groups
    CHECK(reused.apply(g, r, &f) == edges.apply(g, q, &f));
    CHECK(r.fusion == q.fusion);
  }
  CHECK(reused.pool->kept() == 1);
  CHECK_FALSE(edges.pool);
  const std::vector<std::uint8_t> short_flags(static_cast<std::size_t>(edges.size()) - 1, 1);
  CHECK_THROWS_WITH(edges.apply(g, p, &short_flags), Catch::Contains("flags for a graph with"));
}

TEST_CASE("policy fusion mask: rows that can never join any of their producers are masked", "[fusion][policy]") {
  Hand h;
  const OpId x = h.op("x", OpKind::input);
  const OpId c = h.op("c", OpKind::conv, {x});
  const OpId bias = h.op("bias", OpKind::add, {c});
  const OpId bn = h.op("bn", OpKind::batch_norm, {c});
  const OpId relu = h.op("relu", OpKind::relu, {bn});
  const OpId red = h.op("red", OpKind::reduce, {relu});
  const OpId after = h.op("after", OpKind::mul, {red, relu});
  const OpId res = h.op("res", OpKind::add, {relu, bias});
  const OpId cg = h.op("c/grad", OpKind::conv, {res, x}, OpRole::backward);
  const OpId cg_use = h.op("cg_use", OpKind::add, {cg, res}, OpRole::backward);
  const OpId xin = h.op("x_use", OpKind::relu, {x});
  const OpId mm = h.op("mm", OpKind::matmul, {relu});
  const OpId red2 = h.op("red2", OpKind::reduce, {relu});
  const OpId none = h.op("none", OpKind::mul, {red, red2, x});  // a reduction, a reduction, an input
  const OpGraph g = h.build();
  const auto pg = go::policy::PolicyGraph::from_graph(g);
  auto masked = [&](OpId v) { return pg.fusion_mask.f32()[pg.row_of[static_cast<std::size_t>(v)] * 2 + 1] != 0.f; };
  CHECK(masked(x));        // no producer
  CHECK(masked(c));        // a library kernel never joins its producer
  CHECK(masked(mm));
  CHECK_FALSE(masked(bias));  // an epilogue of a forward convolution
  CHECK(masked(bn));       // a norm is no epilogue
  CHECK_FALSE(masked(relu));
  CHECK_FALSE(masked(red));   // a reduction may end a group
  CHECK_FALSE(masked(after));  // its first input is a reduction, its second a loop op it may join
  CHECK_FALSE(masked(res));    // a residual add: both producers are candidates
  CHECK_FALSE(masked(cg_use));  // its first producer is a convolution gradient, its second a loop op
  CHECK(masked(none));          // no producer it could ever be in a group with
  CHECK(masked(xin));      // its producer is a graph input
  for (std::int64_t r = 0; r < pg.num_nodes; ++r) CHECK(pg.fusion_mask.f32()[r * 2] == 0.f);
}

TEST_CASE("decode: fuse into producers joins every producer on the op's device, in input order",
          "[fusion][policy]") {
  // A gated activation: gate = relu(m1) * elementwise(m2), two library kernels feeding it.
  Hand h;
  const OpId x = h.op("x", OpKind::input);
  const OpId m1 = h.op("m1", OpKind::matmul, {x});
  const OpId m2 = h.op("m2", OpKind::matmul, {x});
  const OpId a = h.op("a", OpKind::relu, {m1});
  const OpId b = h.op("b", OpKind::elementwise, {m2});
  const OpId gate = h.op("gate", OpKind::mul, {a, b});
  const OpId out = h.op("out", OpKind::add, {gate, gate});  // one producer read twice
  const OpGraph g = h.build();
  const auto pg = go::policy::PolicyGraph::from_graph(g);
  const auto n = static_cast<std::int64_t>(g.num_ops());
  auto actions = [&](std::vector<OpId> fuse, std::vector<OpId> on_device1) {
    go::policy::Actions act{go::Tensor::zeros(go::Shape{n}, go::DType::i32), go::Tensor::zeros(go::Shape{n}, go::DType::i32),
                            go::Tensor::zeros(go::Shape{n}, go::DType::i32)};
    for (OpId v : fuse) act.fuse.data<std::int32_t>()[pg.row_of[static_cast<std::size_t>(v)]] = 1;
    for (OpId v : on_device1) act.device.data<std::int32_t>()[pg.row_of[static_cast<std::size_t>(v)]] = 1;
    return act;
  };
  auto group = [](const go::policy::Decision& d, OpId v) { return d.fusion_group[static_cast<std::size_t>(v)]; };

  // gate joins both branches: one kernel {a, b, gate}, out joins it through its one producer
  go::policy::Decision d = go::policy::decode(g, pg, actions({gate, out}, {}), 2);
  CHECK(group(d, a) >= 0);
  CHECK(group(d, b) == group(d, a));
  CHECK(group(d, gate) == group(d, a));
  CHECK(group(d, out) == group(d, a));
  CHECK(group(d, m1) == -1);
  CHECK(group(d, m2) == -1);
  CHECK((d.fuse_requested == 2 && d.fused == 2 && d.num_groups == 1));
  // the actions of that plan decode to the same groups
  const go::Plan plan = go::policy::to_plan(d);
  const go::policy::Actions back = go::policy::actions_from_plan(g, pg, plan, 8);
  CHECK(go::policy::decode(g, pg, back, 2).fusion_group == d.fusion_group);

  // epilogues first: a and b join their matmuls; gate then joins neither kernel, since an epilogue
  // may read nothing from outside its group and gate reads the other branch (a rule refusal)
  d = go::policy::decode(g, pg, actions({a, b, gate}, {}), 2);
  CHECK(group(d, a) == group(d, m1));
  CHECK(group(d, b) == group(d, m2));
  CHECK(group(d, m2) != group(d, m1));
  CHECK(group(d, gate) == -1);
  CHECK((d.fused == 2 && d.refused_rule == 1 && d.num_groups == 2));

  // b on another device: gate joins a only; with a there too, gate joins nothing and counts as
  // refused for its first producer's reason
  d = go::policy::decode(g, pg, actions({gate}, {b}), 2);
  CHECK(group(d, gate) == group(d, a));
  CHECK(group(d, gate) >= 0);
  CHECK(group(d, b) == -1);
  d = go::policy::decode(g, pg, actions({gate}, {a, b}), 2);
  CHECK(group(d, gate) == -1);
  CHECK((d.fused == 0 && d.refused_device == 1));
  CHECK(go::check_plan(g, go::policy::to_plan(d), 2) == "");
}

TEST_CASE("decode: random actions on real graphs give valid or out-of-memory plans, never illegal fusion",
          "[fusion][policy]") {
  std::int64_t requested = 0, refused_rule = 0, fused_total = 0;
  const std::vector<std::string> graphs = {"zoo:rnnlm2:seq=4", "zoo:transformer_xl2:segments=2", "zoo:wavenet2:segments=1",
                                           kShared + "/models/mobilenet_v2.onnx", kShared + "/models/resnet18.onnx"};
  // decode's groups read the graph through the PolicyGraph's FusionIndex; without one, or with
  // another graph's (which FusionGroups does not use), each FusionGroups makes its own
  const OpGraph other = go::make_training_graph(go::load_graph("zoo:rnnlm2:seq=3"));
  for (const auto& name : graphs) {
    const OpGraph g = go::make_training_graph(go::load_graph(name));
    const auto pg = go::policy::PolicyGraph::from_graph(g);
    REQUIRE(pg.fusion_index);
    CHECK(pg.fusion_index->fits(g));
    CHECK_FALSE(pg.fusion_index->fits(other));
    // the training graphs' ids are not topological, so decode merges on the renumbered copy
    // (FusionIndex's relabel), and the decodes without it below are the reference; pg's decodes
    // after the first reuse one FusionGroups (its pool's), reset each time
    CHECK(pg.fusion_index->topo);
    auto bare = pg, foreign = pg;
    bare.fusion_index = nullptr;
    foreign.fusion_index = std::make_shared<const go::FusionIndex>(other);
    for (int D : {1, 2, 4}) {
      const go::Simulator sim(g, go::cluster_preset("v100x" + std::to_string(D)));
      go::SimWorkspace ws = sim.make_workspace();
      for (std::uint64_t seed = 0; seed < 3; ++seed) {
        INFO(name << " on " << D << " devices, seed " << seed);
        go::Rng rng(seed);
        const auto n = pg.num_nodes;
        go::policy::Actions a{go::Tensor::zeros(go::Shape{n}, go::DType::i32), go::Tensor::zeros(go::Shape{n}, go::DType::i32),
                              go::Tensor::zeros(go::Shape{n}, go::DType::i32)};
        // seed 0 ignores the mask (every row asks to fuse): the repair alone must keep plans legal
        for (std::int64_t r = 0; r < n; ++r) {
          a.device.data<std::int32_t>()[r] = seed == 2 ? 0 : static_cast<std::int32_t>(rng.uniform_int(static_cast<std::uint64_t>(D)));
          const bool open = pg.fusion_mask.f32()[r * 2 + 1] == 0.f;
          a.fuse.data<std::int32_t>()[r] = seed == 0 ? 1 : (open && rng.uniform() < 0.8f ? 1 : 0);
        }
        const auto d = go::policy::decode(g, pg, a, D);
        for (const auto* q : {&bare, &foreign}) {
          const auto e = go::policy::decode(g, *q, a, D);
          CHECK(e.fusion_group == d.fusion_group);
          CHECK(e.fused == d.fused);
          CHECK(e.refused_rule == d.refused_rule);
          CHECK(e.refused_cycle == d.refused_cycle);
          CHECK(e.refused_device == d.refused_device);
          CHECK(e.num_groups == d.num_groups);
        }
        requested += d.fuse_requested;
        refused_rule += d.refused_rule;
        fused_total += d.fused;
        CHECK(d.fused + d.refused_device + d.refused_rule + d.refused_cycle <= d.fuse_requested);
        const go::Plan p = go::policy::to_plan(d);
        CHECK(go::check_plan(g, p, D) == "");
        const go::SimResult& r = sim.simulate(p, ws);
        CHECK((r.valid || r.status == go::SimStatus::out_of_memory));
      }
    }
    CHECK(pg.fusion_groups->kept() == 1);  // the copies without a usable index made theirs anew
  }
  CHECK(fused_total > 1000);
  CHECK(refused_rule > 1000);  // the repair had work to do
  CHECK(requested > fused_total);
}

TEST_CASE("anneal searches fusion: every proposal legal, fused groups found from unfused starts", "[fusion][baselines]") {
  const OpGraph g = go::make_training_graph(go::load_graph("zoo:amoebanet:depth=2"));
  const go::Cluster c = go::cluster_preset("v100x4");
  const go::Simulator sim(g, c);
  go::Plan start = go::human_plan(g, c);
  REQUIRE(go::apply_xla_fusion(g, start) > 0);
  std::int64_t calls = 0;
  // from a fused start: the result is legal, fits, and is no slower (a proposal with illegal fusion
  // would throw: the search checks every simulation)
  const go::Plan best = go::anneal_plan(g, c, 150, 3, {}, &calls, {start});
  CHECK(calls == 150);
  CHECK(go::check_plan(g, best, c.num_devices()) == "");
  const go::SimResult r = sim.simulate(best);
  CHECK(r.valid);
  CHECK(r.step_time <= sim.simulate(start).step_time);
  // from an unfused start: fusion moves find groups, and the result beats the start
  const go::Plan bare = go::human_plan(g, c);
  const go::Plan searched = go::anneal_plan(g, c, 300, 5, {}, nullptr, {bare});
  CHECK(go::check_plan(g, searched, c.num_devices()) == "");
  std::int64_t fused_ops = 0;
  for (auto f : searched.fusion) fused_ops += f >= 0;
  CHECK(fused_ops >= 10);
  CHECK(sim.simulate(searched).step_time < sim.simulate(bare).step_time);
  // the same seed gives the same plan
  const go::Plan again = go::anneal_plan(g, c, 300, 5, {}, nullptr, {bare});
  CHECK(again.device == searched.device);
  CHECK(again.fusion == searched.fusion);
  CHECK(again.priority == searched.priority);
  // a start that fuses a convolution gradient with a consumer (not an update op: moving that would
  // split its colocation group first)
  go::Plan bad = go::human_plan(g, c);
  bad.fusion.assign(static_cast<std::size_t>(g.num_ops()), -1);
  bool found = false;
  for (const go::Op& o : g.ops()) {
    if (o.kind != OpKind::conv || o.role != OpRole::backward) continue;
    for (OpId s : g.succ(o.id))
      if (g.op(s).colocation < 0 && !found) {
        found = true;
        bad.device[static_cast<std::size_t>(s)] = bad.device[static_cast<std::size_t>(o.id)];
        bad.fusion[static_cast<std::size_t>(o.id)] = bad.fusion[static_cast<std::size_t>(s)] = o.id;
      }
    if (found) break;
  }
  REQUIRE(found);
  CHECK_THROWS_WITH(go::anneal_plan(g, c, 10, 3, {}, nullptr, {bad}),
                    Catch::Contains("search: starting plan 0 has invalid fusion: fusion group") &&
                        Catch::Contains("is a library kernel of the backward pass"));
}

}  // namespace test_fusion_rules
