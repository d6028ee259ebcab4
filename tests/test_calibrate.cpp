// Roofline calibration (go/sim/calibrate.hpp) on synthetic ops with known efficiencies, leave one
// GPU out on two synthetic devices, bad input; and `gopt calibrate` on the L4 NeuSight profiles.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibrate.hpp"
#include "simulate.hpp"
#include "cli_capture.hpp"
#include "go/core/file.hpp"
#include "go/sim/calibrate.hpp"
#include "go/sim/cluster.hpp"

namespace test_calibrate {
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

const std::string kL4 = std::string(GO_DATA_DIR) + "/real-data/neusight/label/NVIDIA_L4";

// Seconds an op takes under `d` (op_time of graph/cost.hpp).
double roofline(const go::DeviceSpec& d, go::OpKind k, double flops, double bytes) {
  go::CalibrationProfile p;
  p.ops = {{k, flops, bytes, 0, 1}};
  return go::calibration_e2e(d, p);
}

// Compute-bound matmuls, memory-bound adds and tiny adds (which pin the launch overhead) on `truth`.
std::vector<go::CalibrationSample> synthetic_ops(const go::DeviceSpec& truth) {
  std::vector<go::CalibrationSample> s;
  for (double f : {1e8, 1e9, 1e10}) s.push_back({go::OpKind::matmul, f, 1e6, roofline(truth, go::OpKind::matmul, f, 1e6), 4});
  // (adds of few FLOPs: FLOPs proportional to bytes would let a low compute efficiency mimic the
  // memory roof, and the data could not tell them apart)
  for (double b : {1e6, 1e7, 1e8}) s.push_back({go::OpKind::add, 10, b, roofline(truth, go::OpKind::add, 10, b), 4});
  s.push_back({go::OpKind::add, 10, 100, roofline(truth, go::OpKind::add, 10, 100), 8});
  return s;
}

go::test::CliResult run_gopt(const std::vector<std::string>& args) {
  return go::test::run_cli(
      [](CLI::App& app) {
        gopt::add_calibrate_command(app);
        gopt::add_simulate_command(app);
      },
      args);
}

std::string tmp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("go_calibrate_" + std::to_string(::getpid()) + "_" + name)).string();
}

}  // namespace

TEST_CASE("fit_device recovers the launch overhead and efficiencies that generated the times") {
  // peak 10 TFLOP/s, 1 TB/s. Truth: launch 8 us, bandwidth efficiency 0.6, matmul 0.5. So a
  // 1e10-FLOP matmul takes 8e-6 + 1e10 / (1e13 * 0.5) = 2.008 ms; a 1e8-byte add 8e-6 + 1e8 / 6e11
  // = 174.67 us; a 100-byte add 8e-6 + 100 / 6e11 s = 8.0002 us.
  go::DeviceSpec truth = go::DeviceSpec::make("v100", 16, 1000, 10000);
  truth.launch_overhead = 8e-6;
  truth.bandwidth_efficiency = 0.6;
  truth.compute_efficiency[go::op_kind_index(go::OpKind::matmul)] = 0.5;
  const auto ops = synthetic_ops(truth);
  CHECK(ops[2].time == Approx(2.008e-3));
  CHECK(ops[5].time == Approx(174.6667e-6));

  go::DeviceSpec base = go::DeviceSpec::make("v100", 16, 1000, 10000);  // preset efficiencies: 0.7, 0.8, 5 us
  const go::CalibrationFit fit = go::fit_device(base, ops);
  CHECK(fit.spec.launch_overhead == Approx(8e-6).epsilon(1e-3));
  CHECK(fit.spec.bandwidth_efficiency == Approx(0.6).epsilon(1e-3));
  CHECK(fit.spec.compute_efficiency[go::op_kind_index(go::OpKind::matmul)] == Approx(0.5).epsilon(1e-3));
  // adds are never compute-bound: their efficiency is unconstrained and keeps the preset's
  CHECK(fit.spec.compute_efficiency[go::op_kind_index(go::OpKind::add)] == Approx(0.25).epsilon(1e-2));
  CHECK(fit.spec.peak_flops == base.peak_flops);  // the datasheet numbers stay
  CHECK(fit.spec.mem_bandwidth == base.mem_bandwidth);
  CHECK(fit.samples[go::op_kind_index(go::OpKind::matmul)] == 12);
  CHECK(fit.samples[go::op_kind_index(go::OpKind::add)] == 20);
  CHECK(fit.rms_log_error < 1e-3);
  CHECK(fit.rms_log_error_preset > 0.1);
  for (const auto& s : ops) CHECK(roofline(fit.spec, s.kind, s.flops, s.bytes) == Approx(s.time).epsilon(2e-3));
}

TEST_CASE("fit_device: a kind that streams faster or slower than the rest gets its memory efficiency") {
  // Dropout moves a quarter of the bytes the roofline counts (memory efficiency 4), adds stream at
  // the device's 0.6: only the products bandwidth x memory efficiency are identifiable per kind,
  // 0.6 for add and 0.6 * 4 = 2.4 for dropout; a 1e8-byte dropout takes 8 us + 1e8 / 2.4e12 s = 49.67 us.
  go::DeviceSpec truth = go::DeviceSpec::make("v100", 16, 1000, 10000);
  truth.launch_overhead = 8e-6;
  truth.bandwidth_efficiency = 0.6;
  truth.memory_efficiency[go::op_kind_index(go::OpKind::dropout)] = 4;
  auto ops = synthetic_ops(truth);
  for (double b : {1e6, 1e7, 1e8}) ops.push_back({go::OpKind::dropout, 0, b, roofline(truth, go::OpKind::dropout, 0, b), 4});
  CHECK(ops.back().time == Approx(49.6667e-6));
  const go::DeviceSpec f = go::fit_device(go::DeviceSpec::make("v100", 16, 1000, 10000), ops).spec;
  const auto bw = [&](go::OpKind k) { return f.bandwidth_efficiency * f.memory_efficiency[go::op_kind_index(k)]; };
  CHECK(bw(go::OpKind::add) == Approx(0.6).epsilon(2e-3));
  CHECK(bw(go::OpKind::dropout) == Approx(2.4).epsilon(2e-3));
  CHECK(f.launch_overhead == Approx(8e-6).epsilon(2e-3));
}

TEST_CASE("refit_launch_to_e2e: the launch overhead that makes whole profiles match their end-to-end times") {
  // Two profiles on the truth (launch 8 us): 10 matmuls of 1e10 FLOPs (2 ms each at 0.5 of 10
  // TFLOP/s) + 100 adds of 1e6 bytes (1e6 / 8e11 = 1.25 us each at 0.8 of 1 TB/s): 10 * 2.008 ms +
  // 100 * 9.25 us = 21.005 ms; and the adds alone, 0.925 ms. From 30 us the refit returns to 8 us.
  go::DeviceSpec d = go::DeviceSpec::make("v100", 16, 1000, 10000);
  d.compute_efficiency[go::op_kind_index(go::OpKind::matmul)] = 0.5;
  d.launch_overhead = 8e-6;
  std::vector<go::CalibrationProfile> ps(2);
  ps[0].ops = {{go::OpKind::matmul, 1e10, 1e6, 0, 10}, {go::OpKind::add, 1e5, 1e6, 0, 100}};
  ps[1].ops = {{go::OpKind::add, 1e5, 1e6, 0, 100}};
  for (auto& p : ps) p.e2e = go::calibration_e2e(d, p);
  CHECK(ps[0].e2e == Approx(21.005e-3));
  CHECK(ps[1].e2e == Approx(0.925e-3));
  d.launch_overhead = 30e-6;
  const go::LaunchRefit r = go::refit_launch_to_e2e(d, ps);
  CHECK(d.launch_overhead == Approx(8e-6).epsilon(1e-4));
  CHECK(r.rms_log_error_before > 0.5);
  CHECK(r.rms_log_error < 1e-6);
}

TEST_CASE("leave one GPU out: the median of the other devices' fits, relative to their presets") {
  // v100 (preset matmul 0.7, bandwidth 0.8) measured at matmul 0.6, bandwidth 0.7, launch 6 us;
  // p100 (same preset efficiencies) at 0.5, 0.9, 10 us (matmul rises with the machine balance, 17.4
  // vs 12.7 FLOP/byte: no roofline effect, so no balance correction). Median of two = mean: a100 gets
  // matmul 0.7 * (0.6/0.7 + 0.5/0.7) / 2 = 0.55, bandwidth 0.8 * (0.7/0.8 + 0.9/0.8) / 2 = 0.8,
  // launch 8 us, with its own peak and bandwidth.
  go::DeviceSpec v = go::DeviceSpec::v100(), p = go::DeviceSpec::p100();
  v.launch_overhead = 6e-6, v.bandwidth_efficiency = 0.7, v.compute_efficiency[go::op_kind_index(go::OpKind::matmul)] = 0.6;
  p.launch_overhead = 10e-6, p.bandwidth_efficiency = 0.9, p.compute_efficiency[go::op_kind_index(go::OpKind::matmul)] = 0.5;
  std::vector<go::DeviceSpec> fitted{go::fit_device(go::DeviceSpec::v100(), synthetic_ops(v)).spec,
                                     go::fit_device(go::DeviceSpec::p100(), synthetic_ops(p)).spec};
  CHECK(fitted[1].launch_overhead == Approx(10e-6).epsilon(1e-3));
  const go::DeviceSpec a = go::transfer_calibration(go::DeviceSpec::a100(), fitted);
  CHECK(a.name == "a100");
  CHECK(a.peak_flops == go::DeviceSpec::a100().peak_flops);
  CHECK(a.mem_bandwidth == go::DeviceSpec::a100().mem_bandwidth);
  CHECK(a.launch_overhead == Approx(8e-6).epsilon(2e-3));
  CHECK(a.bandwidth_efficiency == Approx(0.8).epsilon(2e-3));
  CHECK(a.compute_efficiency[go::op_kind_index(go::OpKind::matmul)] == Approx(0.55).epsilon(2e-3));
  // AMD presets see the vector kinds at VEC / MM of the peak; a ratio of 0.5 on a v100's softmax
  // (0.125 of 0.25) gives the mi100 0.5 * 0.25 * 23100 / 46100.
  go::DeviceSpec half = go::DeviceSpec::v100();
  half.compute_efficiency[go::op_kind_index(go::OpKind::softmax)] = 0.125;
  const go::DeviceSpec mi = go::transfer_calibration(go::DeviceSpec::preset("mi100"), std::vector{half});
  CHECK(mi.compute_efficiency[go::op_kind_index(go::OpKind::softmax)] == Approx(0.5 * 0.25 * 23100 / 46100));
  CHECK(mi.compute_efficiency[go::op_kind_index(go::OpKind::matmul)] == Approx(0.7));
  // memory efficiencies transfer as ratios too, above 1 included
  half.memory_efficiency[go::op_kind_index(go::OpKind::dropout)] = 3;
  go::DeviceSpec other = go::DeviceSpec::p100();
  other.memory_efficiency[go::op_kind_index(go::OpKind::dropout)] = 5;
  CHECK(go::transfer_calibration(go::DeviceSpec::a100(), std::vector{half, other})
            .memory_efficiency[go::op_kind_index(go::OpKind::dropout)] == Approx(4));
}

TEST_CASE("leave one GPU out: GEMM efficiencies carried to the target's machine balance") {
  // Machine balance B = peak / bandwidth: p100 9.3e12 / 732e9, v100 15.7e12 / 900e9, l4
  // 31.334e12 / 300e9, a100 19.5e12 / 1555e9. Matmul ratios to the preset (0.7) on an exact power
  // law r = (B / B_p100)^-0.5: every device's ratio moved to the a100's balance is the same, so is
  // their median.
  const double bp = 9.3e12 / 732e9, bv = 15.7e12 / 900e9, bl = 31.334e12 / 300e9, ba = 19.5e12 / 1555e9;
  const std::size_t mm = go::op_kind_index(go::OpKind::matmul), sm = go::op_kind_index(go::OpKind::softmax);
  go::DeviceSpec p = go::DeviceSpec::p100(), v = go::DeviceSpec::v100(), l = go::DeviceSpec::preset("l4");
  v.compute_efficiency[mm] = 0.7 * std::pow(bv / bp, -0.5);
  l.compute_efficiency[mm] = 0.7 * std::pow(bl / bp, -0.5);
  // softmax is fitted on the memory roof: a plain median of 1, 0.5 and 2
  v.compute_efficiency[sm] = 0.125;
  l.compute_efficiency[sm] = 0.5;
  const go::DeviceSpec a = go::transfer_calibration(go::DeviceSpec::a100(), std::vector{p, v, l});
  CHECK(a.compute_efficiency[mm] == Approx(0.7 * std::pow(ba / bp, -0.5)).epsilon(1e-12));
  CHECK(a.compute_efficiency[mm] == Approx(0.70459).epsilon(1e-4));
  CHECK(a.compute_efficiency[sm] == Approx(0.25));
  // slopes beyond the roofline's are held at -1: v100 at ratio 1 and l4 at (bl / bv)^-2 (slope -2)
  // move to a100 as 1 * (ba / bv)^-1 and (bl / bv)^-2 * (ba / bl)^-1; the median of two is their mean
  v.compute_efficiency[mm] = 0.7;
  l.compute_efficiency[mm] = 0.7 * std::pow(bl / bv, -2.0);
  const double steep = (std::pow(ba / bv, -1.0) + std::pow(bl / bv, -2.0) * std::pow(ba / bl, -1.0)) / 2;
  CHECK(go::transfer_calibration(go::DeviceSpec::a100(), std::vector{v, l}).compute_efficiency[mm] ==
        Approx(0.7 * steep).epsilon(1e-12));
  // a rising slope (more efficient where the balance is higher) is no roofline effect: the median
  l.compute_efficiency[mm] = 0.7 * 0.9;
  v.compute_efficiency[mm] = 0.7 * 0.5;
  CHECK(go::transfer_calibration(go::DeviceSpec::a100(), std::vector{v, l}).compute_efficiency[mm] ==
        Approx(0.7 * 0.7).epsilon(1e-12));
}

TEST_CASE("calibration: bad input is a one-line error, and NeuSight GPU folders name presets") {
  const go::DeviceSpec base = go::DeviceSpec::v100();
  CHECK_THROWS_WITH(go::fit_device(base, std::vector<go::CalibrationSample>{}), Contains("no measured op times"));
  CHECK_THROWS_WITH(go::fit_device(base, std::vector<go::CalibrationSample>{{go::OpKind::add, 1, 1, 0.0, 1}}),
                    Contains("invalid time 0"));
  CHECK_THROWS_WITH(go::fit_device(base, std::vector<go::CalibrationSample>{{go::OpKind::add, -1, 1, 1e-5, 1}}),
                    Contains("invalid flops"));
  CHECK_THROWS_WITH(go::fit_device(base, std::vector<go::CalibrationSample>{{go::OpKind::reshape, 0, 0, 1e-5, 1}}),
                    Contains("roofline costs it 0"));
  CHECK_THROWS_WITH(go::transfer_calibration(base, std::vector<go::DeviceSpec>{}), Contains("no fitted devices"));
  CHECK(go::neusight_gpu_preset("NVIDIA_L4") == "l4");
  CHECK(go::neusight_gpu_preset("NVIDIA_A100_80GB_PCIe") == "a100-80gb-pcie");
  CHECK(go::neusight_gpu_preset("NVIDIA_A100-SXM4-40GB") == "a100-sxm4-40gb");
  CHECK(go::neusight_gpu_preset("Tesla_V100-PCIE-32GB") == "v100-pcie-32gb");
  CHECK(go::neusight_gpu_preset("AMD_Instinct_MI250") == "mi250");
  CHECK_FALSE(go::neusight_gpu_preset("label").has_value());
  // the calibrated device JSON is a go-cluster file every command reads back to the same device
  go::DeviceSpec d = go::DeviceSpec::preset("l4");
  d.launch_overhead = 7e-6;
  d.compute_efficiency[go::op_kind_index(go::OpKind::gelu)] = 0.123;
  const go::Cluster c = go::parse_cluster(go::calibrated_device_json(d).dump(), "x.json");
  REQUIRE(c.num_devices() == 1);
  CHECK(c.spec(0).name == "l4");
  CHECK(c.spec(0).launch_overhead == 7e-6);
  CHECK(c.spec(0).compute_efficiency == d.compute_efficiency);
  d.memory_efficiency[go::op_kind_index(go::OpKind::dropout)] = 0;
  CHECK_THROWS_WITH(go::parse_cluster(go::calibrated_device_json(d).dump(), "x.json"),
                    Contains("x.json: device 0 ('gpu0') has invalid memory_efficiency 0 for dropout"));
}

TEST_CASE("gopt calibrate on the L4 profiles: device JSON, cluster JSON, leave-out and transfer, errors") {
  const std::string out = tmp_path("l4.json"), cl = tmp_path("l4x2.json"), t4 = tmp_path("t4.json");
  const auto r = run_gopt({"calibrate", "--profiles", kL4, "--device", "l4", "--out", out, "--cluster-out", cl, "--count", "2"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("fit (4 files)"));
  const nlohmann::json j = nlohmann::json::parse(go::read_file(out));
  CHECK(j["calibration"]["method"] == "fit");
  CHECK(j["calibration"]["fits"][0]["profiles"] == 4);
  const nlohmann::json& fit = j["calibration"]["fits"][0];
  CHECK(fit["rms_log_error"].get<double>() < fit["rms_log_error_preset"].get<double>());
  CHECK(fit["e2e_profiles"] == 4);  // every L4 file has its sibling .json
  CHECK(fit["e2e_rms_log_error"].get<double>() <= fit["e2e_rms_log_error_before"].get<double>());
  const go::Cluster one = go::load_cluster(out), two = go::load_cluster(cl);
  CHECK(one.num_devices() == 1);
  REQUIRE(two.num_devices() == 2);
  CHECK(two.spec(1).compute_efficiency == one.spec(0).compute_efficiency);
  CHECK(two.link_bandwidth(0, 1) == go::cluster_preset("l4x2").link_bandwidth(0, 1));
  const double matmul = one.spec(0).compute_efficiency[go::op_kind_index(go::OpKind::matmul)];
  CHECK(matmul > 0.05);
  CHECK(matmul <= 1.0);
  // the calibrated roofline runs in simulate (measured times ignored)
  const auto sim = run_gopt({"simulate", kL4 + "/bert_large-inf-512-8.csv", "--cluster", out, "--cost", "roofline", "--json"});
  REQUIRE(sim.code == 0);
  CHECK(nlohmann::json::parse(sim.out)["step_time_ms"].get<double>() > 0);

  // another GPU from the L4 fit: the L4 ratios on the T4's own peak and bandwidth
  const auto tr = run_gopt({"calibrate", "--fitted", out, "--device", "t4", "--leave-out", "--out", t4, "--json"});
  INFO(tr.err);
  REQUIRE(tr.code == 0);
  const go::Cluster t = go::load_cluster(t4);
  CHECK(t.spec(0).name == "t4");
  CHECK(t.spec(0).peak_flops == go::DeviceSpec::preset("t4").peak_flops);
  CHECK(t.spec(0).launch_overhead == Approx(one.spec(0).launch_overhead));
  CHECK(nlohmann::json::parse(tr.out)["calibration"]["method"] == "leave-one-out");

  const auto left = run_gopt({"calibrate", "--profiles", kL4, "--device", "l4", "--leave-out", "--out", t4});
  CHECK(left.code != 0);
  CHECK_THAT(left.err, Contains("gopt calibrate: no profiles or fitted devices to calibrate l4"));
  const auto self = run_gopt({"calibrate", "--fitted", out, "--device", "l4", "--leave-out", "--out", t4});
  CHECK_THAT(self.err, Contains(out + ": a fit of l4 itself"));
  const auto missing = run_gopt({"calibrate", "--profiles", kL4 + "/nonesuch.csv", "--device", "l4", "--out", t4});
  CHECK(missing.code != 0);
  CHECK_THAT(missing.err, Contains("nonesuch.csv: no such file or folder"));
  const auto bad_dev = run_gopt({"calibrate", "--profiles", kL4, "--device", "h200", "--out", t4});
  CHECK_THAT(bad_dev.err, Contains("unknown device preset 'h200'"));
  const std::string broken = tmp_path("broken.csv");
  go::write_file_atomic(broken, "op,target\nplaceholder,x\n");
  const auto bad_csv = run_gopt({"calibrate", "--profiles", broken, "--device", "l4", "--out", t4});
  CHECK(bad_csv.code != 0);
  CHECK_THAT(bad_csv.err, Contains(broken));
  CHECK(std::count(bad_csv.err.begin(), bad_csv.err.end(), '\n') == 1);
  for (const char* option : {"--cluster-out", "--fitted", "--profiles"}) {
    const auto empty = run_gopt({"calibrate", "--profiles", kL4, "--device", "l4", "--out", t4, option, ""});
    INFO(option);
    CHECK(empty.code != 0);
    CHECK_THAT(empty.err, Contains(std::string(option) + ": must name a file, got an empty string"));
  }
  for (const auto& p : {out, cl, t4, broken}) fs::remove(p);
}

}  // namespace test_calibrate
