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
// groups to keep the graph acyclic (each group convex); FusionGroups (go/graph/fusion_groups.hpp)
// keeps the groups legal and acyclic while it merges them (devices are its caller's). Not modelled: XLA's multi-output fusion pass (sibling fusion), horizontal fusion,
// producer duplication, its profitability heuristics, and fusions of a library kernel with a
// normalization.
// Control edges order ops but carry no data: an epilogue may wait on one from outside (3d), but no
// member may wait on its group's reduction (4b).
#include <algorithm>
#include <cstdint>
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

// Ops that no legal group of two or more holds (rules 1 and 3a): sources, alone ops and the library
// kernels of the backward pass. They run as units of their own.
constexpr bool fusion_never_grouped(OpKind k, OpRole role) {
  const FusionClass c = fusion_class(k, role);
  return c == FusionClass::source || c == FusionClass::alone || (c == FusionClass::library && role != OpRole::forward);
}
inline bool fusion_never_grouped(const Op& o) { return fusion_never_grouped(o.kind, o.role); }

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

}  // namespace go

#undef GO_FUSION_INLINE
