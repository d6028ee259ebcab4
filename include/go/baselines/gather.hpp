#pragma once
// Gather moves: an op that receives many bytes from other devices, moved to a device that sends
// it the most. The op of a training graph that does so is a gradient sum (an AddN of the
// gradients of one tensor read at many places), and the simulator keeps an AddN's inputs until it
// runs, as a framework does. On gnmt8 at 121 steps (80,588 ops, 8 V100s) the sum of the
// attention's gradients with respect to the encoder's output receives 121 tensors of 63 MB from
// two devices; where the anchor puts it, its transfers fill those devices' copy channels and the
// decoder's hand-offs queue behind them (37% of the step waits for a link). On a sender it is
// 8-9% faster but out of memory, since that device then also keeps every input it sends itself;
// fitted (go/baselines/memory_fit.hpp, every other device a target) it is still 5.6% faster.
// Searches find it by chance, in a climb's few moves (bench/README.md, "Gather moves").
//
// Which ops: those whose received bytes from one device (each tensor once: an op has one data edge
// per tensor it reads) take at least `share` of the plan's step time on the link from it, the
// `max_ops` that receive the most; each moved to each of its `senders` top senders (by bytes),
// with its colocation group.
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "go/graph/graph.hpp"
#include "go/sim/cluster.hpp"
#include "go/sim/plan.hpp"

namespace go {

struct GatherMove {
  OpId op = -1;
  std::int32_t to = 0;   // the sender it moves to
  double bytes = 0;      // what the op receives from it
};

// The moves for `device` (one entry per op) on cluster c, of a plan whose step takes `step_time`
// seconds: ops in decreasing received bytes, each op's senders in decreasing bytes.
inline std::vector<GatherMove> gather_moves(const OpGraph& g, const Cluster& c, std::span<const std::int32_t> device,
                                            double step_time, int max_ops = 4, int senders = 2,
                                            double share = 0.02) {
  std::vector<GatherMove> out;
  const std::int32_t D = c.num_devices();
  if (D < 2 || device.size() != static_cast<std::size_t>(g.num_ops()) || !(step_time > 0)) return out;
  struct Received {
    OpId op;
    double total;
    std::vector<double> from;  // bytes per device
  };
  std::vector<Received> ops;
  std::vector<double> from(static_cast<std::size_t>(D));
  for (OpId v = 0; v < g.num_ops(); ++v) {
    const std::int32_t dv = device[static_cast<std::size_t>(v)];
    std::fill(from.begin(), from.end(), 0.0);
    double total = 0;
    const auto pred = g.pred(v);
    const auto pt = g.pred_tensors(v);
    for (std::size_t e = 0; e < pred.size(); ++e) {  // one data edge per tensor an op reads
      const std::int32_t du = device[static_cast<std::size_t>(pred[e])];
      if (pt[e] < 0 || du == dv || du < 0 || du >= D) continue;
      const auto b = static_cast<double>(g.tensor(pt[e]).bytes);
      from[static_cast<std::size_t>(du)] += b;
      total += b;
    }
    if (!(total > 0)) continue;
    bool heavy = false;
    for (std::int32_t d = 0; d < D && !heavy; ++d)
      heavy = from[static_cast<std::size_t>(d)] > 0 &&
              c.transfer_time(d, dv, from[static_cast<std::size_t>(d)]) >= share * step_time;
    if (heavy) ops.push_back({v, total, from});
  }
  std::stable_sort(ops.begin(), ops.end(), [](const Received& a, const Received& b) { return a.total > b.total; });
  if (ops.size() > static_cast<std::size_t>(std::max(0, max_ops))) ops.resize(static_cast<std::size_t>(std::max(0, max_ops)));
  for (const Received& r : ops) {
    std::vector<std::int32_t> by(static_cast<std::size_t>(D));
    for (std::int32_t d = 0; d < D; ++d) by[static_cast<std::size_t>(d)] = d;
    std::stable_sort(by.begin(), by.end(), [&](std::int32_t a, std::int32_t b) {
      return r.from[static_cast<std::size_t>(a)] > r.from[static_cast<std::size_t>(b)];
    });
    for (int k = 0; k < std::min<int>(senders, D); ++k) {
      const std::int32_t d = by[static_cast<std::size_t>(k)];
      if (!(r.from[static_cast<std::size_t>(d)] > 0)) break;
      out.push_back({r.op, d, r.from[static_cast<std::size_t>(d)]});
    }
  }
  return out;
}

// Plan p with m's op, and the ops of its colocation group, on m.to; fusion groups that then span
// two devices run unfused.
inline Plan gathered(const OpGraph& g, Plan p, const GatherMove& m) {
  if (p.device.empty()) p.device.assign(static_cast<std::size_t>(g.num_ops()), 0);
  const std::int32_t group = g.op(m.op).colocation;
  for (OpId v = 0; v < g.num_ops(); ++v)
    if (v == m.op || (group >= 0 && g.op(v).colocation == group)) p.device[static_cast<std::size_t>(v)] = m.to;
  dissolve_split_fusion(p);
  return p;
}

}  // namespace go
