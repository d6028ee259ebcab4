// gopt info: nodes, edges, FLOPs, parameter and activation bytes, op-kind histogram and critical
// path of a graph file (ONNX, go-graph JSON, PipeDream graph.txt, dnn-partitioning JSON, NeuSight CSV).
#include "info.hpp"
#include "format.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "go/core/error.hpp"
#include "go/graph/cost.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/load.hpp"
#include "go/graph/training.hpp"
#include "go/graph/zoo.hpp"

namespace {

struct InfoOptions {
  std::string graph;
  bool training = false;
  bool json = false;
  std::string device = "v100";
};


std::string human_flops(double f) {
  const char* units[] = {"FLOP", "KFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP"};
  int u = 0;
  while (f >= 1000 && u < 5) {
    f /= 1000;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", f, units[u]);
  return buf;
}

std::vector<std::pair<std::string, int>> kind_histogram(const go::GraphStats& s) {
  std::vector<std::pair<std::string, int>> h;
  for (std::size_t k = 0; k < go::kNumOpKinds; ++k)
    if (s.kind_counts[k] > 0) h.emplace_back(std::string(go::kOpKindNames[k]), s.kind_counts[k]);
  std::stable_sort(h.begin(), h.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return h;
}

void run_info(const InfoOptions& o) {
  const go::DeviceSpec dev = go::DeviceSpec::preset(o.device);
  go::OpGraph g = go::load_graph(o.graph);  // a file or zoo:<name>
  if (o.training) g = go::make_training_graph(g);
  const go::GraphStats s = go::graph_stats(g, dev);
  const go::GraphInfo& info = g.info();
  int roles[3] = {0, 0, 0};
  std::int64_t state_bytes = 0;  // a training graph's optimizer state: the parameters of its update ops
  for (const go::Op& op : g.ops()) {
    ++roles[static_cast<int>(op.role)];
    if (op.role == go::OpRole::update) state_bytes += op.param_bytes;
  }
  if (o.json) {
    nlohmann::json j;
    j["graph"] = o.graph;
    j["format"] = info.format;
    j["name"] = info.name;
    j["training"] = info.training;
    j["batch"] = info.batch;
    j["nodes"] = s.nodes;
    j["edges"] = s.edges;
    j["flops"] = s.flops;
    j["param_bytes"] = s.param_bytes;
    j["params"] = g.num_params();
    j["optimizer_state_bytes"] = state_bytes;
    j["activation_bytes"] = s.activation_bytes;
    j["temp_bytes"] = s.temp_bytes;
    j["measured_ops"] = s.measured_ops;
    j["roles"] = {{"forward", roles[0]}, {"backward", roles[1]}, {"update", roles[2]}};
    nlohmann::json kinds = nlohmann::json::object();
    for (const auto& [k, c] : kind_histogram(s)) kinds[k] = c;
    j["op_kinds"] = std::move(kinds);
    j["device"] = dev.name;
    j["total_time_s"] = s.total_time;
    nlohmann::json cp;
    cp["time_s"] = s.critical.time;
    cp["ops"] = s.critical.ops.size();
    cp["first"] = s.critical.ops.empty() ? "" : g.name(s.critical.ops.front());
    cp["last"] = s.critical.ops.empty() ? "" : g.name(s.critical.ops.back());
    j["critical_path"] = std::move(cp);
    if (info.num_devices > 0) j["num_devices"] = info.num_devices;
    if (info.device_memory > 0) j["device_memory"] = info.device_memory;
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::printf("graph          %s (%s%s%s)\n", o.graph.c_str(), info.format.c_str(), info.name.empty() ? "" : ", ",
              info.name.c_str());
  std::printf("nodes          %d", s.nodes);
  if (info.training) std::printf(" (%d forward, %d backward, %d update)", roles[0], roles[1], roles[2]);
  std::printf("\nedges          %lld\n", static_cast<long long>(s.edges));
  std::printf("flops          %s", human_flops(s.flops).c_str());
  if (info.batch > 0) std::printf(" (%s per item at batch %lld)", human_flops(s.flops / static_cast<double>(info.batch)).c_str(),
                                  static_cast<long long>(info.batch));
  std::printf("\nparameters     %s in %d tensors", gopt::human_bytes(static_cast<double>(s.param_bytes)).c_str(), g.num_params());
  if (state_bytes > 0)
    std::printf(" (weights %s, optimizer state %s)", gopt::human_bytes(static_cast<double>(s.param_bytes - state_bytes)).c_str(),
                gopt::human_bytes(static_cast<double>(state_bytes)).c_str());
  std::printf("\n");
  std::printf("activations    %s\n", gopt::human_bytes(static_cast<double>(s.activation_bytes)).c_str());
  if (s.temp_bytes > 0) std::printf("temporary      %s\n", gopt::human_bytes(static_cast<double>(s.temp_bytes)).c_str());
  std::printf("measured times %d of %d ops\n", s.measured_ops, s.nodes);
  if (info.num_devices > 0 || info.device_memory > 0)
    std::printf("profiled for   %d devices of %s\n", info.num_devices, gopt::human_bytes(static_cast<double>(info.device_memory)).c_str());
  std::printf("critical path  %.3f ms over %zu ops on %s (all ops in sequence: %.3f ms)\n", s.critical.time * 1e3,
              s.critical.ops.size(), dev.name.c_str(), s.total_time * 1e3);
  std::printf("op kinds      ");
  for (const auto& [k, c] : kind_histogram(s)) std::printf(" %s %d", k.c_str(), c);
  std::printf("\n");
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto opts = std::make_shared<InfoOptions>();
  CLI::App* cmd = app.add_subcommand("info", "Summarize a graph: nodes, edges, FLOPs, bytes, op kinds, critical path");
  std::string zoo;
  for (const auto& n : go::zoo_names()) zoo += (zoo.empty() ? "" : ", ") + n;
  cmd->add_option("graph", opts->graph,
                  std::string(gopt::kGraphFileHelp) + " or zoo:<name>, a "
                  "generated forward graph (add --training for the training graph) with <name> one of: " + zoo)
      ->required();
  cmd->add_flag("--training", opts->training, "expand to the training graph (forward + backward + update)");
  cmd->add_flag("--json", opts->json, "print JSON instead of text");
  std::string devices;
  for (const auto& d : go::DeviceSpec::preset_names()) devices += (devices.empty() ? "" : ", ") + d;
  cmd->add_option("--device", opts->device, "device preset of the cost model (" + devices + ")")
      ->capture_default_str();
  cmd->callback([opts]() {
    try {
      run_info(*opts);
    } catch (const go::Error& e) {
      std::fprintf(stderr, "gopt info: %s\n", gopt::printable(e.what()).c_str());
      throw CLI::RuntimeError(1);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gopt info: %s: %s\n", gopt::printable(opts->graph).c_str(), gopt::printable(e.what()).c_str());
      throw CLI::RuntimeError(1);
    }
  });
}
