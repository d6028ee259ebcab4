// Device and cluster presets of real GPUs (the NeuSight device configs, the H100 SXM) and the
// roofline-only cost source (SimOptions::cost; its CLI, `--cost roofline`: test_place_cli.cpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "go/baselines/place.hpp"
#include "go/core/file.hpp"
#include "go/graph/load.hpp"
#include "go/graph/training.hpp"
#include "go/sim/sim.hpp"

namespace test_sim_presets {
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

const fs::path kRealData = fs::path(GO_DATA_DIR) / "real-data";

// The documented numbers (graph/cost.hpp): NeuSight file, Dev_Mem GB, Mem_Bw GB/s, FP32 GFLOP/s
// (AMD: SingleFLOPsMM, and SingleFLOPsVEC).
struct Documented {
  const char* preset;
  const char* file;  // real-data/neusight/device_configs/<file>.json, "" for none
  std::int64_t mem_gb;
  double bw_gbs, gflops, vec_gflops;
};
const Documented kDocumented[] = {
    {"a100-pcie-40gb", "NVIDIA_A100-PCIE-40GB", 40, 1555, 19492, 0},
    {"a100-sxm4-40gb", "NVIDIA_A100-SXM4-40GB", 40, 1555, 19492, 0},
    {"a100-80gb-pcie", "NVIDIA_A100_80GB_PCIe", 80, 1935, 19492, 0},
    {"v100-pcie-32gb", "Tesla_V100-PCIE-32GB", 32, 900, 14029, 0},
    {"p100-pcie-16gb", "Tesla_P100-PCIE-16GB", 16, 732, 9519, 0},
    {"p4", "Tesla_P4", 8, 192, 5699, 0},
    {"t4", "Tesla_T4", 15, 320, 8141, 0},
    {"l4", "NVIDIA_L4", 24, 300, 31334, 0},
    {"mi100", "AMD_Instinct_MI100", 32, 1230, 46100, 23100},
    {"mi210", "AMD_Instinct_MI210", 64, 1640, 45300, 22600},
    {"mi250", "AMD_Instinct_MI250", 64, 1640, 45300, 22600},
    {"h100", "", 80, 3350, 67000, 0},  // H100 SXM5 80GB datasheet
};

// x (input) -> mm (matmul, 2e10 FLOPs, 1 MiB of weights, measured 0.5 ms) -> relu (measured 0.1 ms);
// with_times = false: the same graph without the measured times.
go::OpGraph measured_mlp(bool with_times) {
  go::GraphBuilder b;
  auto op = [&](const char* name, go::OpKind kind, double flops, double ms, std::vector<go::TensorRef> in,
                std::int64_t params) {
    go::OpSpec s;
    s.name = name;
    s.kind = kind;
    s.flops = flops;
    s.time = with_times && ms >= 0 ? ms * 1e-3 : go::kNoTime;
    s.param_bytes = params;
    go::TensorSpec t;
    t.shape = {32, 32};  // f32: 4096 bytes
    s.outputs.push_back(t);
    s.inputs = std::move(in);
    return b.add_op(std::move(s));
  };
  op("x", go::OpKind::input, 0, -1, {}, 0);
  op("mm", go::OpKind::matmul, 2e10, 0.5, {{0, 0}}, 1 << 20);
  op("relu", go::OpKind::relu, 1024, 0.1, {{1, 0}}, 0);
  return b.build();
}

double step(const go::OpGraph& g, const go::Cluster& c, const go::Plan& p, go::CostSource cost) {
  go::SimOptions so;
  so.cost = cost;
  go::Simulator sim(g, c, so);
  go::SimWorkspace ws = sim.make_workspace();
  const go::SimResult& r = sim.simulate(p, ws);
  REQUIRE(r.valid);
  return r.step_time;
}

}  // namespace

TEST_CASE("device presets of the NeuSight GPUs and the H100 SXM have the documented numbers", "[sim][presets]") {
  for (const Documented& d : kDocumented) {
    INFO(d.preset);
    const go::DeviceSpec s = go::DeviceSpec::preset(d.preset);
    CHECK(s.name == d.preset);
    CHECK(s.memory_bytes == d.mem_gb << 30);
    CHECK(s.mem_bandwidth == d.bw_gbs * 1e9);
    CHECK(s.peak_flops == d.gflops * 1e9);
    const double relu_eff = s.compute_efficiency[go::op_kind_index(go::OpKind::relu)];
    const double mm_eff = s.compute_efficiency[go::op_kind_index(go::OpKind::matmul)];
    CHECK(mm_eff == 0.7);
    // AMD: the vector peak for everything but conv/matmul/rnn
    CHECK(relu_eff == Approx(d.vec_gflops > 0 ? 0.25 * d.vec_gflops / d.gflops : 0.25).epsilon(1e-12));
    const std::vector<std::string> names = go::DeviceSpec::preset_names();
    CHECK(std::find(names.begin(), names.end(), d.preset) != names.end());
    // the numbers are the files' (data/real-data/neusight/device_configs)
    if (d.file[0] == '\0') continue;
    const fs::path file = kRealData / "neusight" / "device_configs" / (std::string(d.file) + ".json");
    REQUIRE(fs::exists(file));
    const auto j = nlohmann::json::parse(go::read_file(file.string()));
    CHECK(j["Dev_Mem"].get<std::int64_t>() == d.mem_gb);
    CHECK(j["Mem_Bw"].get<double>() == d.bw_gbs);
    if (d.vec_gflops > 0) {
      CHECK(j["SingleFLOPsMM"].get<double>() == d.gflops);
      CHECK(j["SingleFLOPsVEC"].get<double>() == d.vec_gflops);
    } else {
      CHECK(j["SingleFLOPs"].get<double>() == d.gflops);
    }
  }
  // the original presets keep their meaning
  CHECK(go::DeviceSpec::preset("v100").peak_flops == 15.7e12);
  CHECK(go::DeviceSpec::preset("p100").peak_flops == 9.3e12);
  CHECK(go::DeviceSpec::preset("k80").launch_overhead == 5.7e-6);
  CHECK(go::DeviceSpec::preset("a100").mem_bandwidth == 1555e9);
  CHECK_THROWS_WITH(go::DeviceSpec::preset("mi300"), Contains("unknown device preset 'mi300'") && Contains("mi250"));
}

TEST_CASE("cluster presets of real GPUs: NVLink, Infinity Fabric, PCIe, network across boxes", "[sim][presets]") {
  for (const Documented& d : kDocumented)
    for (int n : {1, 4, 8, 16}) {
      const std::string name = std::string(d.preset) + "x" + std::to_string(n);
      INFO(name);
      const go::Cluster c = go::cluster_preset(name);
      CHECK(c.num_devices() == n);
      CHECK(c.spec(n - 1).peak_flops == d.gflops * 1e9);
      CHECK_NOTHROW(c.validate());
      const go::Cluster back = go::cluster_from_json(go::cluster_to_json(c), "roundtrip");
      CHECK(back.bandwidth == c.bandwidth);
      CHECK(back.devices[0].spec.compute_efficiency == c.devices[0].spec.compute_efficiency);
    }
  const go::Cluster h8 = go::cluster_preset("h100x8");
  for (int i = 0; i < 8; ++i)
    for (int k = 0; k < 8; ++k)
      if (i != k) CHECK(h8.link_bandwidth(i, k) == 450e9);  // NVLink 4 via NVSwitch, per direction
  CHECK(h8.spec(0).peak_flops == 67e12);
  CHECK(h8.spec(0).mem_bandwidth == 3.35e12);
  const go::Cluster h16 = go::cluster_preset("h100x16");
  CHECK(h16.link_bandwidth(7, 6) == 450e9);
  CHECK(h16.link_bandwidth(7, 8) == 50e9);  // NDR InfiniBand across HGX boxes
  CHECK(go::cluster_preset("a100-sxm4-40gbx8").link_bandwidth(0, 7) == 300e9);
  CHECK(go::cluster_preset("a100-sxm4-40gbx16").link_bandwidth(0, 8) == 25e9);
  const go::Cluster mi = go::cluster_preset("mi250x8");
  CHECK(mi.link_bandwidth(0, 1) == 200e9);  // the two GCDs of one MI250
  CHECK(mi.link_bandwidth(5, 4) == 200e9);
  CHECK(mi.link_bandwidth(1, 2) == 50e9);   // GCDs of two packages
  CHECK(go::cluster_preset("mi250x3").link_bandwidth(2, 1) == 50e9);
  CHECK(go::cluster_preset("mi250x16").link_bandwidth(0, 8) == 25e9);
  for (const char* pcie4 : {"a100-pcie-40gbx4", "a100-80gb-pciex4", "l4x4", "mi100x4", "mi210x4"}) {
    INFO(pcie4);
    CHECK(go::cluster_preset(pcie4).link_bandwidth(0, 3) == 25e9);
    CHECK(go::cluster_preset(pcie4).link_latency(0, 3) == 20e-6);
  }
  for (const char* pcie3 : {"v100-pcie-32gbx4", "p100-pcie-16gbx4", "p4x4", "t4x4"}) {
    INFO(pcie3);
    CHECK(go::cluster_preset(pcie3).link_bandwidth(3, 0) == 12e9);
  }
  CHECK(go::cluster_preset("l4x16").link_bandwidth(0, 8) == 12.5e9);
  CHECK(go::cluster_preset("t4x16").link_bandwidth(0, 8) == 12e9);
  // the original cluster presets are unchanged
  CHECK(go::cluster_preset("a100x16").link_bandwidth(0, 8) == 300e9);
  CHECK(go::cluster_preset("p100x4").link_bandwidth(0, 1) == 10e9);
  // a JSON cluster names the new types too
  const go::Cluster j = go::parse_cluster(R"({"devices": {"count": 2, "type": "t4"}, "links": {"bandwidth": 12e9}})", "t4.json");
  CHECK(j.spec(1).memory_bytes == 15LL << 30);
  CHECK_THROWS_WITH(go::cluster_preset("mi300x8"), Contains("unknown cluster preset 'mi300x8'") && Contains("a100-sxm4-40gb"));
  CHECK_THROWS_WITH(go::cluster_preset("t4x"), Contains("unknown cluster preset 't4x'"));
  CHECK_THROWS_WITH(go::cluster_preset("v100x4096"), Contains("unknown cluster preset 'v100x4096'") && Contains("count 1 to 1024"));
  CHECK(go::cluster_preset("v100x1024").num_devices() == 1024);
}

TEST_CASE("roofline cost source: measured times ignored, by hand", "[sim][presets]") {
  const go::OpGraph g = measured_mlp(true), bare = measured_mlp(false);
  REQUIRE(go::has_measured_times(g));
  REQUIRE_FALSE(go::has_measured_times(bare));
  const go::Cluster c = go::cluster_preset("v100x1");
  CHECK(step(g, c, {}, go::CostSource::measured) == Approx(0.6e-3));
  // V100: 15.7 TFLOP/s, matmul at 0.7 of it; 900 GB/s at 0.8; 5 us per launch.
  const double mm = 5e-6 + std::max(2e10 / (15.7e12 * 0.7), (4096.0 + 4096 + (1 << 20)) / (900e9 * 0.8));
  const double relu = 5e-6 + std::max(1024 / (15.7e12 * 0.25), (4096.0 + 4096) / (900e9 * 0.8));
  CHECK(mm == Approx(1.82484e-3).epsilon(1e-5));
  const double roof = step(g, c, {}, go::CostSource::roofline);
  CHECK(roof == Approx(mm + relu).epsilon(1e-12));
  CHECK(roof == step(bare, c, {}, go::CostSource::measured));
  CHECK(step(bare, c, {}, go::CostSource::roofline) == roof);
  CHECK(go::op_time(g.op(1), c.spec(0), go::CostSource::roofline) == go::op_time(bare.op(1), c.spec(0)));
  // a fusion group: one launch, the members' roofline compute, only the external traffic
  go::Plan fused;
  fused.device = {0, 0, 0};
  fused.fusion = {-1, 1, 1};
  const double f = step(g, c, fused, go::CostSource::roofline);
  CHECK(f == step(bare, c, fused, go::CostSource::measured));
  CHECK(f == Approx(5e-6 + 2e10 / (15.7e12 * 0.7) + 1024 / (15.7e12 * 0.25)).epsilon(1e-12));
  // only measured members: the matmul keeps its time less its launch; relu streams only what
  // leaves the group (its 4096-byte output of the 8192 bytes it moved alone) at its own measured
  // rate, 8192 bytes in 0.1 ms less a launch; plus the group's launch
  CHECK(step(g, c, fused, go::CostSource::measured) ==
        Approx(5e-6 + (0.5e-3 - 5e-6) + 4096 * (0.1e-3 - 5e-6) / 8192).epsilon(1e-12));
  // the stripped copy keeps everything else
  const go::OpGraph s = go::without_measured_times(g);
  REQUIRE(s.num_ops() == g.num_ops());
  for (go::OpId i = 0; i < g.num_ops(); ++i) {
    CHECK(s.name(i) == g.name(i));
    CHECK(s.op(i).flops == g.op(i).flops);
    CHECK(s.op(i).param_bytes == g.op(i).param_bytes);
    CHECK_FALSE(s.op(i).has_time());
  }
  CHECK(go::parse_cost_source("roofline") == go::CostSource::roofline);
  CHECK_THROWS_WITH(go::parse_cost_source("flops"), "unknown cost source 'flops' (known: measured, roofline)");
}

TEST_CASE("roofline cost source on a PipeDream profile: simulator and baselines", "[sim][presets]") {
  const fs::path file = kRealData / "msr-fiddle-pipedream" / "resnet18" / "graph.txt";
  if (!fs::exists(file)) {
    WARN("no " << file << ": skipped");
    return;
  }
  const go::OpGraph g = go::make_training_graph(go::load_graph(file.string()));
  const go::OpGraph bare = go::without_measured_times(g);
  REQUIRE(go::has_measured_times(g));
  const go::Cluster c = go::cluster_preset("v100x2");
  const double measured = step(g, c, {}, go::CostSource::measured);
  const double roof = step(g, c, {}, go::CostSource::roofline);
  CHECK(roof != Approx(measured).epsilon(0.01));
  CHECK(roof == step(bare, c, {}, go::CostSource::measured));
  for (const char* m : {"m-etf", "heft"}) {
    INFO(m);
    go::PlaceOptions po;
    po.sim.cost = go::CostSource::roofline;
    const go::PlaceResult r = go::place(m, g, c, po), b = go::place(m, bare, c);
    CHECK(r.plan.device == b.plan.device);
    CHECK(r.plan.priority == b.plan.priority);
    CHECK(r.step_time == b.step_time);
    CHECK(r.step_time == step(g, c, r.plan, go::CostSource::roofline));
  }
}

}  // namespace test_sim_presets
