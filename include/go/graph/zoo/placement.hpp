#pragma once
// The workload zoo: human-expert placements. zoo_human_placement applies the literature's rule of a
// zoo workload (the rules: go/graph/zoo.hpp, "HUMAN-EXPERT PLACEMENT"); default_human_placement is
// the generic rule for any graph. Both place forward ops first and let training ops follow them
// (finish_placement).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "go/core/error.hpp"
#include "go/graph/cost.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/zoo/common.hpp"

namespace go {
namespace detail::zoo {

// ---- placement helpers ------------------------------------------------------------------------
inline std::string_view component(std::string_view name, int k) {
  for (int i = 0; i < k; ++i) {
    const auto p = name.find('/');
    if (p == std::string_view::npos) return {};
    name.remove_prefix(p + 1);
  }
  return name.substr(0, name.find('/'));
}
// "l12_fw" with prefix "l" -> 12; -1 when `s` is not prefix + digits (+ "_suffix").
inline std::int64_t index_after(std::string_view s, std::string_view prefix) {
  if (s.substr(0, prefix.size()) != prefix || s.size() == prefix.size()) return -1;
  std::int64_t v = 0;
  std::size_t i = prefix.size();
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) v = v * 10 + (s[i] - '0');
  if (i == prefix.size() || (i < s.size() && s[i] != '_')) return -1;
  return v;
}

// Unit u of `units` ordered units on k devices: contiguous blocks when units >= k, else one each.
inline std::int32_t block(std::int64_t u, std::int64_t units, int k) {
  if (units >= k) return static_cast<std::int32_t>(u * k / units);
  return static_cast<std::int32_t>(u);
}

// The forward op of a backward/update op by make_training_graph's names, or -1.
inline OpId anchor_by_name(std::string_view s, const std::unordered_map<std::string_view, OpId>& fwd) {
  auto look = [&](std::string_view base) -> OpId {
    auto it = fwd.find(base);
    return it == fwd.end() ? -1 : it->second;
  };
  auto ends = [&](std::string_view suf) { return s.size() > suf.size() && s.substr(s.size() - suf.size()) == suf; };
  if (ends("/update")) return look(s.substr(0, s.size() - 7));
  if (ends("/grad")) return look(s.substr(0, s.size() - 5));
  const auto p = s.rfind("/grad_sum");
  if (p != std::string_view::npos && p > 0) {
    bool digits = true;
    for (std::size_t i = p + 9; i < s.size(); ++i) digits = digits && s[i] >= '0' && s[i] <= '9';
    if (digits) return look(s.substr(0, p));
  }
  return -1;
}

// Completes a placement whose forward ops (those the rule knows) are set: forward ops the rule left
// out follow their producer; backward/update ops follow their forward op; colocation groups share
// their forward member's device; the rest follow a placed neighbour (else device 0).
inline void finish_placement(const OpGraph& g, std::vector<std::int32_t>& dev) {
  const auto n = static_cast<std::size_t>(g.num_ops());
  auto follow_pred = [&](OpId v) -> std::int32_t {
    for (OpId u : g.pred(v))
      if (dev[static_cast<std::size_t>(u)] >= 0) return dev[static_cast<std::size_t>(u)];
    return -1;
  };
  for (OpId v : g.topo_order())
    if (dev[static_cast<std::size_t>(v)] < 0 && g.op(v).role == OpRole::forward) dev[static_cast<std::size_t>(v)] = follow_pred(v);
  std::unordered_map<std::string_view, OpId> fwd;
  fwd.reserve(n);
  bool training = false;
  for (const Op& o : g.ops()) {
    if (o.role == OpRole::forward) fwd.emplace(g.name(o.id), o.id);
    else training = true;
  }
  if (training)
    for (const Op& o : g.ops()) {
      if (o.role == OpRole::forward) continue;
      const OpId a = anchor_by_name(g.name(o.id), fwd);
      if (a >= 0) dev[static_cast<std::size_t>(o.id)] = dev[static_cast<std::size_t>(a)];
    }
  std::unordered_map<std::int32_t, std::int32_t> group_dev;
  for (const Op& o : g.ops())
    if (o.colocation >= 0 && o.role == OpRole::forward && dev[static_cast<std::size_t>(o.id)] >= 0)
      group_dev.emplace(o.colocation, dev[static_cast<std::size_t>(o.id)]);
  for (const Op& o : g.ops())
    if (o.colocation >= 0) {
      auto it = group_dev.find(o.colocation);
      if (it != group_dev.end()) dev[static_cast<std::size_t>(o.id)] = it->second;
    }
  for (OpId v : g.topo_order())
    if (dev[static_cast<std::size_t>(v)] < 0) dev[static_cast<std::size_t>(v)] = follow_pred(v);
  auto topo = g.topo_order();
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    auto& d = dev[static_cast<std::size_t>(*it)];
    if (d >= 0) continue;
    for (OpId w : g.succ(*it))
      if (dev[static_cast<std::size_t>(w)] >= 0) {
        d = dev[static_cast<std::size_t>(w)];
        break;
      }
  }
  for (auto& d : dev) d = std::max(d, 0);
}

// Branch splitting (Inception modules, AmoebaNet cells): modules in op order; the branches of a
// module go, heaviest first, to the least-loaded device the module has not used yet (any device
// once all are used); a module's other ops go with its heaviest branch; modules without branches
// go whole to the least-loaded device.
template <class BranchOf>
void split_branches(const OpGraph& g, int k, std::vector<std::int32_t>& dev, BranchOf branch_of) {
  const DeviceSpec spec;
  struct Module {
    std::map<std::int64_t, std::pair<double, std::vector<OpId>>> branches;
    double glue_load = 0;
    std::vector<OpId> glue;
  };
  std::vector<std::string_view> order;
  std::unordered_map<std::string_view, Module> modules;
  for (const Op& o : g.ops()) {
    if (o.role != OpRole::forward) continue;
    const std::string_view name = g.name(o.id);
    const std::string_view m = name.substr(0, name.find('/'));
    auto [it, fresh] = modules.try_emplace(m);
    if (fresh) order.push_back(m);
    const double t = op_time(o, spec);
    const std::int64_t b = branch_of(component(name, 1));
    if (b >= 0) {
      auto& br = it->second.branches[b];
      br.first += t;
      br.second.push_back(o.id);
    } else {
      it->second.glue_load += t;
      it->second.glue.push_back(o.id);
    }
  }
  std::vector<double> load(static_cast<std::size_t>(k), 0.0);
  auto least = [&] { return static_cast<std::int32_t>(std::min_element(load.begin(), load.end()) - load.begin()); };
  for (std::string_view m : order) {
    Module& mod = modules[m];
    if (mod.branches.empty()) {
      const std::int32_t d = least();
      for (OpId v : mod.glue) dev[static_cast<std::size_t>(v)] = d;
      load[static_cast<std::size_t>(d)] += mod.glue_load;
      continue;
    }
    std::vector<std::pair<double, std::vector<OpId>>*> bs;
    for (auto& [b, br] : mod.branches) bs.push_back(&br);
    std::stable_sort(bs.begin(), bs.end(), [](auto* a, auto* b) { return a->first > b->first; });
    std::int32_t heaviest = -1;
    std::vector<char> taken(static_cast<std::size_t>(k), 0);
    int free_devices = k;
    for (auto* br : bs) {
      std::int32_t d = -1;  // the least-loaded device this module has not used yet, if any is left
      for (std::int32_t c = 0; c < k; ++c)
        if ((free_devices == 0 || !taken[static_cast<std::size_t>(c)]) &&
            (d < 0 || load[static_cast<std::size_t>(c)] < load[static_cast<std::size_t>(d)]))
          d = c;
      if (!taken[static_cast<std::size_t>(d)]) {
        taken[static_cast<std::size_t>(d)] = 1;
        --free_devices;
      }
      if (heaviest < 0) heaviest = d;
      for (OpId v : br->second) dev[static_cast<std::size_t>(v)] = d;
      load[static_cast<std::size_t>(d)] += br->first;
    }
    for (OpId v : mod.glue) dev[static_cast<std::size_t>(v)] = heaviest;
    load[static_cast<std::size_t>(heaviest)] += mod.glue_load;
  }
}

// Cuts `order` (forward ops) into k contiguous blocks of equal total `weight` (weight[i] is
// order[i]'s; an op goes to the block where the middle of its weight falls), sets their devices, and
// lets the other ops follow (finish_placement).
inline std::vector<std::int32_t> cut_weighted_order(const OpGraph& g, int k, const std::vector<OpId>& order,
                                                    const std::vector<double>& weight) {
  std::vector<std::int32_t> dev(static_cast<std::size_t>(g.num_ops()), -1);
  double total = 0;
  for (double w : weight) total += w;
  double cum = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const double t = weight[i];
    const double mid = total > 0 ? (cum + 0.5 * t) / total : 0.0;
    dev[static_cast<std::size_t>(order[i])] = std::min(k - 1, static_cast<std::int32_t>(mid * k));
    cum += t;
  }
  finish_placement(g, dev);
  return dev;
}

// Estimated compute of each op of `order` (op_time on a V100), the weights of the equal-compute cuts.
inline std::vector<double> v100_times(const OpGraph& g, const std::vector<OpId>& order) {
  const DeviceSpec spec;
  std::vector<double> t;
  t.reserve(order.size());
  for (OpId v : order) t.push_back(op_time(g.op(v), spec));
  return t;
}

// Cuts `order` (forward ops) into k contiguous blocks of equal estimated compute.
inline std::vector<std::int32_t> cut_forward_order(const OpGraph& g, int k, const std::vector<OpId>& order) {
  return cut_weighted_order(g, k, order, v100_times(g, order));
}

}  // namespace detail::zoo

// Generic expert-style placement for any graph on k devices: forward ops ordered by topological depth
// (longest path from the inputs, ties by id), cut into k contiguous blocks of equal estimated compute
// (op_time on a V100); backward/update ops follow their forward op (see zoo.hpp's header comment).
// default_human_order is that order of the forward ops. go::human_plan (baselines/human.hpp) also
// balances memory where these blocks do not fit.
inline std::vector<OpId> default_human_order(const OpGraph& g) {
  const auto n = static_cast<std::size_t>(g.num_ops());
  std::vector<std::int32_t> level(n, 0);
  std::vector<OpId> fwd;
  for (OpId v : g.topo_order()) {
    if (g.op(v).role != OpRole::forward) continue;
    for (OpId u : g.pred(v))
      if (g.op(u).role == OpRole::forward)
        level[static_cast<std::size_t>(v)] = std::max(level[static_cast<std::size_t>(v)], level[static_cast<std::size_t>(u)] + 1);
    fwd.push_back(v);
  }
  std::stable_sort(fwd.begin(), fwd.end(), [&](OpId a, OpId b) {
    const auto la = level[static_cast<std::size_t>(a)], lb = level[static_cast<std::size_t>(b)];
    return la != lb ? la < lb : a < b;
  });
  return fwd;
}
inline std::vector<std::int32_t> default_human_placement(const OpGraph& g, int k) {
  GO_CHECK(k >= 1, g.where(), "default_human_placement: k must be at least 1, got ", k);
  return detail::zoo::cut_forward_order(g, k, default_human_order(g));
}

// Pipeline stages for any graph on k devices: forward ops in depth-first topological order (which
// follows a chain to its end before the next, so a stage is a run of whole steps of a recurrence,
// e.g. Transformer-XL segments or RNN time steps), cut into k contiguous blocks of equal estimated
// compute; backward/update ops follow their forward op, so stage s's backward overlaps stage s+1's
// forward where the graph allows (GPipe / PipeDream stages without micro-batches). pipeline_order is
// that order of the forward ops. It balances compute only; go::pipeline_plan (baselines/human.hpp)
// also balances memory where these stages do not fit.
inline std::vector<OpId> pipeline_order(const OpGraph& g) {
  std::vector<OpId> fwd;
  for (OpId v : depth_first_topo_order(g))
    if (g.op(v).role == OpRole::forward) fwd.push_back(v);
  return fwd;
}
inline std::vector<std::int32_t> pipeline_placement(const OpGraph& g, int k) {
  GO_CHECK(k >= 1, g.where(), "pipeline_placement: k must be at least 1, got ", k);
  return detail::zoo::cut_forward_order(g, k, pipeline_order(g));
}

// For each op, the index in `order` (forward ops) of the op whose device it takes when only the ops
// of `order` are placed (finish_placement's rules): what a block of `order` brings with it.
inline std::vector<std::int32_t> forward_owner(const OpGraph& g, const std::vector<OpId>& order) {
  std::vector<std::int32_t> owner(static_cast<std::size_t>(g.num_ops()), -1);
  for (std::size_t i = 0; i < order.size(); ++i) owner[static_cast<std::size_t>(order[i])] = static_cast<std::int32_t>(i);
  detail::zoo::finish_placement(g, owner);
  return owner;
}

// The human-expert placement of a zoo graph (forward or training) on k devices: a device in [0, k)
// per op, by the rules in zoo.hpp's header comment. A graph that is not a zoo workload is a go::Error.
inline std::vector<std::int32_t> zoo_human_placement(const OpGraph& g, int k) {
  using namespace detail::zoo;
  const std::string& gname = g.info().name;
  const auto ni = parse_name(gname);
  GO_CHECK(ni.has_value(), g.where(), "zoo_human_placement: '", gname, "' is not a zoo workload (known: ",
           known_names(), "); use default_human_placement");
  GO_CHECK(k >= 1, g.where(), "zoo_human_placement: k must be at least 1, got ", k);
  const auto n = static_cast<std::size_t>(g.num_ops());
  std::vector<std::int32_t> dev(n, -1);
  const std::int64_t L = ni->number;
  auto mod = [&](std::int64_t i) { return static_cast<std::int32_t>(i % k); };
  const std::int32_t softmax_dev = mod(L < k ? L : L - 1);  // tensorflow/nmt's output layer
  auto for_forward = [&](auto rule) {
    for (const Op& o : g.ops())
      if (o.role == OpRole::forward) dev[static_cast<std::size_t>(o.id)] = rule(std::string_view(g.name(o.id)));
  };
  switch (ni->family) {
    case Family::rnnlm:
      for_forward([&](std::string_view s) -> std::int32_t {
        const auto c0 = component(s, 0);
        if (c0 == "embedding") return 0;
        if (c0 == "softmax") return softmax_dev;
        const auto l = index_after(c0, "lstm");
        return l >= 0 ? mod(l) : -1;
      });
      break;
    case Family::gnmt:
      for_forward([&](std::string_view s) -> std::int32_t {
        const auto c0 = component(s, 0), c1 = component(s, 1);
        if (c0 != "encoder" && c0 != "decoder") return -1;
        if (c1 == "embedding" || c1 == "attention") return 0;
        if (c1 == "memory") return mod(L - 1);
        if (c1 == "softmax") return softmax_dev;
        const auto l = index_after(c1, "l");
        return l >= 0 ? mod(l) : -1;
      });
      break;
    case Family::transformer_xl:
      for_forward([&](std::string_view s) -> std::int32_t {
        const auto c0 = component(s, 0);
        if (c0 == "embedding") return block(0, L, k);
        if (c0 == "softmax") return block(L - 1, L, k);
        const auto l = index_after(c0, "layer");
        return l >= 0 ? block(l, L, k) : -1;
      });
      break;
    case Family::wavenet: {
      std::int64_t per_stack = 1;
      for (const Op& o : g.ops())
        if (o.role == OpRole::forward) {
          const auto name = std::string_view(g.name(o.id));
          if (index_after(component(name, 0), "stack") >= 0)
            per_stack = std::max(per_stack, index_after(component(name, 1), "layer") + 1);
        }
      const std::int64_t layers = L * per_stack;
      for_forward([&](std::string_view s) -> std::int32_t {
        const auto c0 = component(s, 0);
        if (c0 == "input") return block(0, layers, k);
        if (c0 == "head") return block(layers - 1, layers, k);
        const auto st = index_after(c0, "stack"), i = index_after(component(s, 1), "layer");
        return st >= 0 && i >= 0 ? block(st * per_stack + i, layers, k) : -1;
      });
      break;
    }
    case Family::inception_v3:
      split_branches(g, k, dev, [](std::string_view c1) { return index_after(c1, "b"); });
      break;
    case Family::amoebanet:
      split_branches(g, k, dev, [](std::string_view c1) { return index_after(c1, "comb"); });
      break;
  }
  finish_placement(g, dev);
  return dev;
}

}  // namespace go
