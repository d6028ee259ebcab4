// Convergence of fine-tuning a pre-trained policy versus training the same network from scratch
// on graphs the policy never saw (issue 7, quality targets). Not a timing benchmark: for each graph
// it runs PPO twice with the same config, seed and anchor -- once from the pre-trained parameters,
// once from a fresh initialization -- and reports the best step time after each update and the
// samples each run needed to reach the final best of the run from scratch.
// With --ablation, where fine-tuning's result comes from instead: per graph, go's fine-tuning
// (go::rl::finetune_config) as it is, without its critical-path moves (path_moves 0), and without
// the policy's draws (block_moves 1: every sample a block move, so nothing is learned), each with
// its best step time and wall seconds; the same updates, seed and anchor.
//
//   bench_finetune [--policy policies/go-zoo-v100x248.ckpt] [--cluster v100x4] [--updates 20]
//                  [--samples 128] [--seed 0] [--graphs g1,g2,...] [--ablation]
//   (graphs as training graphs; a graph written g@cluster runs on that cluster)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "go/graph/load.hpp"
#include "go/graph/training.hpp"
#include "go/nn/serialize.hpp"
#include "go/rl/place_go.hpp"
#include "go/rl/ppo.hpp"
#include "go/sim/sim.hpp"

namespace {

std::vector<double> best_curve(go::rl::PpoTrainer& t) {
  std::vector<double> v{t.task(0).best_step_time};
  t.train([&](const go::rl::UpdateStats&) { v.push_back(t.task(0).best_step_time); });
  return v;
}

// Samples until the curve first reaches `target` (-1: never).
long long samples_to(const std::vector<double>& curve, double target, int samples) {
  for (std::size_t u = 0; u < curve.size(); ++u)
    if (curve[u] <= target * (1 + 1e-9)) return static_cast<long long>(u) * samples;
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string policy = GO_SOURCE_DIR "/policies/go-zoo-v100x248.ckpt", cluster = "v100x4";
  std::string graphs = GO_SOURCE_DIR "/data/models/resnet50.onnx," GO_SOURCE_DIR
                       "/data/models/transformer_enc.onnx,zoo:gnmt2:seq=12";
  long long updates = 20, seed = 0;
  int samples = go::rl::kFinetuneSamples;
  bool ablation = false;
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--ablation") {
      ablation = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "bench_finetune: %s needs a value\n", k.c_str());
      return 2;
    }
    const std::string v = argv[i + 1];
    if (k == "--policy") policy = v;
    else if (k == "--cluster") cluster = v;
    else if (k == "--graphs") graphs = v;
    else if (k == "--updates") updates = std::atoll(v.c_str());
    else if (k == "--samples") samples = std::atoi(v.c_str());
    else if (k == "--seed") seed = std::atoll(v.c_str());
    else {
      std::fprintf(stderr, "bench_finetune: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  try {
    const go::Cluster c = go::load_cluster(cluster);
    const go::LoadedTensors file = go::load_tensors(policy);
    const auto pre = go::rl::load_policy(file, policy);
    const auto saved = go::rl::PpoTrainer::saved_config(file, policy);
    std::printf("policy %s, cluster %s, %lld updates x %d samples, seed %lld\n\n", policy.c_str(), c.name.c_str(),
                updates, samples, seed);
    if (ablation) {
      std::printf("| graph (cluster) | ops | anchor ms | go ms (s) | without critical-path moves ms (s) | without the policy's draws ms (s) |\n");
      std::printf("|---|---:|---:|---:|---:|---:|\n");
      std::stringstream ss(graphs);
      std::string spec;
      while (std::getline(ss, spec, ',')) {
        const auto at = spec.find('@');
        const go::Cluster gc = at == std::string::npos ? c : go::load_cluster(spec.substr(at + 1));
        const std::string name = spec.substr(0, at);
        const go::OpGraph g = go::make_training_graph(go::load_graph(name));
        const go::rl::TrainConfig cfg =
            go::rl::finetune_config(saved, *pre, updates, samples, static_cast<std::uint64_t>(seed));
        go::rl::TrainConfig no_path = cfg, no_draws = cfg;
        no_path.path_moves = 0;
        no_draws.block_moves = 1.0;
        double anchor = 0;
        auto run = [&](const go::rl::TrainConfig& k) {
          const auto t0 = std::chrono::steady_clock::now();
          go::rl::PpoTrainer t(k, {g}, gc, go::rl::load_policy(file, policy));
          anchor = t.task(0).anchor_step_time;
          t.train();
          return std::pair{t.task(0).best_step_time * 1e3,
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
        };
        const auto [full, full_s] = run(cfg);
        const auto [np, np_s] = run(no_path);
        const auto [nd, nd_s] = run(no_draws);
        std::printf("| %s (%s) | %d | %.2f | %.2f (%.1f) | %.2f (%.1f) | %.2f (%.1f) |\n", name.c_str(), gc.name.c_str(),
                    g.num_ops(), anchor * 1e3, full, full_s, np, np_s, nd, nd_s);
        std::fflush(stdout);
      }
      return 0;
    }
    std::printf("| graph | ops | anchor ms | scratch best ms | fine-tuned best ms | samples to scratch's best: scratch | fine-tuned |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
    std::stringstream ss(graphs);
    std::string name;
    while (std::getline(ss, name, ',')) {
      const go::OpGraph g = go::make_training_graph(go::load_graph(name));
      const go::rl::TrainConfig cfg =
          go::rl::finetune_config(saved, *pre, updates, samples, static_cast<std::uint64_t>(seed));
      go::rl::PpoTrainer ft(cfg, {g}, c, go::rl::load_policy(file, policy));
      go::rl::PpoTrainer sc(cfg, {g}, c);
      const double anchor = ft.task(0).anchor_step_time;
      const auto a = best_curve(ft), b = best_curve(sc);
      const double target = b.back();
      std::printf("| %s | %d | %.2f | %.2f | %.2f | %lld | %lld |\n", name.c_str(), g.num_ops(), anchor * 1e3,
                  b.back() * 1e3, a.back() * 1e3, samples_to(b, target, samples), samples_to(a, target, samples));
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_finetune: %s\n", e.what());
    return 1;
  }
  return 0;
}
