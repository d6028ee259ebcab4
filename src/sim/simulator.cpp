// go::Simulator (go/sim/simulator.hpp): the per-op cost records and flat graph arrays built once per
// (graph, cluster), the workspace's sizing, and simulate()'s checks before an event loop
// (event_loop.cpp) runs the plan. Compiled once into libgo; the semantics are documented in
// go/sim/simulator/semantics.hpp.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>
#include "go/core/error.hpp"
#include "go/graph/cost.hpp"
#include "go/graph/fusion_rules.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/op_kind.hpp"
#include "go/sim/cluster.hpp"
#include "go/sim/plan.hpp"
#include "go/sim/simulator/result.hpp"
#include "go/sim/simulator/workspace.hpp"

#include "go/sim/simulator.hpp"

namespace go {

namespace {

bool sim_same_kind(const DeviceSpec& a, const DeviceSpec& b) {
  return a.peak_flops == b.peak_flops && a.mem_bandwidth == b.mem_bandwidth && a.launch_overhead == b.launch_overhead &&
         a.bandwidth_efficiency == b.bandwidth_efficiency && a.compute_efficiency == b.compute_efficiency &&
         a.memory_efficiency == b.memory_efficiency;
}

}  // namespace

Simulator::Simulator(const OpGraph& graph, Cluster cluster, SimOptions options)
    : g_(&graph), cluster_(std::move(cluster)), options_(options) {
  cluster_.validate();
  const OpGraph& g = graph;
  GO_CHECK(g.num_edges() < std::numeric_limits<std::int32_t>::max() / 4, g.where(), "too many edges to simulate");
  GO_CHECK(g.num_tensors() < std::numeric_limits<std::int32_t>::max() / 4, g.where(), "too many tensors to simulate");
  n_ = g.num_ops();
  m_ = static_cast<std::int32_t>(g.num_edges());
  nt_ = g.num_tensors();
  ndev_ = cluster_.num_devices();
  const auto n = static_cast<std::size_t>(n_);
  // device kinds
  std::vector<const DeviceSpec*> kinds;
  dev_kind_.resize(static_cast<std::size_t>(ndev_));
  for (std::int32_t d = 0; d < ndev_; ++d) {
    const DeviceSpec& s = cluster_.spec(d);
    std::size_t k = 0;
    while (k < kinds.size() && !sim_same_kind(*kinds[k], s)) ++k;
    if (k == kinds.size()) kinds.push_back(&s);
    dev_kind_[static_cast<std::size_t>(d)] = static_cast<std::int32_t>(k);
  }
  nkinds_ = kinds.size();
  const bool measured = options_.cost == CostSource::measured;
  cost_.resize(nkinds_ * n);
  compute_.resize(nkinds_ * n);
  extra_.resize(nkinds_ * n);
  cap_.resize(nkinds_ * n);
  launch_.resize(nkinds_);
  inv_mem_bw_.resize(nkinds_);
  for (std::size_t k = 0; k < nkinds_; ++k) {
    const DeviceSpec& s = *kinds[k];
    launch_[k] = s.launch_overhead;
    inv_mem_bw_[k] = 1.0 / (s.mem_bandwidth * s.bandwidth_efficiency);
    for (const Op& o : g.ops()) {
      const std::size_t i = k * n + static_cast<std::size_t>(o.id);
      const bool timed = measured && o.has_time();
      cost_[i] = op_time(o, s, options_.cost);
      const bool roof = !timed && !is_free_op(o.kind);
      compute_[i] = roof ? o.flops / (s.peak_flops * s.compute_efficiency[op_kind_index(o.kind)]) : 0.0;
      extra_[i] = timed ? std::max(0.0, o.time - s.launch_overhead) : 0.0;
      cap_[i] = timed ? extra_[i]
                      : roof ? static_cast<double>(o.input_bytes + o.output_bytes + o.param_bytes) * inv_mem_bw_[k] : 0.0;
    }
  }
  kernel_.resize(n);
  roof_.resize(n);
  ubits_.resize(n);
  traffic_.resize(n);
  alloc_.resize(n);
  temp_.resize(n);
  param_.resize(n);
  sink_.assign(n, 0);
  coloc_.resize(n);
  ncoloc_ = 0;
  tbytes_.resize(static_cast<std::size_t>(nt_));
  tcons_.assign(static_cast<std::size_t>(nt_), 0);
  for (TensorId t = 0; t < nt_; ++t) tbytes_[static_cast<std::size_t>(t)] = g.tensor(t).bytes;
  // in-edges (the graph's order)
  in_off_.resize(n + 1);
  in_src_.resize(static_cast<std::size_t>(m_));
  in_tensor_.resize(static_cast<std::size_t>(m_));
  in_deg_.resize(n);
  std::int32_t e = 0;
  for (OpId v = 0; v < n_; ++v) {
    in_off_[static_cast<std::size_t>(v)] = e;
    auto p = g.pred(v);
    auto pt = g.pred_tensors(v);
    for (std::size_t k = 0; k < p.size(); ++k, ++e) {
      in_src_[static_cast<std::size_t>(e)] = p[k];
      in_tensor_[static_cast<std::size_t>(e)] = pt[k];
      if (pt[k] >= 0) ++tcons_[static_cast<std::size_t>(pt[k])];
    }
    in_deg_[static_cast<std::size_t>(v)] = static_cast<std::int32_t>(p.size());
  }
  in_off_[n] = e;
  // out-edges sorted by tensor (control edges first), consumers in the graph's order
  out_off_.resize(n + 1);
  out_dst_.resize(static_cast<std::size_t>(m_));
  out_tensor_.resize(static_cast<std::size_t>(m_));
  out_in_edge_.resize(static_cast<std::size_t>(m_));
  std::vector<std::int32_t> fill(n);
  e = 0;
  for (OpId u = 0; u < n_; ++u) {
    out_off_[static_cast<std::size_t>(u)] = e;
    fill[static_cast<std::size_t>(u)] = e;
    e += g.out_degree(u);
  }
  out_off_[n] = e;
  for (OpId v = 0; v < n_; ++v)
    for (std::int32_t ie = in_off_[static_cast<std::size_t>(v)]; ie < in_off_[static_cast<std::size_t>(v) + 1]; ++ie) {
      const auto u = static_cast<std::size_t>(in_src_[static_cast<std::size_t>(ie)]);
      const auto slot = static_cast<std::size_t>(fill[u]++);
      out_dst_[slot] = v;
      out_tensor_[slot] = in_tensor_[static_cast<std::size_t>(ie)];
      out_in_edge_[slot] = ie;
    }
  {
    std::vector<std::int32_t> idx;
    std::vector<std::int32_t> d2, t2, i2;
    for (OpId u = 0; u < n_; ++u) {
      const std::int32_t b = out_off_[static_cast<std::size_t>(u)], en = out_off_[static_cast<std::size_t>(u) + 1];
      bool sorted = true;
      for (std::int32_t k = b + 1; k < en && sorted; ++k)
        sorted = out_tensor_[static_cast<std::size_t>(k - 1)] <= out_tensor_[static_cast<std::size_t>(k)];
      if (sorted) continue;
      idx.resize(static_cast<std::size_t>(en - b));
      for (std::int32_t k = 0; k < en - b; ++k) idx[static_cast<std::size_t>(k)] = b + k;
      std::stable_sort(idx.begin(), idx.end(), [&](std::int32_t x, std::int32_t y) {
        return out_tensor_[static_cast<std::size_t>(x)] < out_tensor_[static_cast<std::size_t>(y)];
      });
      d2.clear();
      t2.clear();
      i2.clear();
      for (std::int32_t x : idx) {
        d2.push_back(out_dst_[static_cast<std::size_t>(x)]);
        t2.push_back(out_tensor_[static_cast<std::size_t>(x)]);
        i2.push_back(out_in_edge_[static_cast<std::size_t>(x)]);
      }
      std::copy(d2.begin(), d2.end(), out_dst_.begin() + b);
      std::copy(t2.begin(), t2.end(), out_tensor_.begin() + b);
      std::copy(i2.begin(), i2.end(), out_in_edge_.begin() + b);
    }
  }
  for (const Op& o : g.ops()) {
    const auto i = static_cast<std::size_t>(o.id);
    roof_[i] = !(measured && o.has_time()) && !is_free_op(o.kind);
    kernel_[i] = (measured && o.has_time()) || !is_free_op(o.kind);
    const bool timed = measured && o.has_time(), lib = timed && fusion_class(o) == FusionClass::library;
    ubits_[i] = static_cast<std::uint8_t>((kernel_[i] ? kUnitKernel : 0) | (roof_[i] ? kUnitRoof : 0) |
                                          (timed && !lib ? kUnitMeasuredLoop : 0) | (lib ? kUnitMeasuredLib : 0));
    has_mlib_ = has_mlib_ || lib;
    traffic_[i] = kernel_[i] ? static_cast<double>(o.input_bytes + o.output_bytes + o.param_bytes) : 0.0;
    alloc_[i] = o.temp_bytes + o.output_bytes;
    temp_[i] = o.temp_bytes;
    param_[i] = o.param_bytes;
    for (TensorId t = o.first_output; t < o.first_output + o.num_outputs; ++t)
      if (tcons_[static_cast<std::size_t>(t)] == 0) sink_[i] += tbytes_[static_cast<std::size_t>(t)];
    coloc_[i] = o.colocation;
    ncoloc_ = std::max(ncoloc_, o.colocation + 1);
  }
  ftraits_ = fusion_traits(g);
  topo_.assign(g.topo_order().begin(), g.topo_order().end());
  for (std::int32_t v : topo_)
    if (in_deg_[static_cast<std::size_t>(v)] == 0) sources_.push_back(v);
  zeros_.assign(n, 0);
  const auto nd = static_cast<std::size_t>(ndev_);
  xlat_.resize(nd * nd);
  xinv_bw_.resize(nd * nd);
  for (std::size_t s = 0; s < nd; ++s)
    for (std::size_t d = 0; d < nd; ++d) {
      xlat_[s * nd + d] = s == d ? 0.0 : cluster_.latency[s * nd + d];
      xinv_bw_[s * nd + d] = s == d ? 0.0 : 1.0 / cluster_.bandwidth[s * nd + d];
    }
  capacity_.resize(nd);
  for (std::size_t d = 0; d < nd; ++d) capacity_[d] = cluster_.devices[d].spec.memory_bytes;
  ustart_.resize(nkinds_ * n);
  release_.resize(n);
  for (std::size_t k = 0; k < nkinds_; ++k)
    for (std::size_t i = 0; i < n; ++i)
      ustart_[k * n + i] = SimWorkspace::UnitStart{cost_[k * n + i], traffic_[i], alloc_[i], kernel_[i]};
  for (std::size_t i = 0; i < n; ++i) release_[i] = temp_[i] + sink_[i];
  // What the event loop reads per op (records, offsets, the workspace's times and counters), per
  // edge and per tensor. While that stays in cache prefetching only adds instructions (5-25% on the
  // zoo's 12,808-op gnmt2 training graph, ~2 MB); between ~2.5 and 4 MB it pays or not with the
  // machine's load (wavenet2, gnmt4: 0.65-1.14x the time); from ~7 MB on it pays (transformer_xl8,
  // 45,024 ops: 0.65-0.78x with human's devices; gnmt8 at 121 steps, 80,588 ops: 0.69-0.78x),
  // bench/README "Prefetching in the event loop".
  const double loop_bytes = static_cast<double>(n) * (90.0 + 32.0 * static_cast<double>(nkinds_ - 1)) +
                            static_cast<double>(m_) * 24.0 + static_cast<double>(nt_) * 24.0;
  prefetch_ = loop_bytes > 5.0 * (1 << 20);
  trun_end_.assign(static_cast<std::size_t>(nt_), 0);
  for (std::int32_t k = 0; k < m_; ++k) {
    const std::int32_t t = out_tensor_[static_cast<std::size_t>(k)];
    if (t >= 0 && (k == m_ - 1 || out_tensor_[static_cast<std::size_t>(k) + 1] != t))
      trun_end_[static_cast<std::size_t>(t)] = k + 1;
  }
}

void Simulator::prepare(SimWorkspace& ws) const {
  if (ws.n_ == n_ && ws.m_ == m_ && ws.nt_ == nt_ && ws.ndev_ == ndev_ && ws.ncoloc_ == ncoloc_) return;
  const auto n = static_cast<std::size_t>(n_);
  const auto nd = static_cast<std::size_t>(ndev_);
  ws.n_ = n_;
  ws.m_ = m_;
  ws.nt_ = nt_;
  ws.ndev_ = ndev_;
  ws.ncoloc_ = ncoloc_;
  ws.fused_ = false;
  ws.pending_.assign(n, 0);
  ws.times_.assign(2 * n, -1.0);
  ws.leader_.resize(n);
  for (std::size_t v = 0; v < n; ++v) ws.leader_[v] = static_cast<std::int32_t>(v);
  ws.grp_.assign(n, -1);
  ws.gbits_.assign(n / 64 + 1, 0);
  ws.gops_.assign(n, 0);
  ws.glead_.assign(n / 2 + 1, 0);
  ws.ngops_ = ws.ngroups_ = 0;
  ws.first_of_.assign(n, 0);
  ws.fepoch_ = 0;
  ws.scratch_.assign(n, 0);
  ws.path_.assign(n, 0);
  // a group has two or more ops: at most n / 2 of them
  ws.gmem_off_.assign(n / 2 + 2, 0);
  ws.gmem_list_.assign(n, 0);
  ws.gstart_.assign(n / 2 + 1, {});
  ws.grelease_.assign(n / 2 + 1, 0);
  ws.gprio_.assign(n / 2 + 1, 0);
  ws.dev_count_.assign(nd, 0);
  ws.stamp_.assign(static_cast<std::size_t>(nt_), 0);
  ws.epoch_ = 0;
  ws.refs_.assign(static_cast<std::size_t>(nt_), 0);
  ws.edge_copy_.assign(static_cast<std::size_t>(m_), -1);
  // every transfer is requested by at least one data edge: at most m_ of them
  ws.xfers_.assign(std::max<std::size_t>(static_cast<std::size_t>(m_), 1), TransferRecord{});
  ws.nxfers_ = 0;
  ws.xnext_.assign(std::max<std::size_t>(static_cast<std::size_t>(m_), 1), -1);
  ws.events_.clear();
  ws.events_.reserve(64);
  ws.src_head_.assign(nd, -1);
  ws.src_tail_.assign(nd, -1);
  ws.src_heap_.assign(nd, {});
  ws.dev_heap_.assign(nd, {});
  ws.qnext_.assign(n, -1);
  ws.qhead_.assign(nd, -1);
  ws.qtail_.assign(nd, -1);
  ws.qbuf_.assign(std::max<std::size_t>(n, 1), {});
  ws.qbeg_.assign(nd + 1, 0);
  ws.qsize_.assign(nd, 0);
  ws.cur_unit_.assign(nd, -1);
  ws.usage_.assign(nd, 0);
  ws.chan_.assign(2 * nd, 0);
  ws.dev_stamp_.assign(nd, -1);
  ws.dev_copy_.assign(nd, -1);
  ws.dirty_.assign(nd, 0);
  ws.dirty_flag_.assign(nd, 0);
  ws.coloc_first_.assign(static_cast<std::size_t>(ncoloc_), -1);
  ws.result_.busy_time.assign(nd, 0);
  ws.result_.peak_memory.assign(nd, 0);
  ws.result_.resident_memory.assign(nd, 0);
}

const SimResult& Simulator::simulate(const Plan& plan, SimWorkspace& ws) const {
  check_plan_sizes(plan, n_, g_->where());
  prepare(ws);
  SimResult& r = ws.result_;
  r.valid = true;
  r.status = SimStatus::ok;
  r.step_time = 0;
  r.transfer_bytes = r.transfers = r.kernel_launches = r.units = 0;
  r.memory_traffic = 0;
  r.problem_op = r.problem_op2 = -1;
  r.problem_group = r.problem_group2 = -1;
  r.problem_device = r.problem_device2 = -1;
  r.problem_bytes = 0;
  r.problem_time = 0;
  r.fusion_rule = FusionRule::ok;
  std::fill(r.busy_time.begin(), r.busy_time.end(), 0.0);
  std::fill(r.peak_memory.begin(), r.peak_memory.end(), 0);
  std::fill(r.resident_memory.begin(), r.resident_memory.end(), 0);
  ws.nxfers_ = 0;
  ws.mem_events_.clear();
  ws.fused_ = false;
  const std::int32_t* dev = plan.device.empty() ? zeros_.data() : plan.device.data();
  auto invalid = [&](SimStatus s) -> const SimResult& {
    r.valid = false;
    r.status = s;
    r.step_time = std::numeric_limits<double>::infinity();
    std::fill(ws.times_.begin(), ws.times_.end(), -1.0);
    return r;
  };
  // placement and priorities
  const float* prio = plan.priority.empty() ? nullptr : plan.priority.data();
  std::int64_t* resident = r.resident_memory.data();
  std::int32_t* count = ws.dev_count_.data();
  std::fill(ws.dev_count_.begin(), ws.dev_count_.end(), 0);
  for (std::int32_t v = 0; v < n_; ++v) {
    const std::int32_t d = dev[v];
    if (d < 0 || d >= ndev_) {
      r.problem_op = v;
      r.problem_device = d;
      return invalid(SimStatus::bad_device);
    }
    resident[d] += param_[static_cast<std::size_t>(v)];
    ++count[d];
    if (prio && !std::isfinite(prio[v])) {
      r.problem_op = v;
      return invalid(SimStatus::bad_priority);
    }
  }
  if (options_.check_colocation && ncoloc_ > 0) {
    std::fill(ws.coloc_first_.begin(), ws.coloc_first_.end(), -1);
    for (std::int32_t v = 0; v < n_; ++v) {
      const std::int32_t c = coloc_[static_cast<std::size_t>(v)];
      if (c < 0) continue;
      std::int32_t& f = ws.coloc_first_[static_cast<std::size_t>(c)];
      if (f < 0) f = v;
      else if (dev[f] != dev[v]) {
        r.record_split(c, f, v, dev);
        return invalid(SimStatus::colocation_split);
      }
    }
  }
  const bool fused = !plan.fusion.empty();
  if (fused) {
    if (prio) run<true, true>(plan, dev, ws);
    else run<true, false>(plan, dev, ws);
  } else {
    if (prio) run<false, true>(plan, dev, ws);
    else run<false, false>(plan, dev, ws);
  }
  return r;
}

}  // namespace go
