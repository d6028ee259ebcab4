#pragma once
// Decoding the policy's actions into a valid decision for every op.
//
// Decision holds flat per-OpId vectors: device, priority level, fusion group
// (-1 = unfused; otherwise the OpId of the group's first op in topological order).
//
// Rules, applied in this order:
//   1. device[op] = the sampled device of op's row. With `colocate`, every op of a colocation
//      group moves to the device of the group's first op in topological order.
//   2. priority[op] = the sampled level (higher runs first among ready ops); within a level, ops
//      run in program order (tie = PolicyGraph::tie, added by to_plan), first-ready, or latest in
//      topological order first (DecodeOptions::ties; by default the PolicyGraph's `ties`).
//   3. Fusion, ops visited in topological order. An op v whose action is "fuse into producers"
//      joins the group of each of its producers p in turn (go::for_each_fusion_producer: the
//      producers of its data inputs, first input first; for an op with only control inputs, its
//      first predecessor), or with FusionJoin::main (DecodeOptions::join; by default the
//      PolicyGraph's `join`) only the first of them, largest input first, that it can join, when
//        a. p is on v's device (after rule 1),
//        b. the union is a kernel a compiler builds (go/graph/fusion_rules.hpp: e.g. no
//           convolution gradient with an epilogue, no matmul into a matmul, nothing reading a
//           reduction of its group), and
//        c. the merge keeps the graph of groups acyclic: no path leads from p's group to v through
//           another group. Searched over groups, through ops earlier than v in topological order,
//           visiting at most `search_budget` edges; when the budget runs out the merge is refused.
//      (b and c are go::FusionGroups::merge.) Otherwise v stays in a group of its own. Every op
//      joins a group only through an edge from a member, so each group is connected, sits on one
//      device, is convex and legal: what go/sim/plan.hpp's check_plan() and the simulator require,
//      so every decoded plan is valid or out of memory. Groups of one op are reported as -1.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "go/core/error.hpp"
#include "go/graph/fusion_groups.hpp"
#include "go/graph/fusion_rules.hpp"
#include "go/graph/graph.hpp"
#include "go/policy/features.hpp"
#include "go/policy/policy.hpp"
#include "go/sim/plan.hpp"

namespace go::policy {

struct Decision {
  std::vector<std::int32_t> device;        // per OpId
  std::vector<std::int32_t> priority;      // per OpId, in [0, P)
  std::vector<float> tie;                  // per OpId, [0, 1), larger runs first in a level (empty: first-ready)
  std::vector<std::int32_t> fusion_group;  // per OpId, -1 unfused
  std::int32_t num_devices = 0;
  // statistics of rule 3
  std::int64_t fuse_requested = 0;     // ops whose action was "fuse into producers"
  std::int64_t fused = 0;              // ... that joined a producer's group
  // ... that joined none, by the first producer's reason:
  std::int64_t refused_device = 0;     // the producer is on another device
  std::int64_t refused_rule = 0;       // the group would break the fusion rules
  std::int64_t refused_cycle = 0;      // the merge would create a cycle (or the search budget ran out)
  std::int64_t num_groups = 0;         // groups of two ops or more
};

struct DecodeOptions {
  bool colocate = true;
  std::int64_t search_budget = 4096;
  TieOrder ties = TieOrder::graph;
  FusionJoin join = FusionJoin::graph;
};

// How decode() built one decision's fusion groups (its `log`), so that the decode of other actions
// can take from it what they would decide alike (its `base`). What is decided at an op depends
// only on the groups so far (of earlier ops: the cycle search goes through earlier ops only), its
// fuse action, its device where it asks to fuse and has producers, and its producers' devices. So
// up to the first op where a fuse action differs, or a device (after colocation) that such an op
// or a consumer reads, the base's merges are the decode's, and they are repeated unchecked
// (FusionGroups::replay). After it, an op's decision is the base's again where everything it read
// is as the base had it: its own and its producers' actions, its producers' groups, and the groups
// its cycle searches went through (the log keeps their ops' positions, FusionGroups::record_reads;
// the searches' other bound is the op's own position, as every group so far ends at or before
// it). A group may differ from the base's once
// a decision that differs from the base's touched it (the op's group and its producers'), or it
// merged with such a group; decode() keeps track of those, and decides anew only where a decision
// read one. Fine-tuning's moves change a run of rows, so most of the merges after it, a training
// graph's backward pass, are taken from the log too.
struct DecodeLog {
  const OpGraph* graph = nullptr;  // the graph merged on (the PolicyGraph's renumbered copy or g)
  std::int32_t num_devices = 0;
  bool colocate = true, join_main = false;
  std::int64_t search_budget = 0;
  // per position of the merge order (the merged graph's topological order)
  std::vector<std::int32_t> device;  // after colocation
  std::vector<std::uint8_t> fuse;    // the fuse action
  std::vector<std::uint8_t> outcome;  // an Outcome
  enum Outcome : std::uint8_t { not_asked, fused, refused_device, refused_rule, refused_cycle, none_refused };
  struct Merge {
    OpId a, b;  // merge(a, b) of the merged graph's ops
    std::int32_t position;  // of the op being decided
    bool exact;
    std::int64_t bound;
  };
  std::vector<Merge> merges;  // in order
  // The positions of the ops whose groups the cycle searches read, in the order of the merge
  // order's positions: position k's are reads[read_off[k], read_off[k + 1]).
  std::vector<std::int64_t> read_off;
  std::vector<std::int32_t> reads;
  std::int64_t decided = 0;  // positions whose decision was made by merging, not taken from the base
};

// The actions (rows in pg's order) that describe a plan: its devices, its priorities as levels
// (the integer part of each, which must be in [0, priority_levels): decoded plans carry a program-
// order tie in [0, 1) on top of their level; a plan without priorities gives level 0
// everywhere, which the simulator runs first-ready-first-run like no priorities), and "fuse into
// producers" wherever an op shares a fusion group with one of its for_each_fusion_producer() ops.
// decode() of these actions gives back the plan's devices and priorities; its fusion groups are
// the plan's wherever each group holds every producer, on its device, of each member that joined
// one (true of the groups decode() builds, and of the XLA-like heuristic's when nothing is refused),
// and, decoded with FusionJoin::main, for groups that decode() built with it (each member joined
// one producer, so a group is a tree of such links).
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
      const float level = std::floor(p.priority[i]);
      GO_CHECK(level >= 0.f && level < static_cast<float>(priority_levels),
               "actions_from_plan: priority ", level, " of ", g.label(v), " is not a level in [0, ", priority_levels,
               ")");
      ap[r] = static_cast<std::int32_t>(level);
    }
    if (!p.fusion.empty() && p.fusion[i] >= 0) {
      bool joined = false;
      for_each_fusion_producer(g, v, [&](OpId q) { joined = joined || p.fusion[static_cast<std::size_t>(q)] == p.fusion[i]; });
      af[r] = joined ? 1 : 0;
    }
  }
  return a;
}

// `same_placement` (optional): a decision of actions with the same device and fusion actions,
// decoded with the same num_devices and options but perhaps other ties: its devices and fusion
// groups (rules 1 and 3, the costly part) are taken, and only the priorities and ties are decoded.
// The anchor decodes each heuristic placement with and without rank priorities and in several tie
// orders. The device actions are checked against it where no colocation moved an op.
// `base` (optional): the log of an earlier decode of this graph and policy graph (see DecodeLog;
// one made with other options or devices is not used); `log` (optional): this decode's, filled in
// (left empty with `same_placement`, which merges nothing). Neither changes the decision.
inline Decision decode(const OpGraph& g, const PolicyGraph& pg, const Actions& a, int num_devices,
                       const DecodeOptions& opt = {}, const Decision* same_placement = nullptr,
                       const DecodeLog* base = nullptr, DecodeLog* log = nullptr) {
  const std::int32_t n = g.num_ops();
  GO_CHECK(pg.num_nodes == n, g.where(), "decode: the policy graph has ", pg.num_nodes, " rows but the graph has ", n,
           " ops");
  GO_CHECK(num_devices >= 1, "decode: num_devices ", num_devices, " must be >= 1");
  GO_CHECK(!base || base != log, "decode: the base log and the log to write must be two objects");
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
  const TieOrder ties = opt.ties == TieOrder::graph ? pg.ties : opt.ties;
  if (ties == TieOrder::program) {
    d.tie = pg.tie;
  } else if (ties == TieOrder::depth_first) {
    d.tie = pg.tie_depth_first;
  } else if (ties == TieOrder::latest) {
    d.tie.resize(N);
    const float below_one = std::nextafter(1.f, 0.f);
    for (std::size_t r = 0; r < N; ++r)
      d.tie[static_cast<std::size_t>(pg.order[r])] =
          std::min(below_one, static_cast<float>(static_cast<double>(r) / static_cast<double>(N)));
  }
  d.fusion_group.assign(N, -1);
  for (std::int32_t i = 0; i < n; ++i) {
    const std::int32_t r = pg.row_of[static_cast<std::size_t>(i)];
    GO_CHECK(ad[r] >= 0 && ad[r] < num_devices, "decode: device action ", ad[r], " of ", g.label(i),
             " out of range [0, ", num_devices, ")");
    GO_CHECK(ap[r] >= 0, "decode: negative priority action ", ap[r], " of ", g.label(i));
    d.device[static_cast<std::size_t>(i)] = ad[r];
    d.priority[static_cast<std::size_t>(i)] = ap[r];
  }
  if (same_placement) {
    const Decision& s = *same_placement;
    GO_CHECK(s.num_devices == num_devices && s.device.size() == N && s.fusion_group.size() == N,
             "decode: the decision to take the placement from is for ", s.device.size(), " ops on ", s.num_devices,
             " devices, not ", n, " on ", num_devices);
    for (std::size_t i = 0; i < N; ++i)
      GO_CHECK(s.device[i] == d.device[i] || (opt.colocate && g.op(static_cast<OpId>(i)).colocation >= 0),
               "decode: device action ", d.device[i], " of ", g.label(static_cast<OpId>(i)),
               " differs from the decision whose placement is taken (", s.device[i], ")");
    if (log) *log = DecodeLog{};  // no merges made: a log no decode takes
    Decision taken = s;
    taken.tie = std::move(d.tie);
    taken.priority = std::move(d.priority);
    return taken;
  }
  if (opt.colocate) {  // a group's ops take the device of its first op in topological order
    Colocated made;
    if (pg.colocation_groups < 0) made = colocated_ops(g);  // a policy graph from arrays lists none
    const auto& ops = pg.colocation_groups < 0 ? made.ops : pg.colocated;
    std::vector<std::int32_t> first(static_cast<std::size_t>(pg.colocation_groups < 0 ? made.groups : pg.colocation_groups), -1);
    for (const auto& [v, c] : ops) {
      std::int32_t& f = first[static_cast<std::size_t>(c)];
      if (f < 0) f = d.device[static_cast<std::size_t>(v)];
      else d.device[static_cast<std::size_t>(v)] = f;
    }
  }

  // The merges run on the PolicyGraph's renumbered copy where it has one (FusionIndex's relabel):
  // there op i is row i (the rows are the topological order), its producers and their tensors
  // are the same, and the groups map back to the same groups. A large training graph decodes in
  // 7-23% less time, the cycle searches finding their ops near each other in memory (bench/README.md,
  // "Decoding on the graph's topological order").
  const OpGraph& fg = pg.fusion_index && pg.fusion_index->topo && pg.fusion_index->fits(g) ? *pg.fusion_index->topo : g;
  const bool renumbered = &fg != &g;
  std::vector<std::int32_t> inner_device;  // per op of fg
  if (renumbered) {
    inner_device.resize(N);
    for (std::size_t i = 0; i < N; ++i) inner_device[i] = d.device[static_cast<std::size_t>(pg.order[i])];
  }
  const std::vector<std::int32_t>& device = renumbered ? inner_device : d.device;
  const auto lease = FusionGroupsPool::take(pg.fusion_groups.get(), fg, opt.search_budget, pg.fusion_index);
  FusionGroups& groups = *lease;
  const bool join_main = (opt.join == FusionJoin::graph ? pg.join : opt.join) == FusionJoin::main;
  const auto order = fg.topo_order();
  auto fuse_of = [&](OpId v) { return af[renumbered ? v : pg.row_of[static_cast<std::size_t>(v)]]; };
  auto position = [&](OpId v) {  // in the merge order (on the renumbered copy, the op's id)
    return static_cast<std::size_t>(renumbered ? v : fg.topo_position(v));
  };
  if (log) {
    *log = DecodeLog{};
    log->graph = &fg;
    log->num_devices = num_devices;
    log->colocate = opt.colocate;
    log->join_main = join_main;
    log->search_budget = opt.search_budget;
    log->device.resize(N);
    log->fuse.resize(N);
    log->outcome.assign(N, DecodeLog::not_asked);
    log->read_off.assign(N + 1, 0);
    for (std::size_t k = 0; k < N; ++k) {
      log->device[k] = device[static_cast<std::size_t>(order[k])];
      log->fuse[k] = fuse_of(order[k]) == 1 ? 1 : 0;
    }
  }
  // an op's outcome in the decision's counts, decided here or taken from the base
  auto tally = [&](DecodeLog::Outcome o) {
    if (o == DecodeLog::not_asked) return;
    ++d.fuse_requested;
    if (o == DecodeLog::fused) ++d.fused;
    else if (o == DecodeLog::refused_device) ++d.refused_device;
    else if (o == DecodeLog::refused_rule) ++d.refused_rule;
    else if (o == DecodeLog::refused_cycle) ++d.refused_cycle;
  };
  // the first position whose decision may differ from the base's, and the base's merges before it
  std::size_t from = 0;
  const bool use_base = base && base->graph == &fg && base->num_devices == num_devices &&
                        base->colocate == opt.colocate && base->join_main == join_main &&
                        base->search_budget == opt.search_budget && base->device.size() == N &&
                        base->read_off.size() == N + 1;
  std::size_t bm = 0;  // the base's first merge not taken yet
  if (use_base) {
    // An op's device is read where it is decided, if it asks to fuse and has producers, and where
    // its consumers are (each joins its producers on its own device); its fuse action where it is
    // decided. A weight moved with its layer changes nothing before the layer's first consumer.
    from = N;
    for (std::size_t k = 0; k < from; ++k) {
      const OpId v = order[k];
      const bool fuse = fuse_of(v) == 1;
      if (base->fuse[k] != (fuse ? 1 : 0)) {
        from = k;
      } else if (base->device[k] != device[static_cast<std::size_t>(v)]) {
        if (fuse && !fg.pred(v).empty()) {
          from = k;
        } else {
          for (OpId c : fg.succ(v)) from = std::min(from, position(c));
        }
      }
    }
    for (; bm < base->merges.size() && static_cast<std::size_t>(base->merges[bm].position) < from; ++bm) {
      const DecodeLog::Merge& m = base->merges[bm];
      groups.replay(m.a, m.b, m.bound, m.exact);
      if (log) log->merges.push_back(m);
    }
    for (std::size_t k = 0; k < from; ++k) {
      const auto o = static_cast<DecodeLog::Outcome>(base->outcome[k]);
      if (log) log->outcome[k] = o;
      tally(o);
    }
    if (log) {
      std::copy(base->read_off.begin(), base->read_off.begin() + static_cast<std::ptrdiff_t>(from) + 1, log->read_off.begin());
      log->reads.assign(base->reads.begin(), base->reads.begin() + base->read_off[from]);
    }
  }
  // After `from`, the groups that may differ from the base's: `changed` per group (read at its
  // FusionGroups::group() representative), and per position every member of such a group
  // (`marked`). A group is marked whole when it changes, and a group that merges with a changed
  // one is marked before the merge, so each op is marked once.
  const bool incremental = use_base && from < N;
  std::vector<char> changed, marked;
  if (incremental) {
    changed.assign(N, 0);
    marked.assign(N, 0);
  }
  auto mark_members = [&](OpId x) {
    groups.for_each_member(x, [&](OpId m) { marked[position(m)] = 1; });
  };
  auto change = [&](OpId x) {
    const auto r = static_cast<std::size_t>(groups.group(x));
    if (changed[r]) return;
    changed[r] = 1;
    mark_members(x);
  };
  auto is_changed = [&](OpId x) { return changed[static_cast<std::size_t>(groups.group(x))] != 0; };
  auto reads_unchanged = [&](std::size_t k) {  // every group the base's searches at k read
    for (auto e = base->read_off[k]; e < base->read_off[k + 1]; ++e)
      if (marked[static_cast<std::size_t>(base->reads[static_cast<std::size_t>(e)])]) return false;
    return true;
  };
  if (log) groups.record_reads(&log->reads);
  std::vector<std::pair<std::int64_t, OpId>> largest_first;
  std::vector<std::pair<OpId, OpId>> made;  // the merges decided at the current op
  for (std::size_t k = from; k < N; ++k) {
    const OpId v = order[k];
    const bool asks = fuse_of(v) == 1;
    const std::int32_t dv = device[static_cast<std::size_t>(v)];
    // the base's merges at this position
    std::size_t bend = bm;
    if (incremental)
      while (bend < base->merges.size() && static_cast<std::size_t>(base->merges[bend].position) == k) ++bend;
    if (log) log->read_off[k] = static_cast<std::int64_t>(log->reads.size());
    // (v itself is alone until its own position, so its group is the base's)
    if (incremental && asks && base->fuse[k] == 1 && base->device[k] == dv) {
      bool same = true;
      for (OpId p : fg.pred(v))
        same = same && base->device[position(p)] == device[static_cast<std::size_t>(p)] &&
               !is_changed(p);
      if (same && reads_unchanged(k)) {  // everything the base's decision read is as it was: take it
        for (; bm < bend; ++bm) {
          const DecodeLog::Merge& m = base->merges[bm];
          groups.replay(m.a, m.b, m.bound, m.exact);
          if (log) log->merges.push_back(m);
        }
        const auto o = static_cast<DecodeLog::Outcome>(base->outcome[k]);
        tally(o);
        if (log) {
          log->outcome[k] = o;
          log->reads.insert(log->reads.end(), base->reads.begin() + base->read_off[k], base->reads.begin() + base->read_off[k + 1]);
        }
        continue;
      }
    }
    made.clear();
    if (asks) {
      if (log) ++log->decided;
      bool joined = false;
      auto first_refusal = DecodeLog::none_refused;  // the first producer's reason, where none is joined
      auto join = [&](OpId p) {
        auto refusal = DecodeLog::none_refused;
        if (device[static_cast<std::size_t>(p)] != dv) {
          refusal = DecodeLog::refused_device;
        } else {
          // a group that merges with a changed one is changed: its members are marked first
          const bool cp = incremental && is_changed(p), cv = incremental && is_changed(v);
          if (cp != cv) mark_members(cp ? v : p);
          switch (groups.merge(p, v)) {
            case FusionGroups::Merge::merged:
              joined = true;
              if (cp || cv) changed[static_cast<std::size_t>(groups.group(v))] = 1;
              made.emplace_back(p, v);
              if (log)
                log->merges.push_back({p, v, static_cast<std::int32_t>(k), groups.last_union_exact(),
                                       groups.last_union_bound()});
              break;
            case FusionGroups::Merge::same_group: break;  // a producer feeding two inputs, or one the group holds
            case FusionGroups::Merge::refused_rule: refusal = DecodeLog::refused_rule; break;
            case FusionGroups::Merge::refused_cycle: refusal = DecodeLog::refused_cycle; break;
          }
        }
        if (first_refusal == DecodeLog::none_refused) first_refusal = refusal;
      };
      if (join_main) {
        fusion_producers_largest_first(fg, v, largest_first);
        for (std::size_t j = 0; j < largest_first.size() && !joined; ++j) join(largest_first[j].second);
      } else {
        for_each_fusion_producer(fg, v, join);
      }
      const DecodeLog::Outcome o = joined ? DecodeLog::fused : first_refusal;
      tally(o);
      if (log) log->outcome[k] = o;
    }
    if (incremental) {
      // Merges other than the base's leave this op's group unlike the base's, and the groups of
      // the producers the base merged it with (those merged here are in its group now).
      bool same = bend - bm == made.size();
      for (std::size_t j = 0; same && j < made.size(); ++j)
        same = base->merges[bm + j].a == made[j].first && base->merges[bm + j].b == made[j].second;
      if (!same) {
        change(v);
        for (std::size_t j = bm; j < bend; ++j) change(base->merges[j].a);
      }
      bm = bend;
    }
  }
  if (log) {
    groups.record_reads(nullptr);
    log->read_off[N] = static_cast<std::int64_t>(log->reads.size());
  }
  d.fusion_group = groups.fusion();
  if (renumbered) {  // back to g's ids: op i is pg.order[i], and so is its group's leader
    std::vector<std::int32_t> f(N, -1);
    for (std::size_t i = 0; i < N; ++i)
      if (const std::int32_t l = d.fusion_group[i]; l >= 0)
        f[static_cast<std::size_t>(pg.order[i])] = pg.order[static_cast<std::size_t>(l)];
    d.fusion_group = std::move(f);
  }
  d.num_groups = groups.num_groups();
  return d;
}

}  // namespace go::policy
