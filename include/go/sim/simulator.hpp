#pragma once
// The simulated multi-GPU execution model: given a graph, a cluster and a plan (device, priority and
// fusion group per op), the step time, per-device busy time and peak memory, bytes moved and kernel
// launches of one execution, or why the plan is invalid.
//
// Usage (one Simulator per (graph, cluster), one SimWorkspace per thread, reused across calls):
//   go::Simulator sim(graph, go::cluster_preset("v100x4"));
//   go::SimWorkspace ws = sim.make_workspace();
//   const go::SimResult& r = sim.simulate(plan, ws);   // no allocation once ws has warmed up
//   if (!r.valid) std::puts(go::sim_reason(r, graph, sim.cluster()).c_str());
// The Simulator only reads the graph (which must outlive it) and is safe to share between threads;
// the result lives in the workspace until its next simulation.
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
//   simulation still runs to the end (SimOptions::stop_on_oom stops it there) so the step time and
//   the peaks are reported for penalties.
// Validity. A device index out of range, a non-finite priority, a fusion id out of range, a fusion
//   group spanning devices, a colocation group (Op::colocation) spanning devices (when
//   SimOptions::check_colocation), a fusion group that is not a kernel a compiler builds (the rules
//   of go/graph/fusion_rules.hpp, checked once per plan in O(group edges), when
//   SimOptions::check_fusion_rules), or fusion groups that make the unit graph cyclic (a non-convex
//   group, or two groups depending on each other) make the plan invalid with step_time = +inf and
//   the offending ops/groups recorded; sim_reason() words it the same way as check_plan().
// Step time is the time the last unit or transfer completes.
//
// ---- Implementation ----------------------------------------------------------------------------
// One event loop per plan shape (fused or not, priorities or not). Busy devices sit in a heap by
// completion time, each sender's transfers in a FIFO list (its head's next start or end event in a
// heap of senders), control messages in their own heap; ready queues are FIFO lists (no priorities)
// or one packed binary heap per device keyed by one integer (priority bits, then ready order). All
// of these orders are total, so the heaps' shapes never change a result. The workspace's arrays are
// sized once (transfers: at most one per edge) and the loop uses raw pointers and local counters.
// What starting an unfused op reads (cost, traffic, allocation, kernel) is one record per (device
// kind, op), precomputed with the Simulator; a unit's start and finish times share a line. A fused
// plan pays only for its groups of two or more ops: their membership (a bit per op, small enough to
// stay in L1), leaders, members and costs are built per plan and undone at the next one, while lone
// ops use the unfused data. Events that leave no device to dispatch are handled back to back,
// without a round of the main loop.
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
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "go/core/error.hpp"
#include "go/graph/cost.hpp"
#include "go/graph/fusion_rules.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/op_kind.hpp"
#include "go/sim/cluster.hpp"
#include "go/sim/plan.hpp"

namespace go {

struct SimOptions {
  bool check_colocation = true;  // a colocation group spanning devices makes the plan invalid
  // A fusion group breaking go/graph/fusion_rules.hpp makes the plan invalid. Off only to study the
  // fusion cost model on arbitrary convex groups (tests, benchmarks of the mechanics).
  bool check_fusion_rules = true;
  bool stop_on_oom = false;      // stop at the first out-of-memory instead of finishing the step
  // roofline: ignore the graph's measured op times (as if it had none), to judge the cost model.
  CostSource cost = CostSource::measured;
};

enum class SimStatus : std::uint8_t {
  ok,
  bad_device,            // problem_op placed on problem_device, outside the cluster
  bad_priority,          // problem_op has a non-finite priority
  bad_fusion_id,         // problem_op has fusion id problem_group, outside [-1, num_ops)
  fusion_spans_devices,  // problem_group holds problem_op (problem_device) and problem_op2 (problem_device2)
  fusion_not_convex,     // a path leaves problem_group and re-enters it through problem_op
  fusion_cycle,          // problem_group and problem_group2 depend on each other
  fusion_illegal,        // problem_group breaks fusion_rule (go/graph/fusion_rules.hpp) at problem_op (and problem_op2)
  colocation_split,      // colocation group problem_group holds problem_op and problem_op2 on two devices
  out_of_memory,         // problem_device needed problem_bytes at problem_time (while running problem_op)
};

inline constexpr std::string_view sim_status_name(SimStatus s) {
  constexpr std::string_view names[] = {"ok",           "bad_device",        "bad_priority",
                                        "bad_fusion_id", "fusion_spans_devices", "fusion_not_convex",
                                        "fusion_cycle", "fusion_illegal",    "colocation_split",
                                        "out_of_memory"};
  return names[static_cast<std::size_t>(s)];
}

struct SimResult {
  bool valid = true;
  SimStatus status = SimStatus::ok;
  double step_time = 0;                        // seconds (+inf when the plan cannot run at all)
  std::vector<double> busy_time;               // seconds each device computed
  std::vector<std::int64_t> peak_memory;       // bytes per device (resident + live activations)
  std::vector<std::int64_t> resident_memory;   // bytes of parameters per device
  std::int64_t transfer_bytes = 0;             // bytes moved between devices
  std::int64_t transfers = 0;                  // number of tensor transfers
  std::int64_t kernel_launches = 0;            // units that launched a kernel
  std::int64_t units = 0;                      // units run (ops, with a fusion group counted once)
  double memory_traffic = 0;                   // bytes kernels read and wrote in device memory
  // What went wrong (see SimStatus), for sim_reason().
  OpId problem_op = -1, problem_op2 = -1;
  std::int32_t problem_group = -1, problem_group2 = -1;
  std::int32_t problem_device = -1, problem_device2 = -1;
  std::int64_t problem_bytes = 0;
  double problem_time = 0;
  FusionRule fusion_rule = FusionRule::ok;     // fusion_illegal: the rule problem_group breaks
};

// One transfer of the last simulation.
struct TransferRecord {
  TensorId tensor = -1;
  std::int32_t src = 0, dst = 0;
  double start = 0, end = 0;  // seconds
  std::int64_t bytes = 0;
  OpId producer = -1;
  std::int32_t refs = 0;      // (internal) consumers on dst still to complete
  std::int32_t edge_begin = 0, edge_end = 0;  // (internal) the producer's out-edges of this tensor
  std::uint32_t seq = 0;      // (internal) request order of its end event (its start event: seq - 1)
  bool started = false;       // (internal) its start has been applied
};

// Device memory after a change (recorded when SimWorkspace::set_record_memory(true)).
struct MemoryEvent {
  double time = 0;
  std::int32_t device = 0;
  std::int64_t usage = 0;
};

class Simulator;

#if defined(__GNUC__) || defined(__clang__)
#define GO_SIM_INLINE __attribute__((always_inline))
#else
#define GO_SIM_INLINE
#endif

namespace detail {

// Cache-line-aligned storage (a TransferRecord then sits in one line instead of straddling two).
template <class T, std::size_t A>
struct SimAlignedAllocator {
  using value_type = T;
  SimAlignedAllocator() = default;
  template <class U>
  SimAlignedAllocator(const SimAlignedAllocator<U, A>&) noexcept {}
  template <class U>
  struct rebind {
    using other = SimAlignedAllocator<U, A>;
  };
  T* allocate(std::size_t k) { return static_cast<T*>(::operator new(k * sizeof(T), std::align_val_t{A})); }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t{A}); }
  friend bool operator==(const SimAlignedAllocator&, const SimAlignedAllocator&) { return true; }
  friend bool operator!=(const SimAlignedAllocator&, const SimAlignedAllocator&) { return false; }
};

// Replaces the top of a binary heap kept by std::push_heap/pop_heap with comparator `less` (the top
// is the greatest) by `v` and restores the heap with one sift-down (cheaper than pop_heap + push_heap).
template <class T, class Less>
inline void sim_heap_replace_top(T* h, std::int32_t n, const T& v, Less less) {
  std::int32_t i = 0;
  for (;;) {
    std::int32_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && less(h[c], h[c + 1])) ++c;
    if (!less(v, h[c])) break;
    h[i] = h[c];
    i = c;
  }
  h[i] = v;
}

// Removes the top of a binary heap of n entries (as std::pop_heap, leaving n - 1): the hole goes down
// the greater children to a leaf (a branch-free choice per level), then the last entry sifts up.
template <class T, class Less>
inline void sim_heap_pop(T* h, std::int32_t n, Less less) {
  const std::int32_t m = n - 1;
  if (m <= 0) return;
  const T v = h[m];
  std::int32_t i = 0;
  for (;;) {
    std::int32_t c = 2 * i + 1;
    if (c >= m) break;
    if (c + 1 < m) c += static_cast<std::int32_t>(less(h[c], h[c + 1]));
    h[i] = h[c];
    i = c;
  }
  while (i > 0) {
    const std::int32_t p = (i - 1) / 2;
    if (!less(h[p], v)) break;
    h[i] = h[p];
    i = p;
  }
  h[i] = v;
}

}  // namespace detail

// Per-thread scratch of a Simulator, reused across simulations: after the first call with a plan
// of a given shape, simulate() allocates nothing.
class SimWorkspace {
 public:
  SimWorkspace() = default;

  const SimResult& result() const { return result_; }
  // The unit (first op of its fusion group in topological order, or the op itself) that ran `op`.
  OpId unit_of(OpId op) const { return fused_ ? leader_[static_cast<std::size_t>(op)] : op; }
  // Start and completion of an op's unit in the last simulation (-1 when it did not run).
  double start_time(OpId op) const { return times_[2 * static_cast<std::size_t>(unit_of(op))]; }
  double finish_time(OpId op) const { return times_[2 * static_cast<std::size_t>(unit_of(op)) + 1]; }
  std::span<const TransferRecord> transfers() const { return {xfers_.data(), static_cast<std::size_t>(nxfers_)}; }
  // Off by default; when on, every memory change is appended (this allocates).
  void set_record_memory(bool on) { record_memory_ = on; }
  std::span<const MemoryEvent> memory_events() const { return mem_events_; }

 private:
  friend class Simulator;
  struct Event {
    double time;
    std::uint32_t seq;
    std::int32_t code;  // the unit a control message is for
  };
  struct QItem {  // a ready unit: key = (priority, then earlier ready first) as one integer
    std::uint64_t key;
    std::int32_t unit;
  };
  struct DevEv {  // a running unit's completion
    double time;
    std::int32_t device;
  };
  struct SrcEv {  // the next event of a sender's transfer queue
    double time;
    std::uint32_t seq;
    std::int32_t src;
  };
  struct UnitStart {  // what starting a unit needs
    double cost;          // seconds
    double traffic;       // bytes read and written in device memory
    std::int64_t alloc;   // outputs + scratch allocated at its start
    std::int64_t kernel;  // 1 when it launches a kernel
  };

  std::int32_t n_ = -1, m_ = -1, nt_ = -1, ndev_ = -1, ncoloc_ = -1;
  bool fused_ = false;
  bool record_memory_ = false;
  std::uint32_t epoch_ = 0;
  std::vector<std::int32_t> pending_;
  std::vector<double> times_;  // per unit: start, finish
  // Fusion (a group: the ops of one fusion id when there are two or more). Between simulations
  // leader_[v] == v and grp_[v] == -1 except for the last fused plan's groups: their non-leader ops
  // gops_[0, ngops_) and leaders glead_[0, ngroups_), so a plan pays only for its groups. Group g
  // (grp_[L] == g for its leader L) has its ops in gmem_list_[gmem_off_[g], gmem_off_[g + 1])
  // (topological order) and its costs. first_of_[f] = (fepoch_ << 32) | the first op of fusion id f
  // seen in this plan (stale epochs count as unseen).
  // gbits_: a bit per op, set for the ops of groups (small enough to stay in L1, so lone ops
  // cost no leader_/grp_ look-ups).
  std::vector<std::int32_t> leader_, grp_, gops_, glead_, scratch_, path_;
  std::vector<std::uint64_t> gbits_;
  std::int32_t ngops_ = 0, ngroups_ = 0;
  std::vector<std::uint64_t> first_of_;
  std::uint32_t fepoch_ = 0;
  std::vector<std::int32_t> gmem_off_, gmem_list_;
  std::vector<UnitStart> gstart_;
  std::vector<std::int64_t> grelease_;
  std::vector<float> gprio_;
  std::vector<std::int32_t> dev_count_;  // ops per device of the plan
  std::vector<std::uint64_t> stamp_;
  std::vector<std::int32_t> refs_;
  std::vector<std::int32_t> edge_copy_;
  // Fixed-size scratch (sized once by prepare(); the hot loop uses raw pointers and counts, so it
  // neither allocates nor re-checks capacities).
  std::vector<TransferRecord, detail::SimAlignedAllocator<TransferRecord, 64>> xfers_;  // the first nxfers_ are the last simulation's (<= edges)
  std::int32_t nxfers_ = 0;
  std::vector<Event> events_;                     // control messages across devices (a heap)
  std::vector<std::int32_t> xnext_;               // per transfer: the next in its sender's queue (-1: last)
  std::vector<std::int32_t> src_head_, src_tail_; // per sender: its transfers in request order (a list)
  std::vector<SrcEv> src_heap_;                   // senders with transfers pending, by next event (nd slots)
  std::vector<DevEv> dev_heap_;                   // busy devices by completion time (nd slots)
  std::vector<std::int32_t> qnext_;               // FIFO ready queues: per unit, the next in its queue
  std::vector<std::int32_t> qhead_, qtail_;       // FIFO ready queues: per device, first and last (-1: empty)
  std::vector<QItem> qbuf_;                       // priority ready queues: one heap per device, packed
  std::vector<std::int32_t> qbeg_, qsize_;        //   device d's heap is qbuf_[qbeg_[d], qbeg_[d] + qsize_[d])
  std::vector<std::int32_t> cur_unit_;
  std::vector<std::int64_t> usage_;
  std::vector<double> chan_;
  std::vector<std::int32_t> dev_stamp_, dev_copy_;
  std::vector<std::int32_t> dirty_;          // idle devices that may have work, to dispatch (nd slots)
  std::vector<std::int32_t> dirty_flag_;  // (not char: char stores would alias everything)
  std::vector<std::int32_t> coloc_first_;
  std::vector<MemoryEvent> mem_events_;
  SimResult result_;
};

class Simulator {
 public:
  Simulator(const OpGraph& graph, Cluster cluster, SimOptions options = {});
  Simulator(OpGraph&&, Cluster, SimOptions = {}) = delete;  // the graph must outlive the simulator

  const OpGraph& graph() const { return *g_; }
  const Cluster& cluster() const { return cluster_; }
  const SimOptions& options() const { return options_; }
  std::int32_t num_ops() const { return n_; }
  std::int32_t num_devices() const { return ndev_; }

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

// ---- implementation --------------------------------------------------------------------------

namespace detail {

inline bool sim_same_kind(const DeviceSpec& a, const DeviceSpec& b) {
  return a.peak_flops == b.peak_flops && a.mem_bandwidth == b.mem_bandwidth && a.launch_overhead == b.launch_overhead &&
         a.bandwidth_efficiency == b.bandwidth_efficiency && a.compute_efficiency == b.compute_efficiency &&
         a.memory_efficiency == b.memory_efficiency;
}

}  // namespace detail

inline Simulator::Simulator(const OpGraph& graph, Cluster cluster, SimOptions options)
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
    while (k < kinds.size() && !detail::sim_same_kind(*kinds[k], s)) ++k;
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
  trun_end_.assign(static_cast<std::size_t>(nt_), 0);
  for (std::int32_t k = 0; k < m_; ++k) {
    const std::int32_t t = out_tensor_[static_cast<std::size_t>(k)];
    if (t >= 0 && (k == m_ - 1 || out_tensor_[static_cast<std::size_t>(k) + 1] != t))
      trun_end_[static_cast<std::size_t>(t)] = k + 1;
  }
}

inline void Simulator::prepare(SimWorkspace& ws) const {
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

inline const SimResult& Simulator::simulate(const Plan& plan, SimWorkspace& ws) const {
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
        r.problem_group = c;
        r.problem_op = f;
        r.problem_op2 = v;
        r.problem_device = dev[f];
        r.problem_device2 = dev[v];
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

template <bool kFused, bool kPrio>
void Simulator::run(const Plan& plan, const std::int32_t* dev, SimWorkspace& ws) const {
  using Event = SimWorkspace::Event;
  using QItem = SimWorkspace::QItem;
  using DevEv = SimWorkspace::DevEv;
  using SrcEv = SimWorkspace::SrcEv;
  using UnitStart = SimWorkspace::UnitStart;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  SimResult& r = ws.result_;
  const auto n = static_cast<std::size_t>(n_);
  const std::size_t nd = static_cast<std::size_t>(ndev_);
  const float* prio = kPrio ? plan.priority.data() : nullptr;
  const std::int32_t* fus = kFused ? plan.fusion.data() : nullptr;
  std::int32_t* leader = ws.leader_.data();
  std::int32_t* grp = ws.grp_.data();
  std::int32_t* pending = ws.pending_.data();
  double* times = ws.times_.data();  // [2 * unit]: start, [2 * unit + 1]: finish
  std::int32_t* refs = ws.refs_.data();
  std::int32_t* edge_copy = ws.edge_copy_.data();
  std::int64_t* usage = ws.usage_.data();
  std::int64_t* peak = r.peak_memory.data();
  double* chan = ws.chan_.data();
  const std::int32_t* in_off = in_off_.data();
  const std::int32_t* in_src = in_src_.data();
  const std::int32_t* in_tensor = in_tensor_.data();
  const std::int32_t* out_off = out_off_.data();
  const std::int32_t* out_dst = out_dst_.data();
  const std::int32_t* out_tensor = out_tensor_.data();
  const std::int32_t* out_in_edge = out_in_edge_.data();
  const std::int64_t* tbytes = tbytes_.data();
  const std::int32_t* trun_end = trun_end_.data();
  const std::int32_t* gmem_off = ws.gmem_off_.data();
  const std::int32_t* gmem_list = ws.gmem_list_.data();
  const UnitStart* gstart = ws.gstart_.data();
  const std::int64_t* grelease = ws.grelease_.data();
  const float* gprio = ws.gprio_.data();
  std::uint64_t* gbits = ws.gbits_.data();
  auto in_group = [&](std::int32_t v) -> bool { return (gbits[v >> 6] >> (v & 63)) & 1u; };
  auto lead = [&](std::int32_t v) -> std::int32_t {
    if constexpr (kFused) return in_group(v) ? leader[v] : v;
    else return v;
  };
  auto group_of = [&](std::int32_t L) -> std::int32_t { return in_group(L) ? grp[L] : -1; };
  std::int64_t nunits = n_;
  // Every unit that becomes ready runs, so start/finish of the units are overwritten, except when
  // the simulation stops at an out-of-memory (marked here) or fusion deadlocks (marked at the end).
  if (options_.stop_on_oom) {
    std::fill(ws.times_.begin(), ws.times_.end(), -1.0);
  }
  std::copy(in_deg_.begin(), in_deg_.end(), pending);

  // ---- fusion groups -> units ----
  // Only groups of two or more ops cost anything here: a lone op is its own unit, as unfused.
  if constexpr (kFused) {
    ws.fused_ = true;
    std::int32_t* gops = ws.gops_.data();
    std::int32_t* glead = ws.glead_.data();
    for (std::int32_t i = 0; i < ws.ngops_; ++i) {  // undo the last plan's groups
      const std::int32_t v = gops[i];
      leader[v] = v;
      gbits[v >> 6] = 0;
    }
    for (std::int32_t i = 0; i < ws.ngroups_; ++i) {
      const std::int32_t v = glead[i];
      grp[v] = -1;
      gbits[v >> 6] = 0;
    }
    std::int32_t ngops = 0, ngroups = 0;
    if (++ws.fepoch_ == 0) {
      std::fill(ws.first_of_.begin(), ws.first_of_.end(), 0);
      ws.fepoch_ = 1;
    }
    const std::uint64_t ftag = static_cast<std::uint64_t>(ws.fepoch_) << 32;
    std::uint64_t* first_of = ws.first_of_.data();
    auto fail = [&](SimStatus st) {
      ws.ngops_ = ngops;
      ws.ngroups_ = ngroups;
      std::fill(ws.times_.begin(), ws.times_.end(), -1.0);
      r.valid = false;
      r.status = st;
      r.step_time = kInf;
    };
    for (std::int32_t v : topo_) {
      const std::int32_t f = fus[v];
      if (f < 0 || f >= n_) {
        if (f == -1) continue;
        r.problem_op = v;
        r.problem_group = f;
        return fail(SimStatus::bad_fusion_id);
      }
      const std::uint64_t fo = first_of[f];
      if ((fo & ~std::uint64_t{0xffffffffu}) != ftag) {  // the first op of f: its leader
        first_of[f] = ftag | static_cast<std::uint32_t>(v);
        continue;
      }
      const auto l = static_cast<std::int32_t>(static_cast<std::uint32_t>(fo));
      if (dev[l] != dev[v]) {
        r.problem_group = f;
        r.problem_op = l;
        r.problem_op2 = v;
        r.problem_device = dev[l];
        r.problem_device2 = dev[v];
        return fail(SimStatus::fusion_spans_devices);
      }
      leader[v] = l;
      gops[ngops++] = v;
      gbits[v >> 6] |= std::uint64_t{1} << (v & 63);
      if (grp[l] < 0) {
        grp[l] = ngroups;
        glead[ngroups++] = l;
        gbits[l >> 6] |= std::uint64_t{1} << (l & 63);
      }
    }
    ws.ngops_ = ngops;
    ws.ngroups_ = ngroups;
    nunits = n_ - ngops;
    // members of each group: its leader, then its other ops in topological order
    std::int32_t* goff = ws.gmem_off_.data();
    std::fill(goff, goff + ngroups + 1, 0);
    for (std::int32_t i = 0; i < ngops; ++i) ++goff[grp[leader[gops[i]]] + 1];
    std::int32_t acc = 0;
    for (std::int32_t g = 0; g < ngroups; ++g) {
      const std::int32_t c = goff[g + 1];
      goff[g] = acc;
      acc += 1 + c;
    }
    goff[ngroups] = acc;
    std::int32_t* cursor = ws.scratch_.data();
    std::int32_t* mlist = ws.gmem_list_.data();
    for (std::int32_t g = 0; g < ngroups; ++g) {
      mlist[goff[g]] = glead[g];
      cursor[g] = goff[g] + 1;
    }
    for (std::int32_t i = 0; i < ngops; ++i) {
      const std::int32_t v = gops[i];
      mlist[cursor[grp[leader[v]]]++] = v;
    }
    // per-group: kernels a compiler builds (groups in the order check_plan() takes them: by their
    // second op; checked here, where the group's edges are read anyway), cost, memory, pending inputs
    const bool rules = options_.check_fusion_rules;
    const FusionGraphView<std::int32_t> view{ftraits_.data(), in_off_.data(),  in_src_.data(),    in_tensor_.data(),
                                             out_off_.data(), out_dst_.data(), out_tensor_.data()};
    if (++ws.epoch_ == 0) {
      std::fill(ws.stamp_.begin(), ws.stamp_.end(), 0);
      ws.epoch_ = 1;
    }
    std::uint64_t* stamp = ws.stamp_.data();
    UnitStart* gst = ws.gstart_.data();
    std::int64_t* grel = ws.grelease_.data();
    float* gpr = ws.gprio_.data();
    for (std::int32_t g = 0; g < ngroups; ++g) {
      const std::int32_t L = glead[g];
      const std::int32_t mb = goff[g], me = goff[g + 1];
      if (rules) {
        const FusionProblem fp =
            check_fusion_group(view, std::span<const OpId>(mlist + mb, mlist + me), [&](OpId u) { return leader[u] == L; });
        if (fp) {
          r.problem_group = fus[L];
          r.problem_op = fp.op;
          r.problem_op2 = fp.op2;
          r.fusion_rule = fp.rule;
          return fail(SimStatus::fusion_illegal);
        }
      }
      const auto kind = static_cast<std::size_t>(dev_kind_[static_cast<std::size_t>(dev[L])]);
      const std::uint64_t tag = (static_cast<std::uint64_t>(ws.epoch_) << 32) | static_cast<std::uint32_t>(L);
      std::int32_t pend = 0;
      std::int64_t ext_in = 0, ext_out = 0, params = 0, temp = 0, sink = 0;
      std::int64_t lib_bytes = 0;  // the external traffic of measured library kernels (in their times)
      std::int64_t operands = 0;   // the external tensors counted: rule 5 of the fusion rules
      double compute = 0, extra = 0, cap = 0, dom_work = 0, dom_bytes = 0;
      std::uint8_t bits = 0;
      float pr = -std::numeric_limits<float>::infinity();
      // With measured library kernels in the graph they go first (pass 0): a tensor one of them
      // reads is in its measured time, and the loop members' traffic must not count it again.
      for (int pass = has_mlib_ ? 0 : 1; pass < 2; ++pass) {
        for (std::int32_t k = mb; k < me; ++k) {
          const std::int32_t v = mlist[k];
          const std::uint8_t b = ubits_[v];
          if (has_mlib_ && ((b & kUnitMeasuredLib) != 0) != (pass == 0)) continue;
          for (std::int32_t e = in_off[v]; e < in_off[v + 1]; ++e) {
            if (leader[in_src[e]] == L) continue;
            ++pend;
            const std::int32_t t = in_tensor[e];
            if (t >= 0 && stamp[t] != tag) {
              stamp[t] = tag;
              ext_in += tbytes[t];
              ++operands;
            }
          }
          for (std::int32_t e = out_off[v]; e < out_off[v + 1]; ++e) {
            const std::int32_t t = out_tensor[e];
            if (t < 0 || leader[out_dst[e]] == L || stamp[t] == tag) continue;
            stamp[t] = tag;
            ext_out += tbytes[t];
            ++operands;
          }
          params += param_[v];
          temp = std::max(temp, temp_[v]);
          sink += sink_[v];
          bits |= b;
          if constexpr (kPrio) pr = std::max(pr, prio[v]);
          const std::size_t kv = kind * n + v;
          if (pass == 0) {
            extra += extra_[kv];
            continue;
          }
          compute += compute_[kv];
          cap += cap_[kv];
          if ((b & kUnitMeasuredLoop) && extra_[kv] > dom_work && traffic_[v] > 0) dom_work = extra_[kv], dom_bytes = traffic_[v];
        }
        if (pass == 0) lib_bytes = ext_in + ext_out + params + sink;
      }
      if (rules)
        if (const FusionProblem fp = fusion_operand_budget(operands, L)) {
          r.problem_group = fus[L];
          r.problem_op = fp.op;
          r.fusion_rule = fp.rule;
          return fail(SimStatus::fusion_illegal);
        }
      ext_out += sink;
      const double traffic = static_cast<double>(ext_in + ext_out + params);
      const bool kernel = (bits & kUnitKernel) != 0, lmeasured = (bits & kUnitMeasuredLoop) != 0;
      double stream = static_cast<double>(ext_in + ext_out + params - lib_bytes) *
                      (dom_work > 0 ? dom_work / dom_bytes : inv_mem_bw_[kind]);
      if (lmeasured) stream = std::min(stream, cap);
      gst[g] = UnitStart{
          kernel ? launch_[kind] + ((bits & kUnitRoof) || lmeasured ? std::max(compute, stream) : 0.0) + extra : 0.0,
          kernel ? traffic : 0.0, temp + ext_out, kernel ? 1 : 0};
      grel[g] = temp + sink;
      if constexpr (kPrio) gpr[g] = pr;
      pending[L] = pend;
    }
  }

  // ---- state ----
  // The hot loop works on raw pointers into the workspace (fixed-size arrays, no push_back), and
  // its counters live in locals (stores to the int/double arrays could otherwise alias the
  // workspace's and the result's fields).
  std::int32_t* cur_unit = ws.cur_unit_.data();
  std::int32_t* dev_stamp = ws.dev_stamp_.data();
  std::int32_t* dev_copy = ws.dev_copy_.data();
  std::int32_t* dirty_flag = ws.dirty_flag_.data();
  std::int32_t* dirty = ws.dirty_.data();
  std::int32_t ndirty = 0;
  TransferRecord* xf = ws.xfers_.data();
  std::int32_t nx = 0;
  std::int32_t* xnext = ws.xnext_.data();
  std::int32_t* src_head = ws.src_head_.data();
  std::int32_t* src_tail = ws.src_tail_.data();
  SrcEv* sheap = ws.src_heap_.data();
  std::int32_t nsheap = 0;
  DevEv* dheap = ws.dev_heap_.data();
  std::int32_t ndheap = 0;
  std::int32_t* qnext = ws.qnext_.data();
  std::int32_t* qhead = ws.qhead_.data();
  std::int32_t* qtail = ws.qtail_.data();
  QItem* qbuf = ws.qbuf_.data();
  std::int32_t* qbeg = ws.qbeg_.data();
  std::int32_t* qsize = ws.qsize_.data();
  const std::int32_t* dev_kind = dev_kind_.data();
  const UnitStart* ustart = ustart_.data();
  const std::int64_t* release_b = release_.data();
  const double* xlat = xlat_.data();
  const double* xinv_bw = xinv_bw_.data();
  const std::int64_t* capacity = capacity_.data();
  std::fill(cur_unit, cur_unit + nd, -1);
  std::fill(ws.usage_.begin(), ws.usage_.end(), 0);
  std::fill(ws.chan_.begin(), ws.chan_.end(), 0.0);
  std::fill(dev_stamp, dev_stamp + nd, -1);
  std::fill(dirty_flag, dirty_flag + nd, 0);
  std::fill(src_head, src_head + nd, -1);
  std::fill(src_tail, src_tail + nd, -1);
  if constexpr (kPrio) {
    // one heap per device, packed: device d's units (at most its ops) fit in [qbeg[d], qbeg[d + 1])
    const std::int32_t* count = ws.dev_count_.data();  // counted by simulate()
    qbeg[0] = 0;
    for (std::size_t d = 0; d < nd; ++d) qbeg[d + 1] = qbeg[d] + count[d];
    std::fill(qsize, qsize + nd, 0);
  } else {
    std::fill(qhead, qhead + nd, -1);
    std::fill(qtail, qtail + nd, -1);
  }
  ws.events_.clear();
  std::uint32_t seq = 0, qseq = 0;
  double now = 0;
  bool oom = false;
  const bool record = ws.record_memory_;
  std::copy(r.resident_memory.begin(), r.resident_memory.end(), usage);  // summed by simulate()
  for (std::size_t d = 0; d < nd; ++d) {
    r.resident_memory[d] = usage[d];
    peak[d] = usage[d];
    if (record) ws.mem_events_.push_back(MemoryEvent{0.0, static_cast<std::int32_t>(d), usage[d]});
    if (!oom && usage[d] > capacity[d]) {
      oom = true;
      r.valid = false;
      r.status = SimStatus::out_of_memory;
      r.problem_device = static_cast<std::int32_t>(d);
      r.problem_bytes = usage[d];
      r.problem_time = 0;
    }
  }

  std::int64_t launches = 0, units = 0, xbytes = 0;
  double traffic = 0;
  double* busy = r.busy_time.data();
  auto alloc = [&](std::int32_t d, std::int64_t b, std::int32_t op) GO_SIM_INLINE {
    std::int64_t u = usage[d] += b;
    if (record && b != 0) ws.mem_events_.push_back(MemoryEvent{now, d, u});
    if (u > peak[d]) {
      peak[d] = u;
      if (u > capacity[d] && !oom) {
        oom = true;
        r.valid = false;
        r.status = SimStatus::out_of_memory;
        r.problem_device = d;
        r.problem_bytes = u;
        r.problem_time = now;
        r.problem_op = op;
      }
    }
  };
  auto release = [&](std::int32_t d, std::int64_t b) GO_SIM_INLINE {
    usage[d] -= b;
    if (record && b != 0) ws.mem_events_.push_back(MemoryEvent{now, d, usage[d]});
  };
  auto ev_less = [](const Event& a, const Event& b) { return a.time > b.time || (a.time == b.time && a.seq > b.seq); };
  auto push_control = [&](double t, std::int32_t unit) {
    ws.events_.push_back(Event{t, seq++, unit});
    std::push_heap(ws.events_.begin(), ws.events_.end(), ev_less);
  };
  // Every queue/heap below orders by a total order (the sequence numbers and device indices break
  // all ties), so the heap shape cannot change which entry comes first.
  auto q_less = [](const QItem& a, const QItem& b) { return a.key < b.key; };
  // Orders as (priority, larger first; then ready order, earlier first): the float's bits mapped to
  // an unsigned integer in the same order (-0 taken as +0, priorities are finite), then ~seq.
  auto q_key = [](float p, std::uint32_t s) -> std::uint64_t {
    std::uint32_t u;
    p += 0.0f;  // -0 -> +0
    std::memcpy(&u, &p, sizeof u);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return (static_cast<std::uint64_t>(u) << 32) | static_cast<std::uint32_t>(~s);
  };
  auto dev_later = [](const DevEv& a, const DevEv& b) -> bool {
    return (a.time > b.time) | ((a.time == b.time) & (a.device > b.device));
  };
  auto src_later = [](const SrcEv& a, const SrcEv& b) -> bool {
    return (a.time > b.time) | ((a.time == b.time) & (a.seq > b.seq));
  };
  auto mark_dirty = [&](std::int32_t d) GO_SIM_INLINE {
    if (!dirty_flag[d]) {
      dirty_flag[d] = 1;
      dirty[ndirty++] = d;
    }
  };
  auto push_ready = [&](std::int32_t L) GO_SIM_INLINE {
    const std::int32_t d = dev[L];
    if (cur_unit[d] < 0) mark_dirty(d);
    if constexpr (kPrio) {
      float p = prio[L];
      if constexpr (kFused) {
        const std::int32_t g = group_of(L);
        if (g >= 0) p = gprio[g];
      }
      QItem* b = qbuf + qbeg[d];
      b[qsize[d]++] = QItem{q_key(p, qseq++), L};
      std::push_heap(b, b + qsize[d], q_less);
    } else {
      qnext[L] = -1;
      if (qtail[d] < 0) qhead[d] = L;
      else qnext[qtail[d]] = L;
      qtail[d] = L;
    }
  };
  auto deliver = [&](std::int32_t L) GO_SIM_INLINE {
    if (--pending[L] == 0) push_ready(L);
  };
  const ChannelModel cm = cluster_.channels;
  auto new_transfer = [&](std::int32_t t, std::int32_t producer, std::int32_t s, std::int32_t d,
                          std::int32_t edge_begin, std::int32_t edge_end) GO_SIM_INLINE -> std::int32_t {
    const std::int64_t bytes = tbytes[t];
    const std::size_t link = static_cast<std::size_t>(s) * nd + static_cast<std::size_t>(d);
    const std::size_t rc = cm == ChannelModel::duplex ? nd + static_cast<std::size_t>(d) : static_cast<std::size_t>(d);
    double st = std::max(now, chan[s]);
    if (cm != ChannelModel::sender) st = std::max(st, chan[rc]);
    const double en = st + xlat[link] + static_cast<double>(bytes) * xinv_bw[link];
    chan[s] = en;
    if (cm != ChannelModel::sender) chan[rc] = en;
    const std::int32_t id = nx++;
    const bool started = st <= now;
    if (!started) ++seq;  // its start event
    xf[id] = TransferRecord{t, s, d, st, en, bytes, producer, 0, edge_begin, edge_end, seq++, started};
    xbytes += bytes;
    if (started) alloc(d, bytes, producer);
    xnext[id] = -1;
    if (src_head[s] < 0) {  // becomes the head of its sender's queue
      src_head[s] = id;
      sheap[nsheap++] = SrcEv{started ? en : st, started ? seq - 1 : seq - 2, s};
      std::push_heap(sheap, sheap + nsheap, src_later);
    } else {
      xnext[src_tail[s]] = id;
    }
    src_tail[s] = id;
    return id;
  };
  auto start_unit = [&](std::int32_t L, std::int32_t d) GO_SIM_INLINE {
    const UnitStart* us = ustart + static_cast<std::size_t>(dev_kind[d]) * n + static_cast<std::size_t>(L);
    if constexpr (kFused) {
      const std::int32_t g = group_of(L);
      if (g >= 0) us = gstart + g;
    }
    const double dur = us->cost;
    alloc(d, us->alloc, L);
    launches += us->kernel;
    traffic += us->traffic;
    const double f = now + dur;
    times[2 * L] = now;
    times[2 * L + 1] = f;
    cur_unit[d] = L;
    dheap[ndheap++] = DevEv{f, d};
    std::push_heap(dheap, dheap + ndheap, dev_later);
    busy[d] += dur;
    ++units;
  };
  // Completes op v of unit L on device d (grouped: L is a group of two or more ops).
  auto finish_op = [&](std::int32_t v, std::int32_t L, std::int32_t d, bool grouped) GO_SIM_INLINE {
    // inputs read for the last time on this device
    for (std::int32_t e = in_off[v]; e < in_off[v + 1]; ++e) {
      const std::int32_t t = in_tensor[e];
      if (t < 0) continue;
      const std::int32_t u = in_src[e];
      if (kFused && grouped && leader[u] == L) continue;
      if (dev[u] == d) {
        if (--refs[t] == 0) release(d, tbytes[t]);
      } else {
        TransferRecord& x = xf[edge_copy[e]];
        if (--x.refs == 0) release(d, x.bytes);
      }
    }
    // outputs: deliver locally, send once per remote device
    std::int32_t e = out_off[v];
    const std::int32_t e_end = out_off[v + 1];
    for (; e < e_end && out_tensor[e] < 0; ++e) {
      const std::int32_t Lw = lead(out_dst[e]);
      if (kFused && grouped && Lw == L) continue;
      const std::int32_t dw = dev[Lw];
      if (dw == d) deliver(Lw);
      else push_control(now + xlat[static_cast<std::size_t>(d) * nd + static_cast<std::size_t>(dw)], Lw);
    }
    while (e < e_end) {
      const std::int32_t t = out_tensor[e];
      const std::int32_t run_begin = e, run_end = trun_end[t];
      const std::int32_t x_first = nx;
      std::int32_t local = 0;
      for (; e < run_end; ++e) {
        const std::int32_t Lw = lead(out_dst[e]);
        if (kFused && grouped && Lw == L) continue;
        const std::int32_t dw = dev[Lw];
        if (dw == d) {
          ++local;
          deliver(Lw);
        } else {
          if (dev_stamp[dw] != t) {
            dev_stamp[dw] = t;
            dev_copy[dw] = new_transfer(t, v, d, dw, run_begin, run_end);
          }
          const std::int32_t x = dev_copy[dw];
          ++xf[x].refs;
          edge_copy[out_in_edge[e]] = x;
        }
      }
      refs[t] = local + (nx - x_first);
    }
  };
  auto finish_unit = [&](std::int32_t L, std::int32_t d) GO_SIM_INLINE {
    if constexpr (kFused) {
      const std::int32_t g = group_of(L);
      if (g >= 0) {
        release(d, grelease[g]);
        for (std::int32_t k = gmem_off[g]; k < gmem_off[g + 1]; ++k) finish_op(gmem_list[k], L, d, true);
        return;
      }
    }
    release(d, release_b[L]);
    finish_op(L, L, d, false);
  };
  // The next transfer event (the earliest head of the senders' queues) or control message, by
  // (time, request order): its sender, or nd for a control message, or -1 for none.
  auto next_event = [&](double& t) GO_SIM_INLINE -> std::int32_t {
    std::int32_t best = -1;
    std::uint32_t bseq = 0;
    t = kInf;
    if (nsheap > 0) {
      t = sheap[0].time;
      bseq = sheap[0].seq;
      best = sheap[0].src;
    }
    if (!ws.events_.empty()) {
      const Event& e = ws.events_.front();
      if (e.time < t || (e.time == t && e.seq < bseq)) {
        t = e.time;
        best = static_cast<std::int32_t>(nd);
      }
    }
    return best;
  };
  auto handle_event = [&](std::int32_t src) GO_SIM_INLINE {
    if (src == static_cast<std::int32_t>(nd)) {
      std::pop_heap(ws.events_.begin(), ws.events_.end(), ev_less);
      const std::int32_t unit = ws.events_.back().code;
      ws.events_.pop_back();
      deliver(unit);
      return;
    }
    const std::int32_t id = src_head[src];
    TransferRecord& x = xf[id];
    // the heap's top is this sender: replace it by the sender's next event
    if (!x.started) {  // start: the receiving buffer appears
      x.started = true;
      detail::sim_heap_replace_top(sheap, nsheap, SrcEv{x.end, x.seq, src}, src_later);
      alloc(x.dst, x.bytes, x.producer);
      return;
    }
    // end: the sender's copy may go, the consumers on dst get their input
    const std::int32_t nid = xnext[id];
    src_head[src] = nid;
    if (nid < 0) {
      src_tail[src] = -1;
      --nsheap;
      if (nsheap > 0) detail::sim_heap_replace_top(sheap, nsheap, sheap[nsheap], src_later);
    } else {
      const TransferRecord& nxr = xf[nid];
      detail::sim_heap_replace_top(
          sheap, nsheap, nxr.started ? SrcEv{nxr.end, nxr.seq, src} : SrcEv{nxr.start, nxr.seq - 1, src}, src_later);
    }
    if (--refs[x.tensor] == 0) release(x.src, x.bytes);
    const std::int32_t dst = x.dst;
    for (std::int32_t e = x.edge_begin; e < x.edge_end; ++e) {
      const std::int32_t Lw = lead(out_dst[e]);
      if (dev[Lw] == dst) deliver(Lw);
    }
  };
  // Idle devices pick their next unit, in device order. Only devices marked dirty (they became
  // idle, or work arrived while they were idle) can have an idle stream and a non-empty queue.
  auto dispatch = [&]() GO_SIM_INLINE {
    for (std::int32_t i = 1; i < ndirty; ++i) {  // insertion sort: at most nd entries
      const std::int32_t x = dirty[i];
      std::int32_t j = i;
      for (; j > 0 && dirty[j - 1] > x; --j) dirty[j] = dirty[j - 1];
      dirty[j] = x;
    }
    for (std::int32_t i = 0; i < ndirty; ++i) {
      const std::int32_t di = dirty[i];
      dirty_flag[di] = 0;
      if (cur_unit[di] >= 0) continue;
      std::int32_t L;
      if constexpr (kPrio) {
        std::int32_t& qs = qsize[di];
        if (qs == 0) continue;
        QItem* b = qbuf + qbeg[di];
        L = b[0].unit;
        detail::sim_heap_pop(b, qs--, q_less);
      } else {
        L = qhead[di];
        if (L < 0) continue;
        qhead[di] = qnext[L];
        if (qhead[di] < 0) qtail[di] = -1;
      }
      start_unit(L, di);
    }
    ndirty = 0;
  };

  // ---- event loop ----
  // (a group with no input from outside has its leader, its first op, among the sources)
  for (std::int32_t v : sources_)
    if (!kFused || (lead(v) == v && pending[v] == 0)) push_ready(v);
  dispatch();
  const bool stop_on_oom = options_.stop_on_oom;
  // (src, et): the next transfer event or control message. Only completions and handled events
  // add such events (dispatch starts units, which only add completions), so it is recomputed
  // after those alone.
  double et;
  std::int32_t src = next_event(et);
  for (;;) {
    const double tn = ndheap == 0 ? et : std::min(et, dheap[0].time);
    if (tn == kInf) break;
    now = tn;
    // completions, in device order
    if (ndheap > 0 && dheap[0].time == now) {
      do {
        const std::int32_t d = dheap[0].device;
        if (--ndheap > 0) detail::sim_heap_replace_top(dheap, ndheap, dheap[ndheap], dev_later);
        const std::int32_t L = cur_unit[d];
        cur_unit[d] = -1;
        mark_dirty(d);
        finish_unit(L, d);
      } while (ndheap > 0 && dheap[0].time == now);
      src = next_event(et);
    }
    for (;;) {
      while (src >= 0 && et <= now) {
        handle_event(src);
        src = next_event(et);
      }
      // With no device to dispatch, the next iteration would only handle the next event, unless a
      // completion comes first or at the same time (completions go first): do it here.
      if (ndirty > 0 || src < 0 || (ndheap > 0 && dheap[0].time <= et) || (oom && stop_on_oom)) break;
      now = et;
    }
    if (oom && stop_on_oom) break;
    if (ndirty > 0) dispatch();
    if (oom && stop_on_oom) break;
  }
  ws.nxfers_ = nx;
  r.transfers = nx;
  r.transfer_bytes = xbytes;
  r.step_time = now;
  r.kernel_launches = launches;
  r.memory_traffic = traffic;
  r.units = units;
  if (oom && options_.stop_on_oom) return;
  if constexpr (kFused) {
    if (r.units == nunits) return;
    // Some units never became ready: the fusion groups made the unit graph cyclic. Find a cycle the
    // way check_plan() does (first stuck unit, then its first stuck predecessor unit, ...).
    r.valid = false;
    r.step_time = kInf;
    // the units that never ran are those still waiting for an input
    for (std::int32_t v = 0; v < n_; ++v)
      if (leader[v] == v && pending[v] > 0) times[2 * v] = times[2 * v + 1] = -1.0;
    std::int32_t* seen = ws.scratch_.data();
    std::int32_t* path = ws.path_.data();
    std::fill(ws.scratch_.begin(), ws.scratch_.end(), -1);
    std::int32_t cur = -1;
    for (std::int32_t v = 0; v < n_ && cur < 0; ++v)
      if (leader[v] == v && times[2 * v] < 0) cur = v;
    std::int32_t len = 0;
    while (seen[cur] < 0) {
      seen[cur] = len;
      path[len++] = cur;
      std::int32_t next = -1;
      const std::int32_t g = grp[cur];
      const std::int32_t* mb = g >= 0 ? gmem_list + gmem_off[g] : &cur;
      const std::int32_t* me = g >= 0 ? gmem_list + gmem_off[g + 1] : &cur + 1;
      for (const std::int32_t* mp = mb; mp != me && next < 0; ++mp)
        for (std::int32_t e = in_off[*mp]; e < in_off[*mp + 1]; ++e) {
          const std::int32_t lu = leader[in_src[e]];
          if (lu != cur && times[2 * lu] < 0) {
            next = lu;
            break;
          }
        }
      cur = next;
    }
    std::int32_t g1 = std::numeric_limits<std::int32_t>::max(), g2 = g1, outside = -1, ngroups = 0;
    for (std::int32_t k = seen[cur]; k < len; ++k) {
      const std::int32_t u = path[k];
      if (grp[u] >= 0) {
        ++ngroups;
        if (fus[u] < g1) {
          g2 = g1;
          g1 = fus[u];
        } else if (fus[u] < g2) {
          g2 = fus[u];
        }
      } else {
        outside = u;
      }
    }
    if (ngroups == 1) {
      r.status = SimStatus::fusion_not_convex;
      r.problem_group = g1;
      r.problem_op = outside;
    } else {
      r.status = SimStatus::fusion_cycle;
      r.problem_group = g1;
      r.problem_group2 = g2;
    }
  }
}

// One line saying why the plan is invalid ("" when valid), worded as check_plan() words it.
// How far a result's per-device peaks exceed the devices' capacities: the sum over devices of
// max(0, peak / capacity - 1) (0 when everything fits).
inline double memory_excess(const SimResult& r, const Cluster& c) {
  double e = 0;
  for (std::size_t d = 0; d < r.peak_memory.size() && d < c.devices.size(); ++d) {
    const double cap = static_cast<double>(c.devices[d].spec.memory_bytes);
    if (cap > 0) e += std::max(0.0, static_cast<double>(r.peak_memory[d]) / cap - 1.0);
  }
  return e;
}

inline std::string sim_reason(const SimResult& r, const OpGraph& g, const Cluster& c) {
  auto dev_name = [&](std::int32_t d) {
    return std::to_string(d);
  };
  auto gb = [](double b) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f GB", b / 1e9);
    return std::string(buf);
  };
  switch (r.status) {
    case SimStatus::ok: return {};
    case SimStatus::bad_device:
      return g.label(r.problem_op) + " is placed on device " + std::to_string(r.problem_device) +
             " but the cluster has " + std::to_string(c.num_devices()) + " device(s)";
    case SimStatus::bad_priority: return g.label(r.problem_op) + " has a non-finite priority";
    case SimStatus::bad_fusion_id:
      return g.label(r.problem_op) + " has fusion group " + std::to_string(r.problem_group) + " (valid: -1, or 0 to " +
             std::to_string(g.num_ops() - 1) + ")";
    case SimStatus::fusion_spans_devices:
      return "fusion group " + std::to_string(r.problem_group) + " spans devices " + dev_name(r.problem_device) +
             " and " + dev_name(r.problem_device2) + ": " + g.label(r.problem_op) + " and " + g.label(r.problem_op2);
    case SimStatus::fusion_not_convex:
      return "fusion group " + std::to_string(r.problem_group) +
             " is not convex: a path leaves it and re-enters it through " + g.label(r.problem_op);
    case SimStatus::fusion_cycle:
      return "fusion groups " + std::to_string(r.problem_group) + " and " + std::to_string(r.problem_group2) +
             " depend on each other (fusing them would create a cycle)";
    case SimStatus::fusion_illegal:
      return "fusion group " + std::to_string(r.problem_group) + " " +
             fusion_problem_text(g, FusionProblem{r.fusion_rule, r.problem_op, r.problem_op2});
    case SimStatus::colocation_split:
      return "colocation group " + std::to_string(r.problem_group) + " spans devices " + dev_name(r.problem_device) +
             " and " + dev_name(r.problem_device2) + ": " + g.label(r.problem_op) + " and " + g.label(r.problem_op2);
    case SimStatus::out_of_memory: {
      const auto d = static_cast<std::size_t>(r.problem_device);
      char t[64];
      std::snprintf(t, sizeof t, "%.3f ms", r.problem_time * 1e3);
      std::string s = "out of memory on device " + std::to_string(r.problem_device) + " ('" + c.devices[d].name +
                      "'): " + gb(static_cast<double>(r.problem_bytes)) + " needed, capacity " +
                      gb(static_cast<double>(c.devices[d].spec.memory_bytes)) + ", at " + t;
      if (r.problem_op >= 0) s += " (" + g.label(r.problem_op) + ")";
      else s += " (parameters alone)";
      return s;
    }
  }
  return {};
}

}  // namespace go

#undef GO_SIM_INLINE
