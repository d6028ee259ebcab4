#pragma once
// PPO training of the GO policy (go/policy) against the simulator (go/sim), on one graph (from
// scratch) or a set of graphs (pre-training), with checkpoints that resume bit-identically.
//
// One update (PpoTrainer::update()):
//   1. graphs: all of them, or `graphs_per_update` of them round robin (with several clusters a
//      "graph" is a task: one graph on one cluster, each with its own simulator and device count);
//   2. per graph, K = `samples` plans from one GoPolicy::forward_many without gradients (one
//      network pass for all K with chain "hidden"; with chain "action" the priority and fusion
//      blocks run per sample), keeping the actions and their per-row log-probabilities; sample k of graph i of update u
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
//      teacher-forced GoPolicy::backward_many over its samples (one shared pass), the minibatch's
//      mean of each sample's loss -mean(min(rho A, clip(rho, 1 -/+ clip) A)) - entropy_coef *
//      entropy + value_coef * (V - r)^2, rho = exp(log pi - log pi_old) per op row (ratio "node") or for
//      the whole plan (ratio "plan"); global-norm clipping and Adam at the update's learning
//      rate; the epochs stop early once the approximate KL exceeds 1.5 x target_kl;
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
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "go/autograd/autograd.hpp"
#include "go/core/error.hpp"
#include "go/core/file.hpp"
#include "go/core/rng.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/training.hpp"
#include "go/graph/zoo.hpp"
#include "go/nn/serialize.hpp"
#include "go/optim/adam.hpp"
#include "go/policy/decode.hpp"
#include "go/rl/anchor.hpp"
#include "go/policy/features.hpp"
#include "go/policy/policy.hpp"
#include "go/policy/to_plan.hpp"
#include "go/rl/config.hpp"
#include "go/rl/distributed.hpp"
#include "go/sim/cluster.hpp"
#include "go/sim/plan.hpp"
#include "go/sim/simulator.hpp"

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
  // Every simulation of this graph's plans, in order: the reference's (a sample, never an answer),
  // the anchor's candidates, zero_shot()'s and update()'s samples (greedy_plan() is not recorded).
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

// What one update did (also one row of the metrics CSV).
struct UpdateStats {
  std::int64_t update = 0;        // 1-based: updates completed after this one
  double lr = 0;
  double mean_reward = 0, max_reward = 0;
  double best_step_time = kInf;   // the best valid step time so far, of the first graph of the update
  double best_speedup = 0;        // reference / best step time, mean over the update's graphs
  double mean_step_time = kInf;   // mean over valid samples (first graph)
  double invalid_fraction = 0;
  double entropy = 0;             // mean per-row entropy (sum over the three tasks)
  double approx_kl = 0, clip_fraction = 0;
  double policy_loss = 0, value_loss = 0, explained_variance = 0;
  double grad_norm = 0;
  int epochs_run = 0;
  std::int64_t samples = 0;
  double seconds = 0, samples_per_second = 0;
  // where the update's wall time went: sampling pass(es), decoding + simulation, gradient epochs
  double sample_seconds = 0, simulate_seconds = 0, train_seconds = 0;
};

inline const char* metrics_csv_header() {
  return "update,lr,mean_reward,max_reward,best_step_time_ms,best_speedup,mean_step_time_ms,invalid_fraction,entropy,"
         "approx_kl,clip_fraction,policy_loss,value_loss,explained_variance,grad_norm,epochs_run,samples,seconds,"
         "samples_per_second,sample_seconds,simulate_seconds,train_seconds";
}

inline std::string metrics_csv_row(const UpdateStats& s) {
  auto ms = [](double t) { return std::isfinite(t) ? t * 1e3 : -1.0; };
  char buf[640];
  std::snprintf(buf, sizeof buf, "%lld,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%d,%lld,%.4g,%.6g,%.4g,%.4g,%.4g",
                static_cast<long long>(s.update), s.lr, s.mean_reward, s.max_reward, ms(s.best_step_time),
                s.best_speedup, ms(s.mean_step_time), s.invalid_fraction, s.entropy, s.approx_kl, s.clip_fraction,
                s.policy_loss, s.value_loss, s.explained_variance, s.grad_norm, s.epochs_run,
                static_cast<long long>(s.samples), s.seconds, s.samples_per_second, s.sample_seconds,
                s.simulate_seconds, s.train_seconds);
  return buf;
}

// Keeps the header and the rows of updates <= `keep_updates` of an existing metrics CSV (resume
// drops what the interrupted run wrote after its last checkpoint); creates it with a header when
// missing.
inline void truncate_metrics_csv(const std::string& path, std::int64_t keep_updates) {
  std::string out = std::string(metrics_csv_header()) + "\n";
  std::ifstream in(path);
  if (in) {
    std::string line;
    bool first = true;
    while (std::getline(in, line)) {
      if (first) {
        first = false;
        continue;
      }
      if (line.empty()) continue;
      const long long u = std::atoll(line.c_str());
      if (u >= 1 && u <= keep_updates) out += line + "\n";
    }
  }
  write_file_atomic(path, out);
}

inline void append_metrics_csv(const std::string& path, const UpdateStats& s) {
  std::ofstream f(path, std::ios::app);
  GO_CHECK(f.good(), path, ": cannot open the metrics file for appending");
  f << metrics_csv_row(s) << "\n";
  GO_CHECK(f.good(), path, ": cannot write the metrics file");
}

// Runs fn(thread, j) for j in [begin, end) on `threads` threads (the calling one included), items
// handed out in order; the first error of any thread is rethrown as "<what>: <message>".
inline void parallel_items(std::size_t begin, std::size_t end, int threads, const char* what,
                           const std::function<void(int, std::size_t)>& fn) {
  std::atomic<std::size_t> next{begin};
  std::vector<std::string> errors(static_cast<std::size_t>(std::max(1, threads)));
  auto work = [&](int tid) {
    try {
      for (;;) {
        const std::size_t j = next.fetch_add(1);
        if (j >= end) break;
        fn(tid, j);
      }
    } catch (const std::exception& e) {
      errors[static_cast<std::size_t>(tid)] = e.what();
    }
  };
  std::vector<std::thread> pool;
  for (int tid = 1; tid < threads; ++tid) pool.emplace_back(work, tid);
  work(0);
  for (auto& th : pool) th.join();
  for (const auto& e : errors) GO_CHECK(e.empty(), what, ": ", e);
}

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
             std::shared_ptr<policy::GoPolicy> policy = nullptr)
      : cfg_(std::move(cfg)), clusters_(std::move(clusters)) {
    cfg_.validate();
    GO_CHECK(!graphs.empty(), "ppo: no graphs to train on");
    GO_CHECK(!clusters_.empty(), "ppo: no cluster to train on");
    if (policy) cfg_.policy = policy->config();
    for (const Cluster& c : clusters_) {
      const int nd = c.num_devices();
      GO_CHECK(nd >= 1 && nd <= cfg_.policy.max_devices, "ppo: cluster '", c.name, "' has ", nd,
               " devices but the policy handles at most ", cfg_.policy.max_devices, " (policy \"max_devices\")");
    }
    policy_ = policy ? std::move(policy) : std::make_shared<policy::GoPolicy>(cfg_.policy);
    for (auto& g0 : graphs) {
      for (std::size_t ci = 0; ci < clusters_.size(); ++ci) {
        auto t = std::make_unique<GraphTask>();
        const bool last = ci + 1 == clusters_.size();
        const bool expand = cfg_.training && !g0.info().training;
        t->graph = std::make_unique<OpGraph>(expand ? make_training_graph(g0) : last ? std::move(g0) : OpGraph(g0));
        const OpGraph& g = *t->graph;
        t->name = g.info().name.empty() ? g.info().source : g.info().name;
        if (clusters_.size() > 1) t->name += "@" + clusters_[ci].name;
        t->pg = policy::PolicyGraph::from_graph(g);
        if (cfg_.block_moves > 0)
          for (OpId v : depth_first_topo_order(g)) t->block_rows.push_back(t->pg.row_of[static_cast<std::size_t>(v)]);
        t->sim = std::make_unique<Simulator>(g, clusters_[ci]);
        set_reference(*t);
        if (cfg_.policy.anchor) init_anchor(*t);
        tasks_.push_back(std::move(t));
      }
    }
    params_ = policy_->parameters();
    AdamOptions ao;
    ao.lr = static_cast<float>(cfg_.lr);
    ao.beta1 = static_cast<float>(cfg_.adam_beta1);
    ao.beta2 = static_cast<float>(cfg_.adam_beta2);
    ao.eps = static_cast<float>(cfg_.adam_eps);
    adam_ = std::make_unique<Adam>(params_, ao);
  }

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
  // They are recorded in the task's trace in that order.
  std::vector<std::pair<Plan, SimResult>> zero_shot(std::size_t i, int samples, const Rng& base) {
    GraphTask& t = *tasks_.at(i);
    const int D = t.sim->cluster().num_devices();
    std::vector<policy::Actions> decisions;
    {
      NoGradGuard ng;
      std::vector<Rng> rngs;
      for (int k = 0; k < samples; ++k) rngs.push_back(base.fork(static_cast<std::uint64_t>(k)));
      auto outs = policy_->forward_many(t.pg, D, policy::Decode::sample, static_cast<std::size_t>(samples), nullptr, &rngs);
      decisions.push_back(policy_->config().chain == "hidden" ? policy_->greedy_actions(outs[0])
                                                              : policy_->forward(t.pg, D, policy::Decode::greedy).actions);
      for (auto& o : outs) decisions.push_back(std::move(o.actions));
    }
    std::vector<std::pair<Plan, SimResult>> out(decisions.size());
    const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const int nthreads = std::max(1, std::min<int>(cfg_.threads > 0 ? cfg_.threads : hw, static_cast<int>(out.size())));
    reserve_workspaces(t, nthreads);
    parallel_items(0, out.size(), nthreads, "go: simulation failed", [&](int tid, std::size_t j) {
      out[j].first = plan_of(t, decisions[j]);
      out[j].second = t.sim->simulate(out[j].first, workspace_of(t, tid));
    });
    const double done = t.trace.seconds();
    for (const auto& [p, r] : out) t.trace.add_at(r.valid, r.step_time, done);
    return out;
  }

  // One PPO update.
  UpdateStats update() {
    const auto t0 = std::chrono::steady_clock::now();
    const std::int64_t u = updates_done_;
    UpdateStats st;
    st.update = u + 1;
    st.lr = cfg_.lr_at(u);
    adam_->set_lr(static_cast<float>(st.lr));
    const Rng urng = Rng(cfg_.seed).fork(static_cast<std::uint64_t>(u));
    const int K = cfg_.samples;

    // 1. graphs of this update
    std::vector<std::size_t> sel;
    const std::size_t G = tasks_.size();
    const std::size_t m = cfg_.graphs_per_update <= 0 ? G : std::min<std::size_t>(G, static_cast<std::size_t>(cfg_.graphs_per_update));
    for (std::size_t j = 0; j < m; ++j) sel.push_back((static_cast<std::size_t>(u) * m + j) % G);

    // 2. sampling without gradients
    struct Sample {
      std::size_t graph = 0;  // index into tasks_
      policy::Actions actions;
      Tensor old_log_prob;    // [n]
      double value = 0;
      BlockMove move;         // rows whose devices a block move set (then out of the loss)
      bool block_moved() const { return move.end > move.begin; }
      Plan plan;
      SimResult result;       // (only on the rank that simulated it)
      double reward = 0, advantage = 0;
      bool valid = false;
      double step_time = kInf;
    };
    // sample j = a * K + k is graph sel[a]'s k-th; rank r samples and simulates [share(r), share(r + 1))
    const int rank = comm_->rank(), nranks = comm_->size();
    const std::size_t N = sel.size() * static_cast<std::size_t>(K);
    auto share = [&](int r) { return N * static_cast<std::size_t>(r) / static_cast<std::size_t>(nranks); };
    const std::size_t own_begin = share(rank), own_end = share(rank + 1);
    std::vector<Sample> samples(N);
    {  // one forward_many per graph: its samples share every sample-independent computation
      NoGradGuard ng;
      for (std::size_t j0 = own_begin; j0 < own_end;) {
        const std::size_t a = j0 / static_cast<std::size_t>(K);
        const std::size_t j1 = std::min(own_end, (a + 1) * static_cast<std::size_t>(K));
        const std::size_t gi = sel[a];
        const GraphTask& t = *tasks_[gi];
        std::vector<Rng> rngs;
        for (std::size_t j = j0; j < j1; ++j)
          rngs.push_back(urng.fork((static_cast<std::uint64_t>(gi) << 32) | (j % static_cast<std::size_t>(K))));
        auto outs = policy_->forward_many(t.pg, t.sim->cluster().num_devices(), policy::Decode::sample, j1 - j0,
                                          nullptr, &rngs);
        for (std::size_t j = j0; j < j1; ++j) {
          const auto& out = outs[j - j0];
          Sample& s = samples[j];
          s.graph = gi;
          s.actions = out.actions;
          s.old_log_prob = out.log_prob.value().clone();
          s.value = out.value.value().item();
          s.move = draw_block_move(t, urng, gi, j % static_cast<std::size_t>(K));
          if (s.block_moved()) {
            if (s.move.start >= 0) s.actions = t.starts[static_cast<std::size_t>(s.move.start)].first.clone();
            s.actions.device = s.actions.device.clone();
            std::int32_t* dev = s.actions.device.data<std::int32_t>();
            for (std::int64_t p = s.move.begin; p < s.move.end; ++p)
              dev[s.move.depth_first ? t.block_rows[static_cast<std::size_t>(p)] : p] = s.move.device;
          }
        }
        j0 = j1;
      }
    }

    const auto t_sampled = std::chrono::steady_clock::now();
    // 3. decode + simulate in parallel
    const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const int nthreads = std::max(1, std::min<int>(cfg_.threads > 0 ? cfg_.threads : hw, static_cast<int>(own_end - own_begin)));
    for (std::size_t gi : sel) reserve_workspaces(*tasks_[gi], nthreads);
    {
      parallel_items(own_begin, own_end, nthreads, "ppo: simulation failed", [&](int tid, std::size_t j) {
        Sample& s = samples[j];
        GraphTask& t = *tasks_[s.graph];
        s.plan = plan_of(t, s.actions);
        s.result = t.sim->simulate(s.plan, workspace_of(t, tid));
      });
      for (std::size_t j = own_begin; j < own_end; ++j) {
        Sample& s = samples[j];
        s.reward = reward(s.graph, s.result);
        s.valid = s.result.valid;
        s.step_time = s.result.step_time;
      }
    }
    if (nranks > 1) {  // every rank gets every sample: actions from their owners, outcomes by one allreduce
      std::vector<double> outcome(4 * N, 0.0);
      for (int r = 0; r < nranks; ++r)
        for (std::size_t j = share(r); j < share(r + 1); ++j) {
          Sample& s = samples[j];
          s.graph = sel[j / static_cast<std::size_t>(K)];
          broadcast_tensor(*comm_, s.actions.device, r);
          broadcast_tensor(*comm_, s.actions.priority, r);
          broadcast_tensor(*comm_, s.actions.fuse, r);
          broadcast_tensor(*comm_, s.old_log_prob, r);
          if (r != rank)  // drawn from the update's rng: every rank draws the same (the owner applied it)
            s.move = draw_block_move(*tasks_[s.graph], urng, s.graph, j % static_cast<std::size_t>(K));
          if (r == rank) {
            outcome[4 * j] = s.reward;
            outcome[4 * j + 1] = s.value;
            outcome[4 * j + 2] = s.valid ? 1.0 : 0.0;
            outcome[4 * j + 3] = s.valid ? s.step_time : 0.0;
          }
        }
      comm_->allreduce_sum(outcome.data(), outcome.size());
      for (std::size_t j = 0; j < N; ++j) {
        Sample& s = samples[j];
        s.reward = outcome[4 * j];
        s.value = outcome[4 * j + 1];
        s.valid = outcome[4 * j + 2] > 0.5;
        s.step_time = s.valid ? outcome[4 * j + 3] : kInf;
      }
    }

    const auto t_simulated = std::chrono::steady_clock::now();
    // 4. rewards, best plans; 5. advantages
    double sum_r = 0;
    st.max_reward = -kInf;
    std::int64_t invalid = 0;
    std::vector<std::size_t> new_best;  // samples that improved their graph's best plan
    for (std::size_t j = 0; j < N; ++j) {
      Sample& s = samples[j];
      GraphTask& t = *tasks_[s.graph];
      sum_r += s.reward;
      st.max_reward = std::max(st.max_reward, s.reward);
      ++t.samples;
      t.trace.add_at(s.valid, s.step_time, std::chrono::duration<double>(t_simulated - t.trace.origin()).count());
      if (s.valid && s.move.start >= 0 && s.step_time < t.starts[static_cast<std::size_t>(s.move.start)].second)
        t.starts[static_cast<std::size_t>(s.move.start)] = {s.actions.clone(), s.step_time};
      if (!s.valid) {
        ++t.invalid;
        ++invalid;
      } else if (s.step_time < t.best_step_time) {
        t.best_step_time = s.step_time;
        t.best_update = u + 1;
        new_best.push_back(j);
      }
    }
    for (std::size_t j : new_best) {  // the last improvement of a graph is its best
      const Sample& s = samples[j];
      GraphTask& t = *tasks_[s.graph];
      if (t.best_step_time != s.step_time) continue;
      t.best_plan = j >= own_begin && j < own_end ? s.plan : plan_of(t, s.actions);
    }
    st.samples = static_cast<std::int64_t>(samples.size());
    st.mean_reward = sum_r / static_cast<double>(samples.size());
    st.invalid_fraction = static_cast<double>(invalid) / static_cast<double>(samples.size());
    {
      double sum_t = 0;
      int nv = 0;
      for (const Sample& s : samples)
        if (s.graph == sel[0] && s.valid) {
          sum_t += s.step_time;
          ++nv;
        }
      st.mean_step_time = nv ? sum_t / nv : kInf;
      st.best_step_time = tasks_[sel[0]]->best_step_time;
      double sp = 0;
      for (std::size_t gi : sel)
        sp += std::isfinite(tasks_[gi]->best_step_time) ? tasks_[gi]->reference / tasks_[gi]->best_step_time : 0.0;
      st.best_speedup = sp / static_cast<double>(sel.size());
    }
    for (std::size_t a = 0; a < sel.size(); ++a) {
      GraphTask& t = *tasks_[sel[a]];
      Sample* b = samples.data() + a * static_cast<std::size_t>(K);
      // block-moved samples are proposals, not draws of the policy: out of the baseline and the loss
      int draws = 0;
      double mean_r = 0;
      for (int k = 0; k < K; ++k)
        if (!b[k].block_moved()) {
          mean_r += b[k].reward;
          ++draws;
        }
      if (draws == 0) continue;
      mean_r /= draws;
      for (int k = 0; k < K; ++k) {
        double base = mean_r;
        if (cfg_.baseline == "ema") base = t.ema_init ? t.ema : mean_r;
        else if (cfg_.baseline == "value") base = b[k].value;
        b[k].advantage = b[k].block_moved() ? 0.0 : b[k].reward - base;
      }
      if (cfg_.normalize_advantages) {
        double var = 0;
        for (int k = 0; k < K; ++k)
          if (!b[k].block_moved()) var += (b[k].reward - mean_r) * (b[k].reward - mean_r);
        const double sd = std::sqrt(var / draws);
        for (int k = 0; k < K; ++k) b[k].advantage /= (sd + 1e-8);
      }
      t.ema = t.ema_init ? cfg_.baseline_decay * t.ema + (1 - cfg_.baseline_decay) * mean_r : mean_r;
      t.ema_init = true;
    }
    {  // explained variance of the value head before the update
      double mr = st.mean_reward, vr = 0, vd = 0, md = 0;
      for (const Sample& s : samples) md += s.reward - s.value;
      md /= static_cast<double>(samples.size());
      for (const Sample& s : samples) {
        vr += (s.reward - mr) * (s.reward - mr);
        vd += (s.reward - s.value - md) * (s.reward - s.value - md);
      }
      st.explained_variance = vr > 0 ? 1.0 - vd / vr : 0.0;
    }

    // 6. epochs of minibatch updates (position p of a minibatch on rank p mod R)
    const std::size_t mb = std::min<std::size_t>(N, static_cast<std::size_t>(cfg_.minibatch));
    const float clip = static_cast<float>(cfg_.clip);
    double ent_sum = 0, pl_sum = 0, vl_sum = 0, kl_sum = 0, cf_sum = 0, gn_sum = 0;
    std::int64_t n_fwd = 0, n_steps = 0;
    std::size_t draws = 0;  // samples in the loss
    for (const Sample& x : samples) draws += x.block_moved() ? 0 : 1;
    std::vector<std::size_t> order(N);
    for (int e = 0; e < cfg_.epochs; ++e) {
      for (std::size_t j = 0; j < N; ++j) order[j] = j;
      Rng sh = urng.fork((1ull << 63) | static_cast<std::uint64_t>(e));
      for (std::size_t j = N; j > 1; --j) std::swap(order[j - 1], order[sh.uniform_int(j)]);
      double kl_epoch = 0;
      for (std::size_t start = 0; start < N; start += mb) {
        const std::size_t end = std::min(N, start + mb);
        std::size_t in_loss = 0;  // every rank counts the whole minibatch's
        for (std::size_t j = start; j < end; ++j) in_loss += samples[order[j]].block_moved() ? 0 : 1;
        if (in_loss == 0) continue;
        const float w = 1.f / static_cast<float>(in_loss);
        policy_->zero_grad();
        // this rank's positions, grouped by graph: one backward_many per graph shares the pass
        std::vector<std::vector<std::size_t>> by_graph(tasks_.size());
        for (std::size_t j = start + static_cast<std::size_t>(rank); j < end; j += static_cast<std::size_t>(nranks))
          if (!samples[order[j]].block_moved()) by_graph[samples[order[j]].graph].push_back(order[j]);
        for (std::size_t gi = 0; gi < by_graph.size(); ++gi) {
          const std::vector<std::size_t>& idx = by_graph[gi];
          if (idx.empty()) continue;
          const GraphTask& t = *tasks_[gi];
          std::vector<policy::Actions> given;
          for (std::size_t j : idx) given.push_back(samples[j].actions);
          auto loss_of = [&](std::size_t k, const policy::PolicyOutput& out) {
            const Sample& s = samples[idx[k]];
            const float A = static_cast<float>(s.advantage);
            Variable old(s.old_log_prob);
            Variable pg_loss;
            double kl = 0, cf = 0;
            if (cfg_.ratio == "node") {
              Variable ratio = exp(out.log_prob - old);  // [n]
              Variable surr = minimum(scale(ratio, A), scale(clamp(ratio, 1.f - clip, 1.f + clip), A));
              pg_loss = -mean(surr);
              const float* rp = ratio.value().f32();
              const std::int64_t n = ratio.numel();
              for (std::int64_t i = 0; i < n; ++i) {
                kl += (rp[i] - 1.0) - std::log(std::max(static_cast<double>(rp[i]), 1e-30));
                cf += std::abs(rp[i] - 1.0) > clip ? 1.0 : 0.0;
              }
              kl /= static_cast<double>(n);
              cf /= static_cast<double>(n);
            } else {
              Variable lr = clamp(sum(out.log_prob) - sum(old), -20.f, 20.f);
              Variable ratio = exp(lr);
              Variable surr = minimum(scale(ratio, A), scale(clamp(ratio, 1.f - clip, 1.f + clip), A));
              pg_loss = -surr;
              const double rv = ratio.value().item();
              kl = (rv - 1.0) - std::log(std::max(rv, 1e-30));
              cf = std::abs(rv - 1.0) > clip ? 1.0 : 0.0;
            }
            Variable target(Tensor::full(Shape{1, 1}, static_cast<float>(s.reward)));
            Variable v_loss = mean(square(out.value - target));
            Variable loss = pg_loss - scale(out.entropy_mean, static_cast<float>(cfg_.entropy_coef)) +
                            scale(v_loss, static_cast<float>(cfg_.value_coef));
            ent_sum += out.entropy_mean.value().item();
            pl_sum += pg_loss.value().item();
            vl_sum += v_loss.value().item();
            kl_sum += kl;
            kl_epoch += kl;
            cf_sum += cf;
            ++n_fwd;
            return scale(loss, w);
          };
          policy_->backward_many(t.pg, t.sim->cluster().num_devices(), given, loss_of);
        }
        allreduce_gradients(*comm_, params_, grad_buffer_);
        gn_sum += clip_grad_norm(params_, static_cast<float>(cfg_.max_grad_norm));
        adam_->step();
        ++n_steps;
      }
      st.epochs_run = e + 1;
      if (nranks > 1) kl_epoch = comm_->allreduce_sum(kl_epoch);
      if (cfg_.target_kl > 0 && kl_epoch / static_cast<double>(std::max<std::size_t>(1, draws)) > 1.5 * cfg_.target_kl) break;
    }
    if (nranks > 1) {
      double sums[6] = {ent_sum, pl_sum, vl_sum, kl_sum, cf_sum, static_cast<double>(n_fwd)};
      comm_->allreduce_sum(sums, 6);
      ent_sum = sums[0], pl_sum = sums[1], vl_sum = sums[2], kl_sum = sums[3], cf_sum = sums[4];
      n_fwd = static_cast<std::int64_t>(sums[5]);
    }
    const double fwd = static_cast<double>(std::max<std::int64_t>(1, n_fwd));  // 0: every sample a block move
    st.entropy = ent_sum / fwd;
    st.policy_loss = pl_sum / fwd;
    st.value_loss = vl_sum / fwd;
    st.approx_kl = kl_sum / fwd;
    st.clip_fraction = cf_sum / fwd;
    st.grad_norm = n_steps ? gn_sum / static_cast<double>(n_steps) : 0.0;
    // 7. with reanchor, a graph's new best plan becomes its anchor (after the epochs, which needed
    // the anchor the samples were drawn with); every rank holds every sample's actions
    if (cfg_.reanchor && cfg_.policy.anchor)
      for (std::size_t j : new_best) {
        const Sample& s = samples[j];
        GraphTask& t = *tasks_[s.graph];
        if (t.best_step_time != s.step_time) continue;
        t.pg.set_anchor(s.actions.device.clone(), s.actions.priority.clone(), s.actions.fuse.clone());
      }
    ++updates_done_;
    const auto t_end = std::chrono::steady_clock::now();
    st.seconds = std::chrono::duration<double>(t_end - t0).count();
    st.sample_seconds = std::chrono::duration<double>(t_sampled - t0).count();
    st.simulate_seconds = std::chrono::duration<double>(t_simulated - t_sampled).count();
    st.train_seconds = std::chrono::duration<double>(t_end - t_simulated).count();
    st.samples_per_second = st.seconds > 0 ? static_cast<double>(N) / st.seconds : 0;
    return st;
  }

  // Runs updates until `updates_done() == config().updates`; `on_update` sees each update's stats.
  void train(const std::function<void(const UpdateStats&)>& on_update = {}) {
    while (updates_done_ < cfg_.updates) {
      UpdateStats s = update();
      if (on_update) on_update(s);
    }
  }

  // ---- checkpoints --------------------------------------------------------------------------

  // Writes the checkpoint on rank 0; does nothing on the other ranks of a distributed run.
  void save_checkpoint(const std::string& path) const {
    if (comm_->rank() != 0) return;
    NamedTensors t;
    const auto named = policy_->named_parameters();
    for (const auto& [n, p] : named) t.emplace_back("policy/" + n, p.value());
    for (std::size_t i = 0; i < named.size(); ++i) t.emplace_back("adam.m/" + named[i].first, adam_->first_moments()[i]);
    for (std::size_t i = 0; i < named.size(); ++i) t.emplace_back("adam.v/" + named[i].first, adam_->second_moments()[i]);
    nlohmann::json graphs = nlohmann::json::array();
    for (const auto& tp : tasks_) {
      const GraphTask& g = *tp;
      nlohmann::json best = nullptr;
      if (std::isfinite(g.best_step_time))
        best = {{"step_time", g.best_step_time},
                {"update", g.best_update},
                {"device", g.best_plan.device},
                {"priority", g.best_plan.priority},
                {"fusion", g.best_plan.fusion}};
      graphs.push_back({{"name", g.name},
                        {"num_ops", g.graph->num_ops()},
                        {"cluster", g.sim->cluster().name},
                        {"num_devices", g.sim->cluster().num_devices()},
                        {"reference", g.reference},
                        {"reference_kind", g.reference_kind},
                        {"ema", g.ema},
                        {"ema_init", g.ema_init},
                        {"samples", g.samples},
                        {"invalid", g.invalid},
                        {"best", best}});
      if (cfg_.reanchor && g.pg.has_anchor())  // moved by the updates: a resumed run needs it
        graphs.back()["anchor"] = actions_json({g.pg.anchor_device, g.pg.anchor_priority, g.pg.anchor_fuse});
      if (!g.starts.empty()) {
        nlohmann::json st = nlohmann::json::array();
        for (const auto& [a, time] : g.starts) {
          st.push_back(actions_json(a));
          st.back()["step_time"] = time;
        }
        graphs.back()["starts"] = std::move(st);
      }
    }
    nlohmann::json meta = {{"format", "go-ppo-checkpoint"},
                           {"version", 1},
                           {"config", cfg_.to_json()},
                           {"cluster", clusters_.front().name},
                           {"num_devices", clusters_.front().num_devices()},
                           {"updates_done", updates_done_},
                           {"adam_step", adam_->step_count()},
                           {"graphs", graphs}};
    save_tensors(path, t, meta);
  }

  // Restores a checkpoint of a run on the same graphs and cluster with the same config (the
  // "updates", "threads" and "checkpoint_every" keys may differ). The checkpoint's "updates"
  // replaces this run's (set_updates() afterwards to change it; the learning-rate schedule spans
  // it, so a resumed run matches an uninterrupted one only with the same total).
  void load_checkpoint(const std::string& path) {
    LoadedTensors lt = load_tensors(path);
    GO_CHECK(lt.meta.value("format", "") == "go-ppo-checkpoint", path, ": not a PPO checkpoint (format ",
             lt.meta.value("format", std::string("?")), ")");
    try {
      TrainConfig saved = TrainConfig::from_saved_json(lt.meta.at("config"), path + ": config");
      auto comparable = [](const TrainConfig& c) {
        nlohmann::json j = c.to_json();
        j.erase("updates");
        j.erase("threads");
        j.erase("checkpoint_every");
        return j;
      };
      GO_CHECK(comparable(saved) == comparable(cfg_), path,
               ": the checkpoint's config differs from this run's (resume with the checkpoint's config)");
      const auto& graphs = lt.meta.at("graphs");
      GO_CHECK(graphs.size() == tasks_.size(), path, ": checkpoint of ", graphs.size(), " graph(s), this run has ",
               tasks_.size());
      std::unordered_map<std::string, const Tensor*> by_name;
      for (const auto& [n, t] : lt.tensors) by_name[n] = &t;
      const auto named = policy_->named_parameters();
      auto restore = [&](const std::string& key, Tensor& dst) {
        auto it = by_name.find(key);
        GO_CHECK(it != by_name.end(), path, ": tensor '", key, "' missing");
        GO_CHECK(it->second->shape() == dst.shape(), path, ": tensor '", key, "' is ", it->second->describe(),
                 ", expected ", dst.describe());
        dst.copy_from(*it->second);
      };
      for (std::size_t i = 0; i < named.size(); ++i) {
        Tensor v = named[i].second.value();
        restore("policy/" + named[i].first, v);
        restore("adam.m/" + named[i].first, adam_->first_moments()[i]);
        restore("adam.v/" + named[i].first, adam_->second_moments()[i]);
      }
      for (std::size_t i = 0; i < tasks_.size(); ++i) {
        GraphTask& g = *tasks_[i];
        const auto& j = graphs[i];
        // (checkpoints of single-cluster runs before per-graph clusters: the top-level count)
        const int nd = j.contains("num_devices") ? j.at("num_devices").get<int>() : lt.meta.at("num_devices").get<int>();
        GO_CHECK(nd == g.sim->cluster().num_devices(), path, ": graph ", i, " of the checkpoint ran on a ", nd,
                 "-device cluster, this run's on ", g.sim->cluster().num_devices());
        GO_CHECK(j.at("name").get<std::string>() == g.name && j.at("num_ops").get<std::int32_t>() == g.graph->num_ops(),
                 path, ": graph ", i, " of the checkpoint is '", j.at("name").get<std::string>(), "' (",
                 j.at("num_ops").get<std::int32_t>(), " ops), this run's is '", g.name, "' (", g.graph->num_ops(),
                 " ops)");
        g.reference = j.at("reference").get<double>();
        g.reference_kind = j.at("reference_kind").get<std::string>();
        g.ema = j.at("ema").get<double>();
        g.ema_init = j.at("ema_init").get<bool>();
        g.samples = j.at("samples").get<std::int64_t>();
        g.invalid = j.at("invalid").get<std::int64_t>();
        const auto& b = j.at("best");
        if (b.is_null()) {
          g.best_step_time = kInf;
          g.best_plan = Plan{};
          g.best_update = -1;
        } else {
          g.best_step_time = b.at("step_time").get<double>();
          g.best_update = b.at("update").get<std::int64_t>();
          g.best_plan.device = b.at("device").get<std::vector<std::int32_t>>();
          g.best_plan.priority = b.at("priority").get<std::vector<float>>();
          g.best_plan.fusion = b.at("fusion").get<std::vector<std::int32_t>>();
          check_plan_sizes(g.best_plan, g.graph->num_ops(), path + ": best plan: ");
        }
        if (j.contains("anchor") && g.pg.has_anchor()) {
          policy::Actions a = actions_from_json(j.at("anchor"), g.pg.num_nodes, path + ": graph " + std::to_string(i) + "'s anchor");
          g.pg.set_anchor(std::move(a.device), std::move(a.priority), std::move(a.fuse));
        }
        if (j.contains("starts")) {
          const auto& st = j.at("starts");
          GO_CHECK(st.size() == g.starts.size(), path, ": graph ", i, " has ", st.size(),
                   " other starting points in the checkpoint, this run chose ", g.starts.size());
          for (std::size_t k = 0; k < st.size(); ++k)
            g.starts[k] = {actions_from_json(st[k], g.pg.num_nodes,
                                             path + ": graph " + std::to_string(i) + "'s starting point " + std::to_string(k)),
                           st[k].at("step_time").get<double>()};
        }
      }
      updates_done_ = lt.meta.at("updates_done").get<std::int64_t>();
      adam_->set_step_count(lt.meta.at("adam_step").get<long long>());
      cfg_.updates = saved.updates;
    } catch (const nlohmann::json::exception& e) {
      GO_FAIL(path, ": malformed checkpoint metadata: ", e.what());
    }
  }

  // The training config stored in a checkpoint.
  static TrainConfig checkpoint_config(const std::string& path) {
    const LoadedTensors lt = load_tensors(path);
    GO_CHECK(lt.meta.value("format", "") == "go-ppo-checkpoint", path, ": not a PPO checkpoint");
    return TrainConfig::from_saved_json(lt.meta.at("config"), path + ": config");
  }

 private:
  // Actions in a checkpoint: {"device": [...], "priority": [...], "fuse": [...]}, one entry per row.
  static nlohmann::json actions_json(const policy::Actions& a) {
    auto ints = [](const Tensor& t) {
      return std::vector<std::int32_t>(t.data<std::int32_t>(), t.data<std::int32_t>() + t.numel());
    };
    return {{"device", ints(a.device)}, {"priority", ints(a.priority)}, {"fuse", ints(a.fuse)}};
  }
  static policy::Actions actions_from_json(const nlohmann::json& j, std::int64_t rows, const std::string& what) {
    auto tensor = [&](const char* key) {
      const auto v = j.at(key).get<std::vector<std::int32_t>>();
      GO_CHECK(static_cast<std::int64_t>(v.size()) == rows, what, " has ", v.size(), " ", key, " actions for ", rows,
               " ops");
      Tensor t = Tensor::empty(Shape{rows}, DType::i32);
      std::copy(v.begin(), v.end(), t.data<std::int32_t>());
      return t;
    };
    return {tensor("device"), tensor("priority"), tensor("fuse")};
  }

  // With probability block_moves, a sample's devices on a run (start uniform, length log-uniform
  // in [1, n / D]) of the rows or, with probability 1/2, of the depth-first topological order
  // (GraphTask::block_rows) are set to one random device, the move annealing makes: per-row sampling almost never moves a whole block, and a lone moved op mostly adds
  // transfers. Such a sample is a proposal, not a draw of the policy: it can become the best plan
  // (and with reanchor the anchor) but enters neither the baseline nor the loss, whose advantages
  // would otherwise credit the block's cost to the rows the policy drew. With alt_starts, a fraction
  // alt_start_moves of the moves is made on one of GraphTask::starts instead of on the draw. Drawn
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
  Plan plan_of(const GraphTask& t, const policy::Actions& a) const {
    policy::DecodeOptions o;
    o.colocate = cfg_.colocate;
    return policy::to_plan(policy::decode(*t.graph, t.pg, a, t.sim->cluster().num_devices(), o));
  }

  // The anchor plan (go/rl/anchor.hpp) is the policy's starting point, so it is the first best plan.
  // METIS draws with the run's seed, so fine-tuning with seed s starts from best-heuristic's plan of s.
  void init_anchor(GraphTask& t) const {
    const Anchor a = set_anchor(*t.graph, t.pg, t.sim->cluster(), *t.sim, cfg_.policy.priority_levels, cfg_.colocate,
                                cfg_.anchor_placements, cfg_.seed, &t.trace, cfg_.anchor_ties);
    t.anchor = a.describe();
    t.anchor_step_time = a.result.valid ? a.result.step_time : kInf;
    for (std::size_t k = 0; k < a.alternatives.size() && static_cast<int>(k) < cfg_.alt_starts; ++k)
      if (a.result.valid && a.alternatives[k].second <= (1 + cfg_.alt_start_margin) * a.result.step_time)
        t.starts.push_back(a.alternatives[k]);
    if (a.result.valid) {
      t.best_step_time = a.result.step_time;
      t.best_plan = a.plan;
      t.best_update = 0;
    }
  }

  // (Its simulations count as samples of the trace; their plans are not answers.)
  void set_reference(GraphTask& t) const {
    const SimResult d = t.sim->simulate(Plan{});
    t.trace.add(d.valid, d.step_time, false);
    if (d.valid && std::isfinite(d.step_time) && d.step_time > 0) {
      t.reference = d.step_time;
      t.reference_kind = "default";
      return;
    }
    try {
      Plan h;
      h.device = zoo_human_placement(*t.graph, t.sim->cluster().num_devices());
      const SimResult r = t.sim->simulate(h);
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
inline std::shared_ptr<policy::GoPolicy> load_policy(const std::string& path) {
  LoadedTensors lt = load_tensors(path);
  if (lt.meta.value("format", "") != "go-ppo-checkpoint") return policy::GoPolicy::load_policy(path);
  const TrainConfig c = TrainConfig::from_saved_json(lt.meta.at("config"), path + ": config");
  auto p = std::make_shared<policy::GoPolicy>(c.policy);
  std::unordered_map<std::string, const Tensor*> by_name;
  for (const auto& [n, t] : lt.tensors) by_name[n] = &t;
  for (auto& [n, v] : p->named_parameters()) {
    auto it = by_name.find("policy/" + n);
    GO_CHECK(it != by_name.end() && it->second->shape() == v.shape(), path, ": policy tensor '", n,
             "' missing or of the wrong shape");
    Tensor dst = v.value();
    dst.copy_from(*it->second);
  }
  return p;
}

}  // namespace go::rl
