// Simulator::run (go/sim/simulator.hpp), compiled once into libgo with its four shapes instantiated
// at the end: one simulated step of a plan that passed simulate()'s checks (simulator.cpp), by the
// event loop of its shape; first it turns the plan's fusion groups into units (membership, fusion
// rules, costs). What it computes: go/sim/simulator/semantics.hpp, "Semantics".
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
// Memory: on a large graph the per-op, per-edge and per-tensor arrays (~13 MB at 80,000 ops) do not
// stay in cache, and ops run far from each other in OpId order (a zoo graph's execution order
// jumps ~1,500 ids per op), so a simulation waits mostly on loads. What a unit will read is
// prefetched in stages along its way through the queues: its record and edge offsets when it
// becomes ready, its edges when it reaches the head of its device's queue, and its neighbours'
// entries (devices, reference counts, pending counts) when it starts, well before it finishes;
// the per-plan pass over the groups' members prefetches a few members ahead. Prefetches change no
// result; by default they are made only where those arrays outgrow the cache (Simulator::prefetch_,
// set in simulator.cpp; SimWorkspace::set_prefetch): bench/README "Prefetching in the event loop".
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>

#include "go/graph/fusion_rules.hpp"
#include "go/graph/graph.hpp"
#include "go/sim/cluster.hpp"
#include "go/sim/plan.hpp"
#include "go/sim/simulator/result.hpp"
#include "go/sim/simulator/semantics.hpp"
#include "go/sim/simulator/workspace.hpp"
#include "go/sim/simulator.hpp"

#if defined(__GNUC__) || defined(__clang__)
#define GO_SIM_INLINE __attribute__((always_inline))
#define GO_SIM_PREFETCH(p) __builtin_prefetch(p)
#define GO_SIM_PREFETCH_W(p) __builtin_prefetch(p, 1)
#else
#define GO_SIM_INLINE
#define GO_SIM_PREFETCH(p) ((void)(p))
#define GO_SIM_PREFETCH_W(p) ((void)(p))
#endif

namespace go {

namespace detail {
namespace {

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

}  // namespace
}  // namespace detail

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
  const bool stop_on_oom = options_.stop_on_oom || ws.stop_on_oom_;
  const bool pf = ws.prefetch_ == SimPrefetch::automatic ? prefetch_ : ws.prefetch_ == SimPrefetch::always;
  if (stop_on_oom) {
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
        r.record_split(f, l, v, dev);
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
    // Members further on in the flat list (the next groups' too): the records and edge offsets of
    // the one 4 * kAhead on, the edges of the one 2 * kAhead on (its offsets fetched by then), and
    // the leaders, stamps and sizes that the one kAhead on reads (its edges fetched by then).
    constexpr std::int32_t kAhead = 4;
    const std::int32_t nmembers = goff[ngroups];
    auto prefetch_member = [&](std::int32_t k, std::size_t kind) GO_SIM_INLINE {
      if (k + 4 * kAhead < nmembers) {
        const std::int32_t f = mlist[k + 4 * kAhead];
        const std::size_t kf = kind * n + static_cast<std::size_t>(f);
        GO_SIM_PREFETCH(in_off + f);
        GO_SIM_PREFETCH(out_off + f);
        GO_SIM_PREFETCH(ubits_.data() + f);
        GO_SIM_PREFETCH(param_.data() + f);
        GO_SIM_PREFETCH(temp_.data() + f);
        GO_SIM_PREFETCH(sink_.data() + f);
        GO_SIM_PREFETCH(traffic_.data() + f);
        GO_SIM_PREFETCH(compute_.data() + kf);
        GO_SIM_PREFETCH(cap_.data() + kf);
        GO_SIM_PREFETCH(extra_.data() + kf);
      }
      if (k + 2 * kAhead < nmembers) {
        const std::int32_t f = mlist[k + 2 * kAhead];
        GO_SIM_PREFETCH(in_src + in_off[f]);
        GO_SIM_PREFETCH(in_tensor + in_off[f]);
        GO_SIM_PREFETCH(out_dst + out_off[f]);
        GO_SIM_PREFETCH(out_tensor + out_off[f]);
      }
      const std::int32_t f = mlist[k + kAhead];
      for (std::int32_t e = in_off[f]; e < in_off[f + 1]; ++e) {
        GO_SIM_PREFETCH(leader + in_src[e]);
        if (const std::int32_t t = in_tensor[e]; t >= 0) {
          GO_SIM_PREFETCH(stamp + t);
          GO_SIM_PREFETCH(tbytes + t);
        }
      }
      for (std::int32_t e = out_off[f]; e < out_off[f + 1]; ++e) {
        GO_SIM_PREFETCH(leader + out_dst[e]);
        if (const std::int32_t t = out_tensor[e]; t >= 0) {
          GO_SIM_PREFETCH(stamp + t);
          GO_SIM_PREFETCH(tbytes + t);
        }
      }
    };
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
          if (pf && pass == 1 && k + kAhead < nmembers) prefetch_member(k, kind);
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
  // The ops of unit L: its group's members, or L alone.
  auto for_members = [&](std::int32_t L, auto&& f) GO_SIM_INLINE {
    if constexpr (kFused) {
      const std::int32_t g = group_of(L);
      if (g >= 0) {
        for (std::int32_t k = gmem_off[g]; k < gmem_off[g + 1]; ++k) f(gmem_list[k]);
        return;
      }
    }
    f(L);
  };
  // Prefetch stage 2 (stage 1 is in push_ready, stage 3 in start_unit): the edges of unit L, which
  // has reached the head of its device's queue.
  auto prefetch_edges = [&](std::int32_t L) GO_SIM_INLINE {
    for_members(L, [&](std::int32_t v) GO_SIM_INLINE {
      GO_SIM_PREFETCH(in_src + in_off[v]);
      GO_SIM_PREFETCH(in_tensor + in_off[v]);
      GO_SIM_PREFETCH(out_dst + out_off[v]);
      GO_SIM_PREFETCH(out_tensor + out_off[v]);
    });
  };
  auto push_ready = [&](std::int32_t L) GO_SIM_INLINE {
    const std::int32_t d = dev[L];
    if (pf) {
      GO_SIM_PREFETCH(ustart + static_cast<std::size_t>(dev_kind[d]) * n + static_cast<std::size_t>(L));
      GO_SIM_PREFETCH(release_b + L);
      GO_SIM_PREFETCH_W(times + 2 * L);
      for_members(L, [&](std::int32_t v) GO_SIM_INLINE {
        GO_SIM_PREFETCH(in_off + v);
        GO_SIM_PREFETCH(out_off + v);
      });
    }
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
  // Prefetch stage 3: what finishing op v reads of its inputs' and outputs' ops and tensors.
  auto prefetch_neighbours = [&](std::int32_t v) GO_SIM_INLINE {
    for (std::int32_t e = in_off[v]; e < in_off[v + 1]; ++e) {
      GO_SIM_PREFETCH(dev + in_src[e]);
      if (const std::int32_t t = in_tensor[e]; t >= 0) {
        GO_SIM_PREFETCH_W(refs + t);
        GO_SIM_PREFETCH(tbytes + t);
      }
    }
    for (std::int32_t e = out_off[v]; e < out_off[v + 1]; ++e) {
      const std::int32_t w = out_dst[e];
      GO_SIM_PREFETCH(dev + w);
      GO_SIM_PREFETCH_W(pending + w);
      if (const std::int32_t t = out_tensor[e]; t >= 0) GO_SIM_PREFETCH(trun_end + t);
    }
  };
  auto start_unit = [&](std::int32_t L, std::int32_t d) GO_SIM_INLINE {
    const UnitStart* us = ustart + static_cast<std::size_t>(dev_kind[d]) * n + static_cast<std::size_t>(L);
    if constexpr (kFused) {
      const std::int32_t g = group_of(L);
      if (g >= 0) us = gstart + g;
    }
    if (pf) for_members(L, prefetch_neighbours);
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
        if (pf && qs > 0) prefetch_edges(b[0].unit);
      } else {
        L = qhead[di];
        if (L < 0) continue;
        qhead[di] = qnext[L];
        if (qhead[di] < 0) qtail[di] = -1;
        else if (pf) prefetch_edges(qhead[di]);
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
  if (oom && stop_on_oom) return;
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

template void Simulator::run<false, false>(const Plan&, const std::int32_t*, SimWorkspace&) const;
template void Simulator::run<false, true>(const Plan&, const std::int32_t*, SimWorkspace&) const;
template void Simulator::run<true, false>(const Plan&, const std::int32_t*, SimWorkspace&) const;
template void Simulator::run<true, true>(const Plan&, const std::int32_t*, SimWorkspace&) const;

}  // namespace go
