// PPO throughput (include/go/rl/ppo.hpp): one update = one shared sampling pass for the K samples
// (chain "hidden"), K simulations in parallel threads, and per epoch one teacher-forced pass with
// gradients per minibatch. Reports samples/s; bench/ppo_scale.sh times updates at 80,000 ops.
#include <benchmark/benchmark.h>

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

}  // namespace
