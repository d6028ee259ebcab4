// PpoTrainer's construction, zero-shot decisions and update (go/rl/ppo.hpp), compiled once into
// libgo: with them the policy's passes, decoding, the anchor and the simulator they call. The search
// steps without gradients are in ppo_search.cpp, the checkpoints in ppo_checkpoint.cpp.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "go/autograd/autograd.hpp"
#include "go/core/error.hpp"
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
#include "go/sim/cluster.hpp"
#include "go/sim/plan.hpp"
#include "go/sim/simulator.hpp"
#include "go/rl/ppo.hpp"
#include "go/rl/ppo_loss.hpp"

namespace go::rl {

namespace {

// An update keeps every sample's actions and log-probabilities (16 bytes a row): where that alone
// exceeds the machine's memory, say which option to lower instead of running out of memory later.
void check_samples_fit(std::int64_t samples, std::int64_t rows) {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return;
  const double need = static_cast<double>(samples) * static_cast<double>(rows) * 16.0;
  const double have = static_cast<double>(pages) * static_cast<double>(page);
  GO_CHECK(need <= have, "ppo: \"samples\" ", samples, " x ", rows, " ops need ", need / 1e9,
           " GB for the samples' actions alone, more than this machine's ", have / 1e9, " GB; lower \"samples\"");
}

}  // namespace

PpoTrainer::PpoTrainer(TrainConfig cfg, std::vector<OpGraph> graphs, std::vector<Cluster> clusters,
                       std::shared_ptr<policy::GoPolicy> policy)
    : cfg_(std::move(cfg)), clusters_(std::move(clusters)) {
  cfg_.validate();
  GO_CHECK(!graphs.empty(), "ppo: no graphs to train on");
  GO_CHECK(!clusters_.empty(), "ppo: no cluster to train on");
  GO_CHECK(cfg_.anchor_expert.empty() || graphs.size() == 1, "ppo: \"anchor_expert\" (", cfg_.anchor_expert,
           ") is one graph's plan, but ", graphs.size(), " graphs were given: train on that graph alone");
  if (policy) cfg_.policy = policy->config();
  for (const Cluster& c : clusters_) {
    const int nd = c.num_devices();
    GO_CHECK(nd >= 1 && nd <= cfg_.policy.max_devices, "ppo: cluster '", c.name, "' has ", nd,
             " devices but the policy handles at most ", cfg_.policy.max_devices, " (policy \"max_devices\")");
  }
  policy_ = policy ? std::move(policy) : std::make_shared<policy::GoPolicy>(cfg_.policy);
  policy_->set_heads_only(cfg_.trainable == "heads");
  // a task's name is its graph's, or its file's where two graphs share a name (every PyTorch export
  // is "torch_jit"): reports and checkpoints must tell them apart
  std::vector<std::string> names;
  for (const OpGraph& g0 : graphs) names.push_back(g0.info().name.empty() ? g0.info().source : g0.info().name);
  for (std::size_t i = 0; i < graphs.size(); ++i)
    if (std::count(names.begin(), names.end(), names[i]) > 1 && !graphs[i].info().source.empty() &&
        graphs[i].info().source != names[i]) {
      const std::string shared = names[i];
      for (std::size_t k = 0; k < graphs.size(); ++k)
        if (names[k] == shared && !graphs[k].info().source.empty()) names[k] = graphs[k].info().source;
    }
  std::size_t gi = 0;
  for (auto& g0 : graphs) {
    for (std::size_t ci = 0; ci < clusters_.size(); ++ci) {
      auto t = std::make_unique<GraphTask>();
      const bool last = ci + 1 == clusters_.size();
      const bool expand = cfg_.training && !g0.info().training;
      t->graph = std::make_unique<OpGraph>(expand ? make_training_graph(g0) : last ? std::move(g0) : OpGraph(g0));
      const OpGraph& g = *t->graph;
      t->name = names[gi];
      if (clusters_.size() > 1) t->name += "@" + clusters_[ci].name;
      t->pg = policy::PolicyGraph::from_graph(g);
      check_samples_fit(cfg_.samples, t->pg.num_nodes);
      if (cfg_.block_moves > 0)
        for (OpId v : depth_first_topo_order(g)) t->block_rows.push_back(t->pg.row_of[static_cast<std::size_t>(v)]);
      t->sim = std::make_unique<Simulator>(g, clusters_[ci]);
      // the anchor's candidates before the reward reference, which only training reads: the
      // trace's first samples are plans the method may answer
      if (cfg_.policy.anchor) init_anchor(*t);
      set_reference(*t);
      tasks_.push_back(std::move(t));
    }
    ++gi;
  }
  params_ = policy_->parameters();
  AdamOptions ao;
  ao.lr = static_cast<float>(cfg_.lr);
  ao.beta1 = static_cast<float>(cfg_.adam_beta1);
  ao.beta2 = static_cast<float>(cfg_.adam_beta2);
  ao.eps = static_cast<float>(cfg_.adam_eps);
  adam_ = std::make_unique<Adam>(params_, ao);
}

std::vector<std::pair<Plan, SimResult>> PpoTrainer::zero_shot(std::size_t i, int samples, const Rng& base,
                                                               double* policy_seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  GraphTask& t = *tasks_.at(i);
  const int D = t.sim->cluster().num_devices();
  std::vector<policy::Actions> decisions;
  {
    NoGradGuard ng;
    std::vector<Rng> rngs;
    for (int k = 0; k < samples; ++k) rngs.push_back(base.fork(static_cast<std::uint64_t>(k)));
    policy::GoPolicy::Samples drawn = policy_->sample_many(t.pg, D, rngs);
    decisions.push_back(policy_->config().chain == "hidden" ? policy_->greedy_actions(drawn.pass)
                                                            : policy_->forward(t.pg, D, policy::Decode::greedy).actions);
    for (auto& a : drawn.actions) decisions.push_back(std::move(a));
  }
  if (policy_seconds) *policy_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<std::pair<Plan, SimResult>> out(decisions.size());
  // The greedy decision is the anchor's actions unless pre-training taught the policy otherwise:
  // then it is the anchor, decoded and simulated when the trainer was built. (Where only its
  // priorities differ, plan_of takes the anchor's devices and fusion groups.)
  const GraphTask::Decided* anchor = t.anchor_decision ? &*t.anchor_decision : nullptr;
  const bool greedy_is_anchor = anchor && anchor->ties == t.pg.ties && anchor->join == t.pg.join &&
                                policy::same_actions(decisions[0], anchor->actions);
  if (greedy_is_anchor) out[0] = {anchor->plan, anchor->result};
  const std::size_t first = greedy_is_anchor ? 1 : 0;
  const int nthreads = item_threads(cfg_.threads, out.size() - first);
  reserve_workspaces(t, nthreads);
  parallel_items(first, out.size(), nthreads, "go: simulation failed", [&](int tid, std::size_t j) {
    out[j].first = plan_of(t, decisions[j]);
    out[j].second = t.sim->simulate(out[j].first, workspace_of(t, tid));
  });
  const double done = t.trace.seconds();
  for (std::size_t j = first; j < out.size(); ++j) t.trace.add_at(out[j].second.valid, out[j].second.step_time, done);
  // The fastest decision that beats the graph's best plan becomes it, and with reanchor the anchor,
  // as an update's samples do: fine-tuning then starts where zero-shot ended, not at the heuristic.
  std::size_t best = out.size();
  for (std::size_t j = 0; j < out.size(); ++j) {
    const SimResult& r = out[j].second;
    if (r.valid && std::isfinite(r.step_time) && r.step_time < t.best_step_time &&
        (best == out.size() || r.step_time < out[best].second.step_time))
      best = j;
  }
  if (best < out.size())
    adopt_best(t, out[best].second.step_time, out[best].first, updates_done_, std::move(decisions[best]));
  return out;
}

UpdateStats PpoTrainer::update() {
  const auto t0 = std::chrono::steady_clock::now();
  const std::int64_t u = updates_done_;
  UpdateStats st;
  st.update = u + 1;
  st.lr = cfg_.lr_at(u);
  adam_->set_lr(static_cast<float>(st.lr));
  const Rng urng = Rng(cfg_.seed).fork(static_cast<std::uint64_t>(u));
  const int K = cfg_.samples;

  // 1. graphs of this update
  const std::vector<std::size_t> sel = graphs_of_update(u);

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
  // With chain "hidden", when this rank samples one graph, its pass is recorded with gradients and
  // kept: the first gradient step (whose parameters are those the samples were drawn with)
  // back-propagates through it instead of running the network again (GoPolicy::backward_shared, the
  // same bits). Its activations then live through the simulations, as they would through the step.
  const bool keep_pass = policy_->config().chain == "hidden" && own_end > own_begin &&
                         own_begin / static_cast<std::size_t>(K) == (own_end - 1) / static_cast<std::size_t>(K);
  std::optional<policy::PolicyOutput> kept;  // an output of the kept pass
  std::size_t kept_graph = 0;
  {  // one sample_many per graph: its samples share every sample-independent computation
    std::optional<NoGradGuard> ng;
    if (!keep_pass) ng.emplace();
    for (std::size_t j0 = own_begin; j0 < own_end;) {
      const std::size_t a = j0 / static_cast<std::size_t>(K);
      const std::size_t j1 = std::min(own_end, (a + 1) * static_cast<std::size_t>(K));
      const std::size_t gi = sel[a];
      const GraphTask& t = *tasks_[gi];
      std::vector<Rng> rngs;
      for (std::size_t j = j0; j < j1; ++j)
        rngs.push_back(urng.fork((static_cast<std::uint64_t>(gi) << 32) | (j % static_cast<std::size_t>(K))));
      policy::GoPolicy::Samples drawn = policy_->sample_many(t.pg, t.sim->cluster().num_devices(), rngs);
      const double value = drawn.pass.value.value().item();
      if (keep_pass) {
        kept = std::move(drawn.pass);
        kept_graph = gi;
      }
      for (std::size_t j = j0; j < j1; ++j) {
        Sample& s = samples[j];
        s.graph = gi;
        s.actions = std::move(drawn.actions[j - j0]);
        s.old_log_prob = std::move(drawn.log_prob[j - j0]);
        s.value = value;
        s.move = draw_block_move(t, urng, gi, j % static_cast<std::size_t>(K));
        if (s.block_moved())
          s.actions = block_moved(t, s.move, cfg_.block_base == "anchor" && t.pg.has_anchor() ? anchor_actions(t)
                                                                                               : s.actions);
      }
      j0 = j1;
    }
  }

  const auto t_sampled = std::chrono::steady_clock::now();
  // 3. decode + simulate in parallel
  const int nthreads = item_threads(cfg_.threads, own_end - own_begin);
  for (std::size_t gi : sel) {
    reserve_workspaces(*tasks_[gi], nthreads);
    refresh_logs(*tasks_[gi]);
  }
  {
    parallel_items(own_begin, own_end, nthreads, "ppo: simulation failed", [&](int tid, std::size_t j) {
      Sample& s = samples[j];
      GraphTask& t = *tasks_[s.graph];
      s.plan = plan_of(t, s.actions, base_log(t, s.move));
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
        // drawn from the update's rng: every rank draws the same run and start (the owner applied
        // it, and may have changed its device, which no other rank reads)
        if (r != rank)
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
    record_simulated(t, s.valid, s.step_time, std::chrono::duration<double>(t_simulated - t.trace.origin()).count(),
                     s.move, s.actions);
    if (!s.valid) {
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
    st.best_speedup = best_speedup(sel);
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
  const PpoLossTerms terms{clip, cfg_.ratio == "node", static_cast<float>(cfg_.entropy_coef),
                           static_cast<float>(cfg_.value_coef)};
  PpoLossStats total;  // over the epochs
  double gn_sum = 0;
  std::int64_t n_steps = 0;
  std::size_t draws = 0;  // samples in the loss
  for (const Sample& x : samples) draws += x.block_moved() ? 0 : 1;
  std::vector<std::size_t> order(N);
  for (int e = 0; e < cfg_.epochs; ++e) {
    for (std::size_t j = 0; j < N; ++j) order[j] = j;
    Rng sh = urng.fork((1ull << 63) | static_cast<std::uint64_t>(e));
    for (std::size_t j = N; j > 1; --j) std::swap(order[j - 1], order[sh.uniform_int(j)]);
    PpoLossStats epoch_stats;
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
        std::vector<PpoDecision> ds;
        for (std::size_t j : idx) {
          const Sample& s = samples[j];
          ds.push_back({&s.actions, &s.old_log_prob, static_cast<float>(s.advantage), s.reward});
        }
        auto loss_of = [&](std::size_t k, const policy::PolicyOutput& out) {
          return scale(ppo_loss(out, ds[k], terms, epoch_stats), w);
        };
        // chain "hidden": every sample reads the pass's log-softmax, and one op takes all of their
        // surrogates (go/rl/ppo_loss.hpp; bench/README.md "PPO's loss in one op")
        auto batched = [&](const policy::GoPolicy::SharedOutput& so) {
          return scale(ppo_loss(so, ds, terms, epoch_stats), w);
        };
        const int D = t.sim->cluster().num_devices();
        if (policy_->config().chain == "hidden")
          policy_->backward_shared(t.pg, D, kept && gi == kept_graph ? &*kept : nullptr, given, batched);
        else
          policy_->backward_many(t.pg, D, given, loss_of);
      }
      allreduce_gradients(*comm_, params_, grad_buffer_);
      const float gn = clip_grad_norm(params_, static_cast<float>(cfg_.max_grad_norm));
      // a step on NaN gradients would turn every weight into NaN, and the next update's sampling
      // would fail far from the cause
      GO_CHECK(std::isfinite(gn), "ppo: update ", u + 1, ": the gradient is not finite (norm ", gn,
               "): the training diverged (is \"lr\" ", cfg_.lr, " too high?)");
      gn_sum += gn;
      kept.reset();  // the parameters change: the pass no longer describes them
      adam_->step();
      ++n_steps;
    }
    st.epochs_run = e + 1;
    total += epoch_stats;
    double kl_epoch = epoch_stats.kl;
    if (nranks > 1) kl_epoch = comm_->allreduce_sum(kl_epoch);
    if (cfg_.target_kl > 0 && kl_epoch / static_cast<double>(std::max<std::size_t>(1, draws)) > 1.5 * cfg_.target_kl) break;
  }
  if (nranks > 1) {
    double sums[6] = {total.entropy, total.policy_loss, total.value_loss, total.kl, total.clip_fraction,
                      static_cast<double>(total.decisions)};
    comm_->allreduce_sum(sums, 6);
    total = {sums[0], sums[1], sums[2], sums[3], sums[4], static_cast<std::int64_t>(sums[5])};
  }
  const double fwd = static_cast<double>(std::max<std::int64_t>(1, total.decisions));  // 0: every sample a block move
  st.entropy = total.entropy / fwd;
  st.policy_loss = total.policy_loss / fwd;
  st.value_loss = total.value_loss / fwd;
  st.approx_kl = total.kl / fwd;
  st.clip_fraction = total.clip_fraction / fwd;
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
  const auto t_trained = std::chrono::steady_clock::now();
  // 8. after the first update, gather moves on each graph's best plan; then critical-path moves
  // from each graph's anchor (after re-anchoring: from the best plan found), both counted as
  // simulation time
  if (cfg_.gather_moves > 0 && u == 0 && cfg_.policy.anchor)
    for (std::size_t gi : sel) gather_best(*tasks_[gi], u);
  if (cfg_.path_moves > 0 && cfg_.policy.anchor)
    for (std::size_t gi : sel) climb_paths(*tasks_[gi], gi, urng, u);
  ++updates_done_;
  const auto t_end = std::chrono::steady_clock::now();
  st.seconds = std::chrono::duration<double>(t_end - t0).count();
  st.sample_seconds = std::chrono::duration<double>(t_sampled - t0).count();
  st.simulate_seconds = std::chrono::duration<double>((t_simulated - t_sampled) + (t_end - t_trained)).count();
  st.train_seconds = std::chrono::duration<double>(t_trained - t_simulated).count();
  st.samples_per_second = st.seconds > 0 ? static_cast<double>(N) / st.seconds : 0;
  return st;
}

}  // namespace go::rl
