// gopt calibrate: fit a device's roofline to measured profiles, or transfer fits of other devices
// to it (leave one GPU out); writes go-cluster JSON (include/go/sim/calibrate.hpp).
#include "calibrate.hpp"
#include "format.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "go/core/error.hpp"
#include "go/core/file.hpp"
#include "go/sim/calibrate.hpp"
#include "go/sim/cluster.hpp"

namespace gopt {
namespace {

struct CalibrateOptions {
  std::vector<std::string> profiles;
  std::vector<std::string> fitted;
  std::string device;
  std::string out;
  std::string cluster_out;
  int count = 1;
  bool leave_out = false;
  bool json = false;
};

// The CSV files named or found (recursively, sorted) under the named folders.
std::vector<std::filesystem::path> profile_files(const std::vector<std::string>& args) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (const std::string& a : args) {
    std::error_code ec;
    if (fs::is_directory(a, ec)) {
      std::vector<fs::path> found;
      for (const auto& e : fs::recursive_directory_iterator(a, ec))
        if (e.is_regular_file() && e.path().extension() == ".csv") found.push_back(e.path());
      GO_CHECK(!ec, a, ": cannot list the folder: ", ec.message());
      GO_CHECK(!found.empty(), a, ": no .csv profiles in the folder");
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else {
      GO_CHECK(fs::is_regular_file(a, ec), a, ": no such file or folder");
      files.emplace_back(a);
    }
  }
  return files;
}

nlohmann::json fit_record(const go::CalibrationFit& f, std::int32_t profiles, double free_time) {
  nlohmann::json j;
  j["device"] = f.spec.name;
  j["profiles"] = profiles;
  std::int64_t ops = 0;
  for (auto n : f.samples) ops += n;
  j["ops"] = ops;
  j["fitted_time_s"] = f.fitted_time;
  j["free_time_s"] = free_time;
  j["rms_log_error"] = f.rms_log_error;
  j["rms_log_error_preset"] = f.rms_log_error_preset;
  j["launch_overhead"] = f.spec.launch_overhead;
  j["bandwidth_efficiency"] = f.spec.bandwidth_efficiency;
  nlohmann::json ce = nlohmann::json::object();
  for (std::size_t k = 0; k < go::kNumOpKinds; ++k)
    if (f.samples[k] > 0) ce[std::string(go::kOpKindNames[k])] = f.spec.compute_efficiency[k];
  j["compute_efficiency"] = std::move(ce);  // the kinds that had measured ops
  nlohmann::json me = nlohmann::json::object();
  for (std::size_t k = 0; k < go::kNumOpKinds; ++k)
    if (f.samples[k] > 0) me[std::string(go::kOpKindNames[k])] = f.spec.memory_efficiency[k];
  j["memory_efficiency"] = std::move(me);
  return j;
}

void print_spec_line(const char* what, const go::DeviceSpec& s) {
  const auto m = [&](go::OpKind k) { return s.memory_efficiency[go::op_kind_index(k)]; };
  std::printf("%-16s %-15s launch %6.2f us  bw eff %.3f  matmul %.3f of peak  memory x softmax %.2f  layer_norm %.2f  dropout %.2f\n",
              what, printable(s.name).c_str(), s.launch_overhead * 1e6, s.bandwidth_efficiency,
              s.compute_efficiency[go::op_kind_index(go::OpKind::matmul)], m(go::OpKind::softmax), m(go::OpKind::layer_norm),
              m(go::OpKind::dropout));
}

void run_calibrate(const CalibrateOptions& o) {
  GO_CHECK(o.count >= 1 && o.count <= go::kMaxPresetDevices, "--count must be 1 to ", go::kMaxPresetDevices, ", got ",
           o.count);
  const go::DeviceSpec target = go::DeviceSpec::preset(o.device);
  // made first, so that a --cluster-out that cannot be made fails before --out is written
  std::optional<go::Cluster> cluster;
  if (!o.cluster_out.empty()) cluster = go::cluster_preset(o.device + "x" + std::to_string(o.count));
  // Profiles by device: the NeuSight GPU folder's preset, else the target's.
  std::map<std::string, go::CalibrationData> data;
  for (const auto& f : profile_files(o.profiles)) {
    const std::string dev = go::neusight_gpu_preset(f.parent_path().filename().string()).value_or(target.name);
    if (o.leave_out && dev == target.name) continue;
    go::add_calibration_samples(go::load_profile_graph(f.string()), data[dev], go::neusight_e2e_seconds(f.string()));
  }
  const bool direct = data.count(target.name) > 0;
  nlohmann::json record;
  record["method"] = direct ? "fit" : "leave-one-out";
  record["fits"] = nlohmann::json::array();
  go::DeviceSpec result;
  std::vector<go::DeviceSpec> pool;
  if (!o.json) std::printf("%-16s %-15s %s\n", "", "device", "roofline (bandwidth efficiency x memory efficiency per kind)");
  for (const auto& [dev, d] : data) {
    if (direct && dev != target.name) continue;  // a direct fit uses the device's own profiles only
    go::CalibrationFit fit = go::fit_device(go::DeviceSpec::preset(dev), d.samples, {}, "calibrate: " + dev + ": ");
    const double per_op_launch = fit.spec.launch_overhead;
    const go::LaunchRefit lr = go::refit_launch_to_e2e(fit.spec, d.e2e);
    nlohmann::json rec = fit_record(fit, d.profiles, d.free_time);
    rec["e2e_profiles"] = d.e2e.size();
    if (!d.e2e.empty()) {
      rec["launch_overhead_per_op_fit"] = per_op_launch;
      rec["e2e_rms_log_error_before"] = lr.rms_log_error_before;
      rec["e2e_rms_log_error"] = lr.rms_log_error;
    }
    record["fits"].push_back(std::move(rec));
    if (!o.json) {
      print_spec_line(("fit (" + std::to_string(d.profiles) + " files)").c_str(), fit.spec);
      std::printf("%-16s %-15s per op: rms log error %.3f (preset %.3f); %.1f%% of the measured time is in views the roofline costs 0\n",
                  "", "", fit.rms_log_error, fit.rms_log_error_preset,
                  d.measured_time > 0 ? 100 * d.free_time / d.measured_time : 0.0);
      if (!d.e2e.empty())
        std::printf("%-16s %-15s end to end (%zu files): launch %.2f -> %.2f us, rms log error %.3f -> %.3f\n", "", "",
                    d.e2e.size(), per_op_launch * 1e6, fit.spec.launch_overhead * 1e6, lr.rms_log_error_before,
                    lr.rms_log_error);
    }
    if (direct) result = fit.spec;
    else pool.push_back(fit.spec);
  }
  if (!direct) {
    for (const std::string& path : o.fitted) {
      const go::Cluster c = go::load_cluster(path);
      const go::DeviceSpec& s = c.spec(0);
      GO_CHECK(s.name != target.name || !o.leave_out, path, ": a fit of ", s.name, " itself, which --leave-out excludes");
      try {
        (void)go::DeviceSpec::preset(s.name);
      } catch (const go::Error& e) {
        GO_FAIL(path, ": ", e.what());
      }
      pool.push_back(s);
      record["fits"].push_back({{"device", s.name}, {"file", path}});
      if (!o.json) print_spec_line("fitted (file)", s);
    }
    GO_CHECK(!pool.empty(), "no profiles or fitted devices to calibrate ", target.name, " from",
             o.leave_out ? " (--leave-out ignores its own profiles)" : "");
    result = go::transfer_calibration(target, pool);
  }
  if (!o.json) print_spec_line(direct ? "calibrated" : "transferred", result);
  const nlohmann::json dev_json = go::calibrated_device_json(result, {{"calibration", record}});
  (void)go::parse_cluster(dev_json.dump(), o.out);  // what we write, the readers accept
  go::write_file_atomic(o.out, dev_json.dump(1) + "\n");
  if (cluster) {
    go::Cluster& c = *cluster;
    for (auto& d : c.devices) d.spec = result;
    c.name += "-calibrated";
    go::save_cluster(c, o.cluster_out);
  }
  if (o.json) {
    nlohmann::json j = dev_json;
    j["out"] = o.out;
    if (!o.cluster_out.empty()) j["cluster_out"] = o.cluster_out;
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::printf("wrote        %s%s%s\n", printable(o.out).c_str(), o.cluster_out.empty() ? "" : ", ",
              printable(o.cluster_out).c_str());
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto opts = std::make_shared<CalibrateOptions>();
  std::string devices;
  for (const auto& d : go::DeviceSpec::preset_names()) devices += (devices.empty() ? "" : ", ") + d;
  CLI::App* cmd = app.add_subcommand(
      "calibrate", "Fit a device's roofline (launch overhead, efficiencies per op kind) to measured profiles; write go-cluster JSON");
  cmd->add_option("--profiles", opts->profiles,
                  "profiles with measured op times (NeuSight CSVs, PipeDream, ...) or folders of .csv files; a NeuSight "
                  "label/<GPU>/ folder names the profile's device, other files are --device's")->check(path_given());
  cmd->add_option("--fitted", opts->fitted, "devices fitted earlier (the --out of gopt calibrate) to pool for a device without profiles")->check(path_given());
  cmd->add_option("--device", opts->device, "the device preset to calibrate (" + devices + ")")->required();
  cmd->add_option("--out", opts->out, "write the calibrated device as a one-device go-cluster JSON")->check(path_given())->required();
  cmd->add_option("--cluster-out", opts->cluster_out, "also write the <device>x<count> preset cluster with calibrated devices")->check(path_given());
  cmd->add_option("--count", opts->count, "devices in --cluster-out, 1 to " + std::to_string(go::kMaxPresetDevices) + " (default 1)")
      ->check(count_at_least(1));
  cmd->add_flag("--leave-out", opts->leave_out,
                "ignore --device's own profiles: calibrate it from the other devices' fits (leave one GPU out)");
  cmd->add_flag("--json", opts->json, "print the written JSON instead of text");
  cmd->callback([opts]() { run_command("calibrate", [&] { run_calibrate(*opts); }); });
}

}  // namespace gopt
