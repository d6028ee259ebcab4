// gopt eval: the evaluation table of the placement methods (include/go/baselines).
#include "eval.hpp"
#include "format.hpp"
#include "place_options.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "go/baselines/place.hpp"
#include "go/core/error.hpp"
#include "go/core/file.hpp"
#include "go/graph/load.hpp"
#include "go/graph/training.hpp"
#include "go/graph/zoo.hpp"
#include "go/sim/sim.hpp"

namespace gopt {
namespace {

struct EvalCliOptions {
  std::string graphs, cluster, methods, csv, fusion = "none", cost = "measured";
  std::uint64_t seed = 0;
  std::int64_t budget = 1000, finetune = -1, patience = 0;
  double time_limit = 0;
  std::string anchor_ties, anchor_placements;
  std::string policy, trace_dir;
  bool training = false, fit_memory = false, progress = false, no_progress = false;
};

// A file name for a graph path or zoo spec: its last path component, unsafe characters as '_'.
std::string file_stem(const std::string& graph) {
  std::string s = graph.substr(graph.find_last_of('/') == std::string::npos ? 0 : graph.find_last_of('/') + 1);
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') c = '_';
  return s;
}

// One file stem per graph, distinct: the last path component, and where two graphs share it
// (alexnet/graph.txt, vgg16/graph.txt) the folder above too, then the graph's position.
std::vector<std::string> file_stems(const std::vector<std::string>& graphs) {
  std::vector<std::string> stems;
  for (const auto& g : graphs) stems.push_back(file_stem(g));
  auto repeated = [&](std::size_t i) { return std::count(stems.begin(), stems.end(), stems[i]) > 1; };
  std::vector<char> again(stems.size());
  for (std::size_t i = 0; i < stems.size(); ++i) again[i] = repeated(i);
  for (std::size_t i = 0; i < stems.size(); ++i)
    if (again[i]) {
      const std::filesystem::path parent = std::filesystem::path(graphs[i]).parent_path().filename();
      if (!parent.empty()) stems[i] = file_stem(parent.string()) + "_" + stems[i];
    }
  for (std::size_t i = 0; i < stems.size(); ++i) again[i] = repeated(i);
  for (std::size_t i = 0; i < stems.size(); ++i)
    if (again[i]) stems[i] = std::to_string(i + 1) + "-" + stems[i];
  return stems;
}

// Writes the best valid plan of one graph (and its Chrome trace) into dir as <stem>.plan.json and
// <stem>.trace.json; returns the method.
std::string write_best(const std::string& dir, const std::string& file, const go::OpGraph& g,
                       const go::Cluster& cluster, const std::vector<std::string>& methods,
                       const std::vector<go::PlaceResult>& res, const go::SimOptions& so) {
  std::size_t best = res.size();
  for (std::size_t k = 0; k < res.size(); ++k)
    if (res[k].valid && (best == res.size() || res[k].step_time < res[best].step_time)) best = k;
  if (best == res.size()) return {};
  const std::string stem = (std::filesystem::path(dir) / file).string();
  go::save_plan(res[best].plan, g, stem + ".plan.json");
  const go::Simulator sim(g, cluster, so);
  go::SimWorkspace ws = sim.make_workspace();
  ws.set_record_memory(true);
  sim.simulate(res[best].plan, ws);
  go::write_chrome_trace(stem + ".trace.json", sim, res[best].plan, ws);
  return methods[best];
}

std::string csv_field(std::string s) {
  s = printable(std::move(s));
  for (char& c : s)
    if (c == ',' || c == '"') c = ';';
  return s;
}

std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

void run_eval(const EvalCliOptions& o) {
  const go::PlaceOptions po = place_options(o);  // a bad --fusion or --cost fails before any loading
  const go::CostSource cost = po.sim.cost;
  const go::Cluster cluster = go::load_cluster(o.cluster);
  std::vector<std::string> graphs;
  for (const auto& g : split_list(o.graphs)) {
    GO_CHECK(g.rfind("zoo:all:", 0) != 0, "--graphs: ", g, ": zoo:all takes no options (each workload has its own); "
             "list the workloads with theirs, e.g. zoo:rnnlm2:seq=4,zoo:gnmt2:seq=4");
    if (g == "zoo:all")
      for (const auto& z : go::zoo_names()) graphs.push_back("zoo:" + z);
    else graphs.push_back(g);
  }
  const std::vector<std::string> methods = split_list(o.methods);
  GO_CHECK(!graphs.empty(), "--graphs names no graph");
  GO_CHECK(!methods.empty(), "--methods names no method");
  for (const auto& m : methods) (void)go::find_place_method(m);  // unknown names fail before any work
  bool have_human = false;
  for (const auto& m : methods) have_human = have_human || m == "human";
  // the folder is made before any work, so that one that cannot be made loses no computed cell
  const std::vector<std::string> stems = file_stems(graphs);
  if (!o.trace_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.trace_dir, ec);
    GO_CHECK(!ec && std::filesystem::is_directory(o.trace_dir), o.trace_dir, ": --trace-dir cannot be made a folder: ",
             ec ? ec.message() : std::string("it is a file"));
  }
  // every graph loads before any cell is computed: a bad file late in the list loses no work
  for (const auto& g : graphs) (void)go::load_graph(g);
  std::vector<std::vector<go::PlaceResult>> res(graphs.size());
  std::vector<std::vector<std::string>> failed(graphs.size());  // a method's error on a graph ("" = none)
  std::vector<go::PlaceResult> human(graphs.size());
  std::vector<std::int32_t> ops(graphs.size());
  std::string csv = "graph,num_ops,method,step_time_ms,valid,status,optimize_seconds,simulations,note\n";
  std::string first_failure;
  int failures = 0;
  for (std::size_t gi = 0; gi < graphs.size(); ++gi) {
    go::OpGraph g = go::load_graph(graphs[gi]);
    if (o.training) g = go::make_training_graph(g);
    ops[gi] = g.num_ops();
    for (const auto& m : methods) {
      // a method that cannot take this graph (exact past its size) fails its cell only
      std::string error;
      ProgressLine progress("eval", isatty(2) != 0);
      go::PlaceOptions pm = po;
      if (progress_on(o.progress, o.no_progress)) pm.on_update = progress.callback(graphs[gi] + " " + m);
      try {
        res[gi].push_back(go::place(m, g, cluster, pm));
      } catch (const go::Error& e) {
        error = printable(e.what());
        res[gi].emplace_back();
        res[gi].back().method = m;
        if (failures++ == 0) first_failure = graphs[gi] + " " + m + ": " + error;
      }
      progress.end();  // before the cell's own line
      failed[gi].push_back(error);
      const go::PlaceResult& r = res[gi].back();
      if (!error.empty()) std::fprintf(stderr, "gopt eval: %s %s: failed: %s\n", graphs[gi].c_str(), m.c_str(), error.c_str());
      else
        std::fprintf(stderr, "gopt eval: %s %s: %s ms%s (%.3f s)\n", graphs[gi].c_str(), m.c_str(),
                     std::isfinite(r.step_time) ? fmt("%.3f", r.step_time * 1e3).c_str() : "-", r.valid ? "" : " OOM",
                     r.optimize_seconds);
      csv += csv_field(graphs[gi]) + "," + std::to_string(g.num_ops()) + "," + m + "," +
             (std::isfinite(r.step_time) ? fmt("%.6f", r.step_time * 1e3) : std::string()) + "," +
             (r.valid ? "1" : "0") + "," + (error.empty() ? std::string(go::sim_status_name(r.status)) : "error") +
             "," + fmt("%.6f", r.optimize_seconds) + "," + std::to_string(r.simulations) + "," +
             csv_field(error.empty() ? r.note : error) + "\n";
      if (m == "human") human[gi] = r;
    }
    if (!have_human) human[gi] = go::place("human", g, cluster, po);
    if (!o.trace_dir.empty()) {
      const std::string m = write_best(o.trace_dir, stems[gi], g, cluster, methods, res[gi], po.sim);
      if (!m.empty())
        std::fprintf(stderr, "gopt eval: %s: best plan (%s) and its Chrome trace in %s/%s.{plan,trace}.json\n",
                     graphs[gi].c_str(), m.c_str(), o.trace_dir.c_str(), stems[gi].c_str());
    }
  }
  if (!o.csv.empty()) go::write_file_atomic(o.csv, csv);
  // table
  std::printf("cluster %s (%d devices)%s%s%s; cells: step time ms (optimize s), OOM = does not fit%s\n\n",
              cluster.name.c_str(), cluster.num_devices(), o.training ? ", training graphs" : "",
              po.fusion == go::FusionMode::xla ? ", xla fusion" : "",
              cost == go::CostSource::roofline ? ", roofline costs (measured times ignored)" : "",
              failures > 0 ? ", failed = the method gave an error (on stderr, and in the CSV's note)" : "");
  std::printf("| graph | ops |");
  for (const auto& m : methods) std::printf(" %s |", m.c_str());
  std::printf("\n|---|---:|");
  for (std::size_t k = 0; k < methods.size(); ++k) std::printf("---:|");
  std::printf("\n");
  for (std::size_t gi = 0; gi < graphs.size(); ++gi) {
    std::printf("| %s | %d |", printable(graphs[gi]).c_str(), ops[gi]);
    for (std::size_t k = 0; k < res[gi].size(); ++k) {
      const go::PlaceResult& r = res[gi][k];
      if (!failed[gi][k].empty()) {
        std::printf(" failed |");
        continue;
      }
      const std::string t = r.optimize_seconds < 0.01 ? fmt("%.3f", r.optimize_seconds) : fmt("%.2f", r.optimize_seconds);
      if (r.valid) std::printf(" %s (%s) |", fmt("%.2f", r.step_time * 1e3).c_str(), t.c_str());
      else std::printf(" OOM (%s) |", t.c_str());
    }
    std::printf("\n");
  }
  std::printf("| geo-mean / human | |");
  for (std::size_t k = 0; k < methods.size(); ++k) {
    double s = 0;
    int cnt = 0, oom = 0, fails = 0;
    for (std::size_t gi = 0; gi < graphs.size(); ++gi) {
      const auto& r = res[gi][k];
      // a ratio needs a human time > 0: an empty graph's step takes 0 s on every method
      if (!human[gi].valid || !(human[gi].step_time > 0)) continue;
      if (!failed[gi][k].empty()) {
        ++fails;
        continue;
      }
      if (!r.valid) {
        ++oom;
        continue;
      }
      if (!(r.step_time > 0)) continue;
      s += std::log(r.step_time / human[gi].step_time);
      ++cnt;
    }
    std::string cell = cnt > 0 ? fmt("%.3f", std::exp(s / cnt)) : std::string("-");
    if (oom > 0) cell += " (" + std::to_string(oom) + " OOM)";
    if (fails > 0) cell += " (" + std::to_string(fails) + " failed)";
    std::printf(" %s |", cell.c_str());
  }
  std::printf("\n");
  if (!have_human) std::printf("\n(human computed for the ratio row only)\n");
  // the table and the CSV stand; the exit status says that some cells are missing
  GO_CHECK(failures == 0, failures, " of ", graphs.size() * methods.size(), " cells failed; the first: ", first_failure);
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto opts = std::make_shared<EvalCliOptions>();
  CLI::App* cmd = app.add_subcommand("eval", "Evaluation table: step time of every method on every graph");
  cmd->add_option("--graphs", opts->graphs, "comma-separated graph files or zoo:<name> (zoo:all = every zoo workload)")
      ->required();
  cmd->add_option("--cluster", opts->cluster, "cluster preset (e.g. v100x4) or go-cluster JSON file")->required();
  cmd->add_option("--methods", opts->methods, "comma-separated methods (" + go::place_method_list() + ")")->required();
  cmd->add_flag("--training", opts->training, "expand every graph to its training graph first");
  cmd->add_option("--seed", opts->seed, "seed of every random choice (default 0)")->check(seed_value());
  cmd->add_option("--budget", opts->budget, "random/anneal: simulator calls per graph (default 1000)")
      ->check(count_at_least(1));
  cmd->add_option("--fusion", opts->fusion, kFusionHelp);
  cmd->add_option("--policy", opts->policy, "go: pre-trained policy or checkpoint file (default: the shipped policy)")->check(path_given());
  cmd->add_option("--anchor-ties", opts->anchor_ties, kAnchorTiesHelp)
      ->check(name_list_check(go::rl::kAnchorTieOrders));
  cmd->add_option("--anchor-placements", opts->anchor_placements, anchor_placements_help())
      ->check(name_list_check(go::rl::kAnchorPlacements));
  cmd->add_option("--time-limit", opts->time_limit, kTimeLimitHelp)
      ->check(seconds_at_least_zero());
  cmd->add_option("--patience", opts->patience, kPatienceHelp)->check(count_at_least());
  cmd->add_flag("--fit-memory", opts->fit_memory, kFitMemoryHelp);
  CLI::Option* progress = cmd->add_flag("--progress", opts->progress, kProgressHelp);
  cmd->add_flag("--no-progress", opts->no_progress, "no progress lines")->excludes(progress);
  cmd->add_option("--finetune", opts->finetune, "go: PPO updates of fine-tuning per graph (0 = zero-shot; default: --budget / the most simulations of one update (193), so that GO gets the simulations of random and anneal)")
      ->check(count_at_least());
  cmd->add_option("--trace-dir", opts->trace_dir,
                  "write each graph's best valid plan and its Chrome trace (chrome://tracing, ui.perfetto.dev) here, as "
                  "<file name>.plan.json and .trace.json (graphs of the same file name: <folder>_<name>, then "
                  "<position>-<name>)")->check(path_given());
  cmd->add_option("--cost", opts->cost, kCostHelp);
  cmd->add_option("--csv", opts->csv, "write one line per (graph, method) to this CSV file")->check(path_given());
  cmd->callback([opts, cmd]() {
    run_command("eval", [&] {
      note_unused_flags(*cmd, "eval", split_list(opts->methods));
      run_eval(*opts);
    });
  });
}

}  // namespace gopt
