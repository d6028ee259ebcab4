// GO as a placement method (go/rl/place_go.hpp): the bodies, compiled once into libgo.
#include "go/rl/place_go.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "go/baselines/place.hpp"
#include "go/baselines/relabel.hpp"
#include "go/core/error.hpp"
#include "go/core/file.hpp"
#include "go/nn/serialize.hpp"
#include "go/rl/anchor.hpp"
#include "go/rl/hdp.hpp"
#include "go/rl/ppo.hpp"

namespace go::rl {

namespace {

// GO's anchor from every heuristic placement, for the methods that use it without a policy
// (best-heuristic, anneal-anchor).
Anchor heuristic_anchor(const OpGraph& g, const Cluster& c, const PlaceOptions& po, BestTrace* trace = nullptr) {
  const Simulator sim(g, c, po.sim);
  const policy::PolicyGraph pg = policy::PolicyGraph::from_graph(g);
  return choose_anchor(g, pg, c, sim, TrainConfig{}.policy.priority_levels, true,
                       po.anchor_placements.empty() ? kAnchorPlacements : po.anchor_placements, po.seed, trace,
                       po.anchor_ties.empty() ? kAnchorTies : po.anchor_ties, 0, po.expert_split);
}

std::string ms(double t) {
  if (!std::isfinite(t)) return "OOM";
  char b[32];
  std::snprintf(b, sizeof b, "%.3f ms", t * 1e3);
  return b;
}

}  // namespace

TrainConfig finetune_config(const std::optional<TrainConfig>& saved, const policy::GoPolicy& policy,
                            std::int64_t finetune, int samples, std::uint64_t seed, const std::string& anchor_ties,
                            const std::string& anchor_placements, const std::string& anchor_expert) {
  TrainConfig cfg = saved.value_or(TrainConfig{});
  cfg.policy = policy.config();
  cfg.updates = std::max<std::int64_t>(0, finetune);
  cfg.seed = seed;
  cfg.graphs_per_update = 0;
  cfg.training = false;  // the graph is placed as given
  cfg.samples = samples;
  cfg.minibatch = samples;
  cfg.epochs = 1;  // one gradient step per update, on the sampling pass: a second epoch's pass changed no plan measurably
  cfg.trainable = "heads";  // the pre-trained encoder and blocks kept: training them changed no plan measurably
  cfg.anchor_placements = anchor_placements;  // by default every heuristic, whatever pre-training used
  cfg.anchor_ties = anchor_ties;                            // as best-heuristic's, so that the anchor is its plan
  cfg.anchor_expert = anchor_expert;
  cfg.reanchor = true;  // each improvement becomes the anchor: samples start from the best plan found
  cfg.block_moves = 0.5;
  cfg.block_base = "anchor";  // moves on the anchor (anchor-search's), not on the draws: 0.34% lower step
                              // times over 18 runs (bench/README.md "Block moves on the anchor")
  cfg.alt_starts = 3;  // half of the block moves on the best other heuristic plans within 5% of the anchor
  cfg.alt_start_moves = 0.5;
  cfg.path_moves = kFinetunePathMoves;  // after each update, critical-path moves from the best plan
  cfg.path_chains = kFinetunePathChains;
  cfg.gather_moves = kFinetuneGatherOps;  // after the first update, the largest receivers moved to their senders
  return cfg;
}

std::string GoPlaceReport::stages() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "stages s: trainer %.2f, policy %.2f, decisions %.2f", trainer_seconds, policy_seconds,
                decisions_seconds);
  std::string s = buf;
  if (finetune_seconds > 0) {
    std::snprintf(buf, sizeof buf, ", fine-tuning %.2f", finetune_seconds);
    s += buf;
  }
  return s;
}

Plan go_place(const OpGraph& g, const Cluster& c, const GoPlaceOptions& o, GoPlaceReport* report) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string& policy_path = o.policy;
  GO_CHECK(o.search_only || !policy_path.empty(),
           "go: no policy file (pass --policy <file>, e.g. policies/go-zoo-v100x248.ckpt)");
  if (!o.search_only) {
    std::error_code ec;
    GO_CHECK(std::filesystem::is_regular_file(policy_path, ec), "go: policy file '", policy_path,
             "' not found (pass --policy <file>)");
  }
  GO_CHECK(o.samples >= 1, "go: samples must be >= 1, got ", o.samples);
  GO_CHECK(o.finetune_samples >= 2, "go: finetune_samples must be >= 2, got ", o.finetune_samples);
  GO_CHECK(o.finetune >= 0, "go: finetune must be >= 0 updates, got ", o.finetune);
  GO_CHECK(o.time_limit >= 0, "go: time_limit must be >= 0 seconds, got ", o.time_limit);
  GO_CHECK(o.patience >= 0, "go: patience must be >= 0 updates, got ", o.patience);
  std::shared_ptr<policy::GoPolicy> pol;
  TrainConfig cfg;
  if (o.search_only) {
    // the network is never run: a default one carries the decoding settings (priority levels,
    // anchor) that best-heuristic and anneal-anchor use too
    policy::PolicyConfig pc;
    pc.max_devices = std::max(pc.max_devices, c.num_devices());
    pol = std::make_shared<policy::GoPolicy>(pc);
    cfg = finetune_config(std::nullopt, *pol, o.finetune, o.finetune_samples, o.seed, o.anchor_ties,
                          o.anchor_placements, o.expert);
    cfg.block_moves = 1.0;  // every proposal a block move on the anchor or a starting point
  } else {
    const LoadedTensors file = load_tensors(policy_path);  // read and checksummed once for the weights and the config
    pol = load_policy(file, policy_path);
    if (o.from_scratch) {
      policy::PolicyConfig pc = pol->config();
      pc.seed = o.seed + 1;  // a fresh draw of the same architecture
      pol = std::make_shared<policy::GoPolicy>(pc);
    }
    cfg = finetune_config(PpoTrainer::saved_config(file, policy_path), *pol, o.finetune, o.finetune_samples, o.seed,
                          o.anchor_ties, o.anchor_placements, o.expert);
    if (o.from_scratch) cfg.trainable = "all";  // nothing was pre-trained: every layer learns
  }
  GO_CHECK(c.num_devices() <= pol->config().max_devices, "go: cluster '", c.name, "' has ", c.num_devices(),
           " devices but the policy ", policy_path, " handles at most ", pol->config().max_devices);
  PpoTrainer t(cfg, {g}, c, pol);
  const GraphTask& task = t.task(0);
  GoPlaceReport rep;
  auto since = [](std::chrono::steady_clock::time_point a) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
  };
  rep.trainer_seconds = since(t0);
  const auto t1 = std::chrono::steady_clock::now();
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
  std::vector<std::pair<Plan, SimResult>> decisions;
  if (!o.search_only) decisions = t.zero_shot(0, o.samples, Rng(o.seed).fork(0x60ull << 56), &rep.policy_seconds);
  rep.decisions_seconds = since(t1) - rep.policy_seconds;
  const auto t2 = std::chrono::steady_clock::now();
  const Plan greedy = o.search_only ? Plan{} : decisions[0].first;
  for (std::size_t j = 0; j < decisions.size(); ++j)
    consider(std::move(decisions[j].first), decisions[j].second, j == 0 ? rep.greedy_step_time : rep.sampled_step_time);
  // the anchor, which a fresh policy decodes greedily, is a candidate too: zero-shot never answers
  // worse than the heuristic it starts from (simulated when the trainer was built)
  if (std::isfinite(task.anchor_step_time) && task.anchor_step_time < best_t) {
    best_t = task.anchor_step_time;
    best = task.best_plan;
  }
  if (task.anchor_faster) {
    rep.faster = task.anchor_faster->describe;
    rep.faster_step_time = task.anchor_faster->result.step_time;
    if (rep.faster_step_time < best_t) {
      best_t = rep.faster_step_time;
      best = task.anchor_faster->plan;
    }
  }
  auto within_time = [&] { return o.time_limit <= 0 || since(t0) < o.time_limit; };
  if (o.finetune > 0) {
    std::int64_t stale = 0;  // updates in a row that found no faster plan
    while (t.updates_done() < t.config().updates && within_time() && (o.patience <= 0 || stale < o.patience)) {
      const double before = t.task(0).best_step_time;
      if (o.search_only)
        t.search_round();
      else
        t.update();
      stale = t.task(0).best_step_time < before ? 0 : stale + 1;
      if (o.on_update)
        o.on_update({t.updates_done(), t.config().updates, std::min(best_t, t.task(0).best_step_time), since(t0),
                     o.time_limit});
    }
    rep.updates = t.updates_done();
    rep.patience_stop = o.patience > 0 && stale >= o.patience && rep.updates < t.config().updates;
    rep.finetuned_step_time = std::min(best_t, t.task(0).best_step_time);
    if (t.task(0).best_step_time < best_t) {
      best_t = t.task(0).best_step_time;
      best = t.task(0).best_plan;
    }
  }
  BestTrace trace = t.task(0).trace;
  trace.rebase(t0);
  if (o.finetune > 0 && std::isfinite(best_t)) {
    // the best plan's op sets on other devices where links differ by pair (go/baselines/relabel.hpp)
    SimWorkspace ws = task.sim->make_workspace();
    Relabelled r = relabel_devices(*task.sim, best, best_t, ws, &trace);  // counted in the trace
    if (r.step_time < best_t) {
      rep.relabelled_step_time = best_t = r.step_time;
      best = std::move(r.plan);
    }
  }
  if (o.finetune > 0) rep.finetune_seconds = since(t2);
  // nothing fits: the greedy plan (without the policy, the anchor's), so the caller sees why
  if (!std::isfinite(best_t))
    best = !o.search_only ? greedy
           : task.pg.has_anchor() ? t.plan_of(0, {task.pg.anchor_device, task.pg.anchor_priority, task.pg.anchor_fuse})
                                  : Plan{};
  GO_CHECK(trace.best() == best_t || (!std::isfinite(trace.best()) && !std::isfinite(best_t)), "go: the trace's best ",
           trace.best(), " differs from the answer's ", best_t, " (a simulation not recorded)");
  rep.simulations = trace.samples();
  rep.trace = trace.points();
  if (report) *report = rep;
  return best;
}

void register_go_methods(const std::string& default_policy, int samples, int finetune_samples) {
  enum class Kind { finetuned, zero_shot, one, search };
  auto run = [default_policy, samples, finetune_samples](Kind kind) {
    return [default_policy, samples, finetune_samples, kind](const OpGraph& g, const Cluster& c, const PlaceOptions& po,
                                                             PlaceResult& out) {
      GoPlaceOptions o;
      o.policy = po.policy.empty() ? default_policy : po.policy;
      o.samples = samples;
      o.finetune_samples = finetune_samples;
      o.seed = po.seed;
      o.time_limit = po.time_limit;
      o.patience = po.patience;
      o.from_scratch = kind == Kind::one;
      o.search_only = kind == Kind::search;
      if (!po.anchor_ties.empty()) o.anchor_ties = po.anchor_ties;
      if (!po.anchor_placements.empty()) o.anchor_placements = po.anchor_placements;
      o.expert = po.expert_split;
      const std::int64_t per_update = finetune_update_simulations(finetune_samples);
      GO_CHECK(po.finetune >= -1, "go: finetune must be >= 0 updates (or -1: the budget / ", per_update,
               ", the most simulations of one update), got ", po.finetune);
      const bool counted =
          kind == Kind::finetuned || kind == Kind::search || (kind == Kind::one && po.time_limit <= 0);
      GO_CHECK(!counted || po.finetune >= 0 || po.budget >= 1, "go: the budget must be at least 1 simulation, got ",
               po.budget);
      const std::int64_t updates =
          po.finetune >= 0 ? po.finetune : std::max<std::int64_t>(1, po.budget / per_update);
      o.finetune = kind == Kind::zero_shot ? 0 : counted ? updates : 100000;
      if (po.on_update)
        o.on_update = [&po, counted](UpdateProgress p) {
          if (!counted) p.updates = 0;  // go-one under a time limit: as many as fit in it
          po.on_update(p);
        };
      GoPlaceReport rep;
      Plan p = go_place(g, c, o, &rep);
      out.simulations = rep.simulations;
      out.note = "anchor " + rep.anchor + " " + ms(rep.anchor_step_time) + "; " +
                 (rep.faster.empty() ? "" : "other tie order " + rep.faster + " " + ms(rep.faster_step_time) + "; ");
      if (kind != Kind::search)
        out.note += std::string(kind == Kind::one ? "untrained" : "zero-shot") + " greedy " +
                    ms(rep.greedy_step_time) + ", best of " + std::to_string(samples) + " samples " +
                    ms(rep.sampled_step_time) + "; ";
      if (kind == Kind::search) {
        out.note += "searched " + std::to_string(rep.updates) + " rounds x " + std::to_string(finetune_samples) +
                    " block moves and " + std::to_string(kFinetunePathChains) + " x " +
                    std::to_string(kFinetunePathMoves) + " critical-path moves: ";
      } else if (kind != Kind::zero_shot) {
        out.note += std::string(kind == Kind::one ? "trained" : "fine-tuned") + " " +
                    std::to_string(rep.updates) + " updates x " + std::to_string(finetune_samples) + " samples: ";
      }
      if (kind != Kind::zero_shot) {
        // no update ran: there is no fine-tuned result to report (its time is unset, not OOM)
        if (rep.updates == 0)
          out.note += o.finetune == 0 ? "none asked (finetune 0)" : "none ran (the time limit was spent before the first)";
        else
          out.note += ms(rep.finetuned_step_time);
        if (rep.patience_stop)
          out.note += " (stopped: " + std::to_string(po.patience) + " updates in a row found no faster plan)";
        if (std::isfinite(rep.relabelled_step_time))
          out.note += "; devices relabelled: " + ms(rep.relabelled_step_time);
        out.note += "; ";
      }
      out.note += rep.stages() + "; " + BestTrace::trace_text(rep.trace);
      return p;
    };
  };
  PlaceMethod go{"go",
                 "GO: pre-trained policy fine-tuned on the graph with PPO, updates of " +
                     std::to_string(finetune_samples) + " samples, each followed by critical-path moves, the first also "
                     "by gather moves (--policy, --finetune, --time-limit, --patience)",
                 run(Kind::finetuned)};
  go.decides_fusion = true;
  go.reads = {PlaceOption::budget, PlaceOption::time_limit, PlaceOption::expert, PlaceOption::policy,
              PlaceOption::finetune, PlaceOption::anchor, PlaceOption::patience, PlaceOption::progress};
  register_place_method(go);
  PlaceMethod zs{
      "go-zero-shot",
      "GO zero-shot: pre-trained policy, greedy + best of " + std::to_string(samples) + " samples (--policy)",
      run(Kind::zero_shot)};
  zs.decides_fusion = true;
  zs.reads = {PlaceOption::expert, PlaceOption::policy, PlaceOption::anchor};
  register_place_method(zs);
  PlaceMethod one{"go-one",
                  "GO trained from scratch on this graph alone (the --policy file's architecture; "
                  "--time-limit, else as many updates as go)",
                  run(Kind::one)};
  one.decides_fusion = true;
  one.reads = go.reads;  // its updates: as go's without a time limit
  register_place_method(one);
  PlaceMethod search{"anchor-search",
                     "GO's fine-tuning search without the policy: from GO's anchor (the best-heuristic plan), rounds "
                     "of " + std::to_string(finetune_samples) + " block moves and critical-path moves (the first round also "
                     "gather moves), each improvement kept (--time-limit, else as many rounds as go's updates; needs no policy)",
                     run(Kind::search)};
  search.decides_fusion = true;
  search.reads = {PlaceOption::budget, PlaceOption::time_limit, PlaceOption::expert, PlaceOption::finetune,
                  PlaceOption::anchor, PlaceOption::patience, PlaceOption::progress};
  register_place_method(search);
  PlaceMethod bh{
      "best-heuristic",
      "the best of default/human/pipeline/METIS/m-ETF/m-SCT/HEFT placements x none/critical-path priorities x "
      "none/XLA-like fusion in program order, the fastest that runs out of memory fitted to it, the best four also "
      "in first-ready and latest-first order, the best with its fan-out ops spread, the best two and the spread one pipelined (depth-first order, no priorities), "
      "the best with its devices relabelled for the links, "
      "each simulated (GO's anchor and the plans GO compares its own with)",
      [](const OpGraph& g, const Cluster& c, const PlaceOptions& po, PlaceResult& out) {
        const Anchor a = heuristic_anchor(g, c, po);
        out.simulations = a.candidates;
        out.note = a.answer_describe();
        return a.answer();
      }};
  bh.decides_fusion = true;
  bh.reads = {PlaceOption::expert, PlaceOption::anchor};
  register_place_method(bh);
  PlaceMethod aa{"anneal-anchor",
                 "anneal starting also from GO's anchor (the best-heuristic plan), so it starts where GO does "
                 "(budget: simulations; --time-limit: seconds, the anchor's time included)",
                 [](const OpGraph& g, const Cluster& c, const PlaceOptions& po, PlaceResult& out) {
                   const auto t0 = std::chrono::steady_clock::now();
                   BestTrace trace(t0);
                   const Anchor a = heuristic_anchor(g, c, po, &trace);
                   // the anchor first: a budget too small for every start still simulates it
                   std::vector<Plan> starts{a.answer()};
                   for (Plan& p : go::detail::base::anneal_starts(g, c, po)) starts.push_back(std::move(p));
                   double limit = po.time_limit;
                   if (limit > 0)  // a spent limit still runs the starts: anneal needs a positive one
                     limit = std::max(
                         1e-9, limit - std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
                   const std::int64_t budget = std::max<std::int64_t>(1, po.budget - a.candidates);
                   Plan p = anneal_plan(g, c, budget, po.seed, po.sim, &out.simulations, starts, limit, &trace);
                   out.simulations += a.candidates;
                   out.note = "anchor " + a.answer_describe() + " " + ms(a.answer_result().step_time) + "; " +
                              trace.text();
                   return p;
                 }};
  aa.decides_fusion = true;
  aa.reads = {PlaceOption::budget, PlaceOption::time_limit, PlaceOption::expert, PlaceOption::anchor};
  register_place_method(aa);
  register_hdp_method();
}

}  // namespace go::rl
