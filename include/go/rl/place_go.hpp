#pragma once
// GO as a placement method: go::place("go" | "go-zero-shot" | "go-one" | "best-heuristic" |
// "anneal-anchor" | "anchor-search" | "hdp", ...)
// once register_go_methods() has run (gopt does it at start-up).
//
//   go-zero-shot  a pre-trained policy, no updates: the greedy decision and K = `samples` sampled
//                 decisions are simulated, the best valid one is the answer.
//   go            the same, then `finetune` PPO updates of `finetune_samples` (128) samples on this
//                 graph (PlaceOptions::finetune; -1 = budget / finetune_update_simulations, so that
//                 GO gets the simulator budget the search baselines get), from the fastest of the
//                 anchor and the zero-shot plans (PpoTrainer::zero_shot) and re-anchored on every
//                 improvement, half of the samples block moves, half of those made on the other
//                 heuristic plans within 5% of the anchor, each hill-climbed on its own, after the
//                 first update gather moves (go/baselines/gather.hpp), and after each update
//                 critical-path moves from the best plan (finetune_config); the best valid
//                 plan seen (the anchor (go/rl/anchor.hpp, which the policy starts from), the
//                 zero-shot plans, or any plan sampled while fine-tuning) is the answer, with its
//                 devices relabelled where that is faster (go/baselines/relabel.hpp: swaps of two
//                 devices' op sets, tried where links differ by pair; after the last update, so a
//                 time limit, which stops the updates, does not stop it).
//   go-one        GO trained from scratch on this graph alone (the paper's GO-one): a fresh network
//                 of the policy file's architecture, the same procedure as go but every layer trained.
//   best-heuristic the anchor plan on its own (go/rl/anchor.hpp): the best simulated combination of
//                 the heuristic placements, critical-path priorities and XLA-like fusion.
//   anneal-anchor annealing (go/baselines/search.hpp) whose starting plans are anneal's and GO's
//                 anchor, so it starts where GO starts; the time limit counts the anchor's time, as
//                 GO's does.
//   anchor-search go's fine-tuning with the policy taken out: from the same anchor and starting
//                 points, rounds (PpoTrainer::search_round) of finetune_samples block moves made on
//                 the anchor instead of on the policy's draws, then the same critical-path climbs,
//                 each improvement re-anchored, and the same final relabelling; no zero-shot, no
//                 network pass, no gradient step, no policy file. Rounds: as go's updates (or
//                 budget / finetune_update_simulations), cut by the time limit. The paper table's
//                 fairness column: at GO's wall time it measures what the learned policy adds to
//                 that search.
//
// The policy: PlaceOptions::policy, else the default given to register_go_methods() (gopt passes
// the policy shipped in policies/). A checkpoint of `gopt train` brings its training config
// (fine-tuning uses it with "updates", "seed" and "graphs_per_update" replaced); a bare policy file
// gets the TrainConfig defaults; the anchor is chosen from every heuristic of go/rl/anchor.hpp either
// way. PlaceOptions::seed seeds sampling. The note says what each stage reached.
// Declared here, compiled once into libgo (src/rl/place_go.cpp): a program that registers the
// methods compiles none of GO's policy, trainer or anchor code.
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "go/baselines/best_trace.hpp"
#include "go/baselines/common.hpp"
#include "go/graph/graph.hpp"
#include "go/rl/config.hpp"
#include "go/sim/cluster.hpp"
#include "go/sim/plan.hpp"

namespace go::policy {
class GoPolicy;
}

namespace go::rl {

struct GoPlaceReport {
  static constexpr double kNoTime = std::numeric_limits<double>::infinity();  // stage not reached
  std::string anchor;                    // the anchor's heuristics
  double anchor_step_time = kNoTime;
  double greedy_step_time = kNoTime;     // zero-shot greedy decision
  double sampled_step_time = kNoTime;    // best of the zero-shot samples
  double finetuned_step_time = kNoTime;  // best plan after fine-tuning (anchor and samples included)
  double relabelled_step_time = kNoTime; // that plan with its devices relabelled, when faster
                                         // (go/baselines/relabel.hpp; after fine-tuning only)
  std::string faster;                    // the anchor's candidate of another tie order, when faster
  double faster_step_time = kNoTime;     // (Anchor::faster; "" and kNoTime when there is none)
  std::int64_t updates = 0;
  bool patience_stop = false;  // fine-tuning ended by GoPlaceOptions::patience
  // Every simulation made, in order (go/baselines/best_trace.hpp): the anchor's candidates, the
  // reward reference's, the zero-shot plans (the greedy one only where it is not the anchor, whose
  // simulation it takes), the fine-tuning samples. Its best is the answer's step time, its seconds
  // count from the start of go_place.
  std::int64_t simulations = 0;
  std::vector<TracePoint> trace;
  // Wall seconds of each stage: loading the policy and building the trainer (the graph's features,
  // the anchor's candidates, the reward reference); zero-shot's policy pass; decoding and simulating
  // its decisions; fine-tuning (with the final relabelling).
  double trainer_seconds = 0, policy_seconds = 0, decisions_seconds = 0, finetune_seconds = 0;
  std::string stages() const;  // "stages s: trainer 2.03, policy 0.81, decisions 0.74[, fine-tuning 101.90]"
};

// Samples per fine-tuning update of the go methods. A simulation costs far less than the policy's
// pass (50 us vs 50 ms per update on inception_v3, 863 ops; 11 ms vs 2.5 s on wavenet4, 59,770 ops),
// and with chain "hidden" one pass serves every sample, so 128 samples cost 1.0-1.6x the time of
// 16 and search 8x as many plans (bench/README.md "Fine-tuning: 128 samples per update, block
// moves in two orders").
inline constexpr int kFinetuneSamples = 128;

// After each fine-tuning update, kFinetunePathChains hill-climbs of kFinetunePathMoves critical-path
// moves each from the best plan found (TrainConfig::path_moves, go/rl/path_moves.hpp): a unit of
// its critical path that waited for its device or a transfer moves to another device, or its level
// or its blocker's changes. The policy's draws and the block moves change rows wherever they are;
// the step time is set by one path. Measured (bench/README.md "Critical-path moves in fine-tuning"):
// 32 per chain lowers GO's plans by 0.5-3.8% on the paper table's rows but RNNLM (unchanged) for up
// to 45% more time, and the 80,588-op GNMT's by 9.4%; 128 gains little more for 1.2-1.6x the time.
inline constexpr int kFinetunePathMoves = 32;
inline constexpr int kFinetunePathChains = 2;
// Gather moves after fine-tuning's first update (TrainConfig::gather_moves, go/baselines/gather.hpp):
// the four ops that receive the most bytes from other devices, each to its two top senders, fitted
// to memory where they overflow. On gnmt8 at 121 steps (8 V100s) the encoder output's gradient sum
// so placed and fitted is 5.6% faster than the anchor, a move the searches otherwise find by chance
// (bench/README.md, "Gather moves"); on the paper table's rows it costs a few simulations.
inline constexpr int kFinetuneGatherOps = 4;
// The most simulations one fine-tuning update of `samples` samples makes: the samples, the climbs'
// start and their proposals. The first update's gather moves come on top (none where no op
// receives that much; else one per move, the fits of those that overflow, and one decode).
// Without a count of updates, the go methods run budget / this many, so that GO simulates about
// as many plans as the search baselines.
constexpr std::int64_t finetune_update_simulations(int samples) {
  return samples + 1 + static_cast<std::int64_t>(kFinetunePathChains) * kFinetunePathMoves;
}

// The config of fine-tuning `policy` (read from `policy_path`) on one graph: the checkpoint's
// training config (TrainConfig defaults for a bare policy file) for `finetune` updates of `samples`
// samples in one minibatch (a gradient step per epoch, as with 16 samples: 128 in minibatches of 64
// took 1.7-1.8x the time, for plans better on two of four rows and worse on two) and one epoch (the
// gradient step reuses the sampling pass, so an update costs one forward and one backward pass:
// without the pre-training config's second epoch GO takes 0.61-0.96x the time on the paper rows
// for plans within 1.1% either way, bench/README.md "Fine-tuning: one epoch") on the heads only
// ("trainable": the encoder and attention blocks keep their pre-trained weights, so the step
// back-propagates through the output layers alone: 0.80x the time on six paper rows, plans within
// 2% either way, the 80,588-op graph's the same in 0.83x the time and 0.55x the peak memory,
// bench/README.md "Fine-tuning the heads only"), seeded by `seed`, on the graph as given, anchored on every
// heuristic and re-anchored on every improvement ("reanchor"), half of the samples block moves
// ("block_moves": a run of the rows or of the depth-first order on one device, annealing's move,
// outside the loss), and after each update kFinetunePathChains climbs of kFinetunePathMoves
// critical-path moves from the best plan ("path_moves", "path_chains"). Measured
// (bench/README.md "Fine-tuning: re-anchoring and block moves", "Fine-tuning: 128 samples per
// update, block moves in two orders"): with 16 samples re-anchoring helped (amoebanet x4 576.2 ->
// 558.1 ms) and block moves stalled gnmt4; with 128 samples and block moves in both orders, 8 of 9
// rows improve by 0.2-8.0% for 1.3-1.6x the time, and gnmt4 is not stalled.
// `saved`: the training config saved with the policy (PpoTrainer::saved_config; nullopt for a policy
// saved alone), whose PPO settings fine-tuning keeps.
TrainConfig finetune_config(const std::optional<TrainConfig>& saved, const policy::GoPolicy& policy,
                            std::int64_t finetune, int samples, std::uint64_t seed,
                            const std::string& anchor_ties = kAnchorTies,
                            const std::string& anchor_placements = kAnchorPlacements,
                            const std::string& anchor_expert = {});

struct GoPlaceOptions {
  std::string policy;          // a policy file or gopt train checkpoint
  std::int64_t finetune = 0;   // PPO updates on the graph (0: zero-shot only)
  int samples = 16;            // zero-shot samples
  int finetune_samples = kFinetuneSamples;  // samples per fine-tuning update
  std::uint64_t seed = 0;
  std::int64_t patience = 0;   // > 0: no update starts after this many in a row found no faster plan
  double time_limit = 0;       // > 0: no update starts once the whole call (anchor and zero-shot
                               // included) has run this many seconds
  bool from_scratch = false;   // go-one: a fresh network of the policy file's architecture (its
                               // "seed" re-drawn from `seed`), trained on this graph alone
  bool search_only = false;    // anchor-search: no policy (`policy` unread), no zero-shot; each
                               // "update" a PpoTrainer::search_round from the anchor
  std::string anchor_ties = kAnchorTies;  // the anchor's tie orders (TrainConfig::anchor_ties)
  std::string anchor_placements = kAnchorPlacements;  // ... and placements (TrainConfig::anchor_placements)
  std::string expert;          // a plan file whose devices are the anchor's human placement
                               // (TrainConfig::anchor_expert; PlaceOptions::expert_split)
  std::function<void(const UpdateProgress&)> on_update;  // after each update (PlaceOptions::on_update)
};

// Runs GO on graph g (already the graph to place, e.g. a training graph) and returns its best plan.
Plan go_place(const OpGraph& g, const Cluster& c, const GoPlaceOptions& o, GoPlaceReport* report = nullptr);

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

// Registers "go", "go-zero-shot", "go-one", "best-heuristic", "anneal-anchor" and "anchor-search" in
// the place registry (go/baselines/place.hpp), and "hdp" (go/rl/hdp.hpp); the last four need no
// policy. go, go-one and anchor-search stop at PlaceOptions::time_limit when it is set; go-one then
// trains until it (at most 100,000 updates), else for as many updates as go.
void register_go_methods(const std::string& default_policy, int samples = 16, int finetune_samples = kFinetuneSamples);

}  // namespace go::rl
