#pragma once
// PPO training of the GO policy (go/policy) against the simulator (go/sim), on one graph (from
// scratch) or a set of graphs (pre-training), with checkpoints that resume bit-identically.
// The trainer's construction, zero_shot() and update() are compiled once into libgo
// (src/rl/ppo.cpp), with its search steps (src/rl/ppo_search.cpp: search_round, the critical-path
// climbs) and checkpoints (src/rl/ppo_checkpoint.cpp); the per-update stats and their CSV are
// go/rl/metrics.hpp.
//
// One update (PpoTrainer::update()):
//   1. graphs: all of them, or `graphs_per_update` of them round robin (with several clusters a
//      "graph" is a task: one graph on one cluster, each with its own simulator and device count);
//   2. per graph, K = `samples` plans from one GoPolicy::sample_many (one network pass for all K
//      with chain "hidden"; with chain "action" the priority and fusion blocks run per sample,
//      without gradients), keeping the actions and their per-row log-probabilities; with chain
//      "hidden" and one graph per update (per rank) the pass is recorded with gradients and the
//      first gradient step of 6 back-propagates through it (GoPolicy::backward_shared: the same bits
//      as a new pass, one pass less per update); sample k of graph i of update u
//      draws from Rng(seed).fork(u).fork(i << 32 | k), so nothing depends on the thread count;
//   3. decoding (policy::decode) and simulation of the K plans in parallel threads, one
//      SimWorkspace per thread and graph;
//   4. reward r = -sqrt(t / t_ref) (or -t / t_ref), clipped below at min_valid_reward; a plan the
//      simulator rejects (out of memory, ...) gets invalid_reward, never an abort; an out-of-memory
//      plan additionally loses oom_excess_penalty x (sum over devices of peak / capacity - 1 where
//      over, at most 10), which points the gradient toward plans that fit when none does yet. t_ref is the
//      step time of the default plan (every op on device 0); when that is invalid, the zoo's
//      human-expert placement; when that is invalid or unknown, the sum of the ops' compute times
//      on device 0 (always finite);
//   5. advantages A = r - b per graph (b: this batch's mean reward, an EMA of past means, or the
//      value head), divided by the graph's batch standard deviation when normalize_advantages;
//   6. `epochs` passes over the samples shuffled into minibatches: per minibatch and graph one
//      teacher-forced pass over its samples (with chain "hidden" GoPolicy::backward_shared, every
//      sample's loss in one op over the pass's log-softmax, go/rl/ppo_loss.hpp; with "action"
//      GoPolicy::backward_many, a loss per sample), the minibatch's mean of each sample's loss
//      -mean(min(rho A, clip(rho, 1 -/+ clip) A)) - entropy_coef * entropy + value_coef * (V - r)^2,
//      rho = exp(log pi - log pi_old) per op row (ratio "node") or for the whole plan (ratio
//      "plan"); global-norm clipping and Adam at the update's learning rate; the epochs stop early
//      once the approximate KL exceeds 1.5 x target_kl;
//   7. the best valid plan ever simulated is kept per graph: it is the optimizer's answer. With an
//      anchored policy (config policy.anchor, go/rl/anchor.hpp) the anchor plan, which a fresh
//      policy decodes greedily, is the first best plan (update 0).
//
// Checkpoints (save_checkpoint/load_checkpoint) are one go-parameters file (written atomically):
// the policy parameters ("policy/<name>"), Adam's moments ("adam.m/<name>", "adam.v/<name>"),
// and in its metadata the full config, the update counter, Adam's step, and per graph the
// reference time, the EMA baseline, the best plan and the counters. The random streams are
// functions of (seed, update), so no generator state needs saving: a resumed run ends with
// parameters bit-identical to an uninterrupted one (with the same thread-independent kernels).
//
// Distributed training (set_communicator, go/rl/distributed.hpp; MPI in go/rl/mpi.hpp): R ranks
// run the same updates in lockstep and hold identical parameters (set_communicator broadcasts rank
// 0's parameters and Adam moments). The samples of an update are the same for every R: rank r
// samples and simulates the contiguous share [N r / R, N (r + 1) / R) of the update's N samples
// (ordered graph by graph, so in pre-training a rank sees a share of the graphs) with the same
// random streams as above; the owners then broadcast the actions and old log-probabilities, and
// one allreduce gathers every sample's reward, value, validity and step time, so each rank
// computes the same rewards, advantages, counters and best plans (a rank that did not simulate
// the new best plan decodes it from the actions). In the epochs, every rank shuffles the same way;
// position p of a minibatch is back-propagated by rank p mod R with the same 1 / minibatch weight,
// and one allreduce sums the gradients before the clipping and Adam, so all ranks take the same
// step. The statistics (and the per-epoch KL of the early stop) are summed over ranks too. One
// rank and R ranks thus differ only in the order in which floats are summed. Only rank 0 writes
// checkpoints (save_checkpoint is a no-op elsewhere); on resume every rank loads the checkpoint.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "go/autograd/autograd.hpp"
#include "go/core/error.hpp"
#include "go/core/file.hpp"
#include "go/core/parallel.hpp"
#include "go/core/rng.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/training.hpp"
#include "go/graph/zoo.hpp"
#include "go/optim/adam.hpp"
#include "go/policy/decode.hpp"
#include "go/rl/anchor.hpp"
#include "go/policy/features.hpp"
#include "go/policy/policy.hpp"
#include "go/policy/to_plan.hpp"
#include "go/rl/config.hpp"
#include "go/rl/distributed.hpp"
#include "go/rl/metrics.hpp"
#include "go/sim/cluster.hpp"
#include "go/sim/plan.hpp"
#include "go/sim/simulator.hpp"

namespace go {
struct LoadedTensors;  // go/nn/serialize.hpp
}  // namespace go

namespace go::rl {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// A run [begin, end) of rows, or of positions in the graph's depth-first topological order
// (GraphTask::block_rows) when `depth_first`, whose devices were all set to `device`.
struct BlockMove {
  std::int64_t begin = 0, end = 0;
  std::int32_t device = 0;
  bool depth_first = false;
  std::int32_t start = -1;  // >= 0: the run was moved on GraphTask::starts[start], not on the policy's draw
};

// One graph being optimized, with what the trainer learned about it.
struct GraphTask {
  std::string name;
  std::unique_ptr<OpGraph> graph;      // owned: the simulator keeps a pointer to it
  policy::PolicyGraph pg;
  std::unique_ptr<Simulator> sim;
  double reference = 0;                // t_ref (seconds)
  std::string reference_kind;          // default | human | compute_sum
  double ema = 0;                      // EMA baseline of the mean reward
  bool ema_init = false;
  double best_step_time = kInf;        // best valid plan so far (+inf: none yet)
  Plan best_plan;
  std::int64_t best_update = -1;       // the update that found it
  std::int64_t samples = 0, invalid = 0;
  std::string anchor;                  // the anchor plan's heuristics ("" without an anchor)
  double anchor_step_time = kInf;      // its step time (+inf: out of memory)
  std::optional<Anchor::Faster> anchor_faster;  // Anchor::faster: an answer, never a starting point
  // The anchor's actions, how they decode (tie order, join), its plan and its whole simulation,
  // when it fits: zero_shot() takes them for a greedy decision of the same actions instead of
  // decoding and simulating the anchor again (a fresh anchored policy's greedy decision is it), and
  // plan_of the plan's devices and fusion groups for any of the same device and fusion actions.
  struct Decided {
    policy::Actions actions;
    policy::TieOrder ties = policy::TieOrder::program;
    policy::FusionJoin join = policy::FusionJoin::all;
    Plan plan;
    SimResult result;
  };
  std::optional<Decided> anchor_decision;
  // How some actions decode (policy::DecodeLog) and the device and fuse actions it was made from.
  struct Logged {
    std::shared_ptr<const policy::DecodeLog> log;
    policy::Actions of;  // device and fuse only
  };
  // How the current anchor's actions (pg's, which fine-tuning moves to each improvement) decode:
  // plan_of decodes other actions from it (policy::decode's `base`), so a move changes only what
  // comes after its first moved op. Made by refresh_logs before the decodes of a round.
  Logged anchor_log;
  // The same for each of `starts` (below): a block move on a start decodes from its start's log.
  std::vector<Logged> start_logs;
  // Every simulation of this graph's plans, in order: the anchor's candidates, the reference's (a
  // sample, never an answer), zero_shot()'s decisions (its greedy one only where that is not the
  // anchor's, anchor_decision) and update()'s samples (greedy_plan() is not recorded).
  BestTrace trace;
  std::vector<std::vector<SimWorkspace>> workspaces;  // per thread (internal)
  // Rows in depth_first_topo_order, the order of annealing's device moves (go/baselines/search.hpp):
  // it follows a chain to its end, so one run covers, e.g., one time chunk's backward through many
  // layers, which the rows' own (Kahn's) order splits into hundreds of runs; the rows' order keeps
  // parallel branches together instead (half of the block moves use each).
  std::vector<std::int32_t> block_rows;
  // Other starting points of block moves (TrainConfig::alt_starts): actions and step time, each the
  // best plan found from it so far. Annealing from another heuristic plan ends elsewhere (WaveNet:
  // from the human plan it reaches plans the METIS anchor's neighbourhood does not have).
  std::vector<std::pair<policy::Actions, double>> starts;
};

class PpoTrainer {
 public:
  // graphs: forward graphs (expanded to training graphs when cfg.training). policy: a pre-trained
  // policy to start from (fine-tuning), or null for a fresh one from cfg.policy.
  PpoTrainer(TrainConfig cfg, std::vector<OpGraph> graphs, Cluster cluster,
             std::shared_ptr<policy::GoPolicy> policy = nullptr)
      : PpoTrainer(std::move(cfg), std::move(graphs), std::vector<Cluster>{std::move(cluster)}, std::move(policy)) {}

  // Training on several clusters at once (one policy for any device count up to max_devices): one
  // task per graph and cluster, graph-major (graph 0 on each cluster, then graph 1, ...), so round
  // robin over tasks alternates the clusters. With more than one cluster a task is named
  // "<graph>@<cluster>".
  PpoTrainer(TrainConfig cfg, std::vector<OpGraph> graphs, std::vector<Cluster> clusters,
             std::shared_ptr<policy::GoPolicy> policy = nullptr);

  const TrainConfig& config() const { return cfg_; }
  // Changes the total number of updates (and with it the learning-rate schedule).
  void set_updates(std::int64_t n) {
    GO_CHECK(n >= 0, "ppo: updates must be >= 0, got ", n);
    cfg_.updates = n;
  }
  void set_threads(int n) { cfg_.threads = std::max(0, n); }
  // Makes this trainer one rank of a distributed run (go/rl/distributed.hpp; the header comment
  // above). Call on every rank with the same graphs, cluster and config, after load_checkpoint
  // when resuming and before the first update: rank 0's parameters and Adam moments are broadcast
  // to all ranks, and ranks at a different update (or Adam step) than rank 0 fail.
  void set_communicator(std::shared_ptr<Communicator> comm) {
    comm_ = comm ? std::move(comm) : local_communicator();
    if (comm_->size() == 1) return;
    std::vector<Tensor> state;
    for (const auto& p : params_) state.push_back(p.value());
    for (const auto& m : adam_->first_moments()) state.push_back(m);
    for (const auto& v : adam_->second_moments()) state.push_back(v);
    broadcast_values(*comm_, state, 0);
    std::int64_t counters[2] = {updates_done_, static_cast<std::int64_t>(adam_->step_count())};
    comm_->broadcast(counters, sizeof counters, 0);
    GO_CHECK(counters[0] == updates_done_ && counters[1] == adam_->step_count(), "ppo: rank ", comm_->rank(),
             " is at update ", updates_done_, " (Adam step ", adam_->step_count(), "), rank 0 at update ", counters[0],
             " (Adam step ", counters[1], "): every rank must load the same checkpoint");
  }
  const Communicator& communicator() const { return *comm_; }
  // The first cluster (the only one unless several were given) and all of them.
  const Cluster& cluster() const { return clusters_.front(); }
  const std::vector<Cluster>& clusters() const { return clusters_; }
  std::shared_ptr<policy::GoPolicy> policy() const { return policy_; }
  std::int64_t updates_done() const { return updates_done_; }
  std::size_t num_graphs() const { return tasks_.size(); }
  const GraphTask& task(std::size_t i) const { return *tasks_.at(i); }

  // The reward of one simulation of graph `i`'s plan.
  double reward(std::size_t i, const SimResult& r) const {
    if (!r.valid || !std::isfinite(r.step_time)) {
      double v = cfg_.invalid_reward;
      if (r.status == SimStatus::out_of_memory && cfg_.oom_excess_penalty > 0) {
        v -= cfg_.oom_excess_penalty * std::min(memory_excess(r, tasks_[i]->sim->cluster()), 10.0);
      }
      return v;
    }
    const double x = r.step_time / tasks_[i]->reference;
    const double v = cfg_.reward == "neg_sqrt" ? -std::sqrt(x) : -x;
    return std::max(v, cfg_.min_valid_reward);
  }

  // The plan of a greedy (most likely) decision for graph i, and its simulation.
  std::pair<Plan, SimResult> greedy_plan(std::size_t i) const {
    const GraphTask& t = *tasks_.at(i);
    NoGradGuard ng;
    const auto out = policy_->forward(t.pg, t.sim->cluster().num_devices(), policy::Decode::greedy);
    Plan p = plan_of(t, out.actions);
    SimResult r = t.sim->simulate(p);
    return {std::move(p), std::move(r)};
  }

  // The plan that actions (rows in graph i's policy order) decode to, as update() decodes samples.
  Plan plan_of(std::size_t i, const policy::Actions& a) const { return plan_of(*tasks_.at(i), a); }

  // Zero-shot decisions for graph i: [0] the greedy one, [1 + k] the one sampled with base.fork(k),
  // k < samples; decoded and simulated on the config's threads (the results do not depend on them).
  // With chain "hidden" all of them come from one policy pass.
  // They are recorded in the task's trace in that order, but for a greedy decision that is the
  // anchor's actions: that is the anchor's plan and simulation (GraphTask::anchor_decision). The
  // fastest valid one, where faster than the graph's best plan, becomes it (and with reanchor the
  // anchor), as an update's samples do.
  // `policy_seconds` (optional): the wall time of the policy's passes, the rest being decoding and
  // simulating.
  std::vector<std::pair<Plan, SimResult>> zero_shot(std::size_t i, int samples, const Rng& base,
                                                    double* policy_seconds = nullptr);

  // One PPO update.
  UpdateStats update();

  // One round of the fine-tuning's search without the policy (the anchor-search method): per
  // graph of the round (as update() selects them), `samples` block moves (draw_block_move, every
  // sample one: the config's block_moves must be 1) made on the anchor's actions instead of on a
  // draw of the policy, or on a starting point, decoded and simulated like update()'s samples;
  // the fastest improvement becomes the best plan and, with reanchor, the anchor; then, with
  // path_moves, the critical-path climbs from it (climb_paths). No pass of the network and no
  // gradient step; it counts as an update (updates_done() and the rng of the same update index).
  // Single-process only.
  UpdateStats search_round();

  // Runs updates until `updates_done() == config().updates`; `on_update` sees each update's stats.
  void train(const std::function<void(const UpdateStats&)>& on_update = {}) {
    while (updates_done_ < cfg_.updates) {
      UpdateStats s = update();
      if (on_update) on_update(s);
    }
  }

  // ---- checkpoints --------------------------------------------------------------------------

  // Writes the checkpoint on rank 0; does nothing on the other ranks of a distributed run.
  void save_checkpoint(const std::string& path) const;

  // Restores a checkpoint of a run on the same graphs and cluster with the same config (the
  // "updates", "threads" and "checkpoint_every" keys may differ). The checkpoint's "updates"
  // replaces this run's (set_updates() afterwards to change it; the learning-rate schedule spans
  // it, so a resumed run matches an uninterrupted one only with the same total).
  void load_checkpoint(const std::string& path);

  // The training config stored in a checkpoint.
  static TrainConfig checkpoint_config(const std::string& path);
  // The training config of a file read with load_tensors from `path`: nullopt where it is not a PPO
  // checkpoint (a policy saved alone); a checkpoint whose config is missing or malformed is an error
  // naming the file. The one place that tells the two kinds of parameter file apart.
  static std::optional<TrainConfig> saved_config(const LoadedTensors& lt, const std::string& path);

  // ---- block moves (public for their tests) ---------------------------------------------------

  // With probability block_moves, a sample's devices on a run (start uniform, length log-uniform
  // in [1, n / D]) of the rows or, with probability 1/2, of the depth-first topological order
  // (GraphTask::block_rows) are set to one random device, the move annealing makes: per-row
  // sampling almost never moves a whole block, and a lone moved op mostly adds transfers. Such a
  // sample is a proposal, not a draw of the policy: it can become the best plan (and with reanchor
  // the anchor) but enters neither the baseline nor the loss, whose advantages would otherwise
  // credit the block's cost to the rows the policy drew. With block_base "anchor" a move is made on
  // the anchor's actions instead of on the draw; with alt_starts, a fraction alt_start_moves of
  // the moves is made on one of GraphTask::starts instead of either. Drawn
  // from the update's rng by graph and sample index, so every rank draws the same move for a sample.
  BlockMove draw_block_move(const GraphTask& t, const Rng& urng, std::size_t graph, std::size_t k) const {
    BlockMove m;
    const int num_devices = t.sim->cluster().num_devices();
    const std::int64_t n = t.pg.num_nodes;
    Rng r = urng.fork((1ull << 62) | (static_cast<std::uint64_t>(graph) << 32) | k);
    if (cfg_.block_moves <= 0 || num_devices < 2 || n < 1 || r.uniform_double() >= cfg_.block_moves) return m;
    const double log_max = std::log(std::max(1.0, static_cast<double>(n) / num_devices));
    const auto len = static_cast<std::int64_t>(std::exp(r.uniform_double() * log_max));
    m.begin = static_cast<std::int64_t>(r.uniform_int(static_cast<std::uint64_t>(n)));
    m.end = std::min(n, m.begin + std::max<std::int64_t>(1, len));
    m.device = static_cast<std::int32_t>(r.uniform_int(static_cast<std::uint64_t>(num_devices)));
    m.depth_first = r.uniform_double() < 0.5;
    if (!t.starts.empty() && r.uniform_double() < cfg_.alt_start_moves)
      m.start = static_cast<std::int32_t>(r.uniform_int(t.starts.size()));
    return m;
  }
  // The actions of a block-moved sample: `drawn` (or, for a move on a starting point, that start's
  // actions) with the devices of m's run set to m.device, in a copy of the device tensor. A run
  // already all on m.device (12-21% of anchor-search's moves on Inception-v3, 2 devices) would
  // repeat its base, a simulation that finds nothing: m.device becomes one of the others instead,
  // which one set by m.begin (drawn uniformly), so the move stays a function of the update's rng
  // and the base.
  // The graph's anchor actions (its PolicyGraph's), as one Actions.
  static policy::Actions anchor_actions(const GraphTask& t) {
    return {t.pg.anchor_device, t.pg.anchor_priority, t.pg.anchor_fuse};
  }
  static policy::Actions block_moved(const GraphTask& t, BlockMove& m, const policy::Actions& drawn) {
    const policy::Actions& base = m.start >= 0 ? t.starts[static_cast<std::size_t>(m.start)].first : drawn;
    policy::Actions a{base.device.clone(), base.priority, base.fuse};
    std::int32_t* dev = a.device.data<std::int32_t>();
    auto row = [&](std::int64_t p) { return m.depth_first ? t.block_rows[static_cast<std::size_t>(p)] : p; };
    bool changes = false;
    for (std::int64_t p = m.begin; p < m.end && !changes; ++p) changes = dev[row(p)] != m.device;
    const std::int64_t D = t.sim->cluster().num_devices();
    if (!changes && D >= 2) m.device = static_cast<std::int32_t>((m.device + 1 + m.begin % (D - 1)) % D);
    for (std::int64_t p = m.begin; p < m.end; ++p) dev[row(p)] = m.device;
    return a;
  }

 private:
  // Actions in a checkpoint: {"device": [...], "priority": [...], "fuse": [...]}, one entry per row.
  static nlohmann::json actions_json(const policy::Actions& a);
  // `devices`, `levels`: every device action must be below the first, every priority below the second.
  static policy::Actions actions_from_json(const nlohmann::json& j, std::int64_t rows, const std::string& what,
                                           std::int32_t devices, std::int32_t levels);

  // One simulated sample or proposal of graph t, as update() and search_round() take them: counted,
  // recorded in the trace at `at` (seconds since its origin), counted invalid where it is, and where
  // it is a valid block move on a starting point (m.start) faster than that start, the start's new
  // actions.
  static void record_simulated(GraphTask& t, bool valid, double step_time, double at, const BlockMove& m,
                               const policy::Actions& actions) {
    ++t.samples;
    t.trace.add_at(valid, step_time, at);
    if (!valid) {
      ++t.invalid;
      return;
    }
    if (m.start >= 0 && step_time < t.starts[static_cast<std::size_t>(m.start)].second)
      t.starts[static_cast<std::size_t>(m.start)] = {actions.clone(), step_time};
  }
  // A plan faster than graph t's best becomes it, found by update `update` (0: before the first),
  // and with reanchor (on an anchored policy) its actions become the anchor.
  void adopt_best(GraphTask& t, double step_time, Plan plan, std::int64_t update, policy::Actions actions) const {
    t.best_step_time = step_time;
    t.best_plan = std::move(plan);
    t.best_update = update;
    if (cfg_.reanchor && cfg_.policy.anchor)
      t.pg.set_anchor(std::move(actions.device), std::move(actions.priority), std::move(actions.fuse));
  }
  // The graphs (indices into tasks_) of update u: all of them, or graphs_per_update round robin.
  std::vector<std::size_t> graphs_of_update(std::int64_t u) const {
    const std::size_t G = tasks_.size();
    const std::size_t m =
        cfg_.graphs_per_update <= 0 ? G : std::min<std::size_t>(G, static_cast<std::size_t>(cfg_.graphs_per_update));
    std::vector<std::size_t> sel;
    for (std::size_t j = 0; j < m; ++j) sel.push_back((static_cast<std::size_t>(u) * m + j) % G);
    return sel;
  }
  // Reference / best step time, mean over the graphs `sel` (0 for one with no valid plan yet).
  double best_speedup(const std::vector<std::size_t>& sel) const {
    double sp = 0;
    for (std::size_t gi : sel)
      sp += std::isfinite(tasks_[gi]->best_step_time) ? tasks_[gi]->reference / tasks_[gi]->best_step_time : 0.0;
    return sp / static_cast<double>(sel.size());
  }
  // After an update (TrainConfig::path_moves): path_chains hill-climbs of critical-path moves
  // (go/rl/path_moves.hpp) from graph t's anchor, side by side; the fastest end that beats the
  // graph's best plan becomes it (and with reanchor the anchor). Every simulation goes into the
  // trace, the start's first, then each chain's in chain order.
  void climb_paths(GraphTask& t, std::size_t graph, const Rng& urng, std::int64_t update);
  // Gather moves (go/baselines/gather.hpp) on graph t's best plan: each simulated whole, one out of
  // memory but faster fitted to it with every other device a target (go/baselines/memory_fit.hpp);
  // the fastest that fits, decoded from its actions, becomes the best plan where faster (and with
  // reanchor the anchor). Every simulation goes into the trace.
  void gather_best(GraphTask& t, std::int64_t update);
  // Simulation workspaces per thread and graph, made on a thread's first use and kept for later
  // batches (zero_shot's and every update's).
  static void reserve_workspaces(GraphTask& t, int nthreads) {
    while (static_cast<int>(t.workspaces.size()) < nthreads) t.workspaces.emplace_back();
  }
  static SimWorkspace& workspace_of(GraphTask& t, int tid) {
    auto& wsv = t.workspaces[static_cast<std::size_t>(tid)];
    if (wsv.empty()) wsv.push_back(t.sim->make_workspace());
    return wsv[0];
  }
  // Actions with the anchor's device and fusion actions (and join) take its devices and fusion
  // groups, the costly part of decoding, and decode only the priorities (policy::decode's
  // `same_placement`): the shipped policy's greedy decision on gnmt8 at 121 steps moves only levels.
  // Other actions decode from `base` (by default the current anchor's log, GraphTask::anchor_log),
  // where there is one.
  Plan plan_of(const GraphTask& t, const policy::Actions& a) const { return plan_of(t, a, t.anchor_log.log.get()); }
  Plan plan_of(const GraphTask& t, const policy::Actions& a, const policy::DecodeLog* base) const {
    policy::DecodeOptions o;
    o.colocate = cfg_.colocate;
    const int D = t.sim->cluster().num_devices();
    const GraphTask::Decided* anchor = t.anchor_decision ? &*t.anchor_decision : nullptr;
    if (anchor && anchor->join == t.pg.join && policy::same_task_actions(a.device, anchor->actions.device) &&
        policy::same_task_actions(a.fuse, anchor->actions.fuse)) {
      policy::Decision placed;
      placed.device = anchor->plan.device;
      placed.fusion_group = anchor->plan.fusion;
      placed.num_devices = D;
      return policy::to_plan(policy::decode(*t.graph, t.pg, a, D, o, &placed));
    }
    return policy::to_plan(policy::decode(*t.graph, t.pg, a, D, o, nullptr, base));
  }
  // The log a block move m decodes from: its start's where it was made on one, else the anchor's.
  static const policy::DecodeLog* base_log(const GraphTask& t, const BlockMove& m) {
    if (m.start >= 0 && static_cast<std::size_t>(m.start) < t.start_logs.size())
      return t.start_logs[static_cast<std::size_t>(m.start)].log.get();
    return t.anchor_log.log.get();
  }
  // Makes t.anchor_log the log of pg's anchor actions and each of t.start_logs its start's, unless
  // it is already, each decoded from its previous log (a new anchor or start is mostly one move
  // away from the last). Before a round's decodes, which read them from several threads. A start
  // is another heuristic's plan: decoded from the anchor's log, a move on it would start where the
  // two first differ, near the top of the graph.
  void refresh_logs(GraphTask& t) const {
    if (!t.pg.has_anchor()) return;
    refresh_log(t, anchor_actions(t), t.anchor_log);
    t.start_logs.resize(t.starts.size());
    for (std::size_t k = 0; k < t.starts.size(); ++k) refresh_log(t, t.starts[k].first, t.start_logs[k]);
  }
  void refresh_log(const GraphTask& t, const policy::Actions& a, GraphTask::Logged& l) const {
    if (l.log && policy::same_task_actions(a.device, l.of.device) && policy::same_task_actions(a.fuse, l.of.fuse))
      return;
    policy::DecodeOptions o;
    o.colocate = cfg_.colocate;
    auto log = std::make_shared<policy::DecodeLog>();
    policy::decode(*t.graph, t.pg, a, t.sim->cluster().num_devices(), o, nullptr, l.log.get(), log.get());
    l.log = std::move(log);
    l.of = policy::Actions{a.device.clone(), Tensor(), a.fuse.clone()};
  }

  // The anchor plan (go/rl/anchor.hpp) is the policy's starting point, so it is the first best plan.
  // METIS draws with the run's seed, so fine-tuning with seed s starts from best-heuristic's plan of s.
  void init_anchor(GraphTask& t) const {
    const Anchor a = set_anchor(*t.graph, t.pg, t.sim->cluster(), *t.sim, cfg_.policy.priority_levels, cfg_.colocate,
                                cfg_.anchor_placements, cfg_.seed, &t.trace, cfg_.anchor_ties, cfg_.threads,
                                cfg_.anchor_expert);
    t.anchor = a.describe();
    t.anchor_step_time = a.result.valid ? a.result.step_time : kInf;
    t.anchor_faster = a.faster;
    for (std::size_t k = 0; k < a.alternatives.size() && static_cast<int>(k) < cfg_.alt_starts; ++k)
      if (a.result.valid && a.alternatives[k].second <= (1 + cfg_.alt_start_margin) * a.result.step_time)
        t.starts.push_back(a.alternatives[k]);
    if (a.result.valid) {
      t.best_step_time = a.result.step_time;
      t.best_plan = a.plan;
      t.best_update = 0;
      if (std::isfinite(a.result.step_time))
        t.anchor_decision = GraphTask::Decided{a.actions, a.ties, a.join(), a.plan, a.result};
    }
  }

  // (Its simulations count as samples of the trace; their plans are not answers.)
  void set_reference(GraphTask& t) const {
    SimWorkspace ws = t.sim->make_workspace();
    ws.set_stop_on_oom(true);  // only a plan that fits is used
    const SimResult d = t.sim->simulate(Plan{}, ws);
    t.trace.add(d.valid, d.step_time, false);
    if (d.valid && std::isfinite(d.step_time) && d.step_time > 0) {
      t.reference = d.step_time;
      t.reference_kind = "default";
      return;
    }
    try {
      Plan h;
      h.device = zoo_human_placement(*t.graph, t.sim->cluster().num_devices());
      const SimResult r = t.sim->simulate(h, ws);
      t.trace.add(r.valid, r.step_time, false);
      if (r.valid && std::isfinite(r.step_time) && r.step_time > 0) {
        t.reference = r.step_time;
        t.reference_kind = "human";
        return;
      }
    } catch (const Error&) {
      // not a zoo workload
    }
    double s = 0;
    for (OpId i = 0; i < t.graph->num_ops(); ++i) s += t.sim->op_cost(i, 0);
    t.reference = s > 0 ? s : 1e-6;
    t.reference_kind = "compute_sum";
  }

  TrainConfig cfg_;
  std::vector<Cluster> clusters_;
  std::shared_ptr<policy::GoPolicy> policy_;
  std::vector<std::unique_ptr<GraphTask>> tasks_;
  std::vector<Variable> params_;
  std::unique_ptr<Adam> adam_;
  std::int64_t updates_done_ = 0;
  std::shared_ptr<Communicator> comm_ = local_communicator();
  std::vector<float> grad_buffer_;  // the gradients of all parameters, for the allreduce
};

// A policy from a file written by GoPolicy::save_policy or PpoTrainer::save_checkpoint.
std::shared_ptr<policy::GoPolicy> load_policy(const std::string& path);
// The same from a file already read by load_tensors (`path` names it in errors).
std::shared_ptr<policy::GoPolicy> load_policy(const LoadedTensors& file, const std::string& path);

}  // namespace go::rl
