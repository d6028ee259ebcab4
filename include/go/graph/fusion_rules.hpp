#pragma once
// Fusion legality: which groups of ops a compiler can run as one kernel. The one model behind the
// simulator's verdict (src/sim/event_loop.cpp, sim/plan.hpp check_plan), the XLA-like
// heuristic (baselines/fusion.hpp), the GO policy's fusion mask and decode repair
// (policy/features.hpp, policy/decode.hpp) and annealing (baselines/search.hpp). Without it the
// simulator would run any convex same-device group as one kernel: a convolution's gradient fused
// with the elementwise op that reads it, or a chain of matmuls, kernels no compiler builds.
//
// Every op has a fusion class (fusion_class(), by kind and role):
//   source     input, constant (graph feeds, constants, weight variables): kernels read them, none
//              computes them, so they are never members of a group.
//   alone      its own kernel, never fused: rnn (cuDNN's RNN API has no epilogue), the backward of
//              max/avg pooling (select-and-scatter) and of gather (scatter-add), optimizer updates
//              (TensorFlow's ResourceApply* kernels), and unknown ops (other).
//   library    conv, matmul: cuDNN / cuBLAS(Lt) calls (XLA emits them as custom calls).
//   loop       elementwise math, activations, dropout, batch/layer norm, softmax, views and data
//              movement (reshape, transpose, pad, slice, split, concat), forward pooling and gather
//              (XLA fuses reduce-window and gather into loop fusions), gradient accumulation, and
//              the backward of reductions (a broadcast).
//   reduction  forward reduce and global_pool (a ReduceMean over H, W); the loss is one.
//
// A group of two or more ops (Plan::fusion) is legal when (FusionRule; check_fusion_group() checks
// 1-4, fusion_operand_budget(fusion_operands()) 5):
//   1. no member is a source or an alone op                                          (never_fused)
//   2. it holds at most one library op                                       (two_library_kernels)
//   3. with a library op L (a cuDNN / cuBLASLt epilogue fusion; XLA's cudnn_fused_conv_rewriter and
//      gemm_rewriter build the same kernels):
//      a. L is a forward op: training's backward kernels (a conv/matmul gradient) run alone, as
//         cuDNN and XLA do by default                                           (gradient_library)
//      b. L reads no member of its group: no prologue, L starts the kernel    (library_not_root)
//      c. every other member is an epilogue op: pointwise math (relu, sigmoid, tanh, gelu,
//         elementwise, add, sub, mul, div) or a view (reshape)                   (not_epilogue_kind)
//      d. an epilogue op reads only group members, parameters and constants (source ops): a bias
//         add, an activation, not a residual add of another computed tensor (cuDNN's conv-bias-
//         activation "z" operand is not modelled)                        (epilogue_reads_outside)
//      e. an epilogue op reads at least one group member: it consumes L's result (epilogue_detached)
//   4. without a library op (XLA's loop fusion, instruction_fusion.cc / gpu_fusible.cc; any number of
//      computed inputs):
//      a. at most one reduction: a reduction is the root of XLA's input fusion; fusing sibling
//         reductions is XLA's multi-output fusion, not modelled                    (two_reductions)
//      b. no member reads a reduction of its own group: a reduction ends a fusion (reduction_consumed)
//   5. it reads and writes at most kFusionMaxOperands = 96 tensors outside it: distinct tensors its
//      members read from other ops, plus distinct tensors of its members that other ops read (XLA
//      GPU's kMaxOperandsAndOutputsPerFusion, checked by FusionFitsInBudget; without it a gradient
//      sum of 96 segments' bias gradients became one 482-op kernel)         (too_many_operands)
//      Parameters an op owns (Op::param_bytes) are not counted; outputs nobody reads are dead code.
// Besides these, check_plan() and the simulator require a group to sit on one device and the
// groups to keep the graph acyclic (each group convex); FusionGroups below keeps the groups legal
// and acyclic while it merges them (devices are its caller's). Not modelled: XLA's multi-output fusion pass (sibling fusion), horizontal fusion,
// producer duplication, its profitability heuristics, and fusions of a library kernel with a
// normalization.
// Control edges order ops but carry no data: an epilogue may wait on one from outside (3d), but no
// member may wait on its group's reduction (4b).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "go/graph/graph.hpp"
#include "go/graph/op_kind.hpp"

#if defined(__GNUC__) || defined(__clang__)
#define GO_FUSION_INLINE inline __attribute__((always_inline))
#else
#define GO_FUSION_INLINE inline
#endif

namespace go {

enum class FusionClass : std::uint8_t { source, alone, library, loop, reduction };

constexpr FusionClass fusion_class(OpKind k, OpRole role) {
  const bool fwd = role == OpRole::forward;
  switch (k) {
    case OpKind::input: case OpKind::constant: return FusionClass::source;
    case OpKind::conv: case OpKind::matmul: return FusionClass::library;
    case OpKind::rnn: case OpKind::update: case OpKind::other: return FusionClass::alone;
    case OpKind::max_pool: case OpKind::avg_pool: case OpKind::gather:
      return fwd ? FusionClass::loop : FusionClass::alone;
    case OpKind::reduce: case OpKind::global_pool: return fwd ? FusionClass::reduction : FusionClass::loop;
    default: return FusionClass::loop;
  }
}
inline FusionClass fusion_class(const Op& o) { return fusion_class(o.kind, o.role); }

// Kinds that may follow a forward library kernel in its epilogue (rule 3c).
constexpr bool fusion_epilogue_kind(OpKind k) {
  switch (k) {
    case OpKind::relu: case OpKind::sigmoid: case OpKind::tanh: case OpKind::gelu: case OpKind::elementwise:
    case OpKind::add: case OpKind::sub: case OpKind::mul: case OpKind::div: case OpKind::reshape:
      return true;
    default:
      return false;
  }
}

// What the rules read about one op, in a byte (the simulator keeps one per op, so checking a
// plan's groups touches a small array instead of the ops): its class, whether its kind may be an
// epilogue, whether it is a forward op.
using FusionTraits = std::uint8_t;
constexpr FusionTraits fusion_traits(OpKind k, OpRole role) {
  return static_cast<FusionTraits>(static_cast<unsigned>(fusion_class(k, role)) | (fusion_epilogue_kind(k) ? 8u : 0u) |
                                   (role == OpRole::forward ? 16u : 0u));
}
inline FusionTraits fusion_traits(const Op& o) { return fusion_traits(o.kind, o.role); }
constexpr FusionClass traits_class(FusionTraits t) { return static_cast<FusionClass>(t & 7u); }
constexpr bool traits_epilogue(FusionTraits t) { return (t & 8u) != 0; }
constexpr bool traits_forward(FusionTraits t) { return (t & 16u) != 0; }

// What the rules read about a graph: per op its traits and its predecessors in the graph's order,
// with the tensor of each edge (-1: a control edge). OpGraph gives it with fusion_view(); the
// simulator gives its own copies of the same arrays (int32 offsets), so both find the same problem.
template <class Offset>
struct FusionGraphView {
  const FusionTraits* traits;  // [op]
  const Offset* in_off;        // predecessors of v: [in_off[v], in_off[v + 1])
  const OpId* in_src;
  const TensorId* in_tensor;
  const Offset* out_off;       // successors of v: [out_off[v], out_off[v + 1]) (rule 5)
  const OpId* out_dst;
  const TensorId* out_tensor;
};

enum class FusionRule : std::uint8_t {
  ok,
  never_fused,             // op is a source or an alone op
  two_library_kernels,     // op and op2 are library kernels of one group
  gradient_library,        // op is a library kernel of the backward pass
  library_not_root,        // library kernel op reads op2 of its group
  not_epilogue_kind,       // op, in the group of library kernel op2, is not an epilogue kind
  epilogue_reads_outside,  // epilogue op reads op2, computed outside the group
  epilogue_detached,       // epilogue op reads nothing of its group (library kernel op2)
  two_reductions,          // op and op2 are reductions of one group
  reduction_consumed,      // reduction op is read by op2 of its group
  too_many_operands,       // the group of op (its first op) reads and writes more than kFusionMaxOperands tensors
};

// Rule 5's budget: XLA GPU's kMaxOperandsAndOutputsPerFusion.
inline constexpr std::int64_t kFusionMaxOperands = 96;

struct FusionProblem {
  FusionRule rule = FusionRule::ok;
  OpId op = -1, op2 = -1;
  explicit operator bool() const { return rule != FusionRule::ok; }
};

// What a group breaks, in words, after "fusion group <id> ". The simulator (sim_reason) and
// check_plan() word it the same way.
inline std::string fusion_problem_text(const OpGraph& g, const FusionProblem& p) {
  auto op = [&](OpId v) { return std::string(op_kind_name(g.op(v).kind)) + " " + g.label(v); };
  const std::string pre = "is not a kernel a compiler builds: ";
  switch (p.rule) {
    case FusionRule::ok: return {};
    case FusionRule::never_fused:
      return pre + op(p.op) +
             (fusion_class(g.op(p.op)) == FusionClass::source ? " is a graph input or constant, which kernels read but never compute"
                                                              : " runs as a kernel of its own and is never fused");
    case FusionRule::two_library_kernels:
      return pre + op(p.op) + " and " + op(p.op2) + " are both library kernels (convolution / matrix product); one never fuses into another";
    case FusionRule::gradient_library:
      return pre + op(p.op) + " is a library kernel of the backward pass, which runs alone (no epilogue)";
    case FusionRule::library_not_root:
      return pre + "library kernel " + op(p.op) + " reads " + op(p.op2) +
             " of its own group (a library kernel starts its fusion: no prologue)";
    case FusionRule::not_epilogue_kind:
      return pre + op(p.op) + " cannot be an epilogue of library kernel " + op(p.op2) +
             " (epilogues are pointwise ops and views: bias add, activation)";
    case FusionRule::epilogue_reads_outside:
      return pre + op(p.op) + ", an epilogue of a library kernel, reads " + op(p.op2) +
             " from outside the group (an epilogue reads only the kernel's result, parameters and constants)";
    case FusionRule::epilogue_detached:
      return pre + op(p.op) + " reads nothing of its group (an epilogue consumes library kernel " + op(p.op2) + "'s result)";
    case FusionRule::two_reductions:
      return pre + op(p.op) + " and " + op(p.op2) + " are both reductions (one reduction per fusion; multi-output fusion is not modelled)";
    case FusionRule::reduction_consumed:
      return pre + "reduction " + op(p.op) + " is read by " + op(p.op2) + " of the same group (a reduction ends a fusion)";
    case FusionRule::too_many_operands:
      return pre + "it reads and writes more than " + std::to_string(kFusionMaxOperands) +
             " tensors outside it (a fused kernel's operands and outputs; its first op is " + op(p.op) + ")";
  }
  return {};
}

namespace detail::fusion {

// The per-op parts of the rules, shared by the whole-group check and FusionGroups' merges.
// in_group(OpId) says whether an op is a member of the group (or of the union being considered).

// Rules 1 and 3a for one op of a group of two or more.
inline FusionProblem member_class(FusionTraits t, OpId v) {
  const FusionClass c = traits_class(t);
  if (c == FusionClass::source || c == FusionClass::alone) return {FusionRule::never_fused, v, -1};
  if (c == FusionClass::library && !traits_forward(t)) return {FusionRule::gradient_library, v, -1};
  return {};
}

// Rule 3b: library kernel lib reads no member.
template <class View, class InGroup>
FusionProblem library_root(const View& g, OpId lib, InGroup&& in_group) {
  for (auto e = g.in_off[lib]; e < g.in_off[lib + 1]; ++e)
    if (in_group(g.in_src[e])) return {FusionRule::library_not_root, lib, g.in_src[e]};
  return {};
}

// Rules 3c-e for member v of the group of library kernel lib (v != lib).
template <class View, class InGroup>
FusionProblem epilogue_member(const View& g, OpId v, OpId lib, InGroup&& in_group) {
  if (!traits_epilogue(g.traits[v])) return {FusionRule::not_epilogue_kind, v, lib};
  bool reads_group = false;
  for (auto e = g.in_off[v]; e < g.in_off[v + 1]; ++e) {
    if (g.in_tensor[e] < 0) continue;  // a control edge
    const OpId u = g.in_src[e];
    if (in_group(u)) reads_group = true;
    else if (traits_class(g.traits[u]) != FusionClass::source) return {FusionRule::epilogue_reads_outside, v, u};
  }
  if (!reads_group) return {FusionRule::epilogue_detached, v, lib};
  return {};
}

// Rule 4b: none of `readers` (the other members, in order) reads reduction r (data or control).
template <class View>
FusionProblem reduction_end(const View& g, OpId r, std::span<const OpId> readers) {
  for (OpId v : readers)
    for (auto e = g.in_off[v]; e < g.in_off[v + 1]; ++e)
      if (g.in_src[e] == r) return {FusionRule::reduction_consumed, r, v};
  return {};
}

}  // namespace detail::fusion

// The first of rules 1-4 that a group of two or more ops breaks (members in topological order;
// in_group(OpId) says whether an op is one of them), or FusionRule::ok. O(members' edges), no
// allocation. Rule 5 needs a count over tensors: fusion_operand_budget(fusion_operands(...)).
// (Inlined: the simulator calls it once per group of every fused plan, and a call costs as much as
// checking a small group.)
template <class Offset, class InGroup>
GO_FUSION_INLINE FusionProblem check_fusion_group(const FusionGraphView<Offset>& g, std::span<const OpId> members,
                                                  InGroup&& in_group) {
  namespace df = detail::fusion;
  if (members.size() < 2) return {};
  OpId lib = -1, red = -1;
  for (OpId v : members) {
    const FusionTraits t = g.traits[v];
    if (FusionProblem p = df::member_class(t, v)) return p;
    const FusionClass c = traits_class(t);
    if (c == FusionClass::library) {
      if (lib >= 0) return {FusionRule::two_library_kernels, lib, v};
      lib = v;
    } else if (c == FusionClass::reduction && red < 0) {
      red = v;
    }
  }
  if (lib >= 0) {
    if (FusionProblem p = df::library_root(g, lib, in_group)) return p;
    for (OpId v : members)
      if (v != lib)
        if (FusionProblem p = df::epilogue_member(g, v, lib, in_group)) return p;
    return {};
  }
  if (red < 0) return {};
  for (OpId v : members)
    if (v != red && traits_class(g.traits[v]) == FusionClass::reduction) return {FusionRule::two_reductions, red, v};
  return df::reduction_end(g, red, members);
}

// Rule 5 for a group whose operand count (distinct tensors read from outside + distinct tensors of
// members read outside) is `operands`; first: its first op. The simulator counts them in its cost
// loop (they are the tensors whose bytes a fused kernel moves); fusion_operands() counts them here.
inline FusionProblem fusion_operand_budget(std::int64_t operands, OpId first) {
  if (operands > kFusionMaxOperands) return {FusionRule::too_many_operands, first, -1};
  return {};
}

// Rule 5's count for members (in_group(OpId) says whether an op is one of them). stamp: scratch of
// one entry per tensor whose entries differ from `tag` (a fresh tag per call).
template <class View, class InGroup, class Stamp>
std::int64_t fusion_operands(const View& g, std::span<const OpId> members, InGroup&& in_group, Stamp* stamp, Stamp tag) {
  std::int64_t k = 0;
  for (OpId v : members) {
    for (auto e = g.in_off[v]; e < g.in_off[v + 1]; ++e) {
      const TensorId t = g.in_tensor[e];
      if (t < 0 || in_group(g.in_src[e]) || stamp[t] == tag) continue;
      stamp[t] = tag;
      ++k;
    }
    for (auto e = g.out_off[v]; e < g.out_off[v + 1]; ++e) {
      const TensorId t = g.out_tensor[e];
      if (t < 0 || in_group(g.out_dst[e]) || stamp[t] == tag) continue;
      stamp[t] = tag;
      ++k;
    }
  }
  return k;
}

// The traits of every op of g (what fusion_view() points at).
inline std::vector<FusionTraits> fusion_traits(const OpGraph& g) {
  std::vector<FusionTraits> t(static_cast<std::size_t>(g.num_ops()));
  for (const Op& o : g.ops()) t[static_cast<std::size_t>(o.id)] = fusion_traits(o);
  return t;
}
// A view of g with `traits` (fusion_traits(g), kept alive by the caller).
inline FusionGraphView<std::int64_t> fusion_view(const OpGraph& g, const std::vector<FusionTraits>& traits) {
  return {traits.data(),        g.in_offsets().data(), g.in_ops().data(),     g.in_tensors().data(),
          g.out_offsets().data(), g.out_ops().data(),  g.out_tensors().data()};
}

// Whether an op of this kind and role can ever be in a group with one of its producers after it
// (loop and reduction ops; a library op would read a member: rule 3b). The policy's kind-level mask.
constexpr bool fusion_joins_producer(OpKind k, OpRole role = OpRole::forward) {
  const FusionClass c = fusion_class(k, role);
  return c == FusionClass::loop || c == FusionClass::reduction;
}

// The ops that the policy's "fuse into producers" action merges v with, in this order: the
// producers of v's data inputs, first input first (a producer feeding two inputs comes twice);
// for an op with only control inputs, its first predecessor; none for an op without predecessors.
// Every data producer, not only the first input's: a gated activation (tanh(a) * sigmoid(b)) or a
// residual add is one kernel with both branches, which a single producer link cannot express
// (annealing's per-edge fusion found such groups 4% faster on WaveNet).
template <typename F>
inline void for_each_fusion_producer(const OpGraph& g, OpId v, F&& f) {
  auto producers = g.input_producers(v);
  if (!producers.empty()) {
    for (OpId p : producers) f(p);
    return;
  }
  auto ps = g.pred(v);
  if (!ps.empty()) f(ps[0]);
}

// The ops of for_each_fusion_producer, largest first: by the bytes of the tensor v reads from each
// (a producer feeding two inputs counts once, by its larger one), ties in input order. Its first
// is v's main producer, the one "fuse into the main producer" (policy::FusionJoin::main) joins.
// Why: an op that reads two independent streams (WaveNet's concat of its time chunk with the small
// tail of the previous chunk) joins the stream whose data it carries; XLA reads the tail from the
// other kernel's output instead of merging the two.
inline void fusion_producers_largest_first(const OpGraph& g, OpId v, std::vector<std::pair<std::int64_t, OpId>>& out) {
  out.clear();
  auto ins = g.inputs(v);
  if (ins.empty()) {
    for_each_fusion_producer(g, v, [&](OpId p) { out.emplace_back(0, p); });
    return;
  }
  for (TensorId t : ins) {
    const TensorInfo& tensor = g.tensor(t);
    if (tensor.producer < 0) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& e) { return e.second == tensor.producer; });
    if (it == out.end()) out.emplace_back(tensor.bytes, tensor.producer);
    else it->first = std::max(it->first, tensor.bytes);
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
}

// False when no legal group holds both v and its producer p (p a predecessor of v), whatever else
// the group holds: v cannot join a producer (fusion_joins_producer), p is never fused, p is a
// reduction (v would read it), or p is a library kernel that v cannot follow as an epilogue (p is
// a gradient kernel, or v is not an epilogue kind). True does not promise that a merge is legal:
// what else the groups hold decides (FusionGroups::merge).
inline bool fusion_pair_possible(const OpGraph& g, OpId v, OpId p) {
  const Op& ov = g.op(v);
  const Op& op = g.op(p);
  if (!fusion_joins_producer(ov.kind, ov.role)) return false;
  switch (fusion_class(op)) {
    case FusionClass::loop: return true;
    case FusionClass::library: return op.role == OpRole::forward && fusion_epilogue_kind(ov.kind);
    default: return false;
  }
}

// Whether the policy's "fuse into producers" action can ever merge v (its mask): some producer of
// for_each_fusion_producer passes fusion_pair_possible.
inline bool fusion_action_possible(const OpGraph& g, OpId v) {
  bool any = false;
  for_each_fusion_producer(g, v, [&](OpId p) { any = any || fusion_pair_possible(g, v, p); });
  return any;
}

// What fusion reads of g, with its ops renumbered in topological order (op i is g.topo_order()[i]):
// the same kinds, roles, outputs with their bytes, data inputs in operand order and control
// inputs, nothing else (no names, shapes, parameters or costs). Its own topological order is the
// identity: Kahn's FIFO takes the same ops in the same order, as each op's successors are now
// numbered in the order they became ready.
inline OpGraph topological_fusion_copy(const OpGraph& g) { return g.topological_skeleton(); }

// Whether g's ids already are its topological order.
inline bool ids_topological(const OpGraph& g) {
  const auto topo = g.topo_order();
  for (std::size_t i = 0; i < topo.size(); ++i)
    if (topo[i] != static_cast<OpId>(i)) return false;
  return true;
}

// What FusionGroups reads of a graph besides its edges, the same whatever the groups: each op's
// traits, each tensor's readers over data edges, and each op's operand count alone (rule 5). A
// FusionGroups makes its own (the readers and counts at its first merge that gets to rule 5,
// `counted`); one made once per graph and passed in spares every decode of the graph's plans that
// work (policy::PolicyGraph keeps one).
// `relabel`: where g's ids are not its topological order, the index describes g renumbered in that
// order instead (`topo`, topological_fusion_copy), and serves FusionGroups on that copy only;
// policy::decode merges there. Merging there gives the same groups, mapped back: a merge reads
// topological positions, group sizes and whole sets of edges, never an id or an edge's place in
// a successor list (tests/test_fusion_rules.cpp checks every merge's answer and reason). Its
// cycle searches then find the ops that run near each other next to each other in memory. The
// copy costs one pass over the graph's arrays per graph (OpGraph::topological_skeleton; about 20 MB
// at 80,588 ops), which the graph's first fused decode repays. bench/README.md, "Decoding on the
// graph's topological order", has the timings.
struct FusionIndex {
  FusionIndex() = default;
  explicit FusionIndex(const OpGraph& g, bool count_now = true, bool relabel = false)
      : num_ops(g.num_ops()), num_tensors(g.num_tensors()), num_edges(g.num_edges()) {
    if (relabel && !ids_topological(g)) topo = std::make_shared<const OpGraph>(topological_fusion_copy(g));
    const OpGraph& described = topo ? *topo : g;
    traits = fusion_traits(described);
    if (count_now) count(described);
  }
  // Made for a graph of g's sizes (a FusionGroups ignores an index of another graph's sizes).
  bool fits(const OpGraph& g) const {
    return num_ops == g.num_ops() && num_tensors == g.num_tensors() && num_edges == g.num_edges();
  }
  void count(const OpGraph& g) {
    reader_off.assign(static_cast<std::size_t>(g.num_tensors()) + 1, 0);
    for (OpId v = 0; v < g.num_ops(); ++v)
      for (TensorId t : g.succ_tensors(v))
        if (t >= 0) ++reader_off[static_cast<std::size_t>(t) + 1];
    for (std::size_t t = 1; t < reader_off.size(); ++t) reader_off[t] += reader_off[t - 1];
    readers.resize(static_cast<std::size_t>(reader_off.back()));
    std::vector<std::int32_t> next(reader_off.begin(), reader_off.end() - 1);
    for (OpId v = 0; v < g.num_ops(); ++v) {
      const auto succ = g.succ(v);
      const auto tensors = g.succ_tensors(v);
      for (std::size_t k = 0; k < succ.size(); ++k)
        if (tensors[k] >= 0) readers[static_cast<std::size_t>(next[static_cast<std::size_t>(tensors[k])]++)] = succ[k];
    }
    const auto view = fusion_view(g, traits);
    std::vector<std::uint32_t> stamp(static_cast<std::size_t>(g.num_tensors()), 0);
    operands.resize(static_cast<std::size_t>(g.num_ops()));
    for (OpId v = 0; v < g.num_ops(); ++v)
      operands[static_cast<std::size_t>(v)] = fusion_operands(view, std::span<const OpId>(&v, 1),
                                                              [&](OpId x) { return x == v; }, stamp.data(),
                                                              static_cast<std::uint32_t>(v) + 1);
    counted = true;
  }

  std::int32_t num_ops = 0, num_tensors = 0;
  std::int64_t num_edges = 0;
  std::shared_ptr<const OpGraph> topo;   // (relabel) the graph described, or null: the one given itself
  std::vector<FusionTraits> traits;
  std::vector<std::int32_t> reader_off;  // per tensor: its readers are readers[reader_off[t], reader_off[t + 1])
  std::vector<OpId> readers;
  std::vector<std::int64_t> operands;    // per op
  bool counted = false;                  // reader_off, readers and operands are made
};

// Fusion groups built by merging, legal (the rules above) and acyclic (each group convex, no two
// groups depending on each other) after every merge. Devices are the caller's: merge only ops on
// one device. Merges cost the smaller group's edges for the rules and a search over groups for
// cycles, bounded by `search_budget` edges (a merge whose search runs out is refused); no search
// where every producer of the joining group's ops is in one of the two (then no path can close a
// cycle), and the operand count (rule 5) is updated from the small group's tensors where it can be.
class FusionGroups {
 public:
  enum class Merge : std::uint8_t { merged, same_group, refused_rule, refused_cycle };

  // `index` (optional): g's FusionIndex, counted. One whose sizes are not g's is not used, nor one
  // that describes a renumbered copy (FusionIndex::topo) other than g; one of another graph of the
  // same sizes would be, as a PolicyGraph of another graph would be by decode.
  explicit FusionGroups(const OpGraph& g, std::int64_t search_budget = 4096,
                        std::shared_ptr<const FusionIndex> index = nullptr)
      : g_(&g), budget_(search_budget) {
    if (index && index->counted && index->fits(g) && (!index->topo || index->topo.get() == &g)) {
      shared_ = std::move(index);
      ix_ = shared_.get();
    } else {
      own_ = FusionIndex(g, false);
      ix_ = &own_;
    }
    view_ = fusion_view(g, ix_->traits);
    const auto n = static_cast<std::size_t>(g.num_ops());
    ub_.assign(n, 0);
    tstamp_.assign(static_cast<std::size_t>(g.num_tensors()), 0);
    node_.resize(n);
    members_.resize(n);
    out_.resize(n);
    edges_.resize(n);
    minpos_.resize(n);
    maxpos_.resize(n);
    lib_.assign(n, -1);
    red_.assign(n, -1);
    stamp_.assign(n, 0);
    for (OpId v = 0; v < g.num_ops(); ++v) {
      const auto i = static_cast<std::size_t>(v);
      node_[i] = {v, g.topo_position(v)};
      edges_[i] = static_cast<std::int64_t>(g.succ(v).size());
      minpos_[i] = maxpos_[i] = node_[i].pos;
      const FusionClass c = traits_class(ix_->traits[i]);
      if (c == FusionClass::library) lib_[i] = v;
      if (c == FusionClass::reduction) red_[i] = v;
    }
  }
  FusionGroups(OpGraph&&, std::int64_t = 0, std::shared_ptr<const FusionIndex> = nullptr) = delete;  // the graph must outlive the groups
  FusionGroups(const FusionGroups&) = delete;  // ix_ may point into the object
  FusionGroups& operator=(const FusionGroups&) = delete;

  // The group of v, named by one of its ops (not necessarily its leader).
  OpId group(OpId v) const { return node_[static_cast<std::size_t>(v)].rep; }
  std::int32_t size(OpId v) const {
    const auto& m = members_[static_cast<std::size_t>(group(v))];
    return m.empty() ? 1 : static_cast<std::int32_t>(m.size());
  }
  // The first op of v's group in topological order.
  OpId leader(OpId v) const { return g_->topo_order()[static_cast<std::size_t>(minpos_[static_cast<std::size_t>(group(v))])]; }
  // Why the last refused_rule merge was refused.
  const FusionProblem& last_problem() const { return problem_; }

  // Merges the groups of a and b when the union is legal and keeps the graph of groups acyclic.
  Merge merge(OpId a, OpId b) {
    const OpId A = group(a), B = group(b);
    if (A == B) return Merge::same_group;
    problem_ = legal_union(A, B);
    if (problem_) return Merge::refused_rule;
    if (reaches(A, B) || reaches(B, A)) return Merge::refused_cycle;
    unite(A, B, union_ub_, union_exact_);
    return Merge::merged;
  }
  // The union's operand bound and whether it is exact, as the last merge() that merged set them:
  // what replay() takes to repeat that merge.
  std::int64_t last_union_bound() const { return union_ub_; }
  bool last_union_exact() const { return union_exact_; }
  // Repeats a merge that merge(a, b) made on groups in the same state (the same merges before it),
  // with its last_union_bound() and last_union_exact(), without checking it again: the groups end
  // as that merge left them (policy::decode's `base`).
  void replay(OpId a, OpId b, std::int64_t bound, bool exact) {
    if (!counted_) count_operands();  // every merge comes after the operands were counted
    unite(group(a), group(b), bound, exact);
  }

  // Plan::fusion of the groups: the leader's OpId for the ops of groups of two or more, else -1.
  std::vector<std::int32_t> fusion() const {
    const auto n = static_cast<std::size_t>(g_->num_ops());
    std::vector<std::int32_t> f(n, -1);
    for (std::size_t r = 0; r < n; ++r) {
      if (members_[r].size() < 2) continue;
      const OpId l = leader(static_cast<OpId>(r));
      for (OpId v : members_[r]) f[static_cast<std::size_t>(v)] = l;
    }
    return f;
  }
  std::int64_t num_groups() const {
    std::int64_t k = 0;
    for (const auto& m : members_) k += m.size() >= 2 ? 1 : 0;
    return k;
  }

 private:
  // The union of groups A != B, found legal and acyclic, with its operand bound.
  void unite(OpId A, OpId B, std::int64_t ub, bool exact) {
    // the larger group (a lone op counts as one) takes the smaller one in
    if (members_of(A).size() < members_of(B).size()) std::swap(A, B);
    const auto ia = static_cast<std::size_t>(A), ib = static_cast<std::size_t>(B);
    auto& big = own_members(A);
    auto& small = members_[ib];
    auto& out = out_[ia];
    if (small.empty()) {  // a lone op: nothing of its own to free
      node_[ib].rep = A;
      big.push_back(B);
      const auto succ = g_->succ(B);
      out.insert(out.end(), succ.begin(), succ.end());
    } else {
      for (OpId v : small) node_[static_cast<std::size_t>(v)].rep = A;
      big.insert(big.end(), small.begin(), small.end());
      out.insert(out.end(), out_[ib].begin(), out_[ib].end());
      small = {};
      out_[ib] = {};
    }
    edges_[ia] += edges_[ib];
    minpos_[ia] = std::min(minpos_[ia], minpos_[ib]);
    maxpos_[ia] = std::max(maxpos_[ia], maxpos_[ib]);
    grouped_end_ = std::max(grouped_end_, maxpos_[ia]);
    if (lib_[ia] < 0) lib_[ia] = lib_[ib];
    if (red_[ia] < 0) red_[ia] = red_[ib];
    ub_[ia] = ub;
    exact_[ia] = exact ? 1 : 0;
  }

  // R's members, made a list (with R's successors as its out_ list) where R is a lone op.
  std::vector<OpId>& own_members(OpId R) {
    auto& m = members_[static_cast<std::size_t>(R)];
    if (m.empty()) {
      m.push_back(R);
      const auto succ = g_->succ(R);
      out_[static_cast<std::size_t>(R)].assign(succ.begin(), succ.end());
    }
    return m;
  }
  std::span<const OpId> members_of(const OpId& R) const {
    const auto& m = members_[static_cast<std::size_t>(R)];
    return m.empty() ? std::span<const OpId>(&R, 1) : std::span<const OpId>(m);
  }

  // Each tensor's readers over data edges (union_operands_small) and each op's exact operand count,
  // made at the first merge that gets to rule 5 unless the index has them: a caller that merges
  // nothing (decoding a plan without fusion) does not pay for them. Until then every group is a lone op.
  void count_operands() {
    if (!ix_->counted) own_.count(*g_);
    ub_ = ix_->operands;
    exact_.assign(ub_.size(), 1);
    counted_ = true;
  }

  // The rules for the union of groups A and B, each legal on its own: only what the union adds.
  // Sets union_ub_, a bound on the union's operand count (rule 5), exact (union_exact_) where
  // union_operands_small could count it or the bound was over the budget and it was counted.
  FusionProblem legal_union(OpId A, OpId B) {
    if (FusionProblem p = legal_union_1to4(A, B)) return p;
    if (!counted_) count_operands();
    union_exact_ = false;
    if (!union_operands_small(A, B)) {
      // Counted exactly only when the groups' bounds could exceed the budget, so long chains cost a
      // count now and then, not per merge.
      union_ub_ = ub_[static_cast<std::size_t>(A)] + ub_[static_cast<std::size_t>(B)];
      if (union_ub_ <= kFusionMaxOperands) return {};
      const auto& view = view_;
      if (++tag_ == 0) {
        std::fill(tstamp_.begin(), tstamp_.end(), 0);
        tag_ = 1;
      }
      auto in_union = [&](OpId x) {
        const OpId r = group(x);
        return r == A || r == B;
      };
      union_ub_ = fusion_operands(view, members_of(A), in_union, tstamp_.data(), tag_) +
                  fusion_operands(view, members_of(B), in_union, tstamp_.data(), tag_);
      union_exact_ = true;
    }
    const OpId first =
        g_->topo_order()[static_cast<std::size_t>(std::min(minpos_[static_cast<std::size_t>(A)], minpos_[static_cast<std::size_t>(B)]))];
    return fusion_operand_budget(union_ub_, first);
  }

  // The union's exact count from the two groups' exact counts, where one of them is small and its
  // tensors have few readers (most merges decode and the XLA-like heuristic make: an op joining its
  // producer's group, then its group joining another producer's): a tensor counts differently in the
  // union only where the small group reads or writes it (otherwise its producer and readers are all
  // outside that group, and outside the union exactly when outside the other), so the union's count
  // is the two counts less what each such tensor counted in each, plus what it counts in the union.
  // Sets union_ub_ and union_exact_; false (nothing set) where it does not apply.
  bool union_operands_small(OpId A, OpId B) {
    if (!exact_[static_cast<std::size_t>(A)] || !exact_[static_cast<std::size_t>(B)]) return false;
    constexpr std::int32_t kSmallGroup = 16, kFewReaders = 16;
    const OpId S = size(A) <= size(B) ? A : B;
    if (size(S) > kSmallGroup) return false;
    const auto& view = view_;
    const auto& reader_off = ix_->reader_off;
    auto few = [&](TensorId t) {
      return t < 0 || reader_off[static_cast<std::size_t>(t) + 1] - reader_off[static_cast<std::size_t>(t)] <= kFewReaders;
    };
    for (OpId v : members_of(S)) {
      for (auto e = view.in_off[v]; e < view.in_off[v + 1]; ++e)
        if (!few(view.in_tensor[e])) return false;
      for (auto e = view.out_off[v]; e < view.out_off[v + 1]; ++e)
        if (!few(view.out_tensor[e])) return false;
    }
    if (++tag_ == 0) {
      std::fill(tstamp_.begin(), tstamp_.end(), 0);
      tag_ = 1;
    }
    std::int64_t ops = ub_[static_cast<std::size_t>(A)] + ub_[static_cast<std::size_t>(B)];
    auto visit = [&](TensorId t, OpId producer) {
      if (t < 0 || tstamp_[static_cast<std::size_t>(t)] == tag_) return;
      tstamp_[static_cast<std::size_t>(t)] = tag_;
      bool in_a = false, in_b = false, outside = false;  // where t's readers are
      for (auto e = reader_off[static_cast<std::size_t>(t)]; e < reader_off[static_cast<std::size_t>(t) + 1]; ++e) {
        const OpId r = group(ix_->readers[static_cast<std::size_t>(e)]);
        in_a = in_a || r == A;
        in_b = in_b || r == B;
        outside = outside || (r != A && r != B);
      }
      const OpId p = group(producer);
      const int in_union = p == A || p == B ? (outside ? 1 : 0) : (in_a || in_b ? 1 : 0);
      const int in_group_a = p == A ? (in_b || outside ? 1 : 0) : (in_a ? 1 : 0);
      const int in_group_b = p == B ? (in_a || outside ? 1 : 0) : (in_b ? 1 : 0);
      ops += in_union - in_group_a - in_group_b;
    };
    for (OpId v : members_of(S)) {
      for (auto e = view.in_off[v]; e < view.in_off[v + 1]; ++e) visit(view.in_tensor[e], view.in_src[e]);
      for (auto e = view.out_off[v]; e < view.out_off[v + 1]; ++e) visit(view.out_tensor[e], v);
    }
    union_ub_ = ops;
    union_exact_ = true;
    return true;
  }

  FusionProblem legal_union_1to4(OpId A, OpId B) const {
    namespace df = detail::fusion;
    const OpGraph& g = *g_;
    const auto& view = view_;
    for (OpId R : {A, B})
      if (members_[static_cast<std::size_t>(R)].empty())  // a lone op: not checked yet
        if (FusionProblem p = df::member_class(ix_->traits[static_cast<std::size_t>(R)], R)) return p;
    const OpId la = lib_[static_cast<std::size_t>(A)], lb = lib_[static_cast<std::size_t>(B)];
    auto in_union = [&](OpId x) {
      const OpId r = group(x);
      return r == A || r == B;
    };
    if (la >= 0 && lb >= 0)
      return g.topo_position(la) < g.topo_position(lb) ? FusionProblem{FusionRule::two_library_kernels, la, lb}
                                                       : FusionProblem{FusionRule::two_library_kernels, lb, la};
    if (la >= 0 || lb >= 0) {
      const OpId lib = la >= 0 ? la : lb, other = la >= 0 ? B : A;
      if (FusionProblem p = df::library_root(view, lib, [&](OpId x) { return group(x) == other; })) return p;
      for (OpId v : members_of(other))
        if (FusionProblem p = df::epilogue_member(view, v, lib, in_union)) return p;
      return {};
    }
    const OpId ra = red_[static_cast<std::size_t>(A)], rb = red_[static_cast<std::size_t>(B)];
    if (ra >= 0 && rb >= 0)
      return g.topo_position(ra) < g.topo_position(rb) ? FusionProblem{FusionRule::two_reductions, ra, rb}
                                                       : FusionProblem{FusionRule::two_reductions, rb, ra};
    if (ra >= 0) return df::reduction_end(view, ra, members_of(B));
    if (rb >= 0) return df::reduction_end(view, rb, members_of(A));
    return {};
  }

  // Whether a path leads from group X to group Y through another group (a direct edge X -> Y
  // becomes internal when they merge). True also when the search runs out of budget.
  // Pruning: an op after both Y's last op and the last op of any group of two or more is alone, and
  // so is everything after it, where positions only grow: nothing there leads back to Y. (Before
  // that, a path between groups can go back in topological order: it may enter a group at a late
  // op and leave it from an early one.) Merging in topological order, as decode() and the XLA-like
  // heuristic do, keeps the search to ops before the op being merged.
  bool reaches(OpId X, OpId Y) {
    const std::int32_t limit = std::max(maxpos_[static_cast<std::size_t>(Y)], grouped_end_);
    if (minpos_[static_cast<std::size_t>(X)] > limit) return false;
    // Such a path enters Y from a third group: none when every producer of Y's ops is in X or Y (a
    // lone op fused into its only producer's group, the common case), checked where Y is small.
    if (size(Y) <= kDirectCheck) {
      bool third = false;
      for (OpId m : members_of(Y))
        for (OpId u : g_->pred(m)) {
          const OpId U = group(u);
          third = third || (U != X && U != Y);
        }
      if (!third) return false;
    }
    if (++search_ == 0) {
      std::fill(stamp_.begin(), stamp_.end(), 0);
      search_ = 1;
    }
    queue_.clear();
    queue_.push_back(X);
    // The budget counts every edge out of each group reached, internal ones too, as a search over
    // every member's successors would. The answer is the same whatever the order (true when Y is
    // reached or the groups reached have more edges than the budget), so each group's edges are
    // charged when it is reached and only its out_ list is walked.
    std::int64_t budget = budget_;
    for (std::size_t h = 0; h < queue_.size(); ++h) {
      const OpId U = queue_[h];
      const auto iu = static_cast<std::size_t>(U);
      budget -= edges_[iu];
      if (budget < 0) return true;
      auto visit = [&](OpId S, std::int32_t pos) {  // true: the path is found
        if (S == X) return false;
        if (S == Y) return U != X;  // a direct edge X -> Y is no path
        if (pos > limit || stamp_[static_cast<std::size_t>(S)] == search_) return false;
        stamp_[static_cast<std::size_t>(S)] = search_;
        queue_.push_back(S);
        return false;
      };
      if (members_[iu].empty()) {
        for (OpId s : g_->succ(U)) {
          const Node ns = node_[static_cast<std::size_t>(s)];
          if (visit(ns.rep, ns.pos)) return true;
        }
        continue;
      }
      // Entries that merges made internal are dropped as they are met.
      std::vector<OpId>& out = out_[iu];
      for (std::size_t k = 0; k < out.size();) {
        const Node ns = node_[static_cast<std::size_t>(out[k])];
        if (ns.rep == U) {
          out[k] = out.back();
          out.pop_back();
        } else {
          if (visit(ns.rep, ns.pos)) return true;
          ++k;
        }
      }
    }
    return false;
  }

  static constexpr std::int32_t kDirectCheck = 8;
  const OpGraph* g_;
  std::int64_t budget_;
  std::shared_ptr<const FusionIndex> shared_;  // the caller's index, or null
  FusionIndex own_;                            // else this one's
  const FusionIndex* ix_ = nullptr;            // the index in use
  FusionGraphView<std::int64_t> view_{};
  struct Node {
    OpId rep;           // the group's representative
    std::int32_t pos;   // the op's topological position
  };
  std::vector<Node> node_;  // per op: read together on every edge a search follows
  std::vector<std::vector<OpId>> members_;  // per representative; empty: the op alone
  // Per representative of a group of two or more: its ops' successors outside it, some perhaps
  // merged into it since (reaches drops them); a lone op's are g_->succ(op).
  std::vector<std::vector<OpId>> out_;
  std::vector<std::int64_t> edges_;         // per representative: its ops' out-edges, internal ones too
  std::vector<std::int32_t> minpos_, maxpos_;
  std::vector<OpId> lib_, red_;             // per representative: its library op / reduction, or -1
  std::vector<std::int64_t> ub_;            // per representative: a bound on its operand count (rule 5)
  std::vector<char> exact_;                 // per representative: ub_ is its exact count
  std::int64_t union_ub_ = 0;
  bool union_exact_ = false;
  bool counted_ = false;                    // count_operands() has run
  std::vector<std::uint32_t> tstamp_;       // per tensor, for fusion_operands()
  std::uint32_t tag_ = 0;
  std::vector<std::uint32_t> stamp_;
  std::uint32_t search_ = 0;
  std::int32_t grouped_end_ = -1;           // the last topological position of an op in a group of two or more
  std::vector<OpId> queue_;
  FusionProblem problem_;
};

}  // namespace go

#undef GO_FUSION_INLINE
