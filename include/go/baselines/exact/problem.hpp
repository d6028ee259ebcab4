#pragma once
// The data of the `exact` MILP (go/baselines/exact.hpp): op times per device, what each consumer reads
// from each producer, the tensors that can cross devices, colocation units, reachability; and a
// plan's simulated run (Replay), which is both a feasible point of the MILP (its MIP start) and the
// check of whether the MILP's plan simulates to its objective.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "go/baselines/common.hpp"
#include "go/graph/graph.hpp"
#include "go/sim/cluster.hpp"
#include "go/sim/plan.hpp"
#include "go/sim/simulator.hpp"

namespace go::detail::exact {

// What a consumer reads from one producer.
struct Dep {
  OpId u = -1, v = -1;
  std::vector<double> bytes;  // distinct data tensors
  bool control_only = true;
};

struct Problem {
  const OpGraph& g;
  const Cluster& c;
  SimOptions so;
  std::int32_t n = 0, k = 0;
  std::vector<std::vector<double>> cost;  // [v][d], seconds
  std::vector<Dep> deps;
  std::vector<std::int32_t> unit;         // per op
  std::int32_t num_units = 0;
  std::vector<std::int32_t> unit_order;   // units by their first op's topological position
  std::vector<std::vector<std::uint64_t>> reach;  // reach[v] bit w: a path v -> w
  // A tensor read outside its producer's unit: it is sent once to each device with a reader.
  struct Xfer {
    TensorId t = -1;
    OpId u = -1;
    double bytes = 0;
    std::vector<OpId> readers;  // outside u's unit, ascending: the simulator's destination order
  };
  std::vector<Xfer> xfers;
  std::vector<std::int32_t> xfer_of;  // per tensor: its index in xfers, or -1

  Problem(const OpGraph& graph, const Cluster& cluster, const SimOptions& options) : g(graph), c(cluster), so(options) {
    n = g.num_ops();
    k = c.num_devices();
    const Simulator sim(g, c, so);
    cost.assign(static_cast<std::size_t>(n), std::vector<double>(static_cast<std::size_t>(k)));
    for (OpId v = 0; v < n; ++v)
      for (std::int32_t d = 0; d < k; ++d) cost[static_cast<std::size_t>(v)][static_cast<std::size_t>(d)] = sim.op_cost(v, d);
    for (OpId v = 0; v < n; ++v) {
      std::unordered_map<OpId, std::size_t> at;
      std::vector<TensorId> seen;
      const auto pred = g.pred(v);
      const auto pt = g.pred_tensors(v);
      for (std::size_t e = 0; e < pred.size(); ++e) {
        auto [it, fresh] = at.emplace(pred[e], deps.size());
        if (fresh) deps.push_back({pred[e], v, {}, true});
        Dep& dp = deps[it->second];
        if (pt[e] < 0 || std::find(seen.begin(), seen.end(), pt[e]) != seen.end()) continue;
        seen.push_back(pt[e]);
        dp.bytes.push_back(base::edge_bytes(g, pt[e]));
        dp.control_only = false;
      }
    }
    unit.assign(static_cast<std::size_t>(n), -1);
    std::unordered_map<std::int32_t, std::int32_t> group;
    for (OpId v : g.topo_order()) {
      const std::int32_t cg = g.op(v).colocation;
      std::int32_t u = -1;
      if (cg >= 0) {
        auto [it, fresh] = group.emplace(cg, num_units);
        u = it->second;
        if (fresh) ++num_units;
      } else {
        u = num_units++;
      }
      if (static_cast<std::size_t>(u) == unit_order.size()) unit_order.push_back(u);
      unit[static_cast<std::size_t>(v)] = u;
    }
    xfer_of.assign(static_cast<std::size_t>(g.num_tensors()), -1);
    for (TensorId t = 0; t < g.num_tensors(); ++t) {
      Xfer x{t, g.tensor(t).producer, base::edge_bytes(g, t), {}};
      const auto succ = g.succ(x.u);
      const auto st = g.succ_tensors(x.u);
      for (std::size_t e = 0; e < succ.size(); ++e)
        if (st[e] == t && unit[static_cast<std::size_t>(succ[e])] != unit[static_cast<std::size_t>(x.u)]) x.readers.push_back(succ[e]);
      std::sort(x.readers.begin(), x.readers.end());
      x.readers.erase(std::unique(x.readers.begin(), x.readers.end()), x.readers.end());
      if (x.readers.empty()) continue;
      xfer_of[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(xfers.size());
      xfers.push_back(std::move(x));
    }
    const std::size_t words = (static_cast<std::size_t>(n) + 63) / 64;
    reach.assign(static_cast<std::size_t>(n), std::vector<std::uint64_t>(words, 0));
    const auto topo = g.topo_order();
    for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
      auto& r = reach[static_cast<std::size_t>(*it)];
      for (OpId w : g.succ(*it)) {
        r[static_cast<std::size_t>(w) / 64] |= std::uint64_t{1} << (static_cast<std::size_t>(w) % 64);
        const auto& rw = reach[static_cast<std::size_t>(w)];
        for (std::size_t i = 0; i < words; ++i) r[i] |= rw[i];
      }
    }
  }

  bool reaches(OpId a, OpId b) const {
    return (reach[static_cast<std::size_t>(a)][static_cast<std::size_t>(b) / 64] >> (static_cast<std::size_t>(b) % 64)) & 1;
  }
  double p(OpId v, std::int32_t d) const { return cost[static_cast<std::size_t>(v)][static_cast<std::size_t>(d)]; }
  double pmin(OpId v) const { return *std::min_element(cost[static_cast<std::size_t>(v)].begin(), cost[static_cast<std::size_t>(v)].end()); }
  bool zero_time(OpId v) const {
    return *std::max_element(cost[static_cast<std::size_t>(v)].begin(), cost[static_cast<std::size_t>(v)].end()) <= 0;
  }
  double delay(const Dep& e, std::int32_t d1, std::int32_t d2) const {
    if (d1 == d2) return 0.0;
    if (e.control_only) return c.link_latency(d1, d2);
    double t = 0;
    for (double b : e.bytes) t += c.transfer_time(d1, d2, b);
    return t;
  }
  // Identical devices: same costs, memory and links everywhere, so any relabelling is a solution.
  bool symmetric() const {
    for (std::int32_t d = 1; d < k; ++d) {
      if (c.spec(d).memory_bytes != c.spec(0).memory_bytes) return false;
      for (OpId v = 0; v < n; ++v)
        if (p(v, d) != p(v, 0)) return false;
    }
    for (std::int32_t a = 0; a < k; ++a)
      for (std::int32_t b = 0; b < k; ++b)
        if (a != b && (c.link_latency(a, b) != c.link_latency(0, 1) || c.link_bandwidth(a, b) != c.link_bandwidth(0, 1))) return false;
    return true;
  }
  // Static bytes per device of a placement (ops' footprints + received tensors).
  std::vector<double> memory(const std::vector<std::int32_t>& dev) const {
    std::vector<double> m(static_cast<std::size_t>(k), 0.0);
    for (OpId v = 0; v < n; ++v) m[static_cast<std::size_t>(dev[static_cast<std::size_t>(v)])] += static_cast<double>(base::op_footprint(g.op(v)));
    for (TensorId t = 0; t < g.num_tensors(); ++t) {
      const OpId u = g.tensor(t).producer;
      std::vector<char> got(static_cast<std::size_t>(k), 0);
      const auto succ = g.succ(u);
      const auto st = g.succ_tensors(u);
      for (std::size_t e = 0; e < succ.size(); ++e) {
        const std::int32_t d = dev[static_cast<std::size_t>(succ[e])];
        if (st[e] == t && d != dev[static_cast<std::size_t>(u)] && !got[static_cast<std::size_t>(d)]) {
          got[static_cast<std::size_t>(d)] = 1;
          m[static_cast<std::size_t>(d)] += static_cast<double>(g.tensor(t).bytes);
        }
      }
    }
    return m;
  }
  bool fits(const std::vector<std::int32_t>& dev) const {
    const auto m = memory(dev);
    for (std::int32_t d = 0; d < k; ++d)
      if (m[static_cast<std::size_t>(d)] > static_cast<double>(c.spec(d).memory_bytes)) return false;
    return true;
  }
  // max(critical path, total work / devices), each op at its cheapest device time, no transfers.
  double lower_bound() const {
    std::vector<double> f(static_cast<std::size_t>(n), 0.0);
    double cp = 0, work = 0;
    for (OpId v : g.topo_order()) {
      double s = 0;
      for (OpId u : g.pred(v)) s = std::max(s, f[static_cast<std::size_t>(u)]);
      f[static_cast<std::size_t>(v)] = s + pmin(v);
      cp = std::max(cp, f[static_cast<std::size_t>(v)]);
      work += pmin(v);
    }
    return std::max(cp, work / k);
  }
};

// Whether transfers s1 -> d1 and s2 -> d2 hold a common channel (Cluster::channels).
inline bool share_channel(ChannelModel m, std::int32_t s1, std::int32_t d1, std::int32_t s2, std::int32_t d2) {
  switch (m) {
    case ChannelModel::duplex: return s1 == s2 || d1 == d2;
    case ChannelModel::shared: return s1 == s2 || d1 == d2 || s1 == d2 || s2 == d1;
    case ChannelModel::sender: return s1 == s2;
  }
  return true;
}

// A plan's simulated run: op and transfer times (seconds). The relaxation argument of exact.hpp
// makes it a feasible point of every MILP built here (without the memory rows).
struct Replay {
  Plan plan;
  bool ran = false;  // the simulation ran to the end (possibly out of memory)
  bool oom = false;
  double step = std::numeric_limits<double>::infinity();
  std::vector<double> start, finish;  // per op
  struct Transfer {
    std::int32_t x = -1;  // Problem::xfers index
    std::int32_t src = 0, dst = 0;
    double request = 0, start = 0, end = 0;  // request: its producer's completion
  };
  std::vector<Transfer> transfers;
};

inline Replay replay(const Problem& pb, const Simulator& sim, SimWorkspace& ws, Plan plan) {
  Replay r;
  const SimResult& res = sim.simulate(plan, ws);
  r.plan = std::move(plan);
  r.ran = res.status == SimStatus::ok || res.status == SimStatus::out_of_memory;
  if (!r.ran) return r;
  r.oom = res.status == SimStatus::out_of_memory;
  r.step = res.step_time;
  r.start.resize(static_cast<std::size_t>(pb.n));
  r.finish.resize(static_cast<std::size_t>(pb.n));
  for (OpId v = 0; v < pb.n; ++v) {
    r.start[static_cast<std::size_t>(v)] = ws.start_time(v);
    r.finish[static_cast<std::size_t>(v)] = ws.finish_time(v);
  }
  for (const TransferRecord& t : ws.transfers())
    r.transfers.push_back({pb.xfer_of[static_cast<std::size_t>(t.tensor)], t.src, t.dst, ws.finish_time(t.producer), t.start, t.end});
  return r;
}

inline std::string fmt_ms(double seconds) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6g ms", seconds * 1e3);
  return b;
}

}  // namespace go::detail::exact
