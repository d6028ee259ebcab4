// Simulator against a deliberately simple reference simulator on thousands of random DAGs, plans
// and clusters, plus invariants that hold for any schedule: step time >= critical path and >= work /
// devices (of the plan's units, and the plan-independent bounds of go/sim/bound.hpp), no op starts
// before its inputs arrive, each tensor sent at most once per device, memory never negative and back
// to the resident parameters at the end, fusion never moves more bytes.
//
// The reference recomputes everything from the OpGraph with plain containers and linear scans: unit
// costs from go::op_time and the fusion rule, the schedule by scanning all pending events for the
// earliest, and peak memory afterwards from a sorted timeline of allocations and frees.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "go/graph/cost.hpp"
#include "go/graph/fusion_rules.hpp"
#include "go/sim/bound.hpp"
#include "go/sim/sim.hpp"
#include "go/baselines/fusion.hpp"
#include "go/baselines/human.hpp"
#include "go/graph/load.hpp"
#include "go/graph/training.hpp"
#include "go/graph/zoo.hpp"
#include "sim_same.hpp"

namespace test_sim_random {
namespace {

struct RefResult {
  double step = 0;
  std::vector<double> busy;
  std::vector<std::int64_t> peak;
  std::int64_t transfer_bytes = 0, transfers = 0, launches = 0;
  std::vector<double> start, finish;  // per unit leader
};

RefResult reference(const go::OpGraph& g, const go::Cluster& c, const go::Plan& p) {
  const int n = g.num_ops(), nd = c.num_devices();
  auto dev = [&](int v) { return p.device_of(v); };
  // units
  std::vector<int> unit(static_cast<std::size_t>(n));
  std::map<int, int> group_leader;
  for (go::OpId v : g.topo_order()) {
    const int f = p.fusion.empty() ? -1 : p.fusion[static_cast<std::size_t>(v)];
    if (f < 0) unit[static_cast<std::size_t>(v)] = v;
    else unit[static_cast<std::size_t>(v)] = group_leader.emplace(f, v).first->second;
  }
  std::vector<std::vector<int>> members(static_cast<std::size_t>(n));
  for (go::OpId v : g.topo_order()) members[static_cast<std::size_t>(unit[static_cast<std::size_t>(v)])].push_back(v);
  std::vector<int> consumers(static_cast<std::size_t>(g.num_tensors()), 0);
  for (int v = 0; v < n; ++v)
    for (go::TensorId t : g.pred_tensors(v))
      if (t >= 0) ++consumers[static_cast<std::size_t>(t)];
  // unit costs and memory
  std::vector<double> cost(static_cast<std::size_t>(n), 0);
  std::vector<std::int64_t> alloc(static_cast<std::size_t>(n), 0), temp(static_cast<std::size_t>(n), 0),
      sink(static_cast<std::size_t>(n), 0);
  std::vector<int> kernel(static_cast<std::size_t>(n), 0), pending(static_cast<std::size_t>(n), 0);
  for (int L = 0; L < n; ++L) {
    const auto& mem = members[static_cast<std::size_t>(L)];
    if (mem.empty()) continue;
    const go::DeviceSpec& s = c.spec(dev(L));
    std::set<go::TensorId> ext_in, ext_out, lib_in;
    double compute = 0, extra = 0, roof_bytes = 0, lwork = 0, dom_work = 0, dom_bytes = 0;
    bool roof = false, kern = false, lmeasured = false;
    std::int64_t params = 0, loop_params = 0;
    // a measured library kernel: its time is kept, with the traffic it reads and writes
    auto lib = [&](int v) { return g.op(v).has_time() && go::fusion_class(g.op(v)) == go::FusionClass::library; };
    for (int v : mem) {
      const go::Op& o = g.op(v);
      auto preds = g.pred(v);
      auto pt = g.pred_tensors(v);
      for (std::size_t k = 0; k < preds.size(); ++k)
        if (unit[static_cast<std::size_t>(preds[k])] != L) {
          ++pending[static_cast<std::size_t>(L)];
          if (pt[k] >= 0) ext_in.insert(pt[k]);
          if (pt[k] >= 0 && lib(v)) lib_in.insert(pt[k]);
        }
      auto succ = g.succ(v);
      auto st = g.succ_tensors(v);
      for (std::size_t k = 0; k < succ.size(); ++k)
        if (st[k] >= 0 && unit[static_cast<std::size_t>(succ[k])] != L) ext_out.insert(st[k]);
      for (go::TensorId t = o.first_output; t < o.first_output + o.num_outputs; ++t)
        if (consumers[static_cast<std::size_t>(t)] == 0) {
          ext_out.insert(t);
          sink[static_cast<std::size_t>(L)] += g.tensor(t).bytes;
        }
      temp[static_cast<std::size_t>(L)] = std::max(temp[static_cast<std::size_t>(L)], o.temp_bytes);
      params += o.param_bytes;
      const bool is_roof = !o.has_time() && !go::is_free_op(o.kind);
      roof = roof || is_roof;
      kern = kern || o.has_time() || !go::is_free_op(o.kind);
      if (is_roof) compute += o.flops / (s.peak_flops * s.compute_efficiency[go::op_kind_index(o.kind)]);
      const double w = o.has_time() ? std::max(0.0, o.time - s.launch_overhead) : 0.0;
      const double own = static_cast<double>(o.input_bytes + o.output_bytes + o.param_bytes);
      if (lib(v)) {
        extra += w;
        continue;
      }
      loop_params += o.param_bytes;
      if (is_roof) roof_bytes += own;
      if (o.has_time()) {
        lmeasured = true;
        lwork += w;
        if (w > dom_work && own > 0) dom_work = w, dom_bytes = own;
      }
    }
    std::int64_t out = 0, in = 0, loop = loop_params;
    for (auto t : ext_out) {
      out += g.tensor(t).bytes;
      if (!lib(g.tensor(t).producer)) loop += g.tensor(t).bytes;
    }
    for (auto t : ext_in) {
      in += g.tensor(t).bytes;
      if (!lib_in.count(t)) loop += g.tensor(t).bytes;
    }
    if (mem.size() == 1) {
      cost[static_cast<std::size_t>(L)] = go::op_time(g.op(L), s);
      alloc[static_cast<std::size_t>(L)] = g.op(L).temp_bytes + g.op(L).output_bytes;
    } else {
      const double bw = s.mem_bandwidth * s.bandwidth_efficiency;
      double stream = dom_work > 0 ? static_cast<double>(loop) * dom_work / dom_bytes : static_cast<double>(loop) / bw;
      if (lmeasured) stream = std::min(stream, lwork + roof_bytes / bw);
      cost[static_cast<std::size_t>(L)] =
          kern ? s.launch_overhead + (roof || lmeasured ? std::max(compute, stream) : 0) + extra : 0;
      alloc[static_cast<std::size_t>(L)] = temp[static_cast<std::size_t>(L)] + out;
    }
    kernel[static_cast<std::size_t>(L)] = kern;
  }
  // schedule
  struct Ev {
    double time;
    long seq;
    int kind;  // 0 transfer end, 1 control arrival
    int id;
  };
  struct Xf {
    go::TensorId t;
    int s, d;
    double start, end;
  };
  std::vector<Ev> evs;
  std::vector<Xf> xfs;
  std::map<std::pair<int, int>, int> sent;
  std::vector<std::vector<std::tuple<float, long, int>>> ready(static_cast<std::size_t>(nd));
  std::vector<int> running(static_cast<std::size_t>(nd), -1);
  std::vector<double> run_end(static_cast<std::size_t>(nd), 0), chan(2 * static_cast<std::size_t>(nd), 0);
  RefResult res;
  res.busy.assign(static_cast<std::size_t>(nd), 0);
  res.start.assign(static_cast<std::size_t>(n), -1);
  res.finish.assign(static_cast<std::size_t>(n), -1);
  long seq = 0, qseq = 0;
  double now = 0;
  auto prio_of = [&](int L) {
    if (p.priority.empty()) return 0.0f;
    float best = -std::numeric_limits<float>::infinity();
    for (int v : members[static_cast<std::size_t>(L)]) best = std::max(best, p.priority[static_cast<std::size_t>(v)]);
    return best;
  };
  auto deliver = [&](int L) {
    if (--pending[static_cast<std::size_t>(L)] == 0) ready[static_cast<std::size_t>(dev(L))].emplace_back(prio_of(L), qseq++, L);
  };
  auto complete = [&](int L, int d) {
    for (int m : members[static_cast<std::size_t>(L)]) {
      auto succ = g.succ(m);
      auto st = g.succ_tensors(m);
      for (std::size_t k = 0; k < succ.size(); ++k) {
        const int w = unit[static_cast<std::size_t>(succ[k])];
        if (st[k] >= 0 || w == L) continue;
        if (dev(w) == d) deliver(w);
        else evs.push_back({now + c.link_latency(d, dev(w)), seq++, 1, w});
      }
      const go::Op& o = g.op(m);
      for (go::TensorId t = o.first_output; t < o.first_output + o.num_outputs; ++t)
        for (std::size_t k = 0; k < succ.size(); ++k) {
          const int w = unit[static_cast<std::size_t>(succ[k])];
          if (st[k] != t || w == L) continue;
          const int dw = dev(w);
          if (dw == d) {
            deliver(w);
            continue;
          }
          if (sent.count({t, dw})) continue;
          sent[{t, dw}] = static_cast<int>(xfs.size());
          const std::size_t rc = c.channels == go::ChannelModel::duplex ? static_cast<std::size_t>(nd + dw) : static_cast<std::size_t>(dw);
          double s0 = std::max(now, chan[static_cast<std::size_t>(d)]);
          if (c.channels != go::ChannelModel::sender) s0 = std::max(s0, chan[rc]);
          const double e0 = s0 + c.transfer_time(d, dw, static_cast<double>(g.tensor(t).bytes));
          chan[static_cast<std::size_t>(d)] = e0;
          if (c.channels != go::ChannelModel::sender) chan[rc] = e0;
          xfs.push_back({t, d, dw, s0, e0});
          if (s0 > now) ++seq;  // the simulator numbers its transfer-start events too
          evs.push_back({e0, seq++, 0, static_cast<int>(xfs.size()) - 1});
          res.transfer_bytes += g.tensor(t).bytes;
          ++res.transfers;
        }
    }
  };
  auto dispatch = [&] {
    for (int d = 0; d < nd; ++d) {
      auto& q = ready[static_cast<std::size_t>(d)];
      if (running[static_cast<std::size_t>(d)] >= 0 || q.empty()) continue;
      std::size_t best = 0;
      for (std::size_t k = 1; k < q.size(); ++k)
        if (std::get<0>(q[k]) > std::get<0>(q[best]) ||
            (std::get<0>(q[k]) == std::get<0>(q[best]) && std::get<1>(q[k]) < std::get<1>(q[best])))
          best = k;
      const int L = std::get<2>(q[best]);
      q.erase(q.begin() + static_cast<long>(best));
      res.start[static_cast<std::size_t>(L)] = now;
      res.finish[static_cast<std::size_t>(L)] = now + cost[static_cast<std::size_t>(L)];
      running[static_cast<std::size_t>(d)] = L;
      run_end[static_cast<std::size_t>(d)] = now + cost[static_cast<std::size_t>(L)];
      res.busy[static_cast<std::size_t>(d)] += cost[static_cast<std::size_t>(L)];
      res.launches += kernel[static_cast<std::size_t>(L)];
    }
  };
  for (go::OpId v : g.topo_order())
    if (unit[static_cast<std::size_t>(v)] == v && pending[static_cast<std::size_t>(v)] == 0)
      ready[static_cast<std::size_t>(dev(v))].emplace_back(prio_of(v), qseq++, v);
  dispatch();
  for (;;) {
    double tn = std::numeric_limits<double>::infinity();
    for (auto& e : evs) tn = std::min(tn, e.time);
    for (int d = 0; d < nd; ++d)
      if (running[static_cast<std::size_t>(d)] >= 0) tn = std::min(tn, run_end[static_cast<std::size_t>(d)]);
    if (std::isinf(tn)) break;
    now = tn;
    for (int d = 0; d < nd; ++d)
      if (running[static_cast<std::size_t>(d)] >= 0 && run_end[static_cast<std::size_t>(d)] == now) {
        const int L = running[static_cast<std::size_t>(d)];
        running[static_cast<std::size_t>(d)] = -1;
        complete(L, d);
      }
    for (;;) {
      std::size_t best = evs.size();
      for (std::size_t k = 0; k < evs.size(); ++k)
        if (evs[k].time <= now && (best == evs.size() || evs[k].time < evs[best].time ||
                                   (evs[k].time == evs[best].time && evs[k].seq < evs[best].seq)))
          best = k;
      if (best == evs.size()) break;
      const Ev e = evs[best];
      evs.erase(evs.begin() + static_cast<long>(best));
      if (e.kind == 1) {
        deliver(e.id);
        continue;
      }
      const Xf& x = xfs[static_cast<std::size_t>(e.id)];
      const go::OpId prod = g.tensor(x.t).producer;
      auto succ = g.succ(prod);
      auto st = g.succ_tensors(prod);
      for (std::size_t k = 0; k < succ.size(); ++k)
        if (st[k] == x.t && dev(succ[k]) == x.d) deliver(unit[static_cast<std::size_t>(succ[k])]);
    }
    dispatch();
  }
  res.step = now;
  // memory timeline: (time, 0 = free / 1 = alloc, device, bytes); frees first at equal times
  std::vector<std::tuple<double, int, int, std::int64_t>> tl;
  for (int L = 0; L < n; ++L) {
    if (members[static_cast<std::size_t>(L)].empty()) continue;
    const int d = dev(L);
    tl.emplace_back(res.start[static_cast<std::size_t>(L)], 1, d, alloc[static_cast<std::size_t>(L)]);
    tl.emplace_back(res.finish[static_cast<std::size_t>(L)], 0, d,
                    temp[static_cast<std::size_t>(L)] + sink[static_cast<std::size_t>(L)]);
    for (int m : members[static_cast<std::size_t>(L)]) {
      const go::Op& o = g.op(m);
      for (go::TensorId t = o.first_output; t < o.first_output + o.num_outputs; ++t) {
        double last = -1;
        bool external = false;
        auto succ = g.succ(m);
        auto st = g.succ_tensors(m);
        for (std::size_t k = 0; k < succ.size(); ++k) {
          const int w = unit[static_cast<std::size_t>(succ[k])];
          if (st[k] != t || w == L) continue;
          external = true;
          if (dev(w) == d) last = std::max(last, res.finish[static_cast<std::size_t>(w)]);
        }
        if (!external) continue;
        for (const Xf& x : xfs)
          if (x.t == t) {
            last = std::max(last, x.end);
            double last_dst = -1;
            for (std::size_t k = 0; k < succ.size(); ++k)
              if (st[k] == t && dev(succ[k]) == x.d)
                last_dst = std::max(last_dst, res.finish[static_cast<std::size_t>(unit[static_cast<std::size_t>(succ[k])])]);
            tl.emplace_back(x.start, 1, x.d, g.tensor(t).bytes);
            tl.emplace_back(last_dst, 0, x.d, g.tensor(t).bytes);
          }
        tl.emplace_back(last, 0, d, g.tensor(t).bytes);
      }
    }
  }
  std::sort(tl.begin(), tl.end(), [](const auto& a, const auto& b) {
    return std::get<0>(a) < std::get<0>(b) || (std::get<0>(a) == std::get<0>(b) && std::get<1>(a) < std::get<1>(b));
  });
  std::vector<std::int64_t> use(static_cast<std::size_t>(nd), 0);
  for (int v = 0; v < n; ++v) use[static_cast<std::size_t>(dev(v))] += g.op(v).param_bytes;
  res.peak = use;
  for (const auto& [t, alloc_flag, d, bytes] : tl) {
    use[static_cast<std::size_t>(d)] += alloc_flag ? bytes : -bytes;
    res.peak[static_cast<std::size_t>(d)] = std::max(res.peak[static_cast<std::size_t>(d)], use[static_cast<std::size_t>(d)]);
  }
  return res;
}

// A random DAG: each op reads up to three earlier ops (sometimes a second output, sometimes twice the
// same tensor), a few control edges, measured or roofline times (all positive: ties would only test
// tie-breaking), parameters and scratch.
// `training`: also kinds the fusion rules treat apart (update, gather, reduce, max_pool) and ops of
// the backward pass (a third of them).
// Adds 0-2 outputs of up to 20 MB to s (one most of the time); returns how many.
int random_outputs(std::mt19937& rng, go::OpSpec& s) {
  const int outs = rng() % 5 == 0 ? 2 : (rng() % 12 == 0 ? 0 : 1);
  for (int k = 0; k < outs; ++k) {
    go::TensorSpec t;
    t.shape_known = false;
    t.bytes = static_cast<std::int64_t>(rng() % 20000000);
    s.outputs.push_back(t);
  }
  return outs;
}

go::OpGraph random_graph(std::mt19937& rng, int n, bool free_ops, bool training = false) {
  std::uniform_real_distribution<double> u01(0, 1);
  go::GraphBuilder b;
  const go::OpKind kinds[] = {go::OpKind::conv,   go::OpKind::matmul, go::OpKind::relu,   go::OpKind::add,
                              go::OpKind::other,  go::OpKind::update, go::OpKind::gather, go::OpKind::reduce,
                              go::OpKind::max_pool};
  std::vector<int> nout;
  for (int i = 0; i < n; ++i) {
    go::OpSpec s;
    s.name = "op" + std::to_string(i);
    s.kind = kinds[rng() % (training ? 9 : 5)];
    if (training && rng() % 3 == 0) s.role = go::OpRole::backward;
    if (free_ops && rng() % 6 == 0) s.kind = go::OpKind::reshape;
    if (u01(rng) < 0.5) s.time = 1e-4 + 1e-3 * u01(rng);
    else s.flops = 1e8 + 1e10 * u01(rng);
    if (rng() % 3 == 0) s.param_bytes = static_cast<std::int64_t>(rng() % 5000000);
    if (rng() % 4 == 0) s.temp_bytes = static_cast<std::int64_t>(rng() % 1000000);
    nout.push_back(random_outputs(rng, s));
    if (i > 0) {
      const int fan = static_cast<int>(rng() % 4);
      for (int k = 0; k < fan; ++k) {
        const int src = static_cast<int>(rng() % static_cast<unsigned>(i));
        if (nout[static_cast<std::size_t>(src)] == 0) continue;
        s.inputs.push_back({src, static_cast<std::int32_t>(rng() % static_cast<unsigned>(nout[static_cast<std::size_t>(src)]))});
      }
      if (rng() % 8 == 0) s.control_inputs.push_back(static_cast<std::int64_t>(rng() % static_cast<unsigned>(i)));
    }
    b.add_op(std::move(s));
  }
  return b.build();
}

go::Cluster random_cluster(std::mt19937& rng, int nd, bool tight_memory) {
  std::uniform_real_distribution<double> u01(0, 1);
  go::DeviceSpec slow = go::DeviceSpec::p100(), fast = go::DeviceSpec::v100();
  go::Cluster c = go::Cluster::uniform("random", fast, nd, 1e10, 1e-5);
  for (int d = 0; d < nd; ++d) {
    if (rng() % 3 == 0) c.devices[static_cast<std::size_t>(d)].spec = slow;
    c.devices[static_cast<std::size_t>(d)].spec.memory_bytes = tight_memory ? 20000000 + static_cast<std::int64_t>(rng() % 40000000) : 1LL << 40;
    for (int e = 0; e < nd; ++e) {
      c.bandwidth[static_cast<std::size_t>(d * nd + e)] = 1e9 + 5e10 * u01(rng);
      c.latency[static_cast<std::size_t>(d * nd + e)] = 1e-4 * u01(rng);
    }
  }
  c.channels = static_cast<go::ChannelModel>(rng() % 3);
  return c;
}

// Fusion groups as random intervals of the topological order (always convex), members on one device.
void random_fusion(std::mt19937& rng, const go::OpGraph& g, go::Plan& p) {
  const int n = g.num_ops();
  p.fusion.assign(static_cast<std::size_t>(n), -1);
  auto topo = g.topo_order();
  int k = 0;
  while (k < n) {
    const int len = 1 + static_cast<int>(rng() % 4);
    if (rng() % 2 == 0 && len > 1) {
      const int gid = static_cast<int>(rng() % static_cast<unsigned>(n));
      bool fresh = true;
      for (auto f : p.fusion) fresh = fresh && f != gid;
      if (fresh) {
        const std::int32_t d = p.device_of(topo[static_cast<std::size_t>(k)]);
        for (int j = k; j < std::min(n, k + len); ++j) {
          p.fusion[static_cast<std::size_t>(topo[static_cast<std::size_t>(j)])] = gid;
          if (!p.device.empty()) p.device[static_cast<std::size_t>(topo[static_cast<std::size_t>(j)])] = d;
        }
      }
    }
    k += len;
  }
}

// Unit-level lower bounds: longest path of unit costs, and the busiest device.
double unit_critical_path(const go::OpGraph& g, const go::SimWorkspace& ws) {
  std::vector<double> done(static_cast<std::size_t>(g.num_ops()), 0);
  double best = 0;
  for (go::OpId v : g.topo_order()) {
    const go::OpId L = ws.unit_of(v);
    double ready = 0;
    for (go::OpId u : g.pred(v))
      if (ws.unit_of(u) != L) ready = std::max(ready, done[static_cast<std::size_t>(ws.unit_of(u))]);
    // a unit starts after all its members' external inputs
    done[static_cast<std::size_t>(L)] =
        std::max(done[static_cast<std::size_t>(L)], ready + (ws.finish_time(L) - ws.start_time(L)));
    best = std::max(best, done[static_cast<std::size_t>(L)]);
  }
  return best;
}

void check_invariants(const go::OpGraph& g, const go::Cluster& c, const go::Plan& p, const go::SimWorkspace& ws) {
  const go::SimResult& r = ws.result();
  const int nd = c.num_devices();
  double work = 0, max_busy = 0;
  for (double b : r.busy_time) {
    work += b;
    max_busy = std::max(max_busy, b);
  }
  CHECK(r.step_time >= max_busy * (1 - 1e-12));
  CHECK(r.step_time >= work / nd * (1 - 1e-12));
  CHECK(r.step_time >= unit_critical_path(g, ws) * (1 - 1e-12) - 1e-15);
  // the plan-independent bounds of go/sim/bound.hpp
  const go::StepTimeBound lb = go::step_time_lower_bound(g, c);
  CHECK(r.step_time >= lb.fused * (1 - 1e-12));
  bool fused = false;
  for (auto f : p.fusion) fused = fused || f >= 0;
  if (!fused) CHECK(r.step_time >= lb.unfused * (1 - 1e-12));
  // inputs arrive before an op starts
  std::set<std::pair<go::TensorId, int>> sent;
  for (const go::TransferRecord& x : ws.transfers()) {
    CHECK(sent.insert({x.tensor, x.dst}).second);
    CHECK(x.src != x.dst);
    CHECK(x.start >= ws.finish_time(g.tensor(x.tensor).producer) - 1e-15);
    CHECK(x.end == Approx(x.start + c.transfer_time(x.src, x.dst, static_cast<double>(x.bytes))));
  }
  for (go::OpId v = 0; v < g.num_ops(); ++v) {
    auto preds = g.pred(v);
    auto pt = g.pred_tensors(v);
    for (std::size_t k = 0; k < preds.size(); ++k) {
      const go::OpId u = preds[k];
      if (ws.unit_of(u) == ws.unit_of(v)) continue;
      const int du = p.device_of(u), dv = p.device_of(v);
      if (du == dv) {
        CHECK(ws.finish_time(u) <= ws.start_time(v));
      } else if (pt[k] < 0) {
        CHECK(ws.finish_time(u) + c.link_latency(du, dv) <= ws.start_time(v) * (1 + 1e-12));
      } else {
        bool found = false;
        for (const go::TransferRecord& x : ws.transfers())
          if (x.tensor == pt[k] && x.dst == dv) {
            found = true;
            CHECK(x.end <= ws.start_time(v));
          }
        CHECK(found);
      }
    }
  }
  // transfers on one channel never overlap (duplex: per sender and per receiver)
  for (int d = 0; d < nd; ++d) {
    std::vector<std::pair<double, double>> spans;
    for (const go::TransferRecord& x : ws.transfers())
      if (x.src == d || (c.channels == go::ChannelModel::shared && x.dst == d)) spans.emplace_back(x.start, x.end);
    std::sort(spans.begin(), spans.end());
    for (std::size_t k = 1; k < spans.size(); ++k) CHECK(spans[k].first >= spans[k - 1].second - 1e-15);
  }
  // memory never negative, ends at the resident parameters, peaks where reported
  std::vector<std::int64_t> last(r.resident_memory), top(r.resident_memory);
  for (const go::MemoryEvent& m : ws.memory_events()) {
    CHECK(m.usage >= 0);
    last[static_cast<std::size_t>(m.device)] = m.usage;
    top[static_cast<std::size_t>(m.device)] = std::max(top[static_cast<std::size_t>(m.device)], m.usage);
  }
  CHECK(last == r.resident_memory);
  CHECK(top == r.peak_memory);
}

}  // namespace

TEST_CASE("random DAGs and plans: simulator == reference, invariants hold", "[sim][random]") {
  std::mt19937 rng(12345);
  int fused_plans = 0, prio_plans = 0, oom_plans = 0, total = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    const int n = 2 + static_cast<int>(rng() % 40);
    const int nd = 1 + static_cast<int>(rng() % 4);
    const bool free_ops = iter % 4 == 3;
    const go::OpGraph g = random_graph(rng, n, free_ops);
    const go::Cluster c = random_cluster(rng, nd, iter % 5 == 4);
    // the reference knows the fusion cost model, not the fusion rules: any convex group runs
    go::SimOptions so;
    so.check_fusion_rules = false;
    go::Simulator sim(g, c, so);
    go::SimWorkspace ws = sim.make_workspace();
    ws.set_record_memory(true);
    for (int rep = 0; rep < 3; ++rep) {
      go::Plan p;
      if (rng() % 5 != 0) {
        p.device.resize(static_cast<std::size_t>(n));
        for (auto& d : p.device) d = static_cast<std::int32_t>(rng() % static_cast<unsigned>(nd));
      }
      if (rng() % 2 == 0) {
        p.priority.resize(static_cast<std::size_t>(n));
        for (auto& x : p.priority) x = static_cast<float>(rng() % 1000000) / 1000.0f;
        ++prio_plans;
      }
      if (rng() % 3 == 0) {
        random_fusion(rng, g, p);
        ++fused_plans;
      }
      INFO("iter " << iter << " rep " << rep << " n " << n << " devices " << nd);
      REQUIRE(go::check_plan(g, p, nd, true, false) == "");
      const go::SimResult& r = sim.simulate(p, ws);
      ++total;
      const RefResult ref = reference(g, c, p);
      CHECK(r.step_time == Approx(ref.step).epsilon(1e-12));
      CHECK(r.transfer_bytes == ref.transfer_bytes);
      CHECK(r.transfers == ref.transfers);
      CHECK(r.kernel_launches == ref.launches);
      for (int d = 0; d < nd; ++d) CHECK(r.busy_time[static_cast<std::size_t>(d)] == Approx(ref.busy[static_cast<std::size_t>(d)]));
      for (go::OpId v = 0; v < n; ++v)
        if (ws.unit_of(v) == v) CHECK(ws.start_time(v) == Approx(ref.start[static_cast<std::size_t>(v)]).epsilon(1e-12));
      bool ref_oom = false;
      for (int d = 0; d < nd; ++d) {
        ref_oom = ref_oom || ref.peak[static_cast<std::size_t>(d)] > c.spec(d).memory_bytes;
        if (!free_ops) CHECK(r.peak_memory[static_cast<std::size_t>(d)] == ref.peak[static_cast<std::size_t>(d)]);
        else CHECK(r.peak_memory[static_cast<std::size_t>(d)] >= ref.peak[static_cast<std::size_t>(d)]);
      }
      if (!free_ops) CHECK(r.valid == !ref_oom);
      CHECK((r.valid || r.status == go::SimStatus::out_of_memory));
      oom_plans += r.valid ? 0 : 1;
      check_invariants(g, c, p, ws);
      // fusion never moves more bytes between devices, nor (without views) through device memory
      if (!p.fusion.empty()) {
        const std::int64_t fused_bytes = r.transfer_bytes, fused_launches = r.kernel_launches;
        const double fused_traffic = r.memory_traffic;
        go::Plan unfused = p;
        unfused.fusion.clear();
        const go::SimResult& u = sim.simulate(unfused, ws);
        CHECK(fused_bytes <= u.transfer_bytes);
        CHECK(fused_launches <= u.kernel_launches);
        if (!free_ops) CHECK(fused_traffic <= u.memory_traffic * (1 + 1e-12));
      }
    }
  }
  CHECK(fused_plans > 500);
  CHECK(prio_plans > 1000);
  CHECK(oom_plans > 50);
  CHECK(total == 9000);
}

// A random plan within the fusion rules on nd devices: random devices, priorities half of the time,
// and by `kind` unfused (0), fused by the XLA-like heuristic (1) or along random edges (2).
go::Plan random_rules_plan(std::mt19937& rng, const go::OpGraph& g, int nd, const go::FusionEdges& edges, int kind) {
  go::Plan p;
  p.device.resize(static_cast<std::size_t>(g.num_ops()));
  for (auto& d : p.device) d = static_cast<std::int32_t>(rng() % static_cast<unsigned>(nd));
  if (rng() % 2 == 0) {
    p.priority.resize(static_cast<std::size_t>(g.num_ops()));
    for (auto& x : p.priority) x = static_cast<float>(rng() % 1000);
  }
  if (kind == 1) {
    edges.apply(g, p, nullptr);
  } else if (kind == 2) {
    std::vector<std::uint8_t> flags(static_cast<std::size_t>(edges.size()));
    for (auto& f : flags) f = rng() % 2 == 0 ? 1 : 0;
    edges.apply(g, p, &flags);
  }
  return p;
}

// Simulates three random plans within the rules (unfused, XLA-like, random edges; random devices and
// priorities) and checks that none runs faster than `bound`. Returns how many had fusion groups.
int check_rules_plans_above(std::mt19937& rng, const go::OpGraph& g, const go::Cluster& c, const go::SimOptions& so,
                            double bound) {
  go::Simulator sim(g, c, so);
  const go::FusionEdges edges(g);
  int fused = 0;
  for (int kind = 0; kind < 3; ++kind) {
    const go::Plan p = random_rules_plan(rng, g, c.num_devices(), edges, kind);
    INFO("plan kind " << kind);
    REQUIRE(go::check_plan(g, p, c.num_devices()) == "");
    const go::SimResult& r = sim.simulate(p);
    REQUIRE(r.valid);
    CHECK(r.step_time >= bound * (1 - 1e-12));
    fused += p.fusion.empty() ? 0 : 1;
  }
  return fused;
}

TEST_CASE("the bound for valid plans holds for every plan within the fusion rules", "[sim][random][bound]") {
  // Random DAGs with forward and backward ops of the kinds the rules treat apart (library kernels,
  // alone ops, loop and reduction ops; measured or roofline), on random heterogeneous clusters,
  // random devices and priorities, unfused, fused by the XLA-like heuristic or along random edges
  // (FusionEdges: legal by construction), simulated with the rules checked: no step time is below
  // the valid bound, which lies between the any-plan bound and the unfused one.
  std::mt19937 rng(777);
  int checked = 0, fused = 0, tighter = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    const int n = 2 + static_cast<int>(rng() % 40);
    const int nd = 1 + static_cast<int>(rng() % 4);
    const go::OpGraph g = random_graph(rng, n, iter % 4 == 3, true);
    const go::Cluster c = random_cluster(rng, nd, false);
    const go::StepTimeBound lb = go::step_time_lower_bound(g, c);
    CHECK(lb.fused <= lb.valid * (1 + 1e-12));
    CHECK(lb.valid <= lb.unfused * (1 + 1e-12));
    tighter += lb.valid > lb.fused * (1 + 1e-9) ? 1 : 0;
    INFO("iter " << iter << " n " << n << " devices " << nd);
    fused += check_rules_plans_above(rng, g, c, {}, lb.valid);
    checked += 3;
  }
  CHECK(checked == 4500);
  CHECK(fused > 1000);
  CHECK(tighter > 1000);  // the rules raise the bound on most of these graphs
}

TEST_CASE("the traffic floors of the valid bound hold on graphs costed by the roofline", "[sim][random][bound]") {
  // Random DAGs of every op kind (sources first, tensors read by several ops, parameters, ops of no
  // FLOPs), roofline-costed: without measured times, or with them and the bound and the simulator
  // both told to ignore them (CostSource::roofline). Clusters of random bandwidth and memory
  // efficiencies (some above 1: a lone op streams faster than a group). Plans unfused, XLA-like,
  // or fused along random edges; none may simulate below the traffic floors' bound, which must
  // be the larger bound on many of these graphs (it is what they test).
  std::mt19937 rng(4242);
  std::uniform_real_distribution<double> u01(0, 1);
  int checked = 0, raised = 0;
  for (int iter = 0; iter < 1200; ++iter) {
    const int n = 2 + static_cast<int>(rng() % 40), nd = 1 + static_cast<int>(rng() % 4);
    const bool ignore_times = iter % 3 == 2;
    go::GraphBuilder b;
    std::vector<int> nout;
    for (int i = 0; i < n; ++i) {
      go::OpSpec s;
      s.name = "op" + std::to_string(i);
      // every kind, and the rules' classes evenly: library kernels, epilogue and other loop ops,
      // reductions, alone ops
      const go::OpKind picks[] = {go::OpKind::matmul, go::OpKind::conv,    go::OpKind::relu,   go::OpKind::add,
                                  go::OpKind::dropout, go::OpKind::softmax, go::OpKind::concat, go::OpKind::reduce,
                                  go::OpKind::update};
      s.kind = i < 2                ? go::OpKind::input
               : rng() % 3 == 0     ? static_cast<go::OpKind>(2 + rng() % (go::kNumOpKinds - 2))
                                    : picks[rng() % std::size(picks)];
      if (rng() % 3 == 0) s.role = go::OpRole::backward;
      // a library kernel's FLOPs against its bytes as a matmul's, a loop op's as elementwise math's
      const bool library = s.kind == go::OpKind::matmul || s.kind == go::OpKind::conv;
      if (rng() % 4 != 0) s.flops = (library ? 1e8 : 1e4) * (1 + 100 * u01(rng));
      if (ignore_times && rng() % 2 == 0) s.time = 1e-6 + 1e-4 * u01(rng);
      if (rng() % 4 == 0) s.param_bytes = static_cast<std::int64_t>(rng() % 5000000);
      nout.push_back(random_outputs(rng, s));
      if (i >= 2) {
        const int fan = 1 + static_cast<int>(rng() % 3);
        for (int k = 0; k < fan; ++k) {
          // half of the reads from the first ops: tensors with several readers
          const int src = rng() % 2 == 0 ? static_cast<int>(rng() % 3) % i : static_cast<int>(rng() % static_cast<unsigned>(i));
          if (nout[static_cast<std::size_t>(src)] == 0) continue;
          s.inputs.push_back({src, static_cast<std::int32_t>(rng() % static_cast<unsigned>(nout[static_cast<std::size_t>(src)]))});
        }
      }
      b.add_op(std::move(s));
    }
    const go::OpGraph g = b.build();
    go::Cluster c = random_cluster(rng, nd, false);
    for (auto& d : c.devices) {
      d.spec.bandwidth_efficiency = 0.3 + 0.7 * u01(rng);
      for (auto& e : d.spec.memory_efficiency) e = rng() % 3 == 0 ? 1.0 + u01(rng) : 0.2 + 0.8 * u01(rng);
    }
    const go::CostSource src = ignore_times ? go::CostSource::roofline : go::CostSource::measured;
    const go::StepTimeBound lb = go::step_time_lower_bound(g, c, src);
    CHECK(lb.valid == std::max(lb.valid_traffic, lb.valid_compute));
    CHECK(lb.valid <= lb.unfused * (1 + 1e-12));
    go::SimOptions so;
    so.cost = src;
    INFO("iter " << iter << " n " << n << " devices " << nd);
    check_rules_plans_above(rng, g, c, so, lb.valid_traffic);
    checked += 3;
    raised += lb.valid_traffic > lb.valid_compute * (1 + 1e-9) ? 1 : 0;
  }
  CHECK(checked == 3600);
  CHECK(raised > 300);
}

TEST_CASE("prefetching changes no result", "[sim][random]") {
  // The same plans with and without the event loop's prefetches: every output bit for bit, on
  // random DAGs (fused, prioritized, out of memory) and on a zoo graph large enough to prefetch by
  // default (gnmt8's training graph, 42,683 ops), whose fused and prioritized plans exercise the
  // group members' prefetches.
  auto same = [](const go::Simulator& sim, const go::Plan& p, go::SimPrefetch with) {
    go::SimWorkspace wa = sim.make_workspace(), wb = sim.make_workspace();
    wa.set_prefetch(with);
    wb.set_prefetch(go::SimPrefetch::never);
    wa.set_record_memory(true);
    wb.set_record_memory(true);
    go::test::check_same_simulation(sim.simulate(p, wa), wa, sim.simulate(p, wb), wb, sim.num_ops());
    CHECK(wa.memory_events().size() == wb.memory_events().size());
    CHECK(wa.transfers().size() == wb.transfers().size());
  };
  std::mt19937 rng(2468);
  for (int iter = 0; iter < 300; ++iter) {
    const int n = 2 + static_cast<int>(rng() % 60), nd = 1 + static_cast<int>(rng() % 4);
    const go::OpGraph g = random_graph(rng, n, iter % 4 == 3);
    const go::Cluster c = random_cluster(rng, nd, iter % 5 == 4);
    go::SimOptions so;
    so.check_fusion_rules = false;
    const go::Simulator sim(g, c, so);
    CHECK_FALSE(sim.prefetches());  // small: not by default
    go::Plan p;
    p.device.resize(static_cast<std::size_t>(n));
    for (auto& d : p.device) d = static_cast<std::int32_t>(rng() % static_cast<unsigned>(nd));
    if (rng() % 2 == 0) {
      p.priority.resize(static_cast<std::size_t>(n));
      for (auto& x : p.priority) x = static_cast<float>(rng() % 1000) / 10.0f;
    }
    if (rng() % 2 == 0) random_fusion(rng, g, p);
    INFO("iter " << iter);
    same(sim, p, go::SimPrefetch::always);
  }
  const go::OpGraph g = go::make_training_graph(go::load_graph("zoo:gnmt8"));
  const go::Cluster c = go::cluster_preset("v100x8");
  const go::Simulator sim(g, c);
  CHECK(sim.prefetches());  // ~7 MB of loop arrays
  const go::OpGraph small = go::make_training_graph(go::load_graph("zoo:gnmt2"));
  CHECK_FALSE(go::Simulator(small, c).prefetches());  // ~2 MB
  go::Plan p;
  p.device = go::zoo_human_placement(g, 8);
  go::colocate(g, p);
  same(sim, p, go::SimPrefetch::automatic);
  go::apply_xla_fusion(g, p);
  p.priority.resize(p.device.size());
  for (std::size_t i = 0; i < p.priority.size(); ++i) p.priority[i] = static_cast<float>(rng() % 8);
  same(sim, p, go::SimPrefetch::automatic);
}

TEST_CASE("random non-convex or illegal fusion is caught, with the reason check_plan gives", "[sim][random]") {
  // With the fusion rules off only convexity counts; with them on, the rules come first (most of
  // these random groups mix convolutions and matmuls), and both sides must name the same group.
  std::mt19937 rng(777);
  int invalid = 0, illegal = 0;
  go::SimOptions off;
  off.check_fusion_rules = false;
  for (int iter = 0; iter < 2000; ++iter) {
    const int n = 3 + static_cast<int>(rng() % 20);
    const go::OpGraph g = random_graph(rng, n, false);
    go::Plan p;
    p.fusion.resize(static_cast<std::size_t>(n));
    for (auto& f : p.fusion) f = rng() % 3 == 0 ? static_cast<std::int32_t>(rng() % 3) : -1;
    for (bool rules : {false, true}) {
      go::Simulator sim(g, go::cluster_preset("v100x2"), rules ? go::SimOptions{} : off);
      go::SimWorkspace ws = sim.make_workspace();
      const std::string expect = go::check_plan(g, p, 2, true, rules);
      const go::SimResult& r = sim.simulate(p, ws);
      INFO("iter " << iter << (rules ? " with" : " without") << " the fusion rules");
      CHECK(go::sim_reason(r, g, sim.cluster()) == expect);
      CHECK(r.valid == expect.empty());
      if (!r.valid && !rules) {
        ++invalid;
        CHECK((r.status == go::SimStatus::fusion_not_convex || r.status == go::SimStatus::fusion_cycle));
      }
      if (!r.valid && rules) {
        CHECK((r.status == go::SimStatus::fusion_not_convex || r.status == go::SimStatus::fusion_cycle ||
               r.status == go::SimStatus::fusion_illegal));
        illegal += r.status == go::SimStatus::fusion_illegal;
      }
      // the workspace recovers
      CHECK(sim.simulate(go::Plan{}, ws).valid);
    }
  }
  CHECK(invalid > 100);
  CHECK(illegal > 100);
}

}  // namespace test_sim_random
