#pragma once
// Fusion groups built by merging under the rules of go/graph/fusion_rules.hpp: FusionGroups keeps
// every group legal and the graph of groups acyclic after each merge (the XLA-like heuristic,
// baselines/fusion.hpp, and the policy's decode, policy/decode.hpp, merge through it), and
// FusionIndex holds what it reads of a graph besides its edges, made once per graph.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "go/graph/fusion_rules.hpp"
#include "go/graph/graph.hpp"

namespace go {

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

// Fusion groups built by merging, legal (the rules of go/graph/fusion_rules.hpp) and acyclic (each
// group convex, no two groups depending on each other) after every merge. Devices are the
// caller's: merge only ops on one device. Merges cost the smaller group's edges for the rules and
// a search over groups for cycles, bounded by `search_budget` edges (a merge whose search runs out is refused); no search
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
    if (uses_shared(g, index.get())) {
      shared_ = std::move(index);
      ix_ = shared_.get();
    } else {
      own_ = FusionIndex(g, false);
      ix_ = &own_;
    }
    const auto n = static_cast<std::size_t>(g.num_ops());
    tstamp_.assign(static_cast<std::size_t>(g.num_tensors()), 0);
    members_.resize(n);
    out_.resize(n);
    stamp_.assign(n, 0);
    lone(g);
  }
  FusionGroups(OpGraph&&, std::int64_t = 0, std::shared_ptr<const FusionIndex> = nullptr) = delete;  // the graph must outlive the groups
  FusionGroups(const FusionGroups&) = delete;  // ix_ may point into the object
  FusionGroups& operator=(const FusionGroups&) = delete;

  // Whether FusionGroups(g, budget, index) works from `index` (else from an index of its own).
  static bool uses_shared(const OpGraph& g, const FusionIndex* index) {
    return index && index->counted && index->fits(g) && (!index->topo || index->topo.get() == &g);
  }
  // Every op a group of its own again, on g, as FusionGroups(g, budget, index) would start with
  // this one's budget and shared index (which must work for g: uses_shared), keeping the per-op
  // lists' memory up to 4 entries per op: FusionGroupsPool gives one object to the many decodes
  // of one graph's plans, which then allocate next to nothing (the lists were 8-10% of a
  // fine-tuning's CPU time on AmoebaNet in malloc and free).
  void reset(const OpGraph& g) {
    GO_CHECK(shared_ && uses_shared(g, shared_.get()), g.where(),
             "FusionGroups::reset: the groups were not made on this graph's fusion index");
    const std::size_t keep = 4 * members_.size();
    std::size_t kept = 0;
    auto clear = [&](std::vector<OpId>& l) {
      if (l.capacity() == 0) return;
      l.clear();
      if (kept + l.capacity() > keep) std::vector<OpId>().swap(l);
      else kept += l.capacity();
    };
    for (std::size_t i = 0; i < members_.size(); ++i) {
      clear(members_[i]);
      clear(out_[i]);
    }
    union_ub_ = 0;
    union_exact_ = false;
    counted_ = false;
    grouped_end_ = -1;
    problem_ = {};
    reads_ = nullptr;
    lone(g);
  }
  const FusionIndex* shared_index() const { return shared_.get(); }
  std::int64_t search_budget() const { return budget_; }

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
  // f(op) for each op of v's group.
  template <class F>
  void for_each_member(OpId v, F&& f) const {
    const OpId r = group(v);
    for (OpId m : members_of(r)) f(m);
  }
  // Where `to` is not null, each cycle search from now on appends to it, for every group it goes
  // into (other than the two being merged, which a merge reads whole), the topological position of
  // the op it entered at. What else a merge reads of other groups is whether an op belongs to one
  // of the two, or to a group the search went into (then the op's group is that group as long as
  // the op it was entered at is in it). policy::decode's log keeps these to know which later
  // decisions a changed group can change.
  void record_reads(std::vector<std::int32_t>* to) { reads_ = to; }

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
      small.clear();  // its memory kept for a later merge (reset() bounds what is kept)
      out_[ib].clear();
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

  // Each op of g in a group of its own (members_ and out_ empty, sized; the index chosen).
  void lone(const OpGraph& g) {
    g_ = &g;
    view_ = fusion_view(g, ix_->traits);
    const auto n = static_cast<std::size_t>(g.num_ops());
    ub_.assign(n, 0);
    node_.resize(n);
    edges_.resize(n);
    minpos_.resize(n);
    maxpos_.resize(n);
    lib_.assign(n, -1);
    red_.assign(n, -1);
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
        if (pos > limit) return false;
        if (stamp_[static_cast<std::size_t>(S)] == search_) return false;
        if (reads_) reads_->push_back(pos);  // S's members are read from here on
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
  std::vector<std::int32_t>* reads_ = nullptr;  // record_reads()
  std::vector<OpId> queue_;
  FusionProblem problem_;
};

// FusionGroups kept for reuse by the decodes of one graph's plans (policy::PolicyGraph holds one,
// shared by its copies; thread-safe). take() gives a FusionGroups on g exactly as
// FusionGroups(g, search_budget, index) would start: one given back earlier with the same index
// and budget, reset() to lone ops, where there is one, else a new one. The lease gives it back when
// it ends. Groups that would not work from `index` (FusionGroups::uses_shared) are made new each
// time and never kept.
class FusionGroupsPool {
 public:
  class Lease {
   public:
    Lease(std::unique_ptr<FusionGroups> groups, FusionGroupsPool* pool) : groups_(std::move(groups)), pool_(pool) {}
    Lease(Lease&&) = default;
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (pool_ && groups_) pool_->give_back(std::move(groups_));
    }
    FusionGroups& operator*() const { return *groups_; }
    FusionGroups* operator->() const { return groups_.get(); }

   private:
    std::unique_ptr<FusionGroups> groups_;
    FusionGroupsPool* pool_;
  };

  // `pool` may be null: a new FusionGroups, not kept.
  static Lease take(FusionGroupsPool* pool, const OpGraph& g, std::int64_t search_budget,
                    const std::shared_ptr<const FusionIndex>& index) {
    if (!pool || !FusionGroups::uses_shared(g, index.get()))
      return Lease(std::make_unique<FusionGroups>(g, search_budget, index), nullptr);
    std::unique_ptr<FusionGroups> kept;
    {
      const std::lock_guard<std::mutex> lock(pool->mutex_);
      for (std::size_t i = pool->free_.size(); i-- > 0;) {
        FusionGroups& f = *pool->free_[i];
        if (f.shared_index() == index.get() && f.search_budget() == search_budget) {
          kept = std::move(pool->free_[i]);
          pool->free_.erase(pool->free_.begin() + static_cast<std::ptrdiff_t>(i));
          break;
        }
      }
    }
    if (!kept) return Lease(std::make_unique<FusionGroups>(g, search_budget, index), pool);
    kept->reset(g);
    return Lease(std::move(kept), pool);
  }
  std::size_t kept() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return free_.size();
  }

 private:
  // At most this many kept: as many as decodes ran at once, in practice the thread count.
  static constexpr std::size_t kMaxKept = 16;
  void give_back(std::unique_ptr<FusionGroups> groups) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (free_.size() < kMaxKept) free_.push_back(std::move(groups));
  }
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<FusionGroups>> free_;
};

}  // namespace go
