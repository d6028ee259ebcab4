#pragma once
// Memory-constrained placers and list schedulers: HEFT (Topcuoglu et al. 2002) and Baechi's m-TOPO,
// m-ETF and m-SCT (Jeon et al., SoCC 2020). Each returns a Plan: a device per op and, for the list
// schedulers, priorities that replay their schedule (the op they scheduled first gets the highest
// priority; the simulator runs the ready op of highest priority on each device).
//
// Cost model of the schedulers (the simulator then measures the plan):
//   op time       go::op_time on the device's spec (a measured time when the graph has one);
//   communication an edge u -> v across devices costs Cluster::transfer_time(du, dv, tensor bytes)
//                 (a control edge: the link latency), each tensor sent once per destination device,
//                 serialized on the sender's send channel and the receiver's receive channel as
//                 the simulator's duplex model does (HEFT and Baechi's placers ignore contention;
//                 without it they flood the links of training graphs);
//   memory        Baechi's static estimate per op: parameters + outputs + temporary bytes
//                 (detail::base::op_footprint); a device accepts an op while its sum stays within
//                 DeviceSpec::memory_bytes. When no device can take an op the op goes to the device
//                 with the most room left and the result's note says how many ops overflowed (the
//                 estimate is conservative: the simulator frees activations, so such a plan may
//                 still fit; if not, the final simulation reports out of memory).
// Colocation groups (Op::colocation) are kept on one device: the first member placed fixes it.
// Zero-time source ops (weights' variables, graph inputs) are then moved, with their colocation
// group, to the device that reads most of their bytes (detail::base::attach_sources).
//
// HEFT: ops in decreasing upward rank (mean op time over devices + max over successors of mean
//   transfer time + their rank), each on the device giving the earliest finish time (non-insertion
//   variant: an op starts after the last op already on that device).
// m-TOPO: ops in depth-first topological order (detail::base::depth_first_topo_order, which keeps
//   chains together as the DFS-based order of Baechi's networkx implementation does) fill device 0 up to min(capacity, total footprint / k + largest
//   op footprint), then device 1, and so on (Baechi's rule); no priorities (first ready, first run).
// m-ETF: earliest-time-first list scheduling. Documented approximation of Baechi's global
//   (ready op, device) minimum: ready ops are taken in order of their data-ready time (the latest
//   finish of their predecessors; ties: larger upward rank), and each goes to the device where it
//   can start earliest (ties: earliest finish, then lowest index), within memory.
// m-SCT: m-ETF plus favourite children. Baechi solves an LP relaxation to choose, for each op, at
//   most one favourite child (and each child at most one favourite parent) so that the chosen edges
//   are the ones whose transfers are worth avoiding. Documented approximation: a greedy matching on
//   the data edges in decreasing tensor size (an edge is chosen when neither its producer has a
//   favourite child nor its consumer a favourite parent yet). A favourite child is placed on its
//   parent's device unless another device lets it start earlier by more than the transfer it saves.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <queue>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "go/baselines/common.hpp"
#include "go/core/error.hpp"
#include "go/graph/cost.hpp"
#include "go/graph/graph.hpp"
#include "go/sim/cluster.hpp"
#include "go/sim/plan.hpp"

namespace go {

namespace detail::base {

struct LinkMeans {
  double latency = 0, inv_bandwidth = 0;
};
inline LinkMeans link_means(const Cluster& c) {
  LinkMeans m;
  const std::int32_t k = c.num_devices();
  if (k < 2) return m;
  for (std::int32_t s = 0; s < k; ++s)
    for (std::int32_t d = 0; d < k; ++d)
      if (s != d) {
        m.latency += c.link_latency(s, d);
        m.inv_bandwidth += 1.0 / c.link_bandwidth(s, d);
      }
  const double pairs = static_cast<double>(k) * (k - 1);
  m.latency /= pairs;
  m.inv_bandwidth /= pairs;
  return m;
}

// Upward rank: mean op time + max over successors (mean transfer + rank).
inline std::vector<double> upward_rank(const OpGraph& g, const Cluster& c, const std::vector<std::vector<double>>& times) {
  const auto n = static_cast<std::size_t>(g.num_ops());
  const std::int32_t k = c.num_devices();
  const LinkMeans lm = link_means(c);
  std::vector<double> rank(n, 0.0);
  const auto topo = g.topo_order();
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    const OpId v = *it;
    double mean = 0;
    for (std::int32_t d = 0; d < k; ++d) mean += times[static_cast<std::size_t>(d)][static_cast<std::size_t>(v)];
    mean /= k;
    double best = 0;
    const auto succ = g.succ(v);
    const auto st = g.succ_tensors(v);
    for (std::size_t e = 0; e < succ.size(); ++e) {
      const double comm = k < 2 ? 0.0 : lm.latency + edge_bytes(g, st[e]) * lm.inv_bandwidth;
      best = std::max(best, comm + rank[static_cast<std::size_t>(succ[e])]);
    }
    rank[static_cast<std::size_t>(v)] = mean + best;
  }
  return rank;
}

// State of a list scheduler: where and when each op ran, device availability and memory.
struct ListState {
  const OpGraph& g;
  const Cluster& c;
  std::vector<std::vector<double>> times;
  std::vector<double> finish;
  std::vector<std::int32_t> dev;
  std::vector<double> avail;
  std::vector<std::int64_t> used;
  Colocation coloc;
  std::vector<OpId> order;
  std::int64_t overflow = 0;

  ListState(const OpGraph& graph, const Cluster& cluster)
      : g(graph), c(cluster), times(op_times_per_device(graph, cluster)),
        finish(static_cast<std::size_t>(graph.num_ops()), 0.0), dev(static_cast<std::size_t>(graph.num_ops()), -1),
        avail(static_cast<std::size_t>(cluster.num_devices()), 0.0),
        used(static_cast<std::size_t>(cluster.num_devices()), 0), coloc(graph),
        send_free(static_cast<std::size_t>(cluster.num_devices()), 0.0),
        recv_free(static_cast<std::size_t>(cluster.num_devices()), 0.0) {}

  // Per-device send and receive channel free times, and when each tensor reached each device (a
  // tensor is sent once per destination, as in the simulator).
  std::vector<double> send_free, recv_free;
  std::unordered_map<std::int64_t, double> arrived;

  std::int64_t key(TensorId t, std::int32_t d) const {
    return static_cast<std::int64_t>(t) * c.num_devices() + d;
  }
  // When the input of v on edge (u, t) is available on device d: already there, or sent after u
  // finishes and both channels are free (without committing the channels).
  double arrival(OpId u, TensorId t, std::int32_t d) const {
    const std::int32_t du = dev[static_cast<std::size_t>(u)];
    const double f = finish[static_cast<std::size_t>(u)];
    if (du == d) return f;
    if (t < 0) return f + c.link_latency(du, d);
    if (auto it = arrived.find(key(t, d)); it != arrived.end()) return it->second;
    return std::max({f, send_free[static_cast<std::size_t>(du)], recv_free[static_cast<std::size_t>(d)]}) +
           c.transfer_time(du, d, edge_bytes(g, t));
  }
  // Earliest start of v on d given its placed predecessors.
  double est(OpId v, std::int32_t d) const {
    double t = avail[static_cast<std::size_t>(d)];
    const auto pred = g.pred(v);
    const auto pt = g.pred_tensors(v);
    for (std::size_t e = 0; e < pred.size(); ++e) t = std::max(t, arrival(pred[e], pt[e], d));
    return t;
  }
  double time_on(OpId v, std::int32_t d) const { return times[static_cast<std::size_t>(d)][static_cast<std::size_t>(v)]; }
  bool fits(OpId v, std::int32_t d) const {
    return used[static_cast<std::size_t>(d)] + op_footprint(g.op(v)) <= c.spec(d).memory_bytes;
  }
  // Devices v may go to: its colocation group's device, else every device with room (else the one
  // with the most room, counted as an overflow by assign()).
  template <class F>
  void for_candidates(OpId v, F&& f) const {
    const std::int32_t forced = coloc.forced(g.op(v));
    if (forced >= 0) {
      f(forced);
      return;
    }
    bool any = false;
    for (std::int32_t d = 0; d < c.num_devices(); ++d)
      if (fits(v, d)) {
        any = true;
        f(d);
      }
    if (any) return;
    std::int32_t best = 0;
    for (std::int32_t d = 1; d < c.num_devices(); ++d)
      if (c.spec(d).memory_bytes - used[static_cast<std::size_t>(d)] >
          c.spec(best).memory_bytes - used[static_cast<std::size_t>(best)])
        best = d;
    f(best);
  }
  // Places v on d: commits its transfers on the channels, then starts it when its inputs are there.
  void assign(OpId v, std::int32_t d) {
    if (!fits(v, d)) ++overflow;
    double start = avail[static_cast<std::size_t>(d)];
    const auto pred = g.pred(v);
    const auto pt = g.pred_tensors(v);
    for (std::size_t e = 0; e < pred.size(); ++e) {
      const double a = arrival(pred[e], pt[e], d);
      const std::int32_t du = dev[static_cast<std::size_t>(pred[e])];
      if (du != d && pt[e] >= 0 && arrived.emplace(key(pt[e], d), a).second) {
        send_free[static_cast<std::size_t>(du)] = a;
        recv_free[static_cast<std::size_t>(d)] = a;
      }
      start = std::max(start, a);
    }
    dev[static_cast<std::size_t>(v)] = d;
    finish[static_cast<std::size_t>(v)] = start + time_on(v, d);
    avail[static_cast<std::size_t>(d)] = finish[static_cast<std::size_t>(v)];
    used[static_cast<std::size_t>(d)] += op_footprint(g.op(v));
    coloc.set(g.op(v), d);
    order.push_back(v);
  }
  std::string overflow_note() const {
    if (overflow == 0) return {};
    return std::to_string(overflow) + " op(s) exceeded the static memory estimate of every device";
  }
  Plan plan(bool with_priority) const {
    Plan p;
    p.device = dev;
    if (with_priority) p.priority = priorities_from_order(g.num_ops(), order);
    return p;
  }
};

// Post-pass of the list schedulers: a source op that takes no time (a variable holding weights, a
// graph input) is ready at time 0 and so lands on device 0, making every consumer elsewhere fetch
// it through device 0's channels. Move each such op, with its colocation group, to the device that
// reads most of its bytes (where its consumers were placed), when that device's static memory
// estimate has room for the group.
inline void attach_sources(const OpGraph& g, const Cluster& c, ListState& s) {
  const std::int32_t k = c.num_devices();
  if (k < 2) return;
  std::unordered_map<std::int32_t, std::vector<OpId>> groups;
  for (const Op& o : g.ops())
    if (o.colocation >= 0) groups[o.colocation].push_back(o.id);
  std::vector<double> votes(static_cast<std::size_t>(k));
  std::vector<char> done(static_cast<std::size_t>(g.num_ops()), 0);
  for (OpId v = 0; v < g.num_ops(); ++v) {
    if (done[static_cast<std::size_t>(v)] || g.in_degree(v) != 0) continue;
    bool free = true;
    for (std::int32_t d = 0; d < k; ++d) free = free && s.time_on(v, d) == 0.0;
    if (!free) continue;
    const Op& o = g.op(v);
    std::vector<OpId> members = o.colocation >= 0 ? groups[o.colocation] : std::vector<OpId>{v};
    std::fill(votes.begin(), votes.end(), 0.0);
    std::int64_t bytes = 0;
    for (OpId m : members) {
      done[static_cast<std::size_t>(m)] = 1;
      bytes += op_footprint(g.op(m));
      if (g.in_degree(m) != 0) continue;
      const auto succ = g.succ(m);
      const auto st = g.succ_tensors(m);
      for (std::size_t e = 0; e < succ.size(); ++e)
        votes[static_cast<std::size_t>(s.dev[static_cast<std::size_t>(succ[e])])] += 1.0 + edge_bytes(g, st[e]);
    }
    const std::int32_t cur = s.dev[static_cast<std::size_t>(v)];
    const auto best = static_cast<std::int32_t>(std::max_element(votes.begin(), votes.end()) - votes.begin());
    if (best == cur || votes[static_cast<std::size_t>(best)] <= votes[static_cast<std::size_t>(cur)]) continue;
    if (s.used[static_cast<std::size_t>(best)] + bytes > c.spec(best).memory_bytes) continue;
    for (OpId m : members) s.dev[static_cast<std::size_t>(m)] = best;
    s.used[static_cast<std::size_t>(best)] += bytes;
    s.used[static_cast<std::size_t>(cur)] -= bytes;
  }
}

// m-ETF / m-SCT share the loop; `favourite_parent` empty for m-ETF.
inline Plan etf_schedule(const OpGraph& g, const Cluster& c, const std::vector<OpId>& favourite_parent, std::string& note) {
  ListState s(g, c);
  const std::vector<double> rank = upward_rank(g, c, s.times);
  const auto n = static_cast<std::size_t>(g.num_ops());
  std::vector<std::int32_t> missing(n);
  using Item = std::tuple<double, double, OpId>;  // (data-ready time, -rank, op): smallest first
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> ready;
  for (std::size_t v = 0; v < n; ++v) {
    missing[v] = g.in_degree(static_cast<OpId>(v));
    if (missing[v] == 0) ready.emplace(0.0, -rank[v], static_cast<OpId>(v));
  }
  while (!ready.empty()) {
    const OpId v = std::get<2>(ready.top());
    ready.pop();
    std::int32_t best = -1;
    double best_est = 0, best_eft = 0;
    s.for_candidates(v, [&](std::int32_t d) {
      const double e = s.est(v, d), f = e + s.time_on(v, d);
      if (best < 0 || e < best_est || (e == best_est && f < best_eft)) {
        best = d;
        best_est = e;
        best_eft = f;
      }
    });
    if (!favourite_parent.empty()) {
      const OpId p = favourite_parent[static_cast<std::size_t>(v)];
      if (p >= 0) {
        const std::int32_t dp = s.dev[static_cast<std::size_t>(p)];
        if (dp != best && s.coloc.forced(g.op(v)) < 0 && s.fits(v, dp)) {
          // the transfer p -> v that placing v with p saves
          double saved = 0;
          const auto pred = g.pred(v);
          const auto pt = g.pred_tensors(v);
          for (std::size_t e = 0; e < pred.size(); ++e)
            if (pred[e] == p) saved = std::max(saved, c.transfer_time(dp, best, edge_bytes(g, pt[e])));
          const double e = s.est(v, dp);
          if (e <= best_est + saved) {
            best = dp;
            best_est = e;
          }
        }
      }
    }
    s.assign(v, best);
    for (OpId w : g.succ(v))
      if (--missing[static_cast<std::size_t>(w)] == 0) {
        double t = 0;
        for (OpId u : g.pred(w)) t = std::max(t, s.finish[static_cast<std::size_t>(u)]);
        ready.emplace(t, -rank[static_cast<std::size_t>(w)], w);
      }
  }
  attach_sources(g, c, s);
  note = s.overflow_note();
  return s.plan(true);
}

}  // namespace detail::base

// HEFT with communication costs; `note` receives memory overflows, if any.
inline Plan heft_plan(const OpGraph& g, const Cluster& c, std::string* note = nullptr) {
  detail::base::ListState s(g, c);
  const std::vector<double> rank = detail::base::upward_rank(g, c, s.times);
  std::vector<OpId> order(g.topo_order().begin(), g.topo_order().end());
  // Decreasing rank is a topological order (rank(u) >= rank(v) for u -> v); ties keep topological order.
  std::stable_sort(order.begin(), order.end(), [&](OpId a, OpId b) {
    return rank[static_cast<std::size_t>(a)] > rank[static_cast<std::size_t>(b)];
  });
  for (OpId v : order) {
    std::int32_t best = -1;
    double best_eft = 0;
    s.for_candidates(v, [&](std::int32_t d) {
      const double f = s.est(v, d) + s.time_on(v, d);
      if (best < 0 || f < best_eft) {
        best = d;
        best_eft = f;
      }
    });
    s.assign(v, best);
  }
  detail::base::attach_sources(g, c, s);
  if (note) *note = s.overflow_note();
  return s.plan(true);
}

// Baechi's m-TOPO.
inline Plan m_topo_plan(const OpGraph& g, const Cluster& c, std::string* note = nullptr) {
  using detail::base::op_footprint;
  const std::int32_t k = c.num_devices();
  std::int64_t total = 0, largest = 0;
  for (const Op& o : g.ops()) {
    total += op_footprint(o);
    largest = std::max(largest, op_footprint(o));
  }
  std::vector<std::int64_t> cap(static_cast<std::size_t>(k)), used(static_cast<std::size_t>(k), 0);
  for (std::int32_t d = 0; d < k; ++d) cap[static_cast<std::size_t>(d)] = std::min(c.spec(d).memory_bytes, total / k + largest);
  detail::base::Colocation coloc(g);
  Plan p;
  p.device.assign(static_cast<std::size_t>(g.num_ops()), 0);
  std::int32_t cur = 0;
  std::int64_t overflow = 0;
  for (OpId v : detail::base::depth_first_topo_order(g)) {
    const Op& o = g.op(v);
    std::int32_t d = coloc.forced(o);
    if (d < 0) {
      while (cur + 1 < k && used[static_cast<std::size_t>(cur)] + op_footprint(o) > cap[static_cast<std::size_t>(cur)]) ++cur;
      d = cur;
    }
    if (used[static_cast<std::size_t>(d)] + op_footprint(o) > c.spec(d).memory_bytes) ++overflow;
    used[static_cast<std::size_t>(d)] += op_footprint(o);
    coloc.set(o, d);
    p.device[static_cast<std::size_t>(v)] = d;
  }
  if (note && overflow > 0) *note = std::to_string(overflow) + " op(s) exceeded the static memory estimate of their device";
  return p;
}

inline Plan m_etf_plan(const OpGraph& g, const Cluster& c, std::string* note = nullptr) {
  std::string s;
  Plan p = detail::base::etf_schedule(g, c, {}, s);
  if (note) *note = s;
  return p;
}

// Favourite parent of every op (-1: none) by the greedy matching described above.
inline std::vector<OpId> favourite_parents(const OpGraph& g) {
  struct E {
    double bytes;
    OpId u, v;
  };
  std::vector<E> edges;
  for (OpId u = 0; u < g.num_ops(); ++u) {
    const auto succ = g.succ(u);
    const auto st = g.succ_tensors(u);
    for (std::size_t e = 0; e < succ.size(); ++e)
      if (st[e] >= 0 && g.tensor(st[e]).bytes > 0) edges.push_back({static_cast<double>(g.tensor(st[e]).bytes), u, succ[e]});
  }
  std::stable_sort(edges.begin(), edges.end(), [](const E& a, const E& b) { return a.bytes > b.bytes; });
  const auto n = static_cast<std::size_t>(g.num_ops());
  std::vector<OpId> parent(n, -1), child(n, -1);
  for (const E& e : edges)
    if (child[static_cast<std::size_t>(e.u)] < 0 && parent[static_cast<std::size_t>(e.v)] < 0) {
      child[static_cast<std::size_t>(e.u)] = e.v;
      parent[static_cast<std::size_t>(e.v)] = e.u;
    }
  return parent;
}

inline Plan m_sct_plan(const OpGraph& g, const Cluster& c, std::string* note = nullptr) {
  std::string s;
  Plan p = detail::base::etf_schedule(g, c, favourite_parents(g), s);
  if (note) *note = s;
  return p;
}

}  // namespace go
