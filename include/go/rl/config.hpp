#pragma once
// TrainConfig: every setting of a PPO training run (go/rl/ppo.hpp), readable from and printable as
// JSON and saved inside every checkpoint. Defaults:
//
//   { "type": "go_ppo",
//     "policy": { ...go_policy config, see go/policy/config.hpp... },
//     "updates": 200,              // PPO updates of the run (the learning-rate schedule spans them)
//     "samples": 16,               // K plans sampled per graph and update
//     "graphs_per_update": 0,      // graphs visited per update, round robin (0: all of them)
//     "epochs": 4,                 // passes over the update's samples (1 to 1000)
//     "trainable": "all",          // all: every parameter; heads: the output layers only (the final
//                                  // layer norms, device query and embeddings, priority, fusion and
//                                  // value heads, the anchor's bias), the encoder and attention
//                                  // blocks kept as loaded (GoPolicy::set_heads_only; fine-tuning sets it)
//     "minibatch": 16,             // samples per gradient step (the samples of one graph in a
//                                  // minibatch share one pass, so a whole-batch step costs one pass)
//     "clip": 0.2,                 // PPO ratio clip
//     "ratio": "node",             // node: one ratio per op row (the plan's advantage on every row);
//                                  // plan: one ratio for the whole plan (sum of the rows' log-probs)
//     "entropy_coef": 0.0,         // entropy bonus (per-row mean); 0: at thousands of rows the bonus
//                                  // outweighs the plan-level signal and drives the policy to uniform
//     "value_coef": 0.5,
//     "lr": 0.001, "lr_schedule": "linear",   // constant | linear | cosine, from lr to lr * lr_final
//     "lr_final": 0.1, "warmup_updates": 0,   // linear warm-up from 0 over the first updates
//     "adam_beta1": 0.9, "adam_beta2": 0.999, "adam_eps": 1e-5,
//     "max_grad_norm": 0.5,        // global gradient-norm clip
//     "target_kl": 0.05,           // stop the update's epochs once the approximate KL > 1.5 x this (0: never)
//     "baseline": "batch_mean",    // per graph: batch_mean (mean reward of this update's K samples),
//                                  // ema (moving average of past updates' mean rewards), value (value head)
//     "baseline_decay": 0.9,       // ema: b <- decay b + (1 - decay) mean reward
//     "normalize_advantages": true,// divide each graph's advantages by their standard deviation
//     "reward": "neg_sqrt",        // neg_sqrt: -sqrt(t / t_ref); neg_ratio: -t / t_ref
//     "min_valid_reward": -3.0,    // a valid plan's reward is clipped from below to this ...
//     "invalid_reward": -4.0,      // ... so an invalid plan (out of memory, ...) is always worse: this constant,
//     "oom_excess_penalty": 1.0,   // minus, for out of memory, this x sum_d max(0, peak_d / capacity_d - 1)
//                                  // (capped at 10): 0 gives a purely fixed penalty (no signal among invalid plans)
//     "training": false,           // expand each graph into its training graph first (make_training_graph)
//     "colocate": true,            // decoding honours colocation groups
//     "anchor_placements": "default,human,pipeline,metis,m-etf,m-sct,heft,fit,spread,depth-first,relabel",  // the anchor's placements
//                                  // (go/rl/anchor.hpp; used when the policy's "anchor" is true)
//     "anchor_ties": "program,first-ready",  // orders of the ops of one priority level the anchor
//                                  // is chosen from: every candidate in the first, its best four in
//                                  // each other one; "latest" (latest in topological order first)
//                                  // is the third, "depth-first" the fourth; latest and first-ready
//                                  // when not listed are tried on those four as answers only, and
//                                  // the pipelined candidates (depth-first order) are answers only
//                                  // unless it is listed (go/rl/anchor.hpp Anchor::faster;
//                                  // bench/README.md "Latest-first order", "Pipelined plans")
//     "anchor_expert": "",         // a go-plan file or dnn-partitioning expert split whose devices are
//                                  // the anchor's human placement (one graph only; "": the human rule)
//     "reanchor": false,           // after an update that improved a graph's best plan, that plan's
//                                  // actions become its anchor, so later samples start from the best
//                                  // plan found rather than from the heuristic (fine-tuning sets it)
//     "block_moves": 0.0,          // fraction of samples whose devices on a random run of the rows
//                                  // or (half of them) of the depth-first topological order are set
//                                  // to one random device (annealing's move): proposals that can
//                                  // become the best plan but enter neither the baseline nor the
//                                  // loss (fine-tuning sets 0.5)
//     "block_base": "draw",        // what a block move not made on a starting point changes: draw: the
//                                  // sample the policy drew; anchor: the anchor's actions, as
//                                  // anchor-search's moves (the draw stays a proposal of its own)
//                                  // (fine-tuning sets anchor)
//     "alt_starts": 0,             // other starting points for block moves: of the anchor's candidates
//                                  // (go/rl/anchor.hpp), the best of each other placement whose step
//                                  // time is within alt_start_margin of the anchor's, at most this
//                                  // many; each is hill-climbed on its own (a block move on it that
//                                  // simulates faster replaces it), and any of its plans can become the
//                                  // best plan (and with reanchor the anchor) (fine-tuning sets 3)
//     "alt_start_moves": 0.0,      // fraction of the block moves made on one of them (uniformly)
//                                  // instead of on the policy's draw (fine-tuning sets 0.5)
//     "alt_start_margin": 0.05,    // a start's step time is at most (1 + this) x the anchor's
//     "path_moves": 0,             // after each update, simulations per chain of a hill-climb from each
//                                  // graph's anchor that changes only what its critical path says holds
//                                  // the step (go/rl/path_moves.hpp): a unit waiting for its device or
//                                  // for a transfer moves to another device, or its level or its
//                                  // blocker's changes by one; proposals, out of the loss, as block
//                                  // moves are (fine-tuning sets 32)
//     "path_chains": 2,            // such hill-climbs per update and graph, each from the anchor with its
//                                  // own random stream (run side by side); the fastest end is kept
//     "gather_moves": 0,           // after the first update, the ops (at most this many) of each graph's
//                                  // best plan that receive the most bytes from other devices moved to
//                                  // their top two senders, fitted to memory where they overflow
//                                  // (go/baselines/gather.hpp; PpoTrainer::gather_best); the fastest, where
//                                  // faster, becomes the best plan (fine-tuning sets 4)
//     "threads": 0,                // simulation threads (0: hardware concurrency); results do not depend on it
//     "checkpoint_every": 10,      // updates between checkpoints of a CLI run (0: only at the end)
//     "seed": 1 }                  // sampling and shuffling; the policy's "seed" initializes its parameters
//
// Every key is optional; an unknown key or a value out of range is a go::Error naming it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "go/core/error.hpp"
#include "go/core/file.hpp"
#include "go/policy/config.hpp"

namespace go::rl {

// Every placement the anchor can start from (go/rl/anchor.hpp), in the order it tries them; `fit` is
// the likeliest best candidate that runs out of memory with op sets moved off the devices that
// overflow (go/baselines/memory_fit.hpp), `spread` the best of the others with its fan-out ops spread over the devices, `depth-first` the two best
// pipelined (no priority levels, depth-first order, every op fused into its main producer) and, with
// `spread`, the spread one pipelined with its own fusion; `relabel`, last, the best with its devices
// relabelled for the least transfer time where links differ by pair (go/baselines/relabel.hpp).
inline const std::string kAnchorPlacements = "default,human,pipeline,metis,m-etf,m-sct,heft,fit,spread,depth-first,relabel";
// Every order of the ops of one priority level the anchor can try, and those it tries by default.
inline const std::string kAnchorTieOrders = "program,first-ready,latest,depth-first";
inline const std::string kAnchorTies = "program,first-ready";

// The items of a comma-separated list (empty items kept, for the caller to refuse).
inline std::vector<std::string> comma_items(const std::string& list) {
  std::vector<std::string> out;
  for (std::size_t b = 0; b <= list.size();) {
    const std::size_t e = std::min(list.find(',', b), list.size());
    out.push_back(list.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

// What is wrong with a comma-separated list whose items must be among `known` (also a list), each at
// most once; "" when nothing is.
inline std::string list_problem(const std::string& list, const std::string& known) {
  std::vector<std::string> seen;
  for (const std::string& m : comma_items(list)) {
    if (m.empty() || ("," + known + ",").find("," + m + ",") == std::string::npos)
      return "has '" + m + "', expected a comma-separated list of " + known;
    if (std::find(seen.begin(), seen.end(), m) != seen.end()) return "lists '" + m + "' twice";
    seen.push_back(m);
  }
  return "";
}

struct TrainConfig {
  policy::PolicyConfig policy;
  std::int64_t updates = 200;
  int samples = 16;
  int graphs_per_update = 0;
  int epochs = 4;
  std::string trainable = "all";
  int minibatch = 16;
  double clip = 0.2;
  std::string ratio = "node";
  double entropy_coef = 0.0;
  double value_coef = 0.5;
  double lr = 1e-3;
  std::string lr_schedule = "linear";
  double lr_final = 0.1;
  std::int64_t warmup_updates = 0;
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_eps = 1e-5;
  double max_grad_norm = 0.5;
  double target_kl = 0.05;
  std::string baseline = "batch_mean";
  double baseline_decay = 0.9;
  bool normalize_advantages = true;
  std::string reward = "neg_sqrt";
  double min_valid_reward = -3.0;
  double invalid_reward = -4.0;
  double oom_excess_penalty = 1.0;
  bool training = false;
  bool colocate = true;
  std::string anchor_placements = kAnchorPlacements;
  std::string anchor_ties = kAnchorTies;
  std::string anchor_expert;
  bool reanchor = false;
  double block_moves = 0.0;
  std::string block_base = "draw";
  int alt_starts = 0;
  double alt_start_moves = 0.0;
  double alt_start_margin = 0.05;
  int path_moves = 0;
  int path_chains = 2;
  int gather_moves = 0;
  int threads = 0;
  std::int64_t checkpoint_every = 10;
  std::uint64_t seed = 1;

  void validate() const {
    policy.validate();
    GO_CHECK(updates >= 0, "train config: \"updates\" is ", updates, ", must be >= 0");
    GO_CHECK(samples >= 2, "train config: \"samples\" is ", samples, ", must be >= 2");
    GO_CHECK(graphs_per_update >= 0, "train config: \"graphs_per_update\" is ", graphs_per_update, ", must be >= 0");
    // (an upper bound: a mistyped count would run the first update for days without a word)
    GO_CHECK(epochs >= 1 && epochs <= 1000, "train config: \"epochs\" is ", epochs,
             ", must be in [1, 1000] (PPO makes 3 to 10 passes over an update's samples)");
    GO_CHECK(trainable == "all" || trainable == "heads", "train config: \"trainable\" is '", trainable,
             "', expected all or heads");
    GO_CHECK(minibatch >= 1, "train config: \"minibatch\" is ", minibatch, ", must be >= 1");
    GO_CHECK(clip > 0 && clip < 1, "train config: \"clip\" is ", clip, ", must be in (0, 1)");
    GO_CHECK(ratio == "node" || ratio == "plan", "train config: \"ratio\" is '", ratio, "', expected node or plan");
    GO_CHECK(entropy_coef >= 0, "train config: \"entropy_coef\" is ", entropy_coef, ", must be >= 0");
    GO_CHECK(value_coef >= 0, "train config: \"value_coef\" is ", value_coef, ", must be >= 0");
    GO_CHECK(lr > 0, "train config: \"lr\" is ", lr, ", must be > 0");
    GO_CHECK(lr_schedule == "constant" || lr_schedule == "linear" || lr_schedule == "cosine",
             "train config: \"lr_schedule\" is '", lr_schedule, "', expected constant, linear or cosine");
    GO_CHECK(lr_final >= 0 && lr_final <= 1, "train config: \"lr_final\" is ", lr_final, ", must be in [0, 1]");
    GO_CHECK(warmup_updates >= 0, "train config: \"warmup_updates\" is ", warmup_updates, ", must be >= 0");
    GO_CHECK(adam_beta1 >= 0 && adam_beta1 < 1, "train config: \"adam_beta1\" is ", adam_beta1, ", must be in [0, 1)");
    GO_CHECK(adam_beta2 >= 0 && adam_beta2 < 1, "train config: \"adam_beta2\" is ", adam_beta2, ", must be in [0, 1)");
    GO_CHECK(adam_eps > 0, "train config: \"adam_eps\" is ", adam_eps, ", must be > 0");
    GO_CHECK(max_grad_norm > 0, "train config: \"max_grad_norm\" is ", max_grad_norm, ", must be > 0");
    GO_CHECK(target_kl >= 0, "train config: \"target_kl\" is ", target_kl, ", must be >= 0");
    GO_CHECK(baseline == "batch_mean" || baseline == "ema" || baseline == "value", "train config: \"baseline\" is '",
             baseline, "', expected batch_mean, ema or value");
    GO_CHECK(baseline_decay >= 0 && baseline_decay < 1, "train config: \"baseline_decay\" is ", baseline_decay,
             ", must be in [0, 1)");
    GO_CHECK(reward == "neg_sqrt" || reward == "neg_ratio", "train config: \"reward\" is '", reward,
             "', expected neg_sqrt or neg_ratio");
    GO_CHECK(invalid_reward < min_valid_reward, "train config: \"invalid_reward\" ", invalid_reward,
             " must be below \"min_valid_reward\" ", min_valid_reward);
    GO_CHECK(block_moves >= 0 && block_moves <= 1, "train config: \"block_moves\" is ", block_moves, ", must be in [0, 1]");
    GO_CHECK(block_base == "draw" || block_base == "anchor", "train config: \"block_base\" is '", block_base,
             "', expected draw or anchor");
    GO_CHECK(alt_starts >= 0, "train config: \"alt_starts\" is ", alt_starts, ", must be >= 0");
    GO_CHECK(alt_start_moves >= 0 && alt_start_moves <= 1, "train config: \"alt_start_moves\" is ", alt_start_moves,
             ", must be in [0, 1]");
    GO_CHECK(alt_start_margin >= 0, "train config: \"alt_start_margin\" is ", alt_start_margin, ", must be >= 0");
    GO_CHECK(path_moves >= 0, "train config: \"path_moves\" is ", path_moves, ", must be >= 0");
    GO_CHECK(gather_moves >= 0 && gather_moves <= 1024, "train config: \"gather_moves\" is ", gather_moves,
             ", must be in [0, 1024]");
    GO_CHECK(path_chains >= 1 && path_chains <= 64, "train config: \"path_chains\" is ", path_chains,
             ", must be in [1, 64]");
    GO_CHECK(oom_excess_penalty >= 0, "train config: \"oom_excess_penalty\" is ", oom_excess_penalty, ", must be >= 0");
    GO_CHECK(threads >= 0, "train config: \"threads\" is ", threads, ", must be >= 0");
    for (const auto& [key, list, known] : {std::tuple{"anchor_placements", &anchor_placements, &kAnchorPlacements},
                                           std::tuple{"anchor_ties", &anchor_ties, &kAnchorTieOrders}}) {
      const std::string problem = list_problem(*list, *known);
      GO_CHECK(problem.empty(), "train config: \"", key, "\" ", problem);
    }
    GO_CHECK(checkpoint_every >= 0, "train config: \"checkpoint_every\" is ", checkpoint_every, ", must be >= 0");
  }

  // Reading and writing the JSON above (src/rl/config.cpp).
  nlohmann::json to_json() const;
  static TrainConfig from_json(const nlohmann::json& j, const std::string& where = "train config");
  // The config saved in a checkpoint (its policy section upgraded as PolicyConfig::legacy_policy_json says).
  static TrainConfig from_saved_json(nlohmann::json j, const std::string& where);
  static TrainConfig parse(const std::string& text, const std::string& where = "train config");
  static TrainConfig load(const std::string& path) { return parse(read_file(path), path); }

  // The learning rate of update u (0-based): warm-up, then the schedule from lr to lr * lr_final
  // over the remaining updates.
  double lr_at(std::int64_t u) const {
    if (warmup_updates > 0 && u < warmup_updates) return lr * static_cast<double>(u + 1) / static_cast<double>(warmup_updates);
    const double span = static_cast<double>(std::max<std::int64_t>(updates - warmup_updates - 1, 1));
    const double f = std::min(1.0, std::max(0.0, static_cast<double>(u - warmup_updates) / span));
    if (lr_schedule == "linear") return lr * (1.0 - (1.0 - lr_final) * f);
    if (lr_schedule == "cosine") return lr * (lr_final + (1.0 - lr_final) * 0.5 * (1.0 + std::cos(3.14159265358979323846 * f)));
    return lr;
  }
};

}  // namespace go::rl
