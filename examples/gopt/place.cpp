// gopt place: one baseline optimizer (or any registered method) on one graph and cluster.
#include "place.hpp"
#include "format.hpp"
#include "place_options.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "go/baselines/place.hpp"
#include "go/core/error.hpp"
#include "go/graph/load.hpp"
#include "go/graph/training.hpp"
#include "go/sim/sim.hpp"

namespace gopt {
namespace {

struct PlaceCliOptions {
  std::string graph, cluster, method, out, fusion = "none", expert, cost = "measured";
  std::uint64_t seed = 0;
  std::int64_t budget = 1000, finetune = -1, patience = 0;
  double time_limit = 0;
  std::string anchor_ties, anchor_placements;
  std::string policy;
  bool training = false, json = false, fit_memory = false, progress = false, no_progress = false;
};

void run_place(const PlaceCliOptions& o) {
  go::PlaceOptions po = place_options(o);  // a bad --fusion or --cost fails before any loading
  po.expert_split = o.expert;
  const go::CostSource cost = po.sim.cost;
  const go::Cluster cluster = go::load_cluster(o.cluster);
  go::OpGraph g = go::load_graph(o.graph);
  if (o.training) g = go::make_training_graph(g);
  ProgressLine progress("place", isatty(2) != 0);
  if (progress_on(o.progress, o.no_progress)) po.on_update = progress.callback(o.method);
  const go::PlaceResult r = go::place(o.method, g, cluster, po);
  progress.end();
  // what the plan fuses, whatever --fusion said (go, anneal and the anchor choose fusion themselves)
  std::int64_t fused_ops = 0, fusion_groups = 0;
  {
    std::unordered_map<std::int32_t, std::int64_t> members;
    for (std::int32_t f : r.plan.fusion)
      if (f >= 0) ++members[f];
    for (const auto& [f, k] : members)
      if (k >= 2) fused_ops += k, ++fusion_groups;
  }
  if (!o.out.empty()) go::save_plan(r.plan, g, o.out);
  if (o.json) {
    nlohmann::json j;
    j["graph"] = o.graph;
    j["cluster"] = cluster.name;
    j["method"] = o.method;
    j["num_ops"] = g.num_ops();
    j["training"] = g.info().training;
    j["fusion"] = o.fusion;  // the option; the plan's own fusion:
    j["fused_ops"] = fused_ops;
    j["fusion_groups"] = fusion_groups;
    j["cost"] = o.cost;
    j["seed"] = o.seed;
    j["budget"] = o.budget;
    j["step_time_ms"] = std::isfinite(r.step_time) ? nlohmann::json(r.step_time * 1e3) : nlohmann::json(nullptr);
    j["valid"] = r.valid;
    j["status"] = std::string(go::sim_status_name(r.status));
    if (!r.valid) j["reason"] = printable(r.reason);
    j["optimize_seconds"] = r.optimize_seconds;
    j["simulations"] = r.simulations;
    j["peak_memory_bytes"] = r.peak_memory;
    if (!r.note.empty()) j["note"] = printable(r.note);
    if (!o.out.empty()) j["out"] = o.out;
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::printf("graph        %s (%d ops%s)\n", printable(o.graph).c_str(), g.num_ops(), g.info().training ? ", training" : "");
  std::printf("cluster      %s: %d devices\n", printable(cluster.name).c_str(), cluster.num_devices());
  std::printf("method       %s%s\n", o.method.c_str(), po.fusion == go::FusionMode::xla ? " + xla fusion" : "");
  if (cost == go::CostSource::roofline) std::printf("cost         roofline (measured op times ignored)\n");
  if (std::isfinite(r.step_time)) std::printf("step time    %.3f ms\n", r.step_time * 1e3);
  else std::printf("step time    -\n");
  std::printf("valid        %s\n", r.valid ? "yes" : ("no: " + printable(r.reason)).c_str());
  if (fused_ops > 0)
    std::printf("fusion       %lld ops in %lld groups\n", static_cast<long long>(fused_ops),
                static_cast<long long>(fusion_groups));
  std::printf("optimized in %.3f s%s\n", r.optimize_seconds,
              r.simulations > 0 ? (" (" + std::to_string(r.simulations) + " simulations)").c_str() : "");
  if (!r.note.empty()) std::printf("note         %s\n", printable(r.note).c_str());
  if (!o.out.empty()) std::printf("plan         %s\n", printable(o.out).c_str());
}

}  // namespace

void add_place_command(CLI::App& app) {
  auto opts = std::make_shared<PlaceCliOptions>();
  std::string methods;
  for (const auto& m : go::place_methods()) methods += "\n  " + m.name + ": " + m.help;
  CLI::App* cmd = app.add_subcommand("place", "Place (and schedule) a graph on a cluster with a baseline optimizer");
  cmd->add_option("graph", opts->graph,
                  std::string(kGraphFileHelp) + " or zoo:<name>")
      ->required();
  cmd->add_option("--cluster", opts->cluster, "cluster preset (e.g. v100x4) or go-cluster JSON file")->required();
  cmd->add_option("--method", opts->method, "optimizer:" + methods)->required();
  cmd->add_option("--seed", opts->seed, "seed of every random choice (default 0)")->check(seed_value());
  cmd->add_option("--budget", opts->budget, "random/anneal: simulator calls (default 1000)")->check(count_at_least(1));
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
  cmd->add_option("--finetune", opts->finetune, "go: PPO updates of fine-tuning on this graph (0 = zero-shot; default: --budget / the most simulations of one update (193), at least 1, so that GO gets the simulations of random and anneal); anchor-search: its rounds, the same")
      ->check(count_at_least());
  cmd->add_option("--expert", opts->expert, "human: the expert split or go-plan file to use; random and anneal start from it, and GO's anchor "
                  "(best-heuristic, anneal-anchor, anchor-search, the go methods) takes its devices as the human placement")->check(path_given());
  cmd->add_flag("--training", opts->training, "expand to the training graph (forward + backward + update) first");
  cmd->add_option("--cost", opts->cost, kCostHelp);
  cmd->add_option("--out", opts->out, "write the plan (go-plan JSON)")->check(path_given());
  cmd->add_flag("--json", opts->json, "print JSON (step_time_ms, valid, optimize_seconds, ...) instead of text");
  CLI::Option* progress = cmd->add_flag("--progress", opts->progress, kProgressHelp);
  cmd->add_flag("--no-progress", opts->no_progress, "no progress lines")->excludes(progress);
  cmd->callback([opts, cmd]() {
    run_command("place", [&] {
      note_unused_flags(*cmd, "place", {opts->method});
      run_place(*opts);
    });
  });
}

}  // namespace gopt
