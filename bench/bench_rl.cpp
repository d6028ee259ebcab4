// PPO throughput (include/go/rl/ppo.hpp): one update = one shared sampling pass for the K samples
// (chain "hidden"), K simulations in parallel threads, and per epoch one teacher-forced pass with
// gradients per minibatch. Reports samples/s; bench/ppo_scale.sh times updates at 80,000 ops.
// BM_ppo_loss: the loss of K decisions over one pass's log-softmax, forward and backward, as one
// op (go/rl/ppo_loss.hpp) against its anchor, the elementwise composite per decision, in the same
// run; reports decision-rows/s.
#include <benchmark/benchmark.h>

#include <array>
#include <string>
#include <vector>

#include "go/graph/load.hpp"
#include "go/rl/all.hpp"
#include "go/sim/sim.hpp"

namespace {

go::rl::TrainConfig bench_config(std::int64_t hidden) {
  go::rl::TrainConfig c;
  c.policy.hidden = hidden;
  c.policy.heads = 4;
  c.policy.sage_layers = 2;
  c.policy.segment_length = 128;
  c.policy.memory_length = 128;
  c.policy.ffn_dim = 4 * hidden;
  c.policy.value_hidden = hidden;
  c.samples = 8;
  c.epochs = 2;
  c.minibatch = 4;
  c.updates = 1000000;
  return c;
}

// Args: hidden width. Graph: zoo:rnnlm2 (1140 forward ops) on v100x4.
void BM_ppo_update(benchmark::State& state) {
  const go::rl::TrainConfig c = bench_config(state.range(0));
  go::rl::PpoTrainer t(c, {go::load_graph("zoo:rnnlm2")}, go::cluster_preset("v100x4"));
  std::int64_t samples = 0;
  for (auto _ : state) {
    const go::rl::UpdateStats s = t.update();
    samples += s.samples;
    benchmark::DoNotOptimize(s.mean_reward);
  }
  state.counters["samples/s"] = benchmark::Counter(static_cast<double>(samples), benchmark::Counter::kIsRate);
  state.counters["ops"] = static_cast<double>(t.task(0).graph->num_ops());
}
BENCHMARK(BM_ppo_update)->Arg(32)->Arg(128)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

// Args: rows, decisions K, batched (1: clipped_surrogate; 0: the composite per decision). Device,
// priority and fusion widths 8, 8, 2; old log-probabilities within 0.3 of the current ones.
void BM_ppo_loss(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const int K = static_cast<int>(state.range(1));
  const bool batched = state.range(2) != 0;
  const std::int64_t width[3] = {8, 8, 2};
  go::Rng rng(3);
  std::array<go::Tensor, 3> logits;
  for (int t = 0; t < 3; ++t) logits[static_cast<std::size_t>(t)] = go::Tensor::uniform(go::Shape{n, width[t]}, rng, -1.f, 1.f);
  std::vector<go::policy::Actions> acts(static_cast<std::size_t>(K));
  std::vector<go::Tensor> old(static_cast<std::size_t>(K));
  std::vector<go::rl::SurrogateInput> in;
  for (int k = 0; k < K; ++k) {
    go::policy::Actions& a = acts[static_cast<std::size_t>(k)];
    go::Tensor* task[3] = {&a.device, &a.priority, &a.fuse};
    for (int t = 0; t < 3; ++t) {
      *task[t] = go::Tensor::empty(go::Shape{n}, go::DType::i32);
      for (std::int64_t i = 0; i < n; ++i)
        task[t]->data<std::int32_t>()[i] = static_cast<std::int32_t>(rng.uniform_int(static_cast<std::uint64_t>(width[t])));
    }
    old[static_cast<std::size_t>(k)] = go::Tensor::uniform(go::Shape{n}, rng, -4.f, -3.f);
    in.push_back({&a, &old[static_cast<std::size_t>(k)], k % 2 ? 0.5f : -0.5f});
  }
  for (auto _ : state) {
    std::array<go::Variable, 3> x, ls;
    for (int t = 0; t < 3; ++t) {
      x[static_cast<std::size_t>(t)] = go::Variable(logits[static_cast<std::size_t>(t)], true);
      ls[static_cast<std::size_t>(t)] = go::log_softmax(x[static_cast<std::size_t>(t)]);
    }
    go::Variable total;
    if (batched) {
      total = go::rl::clipped_surrogate(ls, in, 0.2f, true);
    } else {
      for (const go::rl::SurrogateInput& s : in) {
        go::Variable lp = go::pick_columns(ls[0], s.actions->device) + go::pick_columns(ls[1], s.actions->priority) +
                          go::pick_columns(ls[2], s.actions->fuse);
        go::Variable ratio = go::exp(lp - go::Variable(*s.old_log_prob));
        go::Variable pg = -go::mean(go::minimum(go::scale(ratio, s.advantage),
                                                go::scale(go::clamp(ratio, 0.8f, 1.2f), s.advantage)));
        total = total.defined() ? total + pg : pg;
      }
    }
    total.backward();
    benchmark::DoNotOptimize(x[0].grad().f32());
  }
  state.counters["decision-rows/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * static_cast<double>(K * n), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ppo_loss)
    ->Args({3414, 64, 0})
    ->Args({3414, 64, 1})
    ->Args({80588, 64, 0})
    ->Args({80588, 64, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
