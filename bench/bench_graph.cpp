// Graph layer benchmarks: loading, validating and laying out (CSR + topological order) an
// 80,000-op graph, the cost model over it, and importing the real models.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "go/graph/cost.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/io.hpp"
#include "go/graph/json.hpp"
#include "go/graph/load.hpp"
#include "go/graph/training.hpp"

namespace {

constexpr int kOps = 80000;

// The repository's data/ (models/, real-data/); the environment variable GO_DATA_DIR overrides.
std::string data_dir() {
  if (const char* env = std::getenv("GO_DATA_DIR")) return env;
  return GO_SOURCE_DIR "/data";
}

// A layered DAG shaped like a large unrolled model: each op reads 1-3 recent ops (within 64),
// conv/matmul ops own parameters, a few ops have two outputs.
std::vector<go::OpSpec> synthetic_specs(int n, std::uint32_t seed = 1) {
  std::mt19937 rng(seed);
  const go::OpKind kinds[] = {go::OpKind::conv, go::OpKind::matmul, go::OpKind::relu, go::OpKind::add,
                              go::OpKind::batch_norm, go::OpKind::concat, go::OpKind::softmax, go::OpKind::reshape};
  std::vector<go::OpSpec> specs;
  specs.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    go::OpSpec s;
    s.name = "layer" + std::to_string(i / 16) + "/op" + std::to_string(i);
    s.kind = i == 0 ? go::OpKind::input : kinds[rng() % 8];
    s.flops = static_cast<double>(rng() % 1000000);
    if (s.kind == go::OpKind::conv || s.kind == go::OpKind::matmul) s.param_bytes = 4 * (rng() % 100000);
    const int outs = rng() % 16 == 0 ? 2 : 1;
    for (int k = 0; k < outs; ++k) {
      go::TensorSpec t;
      t.shape = {32, 64, 1 + static_cast<std::int64_t>(rng() % 64)};
      s.outputs.push_back(t);
    }
    if (i > 0) {
      const int fan_in = 1 + static_cast<int>(rng() % 3);
      for (int k = 0; k < fan_in; ++k) {
        const int back = 1 + static_cast<int>(rng() % std::min(i, 64));
        s.inputs.push_back(go::TensorRef{i - back, 0});
      }
    }
    specs.push_back(std::move(s));
  }
  return specs;
}

const std::string& synthetic_json_path() {
  static const std::string path = [] {
    go::GraphBuilder b;
    for (auto& s : synthetic_specs(kOps)) b.add_op(std::move(s));
    const go::OpGraph g = b.build();
    const auto p = (std::filesystem::temp_directory_path() / "go_bench_graph_80k.json").string();
    go::save_json(g, p);
    return p;
  }();
  return path;
}

void BM_graph_load_validate_csr_80k(benchmark::State& state) {
  const std::string& path = synthetic_json_path();
  for (auto _ : state) {
    go::OpGraph g = go::load_graph(path);  // read + parse + build (validation, CSR, topological order)
    g.validate();
    benchmark::DoNotOptimize(g.num_edges());
  }
  state.counters["ops"] = kOps;
  state.counters["file_MB"] = static_cast<double>(std::filesystem::file_size(path)) / 1e6;
}
BENCHMARK(BM_graph_load_validate_csr_80k)->Unit(benchmark::kMillisecond);

void BM_graph_build_80k(benchmark::State& state) {
  const auto specs = synthetic_specs(kOps);
  for (auto _ : state) {
    state.PauseTiming();
    auto copy = specs;
    state.ResumeTiming();
    go::GraphBuilder b;
    b.reserve(copy.size());
    for (auto& s : copy) b.add_op(std::move(s));
    go::OpGraph g = b.build();  // id resolution, checks, CSR both ways, topological order
    benchmark::DoNotOptimize(g.num_edges());
  }
  state.counters["ops"] = kOps;
}
BENCHMARK(BM_graph_build_80k)->Unit(benchmark::kMillisecond);

void BM_graph_validate_80k(benchmark::State& state) {
  go::GraphBuilder b;
  for (auto& s : synthetic_specs(kOps)) b.add_op(std::move(s));
  const go::OpGraph g = b.build();
  for (auto _ : state) g.validate();
  state.counters["ops"] = kOps;
}
BENCHMARK(BM_graph_validate_80k)->Unit(benchmark::kMillisecond);

void BM_graph_op_times_critical_path_80k(benchmark::State& state) {
  go::GraphBuilder b;
  for (auto& s : synthetic_specs(kOps)) b.add_op(std::move(s));
  const go::OpGraph g = b.build();
  const go::DeviceSpec dev;
  std::vector<double> t(static_cast<std::size_t>(g.num_ops()));
  for (auto _ : state) {
    for (const go::Op& o : g.ops()) t[static_cast<std::size_t>(o.id)] = go::op_time(o, dev);
    auto cp = go::critical_path(g, t);
    benchmark::DoNotOptimize(cp.time);
  }
  state.counters["ops"] = kOps;
}
BENCHMARK(BM_graph_op_times_critical_path_80k)->Unit(benchmark::kMillisecond);

void BM_graph_training_expansion_80k(benchmark::State& state) {
  go::GraphBuilder b;
  for (auto& s : synthetic_specs(kOps)) b.add_op(std::move(s));
  const go::OpGraph g = b.build();
  std::int32_t n = 0;
  for (auto _ : state) {
    go::OpGraph t = go::make_training_graph(g);
    n = t.num_ops();
    benchmark::DoNotOptimize(n);
  }
  state.counters["training_ops"] = n;
}
BENCHMARK(BM_graph_training_expansion_80k)->Unit(benchmark::kMillisecond);

void BM_graph_load_onnx(benchmark::State& state, const char* model) {
  const std::string path = data_dir() + "/models/" + model;
  if (!std::filesystem::exists(path)) {
    state.SkipWithError(("missing " + path).c_str());
    return;
  }
  for (auto _ : state) {
    go::OpGraph g = go::load_graph(path);
    benchmark::DoNotOptimize(g.num_ops());
  }
}
BENCHMARK_CAPTURE(BM_graph_load_onnx, resnet50, "resnet50.onnx")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_graph_load_onnx, transformer_enc, "transformer_enc.onnx")->Unit(benchmark::kMillisecond);

}  // namespace
