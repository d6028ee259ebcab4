#pragma once
// SimWorkspace (go/sim/simulator.hpp): a Simulator's per-thread scratch, holding the last result and
// its schedule (unit start and finish times, transfers, memory events). Its private arrays are the
// state of the event loops (src/sim/event_loop.cpp), sized once by Simulator::prepare().
#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <vector>

#include "go/graph/graph.hpp"
#include "go/sim/simulator/result.hpp"

namespace go {

class Simulator;

// Whether the event loop prefetches what its units will read (src/sim/event_loop.cpp): by default
// where the graph's arrays outgrow the cache (Simulator::prefetches()), always or never. It changes
// only the time a simulation takes, never its result.
enum class SimPrefetch : std::uint8_t { automatic, always, never };

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
  // Off by default; when on, simulations with this workspace stop at the first out-of-memory, as
  // with SimOptions::stop_on_oom, for a caller that needs only whether a plan fits (and the step
  // time of one that does, which stopping does not change).
  void set_stop_on_oom(bool on) { stop_on_oom_ = on; }
  bool stop_on_oom() const { return stop_on_oom_; }
  // Prefetching in simulations with this workspace (SimPrefetch; automatic by default).
  void set_prefetch(SimPrefetch p) { prefetch_ = p; }

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
  bool stop_on_oom_ = false;
  SimPrefetch prefetch_ = SimPrefetch::automatic;
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

}  // namespace go
