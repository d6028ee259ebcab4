#pragma once
// Calibration of the roofline cost model (graph/cost.hpp op_time) to measured op times:
//   time(op) = launch_overhead + max(flops / (peak_flops * compute_efficiency[kind]),
//                                    bytes / (mem_bandwidth * bandwidth_efficiency * memory_efficiency[kind]))
// fit_device fits launch_overhead, bandwidth_efficiency and one efficiency per op kind, on the roof
// that kind is bound by (compute_efficiency for conv, matmul and rnn, memory_efficiency for the
// rest: calib_compute_kind), of ONE device to the ops of its profiles that have a measured time
// (forward times, and in training graphs the gradient ops' measured backward times); peak_flops and
// mem_bandwidth stay the preset's datasheet numbers. Fused groups in the simulator stream at
// bandwidth_efficiency alone (their traffic is not split by kind).
//
// THE FIT. Minimise sum_i t_i * (log pred_i - log t_i)^2 over the parameters' logs, by cyclic
// coordinate descent (a log-spaced grid scan, then golden-section refinement, per parameter), in
// two stages: launch, bandwidth and GEMM compute efficiencies first (memory efficiencies at 1), so
// that bandwidth_efficiency is the device's common streaming rate, then with memory efficiencies too,
// which take what a non-GEMM kind deviates from it (the two are one product per kind otherwise).
//   - log residuals: an op's error counts relative to its size, so a 10 ms GEMM and a 10 us add
//     are judged alike per op, and the fit is scale-free across devices;
//   - weight t_i (the measured time): the whole-model time is the sum of op times, so ops count as
//     much as they contribute to it (thousands of tiny elementwise ops cannot outvote the GEMMs);
//   - the grid scan: the max() makes each 1-D slice piecewise, not unimodal;
//   - a weak prior (CalibrationOptions::prior_weight of the total weight, in log space) toward
//     the preset's value: a parameter the data do not constrain keeps the preset's.
// Then, where the profiles come with measured end-to-end times, refit_launch_to_e2e re-fits the
// launch overhead alone so that the whole profiles, composed, match them (see there why).
// Ops the roofline gives no time (inputs, constants, views: is_free_op) cannot be fitted; their
// measured time is reported as `free_time`.
//
// LEAVE ONE GPU OUT. A GPU without measurements takes what transfers across devices: each fitted
// efficiency as a multiple of its preset's (compute, memory and bandwidth efficiency / the preset's
// value; the AMD presets scale the vector kinds by VEC/MM peak, so a ratio to the preset carries
// the right peak) and the launch overhead in seconds, each the median over the fitted devices,
// applied to the target preset's own peak and bandwidth (transfer_calibration). The compute
// efficiencies of the GEMM kinds are first carried to the target's machine balance (peak FLOP/s /
// bandwidth) by a power law fitted across the devices: on a device with more FLOP/s per byte more
// of a model's GEMMs (skinny attention products, small batches) are held back by memory and
// latency, so they reach less of the peak (fitted matmul efficiency on NeuSight's GPUs: 0.85-0.90
// on A100 / V100 at 10-16 FLOP/byte, 0.41 on the L4 at 104).
//
// NeuSight profiles: `label/<GPU>/<model>-<inf|train>-<seq>-<batch>.csv`; the GPU folder names the
// device (neusight_gpu_preset: NVIDIA_L4 -> l4, Tesla_V100-PCIE-32GB -> v100-pcie-32gb, ...).
#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "go/core/error.hpp"
#include "go/core/file.hpp"
#include "go/graph/cost.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/load.hpp"
#include "go/graph/op_kind.hpp"
#include "go/graph/training.hpp"
#include "go/sim/cluster.hpp"

namespace go {

// One measured op: what the roofline sees of it, and its time. `weight` counts identical ops
// (a transformer layer repeated num_layer times gives each of its ops num_layer copies).
struct CalibrationSample {
  OpKind kind = OpKind::other;
  double flops = 0;
  double bytes = 0;    // input + output + parameter bytes, as op_time counts them
  double time = 0;     // seconds, > 0
  double weight = 1;
};

// A whole profile as the simulator runs it on one device (every op the roofline costs, measured or
// not: a one-device step is their sum) and its measured end-to-end time.
struct CalibrationProfile {
  std::vector<CalibrationSample> ops;  // `time` unused
  double e2e = 0;                      // seconds
};

struct CalibrationData {
  std::vector<CalibrationSample> samples;
  std::vector<CalibrationProfile> e2e;  // profiles with a measured end-to-end time
  double measured_time = 0;  // seconds: every measured op time, the free ops' included
  double free_time = 0;      // seconds measured in ops the roofline costs 0 (is_free_op)
  std::int32_t profiles = 0;
};

// Adds the ops of `g` that have a measured time, and with `e2e_seconds` > 0 the whole graph as an
// end-to-end measurement. Identical samples are merged by fit_device.
inline void add_calibration_samples(const OpGraph& g, CalibrationData& d, double e2e_seconds = 0) {
  if (e2e_seconds > 0) {
    CalibrationProfile p{{}, e2e_seconds};
    for (const Op& o : g.ops())
      if (!is_free_op(o.kind))
        p.ops.push_back({o.kind, o.flops, static_cast<double>(o.input_bytes + o.output_bytes + o.param_bytes), 0, 1});
    d.e2e.push_back(std::move(p));
  }
  for (const Op& o : g.ops()) {
    if (!o.has_time()) continue;
    d.measured_time += o.time;
    if (is_free_op(o.kind)) {
      d.free_time += o.time;
      continue;
    }
    if (!(o.time > 0)) continue;  // a 0 ms record is below the profiler's resolution, not a time
    d.samples.push_back({o.kind, o.flops, static_cast<double>(o.input_bytes + o.output_bytes + o.param_bytes), o.time, 1});
  }
  ++d.profiles;
}

// A profile as the simulator runs it: a graph with measured backward times (a training profile)
// is expanded to its training graph, so the gradient ops' measured times are fitted too.
inline OpGraph load_profile_graph(const std::string& path) {
  OpGraph g = load_graph(path);
  for (const Op& o : g.ops())
    if (o.has_backward_time()) return make_training_graph(g);
  return g;
}

// The measured end-to-end seconds of a NeuSight profile: "e2e_latency" (ms; forward + backward for
// training) of the sibling `<same name>.json`; 0 when there is none, or when the profile is itself
// that .json (a go-graph file, which has no sibling of that kind).
inline double neusight_e2e_seconds(const std::string& csv_path) {
  std::filesystem::path j = csv_path;
  if (j.extension() == ".json") return 0;
  j.replace_extension(".json");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(j, ec)) return 0;
  const std::string src = j.string();
  nlohmann::json v;
  try {
    v = nlohmann::json::parse(read_file(src));
  } catch (const nlohmann::json::exception& e) {
    GO_FAIL(src, ": invalid JSON: ", e.what());
  }
  auto it = v.find("e2e_latency");
  if (!v.is_object() || it == v.end()) return 0;
  GO_CHECK(it->is_number() && std::isfinite(it->get<double>()) && it->get<double>() > 0, src,
           ": \"e2e_latency\" must be a positive number of ms");
  return it->get<double>() * 1e-3;
}

// NeuSight's GPU folder name -> DeviceSpec preset (NVIDIA_A100_80GB_PCIe -> a100-80gb-pcie); the
// name lowercased, without its vendor prefix, '_' as '-'. nullopt when that is no preset.
inline std::optional<std::string> neusight_gpu_preset(std::string_view folder) {
  std::string s;
  for (char c : folder) s.push_back(c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  for (std::string_view p : {"nvidia-", "tesla-", "amd-instinct-"})
    if (s.starts_with(p)) {
      s = s.substr(p.size());
      break;
    }
  const auto names = DeviceSpec::preset_names();
  if (std::find(names.begin(), names.end(), s) == names.end()) return std::nullopt;
  return s;
}

struct CalibrationOptions {
  std::int32_t rounds = 40;        // coordinate-descent sweeps (it stops earlier once converged)
  std::int32_t grid = 48;          // log-spaced points per parameter scan
  double prior_weight = 1e-6;      // of the total weight: pull toward the preset's value
  double min_launch = 1e-7, max_launch = 1e-3;   // seconds
  double min_efficiency = 1e-4;    // compute and bandwidth efficiencies are fitted in [min_efficiency, 1]
  double max_memory_efficiency = 1e3;  // memory efficiencies in [1 / max, max]
};

struct CalibrationFit {
  DeviceSpec spec;                                 // the base preset with the fitted fields
  std::array<std::int64_t, kNumOpKinds> samples{}; // measured ops per kind (weights summed)
  double rms_log_error = 0;                        // time-weighted, of the fitted model
  double rms_log_error_preset = 0;                 // the same for the preset, for comparison
  double fitted_time = 0;                          // seconds in the fitted ops
};

namespace detail {

struct CalibSample {
  std::size_t kind;
  double flops, bytes, time, log_time, weight;
};

// Merges identical samples (kind, flops, bytes, time) into one with their weight summed.
inline std::vector<CalibSample> calib_merge(std::span<const CalibrationSample> in, const std::string& where) {
  std::map<std::tuple<std::size_t, double, double, double>, double> m;
  for (const CalibrationSample& s : in) {
    GO_CHECK(std::isfinite(s.time) && s.time > 0, where, "a sample of kind ", op_kind_name(s.kind),
             " has invalid time ", s.time, " (need a positive number of seconds)");
    GO_CHECK(std::isfinite(s.flops) && s.flops >= 0 && std::isfinite(s.bytes) && s.bytes >= 0, where, "a sample of kind ",
             op_kind_name(s.kind), " has invalid flops ", s.flops, " or bytes ", s.bytes);
    GO_CHECK(std::isfinite(s.weight) && s.weight > 0, where, "a sample has invalid weight ", s.weight);
    GO_CHECK(!is_free_op(s.kind), where, "a sample of kind ", op_kind_name(s.kind), " (the roofline costs it 0)");
    m[{op_kind_index(s.kind), s.flops, s.bytes, s.time}] += s.weight;
  }
  std::vector<CalibSample> out;
  out.reserve(m.size());
  for (const auto& [k, w] : m) {
    const auto& [kind, flops, bytes, time] = k;
    out.push_back({kind, flops, bytes, time, std::log(time), w});
  }
  return out;
}

// Parameters in log space: [0] launch, [1] bandwidth efficiency, [2 + k] compute efficiency of kind k,
// [2 + K + k] memory efficiency of kind k.
struct CalibModel {
  double peak, bw;
  std::vector<double> x;  // logs

  double predict(const CalibSample& s) const {
    const double compute = s.flops / (peak * std::exp(x[2 + s.kind]));
    const double memory = s.bytes / (bw * std::exp(x[1] + x[2 + kNumOpKinds + s.kind]));
    return std::exp(x[0]) + std::max(compute, memory);
  }
};

// Kinds fitted on the compute roof: the GEMM-like ones; every other kind on the memory roof. Fitting
// both roofs of a kind lets either mimic the other (an elementwise kind's FLOPs grow with its bytes;
// a GEMM's small shapes are slow either way): the data cannot tell them apart, and devices fitted
// one way or the other would not pool. The roof not fitted keeps the preset's value.
inline bool calib_compute_kind(std::size_t k) {
  const auto kind = static_cast<OpKind>(k);
  return kind == OpKind::conv || kind == OpKind::matmul || kind == OpKind::rnn;
}

// argmin of f on [lo, hi], starting from x0: a grid scan of `grid` points (the objectives are
// piecewise: max() of two roofs), then golden-section refinement on the best point's grid cell.
template <class F>
double calib_line_search(F&& f, double x0, double lo, double hi, std::int32_t grid) {
  double best_v = x0, best = f(x0);
  const double step = (hi - lo) / (grid - 1);
  for (std::int32_t g = 0; g < grid; ++g) {
    const double v = lo + step * g, e = f(v);
    if (e < best) best = e, best_v = v;
  }
  double a = std::max(lo, best_v - step), b = std::min(hi, best_v + step);
  const double phi = (std::sqrt(5.0) - 1) / 2;
  double c = b - phi * (b - a), d = a + phi * (b - a), fc = f(c), fd = f(d);
  for (int it = 0; it < 60 && b - a > 1e-10; ++it) {
    if (fc < fd) b = d, d = c, fd = fc, c = b - phi * (b - a), fc = f(c);
    else a = c, c = d, fc = fd, d = a + phi * (b - a), fd = f(d);
  }
  const double v = (a + b) / 2;
  if (f(v) < best) best_v = v;
  return best_v;
}

}  // namespace detail

// Fits `base` (a preset: its peak and bandwidth are kept) to measured ops; see the top of the file.
// Throws go::Error (prefixed with `where`) when there is nothing to fit or a sample is invalid.
inline CalibrationFit fit_device(const DeviceSpec& base, std::span<const CalibrationSample> samples,
                                 const CalibrationOptions& opt = {}, const std::string& where = "calibrate: ") {
  const std::vector<detail::CalibSample> s = detail::calib_merge(samples, where);
  GO_CHECK(!s.empty(), where, "no measured op times to fit ", base.name, " to (every op free or unmeasured)");
  CalibrationFit fit;
  double total_w = 0;
  for (const auto& c : s) {
    total_w += c.weight * c.time;
    fit.samples[c.kind] += static_cast<std::int64_t>(c.weight);
    fit.fitted_time += c.weight * c.time;
  }
  detail::CalibModel m{base.peak_flops, base.mem_bandwidth, {}};
  const std::size_t np = 2 + 2 * kNumOpKinds;
  std::vector<double> prior(np), lo(np), hi(np);
  prior[0] = std::log(std::clamp(base.launch_overhead, opt.min_launch, opt.max_launch));
  prior[1] = std::log(base.bandwidth_efficiency);
  for (std::size_t k = 0; k < kNumOpKinds; ++k) {
    prior[2 + k] = std::log(base.compute_efficiency[k]);
    prior[2 + kNumOpKinds + k] = std::log(base.memory_efficiency[k]);
  }
  lo[0] = std::log(opt.min_launch);
  hi[0] = std::log(opt.max_launch);
  for (std::size_t p = 1; p < 2 + kNumOpKinds; ++p) {
    lo[p] = std::log(opt.min_efficiency);
    hi[p] = 0.0;
  }
  for (std::size_t p = 2 + kNumOpKinds; p < np; ++p) {
    lo[p] = -std::log(opt.max_memory_efficiency);
    hi[p] = std::log(opt.max_memory_efficiency);
  }
  m.x = prior;
  // Samples per kind, so a compute-efficiency step only re-evaluates its own kind's ops.
  std::vector<std::vector<std::size_t>> by_kind(kNumOpKinds);
  for (std::size_t i = 0; i < s.size(); ++i) by_kind[s[i].kind].push_back(i);
  std::vector<std::size_t> all(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) all[i] = i;
  const double lambda = opt.prior_weight * total_w;
  auto objective = [&](std::size_t p, const std::vector<std::size_t>& idx) {
    double e = 0;
    for (std::size_t i : idx) {
      const double r = std::log(m.predict(s[i])) - s[i].log_time;
      e += s[i].weight * s[i].time * r * r;
    }
    const double d = m.x[p] - prior[p];
    return e + lambda * d * d;
  };
  auto minimise = [&](std::size_t p, const std::vector<std::size_t>& idx) {
    const double x0 = m.x[p];
    m.x[p] = detail::calib_line_search(
        [&](double v) {
          m.x[p] = v;
          return objective(p, idx);
        },
        x0, lo[p], hi[p], opt.grid);
    return std::fabs(m.x[p] - x0);
  };
  for (bool memory : {false, true})
    for (std::int32_t r = 0; r < opt.rounds; ++r) {
      double moved = minimise(0, all) + (memory ? 0.0 : minimise(1, all));
      for (std::size_t k = 0; k < kNumOpKinds; ++k)
        if (!by_kind[k].empty()) {
          if (detail::calib_compute_kind(k)) moved += minimise(2 + k, by_kind[k]);
          else if (memory) moved += minimise(2 + kNumOpKinds + k, by_kind[k]);
        }
      if (moved < 1e-9) break;
    }
  auto rms = [&](const detail::CalibModel& mm) {
    double e = 0;
    for (const auto& c : s) {
      const double r = std::log(mm.predict(c)) - c.log_time;
      e += c.weight * c.time * r * r;
    }
    return std::sqrt(e / total_w);
  };
  fit.rms_log_error = rms(m);
  fit.rms_log_error_preset = rms(detail::CalibModel{base.peak_flops, base.mem_bandwidth, prior});
  fit.spec = base;
  fit.spec.launch_overhead = std::exp(m.x[0]);
  fit.spec.bandwidth_efficiency = std::min(1.0, std::exp(m.x[1]));
  for (std::size_t k = 0; k < kNumOpKinds; ++k) {
    fit.spec.compute_efficiency[k] = std::min(1.0, std::exp(m.x[2 + k]));
    fit.spec.memory_efficiency[k] = std::exp(m.x[2 + kNumOpKinds + k]);
  }
  return fit;
}

// Seconds a one-device step of `p` takes under `spec`: the sum of its ops' roofline times.
inline double calibration_e2e(const DeviceSpec& spec, const CalibrationProfile& p) {
  double t = 0;
  for (const CalibrationSample& o : p.ops) t += o.weight * (spec.launch_overhead + std::max(
      o.flops / (spec.peak_flops * spec.compute_efficiency[op_kind_index(o.kind)]),
      o.bytes / (spec.mem_bandwidth * spec.bandwidth_efficiency * spec.memory_efficiency[op_kind_index(o.kind)])));
  return t;
}

struct LaunchRefit {
  double rms_log_error_before = 0, rms_log_error = 0;  // over the profiles' end-to-end times
};

// Re-fits spec.launch_overhead so that whole profiles composed by the roofline match their measured
// end-to-end times (least squares in log space, one term per profile). Why: a profiler that times
// each op alone (NeuSight) adds its own floor to every op (10-40 us on these GPUs), while in a whole
// run the host launches ahead and that floor mostly overlaps the kernels; the launch overhead is the
// one parameter where per-op and end-to-end times disagree, and the efficiencies stay per-op fits.
inline LaunchRefit refit_launch_to_e2e(DeviceSpec& spec, std::span<const CalibrationProfile> profiles,
                                       const CalibrationOptions& opt = {}) {
  LaunchRefit r;
  if (profiles.empty()) return r;
  auto err = [&](double log_launch) {
    DeviceSpec t = spec;
    t.launch_overhead = std::exp(log_launch);
    double e = 0;
    for (const CalibrationProfile& p : profiles) {
      const double d = std::log(calibration_e2e(t, p) / p.e2e);
      e += d * d;
    }
    return e;
  };
  const double x0 = std::log(std::clamp(spec.launch_overhead, opt.min_launch, opt.max_launch));
  const double n = static_cast<double>(profiles.size());
  r.rms_log_error_before = std::sqrt(err(x0) / n);
  const double x = detail::calib_line_search(err, x0, std::log(opt.min_launch), std::log(opt.max_launch), opt.grid);
  spec.launch_overhead = std::exp(x);
  r.rms_log_error = std::sqrt(err(x) / n);
  return r;
}

// The target preset with what transfers from devices fitted elsewhere (see the top of the file):
// the median over `fitted` of launch_overhead, of bandwidth_efficiency / its preset's and of each
// compute and memory efficiency / its preset's, the ratios applied to `target`'s own values
// (bandwidth and compute efficiencies at most 1). For the kinds fitted on the compute roof
// (calib_compute_kind) each device's ratio r_i is first moved to the target's machine balance B
// (peak_flops / mem_bandwidth): r_i * (B / B_i)^s, with s the least-squares slope of log r_i on
// log B_i over `fitted`, held in [-1, 0]: by the roofline a GEMM of arithmetic intensity I reaches
// min(1, I / B) of the peak, so a memory-bound one scales as B^-1 and a compute-bound one not at
// all; a rising slope has no such reason and counts as 0 (the plain median). The median keeps
// the one device with an odd ratio from moving the others.
// `fitted` are fit_device(...).spec of presets, so each one's preset is DeviceSpec::preset(name).
inline DeviceSpec transfer_calibration(const DeviceSpec& target, std::span<const DeviceSpec> fitted,
                                       const std::string& where = "calibrate: ") {
  GO_CHECK(!fitted.empty(), where, "no fitted devices to transfer to ", target.name);
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  };
  std::vector<DeviceSpec> presets;
  for (const DeviceSpec& f : fitted) presets.push_back(DeviceSpec::preset(f.name));
  std::vector<double> v;
  DeviceSpec out = target;
  for (const DeviceSpec& f : fitted) v.push_back(f.launch_overhead);
  out.launch_overhead = median(v);
  v.clear();
  for (std::size_t i = 0; i < fitted.size(); ++i) v.push_back(fitted[i].bandwidth_efficiency / presets[i].bandwidth_efficiency);
  out.bandwidth_efficiency = std::min(1.0, target.bandwidth_efficiency * median(v));
  const double target_balance = std::log(target.peak_flops / target.mem_bandwidth);
  std::vector<double> balance;
  for (const DeviceSpec& f : fitted) balance.push_back(std::log(f.peak_flops / f.mem_bandwidth));
  for (std::size_t k = 0; k < kNumOpKinds; ++k) {
    v.clear();
    for (std::size_t i = 0; i < fitted.size(); ++i)
      v.push_back(std::log(fitted[i].compute_efficiency[k] / presets[i].compute_efficiency[k]));
    double slope = 0;
    if (detail::calib_compute_kind(k)) {
      double mb = 0, mr = 0, sbb = 0, sbr = 0;
      for (std::size_t i = 0; i < v.size(); ++i) mb += balance[i], mr += v[i];
      mb /= static_cast<double>(v.size());
      mr /= static_cast<double>(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) {
        sbb += (balance[i] - mb) * (balance[i] - mb);
        sbr += (balance[i] - mb) * (v[i] - mr);
      }
      if (sbb > 1e-12) slope = std::clamp(sbr / sbb, -1.0, 0.0);  // one balance among them: no slope
    }
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::exp(v[i] + slope * (target_balance - balance[i]));
    out.compute_efficiency[k] = std::min(1.0, target.compute_efficiency[k] * median(v));
    v.clear();
    for (std::size_t i = 0; i < fitted.size(); ++i) v.push_back(fitted[i].memory_efficiency[k] / presets[i].memory_efficiency[k]);
    out.memory_efficiency[k] = target.memory_efficiency[k] * median(v);
  }
  return out;
}

// A one-device go-cluster JSON of `spec` (what `--cluster` reads), with `extra` merged in at the top
// level (the "calibration" record: a key the cluster reader knows and skips; any other is an error).
inline nlohmann::json calibrated_device_json(const DeviceSpec& spec, const nlohmann::json& extra = nlohmann::json::object()) {
  nlohmann::json j;
  j["format"] = "go-cluster";
  j["version"] = 1;
  j["name"] = spec.name + "-calibrated";
  nlohmann::json d = device_to_json(spec);
  d["count"] = 1;
  j["devices"] = std::move(d);
  j["links"] = {{"bandwidth", 1e12}, {"latency", 0.0}};  // one device: never used
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  return j;
}

}  // namespace go
