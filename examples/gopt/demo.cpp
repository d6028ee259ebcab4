#include "demo.hpp"
#include "format.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "go/go.hpp"

namespace gopt {

namespace {

struct DemoOptions {
  std::int64_t nodes = 20000;
  std::int64_t hidden = 64;
  int steps = 100;
  std::uint64_t seed = 1;
  float lr = 1e-3f;
};

// A random DAG shaped like an op graph: nodes in topological order, each with
// one to three predecessors among the previous 64 (real graphs are local).
struct SyntheticGraph {
  go::CsrPair preds, succs;  // aggregation over predecessors and over successors
  go::Tensor features;       // [n, 8]
  go::Tensor target;         // [n, 1]: longest-path depth, scaled to [0, 1]
};

SyntheticGraph make_graph(std::int64_t n, go::Rng& rng) {
  std::vector<std::int32_t> dst, src;
  std::vector<std::int32_t> fan_in(n, 0), fan_out(n, 0), depth(n, 0);
  for (std::int64_t i = 1; i < n; ++i) {
    const int k = 1 + static_cast<int>(rng.uniform_int(3));
    for (int j = 0; j < k; ++j) {
      const std::int64_t lo = std::max<std::int64_t>(0, i - 64);
      const auto p = static_cast<std::int32_t>(lo + static_cast<std::int64_t>(rng.uniform_int(i - lo)));
      dst.push_back(static_cast<std::int32_t>(i));
      src.push_back(p);
      ++fan_in[i];
      ++fan_out[p];
      depth[i] = std::max(depth[i], depth[p] + 1);
    }
  }
  SyntheticGraph g;
  g.preds = go::CsrPair::from_edges(n, n, dst, src);
  g.succs = go::CsrPair::from_edges(n, n, src, dst);
  const float max_depth = static_cast<float>(std::max(1, *std::max_element(depth.begin(), depth.end())));
  g.features = go::Tensor::zeros(go::Shape{n, 8});
  g.target = go::Tensor::empty(go::Shape{n, 1});
  for (std::int64_t i = 0; i < n; ++i) {
    float* f = g.features.f32() + i * 8;
    f[rng.uniform_int(4)] = 1.f;  // an op kind
    f[4] = std::log1p(static_cast<float>(fan_in[i]));
    f[5] = std::log1p(static_cast<float>(fan_out[i]));
    f[6] = static_cast<float>(i) / static_cast<float>(n);
    f[7] = 1.f;
    g.target.f32()[i] = static_cast<float>(depth[i]) / max_depth;
  }
  return g;
}

struct DemoNet : go::nn::Module {
  std::shared_ptr<go::nn::Linear> embed, sage1, sage2, q, k, v, proj, head;
  go::Variable ln_gamma, ln_beta;
  std::int64_t hidden;

  DemoNet(std::int64_t h, go::Rng& rng) : hidden(h) {
    using go::nn::Linear;
    embed = register_module("embed", std::make_shared<Linear>(8, h, rng));
    sage1 = register_module("sage1", std::make_shared<Linear>(3 * h, h, rng));
    sage2 = register_module("sage2", std::make_shared<Linear>(3 * h, h, rng));
    q = register_module("q", std::make_shared<Linear>(h, h, rng));
    k = register_module("k", std::make_shared<Linear>(h, h, rng));
    v = register_module("v", std::make_shared<Linear>(h, h, rng));
    proj = register_module("proj", std::make_shared<Linear>(h, h, rng));
    head = register_module("head", std::make_shared<Linear>(h, 1, rng));
    ln_gamma = register_parameter("ln.gamma", go::Tensor::ones(go::Shape{h}));
    ln_beta = register_parameter("ln.beta", go::Tensor::zeros(go::Shape{h}));
  }

  go::Variable sage(const go::nn::Linear& layer, const go::Variable& h, const SyntheticGraph& g) const {
    using go::kernels::Reduce;
    go::Variable up = go::aggregate(h, g.preds, Reduce::max);
    go::Variable down = go::aggregate(h, g.succs, Reduce::max);
    return go::relu(layer.forward(go::concat({h, up, down}, 1)));
  }

  go::Variable forward(const SyntheticGraph& g) const {
    go::Variable h = go::relu(embed->forward(go::Variable(g.features)));
    h = sage(*sage1, h, g);
    h = sage(*sage2, h, g);
    go::kernels::SegAttention p;
    p.heads = 4;
    p.head_dim = static_cast<std::int32_t>(hidden / 4);
    p.seg_len = 128;
    p.mem_len = 128;
    go::Variable a = go::seg_attention(q->forward(h), k->forward(h), v->forward(h), p);
    h = go::layer_norm(h + proj->forward(a), ln_gamma, ln_beta);
    return head->forward(h);
  }
};

int run_demo(const DemoOptions& o) {
  go::Rng rng(o.seed);
  const auto t0 = std::chrono::steady_clock::now();
  SyntheticGraph g = make_graph(o.nodes, rng);
  DemoNet net(o.hidden, rng);
  go::Adam opt(net.parameters(), {.lr = o.lr});
  double var = 0, mean = 0;
  for (std::int64_t i = 0; i < o.nodes; ++i) mean += g.target.f32()[i];
  mean /= static_cast<double>(o.nodes);
  for (std::int64_t i = 0; i < o.nodes; ++i) var += std::pow(g.target.f32()[i] - mean, 2);
  var /= static_cast<double>(o.nodes);

  std::printf("go %s demo: a synthetic op graph of %lld nodes and %lld edges; %s\n", GO_VERSION_STRING,
              static_cast<long long>(o.nodes), static_cast<long long>(g.preds.nnz()), go::cuda_describe().c_str());
  std::printf("model: embedding, 2 GraphSAGE layers (max over predecessors and successors), segment attention "
              "(4 heads, segments of 128 with 128 cached rows), layer norm, head; %lld parameters; %d OpenMP threads\n",
              static_cast<long long>(net.num_parameters()), omp_get_max_threads());
  std::printf("task: regress each node's normalized longest-path depth (variance %.4f); Adam lr %.0e\n\n", var, o.lr);
  std::printf("%6s %12s %10s\n", "step", "mse", "ms/step");
  float first = 0, last = 0;
  double total_ms = 0;
  for (int step = 1; step <= o.steps; ++step) {
    const auto s0 = std::chrono::steady_clock::now();
    opt.zero_grad();
    go::Variable loss = go::mean(go::square(net.forward(g) - go::Variable(g.target)));
    loss.backward();
    go::clip_grad_norm(opt.params(), 1.f);
    opt.step();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s0).count();
    total_ms += ms;
    last = loss.item();
    if (step == 1) first = last;
    if (step == 1 || step % 10 == 0 || step == o.steps) std::printf("%6d %12.5f %10.1f\n", step, last, ms);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("\nmse %.5f -> %.5f (R^2 %.3f against the mean predictor), %.1f ms per forward+backward+Adam step, "
              "%.1f s in all\n",
              first, last, 1.0 - last / var, total_ms / o.steps, secs);
  if (last < first) return 0;
  std::fprintf(stderr, "gopt demo: the loss did not fall in %d step(s) (mse %.5f -> %.5f)\n", o.steps, first, last);
  return 1;
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto opts = std::make_shared<DemoOptions>();
  CLI::App* cmd = app.add_subcommand(
      "demo", "Train a small GraphSAGE + segment-attention network on a synthetic op graph (shows the core works)");
  cmd->add_option("--nodes", opts->nodes, "Nodes in the synthetic graph")->check(CLI::Range(2, 10000000))->capture_default_str();
  cmd->add_option("--hidden", opts->hidden, "Hidden size (a multiple of 4)")
      ->check(CLI::Range(4, 4096))
      ->check([](const std::string& s) { return std::stoll(s) % 4 == 0 ? "" : "must be a multiple of 4"; })
      ->capture_default_str();
  cmd->add_option("--steps", opts->steps, "Training steps (at least 2: the loss must fall from the first)")->check(CLI::Range(2, 1000000))->capture_default_str();
  cmd->add_option("--seed", opts->seed, "Random seed (graph, initialization)")->check(seed_value())->capture_default_str();
  cmd->add_option("--lr", opts->lr, "Adam learning rate")
      ->check(CLI::PositiveNumber)
      ->check(CLI::Validator(
          [](std::string& s) { return std::isfinite(std::stod(s)) ? std::string() : "must be a finite number, got " + s; },
          "FINITE"))
      ->capture_default_str();
  cmd->callback([opts]() {
    const int rc = run_demo(*opts);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace gopt
