#pragma once
// Cost model: the time of an op on a device by a roofline with per-kind efficiency, overridden by a
// measured time when the graph has one; graph statistics and the critical path.
#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "go/core/error.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/op_kind.hpp"

namespace go {

// Fraction of peak FLOP/s an op kind reaches in practice (dense conv/matmul kernels run close to
// peak, everything else is bandwidth-bound long before its FLOPs matter).
inline std::array<double, kNumOpKinds> default_compute_efficiency() {
  std::array<double, kNumOpKinds> e{};
  e.fill(0.25);
  e[op_kind_index(OpKind::conv)] = 0.6;
  e[op_kind_index(OpKind::matmul)] = 0.7;
  e[op_kind_index(OpKind::rnn)] = 0.4;
  return e;
}

inline std::array<double, kNumOpKinds> default_memory_efficiency() {
  std::array<double, kNumOpKinds> e{};
  e.fill(1.0);
  return e;
}

// Device presets. The originals (v100, p100, k80, a100) are the cards of the placement papers.
// The NeuSight GPUs (real-data/neusight/device_configs/<file>.json, ASPLOS 2025) take their
// numbers from those files: memory_bytes = Dev_Mem GB (as GiB, like the originals),
// mem_bandwidth = Mem_Bw GB/s, peak_flops = SingleFLOPs GFLOP/s (FP32, CUDA cores; the profiles are
// FP32 and PyTorch runs FP32 matmuls without TF32 by default). The AMD files give two FP32 peaks:
// SingleFLOPsMM (matrix cores, which rocBLAS/MIOpen FP32 GEMMs and convolutions use) and
// SingleFLOPsVEC (vector units, everything else): peak_flops is the MM peak and the efficiency of
// every kind but conv/matmul/rnn is scaled by VEC / MM, so elementwise ops see the vector peak.
//   preset          file                      memory   bandwidth    FP32 peak (TFLOP/s)
//   v100            (V100 SXM2 16GB)          16 GiB   900 GB/s     15.7
//   p100            (P100 16GB)               16 GiB   732 GB/s      9.3
//   k80             (one GK210 die)           12 GiB   240 GB/s      4.37
//   a100            (A100 40GB)               40 GiB   1555 GB/s    19.5
//   h100            (H100 SXM5 80GB datasheet) 80 GiB  3.35 TB/s    67
//   a100-pcie-40gb  NVIDIA_A100-PCIE-40GB      40 GiB   1555 GB/s    19.492
//   a100-sxm4-40gb  NVIDIA_A100-SXM4-40GB      40 GiB   1555 GB/s    19.492
//   a100-80gb-pcie  NVIDIA_A100_80GB_PCIe      80 GiB   1935 GB/s    19.492
//   v100-pcie-32gb  Tesla_V100-PCIE-32GB       32 GiB   900 GB/s     14.029
//   p100-pcie-16gb  Tesla_P100-PCIE-16GB       16 GiB   732 GB/s      9.519
//   p4              Tesla_P4                    8 GiB   192 GB/s      5.699
//   t4              Tesla_T4                   15 GiB   320 GB/s      8.141
//   l4              NVIDIA_L4                  24 GiB   300 GB/s     31.334
//   mi100           AMD_Instinct_MI100         32 GiB   1230 GB/s    46.1 MM / 23.1 VEC
//   mi210           AMD_Instinct_MI210         64 GiB   1640 GB/s    45.3 MM / 22.6 VEC
//   mi250           AMD_Instinct_MI250         64 GiB   1640 GB/s    45.3 MM / 22.6 VEC
// mi250 is one GCD (graphics compute die): an MI250 holds two, each its own device to ROCm, and the
// NeuSight file describes one (64 of the 128 GB, 1.64 of the 3.28 TB/s).
struct DeviceSpec {
  std::string name = "v100";
  double peak_flops = 15.7e12;          // FLOP/s (fp32)
  double mem_bandwidth = 900e9;         // bytes/s
  double launch_overhead = 5e-6;        // seconds per kernel launch
  std::int64_t memory_bytes = 16LL << 30;
  double bandwidth_efficiency = 0.8;    // fraction of mem_bandwidth reached by streaming kernels
  std::array<double, kNumOpKinds> compute_efficiency = default_compute_efficiency();
  // Per kind, multiplies bandwidth_efficiency: < 1 where a kind's kernels stream slower than the
  // device's average, > 1 where they move less than the inputs + outputs the roofline counts (views
  // a profile records as copies, inference-mode dropout). 1 unless calibrated (go/sim/calibrate.hpp).
  std::array<double, kNumOpKinds> memory_efficiency = default_memory_efficiency();

  bool operator==(const DeviceSpec&) const = default;

  static DeviceSpec v100() { return {}; }
  static DeviceSpec p100() { return make("p100", 16, 732, 9300); }
  static DeviceSpec k80() {  // one GK210 die of a K80, as in Placeto's simulator
    DeviceSpec d = make("k80", 12, 240, 4370);
    d.launch_overhead = 5.7e-6;
    return d;
  }
  static DeviceSpec a100() { return make("a100", 40, 1555, 19500); }
  // H100 SXM5 80GB (NVIDIA H100 datasheet): 80 GB HBM3, 3.35 TB/s, 67 TFLOP/s FP32. It used to have
  // 51.2 TFLOP/s and 2.0 TB/s, the H100 PCIe's numbers.
  static DeviceSpec h100() { return make("h100", 80, 3350, 67000); }

  // A device from its numbers as NeuSight's device configs give them: memory in GB (GiB here),
  // bandwidth in GB/s, FP32 peaks in GFLOP/s; vec_gflops > 0 where the vector peak differs (AMD).
  static DeviceSpec make(std::string name, std::int64_t mem_gb, double bw_gbs, double gflops, double vec_gflops = 0) {
    DeviceSpec d;
    d.name = std::move(name);
    d.memory_bytes = mem_gb << 30;
    d.mem_bandwidth = bw_gbs * 1e9;
    d.peak_flops = gflops * 1e9;
    if (vec_gflops > 0)
      for (std::size_t k = 0; k < kNumOpKinds; ++k) {
        const auto kind = static_cast<OpKind>(k);
        if (kind != OpKind::conv && kind != OpKind::matmul && kind != OpKind::rnn)
          d.compute_efficiency[k] *= vec_gflops / gflops;
      }
    return d;
  }

  static std::vector<std::string> preset_names() {
    return {"v100",           "p100",           "k80", "a100", "h100", "a100-pcie-40gb", "a100-sxm4-40gb",
            "a100-80gb-pcie", "v100-pcie-32gb", "p100-pcie-16gb", "p4", "t4", "l4", "mi100", "mi210", "mi250"};
  }
  static DeviceSpec preset(std::string_view name) {
    if (name == "v100") return v100();
    if (name == "p100") return p100();
    if (name == "k80") return k80();
    if (name == "a100") return a100();
    if (name == "h100") return h100();
    // NeuSight device configs: Dev_Mem, Mem_Bw, SingleFLOPs (AMD: SingleFLOPsMM, SingleFLOPsVEC)
    if (name == "a100-pcie-40gb") return make("a100-pcie-40gb", 40, 1555, 19492);
    if (name == "a100-sxm4-40gb") return make("a100-sxm4-40gb", 40, 1555, 19492);
    if (name == "a100-80gb-pcie") return make("a100-80gb-pcie", 80, 1935, 19492);
    if (name == "v100-pcie-32gb") return make("v100-pcie-32gb", 32, 900, 14029);
    if (name == "p100-pcie-16gb") return make("p100-pcie-16gb", 16, 732, 9519);
    if (name == "p4") return make("p4", 8, 192, 5699);
    if (name == "t4") return make("t4", 15, 320, 8141);
    if (name == "l4") return make("l4", 24, 300, 31334);
    if (name == "mi100") return make("mi100", 32, 1230, 46100, 23100);
    if (name == "mi210") return make("mi210", 64, 1640, 45300, 22600);
    if (name == "mi250") return make("mi250", 64, 1640, 45300, 22600);
    std::string known;
    for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
    GO_FAIL("unknown device preset '", name, "' (known: ", known, ")");
  }
};

// Where op times come from: measured times where the graph has them (PipeDream and dnn-partitioning
// profiles), the roofline for the rest; or the roofline alone, to judge the cost model by itself.
enum class CostSource : std::uint8_t { measured, roofline };

inline constexpr std::string_view cost_source_name(CostSource c) {
  return c == CostSource::roofline ? "roofline" : "measured";
}
inline CostSource parse_cost_source(std::string_view s) {
  if (s == "measured") return CostSource::measured;
  if (s == "roofline") return CostSource::roofline;
  GO_FAIL("unknown cost source '", s, "' (known: measured, roofline)");
}

// Seconds the op takes on `spec`: its measured time when it has one (and `src` is measured); zero
// for inputs, constants and views; otherwise launch overhead + max(FLOPs / (peak * efficiency),
// bytes / (bandwidth * efficiency * the kind's memory efficiency)) with bytes = distinct inputs +
// outputs + parameters.
inline double op_time(const Op& op, const DeviceSpec& spec, CostSource src = CostSource::measured) {
  if (src == CostSource::measured && op.has_time()) return op.time;
  if (is_free_op(op.kind)) return 0.0;
  const double eff = spec.compute_efficiency[op_kind_index(op.kind)];
  const double compute = op.flops / (spec.peak_flops * (eff > 0 ? eff : 1.0));
  const double bytes = static_cast<double>(op.input_bytes + op.output_bytes + op.param_bytes);
  const double memory =
      bytes / (spec.mem_bandwidth * spec.bandwidth_efficiency * spec.memory_efficiency[op_kind_index(op.kind)]);
  return spec.launch_overhead + std::max(compute, memory);
}

// op_time of every op, indexed by OpId.
inline std::vector<double> op_times(const OpGraph& g, const DeviceSpec& spec, CostSource src = CostSource::measured) {
  std::vector<double> t(static_cast<std::size_t>(g.num_ops()));
  for (const Op& o : g.ops()) t[static_cast<std::size_t>(o.id)] = op_time(o, spec, src);
  return t;
}

inline bool has_measured_times(const OpGraph& g) {
  for (const Op& o : g.ops())
    if (o.has_time() || o.has_backward_time()) return true;
  return false;
}

// `g` without its measured times (Op::time, Op::backward_time), op ids unchanged: what every
// consumer of the graph (baselines, policy features) sees under CostSource::roofline.
inline OpGraph without_measured_times(const OpGraph& g) {
  GraphBuilder b(g.info());
  b.reserve(static_cast<std::size_t>(g.num_ops()));
  for (OpId i = 0; i < g.num_ops(); ++i) {
    OpSpec s = op_spec(g, i);
    s.time = s.backward_time = kNoTime;
    b.add_op(std::move(s));
  }
  return b.build();
}

struct CriticalPath {
  double time = 0;           // seconds, sum of op times along the path (transfers not counted)
  std::vector<OpId> ops;     // the path, first op first
};

// Longest path through the DAG weighted by per-op times (indexed by OpId).
inline CriticalPath critical_path(const OpGraph& g, std::span<const double> times) {
  const auto n = static_cast<std::size_t>(g.num_ops());
  GO_CHECK(times.size() == n, g.where(), "critical_path: ", times.size(), " times for ", n, " ops");
  CriticalPath cp;
  if (n == 0) return cp;
  std::vector<double> finish(n, 0.0);
  std::vector<OpId> parent(n, -1);
  for (OpId v : g.topo_order()) {
    double start = 0;
    OpId best = -1;
    for (OpId u : g.pred(v))
      if (best < 0 || finish[static_cast<std::size_t>(u)] > start) {
        start = finish[static_cast<std::size_t>(u)];
        best = u;
      }
    finish[static_cast<std::size_t>(v)] = start + times[static_cast<std::size_t>(v)];
    parent[static_cast<std::size_t>(v)] = best;
  }
  OpId end = static_cast<OpId>(std::max_element(finish.begin(), finish.end()) - finish.begin());
  cp.time = finish[static_cast<std::size_t>(end)];
  for (OpId v = end; v >= 0; v = parent[static_cast<std::size_t>(v)]) cp.ops.push_back(v);
  std::reverse(cp.ops.begin(), cp.ops.end());
  return cp;
}

struct GraphStats {
  std::int32_t nodes = 0;
  std::int64_t edges = 0;
  double flops = 0;                      // total floating-point operations
  std::int64_t param_bytes = 0;
  std::int64_t activation_bytes = 0;     // bytes of all op outputs (every tensor the graph produces)
  std::int64_t temp_bytes = 0;
  std::int32_t measured_ops = 0;         // ops with a measured time
  std::array<std::int32_t, kNumOpKinds> kind_counts{};
  double total_time = 0;                 // sum of op times on the device (one-device step time lower bound)
  CriticalPath critical;                 // on the device
};

inline GraphStats graph_stats(const OpGraph& g, const DeviceSpec& spec = {}) {
  GraphStats s;
  s.nodes = g.num_ops();
  s.edges = g.num_edges();
  for (const Op& o : g.ops()) {
    s.flops += o.flops;
    s.param_bytes += o.param_bytes;
    s.activation_bytes += o.output_bytes;
    s.temp_bytes += o.temp_bytes;
    s.measured_ops += o.has_time() ? 1 : 0;
    ++s.kind_counts[op_kind_index(o.kind)];
  }
  auto t = op_times(g, spec);
  for (double x : t) s.total_time += x;
  s.critical = critical_path(g, t);
  return s;
}

}  // namespace go
