#pragma once
// GO as a placement method: go::place("go" | "go-zero-shot" | "go-one" | "best-heuristic" |
// "anneal-anchor" | "hdp", ...)
// once register_go_methods() has run (gopt does it at start-up).
//
//   go-zero-shot  a pre-trained policy, no updates: the greedy decision and K = `samples` sampled
//                 decisions are simulated, the best valid one is the answer.
//   go            the same, then `finetune` PPO updates of `finetune_samples` (128) samples on this
//                 graph (PlaceOptions::finetune; -1 = budget / finetune_samples, so that GO gets the
//                 simulator budget the search baselines get), re-anchored on every improvement, half
//                 of the samples block moves, half of those made on the other heuristic plans within
//                 5% of the anchor, each hill-climbed on its own (finetune_config);
//                 the answer is the best valid plan seen: the anchor (go/rl/anchor.hpp, which the
//                 policy starts from), the zero-shot plans, or any plan sampled while fine-tuning.
//   go-one        GO trained from scratch on this graph alone (the paper's GO-one): a fresh network
//                 of the policy file's architecture, the same procedure as go.
//   best-heuristic the anchor plan on its own (go/rl/anchor.hpp): the best simulated combination of
//                 the heuristic placements, critical-path priorities and XLA-like fusion.
//   anneal-anchor annealing (go/baselines/search.hpp) whose starting plans are anneal's and GO's
//                 anchor, so it starts where GO starts; the time limit counts the anchor's time, as
//                 GO's does.
//
// The policy: PlaceOptions::policy, else the default given to register_go_methods() (gopt passes
// the policy shipped in policies/). A checkpoint of `gopt train` brings its training config
// (fine-tuning uses it with "updates", "seed" and "graphs_per_update" replaced); a bare policy file
// gets the TrainConfig defaults; the anchor is chosen from every heuristic of go/rl/anchor.hpp either
// way. PlaceOptions::seed seeds sampling. The note says what each stage reached.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "go/baselines/place.hpp"
#include "go/core/error.hpp"
#include "go/core/file.hpp"
#include "go/rl/hdp.hpp"
#include "go/rl/ppo.hpp"

namespace go::rl {

struct GoPlaceReport {
  std::string anchor;                   // the anchor's heuristics
  double anchor_step_time = kInf;
  double greedy_step_time = kInf;       // zero-shot greedy decision
  double sampled_step_time = kInf;      // best of the zero-shot samples
  double finetuned_step_time = kInf;    // best plan after fine-tuning (anchor and samples included)
  std::int64_t updates = 0;
  // Every simulation made, in order (go/baselines/best_trace.hpp): the reward reference's, the
  // anchor's candidates, the zero-shot plans, the fine-tuning samples. Its best is the answer's step
  // time, its seconds count from the start of go_place.
  std::int64_t simulations = 0;
  std::vector<TracePoint> trace;
};

namespace detail::go_method {

// GO's anchor from every heuristic placement, for the methods that use it without a policy
// (best-heuristic, anneal-anchor).
inline Anchor heuristic_anchor(const OpGraph& g, const Cluster& c, const PlaceOptions& po, BestTrace* trace = nullptr) {
  const Simulator sim(g, c, po.sim);
  const policy::PolicyGraph pg = policy::PolicyGraph::from_graph(g);
  return choose_anchor(g, pg, c, sim, TrainConfig{}.policy.priority_levels, true, kAnchorPlacements, po.seed, trace,
                       po.anchor_ties.empty() ? kAnchorTies : po.anchor_ties);
}

inline std::string ms(double t) {
  if (!std::isfinite(t)) return "OOM";
  char b[32];
  std::snprintf(b, sizeof b, "%.3f ms", t * 1e3);
  return b;
}

}  // namespace detail::go_method

// Samples per fine-tuning update of the go methods. A simulation costs far less than the policy's
// pass (50 us vs 50 ms per update on inception_v3, 863 ops; 11 ms vs 2.5 s on wavenet4, 59,770 ops),
// and with chain "hidden" one pass serves every sample, so 128 samples cost 1.0-1.6x the time of
// 16 and search 8x as many plans (bench/README.md "Fine-tuning: 128 samples per update, block
// moves in two orders").
inline constexpr int kFinetuneSamples = 128;

// The config of fine-tuning `policy` (read from `policy_path`) on one graph: the checkpoint's
// training config (TrainConfig defaults for a bare policy file) for `finetune` updates of `samples`
// samples in one minibatch (a gradient step per epoch, as with 16 samples: 128 in minibatches of 64
// took 1.7-1.8x the time, for plans better on two of four rows and worse on two), seeded by `seed`, on the graph as given, anchored on every
// heuristic and re-anchored on every improvement ("reanchor"), half of the samples block moves
// ("block_moves": a run of the rows or of the depth-first order on one device, annealing's move,
// outside the loss). Measured
// (bench/README.md "Fine-tuning: re-anchoring and block moves", "Fine-tuning: 128 samples per
// update, block moves in two orders"): with 16 samples re-anchoring helped (amoebanet x4 576.2 ->
// 558.1 ms) and block moves stalled gnmt4; with 128 samples and block moves in both orders, 8 of 9
// rows improve by 0.2-8.0% for 1.3-1.6x the time, and gnmt4 is not stalled.
inline TrainConfig finetune_config(const std::string& policy_path, const policy::GoPolicy& policy,
                                   std::int64_t finetune, int samples, std::uint64_t seed,
                                   const std::string& anchor_ties = kAnchorTies) {
  const LoadedTensors lt = load_tensors(policy_path);
  TrainConfig cfg = lt.meta.value("format", "") == "go-ppo-checkpoint"
                        ? TrainConfig::from_saved_json(lt.meta.at("config"), policy_path + ": config")
                        : TrainConfig{};
  cfg.policy = policy.config();
  cfg.updates = std::max<std::int64_t>(0, finetune);
  cfg.seed = seed;
  cfg.graphs_per_update = 0;
  cfg.training = false;  // the graph is placed as given
  cfg.samples = samples;
  cfg.minibatch = samples;
  cfg.anchor_placements = TrainConfig{}.anchor_placements;  // every heuristic, whatever pre-training used
  cfg.anchor_ties = anchor_ties;                            // as best-heuristic's, so that the anchor is its plan
  cfg.reanchor = true;  // each improvement becomes the anchor: samples start from the best plan found
  cfg.block_moves = 0.5;
  cfg.alt_starts = 3;  // half of the block moves on the best other heuristic plans within 5% of the anchor
  cfg.alt_start_moves = 0.5;
  return cfg;
}

struct GoPlaceOptions {
  std::string policy;          // a policy file or gopt train checkpoint
  std::int64_t finetune = 0;   // PPO updates on the graph (0: zero-shot only)
  int samples = 16;            // zero-shot samples
  int finetune_samples = kFinetuneSamples;  // samples per fine-tuning update
  std::uint64_t seed = 0;
  double time_limit = 0;       // > 0: no update starts once the whole call (anchor and zero-shot
                               // included) has run this many seconds
  bool from_scratch = false;   // go-one: a fresh network of the policy file's architecture (its
                               // "seed" re-drawn from `seed`), trained on this graph alone
  std::string anchor_ties = kAnchorTies;  // the anchor's tie orders (TrainConfig::anchor_ties)
};

// Runs GO on graph g (already the graph to place, e.g. a training graph) and returns its best plan.
inline Plan go_place(const OpGraph& g, const Cluster& c, const GoPlaceOptions& o, GoPlaceReport* report = nullptr) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string& policy_path = o.policy;
  GO_CHECK(!policy_path.empty(), "go: no policy file (pass --policy <file>, e.g. policies/go-zoo-v100x248.ckpt)");
  {
    std::error_code ec;
    GO_CHECK(std::filesystem::is_regular_file(policy_path, ec), "go: policy file '", policy_path,
             "' not found (pass --policy <file>)");
  }
  GO_CHECK(o.samples >= 1, "go: samples must be >= 1, got ", o.samples);
  GO_CHECK(o.finetune_samples >= 2, "go: finetune_samples must be >= 2, got ", o.finetune_samples);
  GO_CHECK(o.finetune >= 0, "go: finetune must be >= 0 updates, got ", o.finetune);
  GO_CHECK(o.time_limit >= 0, "go: time_limit must be >= 0 seconds, got ", o.time_limit);
  std::shared_ptr<policy::GoPolicy> pol = load_policy(policy_path);
  if (o.from_scratch) {
    policy::PolicyConfig pc = pol->config();
    pc.seed = o.seed + 1;  // a fresh draw of the same architecture
    pol = std::make_shared<policy::GoPolicy>(pc);
  }
  const TrainConfig cfg = finetune_config(policy_path, *pol, o.finetune, o.finetune_samples, o.seed, o.anchor_ties);
  GO_CHECK(c.num_devices() <= pol->config().max_devices, "go: cluster '", c.name, "' has ", c.num_devices(),
           " devices but the policy ", policy_path, " handles at most ", pol->config().max_devices);
  PpoTrainer t(cfg, {g}, c, pol);
  const GraphTask& task = t.task(0);
  GoPlaceReport rep;
  rep.anchor = task.anchor;
  rep.anchor_step_time = task.anchor_step_time;

  // zero-shot: greedy + `samples` samples, simulated; the best valid one
  Plan best;
  double best_t = kInf;
  auto consider = [&](Plan p, const SimResult& r, double& stage) {
    if (!r.valid || !std::isfinite(r.step_time)) return;
    stage = std::min(stage, r.step_time);
    if (r.step_time < best_t) {
      best_t = r.step_time;
      best = std::move(p);
    }
  };
  auto decisions = t.zero_shot(0, o.samples, Rng(o.seed).fork(0x60ull << 56));
  const Plan greedy = decisions[0].first;
  for (std::size_t j = 0; j < decisions.size(); ++j)
    consider(std::move(decisions[j].first), decisions[j].second, j == 0 ? rep.greedy_step_time : rep.sampled_step_time);
  // the anchor, which a fresh policy decodes greedily, is a candidate too: zero-shot never answers
  // worse than the heuristic it starts from (simulated when the trainer was built)
  if (std::isfinite(task.anchor_step_time) && task.anchor_step_time < best_t) {
    best_t = task.anchor_step_time;
    best = task.best_plan;
  }
  auto within_time = [&] {
    return o.time_limit <= 0 ||
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < o.time_limit;
  };
  if (o.finetune > 0) {
    while (t.updates_done() < t.config().updates && within_time()) t.update();
    rep.updates = t.updates_done();
    rep.finetuned_step_time = std::min(best_t, t.task(0).best_step_time);
    if (t.task(0).best_step_time < best_t) {
      best_t = t.task(0).best_step_time;
      best = t.task(0).best_plan;
    }
  }
  if (!std::isfinite(best_t)) best = greedy;  // nothing fits: the greedy plan, so the caller sees why
  BestTrace trace = t.task(0).trace;
  trace.rebase(t0);
  GO_CHECK(trace.best() == best_t || (!std::isfinite(trace.best()) && !std::isfinite(best_t)),
           "go: the trace's best ", trace.best(), " differs from the answer's ", best_t, " (a simulation not recorded)");
  rep.simulations = trace.samples();
  rep.trace = trace.points();
  if (report) *report = rep;
  return best;
}

inline Plan go_place(const OpGraph& g, const Cluster& c, const std::string& policy_path, std::int64_t finetune,
                     int samples, std::uint64_t seed, GoPlaceReport* report = nullptr,
                     int finetune_samples = kFinetuneSamples) {
  GoPlaceOptions o;
  o.policy = policy_path;
  o.finetune = finetune;
  o.samples = samples;
  o.finetune_samples = finetune_samples;
  o.seed = seed;
  return go_place(g, c, o, report);
}

// Registers "go", "go-zero-shot", "go-one", "best-heuristic" and "anneal-anchor" in the place
// registry (go/baselines/place.hpp), and "hdp" (go/rl/hdp.hpp); the last three need no policy. go and go-one stop
// at PlaceOptions::time_limit when it is set; go-one then trains until it (at most 100,000
// updates), else for as many updates as go.
inline void register_go_methods(const std::string& default_policy, int samples = 16,
                                int finetune_samples = kFinetuneSamples) {
  enum class Kind { finetuned, zero_shot, one };
  auto run = [default_policy, samples, finetune_samples](Kind kind) {
    return [default_policy, samples, finetune_samples, kind](const OpGraph& g, const Cluster& c, const PlaceOptions& po,
                                                             PlaceResult& out) {
      GoPlaceOptions o;
      o.policy = po.policy.empty() ? default_policy : po.policy;
      o.samples = samples;
      o.finetune_samples = finetune_samples;
      o.seed = po.seed;
      o.time_limit = po.time_limit;
      o.from_scratch = kind == Kind::one;
      if (!po.anchor_ties.empty()) o.anchor_ties = po.anchor_ties;
      const std::int64_t updates =
          po.finetune >= 0 ? po.finetune : std::max<std::int64_t>(1, po.budget / finetune_samples);
      o.finetune = kind == Kind::zero_shot ? 0 : kind == Kind::one && po.time_limit > 0 ? 100000 : updates;
      GoPlaceReport rep;
      Plan p = go_place(g, c, o, &rep);
      using detail::go_method::ms;
      out.simulations = rep.simulations;
      out.note = "anchor " + rep.anchor + " " + ms(rep.anchor_step_time) + "; " +
                 (kind == Kind::one ? "untrained" : "zero-shot") + " greedy " + ms(rep.greedy_step_time) +
                 ", best of " + std::to_string(samples) + " samples " + ms(rep.sampled_step_time);
      if (kind != Kind::zero_shot)
        out.note += std::string("; ") + (kind == Kind::one ? "trained" : "fine-tuned") + " " +
                    std::to_string(rep.updates) + " updates x " + std::to_string(finetune_samples) +
                    " samples: " + ms(rep.finetuned_step_time);
      out.note += "; " + BestTrace::trace_text(rep.trace);
      return p;
    };
  };
  PlaceMethod go{"go",
                 "GO: pre-trained policy fine-tuned on the graph with PPO, updates of " + std::to_string(finetune_samples) +
                     " samples (--policy, --finetune, --time-limit)",
                 run(Kind::finetuned)};
  go.decides_fusion = true;
  register_place_method(go);
  PlaceMethod zs{"go-zero-shot", "GO zero-shot: pre-trained policy, greedy + best of " + std::to_string(samples) +
                                     " samples (--policy)", run(Kind::zero_shot)};
  zs.decides_fusion = true;
  register_place_method(zs);
  PlaceMethod one{"go-one", "GO trained from scratch on this graph alone (the --policy file's architecture; "
                            "--time-limit, else as many updates as go)", run(Kind::one)};
  one.decides_fusion = true;
  register_place_method(one);
  PlaceMethod bh{"best-heuristic",
                 "the best of default/human/pipeline/METIS/m-ETF/m-SCT/HEFT placements x none/critical-path priorities x "
                 "none/XLA-like fusion in program order, the best four also in first-ready order, each simulated (what GO's "
                 "anchor starts from)",
                 [](const OpGraph& g, const Cluster& c, const PlaceOptions& po, PlaceResult& out) {
                   const Anchor a = detail::go_method::heuristic_anchor(g, c, po);
                   out.simulations = a.candidates;
                   out.note = a.describe();
                   return a.plan;
                 }};
  bh.decides_fusion = true;
  register_place_method(bh);
  PlaceMethod aa{"anneal-anchor",
                 "anneal starting also from GO's anchor (the best-heuristic plan), so it starts where GO does "
                 "(budget: simulations; --time-limit: seconds, the anchor's time included)",
                 [](const OpGraph& g, const Cluster& c, const PlaceOptions& po, PlaceResult& out) {
                   const auto t0 = std::chrono::steady_clock::now();
                   BestTrace trace(t0);
                   const Anchor a = detail::go_method::heuristic_anchor(g, c, po, &trace);
                   // the anchor first: a budget too small for every start still simulates it
                   std::vector<Plan> starts{a.plan};
                   for (Plan& p : go::detail::base::anneal_starts(g, c, po)) starts.push_back(std::move(p));
                   double limit = po.time_limit;
                   if (limit > 0)  // a spent limit still runs the starts: anneal needs a positive one
                     limit = std::max(1e-9, limit - std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
                   const std::int64_t budget = std::max<std::int64_t>(1, po.budget - a.candidates);
                   Plan p = anneal_plan(g, c, budget, po.seed, po.sim, &out.simulations, starts, limit, &trace);
                   out.simulations += a.candidates;
                   out.note = "anchor " + a.describe() + " " + detail::go_method::ms(a.result.step_time) + "; " +
                              trace.text();
                   return p;
                 }};
  aa.decides_fusion = true;
  register_place_method(aa);
  register_hdp_method();
}

}  // namespace go::rl
