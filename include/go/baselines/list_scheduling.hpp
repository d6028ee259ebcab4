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
//                 on the channels of Cluster::channels as the simulator does: an op's remote inputs
//                 are sent in order of their producers' finish, each after its producer finishes
//                 and the sender's and receiver's channels are free, so they queue behind each
//                 other and behind earlier transfers (ListState::inputs_ready; HEFT and Baechi's
//                 placers ignore contention; without it they flood the links of training graphs:
//                 an op summing 40 remote 128 MB weight gradients looked as if it could start after
//                 one transfer);
//   memory        Baechi's static estimate per op: parameters + outputs + temporary bytes
//                 (detail::base::op_footprint); a device accepts an op while its sum stays within
//                 DeviceSpec::memory_bytes (place() scales these budgets when the estimate of the
//                 whole graph exceeds the cluster's memory, and adjusts them to the simulated
//                 peaks while the plan is out of memory: see place.hpp). When no device can take an op the
//                 op goes to the device with the most room left and the result's note says how
//                 many ops overflowed (the simulator, which frees activations, decides whether the
//                 plan fits).
// Colocation groups (Op::colocation) are kept on one device: the first member placed fixes it.
// Zero-time source ops (weights' variables, graph inputs) are not scheduled on their own (ready at
// time 0, they would all land on device 0 and every consumer elsewhere would fetch them through its
// channels): each goes, with the first consumer placed, to that consumer's device (or to its
// colocation group's device), so a weight lives where it is first read (ListState::lazy).
//
// HEFT: ops in decreasing upward rank (mean op time over devices + max over successors of mean
//   transfer time + their rank), each on the device giving the earliest finish time (non-insertion
//   variant: an op starts after the last op already on that device).
// m-TOPO: ops in depth-first topological order (depth_first_topo_order, which keeps
//   chains together as the DFS-based order of Baechi's networkx implementation does) fill device 0
//   up to its cap, then device 1, and so on (Baechi's rule); no priorities (first ready, first run).
//   An op's bytes on a device are its footprint plus a copy of each input produced on another
//   device. Cap of device d: min(budget_d, total footprint x budget_d / sum of budgets + largest op
//   footprint) (Baechi's total / k + largest for equal devices), without the min when the total
//   exceeds the budgets' sum. When the last device has no room for an op, the op goes to the device
//   with room where it adds the fewest bytes (where its inputs are), else to the one with the most
//   room: Baechi's rule would pile everything left on the last device (summed weight gradients
//   that read dozens of remote tensors ran it out of memory).
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
        recv_free(static_cast<std::size_t>(cluster.num_devices()), 0.0) {
    arrived.assign(static_cast<std::size_t>(graph.num_tensors()) * static_cast<std::size_t>(cluster.num_devices()), -1.0);
    lazy.assign(static_cast<std::size_t>(graph.num_ops()), 0);
    for (OpId v = 0; v < graph.num_ops(); ++v) {
      if (graph.in_degree(v) != 0) continue;
      bool free = true;
      for (std::int32_t d = 0; d < cluster.num_devices(); ++d) free = free && time_on(v, d) == 0.0;
      lazy[static_cast<std::size_t>(v)] = free ? 1 : 0;
    }
  }

  // Zero-time sources (a variable holding weights, a graph input) are not scheduled on their own:
  // ready at time 0, a list scheduler would put them all on device 0 and make every consumer
  // elsewhere fetch them through device 0's channels. Instead each goes, when its first consumer is
  // placed, to that consumer's device (or to its colocation group's device when the group is
  // already placed), as a parameter lives where it is first read. is_lazy(v): v is such an op and
  // is not placed yet.
  std::vector<char> lazy;
  bool is_lazy(OpId v) const { return lazy[static_cast<std::size_t>(v)] && dev[static_cast<std::size_t>(v)] < 0; }
  // The device an unplaced lazy pred would go to if its consumer went to d.
  std::int32_t lazy_device(OpId u, std::int32_t d) const {
    const std::int32_t f = coloc.forced(g.op(u));
    return f >= 0 ? f : d;
  }

  // Per-device send and receive channel free times (Cluster::channels: duplex uses both, shared
  // one channel per device for both directions, sender only the send channel), and when each tensor
  // reached each device (a tensor is sent once per destination, as in the simulator).
  std::vector<double> send_free, recv_free;
  // per (tensor, device): when the tensor arrived there, or -1 (a flat table, not a hash map: the
  // list schedulers look it up for every remote input of every op on every device)
  std::vector<double> arrived;

  std::size_t key(TensorId t, std::int32_t d) const {
    return static_cast<std::size_t>(t) * static_cast<std::size_t>(c.num_devices()) + static_cast<std::size_t>(d);
  }
  // When every input of v is on device d: inputs already there count at their arrival; the others
  // are sent in order of their producers' finish (the simulator's request order), each after its
  // producer finishes and once the channels are free from the previous ones, so the transfers v
  // needs queue behind each other (an op reading 40 remote 128 MB tensors waits for all 40). With
  // `commit` the channels stay reserved and the arrivals are recorded (assign()); without, nothing
  // changes (est()).
  double inputs_ready(OpId v, std::int32_t d, bool commit) {
    need_.clear();
    double t = 0;
    const auto pred = g.pred(v);
    const auto pt = g.pred_tensors(v);
    for (std::size_t e = 0; e < pred.size(); ++e) {
      const std::int32_t du = is_lazy(pred[e]) ? lazy_device(pred[e], d) : dev[static_cast<std::size_t>(pred[e])];
      const double f = finish[static_cast<std::size_t>(pred[e])];
      if (du == d) t = std::max(t, f);
      else if (pt[e] < 0) t = std::max(t, f + c.link_latency(du, d));
      else if (const double a = arrived[key(pt[e], d)]; a >= 0) t = std::max(t, a);
      else need_.push_back({f, du, pt[e]});
    }
    if (need_.empty()) return t;
    std::sort(need_.begin(), need_.end(), [](const Need& a, const Need& b) {
      return a.finish != b.finish ? a.finish < b.finish : a.t < b.t;
    });
    send_tmp_ = send_free;
    const ChannelModel cm = c.channels;
    double recv = cm == ChannelModel::shared ? send_tmp_[static_cast<std::size_t>(d)] : recv_free[static_cast<std::size_t>(d)];
    TensorId last = -1;
    for (const Need& x : need_) {
      if (x.t == last) continue;  // the same tensor on two edges travels once
      last = x.t;
      double& snd = send_tmp_[static_cast<std::size_t>(x.src)];
      const double start = std::max({x.finish, snd, cm == ChannelModel::sender ? 0.0 : recv});
      const double a = start + c.transfer_time(x.src, d, edge_bytes(g, x.t));
      snd = a;
      if (cm != ChannelModel::sender) recv = a;
      t = std::max(t, a);
      if (commit) arrived[key(x.t, d)] = a;
    }
    if (commit) {
      if (cm == ChannelModel::shared) send_tmp_[static_cast<std::size_t>(d)] = std::max(send_tmp_[static_cast<std::size_t>(d)], recv);
      else if (cm == ChannelModel::duplex) recv_free[static_cast<std::size_t>(d)] = recv;
      send_free = send_tmp_;
    }
    return t;
  }
  struct Need {
    double finish;
    std::int32_t src;
    TensorId t;
  };
  std::vector<Need> need_;     // scratch of inputs_ready()
  std::vector<double> send_tmp_;
  // Earliest start of v on d given its placed predecessors.
  double est(OpId v, std::int32_t d) { return std::max(avail[static_cast<std::size_t>(d)], inputs_ready(v, d, false)); }
  double time_on(OpId v, std::int32_t d) const { return times[static_cast<std::size_t>(d)][static_cast<std::size_t>(v)]; }
  // Static bytes placing v on d adds: v and the unplaced lazy preds that would come with it.
  std::int64_t bytes_with(OpId v, std::int32_t d) const {
    std::int64_t b = op_footprint(g.op(v));
    for (OpId u : g.pred(v))
      if (is_lazy(u) && lazy_device(u, d) == d) b += op_footprint(g.op(u));
    return b;
  }
  bool fits(OpId v, std::int32_t d) const {
    return used[static_cast<std::size_t>(d)] + bytes_with(v, d) <= c.spec(d).memory_bytes;
  }
  void place_at(OpId v, std::int32_t d, double start) {
    dev[static_cast<std::size_t>(v)] = d;
    finish[static_cast<std::size_t>(v)] = start + time_on(v, d);
    avail[static_cast<std::size_t>(d)] = std::max(avail[static_cast<std::size_t>(d)], finish[static_cast<std::size_t>(v)]);
    used[static_cast<std::size_t>(d)] += op_footprint(g.op(v));
    coloc.set(g.op(v), d);
    order.push_back(v);
  }
  // Places the lazy sources nobody read (no consumer): on their group's device, else device 0.
  void place_unread_sources() {
    for (OpId v = 0; v < g.num_ops(); ++v)
      if (is_lazy(v)) place_at(v, lazy_device(v, 0), 0.0);
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
    for (OpId u : g.pred(v))
      if (is_lazy(u)) place_at(u, lazy_device(u, d), 0.0);
    place_at(v, d, std::max(avail[static_cast<std::size_t>(d)], inputs_ready(v, d, true)));
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

// m-ETF / m-SCT share the loop; `favourite_parent` empty for m-ETF.
inline Plan etf_schedule(const OpGraph& g, const Cluster& c, const std::vector<OpId>& favourite_parent, std::string& note) {
  ListState s(g, c);
  const std::vector<double> rank = upward_rank(g, c, s.times);
  const auto n = static_cast<std::size_t>(g.num_ops());
  std::vector<std::int32_t> missing(n);
  using Item = std::tuple<double, double, OpId>;  // (data-ready time, -rank, op): smallest first
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> ready;
  for (std::size_t v = 0; v < n; ++v) missing[v] = g.in_degree(static_cast<OpId>(v));
  for (OpId v = 0; v < g.num_ops(); ++v)  // lazy sources are placed with their first consumer
    if (s.is_lazy(v))
      for (OpId w : g.succ(v)) --missing[static_cast<std::size_t>(w)];
  for (std::size_t v = 0; v < n; ++v)
    if (missing[v] == 0 && !s.is_lazy(static_cast<OpId>(v))) ready.emplace(0.0, -rank[v], static_cast<OpId>(v));
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
        if (dp >= 0 && dp != best && s.coloc.forced(g.op(v)) < 0 && s.fits(v, dp)) {
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
  s.place_unread_sources();
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
    if (s.lazy[static_cast<std::size_t>(v)]) continue;  // placed with its first consumer
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
  s.place_unread_sources();
  if (note) *note = s.overflow_note();
  return s.plan(true);
}

// Baechi's m-TOPO (rule in the header comment; caps below).
inline Plan m_topo_plan(const OpGraph& g, const Cluster& c, std::string* note = nullptr) {
  using detail::base::op_footprint;
  const std::int32_t k = c.num_devices();
  const auto K = static_cast<std::size_t>(k);
  std::int64_t total = 0, largest = 0;
  for (const Op& o : g.ops()) {
    total += op_footprint(o);
    largest = std::max(largest, op_footprint(o));
  }
  double budget_sum = 0;
  for (std::int32_t d = 0; d < k; ++d) budget_sum += static_cast<double>(c.spec(d).memory_bytes);
  std::vector<std::int64_t> cap(K), used(K, 0);
  for (std::int32_t d = 0; d < k; ++d) {
    const double b = static_cast<double>(c.spec(d).memory_bytes);
    const auto share = static_cast<std::int64_t>(static_cast<double>(total) * b / budget_sum) + largest;
    cap[static_cast<std::size_t>(d)] = static_cast<double>(total) <= budget_sum ? std::min(c.spec(d).memory_bytes, share) : share;
  }
  detail::base::Colocation coloc(g);
  Plan p;
  p.device.assign(static_cast<std::size_t>(g.num_ops()), 0);
  std::vector<std::int32_t> recv(static_cast<std::size_t>(g.num_tensors()), -1);  // last device that counted a copy
  // v's bytes on d: its footprint + a copy of each input tensor produced on another device
  auto bytes_on = [&](OpId v, std::int32_t d) {
    std::int64_t b = op_footprint(g.op(v));
    const auto pred = g.pred(v);
    const auto pt = g.pred_tensors(v);
    for (std::size_t e = 0; e < pred.size(); ++e)
      if (pt[e] >= 0 && p.device[static_cast<std::size_t>(pred[e])] != d && recv[static_cast<std::size_t>(pt[e])] != d)
        b += g.tensor(pt[e]).bytes;  // (a tensor read twice counts twice: conservative)
    return b;
  };
  std::int32_t cur = 0;
  std::int64_t overflow = 0;
  for (OpId v : depth_first_topo_order(g)) {
    const Op& o = g.op(v);
    std::int32_t d = coloc.forced(o);
    if (d < 0) {
      while (cur + 1 < k && used[static_cast<std::size_t>(cur)] + bytes_on(v, cur) > cap[static_cast<std::size_t>(cur)]) ++cur;
      d = cur;
      // the last device is full: the op goes to the device where it adds the fewest bytes (its
      // inputs' device) among those with room, else to the one with the most room
      if (cur == k - 1 && used[K - 1] + bytes_on(v, d) > c.spec(d).memory_bytes) {
        std::int64_t best_room = std::numeric_limits<std::int64_t>::min(), best_bytes = 0;
        for (std::int32_t e = 0; e < k; ++e) {
          const std::int64_t b = bytes_on(v, e), room = c.spec(e).memory_bytes - used[static_cast<std::size_t>(e)] - b;
          const bool fits = room >= 0, best_fits = best_room >= 0;
          if (e == 0 || (fits && !best_fits) || (fits && best_fits && b < best_bytes) || (!fits && !best_fits && room > best_room)) {
            d = e;
            best_room = room;
            best_bytes = b;
          }
        }
      }
    }
    const std::int64_t b = bytes_on(v, d);
    if (used[static_cast<std::size_t>(d)] + b > c.spec(d).memory_bytes) ++overflow;
    used[static_cast<std::size_t>(d)] += b;
    const auto pred = g.pred(v);
    const auto pt = g.pred_tensors(v);
    for (std::size_t e = 0; e < pred.size(); ++e)
      if (pt[e] >= 0 && p.device[static_cast<std::size_t>(pred[e])] != d) recv[static_cast<std::size_t>(pt[e])] = d;
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
