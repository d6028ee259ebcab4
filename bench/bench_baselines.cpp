// Optimize time of the baseline placers (include/go/baselines) on a large zoo training graph:
// transformer_xl8 (45,024 ops) on 8 V100s. The step times are in bench/README.md ("Baselines: the
// evaluation table"); this measures only how long each method takes to produce its plan (final
// simulation included).
//   ninja -C build bench_baselines && ./build/bench/bench_baselines
#include <benchmark/benchmark.h>

#include <string>

#include "go/baselines/place.hpp"
#include "go/graph/training.hpp"
#include "go/graph/zoo.hpp"

namespace {

const go::OpGraph& graph() {
  static const go::OpGraph g = go::make_training_graph(go::make_zoo_graph("transformer_xl8"));
  return g;
}

void BM_place(benchmark::State& state, const std::string& method) {
  const go::Cluster c = go::cluster_preset("v100x8");
  go::PlaceOptions o;
  o.budget = 20;
  for (auto _ : state) {
    go::PlaceResult r = go::place(method, graph(), c, o);
    benchmark::DoNotOptimize(r.step_time);
  }
  state.counters["ops"] = graph().num_ops();
}

}  // namespace

BENCHMARK_CAPTURE(BM_place, default, std::string("default"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_place, human, std::string("human"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_place, metis, std::string("metis"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_place, heft, std::string("heft"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_place, m_topo, std::string("m-topo"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_place, m_etf, std::string("m-etf"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_place, m_sct, std::string("m-sct"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_place, anneal_20_sims, std::string("anneal"))->Unit(benchmark::kMillisecond);
