#pragma once
// Cluster: the simulated machine. Devices (peak FLOP/s, memory bandwidth, memory capacity, launch
// overhead: a go::DeviceSpec each, with a name) and the links between them (bandwidth and latency
// per ordered device pair, as matrices), plus how transfers share the devices' copy channels.
//
// JSON ("go-cluster", version 1; `//` comments allowed):
//   {
//     "format": "go-cluster", "version": 1, "name": "my-box",
//     "devices": { "count": 4, "type": "v100", "memory_bytes": 17179869184 },   // n identical devices
//       or      [ { "name": "gpu0", "type": "v100" }, { "name": "gpu1", "type": "p100", "peak_flops": 9e12 } ],
//     //  device fields: type (a DeviceSpec preset, default v100; graph/cost.hpp lists them), peak_flops,
//     //  mem_bandwidth (bytes/s), memory_bytes, launch_overhead (s), bandwidth_efficiency,
//     //  compute_efficiency ({"conv": 0.6, ...} per op kind), memory_efficiency (per op kind, multiplies
//     //  bandwidth_efficiency; gopt calibrate fits it); every field overrides the preset.
//     "channels": "duplex",      // duplex | shared | sender (see ChannelModel)
//     "links": { "bandwidth": 25e9, "latency": 2e-5 }                      // every pair alike
//       or     { "bandwidth": [[...n...], ...], "latency": [[...]] }        // matrices (diagonal unused);
//                                                                          // either may be a number
//       or     { "topology": "groups", "group_size": 2,                     // e.g. NVLink inside pairs,
//                "intra": { "bandwidth": 25e9, "latency": 1e-5 },           // PCIe across them
//                "inter": { "bandwidth": 10e9, "latency": 2e-5 } }
//   }
// cluster_to_json writes the device list and full matrices, so any cluster round-trips. A key
// outside these (and "calibration", gopt calibrate's record, not read) is an error, as is a key
// given twice; device names must differ.
//
// Presets (cluster_preset): "<device>x<count>" for every DeviceSpec preset (graph/cost.hpp: the
// device numbers and their sources), with the interconnect of the machines they came in. Link
// bandwidths are per direction (NVLink's "600 GB/s per GPU" is 300 each way), effective rates
// where a bus is involved.
//   v100xN  NVLink 2 (DGX-1): 25 GB/s per direction, 20 us; for N = 8 the hybrid cube-mesh: GPUs of
//           one quad (0-3, 4-7) and pairs (i, i+4) are NVLink-connected, the other pairs go through
//           PCIe + the CPU interconnect at 10 GB/s, 30 us. 16 GB each.
//   p100xN  PCIe 3 x16 through the host: 10 GB/s, 20 us. 16 GB each.
//   k80xN   Placeto's simulator setting: 7.6 GB/s, 25 us per transfer, 5.7 us after each kernel
//           (the K80 DeviceSpec's launch overhead). 12 GB per GK210 die.
//   a100xN  NVSwitch, NVLink 3: 300 GB/s per direction, 10 us. 40 GB each.
// The NeuSight GPUs and the H100 SXM, in boxes of 8 (DGX/HGX, 8-GPU PCIe servers); for N > 8, pairs
// in different boxes go over the network at 30 us:
//   preset (xN)      device link                                   across boxes (N > 8)
//   h100             NVSwitch, NVLink 4: 450 GB/s, 10 us            NDR 400 Gb/s per GPU: 50 GB/s
//                    (HGX H100: 900 GB/s per GPU both ways)
//   a100-sxm4-40gb   NVSwitch, NVLink 3: 300 GB/s, 10 us            HDR 200 Gb/s per GPU: 25 GB/s
//                    (HGX/DGX A100: 600 GB/s per GPU both ways)
//   a100-pcie-40gb   PCIe 4.0 x16: 25 GB/s effective, 20 us         100 Gb/s: 12.5 GB/s
//   a100-80gb-pcie, l4, mi100, mi210: the same (PCIe 4.0 cards; the optional NVLink / Infinity
//                    Fabric bridges of the A100 PCIe and MI100/MI210 are a go-cluster JSON away)
//   v100-pcie-32gb   PCIe 3.0 x16: 12 GB/s effective, 20 us          12 GB/s (PCIe-bound)
//   p100-pcie-16gb, p4, t4: the same (PCIe 3.0 cards)
//   mi250            per GCD (an MI250 is two GCDs, gpu 2k and 2k+1): inside the package 4 Infinity
//                    Fabric links, 200 GB/s, 10 us; between packages in a box of 4 MI250 (8 GCDs)
//                    one link, 50 GB/s, 10 us (AMD CDNA 2 white paper: 50 GB/s per link per
//                    direction)                                     HDR 200 Gb/s: 25 GB/s
// The latencies are per transfer as a framework sees it (copy launch + synchronisation), not the
// wire latency; tune them in a JSON cluster for another framework.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "go/core/error.hpp"
#include "go/core/file.hpp"
#include "go/graph/cost.hpp"
#include "go/graph/op_kind.hpp"

namespace go {

// How transfers occupy the devices' copy channels. Every transfer is serialized on the channels it
// holds, in the order it was requested, for latency + bytes / bandwidth.
enum class ChannelModel : std::uint8_t {
  duplex,  // the sender's send channel and the receiver's receive channel (full-duplex links: NVLink, PCIe)
  shared,  // one channel per device shared by its sends and receives (Baechi's virtual scheduler)
  sender,  // only the sender's channel (Placeto's per-sender transfer queue)
};

inline constexpr std::string_view channel_model_name(ChannelModel m) {
  switch (m) {
    case ChannelModel::duplex: return "duplex";
    case ChannelModel::shared: return "shared";
    case ChannelModel::sender: return "sender";
  }
  return "duplex";
}

struct ClusterDevice {
  std::string name;   // "gpu0"
  DeviceSpec spec;    // spec.name is the device type ("v100")
};

struct Cluster {
  std::string name;
  std::vector<ClusterDevice> devices;
  std::vector<double> bandwidth;  // bytes/s, [src * n + dst]; the diagonal is unused
  std::vector<double> latency;    // seconds, [src * n + dst]
  ChannelModel channels = ChannelModel::duplex;

  std::int32_t num_devices() const { return static_cast<std::int32_t>(devices.size()); }
  const DeviceSpec& spec(std::int32_t d) const { return devices[static_cast<std::size_t>(d)].spec; }
  double link_bandwidth(std::int32_t src, std::int32_t dst) const { return bandwidth[index(src, dst)]; }
  double link_latency(std::int32_t src, std::int32_t dst) const { return latency[index(src, dst)]; }
  // Seconds to move `bytes` from src to dst on an idle link (0 on the same device).
  double transfer_time(std::int32_t src, std::int32_t dst, double bytes) const {
    if (src == dst) return 0.0;
    return link_latency(src, dst) + bytes / link_bandwidth(src, dst);
  }

  // Throws go::Error naming the problem (prefixed with `where`, e.g. the file).
  void validate(const std::string& where = "cluster: ") const;

  // n identical devices, every pair linked alike.
  static Cluster uniform(std::string name, const DeviceSpec& spec, std::int32_t n, double bandwidth, double latency);
  // n identical devices in groups of `group_size` (devices [0, g), [g, 2g), ...): intra-group links
  // and inter-group links.
  static Cluster grouped(std::string name, const DeviceSpec& spec, std::int32_t n, std::int32_t group_size,
                         double intra_bandwidth, double intra_latency, double inter_bandwidth, double inter_latency);

 private:
  std::size_t index(std::int32_t s, std::int32_t d) const {
    return static_cast<std::size_t>(s) * devices.size() + static_cast<std::size_t>(d);
  }
};

namespace detail {

inline void sim_name_devices(Cluster& c, const DeviceSpec& spec, std::int32_t n) {
  c.devices.clear();
  for (std::int32_t i = 0; i < n; ++i) c.devices.push_back(ClusterDevice{"gpu" + std::to_string(i), spec});
}

// Limits far outside any real machine, so that every simulated time stays finite: at the extremes
// (1e30 FLOPs of one op at 1 FLOP/s and efficiency 1e-9, 80,000 such ops) a step is about 1e44 s.
inline constexpr double kMinRate = 1.0;         // FLOP/s, bytes/s
inline constexpr double kMaxRate = 1e24;        // FLOP/s, bytes/s (a link's bandwidth may be larger)
inline constexpr double kMinEfficiency = 1e-9;  // compute, bandwidth and memory efficiencies
inline constexpr double kMaxSeconds = 1e3;      // a launch overhead, a link latency
inline bool sim_in(double x, double lo, double hi) { return std::isfinite(x) && x >= lo && x <= hi; }

}  // namespace detail

inline void Cluster::validate(const std::string& where) const {
  const auto n = devices.size();
  GO_CHECK(n > 0, where, "cluster '", name, "' has no devices");
  GO_CHECK(n <= 4096, where, "cluster '", name, "' has ", n, " devices (at most 4096)");
  GO_CHECK(bandwidth.size() == n * n && latency.size() == n * n, where, "cluster '", name, "' has ",
           bandwidth.size(), " bandwidth and ", latency.size(), " latency entries for ", n, " devices (need ",
           n * n, ")");
  {  // traces and reports name devices; two of one name could not be told apart
    std::vector<std::pair<std::string_view, std::size_t>> names;
    names.reserve(n);
    for (std::size_t i = 0; i < n; ++i) names.emplace_back(devices[i].name, i);
    std::sort(names.begin(), names.end());
    for (std::size_t k = 1; k < n; ++k)
      GO_CHECK(names[k].first != names[k - 1].first, where, "cluster '", name, "': devices ", names[k - 1].second,
               " and ", names[k].second, " are both named '", names[k].first, "'; device names must differ");
  }
  for (std::size_t i = 0; i < n; ++i) {
    const DeviceSpec& s = devices[i].spec;
    const std::string dev = "device " + std::to_string(i) + " ('" + devices[i].name + "')";
    using detail::kMaxRate, detail::kMinRate, detail::kMaxSeconds, detail::kMinEfficiency, detail::sim_in;
    GO_CHECK(sim_in(s.peak_flops, kMinRate, kMaxRate), where, dev, " has invalid peak_flops ", s.peak_flops,
             " (need ", kMinRate, " to ", kMaxRate, " FLOP/s)");
    GO_CHECK(sim_in(s.mem_bandwidth, kMinRate, kMaxRate), where, dev, " has invalid mem_bandwidth ", s.mem_bandwidth,
             " (need ", kMinRate, " to ", kMaxRate, " bytes/s)");
    GO_CHECK(sim_in(s.launch_overhead, 0, kMaxSeconds), where, dev, " has invalid launch_overhead ", s.launch_overhead,
             " (need 0 to ", kMaxSeconds, " s)");
    GO_CHECK(s.memory_bytes > 0, where, dev, " has invalid memory_bytes ", s.memory_bytes);
    GO_CHECK(sim_in(s.bandwidth_efficiency, kMinEfficiency, 1), where, dev, " has invalid bandwidth_efficiency ",
             s.bandwidth_efficiency, " (need ", kMinEfficiency, " <= e <= 1)");
    for (std::size_t k = 0; k < kNumOpKinds; ++k)
      GO_CHECK(sim_in(s.compute_efficiency[k], kMinEfficiency, 1), where, dev, " has invalid compute_efficiency ",
               s.compute_efficiency[k], " for ", kOpKindNames[k], " (need ", kMinEfficiency, " <= e <= 1)");
    for (std::size_t k = 0; k < kNumOpKinds; ++k)
      GO_CHECK(sim_in(s.memory_efficiency[k], kMinEfficiency, kMaxRate), where, dev, " has invalid memory_efficiency ",
               s.memory_efficiency[k], " for ", kOpKindNames[k], " (need at least ", kMinEfficiency, ")");
    for (std::size_t j = 0; j < n; ++j) {
      if (i == j) continue;
      const double bw = bandwidth[i * n + j], lat = latency[i * n + j];
      GO_CHECK(std::isfinite(bw) && bw >= kMinRate, where, "link ", i, " -> ", j, " has invalid bandwidth ", bw,
               " (need at least ", kMinRate, " bytes/s)");
      GO_CHECK(sim_in(lat, 0, kMaxSeconds), where, "link ", i, " -> ", j, " has invalid latency ", lat, " (need 0 to ",
               kMaxSeconds, " s)");
    }
  }
}

inline Cluster Cluster::uniform(std::string name, const DeviceSpec& spec, std::int32_t n, double bw, double lat) {
  GO_CHECK(n > 0, "cluster '", name, "': need at least one device, got ", n);
  Cluster c;
  c.name = std::move(name);
  detail::sim_name_devices(c, spec, n);
  const auto nn = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  c.bandwidth.assign(nn, bw);
  c.latency.assign(nn, lat);
  for (std::int32_t i = 0; i < n; ++i) {  // the diagonal is never used; keep it canonical
    c.bandwidth[c.index(i, i)] = std::numeric_limits<double>::infinity();
    c.latency[c.index(i, i)] = 0.0;
  }
  return c;
}

inline Cluster Cluster::grouped(std::string name, const DeviceSpec& spec, std::int32_t n, std::int32_t group_size,
                                double intra_bw, double intra_lat, double inter_bw, double inter_lat) {
  GO_CHECK(group_size > 0, "cluster '", name, "': group_size must be positive, got ", group_size);
  Cluster c = uniform(std::move(name), spec, n, inter_bw, inter_lat);
  for (std::int32_t i = 0; i < n; ++i)
    for (std::int32_t j = 0; j < n; ++j)
      if (i != j && i / group_size == j / group_size) {
        c.bandwidth[c.index(i, j)] = intra_bw;
        c.latency[c.index(i, j)] = intra_lat;
      }
  return c;
}

// The most devices of a "<device>x<count>" preset.
inline constexpr std::int32_t kMaxPresetDevices = 1024;

// "<device>x<count>" (see the top of this file). Throws go::Error for an unknown name.
inline Cluster cluster_preset(std::string_view name) {
  const auto x = name.rfind('x');
  std::string_view type = x == std::string_view::npos ? name : name.substr(0, x);
  std::string_view count_s = x == std::string_view::npos ? std::string_view() : name.substr(x + 1);
  std::int32_t count = 0;
  bool ok = !count_s.empty() && count_s.size() <= 4;
  for (char ch : count_s) {
    if (!std::isdigit(static_cast<unsigned char>(ch))) ok = false;
    else count = count * 10 + (ch - '0');
  }
  ok = ok && count >= 1 && count <= kMaxPresetDevices;
  const std::vector<std::string> types = DeviceSpec::preset_names();
  ok = ok && std::find(types.begin(), types.end(), type) != types.end();
  if (!ok) {
    std::string known;
    for (const auto& t : types) known += (known.empty() ? "" : "|") + t;
    GO_FAIL("unknown cluster preset '", name, "' (known: v100x2, v100x4, v100x8, p100x4, k80x2, h100x8, or any <", known,
            ">x<count>, count 1 to ", kMaxPresetDevices, ")");
  }
  const DeviceSpec spec = DeviceSpec::preset(type);
  const std::string n(name);
  constexpr double kPcie3 = 12e9, kPcie4 = 25e9, kPcieLat = 20e-6, kNetLat = 30e-6;
  Cluster c;
  if (type == "v100") {
    if (count == 8) {
      // DGX-1 hybrid cube-mesh: NVLink inside each quad and between GPU i and i + 4.
      c = Cluster::grouped(n, spec, count, 4, 25e9, 20e-6, 10e9, 30e-6);
      for (std::int32_t i = 0; i < 4; ++i)
        for (auto [s, d] : {std::pair{i, i + 4}, std::pair{i + 4, i}}) {
          c.bandwidth[static_cast<std::size_t>(s * 8 + d)] = 25e9;
          c.latency[static_cast<std::size_t>(s * 8 + d)] = 20e-6;
        }
    } else if (count < 8) {
      c = Cluster::uniform(n, spec, count, 25e9, 20e-6);
    } else {
      // Several DGX-1 style boxes of 8: NVLink inside, 10 GB/s across.
      c = Cluster::grouped(n, spec, count, 8, 25e9, 20e-6, 10e9, 30e-6);
    }
  } else if (type == "p100") {
    c = Cluster::uniform(n, spec, count, 10e9, 20e-6);
  } else if (type == "k80") {
    c = Cluster::uniform(n, spec, count, 7.6e9, 25e-6);
  } else if (type == "a100") {
    c = Cluster::uniform(n, spec, count, 300e9, 10e-6);
  } else if (type == "h100") {
    c = Cluster::grouped(n, spec, count, 8, 450e9, 10e-6, 50e9, kNetLat);
  } else if (type == "a100-sxm4-40gb") {
    c = Cluster::grouped(n, spec, count, 8, 300e9, 10e-6, 25e9, kNetLat);
  } else if (type == "mi250") {
    c = Cluster::grouped(n, spec, count, 8, 50e9, 10e-6, 25e9, kNetLat);
    for (std::int32_t i = 0; i + 1 < count; i += 2)  // the two GCDs of one package
      for (auto [s, d] : {std::pair{i, i + 1}, std::pair{i + 1, i}}) {
        c.bandwidth[static_cast<std::size_t>(s * count + d)] = 200e9;
        c.latency[static_cast<std::size_t>(s * count + d)] = 10e-6;
      }
  } else if (type == "v100-pcie-32gb" || type == "p100-pcie-16gb" || type == "p4" || type == "t4") {
    c = Cluster::grouped(n, spec, count, 8, kPcie3, kPcieLat, kPcie3, kNetLat);
  } else {  // PCIe 4.0 cards: a100-pcie-40gb, a100-80gb-pcie, l4, mi100, mi210
    c = Cluster::grouped(n, spec, count, 8, kPcie4, kPcieLat, 12.5e9, kNetLat);
  }
  return c;
}

inline std::vector<std::string> cluster_preset_names() {
  return {"v100x1",           "v100x2",           "v100x4",           "v100x8",           "p100x4",
          "k80x2",            "a100x8",           "h100x8",           "a100-pcie-40gbx4", "a100-sxm4-40gbx8",
          "a100-80gb-pciex4", "v100-pcie-32gbx4", "p100-pcie-16gbx4", "p4x4",             "t4x4",
          "l4x4",             "mi100x4",          "mi210x4",          "mi250x8"};
}

// Reading and writing go-cluster JSON (src/sim/json.cpp): errors name `source` and the field.
Cluster cluster_from_json(const nlohmann::json& j, const std::string& source);
// A device's fields as a go-cluster device object reads them (every field, so it round-trips).
nlohmann::json device_to_json(const DeviceSpec& s);
nlohmann::json cluster_to_json(const Cluster& c);
// A checksum of the cluster's devices, links and channel model, not of its name (go/core/hash.hpp).
std::uint64_t cluster_fingerprint(const Cluster& c);
Cluster parse_cluster(std::string_view text, const std::string& source);
void save_cluster(const Cluster& c, const std::string& path);

// A preset name ("v100x4") or a go-cluster JSON file.
inline Cluster load_cluster(const std::string& preset_or_path) {
  std::error_code ec;
  const bool is_file = preset_or_path.find('/') != std::string::npos ||
                       (preset_or_path.size() > 5 && preset_or_path.substr(preset_or_path.size() - 5) == ".json") ||
                       std::filesystem::exists(preset_or_path, ec);
  if (!is_file) return cluster_preset(preset_or_path);
  return parse_cluster(read_file(preset_or_path), preset_or_path);
}

}  // namespace go
