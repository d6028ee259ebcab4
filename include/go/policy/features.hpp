#pragma once
// PolicyGraph: everything the policy reads about one graph, computed once per
// graph and reused at every PPO step.
//
// Rows are ops in topological order (row r is op `order[r]`, op i is row `row_of[i]`):
// the attention layers cut rows into segments, so the decision of row r depends
// on earlier rows. Features are independent of any particular graph, so one
// policy transfers across graphs:
//   kinds    i32 [n]        op kind (go::OpKind), embedded by the policy
//   numeric  f32 [n, 11]    log1p(FLOPs)/24, log1p(output bytes)/20, log1p(parameter bytes)/20,
//                           has measured time, log1p(time in us)/10 (0 without), log1p(in-degree)/3,
//                           log1p(out-degree)/3, topological position / max(n - 1, 1),
//                           role one-hot (forward, backward, update)
//   preds    CsrPair        row r's predecessors (as rows), duplicates kept, control edges included
//   succs    CsrPair        row r's successors
//   fusion_mask f32 [n, 2]  0, or -1e9 on "fuse into producers" for rows that can never join a
//                           producer's group legally (go/graph/fusion_rules.hpp): rows without a
//                           predecessor, ops that never join a producer (library, alone and source
//                           ops), and (from_graph) ops none of whose for_each_fusion_producer() ops
//                           can be in a group with them (fusion_action_possible: sources, alone
//                           ops, reductions, library kernels they cannot follow as an epilogue).
//                           What the mask leaves open may still be refused by decode()'s repair,
//                           which sees the groups.
//   anchor_*    i32 [n]     optional: the actions of an anchor plan per row (device, priority level,
//                           fuse into producers), set by set_anchor() (go/rl/anchor.hpp computes them
//                           for a cluster); the policy reads them when its config has "anchor"
//   tie      f32 per op     [0, 1), larger earlier in go::program_order (tie_depth_first: in
//                           go::depth_first_topo_order with the weights first) (from_graph; empty from
//                           from_arrays): decode's plans run ops of equal priority level in program
//                           order instead of first-ready order (see go/graph/graph.hpp)
//   ties     TieOrder       which order decode gives ops of one level by default (the anchor
//                           chooses it per graph and cluster)
//   join     FusionJoin     which producers decode's "fuse into producers" joins by default (the
//                           anchor's: all, or the main one for its pipelined plans)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "go/core/csr.hpp"
#include "go/core/tensor.hpp"
#include "go/graph/fusion_groups.hpp"
#include "go/graph/fusion_rules.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/op_kind.hpp"

namespace go::policy {

inline constexpr std::int64_t kNumNumericFeatures = 11;
inline constexpr float kMaskedLogit = -1e9f;

// How ops of one priority level are ordered in a decoded plan:
//   program      in go::program_order (PolicyGraph::tie): one block to its end before the next;
//   first_ready  first-ready-first-run (no tie);
//   latest       the op latest in topological order (the rows' order) first: among ready ops the
//                one furthest along its chain, which keeps a recurrence's critical chain moving
//                where program order would start the next independent one (RNNLM: 0.5% faster);
//   depth_first  in go::depth_first_topo_order with the weights and inputs first
//                (PolicyGraph::tie_depth_first): one stream of independent work (a time chunk) runs
//                through its layers, and back through their gradients, before the next, so with
//                layers in blocks on devices the next device starts on the first stream early (a
//                pipeline; WaveNet 4 on 4 GPUs, with no priority levels and fusion into each
//                op's main producer: 212.8 -> 93.0 ms, go/rl/anchor.hpp);
//   graph        (a decode option only) the PolicyGraph's `ties`.
enum class TieOrder : std::uint8_t { graph, program, first_ready, latest, depth_first };

// Which producers an op whose action is "fuse into producers" joins (go/policy/decode.hpp, rule 3):
//   all    every producer it can share a group with (XLA-like fusion);
//   main   one: the first, largest input first (go::fusion_producers_largest_first), that can take
//          it. An op reading two independent streams then never merges them, and one reading two
//          branches of its own stream still fuses: with depth-first order, WaveNet 4 on 4 GPUs
//          93.0 ms, against 242.2 with all and 121.2 fusing only the ops with one producer to
//          fuse with (go/rl/anchor.hpp's pipelined candidates);
//   graph  (a decode option only) the PolicyGraph's `join`.
enum class FusionJoin : std::uint8_t { graph, all, main };

// The ops of g's colocation groups in topological order, each with its group numbered from 0 in
// order of first appearance, and the number of groups (PolicyGraph::colocated; decode's rule 1).
struct Colocated {
  std::vector<std::pair<OpId, std::int32_t>> ops;
  std::int32_t groups = 0;
};
inline Colocated colocated_ops(const OpGraph& g) {
  Colocated c;
  std::unordered_map<std::int32_t, std::int32_t> index;  // colocation id -> from 0
  for (OpId v : g.topo_order())
    if (const std::int32_t id = g.op(v).colocation; id >= 0)
      c.ops.emplace_back(v, index.try_emplace(id, static_cast<std::int32_t>(index.size())).first->second);
  c.groups = static_cast<std::int32_t>(index.size());
  return c;
}

struct PolicyGraph {
  std::string name;
  std::int64_t num_nodes = 0;
  std::vector<OpId> order;          // row -> op
  std::vector<std::int32_t> row_of; // op -> row
  Tensor kinds;                     // i32 [n]
  Tensor numeric;                   // f32 [n, kNumNumericFeatures]
  CsrPair preds, succs;
  Tensor fusion_mask;               // f32 [n, 2]
  Tensor anchor_device, anchor_priority, anchor_fuse;  // i32 [n] each, or undefined
  // op -> [0, 1): decode adds it to the priority level, so ops of equal level run in program order
  // (go/graph/graph.hpp) rather than first-ready; empty: first-ready (from_arrays).
  std::vector<float> tie;
  std::vector<float> tie_depth_first;  // the same for TieOrder::depth_first
  // decode's default order within a level (never TieOrder::graph), the one the anchor found
  // fastest (set_anchor in go/rl/anchor.hpp; none is best on every graph)
  TieOrder ties = TieOrder::program;
  FusionJoin join = FusionJoin::all;  // decode's default fusion join (never graph), the anchor's
  // what decode's fusion groups read of the graph, made once (from_graph; null from arrays), with
  // the graph renumbered in topological order where it is not (FusionIndex's `relabel`)
  std::shared_ptr<const FusionIndex> fusion_index;
  // decode's FusionGroups on that index, kept between decodes (made with it; copies share it)
  std::shared_ptr<FusionGroupsPool> fusion_groups = std::make_shared<FusionGroupsPool>();
  // colocated_ops(g), for decode's rule 1 (from_graph; colocation_groups -1: not made, decode
  // makes it from the graph: read per decode from the op records, 88 bytes apart, it was a fifth of
  // a decode from a log's own time on an 80,588-op graph).
  std::vector<std::pair<OpId, std::int32_t>> colocated;
  std::int32_t colocation_groups = -1;

  std::int64_t num_edges() const { return preds.nnz(); }
  bool has_anchor() const { return anchor_device.defined(); }

  // Sets the anchor actions (rows in topological order). Devices and levels must be >= 0 (the
  // policy checks them against its device count and levels); fuse must be 0 on rows without a
  // predecessor.
  void set_anchor(Tensor device, Tensor priority, Tensor fuse) {
    auto check = [&](const Tensor& t, const char* what) {
      GO_CHECK(t.defined() && t.dtype() == DType::i32 && t.numel() == num_nodes, "PolicyGraph '", name, "': anchor ",
               what, " must be i32 [", num_nodes, "], got ", t.defined() ? t.describe() : std::string("(undefined)"));
      const std::int32_t* p = t.data<std::int32_t>();
      for (std::int64_t r = 0; r < num_nodes; ++r)
        GO_CHECK(p[r] >= 0, "PolicyGraph '", name, "': negative anchor ", what, " ", p[r], " on row ", r);
    };
    check(device, "device");
    check(priority, "priority");
    check(fuse, "fusion");
    for (std::int64_t r = 0; r < num_nodes; ++r) {
      const std::int32_t f = fuse.data<std::int32_t>()[r];
      GO_CHECK(f == 0 || (f == 1 && fusion_mask.f32()[r * 2 + 1] == 0.f), "PolicyGraph '", name,
               "': anchor fusion action ", f, " on row ", r, " (must be 0 or 1, and 0 without a predecessor)");
    }
    anchor_device = std::move(device);
    anchor_priority = std::move(priority);
    anchor_fuse = std::move(fuse);
  }
  void clear_anchor() {
    anchor_device = anchor_priority = anchor_fuse = Tensor();
    ties = TieOrder::program;
    join = FusionJoin::all;
  }

  // From an op graph: rows in g.topo_order().
  static PolicyGraph from_graph(const OpGraph& g) {
    const std::int64_t n = g.num_ops();
    PolicyGraph pg;
    pg.name = g.info().name.empty() ? g.info().source : g.info().name;
    pg.num_nodes = n;
    pg.order.assign(g.topo_order().begin(), g.topo_order().end());
    GO_CHECK(static_cast<std::int64_t>(pg.order.size()) == n, g.where(), "topological order has ", pg.order.size(),
             " ops for a graph of ", n);
    pg.row_of.assign(static_cast<std::size_t>(n), -1);
    for (std::int64_t r = 0; r < n; ++r) pg.row_of[static_cast<std::size_t>(pg.order[static_cast<std::size_t>(r)])] =
        static_cast<std::int32_t>(r);
    std::vector<std::int32_t> dst, src;
    dst.reserve(static_cast<std::size_t>(g.num_edges()));
    src.reserve(static_cast<std::size_t>(g.num_edges()));
    for (std::int64_t r = 0; r < n; ++r)
      for (OpId p : g.pred(pg.order[static_cast<std::size_t>(r)])) {
        dst.push_back(static_cast<std::int32_t>(r));
        src.push_back(pg.row_of[static_cast<std::size_t>(p)]);
      }
    pg.kinds = Tensor::empty(Shape{n}, DType::i32);
    pg.numeric = Tensor::zeros(Shape{n, kNumNumericFeatures});
    for (std::int64_t r = 0; r < n; ++r) {
      const Op& o = g.op(pg.order[static_cast<std::size_t>(r)]);
      pg.kinds.data<std::int32_t>()[r] = static_cast<std::int32_t>(op_kind_index(o.kind));
      float* f = pg.numeric.f32() + r * kNumNumericFeatures;
      f[0] = static_cast<float>(std::log1p(std::max(0.0, o.flops)) / 24.0);
      f[1] = static_cast<float>(std::log1p(static_cast<double>(std::max<std::int64_t>(0, o.output_bytes))) / 20.0);
      f[2] = static_cast<float>(std::log1p(static_cast<double>(std::max<std::int64_t>(0, o.param_bytes))) / 20.0);
      f[3] = o.has_time() ? 1.f : 0.f;
      f[4] = o.has_time() ? static_cast<float>(std::log1p(o.time * 1e6) / 10.0) : 0.f;
      f[5] = static_cast<float>(std::log1p(static_cast<double>(g.in_degree(o.id))) / 3.0);
      f[6] = static_cast<float>(std::log1p(static_cast<double>(g.out_degree(o.id))) / 3.0);
      f[7] = static_cast<float>(static_cast<double>(r) / static_cast<double>(std::max<std::int64_t>(n - 1, 1)));
      f[8 + static_cast<int>(o.role)] = 1.f;
    }
    Colocated c = colocated_ops(g);
    pg.colocated = std::move(c.ops);
    pg.colocation_groups = c.groups;
    pg.set_edges(dst, src);
    // ties in [0, 1), larger earlier in the order
    auto ties_of = [&](const std::vector<OpId>& order) {
      std::vector<float> t(static_cast<std::size_t>(n), 0.f);
      const float below_one = std::nextafter(1.f, 0.f);
      for (std::int64_t k = 0; k < n; ++k)
        t[static_cast<std::size_t>(order[static_cast<std::size_t>(k)])] =
            std::min(below_one, static_cast<float>(static_cast<double>(n - 1 - k) / static_cast<double>(n)));
      return t;
    };
    pg.tie = ties_of(go::program_order(g));
    pg.tie_depth_first = ties_of(go::depth_first_topo_order(g, true));
    for (std::int64_t r = 0; r < n; ++r) {
      const OpId v = pg.order[static_cast<std::size_t>(r)];
      if (!fusion_action_possible(g, v)) pg.fusion_mask.f32()[r * 2 + 1] = kMaskedLogit;
    }
    pg.fusion_index = std::make_shared<const FusionIndex>(g, true, true);
    return pg;
  }

  // From raw arrays already in topological order (tests, synthetic graphs): kinds [n],
  // numeric [n, kNumNumericFeatures], edges dst[k] <- src[k] with src[k] < dst[k]. The fusion mask
  // sees kinds only (roles taken as forward, producers unknown).
  static PolicyGraph from_arrays(std::string name, const Tensor& kinds, const Tensor& numeric,
                                 std::span<const std::int32_t> dst, std::span<const std::int32_t> src) {
    GO_CHECK(kinds.defined() && kinds.dtype() == DType::i32 && kinds.rank() == 1,
             "PolicyGraph: kinds must be an i32 vector, got ", kinds.defined() ? kinds.describe() : "(undefined)");
    const std::int64_t n = kinds.numel();
    GO_CHECK(numeric.defined() && numeric.dtype() == DType::f32 && numeric.shape() == Shape({n, kNumNumericFeatures}),
             "PolicyGraph: numeric must be f32 [", n, ", ", kNumNumericFeatures, "], got ",
             numeric.defined() ? numeric.describe() : "(undefined)");
    for (std::int64_t r = 0; r < n; ++r) {
      const std::int32_t k = kinds.data<std::int32_t>()[r];
      GO_CHECK(k >= 0 && k < static_cast<std::int32_t>(kNumOpKinds), "PolicyGraph: kind ", k, " of row ", r,
               " out of range [0, ", kNumOpKinds, ")");
    }
    GO_CHECK(dst.size() == src.size(), "PolicyGraph: ", dst.size(), " edge destinations but ", src.size(),
             " sources");
    for (std::size_t e = 0; e < dst.size(); ++e)
      GO_CHECK(src[e] >= 0 && src[e] < dst[e] && dst[e] < n, "PolicyGraph: edge ", e, " (", src[e], " -> ", dst[e],
               ") is not forward in topological order over ", n, " rows");
    PolicyGraph pg;
    pg.name = std::move(name);
    pg.num_nodes = n;
    pg.order.resize(static_cast<std::size_t>(n));
    pg.row_of.resize(static_cast<std::size_t>(n));
    for (std::int64_t r = 0; r < n; ++r) {
      pg.order[static_cast<std::size_t>(r)] = static_cast<OpId>(r);
      pg.row_of[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(r);
    }
    pg.kinds = kinds.clone();
    pg.numeric = numeric.clone();
    pg.set_edges(dst, src);
    return pg;
  }

 private:
  void set_edges(std::span<const std::int32_t> dst, std::span<const std::int32_t> src) {
    preds = CsrPair::from_edges(num_nodes, num_nodes, dst, src);
    succs = CsrPair::from_edges(num_nodes, num_nodes, src, dst);
    fusion_mask = Tensor::zeros(Shape{num_nodes, 2});
    const std::int64_t* rp = preds.fwd.row_ptr.data<std::int64_t>();
    const std::int32_t* k = kinds.data<std::int32_t>();
    for (std::int64_t r = 0; r < num_nodes; ++r)
      if (rp[r + 1] == rp[r] || !fusion_joins_producer(static_cast<OpKind>(k[r]))) fusion_mask.f32()[r * 2 + 1] = kMaskedLogit;
  }
};

}  // namespace go::policy
