// gopt simulate: step time, validity, per-device busy time and peak memory, transfers and kernel
// launches of one simulated step (include/go/sim), the lower bounds on every plan's step time
// (go/sim/bound.hpp), optionally a Chrome trace, the step's critical path (go/sim/critical_path.hpp)
// and a speed test.
#include "simulate.hpp"
#include "format.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "go/baselines/place.hpp"
#include "go/core/error.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/load.hpp"
#include "go/graph/training.hpp"
#include "go/sim/bound.hpp"
#include "go/sim/sim.hpp"

namespace gopt {
namespace {

struct SimulateOptions {
  std::string graph;
  std::string cluster;
  std::string plan;
  std::string trace;
  std::string out;
  std::string cost = "measured";
  bool training = false;
  bool json = false;
  bool no_colocation = false;
  bool critical_path = false;
  bool fit_memory = false;
  int repeat = 1;
  bool repeat_given = false;
};


void run_simulate(const SimulateOptions& o) {
  GO_CHECK(o.repeat >= 1, "--repeat must be at least 1, got ", o.repeat);
  const go::CostSource cost = go::parse_cost_source(o.cost);
  const go::Cluster cluster = go::load_cluster(o.cluster);
  go::OpGraph g = go::load_graph(o.graph);
  if (o.training) g = go::make_training_graph(g);
  go::Plan plan;
  if (!o.plan.empty()) {
    plan = go::load_plan(o.plan, g);
    // a device the cluster does not have is a plan for another cluster, not one that runs out of memory
    for (go::OpId v = 0; v < g.num_ops(); ++v)
      GO_CHECK(plan.device_of(v) < cluster.num_devices(), o.plan, ": ", g.label(v), " is placed on device ",
               plan.device_of(v), " but the cluster ", o.cluster, " has ", cluster.num_devices(), " device(s)");
  }
  go::SimOptions so;
  so.check_colocation = !o.no_colocation;
  so.cost = cost;
  std::string fitted;  // what --fit-memory did ("" when the plan fit as it was)
  if (o.fit_memory) {
    go::PlaceResult f;
    f.plan = plan.device.empty() ? go::default_plan(g) : plan;
    go::evaluate_plan(g, cluster, f.plan, f, so);
    go::fit_result_to_memory(g, cluster, so, f);
    fitted = f.note;
    if (!f.note.empty() && f.valid) plan = std::move(f.plan);  // else the plan as given, still out of memory
  }
  if (!o.out.empty()) go::save_plan(plan.device.empty() ? go::default_plan(g) : plan, g, o.out);
  go::Simulator sim(g, cluster, so);
  go::SimWorkspace ws = sim.make_workspace();
  ws.set_record_memory(!o.trace.empty());
  sim.simulate(plan, ws);  // first run: warms the workspace, records the trace
  if (!o.trace.empty()) go::write_chrome_trace(o.trace, sim, plan, ws);
  double seconds = 0;
  if (o.repeat_given) {
    ws.set_record_memory(false);
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < o.repeat; ++k) sim.simulate(plan, ws);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  // after a --repeat run the workspace holds the same schedule as the first
  const go::StepPath cp = o.critical_path ? go::step_critical_path(sim, plan, ws) : go::StepPath{};
  const go::SimResult& r = ws.result();
  const go::StepTimeBound bound = go::step_time_lower_bound(g, cluster, cost);
  const std::string reason = printable(go::sim_reason(r, g, cluster));
  const auto nd = static_cast<std::size_t>(cluster.num_devices());
  if (o.json) {
    nlohmann::json j;
    j["graph"] = o.graph;
    j["cluster"] = cluster.name;
    j["plan"] = o.plan.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.plan);
    j["training"] = g.info().training;
    j["cost"] = o.cost;
    j["num_ops"] = g.num_ops();
    j["devices"] = nlohmann::json::array();
    for (const auto& d : cluster.devices) j["devices"].push_back(d.name);
    j["step_time_ms"] = std::isfinite(r.step_time) ? nlohmann::json(r.step_time * 1e3) : nlohmann::json(nullptr);
    j["lower_bound_ms"] = {{"valid_plan", bound.valid * 1e3},
                           {"valid_plan_path", bound.valid_path * 1e3},
                           {"valid_plan_work", bound.valid_work * 1e3},
                           {"valid_plan_compute", bound.valid_compute * 1e3},
                           {"valid_plan_traffic", bound.valid_traffic * 1e3},
                           {"any_plan", bound.fused * 1e3},
                           {"unfused", bound.unfused * 1e3},
                           {"any_plan_path", bound.fused_path * 1e3},
                           {"any_plan_work", bound.fused_work * 1e3},
                           {"unfused_path", bound.unfused_path * 1e3},
                           {"unfused_work", bound.unfused_work * 1e3}};
    j["valid"] = r.valid;
    j["status"] = std::string(go::sim_status_name(r.status));
    if (!r.valid) j["reason"] = reason;
    j["peak_memory_bytes"] = r.peak_memory;
    j["resident_memory_bytes"] = r.resident_memory;
    std::vector<double> busy_ms;
    for (double b : r.busy_time) busy_ms.push_back(b * 1e3);
    j["busy_time_ms"] = busy_ms;
    j["transfer_bytes"] = r.transfer_bytes;
    j["transfers"] = r.transfers;
    j["kernel_launches"] = r.kernel_launches;
    j["units"] = r.units;
    j["memory_traffic_bytes"] = r.memory_traffic;
    if (o.repeat_given) {
      j["repeat"] = o.repeat;
      j["sims_per_second"] = seconds > 0 ? nlohmann::json(static_cast<double>(o.repeat) / seconds) : nlohmann::json(nullptr);
    }
    if (!o.trace.empty()) j["trace"] = o.trace;
    if (o.fit_memory) j["fitted"] = fitted;
    if (!o.out.empty()) j["out"] = o.out;
    if (o.critical_path) {
      nlohmann::json by_kind = nlohmann::json::object();
      for (std::size_t k = 0; k < go::kNumOpKinds; ++k)
        if (cp.compute_by_kind[k] > 0) by_kind[std::string(go::kOpKindNames[k])] = cp.compute_by_kind[k] * 1e3;
      std::vector<double> by_device;
      for (double b : cp.compute_by_device) by_device.push_back(b * 1e3);
      nlohmann::json links = nlohmann::json::object();
      for (go::PathLink l : {go::PathLink::data, go::PathLink::transfer, go::PathLink::device})
        links[std::string(go::path_link_name(l))] = cp.links(l);
      j["critical_path"] = {{"units", cp.units.size()},
                            {"end_ms", cp.end * 1e3},
                            {"compute_ms", cp.compute * 1e3},
                            {"transfers_ms", cp.transfers * 1e3},
                            {"link_wait_ms", cp.link_wait * 1e3},
                            {"gaps_ms", cp.gaps * 1e3},
                            {"links", links},
                            {"compute_by_device_ms", by_device},
                            {"compute_by_kind_ms", by_kind}};
    }
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::printf("graph        %s (%d ops%s)\n", printable(o.graph).c_str(), g.num_ops(), g.info().training ? ", training" : "");
  std::printf("cluster      %s: %zu devices, %s channels\n", printable(cluster.name).c_str(), nd,
              std::string(go::channel_model_name(cluster.channels)).c_str());
  if (o.plan.empty() && plan.device.empty())
    std::printf("plan         default: every op on %s, first ready first run, no fusion\n", cluster.devices[0].name.c_str());
  else if (o.plan.empty())
    std::printf("plan         default (every op on %s), fitted to memory\n", cluster.devices[0].name.c_str());
  else
    std::printf("plan         %s%s%s\n", printable(o.plan).c_str(), plan.has_priority() ? ", priorities" : "",
                plan.has_fusion() ? ", fusion" : "");
  if (!fitted.empty()) std::printf("             %s\n", printable(fitted).c_str());
  if (cost == go::CostSource::roofline) std::printf("cost         roofline (measured op times ignored)\n");
  if (std::isfinite(r.step_time)) std::printf("step time    %.3f ms\n", r.step_time * 1e3);
  else std::printf("step time    -\n");
  auto term = [](double path, double work) { return path >= work ? "longest path" : "work / devices"; };
  // which floors set the valid bound: the rules' compute floors, or the traffic they force (go/sim/bound.hpp)
  const std::string valid_term = std::string(term(bound.valid_path, bound.valid_work)) +
                                 (bound.valid_traffic > bound.valid_compute ? ", with the traffic the rules force" : "");
  std::printf("lower bound  %.3f ms for any valid plan (%s), %.3f ms for any plan (%s), %.3f ms without fusion (%s)\n",
              bound.valid * 1e3, valid_term.c_str(), bound.fused * 1e3,
              term(bound.fused_path, bound.fused_work), bound.unfused * 1e3, term(bound.unfused_path, bound.unfused_work));
  std::printf("valid        %s\n", r.valid ? "yes" : ("no: " + reason).c_str());
  if (r.status == go::SimStatus::ok || r.status == go::SimStatus::out_of_memory) {
    std::printf("%-12s %10s %6s %12s %12s %12s\n", "device", "busy ms", "util", "peak mem", "params", "capacity");
    for (std::size_t d = 0; d < nd; ++d) {
      const double util = r.step_time > 0 ? r.busy_time[d] / r.step_time * 100 : 0;
      std::printf("%-12s %10.3f %5.1f%% %12s %12s %12s\n", printable(cluster.devices[d].name).c_str(), r.busy_time[d] * 1e3,
                  util, human_bytes(static_cast<double>(r.peak_memory[d])).c_str(),
                  human_bytes(static_cast<double>(r.resident_memory[d])).c_str(),
                  human_bytes(static_cast<double>(cluster.devices[d].spec.memory_bytes)).c_str());
    }
    std::printf("transfers    %lld (%s)\n", static_cast<long long>(r.transfers),
                human_bytes(static_cast<double>(r.transfer_bytes)).c_str());
    std::printf("kernels      %lld launches in %lld units, %s of device memory traffic\n",
                static_cast<long long>(r.kernel_launches), static_cast<long long>(r.units), human_bytes(r.memory_traffic).c_str());
  }
  if (o.critical_path && !cp.units.empty()) {
    const double end = cp.end * 1e3;
    auto part = [&](double sec) { return end > 0 ? sec * 1e3 / end * 100 : 0.0; };
    std::printf("critical path %zu units to %.3f ms: compute %.3f ms (%.1f%%), transfers %.3f ms (%.1f%%), waiting for a "
                "link %.3f ms (%.1f%%), gaps %.3f ms (%.1f%%)\n",
                cp.units.size(), end, cp.compute * 1e3, part(cp.compute), cp.transfers * 1e3, part(cp.transfers),
                cp.link_wait * 1e3, part(cp.link_wait), cp.gaps * 1e3, part(cp.gaps));
    std::printf("             held by a data input on their device %lld, a transfer %lld, their device's previous unit %lld\n",
                static_cast<long long>(cp.links(go::PathLink::data)),
                static_cast<long long>(cp.links(go::PathLink::transfer)),
                static_cast<long long>(cp.links(go::PathLink::device)));
    auto fixed1 = [](double ms) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.1f", ms);
      return std::string(buf);
    };
    std::string devs, kinds;
    for (std::size_t d = 0; d < nd; ++d)
      devs += (d ? ", " : "") + printable(cluster.devices[d].name) + " " + fixed1(cp.compute_by_device[d] * 1e3);
    std::vector<std::size_t> order(go::kNumOpKinds);
    for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return cp.compute_by_kind[a] > cp.compute_by_kind[b]; });
    for (std::size_t i = 0; i < 6 && cp.compute_by_kind[order[i]] > 0; ++i)
      kinds += (i ? ", " : "") + std::string(go::kOpKindNames[order[i]]) + " " + fixed1(cp.compute_by_kind[order[i]] * 1e3);
    std::printf("             compute by device (ms): %s\n", devs.c_str());
    std::printf("             compute by op kind (ms): %s\n", kinds.c_str());
  }
  if (!o.trace.empty()) std::printf("trace        %s\n", printable(o.trace).c_str());
  if (!o.out.empty()) std::printf("out          %s\n", printable(o.out).c_str());
  if (o.repeat_given)
    std::printf("speed        %d simulations in %.3f s: %.1f sims/s (%.3f ms each)\n", o.repeat, seconds,
                seconds > 0 ? o.repeat / seconds : 0.0, seconds / o.repeat * 1e3);
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto opts = std::make_shared<SimulateOptions>();
  std::string presets;
  for (const auto& p : go::cluster_preset_names()) presets += (presets.empty() ? "" : ", ") + p;
  std::string devices;
  for (const auto& d : go::DeviceSpec::preset_names()) devices += (devices.empty() ? "" : ", ") + d;
  CLI::App* cmd = app.add_subcommand(
      "simulate", "Simulate one step of a graph on a multi-GPU cluster: step time, memory, transfers, validity, lower bounds on every plan's step time");
  cmd->add_option("graph", opts->graph,
                  std::string(kGraphFileHelp) + " or zoo:<name>")
      ->required();
  cmd->add_option("--cluster", opts->cluster,
                  "cluster preset (" + presets + ", or any <device>x<count>, device one of " + devices + ") or go-cluster JSON file")
      ->required();
  cmd->add_option("--plan", opts->plan,
                  "plan file: go-plan JSON (device, priority, fusion per op) or a dnn-partitioning human-expert split; "
                  "default: every op on device 0, first-ready scheduling, no fusion")->check(path_given());
  cmd->add_flag("--training", opts->training, "expand to the training graph (forward + backward + update) first");
  cmd->add_option("--trace", opts->trace, "write a Chrome trace (chrome://tracing, ui.perfetto.dev) of the step")->check(path_given());
  cmd->add_option("--repeat", opts->repeat, "simulate N times and report simulations per second")
      ->check(count_at_least(1));
  cmd->add_option("--cost", opts->cost, kCostHelp);
  cmd->add_flag("--critical-path", opts->critical_path,
                "where the step time goes: walk the step's critical path back from the unit that ends last (each "
                "unit's latest data input, or its device's previous unit) and split it into compute (by device and op "
                "kind), transfers, waits for a busy link and gaps");
  cmd->add_flag("--fit-memory", opts->fit_memory,
                "a plan (or the default) that runs out of memory is fitted to it first, as gopt place --fit-memory fits a "
                "method's: op sets moved off the devices that overflow until it fits, priorities kept; the fitted plan is "
                "the one simulated and reported (where none fits, the plan as given)");
  cmd->add_option("--out", opts->out, "write the simulated plan (with --fit-memory: the fitted one) as go-plan JSON")->check(path_given());
  cmd->add_flag("--json", opts->json, "print JSON instead of text");
  cmd->add_flag("--no-colocation", opts->no_colocation, "do not require colocation groups to share a device");
  cmd->callback([opts, cmd]() {
    opts->repeat_given = cmd->count("--repeat") > 0;
    run_command("simulate", [&] { run_simulate(*opts); });
  });
}

}  // namespace gopt
