#pragma once
// The `default` and `human` baselines.
//   default: every op on device 0, first ready first run, no fusion (TensorFlow's default).
//   human:   the human-expert placement, by the first rule that applies:
//     1. PlaceOptions::expert_split names a dnn-partitioning expert split (or a go-plan file): it;
//     2. a zoo graph (forward or training; GraphInfo::name is a zoo workload): zoo_human_placement;
//     3. a dnn-partitioning graph whose expert split lies next to it in the msr-fiddle layout
//        (<root>/{throughput,latency}-inputs/<Layer|Operator>Graphs/<stem>.json ->
//        <root>/human-experts/<stem>_expert.json) and uses at most the cluster's devices: the split;
//     4. any other graph: default_human_placement (forward ops by topological depth, cut into k
//        contiguous blocks of equal estimated compute; backward and update ops follow their forward
//        op), the documented generic rule.
//   Colocation groups are then enforced (go::colocate). The result's note says which rule applied.
//   pipeline: forward ops in depth-first topological order cut into k stages of equal compute,
//     training ops with their forward op (go/graph/zoo/placement.hpp, pipeline_placement). It
//     balances compute only: memory may overflow where human fits (rnnlm4 on 2 V100s).
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "go/core/error.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/zoo.hpp"
#include "go/sim/cluster.hpp"
#include "go/sim/plan.hpp"

namespace go {

inline Plan default_plan(const OpGraph& g) { return Plan::single_device(g.num_ops(), 0); }

inline Plan pipeline_plan(const OpGraph& g, const Cluster& c) {
  Plan p;
  p.device = pipeline_placement(g, c.num_devices());
  colocate(g, p);
  return p;
}

// The expert split next to a dnn-partitioning graph file, or "" when there is none.
inline std::string find_expert_split(const OpGraph& g) {
  namespace fs = std::filesystem;
  if (g.info().format != "dnn-partitioning" || g.info().source.empty()) return {};
  std::error_code ec;
  const fs::path src(g.info().source);
  const fs::path root = src.parent_path().parent_path().parent_path();
  const fs::path cand = root / "human-experts" / (src.stem().string() + "_expert.json");
  if (fs::is_regular_file(cand, ec)) return cand.string();
  return {};
}

inline Plan human_plan(const OpGraph& g, const Cluster& c, const std::string& expert_split = {},
                       std::string* note = nullptr) {
  const std::int32_t k = c.num_devices();
  auto say = [&](const std::string& s) {
    if (note) *note = s;
  };
  Plan p;
  if (!expert_split.empty()) {
    p = load_plan(expert_split, g);
    say("expert split " + expert_split);
  } else {
    const auto names = zoo_names();
    if (std::find(names.begin(), names.end(), g.info().name) != names.end()) {
      p.device = zoo_human_placement(g, k);
      say("zoo human-expert placement");
    } else {
      bool done = false;
      const std::string split = find_expert_split(g);
      if (!split.empty()) {
        try {
          Plan e = load_plan(split, g);
          std::int32_t used = 0;
          for (std::int32_t d : e.device) used = std::max(used, d + 1);
          if (used <= k) {
            p = std::move(e);
            say("expert split " + std::filesystem::path(split).filename().string());
            done = true;
          } else {
            say("expert split " + std::filesystem::path(split).filename().string() + " uses " + std::to_string(used) +
                " devices; generic rule (contiguous blocks by topological depth)");
          }
        } catch (const Error& err) {
          say(std::string("expert split unusable (") + err.what() + "); generic rule");
        }
      } else {
        say("generic rule: contiguous blocks by topological depth, balanced by compute");
      }
      if (!done) p.device = default_human_placement(g, k);
    }
  }
  for (std::int32_t d : p.device)
    GO_CHECK(d >= 0 && d < k, g.where(), "human placement uses device ", d, " but the cluster has ", k, " device(s)");
  colocate(g, p);
  return p;
}

}  // namespace go
