#pragma once
// The Simulator: what it computes (below) and its interface. Its implementation is compiled once into
// libgo: src/sim/simulator.cpp (the per-op cost records and flat graph arrays built once per (graph,
// cluster), the workspace's sizing, and simulate(): the checks a plan passes before one of the event
// loops runs it) and src/sim/event_loop.cpp (the event loops, with the fusion groups' costs and
// checks made per plan, "fusion groups -> units"). Include go/sim/simulator.hpp.
//
// ---- Semantics ----------------------------------------------------------------------------------
// Units. An unfused op is a unit; the ops of a fusion group form one unit (one kernel). A unit is
//   ready when every data and control edge entering it from outside has delivered; it then waits in
//   its device's ready queue.
// Devices. Each device has one compute stream running one unit at a time, without preemption. When
//   the stream is idle it takes the ready unit with the highest priority (Plan::priority, larger
//   first; a group takes the largest priority of its ops); ties, and every choice when the plan has
//   no priorities, go to the unit that became ready first (first ready, first run). Units ready at
//   time 0 are queued in topological order.
// Instants. All events at one instant are applied before any idle device picks its next unit:
//   first the completions of units (devices in index order), then transfer starts/ends and control
//   messages in the order they were requested.
// Op time. Unfused: go::op_time (graph/cost.hpp) on the device's spec: a measured time when the op
//   has one (taken as is: it already contains its launch), zero for inputs/constants/views, else
//   launch_overhead + max(FLOPs / (peak * efficiency of its kind), bytes / (bandwidth * efficiency))
//   with bytes = distinct inputs + outputs + parameters. SimOptions::cost = roofline ignores
//   measured times: every op is costed as if the graph had none.
// Fusion. A group runs as one kernel: one launch overhead + for each library kernel (conv, matmul)
//   with a measured time, that time minus one launch overhead + max(sum over its roofline ops of
//   FLOPs / (peak * efficiency), the time it streams its loop bytes). External bytes = distinct
//   tensors read from outside the group + tensors written that are read outside it or by nobody +
//   parameters; tensors produced and consumed inside the group never touch device memory. Loop
//   bytes = the external bytes less those a measured library kernel reads or writes (its measured
//   time holds them: what an epilogue adds is its own outside reads and the output it writes).
//   They stream at bandwidth * efficiency, or, when the group has measured members other than
//   library kernels, at the rate of the longest of them (its bytes / (its time - one launch)), and
//   then in at most the time those members took (less their launches; + the roofline members'
//   bytes at bandwidth * efficiency). Why: a measured time cannot be split into compute and traffic,
//   but a loop op's time is its traffic at the rate the device streams it, and fusing removes the
//   traffic between members; the longest member is where the group spends its time, while members
//   that take only their launch floor (views, shape queries, no-op casts) would give a rate from
//   bytes they never move. The cap: fusing removes traffic, it never adds any (a short member with
//   few bytes can be the longest). A lone op (unfused) keeps its measured time exactly. A group of
//   only zero-cost ops costs nothing and launches nothing.
// Transfers. When a unit completes on device s, each output tensor is sent once to every other
//   device that has a consumer of it (tensors in output order, destinations in order of their first
//   consumer). A transfer takes latency(s, d) + bytes / bandwidth(s, d) and occupies, per
//   Cluster::channels, the sender's send channel and the receiver's receive channel (duplex), one
//   channel per device shared by both directions (shared, as Baechi) or the sender's channel only
//   (sender, as Placeto). It starts when the tensor is produced and the channels it needs are free,
//   and channels serve transfers in request order (each transfer reserves its channels when it is
//   requested, so a later transfer never starts before an earlier one on the same channel). The
//   consumers on d may start once it has arrived. A control edge across devices sends no data: it
//   arrives after the link latency and holds no channel.
// Memory. Parameters (Op::param_bytes, including optimizer state) are resident on their op's device
//   for the whole step. A unit allocates its output tensors and its scratch (temp_bytes; a group:
//   the largest member's) when it starts and frees the scratch when it completes. A tensor is freed
//   on its producer's device after its last consumer there has completed and its last outgoing
//   transfer has ended; a received copy is allocated when its transfer starts and freed after the
//   last consumer on the receiving device completes; a tensor nobody reads is freed when its
//   producer completes. Peak memory is the maximum over time of resident + live bytes per device. A
//   device whose usage exceeds DeviceSpec::memory_bytes makes the plan invalid (out of memory); the
//   simulation still runs to the end (SimOptions::stop_on_oom, or a workspace's set_stop_on_oom,
//   stops it there) so the step time and the peaks are reported for penalties.
// Validity. A device index out of range, a non-finite priority, a fusion id out of range, a fusion
//   group spanning devices, a colocation group (Op::colocation) spanning devices (when
//   SimOptions::check_colocation), a fusion group that is not a kernel a compiler builds (the rules
//   of go/graph/fusion_rules.hpp, checked once per plan in O(group edges), when
//   SimOptions::check_fusion_rules), or fusion groups that make the unit graph cyclic (a non-convex
//   group, or two groups depending on each other) make the plan invalid with step_time = +inf and
//   the offending ops/groups recorded; sim_reason() words it the same way as check_plan().
// Step time is the time the last unit or transfer completes.
//
// ---- Where this differs from the anchors ---------------------------------------------------------
// Baechi (virtual_scheduler.py): same per-device compute queue and each-tensor-once-per-device rule;
//   Baechi has one channel per device for sends and receives (ChannelModel::shared here, default
//   duplex), costs transfers a*bytes + b from a profile (here latency + bytes / link bandwidth per
//   pair), and picks ready ops by its own order (ETF/SCT priorities: give them as Plan::priority).
//   Baechi counts temporary memory for the whole step; here scratch lives only while the op runs.
// Placeto (tf_sim.py): one op at a time per device in ready order, a per-sender transfer queue
//   (ChannelModel::sender), transfer = bytes / 7.6 GB/s + 25 us and a 5.7 us gap after each op (the
//   k80xN preset: as link latency/bandwidth and as the launch overhead of roofline ops; measured
//   times get no extra gap). Placeto adds a memory penalty to the runtime; here out-of-memory is a
//   separate verdict (valid = false) with the peaks, and the caller chooses the penalty.
// Neither anchor models fusion; TensorFlow's XLA-style clusters are the model here.
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

namespace go {

class Simulator {
 public:
  Simulator(const OpGraph& graph, Cluster cluster, SimOptions options = {});
  Simulator(OpGraph&&, Cluster, SimOptions = {}) = delete;  // the graph must outlive the simulator

  const OpGraph& graph() const { return *g_; }
  const Cluster& cluster() const { return cluster_; }
  const SimOptions& options() const { return options_; }
  std::int32_t num_ops() const { return n_; }
  std::int32_t num_devices() const { return ndev_; }
  // Whether simulations prefetch by default (SimWorkspace::set_prefetch): where the event loop's
  // arrays outgrow the cache.
  bool prefetches() const { return prefetch_; }

  // Seconds op `op` takes unfused on device `device`.
  double op_cost(OpId op, std::int32_t device) const {
    return cost_[static_cast<std::size_t>(dev_kind_[static_cast<std::size_t>(device)]) * static_cast<std::size_t>(n_) +
                 static_cast<std::size_t>(op)];
  }

  SimWorkspace make_workspace() const {
    SimWorkspace ws;
    prepare(ws);
    return ws;
  }

  // Simulates one step of `plan`. Throws go::Error only when a non-empty plan vector does not have
  // one entry per op; every other problem is reported in the result (valid = false).
  const SimResult& simulate(const Plan& plan, SimWorkspace& ws) const;

  // Convenience: a fresh workspace per call (allocates).
  SimResult simulate(const Plan& plan) const {
    SimWorkspace ws = make_workspace();
    return simulate(plan, ws);
  }

 private:
  template <bool kFused, bool kPrio>
  void run(const Plan& plan, const std::int32_t* dev, SimWorkspace& ws) const;
  void prepare(SimWorkspace& ws) const;

  const OpGraph* g_;
  Cluster cluster_;
  SimOptions options_;
  std::int32_t n_ = 0, m_ = 0, nt_ = 0, ndev_ = 0, ncoloc_ = 0;
  std::vector<std::int32_t> dev_kind_;
  std::size_t nkinds_ = 0;
  std::vector<double> cost_, compute_, extra_;  // [kind * n + op]
  // [kind * n + op]: what a fused group of loop members may take at most, per member: a measured
  // one's time less its launch, a roofline one's bytes at bandwidth * efficiency (see "Fusion")
  std::vector<double> cap_;
  std::vector<double> launch_, inv_mem_bw_;     // per kind
  std::vector<std::uint8_t> kernel_, roof_;     // launches a kernel; costed by the roofline
  // per op, for the fused groups' cost: the kUnit* bits below (one byte read per member)
  static constexpr std::uint8_t kUnitKernel = 1, kUnitRoof = 2, kUnitMeasuredLoop = 4, kUnitMeasuredLib = 8;
  std::vector<std::uint8_t> ubits_;
  bool has_mlib_ = false;                       // some op is a measured library kernel (kUnitMeasuredLib)
  bool prefetch_ = false;                       // the event loop prefetches (src/sim/event_loop.cpp)
  std::vector<double> traffic_;
  std::vector<std::int64_t> alloc_, temp_, param_, sink_;
  std::vector<SimWorkspace::UnitStart> ustart_;  // [kind * n + op]: an unfused op's start
  std::vector<std::int64_t> release_;               // an unfused op's scratch + unread outputs
  std::vector<std::int32_t> in_off_, in_src_, in_tensor_, in_deg_;
  std::vector<FusionTraits> ftraits_;  // per op, for the fusion rules
  std::vector<std::int32_t> out_off_, out_dst_, out_tensor_, out_in_edge_;
  std::vector<std::int64_t> tbytes_;
  std::vector<std::int32_t> tcons_;
  std::vector<std::int32_t> trun_end_;  // per tensor: the end of its run in its producer's out-edges
  std::vector<std::int32_t> topo_, sources_, zeros_, coloc_;
  std::vector<double> xlat_, xinv_bw_;
  std::vector<std::int64_t> capacity_;
};

}  // namespace go
