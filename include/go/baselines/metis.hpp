#pragma once
// The `metis` baseline: a METIS k-way partition (METIS_PartGraphKway, minimizing the edge cut) of
// the op graph as an undirected graph, with
//   two vertex weights (multi-constraint balance): compute time (go::op_time on device 0's spec)
//     and memory (the static footprint: parameters + outputs + temporary bytes), both balanced
//     across the k parts within 5% / 10%;
//   edge weights: the bytes the edge carries (control edges: 1), parallel edges summed;
//   colocation groups contracted to one vertex, so they land on one device;
//   heterogeneous devices: target part weights proportional to each device's speed (compute) and
//   memory capacity (memory), so faster devices get more compute; the memory tolerance then widens
//   to the largest ratio of speed share to memory share, so the two targets do not conflict.
// Weights are scaled to integers that cannot overflow METIS's idx_t. No priorities (first ready,
// first run), as a partitioner decides only the placement.
//
// METIS is compiled in when GO_WITH_METIS is defined (the build links libmetis: see
// cmake/baselines.cmake); otherwise metis_plan throws a go::Error saying so.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "go/baselines/common.hpp"
#include "go/core/error.hpp"
#include "go/graph/cost.hpp"
#include "go/graph/graph.hpp"
#include "go/sim/cluster.hpp"
#include "go/sim/plan.hpp"

#if defined(GO_WITH_METIS)
#include <metis.h>
#endif

namespace go {

inline constexpr bool metis_available() {
#if defined(GO_WITH_METIS)
  return true;
#else
  return false;
#endif
}

namespace detail::base {

// The op graph as an undirected graph over vertices vid[op] in [0, nv) (ops of one vertex: no edge):
// CSR rows of neighbours in increasing order, each edge's weight the bytes it carries (at least 1),
// summed over parallel edges in edge order.
struct Adjacency {
  std::vector<std::int64_t> offset;  // [nv + 1]
  std::vector<std::int32_t> vertex;
  std::vector<double> weight;
};
inline Adjacency undirected_adjacency(const OpGraph& g, const std::vector<std::int32_t>& vid, std::int32_t nv) {
  // every edge in both directions, grouped by vertex in edge order (a counting sort), then each
  // vertex's neighbours sorted stably
  struct Half {
    std::int32_t to;
    double w;
  };
  auto for_each_half = [&](auto&& f) {
    for (OpId u = 0; u < g.num_ops(); ++u) {
      const auto succ = g.succ(u);
      const auto stn = g.succ_tensors(u);
      for (std::size_t e = 0; e < succ.size(); ++e) {
        const std::int32_t a = vid[static_cast<std::size_t>(u)], b = vid[static_cast<std::size_t>(succ[e])];
        if (a == b) continue;
        const double w = std::max(1.0, edge_bytes(g, stn[e]));
        f(a, b, w);
        f(b, a, w);
      }
    }
  };
  std::vector<std::int64_t> start(static_cast<std::size_t>(nv) + 1, 0);
  for_each_half([&](std::int32_t a, std::int32_t, double) { ++start[static_cast<std::size_t>(a) + 1]; });
  for (std::size_t v = 0; v < static_cast<std::size_t>(nv); ++v) start[v + 1] += start[v];
  std::vector<Half> half(static_cast<std::size_t>(start.back()));
  {
    std::vector<std::int64_t> next(start.begin(), start.end() - 1);
    for_each_half([&](std::int32_t a, std::int32_t b, double w) {
      half[static_cast<std::size_t>(next[static_cast<std::size_t>(a)]++)] = {b, w};
    });
  }
  Adjacency out;
  out.offset.assign(static_cast<std::size_t>(nv) + 1, 0);
  for (std::int32_t v = 0; v < nv; ++v) {
    const auto b = half.begin() + start[static_cast<std::size_t>(v)], e = half.begin() + start[static_cast<std::size_t>(v) + 1];
    std::stable_sort(b, e, [](const Half& x, const Half& y) { return x.to < y.to; });
    for (auto it = b; it != e; ++it) {
      if (it == b || it->to != (it - 1)->to) {
        out.vertex.push_back(it->to);
        out.weight.push_back(0.0);
      }
      out.weight.back() += it->w;
    }
    out.offset[static_cast<std::size_t>(v) + 1] = static_cast<std::int64_t>(out.vertex.size());
  }
  return out;
}

}  // namespace detail::base

inline Plan metis_plan(const OpGraph& g, const Cluster& c, std::uint64_t seed = 0, std::string* note = nullptr) {
  const std::int32_t k = c.num_devices();
  const auto n = static_cast<std::size_t>(g.num_ops());
  if (k == 1 || n == 0) return Plan::single_device(g.num_ops(), 0);
#if !defined(GO_WITH_METIS)
  (void)seed;
  (void)note;
  GO_FAIL("metis: this build of go has no METIS (define GO_WITH_METIS and link libmetis, see cmake/baselines.cmake)");
#else
  // vertices: colocation groups contracted
  std::vector<std::int32_t> vid(n, -1);
  std::unordered_map<std::int32_t, std::int32_t> group_vertex;
  std::int32_t nv = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t cg = g.op(static_cast<OpId>(i)).colocation;
    if (cg < 0) {
      vid[i] = nv++;
      continue;
    }
    auto [it, fresh] = group_vertex.emplace(cg, nv);
    if (fresh) ++nv;
    vid[i] = it->second;
  }
  const std::vector<double> t = op_times(g, c.spec(0));
  std::vector<double> wt(static_cast<std::size_t>(nv), 0.0), wm(static_cast<std::size_t>(nv), 0.0);
  double tt = 0, tm = 0;
  for (std::size_t i = 0; i < n; ++i) {
    wt[static_cast<std::size_t>(vid[i])] += t[i];
    const double m = static_cast<double>(detail::base::op_footprint(g.op(static_cast<OpId>(i))));
    wm[static_cast<std::size_t>(vid[i])] += m;
    tt += t[i];
    tm += m;
  }
  const double st = tt > 0 ? 1e8 / tt : 1.0, sm = tm > 0 ? 1e8 / tm : 1.0;
  std::vector<idx_t> vwgt(static_cast<std::size_t>(nv) * 2);
  for (std::int32_t v = 0; v < nv; ++v) {
    vwgt[static_cast<std::size_t>(v) * 2] = static_cast<idx_t>(std::llround(wt[static_cast<std::size_t>(v)] * st));
    vwgt[static_cast<std::size_t>(v) * 2 + 1] = static_cast<idx_t>(std::llround(wm[static_cast<std::size_t>(v)] * sm));
  }
  const detail::base::Adjacency adj = detail::base::undirected_adjacency(g, vid, nv);
  double max_w = 1;
  for (double w : adj.weight) max_w = std::max(max_w, w);
  // edge weights in [1, 1e6]: the sum over a vertex's edges stays far below 2^31 for any degree < 2000
  const double se = 1e6 / max_w;
  std::vector<idx_t> xadj(adj.offset.begin(), adj.offset.end()), adjncy(adj.vertex.begin(), adj.vertex.end()), adjwgt;
  adjwgt.reserve(adj.weight.size());
  for (double w : adj.weight) adjwgt.push_back(std::max<idx_t>(1, static_cast<idx_t>(std::llround(w * se))));
  // Heterogeneous devices: target part weights (METIS tpwgts) proportional to each device's speed
  // (1 / the graph's total op time on its spec) for compute and to its memory for memory, so a
  // faster or larger device gets the larger part. Identical devices: equal parts (tpwgts = NULL).
  std::vector<real_t> tpwgts;
  real_t ubvec[2] = {1.05f, 1.10f};
  {
    const auto times = detail::base::op_times_per_device(g, c);
    std::vector<double> speed(static_cast<std::size_t>(k)), mem(static_cast<std::size_t>(k));
    double ssum = 0, msum = 0;
    bool differ = false;
    for (std::int32_t d = 0; d < k; ++d) {
      double total = 0;
      for (double x : times[static_cast<std::size_t>(d)]) total += x;
      speed[static_cast<std::size_t>(d)] = total > 0 ? 1.0 / total : 1.0;
      mem[static_cast<std::size_t>(d)] = static_cast<double>(c.spec(d).memory_bytes);
      ssum += speed[static_cast<std::size_t>(d)];
      msum += mem[static_cast<std::size_t>(d)];
      differ = differ || std::abs(speed[static_cast<std::size_t>(d)] - speed[0]) > 1e-9 * speed[0] ||
               c.spec(d).memory_bytes != c.spec(0).memory_bytes;
    }
    if (differ) {
      tpwgts.resize(static_cast<std::size_t>(k) * 2);
      for (std::int32_t d = 0; d < k; ++d) {
        tpwgts[static_cast<std::size_t>(d) * 2] = static_cast<real_t>(speed[static_cast<std::size_t>(d)] / ssum);
        tpwgts[static_cast<std::size_t>(d) * 2 + 1] = static_cast<real_t>(mem[static_cast<std::size_t>(d)] / msum);
      }
      // the memory balance may give way as far as the speeds need (equal memories, unequal speeds:
      // the fast device's part holds more memory than its equal share)
      double stretch = 1.0;
      for (std::int32_t d = 0; d < k; ++d)
        stretch = std::max(stretch, (speed[static_cast<std::size_t>(d)] / ssum) / (mem[static_cast<std::size_t>(d)] / msum));
      ubvec[1] = static_cast<real_t>(std::max(1.10, 1.05 * stretch));
      // METIS wants each constraint's targets to sum to 1 within its tolerance: absorb rounding
      for (int j = 0; j < 2; ++j) {
        real_t sum = 0;
        for (std::int32_t d = 0; d + 1 < k; ++d) sum += tpwgts[static_cast<std::size_t>(d) * 2 + j];
        tpwgts[static_cast<std::size_t>(k - 1) * 2 + j] = 1.0f - sum;
      }
    }
  }
  idx_t nvtxs = nv, ncon = 2, nparts = k, objval = 0;
  std::vector<idx_t> part(static_cast<std::size_t>(nv), 0);
  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_SEED] = static_cast<idx_t>(seed % 2147483647u);
  options[METIS_OPTION_NUMBERING] = 0;
  if (adjncy.empty()) adjncy.push_back(0), adjwgt.push_back(1);  // METIS dereferences them
  int rc = METIS_PartGraphKway(&nvtxs, &ncon, xadj.data(), adjncy.data(), vwgt.data(), nullptr, adjwgt.data(), &nparts,
                               tpwgts.empty() ? nullptr : tpwgts.data(), ubvec, options, &objval, part.data());
  if (rc != METIS_OK) {
    if (note) *note = "k-way failed, recursive bisection used";
    rc = METIS_PartGraphRecursive(&nvtxs, &ncon, xadj.data(), adjncy.data(), vwgt.data(), nullptr, adjwgt.data(),
                                  &nparts, tpwgts.empty() ? nullptr : tpwgts.data(), ubvec, options, &objval, part.data());
  }
  GO_CHECK(rc == METIS_OK, g.where(), "metis: METIS failed with status ", rc);
  Plan p;
  p.device.resize(n);
  for (std::size_t i = 0; i < n; ++i) p.device[i] = static_cast<std::int32_t>(part[static_cast<std::size_t>(vid[i])]);
  return p;
#endif
}

}  // namespace go
